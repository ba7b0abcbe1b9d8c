"""`fabrikit sites init`: a draft profile from what `runner.site_probe` found on this machine.

Every value carries the probe that found it; what the probe cannot decide (the account, where
images live) is a TODO. The preset follows the fabric: CXI devices, `hsn*` interfaces or the
`cxi` libfabric provider mean Slingshot; active InfiniBand ports mean InfiniBand; otherwise
Ethernet. Facts behind the choices are cited from shared/reference/fabric-facts.md.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import NamedTuple

from . import fabrics
from .profile_writer import Draft
from .site_probe import Findings, Partition, gpu_vendor

# The (definition in containers/, Build.flavour) for NVIDIA GPUs comes with the fabric kind
# (runner.fabrics); AMD GPUs take the ROCm image whatever the fabric.
ROCM_FLAVOUR = ("rocm.def", "rocm")
# Base image tags a draft pins: the definitions' own %arguments defaults, as the bundled sites.
NGC_TAG = "25.06-py3"
ROCM_PYTORCH_TAG = "rocm6.4.1_ubuntu24.04_py3.12_pytorch_release_2.7.1"


class InitResult(NamedTuple):
    name: str
    text: str
    preset: str
    found: list[str]  # one line per fact, for the summary
    todo: list[str]


def draft_profile(name: str, f: Findings, image_dir: Path) -> InitResult:
    d = Draft([])
    found: list[str] = []
    todo: list[str] = []
    preset, evidence = _preset(f)
    d.set(("extends",), preset, evidence)
    found.append(f"fabric: {preset} ({evidence})")
    part = _partition(f)
    vendor, count, model, gpu_source = _gpu(f, part)
    arch, arch_source = _arch(f, part)
    gh200 = vendor == "nvidia" and (arch == "aarch64" or "gh200" in (model or "").lower())
    gpu_text = f"{count}x {model or vendor.upper() + ' GPU'} per node" if vendor and count else "no GPUs found"
    fabric_text = fabrics.get(preset).title
    d.set(("description",), f"{name}: {gpu_text}, {fabric_text} (drafted by fabrikit sites init)")

    # -- scheduler
    if part is not None:
        others = [x.name for x in f.partitions if x.name != part.name and x.gpus]
        note = f"{f.slurm_source}: " + (f"GPU partition, GRES {part.gres}, {part.nodes} nodes" if part.gpus
                                        else f"{'default ' if part.default else ''}partition, no GPU GRES")
        if others:
            note += f" (other GPU partitions: {', '.join(others)})"
        d.set(("scheduler", "partition"), part.name, note)
        found.append(f"partition: {part.name} ({note})")
    elif f.slurm_source is None:
        d.todo(("scheduler", "partition"), "sinfo not found or failed: is this a Slurm login node?")
        todo.append("scheduler.partition: no Slurm here")
    d.todo(("scheduler", "account"), "the project to charge (sacctmgr -nP show assoc user=$USER format=account), "
           "or pass --account", "myproject")
    todo.append("scheduler.account")
    d.set(("scheduler", "gpus_per_node"), count if vendor else 0, gpu_source)
    if part is not None and part.cpus:
        d.set(("scheduler", "cpus_per_task"), part.cpus, f"{f.slurm_source}: CPUs per node (one task per node)")
    if part is not None and part.mem_mb:
        d.set(("scheduler", "mem"), f"{part.mem_mb}M", f"{f.slurm_source}: memory per node (smallest node)")
    if part is not None and part.timelimit:
        d.set(("scheduler", "time"), "01:00:00", f"fabrikit's default; partition {part.name} allows {part.timelimit}")

    # -- container
    if f.runtime is not None:
        runtime, version = f.runtime.value
        d.set(("container", "runtime"), runtime, f"{f.runtime.source}: {version}")
        found.append(f"container runtime: {version}")
    else:
        d.set(("container", "runtime"), "apptainer", "TODO: neither apptainer nor singularity is on PATH "
              "(module load apptainer?)")
        todo.append("container.runtime: no apptainer/singularity on PATH")
    template, flavour = ROCM_FLAVOUR if vendor == "amd" else fabrics.get(preset).image
    image = image_dir / f"{name}-pytorch-{flavour}.sif"
    d.set(("container", "image"), str(image), "TODO: where `build-image` writes the image (a placeholder here: "
          "choose a project or scratch directory)")
    todo.append("container.image: a placeholder path")
    d.set(("container", "gpu_flag"), {"nvidia": "--nv", "amd": "--rocm"}.get(vendor or "", "none"),
          gpu_source if vendor else "no GPUs found")
    d.set(("container", "arch"), arch, arch_source)
    if vendor == "amd":
        note = "AMD GPUs: ROCm PyTorch + RCCL with the libfabric net plugin (containers/rocm.def)"
        if preset != "slingshot":
            note += (f"; rocm.def targets Slingshot: on {fabric_text} its plugin finds no host libfabric and RCCL "
                     "should use its own transport (confirm with `fabrikit check-log`)")
        d.set(("container", "build", "template"), template, note)
        d.set(("container", "build", "flavour"), flavour)
        d.set(("container", "build", "args", "ROCM_PYTORCH_TAG"), ROCM_PYTORCH_TAG, "rocm/pytorch tag (as "
              "bindings/lumi.yaml): check that the node's GPU driver supports its ROCm version", quote=True)
    else:
        d.set(("container", "build", "template"), template, f"fabrikit's {flavour} definition (containers/)")
        d.set(("container", "build", "flavour"), flavour)
        d.set(("container", "build", "args", "NGC_TAG"), NGC_TAG, "NGC PyTorch 25.06 (as the bundled sites; "
              "arm64 manifest exists)", quote=True)
    if preset == "slingshot" and f.cray_libfabric is not None:
        d.set(("container", "build", "args", "LIBFABRIC_VERSION"), f.cray_libfabric.value[0],
              f"{f.cray_libfabric.source}: build aws-ofi-nccl against the host's libfabric line", quote=True)
    d.set(("container", "build", "options"), ["--fakeroot"], "unprivileged %post needs --fakeroot")

    # -- host libraries (Slingshot: host libfabric with the cxi provider, libcxi)
    if preset == "slingshot":
        _slingshot_libraries(d, f, found, todo)
        if vendor == "amd":  # instead of the preset's /opt/aws-ofi-nccl/lib (NVIDIA images)
            d.append(("library_path",), "/opt/aws-ofi-rccl/lib", "the RCCL net plugin built into the image "
                     "(containers/rocm.def)")
    elif f.system_libfabric is not None:
        found.append(f"libfabric: {f.system_libfabric.value} (not bound: {preset} needs no host libfabric)")

    # -- environment and rendezvous interface
    interfaces = f.interfaces.value
    fabric_ifaces = [x for x in interfaces if fabrics.by_interface(x) is fabrics.get(preset)]  # hsn*, ib*
    if preset == "slingshot":
        hsn = [x for x in fabric_ifaces if "." not in x]
        if hsn:
            d.set(("env", "NCCL_SOCKET_IFNAME"), ",".join(hsn), f"{f.interfaces.source}: {' '.join(hsn)}", quote=True)
            d.set(("launcher", "head_interface"), hsn[0], f"{f.interfaces.source}: rendezvous over the Slingshot NIC")
        if f.fi_providers and "cxi" in f.fi_providers.value:
            d.set(("env", "FI_PROVIDER"), "cxi", f"{f.fi_providers.source}: cxi provider available", quote=True)
        if gh200:
            d.set(("env", "NCCL_PROTO"), "^LL128", "GH200 guard: NCCL >= 2.27 returns wrong all-reduce results "
                  "over Slingshot with LL128 (NVIDIA/nccl#2001; fabric-facts.md)", quote=True)
    elif preset == "infiniband":
        ib = f.infiniband.value if f.infiniband else []
        active = [dev.name for dev in ib if dev.active_ports and dev.link_layer == "InfiniBand"]
        if active:
            d.set(("env", "NCCL_IB_HCA"), ",".join(active), f"{f.infiniband.source}: active InfiniBand ports",
                  quote=True)
        ipoib = fabric_ifaces
        if ipoib:
            d.set(("env", "NCCL_SOCKET_IFNAME"), ipoib[0], f"{f.interfaces.source}: IPoIB interface", quote=True)
            d.set(("env", "GLOO_SOCKET_IFNAME"), ipoib[0], f"{f.interfaces.source}: IPoIB interface", quote=True)
            d.set(("launcher", "head_interface"), ipoib[0], f"{f.interfaces.source}: rendezvous over IPoIB")
    else:
        iface = f.default_interface
        if iface is not None:
            d.set(("env", "NCCL_SOCKET_IFNAME"), iface.value, iface.source, quote=True)
            d.set(("env", "GLOO_SOCKET_IFNAME"), iface.value, iface.source, quote=True)
            d.set(("launcher", "head_interface"), iface.value, iface.source)
        else:
            d.todo(("launcher", "head_interface"), "no default route found: name the interface nodes reach "
                   "each other on")
            todo.append("launcher.head_interface")
    if vendor is None or count == 0:
        d.set(("launcher", "nproc_per_node"), 1, "no GPUs: CPU ranks per node (raise for more processes)")

    for fact, label in ((f.arch, "architecture"), (f.glibc, "host glibc"), (f.fi_providers, "libfabric providers"),
                        (f.libfabric_version, "libfabric"), (f.nccl_plugins, "NCCL net plugins"), (f.cxi, "CXI"),
                        (f.infiniband, "InfiniBand")):
        if fact is not None:
            value = fact.value if not isinstance(fact.value, list) else " ".join(
                x.name if hasattr(x, "name") else str(x) for x in fact.value)
            found.append(f"{label}: {value} ({fact.source})")
    d.header = _header(name, f, found, todo)
    return InitResult(name, d.render(), preset, found, todo)


def _header(name: str, f: Findings, found: list[str], todo: list[str]) -> list[str]:
    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    lines = [f"Site '{name}': drafted by `fabrikit sites init` on {f.host} ({when}).",
             "Each value says where the probe found it; `# TODO` marks what it could not decide.",
             "Found:"]
    lines += [f"  {line}" for line in found]
    if f.glibc is not None:
        lines.append(f"  (the image's glibc must be at least what bound host libraries need: host has "
                     f"{f.glibc.value}; `fabrikit doctor` checks)")
    lines += ["Check it with:", f"  fabrikit doctor --profile {name}.yaml",
              f"  run-multinode --profile {name}.yaml --nodes 2 --dry-run"]
    return lines


def _preset(f: Findings) -> tuple[str, str]:
    slingshot, infiniband = fabrics.get("slingshot"), fabrics.get("infiniband")
    hsn = [x for x in f.interfaces.value if fabrics.by_interface(x) is slingshot]
    evidence = []
    if f.cxi:
        evidence.append(f"{f.cxi.source}: {' '.join(f.cxi.value)}")
    if hsn:
        evidence.append(f"{f.interfaces.source}: {' '.join(hsn)}")
    cxi = [p for p in (f.fi_providers.value if f.fi_providers else []) if fabrics.by_provider(p) is slingshot]
    if cxi:
        evidence.append(f"{f.fi_providers.source}: {cxi[0]} provider")
    if evidence:
        return slingshot.name, "; ".join(evidence)
    ib = [dev for dev in (f.infiniband.value if f.infiniband else []) if dev.link_layer == "InfiniBand"]
    ipoib = [x for x in f.interfaces.value if fabrics.by_interface(x) is infiniband]
    if ib or ipoib:
        parts = []
        if ib:
            parts.append(f"{f.infiniband.source}: " + " ".join(
                f"{dev.name}({'ACTIVE' if dev.active_ports else 'down'})" for dev in ib))
        if ipoib:
            parts.append(f"{f.interfaces.source}: {' '.join(ipoib)}")
        return infiniband.name, "; ".join(parts)
    return "ethernet", "no /sys/class/cxi, no hsn*/ib* interface, no InfiniBand device: TCP sockets"


def _partition(f: Findings) -> Partition | None:
    with_gpus = [x for x in f.partitions if x.gpus]
    if with_gpus:
        return sorted(with_gpus, key=lambda x: (not x.default, -x.nodes))[0]
    defaults = [x for x in f.partitions if x.default]
    return defaults[0] if defaults else (f.partitions[0] if f.partitions else None)


def _gpu(f: Findings, part: Partition | None) -> tuple[str | None, int, str | None, str]:
    if part is not None and part.gpus:
        vendor = gpu_vendor(part.gpu_type)
        local = f.gpus.value if f.gpus and f.gpus.source != f"sinfo GRES {part.gres} (partition {part.name})" else None
        if vendor is None and local is not None:
            vendor = local[0]
        model = local[2] if local and local[2] else part.gpu_type
        return vendor or "nvidia", part.gpus, model, f"{f.slurm_source}: GRES {part.gres} in partition {part.name}" + (
            "" if gpu_vendor(part.gpu_type) else f" (vendor from {f.gpus.source})" if local else
            " (vendor unknown: assumed NVIDIA)")
    if f.gpus is not None:
        vendor, count, model = f.gpus.value
        return vendor, count, model, f.gpus.source
    return None, 0, None, "no GPU GRES (sinfo), no nvidia-smi GPUs, no GPU in /sys/class/drm"


def _arch(f: Findings, part: Partition | None) -> tuple[str, str]:
    if part is not None and part.arch in ("x86_64", "aarch64"):
        return part.arch, f"scontrol show node: Arch={part.arch} in partition {part.name}"
    if f.arch is not None and f.arch.value in ("x86_64", "aarch64"):
        return f.arch.value, f.arch.source + (" (this node; check the compute nodes)" if part is not None else "")
    return "x86_64", "TODO: architecture unknown, assumed x86_64"


def _slingshot_libraries(d: Draft, f: Findings, found: list[str], todo: list[str]) -> None:
    if f.cray_libfabric is not None:
        version, lib_dir = f.cray_libfabric.value
        d.append(("binds",), {"source": lib_dir, "target": "/opt/libfabric/lib"},
                 f"{f.cray_libfabric.source}: host libfabric {version} with the cxi provider (as Olivia's guide)")
        d.append(("library_path",), "/opt/libfabric/lib", "host libfabric first")
        found.append(f"libfabric: {lib_dir} ({f.cray_libfabric.source})")
        names = []
    elif f.system_libfabric is not None:
        names = ["libfabric.so.1"]
        found.append(f"libfabric: {f.system_libfabric.value} ({f.system_libfabric.source})")
    else:
        names = []
        d.todo(("binds",), "no host libfabric found (/opt/cray/libfabric/*/lib64, /usr/lib64): bind the one "
               "with the cxi provider")
        todo.append("binds: host libfabric not found")
    search: list[str] = []
    if f.libcxi is not None:
        names.append("libcxi.so.1")
        search.append(str(Path(f.libcxi.value).parent))
        found.append(f"libcxi: {f.libcxi.value}")
    else:
        d.todo(("host_libraries", "names"), "libcxi.so.1 not found in /usr/lib64: name its directory in "
               "search_path", ["libcxi.so.1"])
        todo.append("host_libraries: libcxi not found")
    if f.system_libfabric is not None and "libfabric.so.1" in names:
        search.insert(0, str(Path(f.system_libfabric.value).parent))
    if names:
        d.set(("host_libraries", "names"), names, "bound file by file with their dependency closure "
              "(never the whole /usr/lib64: fabric-facts.md failure 5)")
        d.set(("host_libraries", "search_path"), list(dict.fromkeys(search)), "where the probe found them")
    if f.nccl_plugins is not None:
        d.todo(("binds",), f"host NCCL net plugins found: {', '.join(f.nccl_plugins.value)}; the image builds "
               "its own aws-ofi-nccl (containers/slingshot.def). To use the host's, bind its directory and put "
               "it first on library_path")
