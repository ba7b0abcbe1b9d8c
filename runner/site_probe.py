"""Probe the machine fabrikit runs on for what a site profile needs, each fact with where it
was found: Slurm partitions with GPUs (sinfo, scontrol), the fabric (/sys/class/cxi,
/sys/class/infiniband, hsn*/ib* interfaces, `fi_info` providers), host libfabric and libcxi,
NCCL net plugins, GPUs, architecture, glibc and the container runtime.

Everything is read through a root prefix (`/` normally) and commands are found on the given
PATH, so the same code probes a mounted node image or a prepared directory tree with canned
command stand-ins (the tests' double for a Slingshot GH200 and an InfiniBand A100 node).
Commands that are missing, fail or hang count as "not found", never as an error: a login node
lacks nvidia-smi, a laptop lacks sinfo.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, NamedTuple

_KV = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=(.*?)(?=\s[A-Za-z][A-Za-z0-9_:/]*=|$)")
COMMAND_TIMEOUT_S = 20


class Fact(NamedTuple):
    value: Any
    source: str


class Partition(NamedTuple):
    name: str
    default: bool
    gres: str
    gpus: int
    gpu_type: str | None
    cpus: int | None
    mem_mb: int | None
    nodes: int
    timelimit: str
    arch: str | None


class IbDevice(NamedTuple):
    name: str
    active_ports: tuple[str, ...]
    link_layer: str


class Findings(NamedTuple):
    host: str
    arch: Fact | None
    glibc: Fact | None
    runtime: Fact | None  # (name, version text)
    partitions: tuple[Partition, ...]
    slurm_source: str | None
    cxi: Fact | None  # device names
    infiniband: Fact | None  # IbDevice list
    interfaces: Fact  # all network interface names
    default_interface: Fact | None
    fi_providers: Fact | None
    libfabric_version: Fact | None
    cray_libfabric: Fact | None  # (version, lib dir)
    system_libfabric: Fact | None  # path
    libcxi: Fact | None  # path
    nccl_plugins: Fact | None  # paths
    gpus: Fact | None  # (vendor, count, model)


class _Prober:
    def __init__(self, root: Path, environ: dict[str, str]) -> None:
        self.root = root
        self.environ = environ
        self.path = environ.get("PATH", os.defpath)

    def file(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def shown(self, path: Path) -> str:
        """A path as it is on the probed machine (the root prefix removed)."""
        try:
            return "/" + str(path.relative_to(self.root)).lstrip("/") if self.root != Path("/") else str(path)
        except ValueError:
            return str(path)

    def glob(self, pattern: str) -> list[Path]:
        return sorted(Path(p) for p in glob.glob(str(self.file(pattern))))

    def read(self, path: str) -> str | None:
        try:
            return self.file(path).read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            return None

    def run(self, *argv: str) -> str | None:
        exe = shutil.which(argv[0], path=self.path)
        if exe is None:
            return None
        try:
            result = subprocess.run([exe, *argv[1:]], capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S,
                                    env=self.environ, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return result.stdout if result.returncode == 0 else None


def probe(root: Path = Path("/"), environ: dict[str, str] | None = None) -> Findings:
    """Everything `fabrikit sites init` needs to know about this machine."""
    p = _Prober(root, dict(os.environ if environ is None else environ))
    partitions, slurm_source = _partitions(p)
    return Findings(
        host=(p.read("/etc/hostname") or os.uname().nodename) if root != Path("/") else os.uname().nodename,
        arch=_arch(p),
        glibc=_glibc(p),
        runtime=_runtime(p),
        partitions=partitions,
        slurm_source=slurm_source,
        cxi=_cxi(p),
        infiniband=_infiniband(p),
        interfaces=Fact(sorted(x.name for x in p.glob("/sys/class/net/*")), "/sys/class/net"),
        default_interface=_default_interface(p),
        fi_providers=_fi_providers(p),
        libfabric_version=_fi_version(p),
        cray_libfabric=_cray_libfabric(p),
        system_libfabric=_first(p, ["/usr/lib64/libfabric.so.1", "/usr/lib/*-linux-gnu/libfabric.so.1",
                                    "/lib/*-linux-gnu/libfabric.so.1"]),
        libcxi=_first(p, ["/usr/lib64/libcxi.so.1", "/usr/lib/*-linux-gnu/libcxi.so.1", "/opt/cray/lib64/libcxi.so.1"]),
        nccl_plugins=_nccl_plugins(p),
        gpus=_gpus(p, partitions),
    )


def _arch(p: _Prober) -> Fact | None:
    out = p.run("uname", "-m")
    return Fact(out.strip(), "uname -m") if out and out.strip() else None


def _glibc(p: _Prober) -> Fact | None:
    out = p.run("ldd", "--version")
    if out:
        match = re.search(r"(\d+\.\d+)\s*$", out.splitlines()[0])
        if match:
            return Fact(match.group(1), "ldd --version")
    return None


def _runtime(p: _Prober) -> Fact | None:
    from .apptainer import parse_version

    for name in ("apptainer", "singularity"):
        out = p.run(name, "--version")
        if out:
            parsed = parse_version(out)
            version = ".".join(map(str, parsed[1])) if parsed else out.strip()
            product = parsed[0] if parsed else name
            return Fact((name, f"{product} {version}"), f"{name} --version")
    return None


def _partitions(p: _Prober) -> tuple[tuple[Partition, ...], str | None]:
    out = p.run("sinfo", "-h", "-o", "%P|%G|%c|%m|%D|%l")
    if out is None:
        return (), None
    archs = _node_archs(p)
    merged: dict[str, Partition] = {}
    for line in out.splitlines():
        fields = line.strip().split("|")
        if len(fields) < 6 or not fields[0]:
            continue
        name = fields[0].rstrip("*")
        gpus, gpu_type = _gres_gpus(fields[1])
        cpus = _int(fields[2])
        mem = _int(fields[3])
        nodes = _int(fields[4]) or 0
        old = merged.get(name)
        part = Partition(name, fields[0].endswith("*"), fields[1], gpus, gpu_type, cpus, mem, nodes, fields[5],
                         archs.get(name))
        if old is not None:  # node groups of one partition: keep the smallest node, count all
            part = part._replace(
                gpus=min(old.gpus, gpus) if old.gpus and gpus else max(old.gpus, gpus),
                cpus=min(x for x in (old.cpus, cpus) if x) if (old.cpus or cpus) else None,
                mem_mb=min(x for x in (old.mem_mb, mem) if x) if (old.mem_mb or mem) else None,
                nodes=old.nodes + nodes, gres=old.gres if old.gpus else part.gres,
                gpu_type=old.gpu_type or gpu_type)
        merged[name] = part
    return tuple(merged.values()), "sinfo -o '%P|%G|%c|%m|%D|%l'"


def _node_archs(p: _Prober) -> dict[str, str]:
    out = p.run("scontrol", "show", "node", "-o")
    archs: dict[str, str] = {}
    for line in (out or "").splitlines():
        record = {m.group(1): m.group(2).strip() for m in _KV.finditer(line.strip())}
        arch = record.get("Arch")
        for partition in (record.get("Partitions") or "").split(","):
            if arch and partition:
                archs.setdefault(partition, arch)
    return archs


def _gres_gpus(gres: str) -> tuple[int, str | None]:
    for item in re.split(r",(?![^(]*\))", gres):
        match = re.match(r"gpu(?::([A-Za-z][\w.-]*))?(?::(\d+))?", item.strip())
        if match:
            return int(match.group(2) or 1), match.group(1)
    return 0, None


def _int(text: str) -> int | None:
    match = re.match(r"\d+", text.strip())
    return int(match.group(0)) if match else None


def _cxi(p: _Prober) -> Fact | None:
    devices = [x.name for x in p.glob("/sys/class/cxi/*")]
    return Fact(devices, "/sys/class/cxi") if devices else None


def _infiniband(p: _Prober) -> Fact | None:
    devices = []
    for dev in p.glob("/sys/class/infiniband/*"):
        active, layer = [], ""
        for port in sorted((dev / "ports").glob("*")):
            state = (port / "state").read_text(errors="replace") if (port / "state").is_file() else ""
            layer = (port / "link_layer").read_text(errors="replace").strip() if (port / "link_layer").is_file() else layer
            if "ACTIVE" in state:
                active.append(port.name)
        devices.append(IbDevice(dev.name, tuple(active), layer))
    return Fact(devices, "/sys/class/infiniband") if devices else None


def _default_interface(p: _Prober) -> Fact | None:
    text = p.read("/proc/net/route") or ""
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) > 1 and fields[1] == "00000000":
            return Fact(fields[0], "/proc/net/route (default route)")
    return None


def _fi_providers(p: _Prober) -> Fact | None:
    out = p.run("fi_info")
    if out is None:
        return None
    providers = []
    for match in re.finditer(r"^\s*provider:\s*(\S+)", out, re.M):
        core = match.group(1).split(";")[0]
        if core not in providers:
            providers.append(core)
    return Fact(providers, "fi_info") if providers else None


def _fi_version(p: _Prober) -> Fact | None:
    out = p.run("fi_info", "--version")
    match = re.search(r"libfabric:\s*(\S+)", out or "")
    return Fact(match.group(1), "fi_info --version") if match else None


def _version_key(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text))


def _cray_libfabric(p: _Prober) -> Fact | None:
    found = [lib.parent for lib in p.glob("/opt/cray/libfabric/*/lib64/libfabric.so*")]
    if not found:
        return None
    newest = max(set(found), key=lambda d: _version_key(d.parent.name))
    others = sorted({d.parent.name for d in found} - {newest.parent.name})
    note = f"/opt/cray/libfabric/*/lib64 (newest of {', '.join([newest.parent.name, *others])})" if others \
        else "/opt/cray/libfabric/*/lib64"
    return Fact((newest.parent.name, p.shown(newest)), note)


def _first(p: _Prober, patterns: list[str]) -> Fact | None:
    for pattern in patterns:
        hits = p.glob(pattern)
        if hits:
            return Fact(p.shown(hits[0]), pattern)
    return None


def _nccl_plugins(p: _Prober) -> Fact | None:
    patterns = ["/usr/lib64", "/usr/lib/*-linux-gnu", "/opt/*/lib", "/opt/*/lib64", "/opt/*/*/lib", "/opt/*/*/lib64",
                "/opt/*/*/*/lib", "/opt/*/*/*/lib64"]
    extra = [d for d in p.environ.get("LD_LIBRARY_PATH", "").split(":") if d.startswith("/")]
    found: list[str] = []
    for pattern in [*patterns, *extra]:
        for hit in p.glob(f"{pattern}/libnccl-net*.so*"):
            shown = p.shown(hit)
            if shown not in found:
                found.append(shown)
    return Fact(found, "libnccl-net*.so in /usr/lib*, /opt/*/lib* and $LD_LIBRARY_PATH") if found else None


def _gpus(p: _Prober, partitions: tuple[Partition, ...]) -> Fact | None:
    out = p.run("nvidia-smi", "-L")
    if out:
        lines = [x for x in out.splitlines() if x.startswith("GPU ")]
        if lines:
            model = re.sub(r"^GPU \d+:\s*|\s*\(UUID.*$", "", lines[0])
            return Fact(("nvidia", len(lines), model), "nvidia-smi -L")
    vendors: dict[str, int] = {}
    for card in p.glob("/sys/class/drm/card[0-9]*/device/vendor"):
        vendor = {"0x10de": "nvidia", "0x1002": "amd"}.get(card.read_text(errors="replace").strip())
        if vendor:
            vendors[vendor] = vendors.get(vendor, 0) + 1
    if vendors:
        vendor, count = max(vendors.items(), key=lambda kv: kv[1])
        return Fact((vendor, count, None), "/sys/class/drm/card*/device/vendor")
    with_gpus = [x for x in partitions if x.gpus]
    if with_gpus:
        part = with_gpus[0]
        vendor = gpu_vendor(part.gpu_type)
        return Fact((vendor, part.gpus, part.gpu_type), f"sinfo GRES {part.gres} (partition {part.name})")
    return None


def gpu_vendor(gpu_type: str | None) -> str | None:
    """NVIDIA or AMD from a GRES type name (a100, gh200, mi250x ...); None if unknown."""
    low = (gpu_type or "").lower()
    if low.startswith(("mi", "amd", "instinct")):
        return "amd"
    if re.match(r"(a\d|h\d|gh|v1|l4|b\d|t4|p1|rtx|tesla|nvidia|quadro)", low):
        return "nvidia"
    return None
