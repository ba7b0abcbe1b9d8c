"""`fabrikit sites init`: the real probe of this machine (libfabric, fi_info, interfaces,
apptainer) and of the real test Slurm cluster, and beside them a named test double: prepared
directory trees with canned command stand-ins for a Slingshot GH200 node and an InfiniBand
A100 login node, probed through `--root` and PATH. Every draft must load through the strict
profile loader, render a batch script run-multinode accepts, and pass shellcheck.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from runner.profile_loader import load_profile
from tests.helpers import ROOT, cli, one_line_error


def init(tmp_path: Path, name: str, *extra: str, env: dict[str, str] | None = None) -> tuple[Path, dict]:
    out = tmp_path / f"{name}.yaml"
    result = cli("sites", "init", name, "-o", str(out), "--json", *extra, prog="fabrikit", env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return out, json.loads(result.stdout)


def renders_and_passes_shellcheck(profile: Path, tmp_path: Path) -> str:
    result = cli("--profile", str(profile), "--nodes", "2", "--dry-run", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    if shutil.which("shellcheck"):
        path = tmp_path / "job.sbatch"
        path.write_text(result.stdout)
        check = subprocess.run(["shellcheck", "-s", "bash", str(path)], capture_output=True, text=True)
        assert check.returncode == 0, check.stdout
    return result.stdout


# ---- the real machine -------------------------------------------------------------------
def _default_route() -> str | None:
    for line in Path("/proc/net/route").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1] == "00000000":
            return fields[0]
    return None


@pytest.mark.skipif(shutil.which("fi_info") is None, reason="fi_info not installed (apt-get install libfabric-bin)")
def test_init_on_this_machine(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "SLURM_CONF"}
    profile, report = init(tmp_path, "thishost", env=env)
    loaded = load_profile(str(profile), is_path=True)
    p = loaded.profile
    text = profile.read_text()
    # what the probe reports is what the machine's own tools say
    fi = subprocess.run(["fi_info"], capture_output=True, text=True).stdout
    providers = {m.split(";")[0] for m in re.findall(r"provider:\s*(\S+)", fi)}
    listed = next(line for line in report["found"] if line.startswith("libfabric providers:"))
    assert set(listed.split(":", 1)[1].split("(")[0].split()) == providers
    version = subprocess.run(["fi_info", "--version"], capture_output=True, text=True).stdout
    assert any(re.search(r"libfabric:\s*(\S+)", version).group(1) in line for line in report["found"])
    assert f"host glibc: {os.confstr('CS_GNU_LIBC_VERSION').split()[-1]}" in "\n".join(report["found"])
    has_fabric = any(Path("/sys/class", c).is_dir() and any(Path("/sys/class", c).iterdir())
                     for c in ("cxi", "infiniband"))
    if not has_fabric and not [i for i in os.listdir("/sys/class/net") if i.startswith(("hsn", "ib"))]:
        assert report["preset"] == "ethernet" and loaded.chain[0].name == "ethernet.yaml"
        iface = _default_route()
        if iface:
            assert p.env["NCCL_SOCKET_IFNAME"] == iface and p.launcher.head_interface == iface
    if shutil.which("apptainer"):
        out = subprocess.run(["apptainer", "--version"], capture_output=True, text=True).stdout.split()[-1]
        assert p.container.runtime == "apptainer" and out in text
    assert p.container.arch == os.uname().machine
    assert "# TODO" in text and any("account" in t for t in report["todo"])
    # every value line carries a comment saying where it came from
    values = [line for line in text.splitlines() if re.match(r"\s*[a-z_]+: \S", line) and "description" not in line]
    assert all("  # " in line for line in values if not line.strip().startswith(("flavour:",))), values
    renders_and_passes_shellcheck(profile, tmp_path)
    doctor = cli("doctor", "--profile", str(profile), "--json", prog="fabrikit")
    checks = {c["name"]: c["status"] for c in json.loads(doctor.stdout)["checks"]}
    assert doctor.returncode == 1 and checks["image"] == "FAIL"  # the one thing left: build the image


def test_init_on_the_real_test_cluster(slurm_cluster, tmp_path: Path) -> None:
    profile, report = init(tmp_path, "testcluster", env=slurm_cluster.env)
    p = load_profile(str(profile), is_path=True).profile
    assert p.scheduler.partition == slurm_cluster.partition
    assert p.scheduler.cpus_per_task == slurm_cluster.cpus_per_node
    assert p.scheduler.mem == f"{slurm_cluster.settings.mem_mb}M"
    assert p.scheduler.gpus_per_node == 0 and p.launcher.nproc_per_node == 1
    assert p.container.arch == "x86_64"  # scontrol show node: Arch of the slurmd nodes
    assert "scontrol show node: Arch=x86_64" in profile.read_text()
    batch = renders_and_passes_shellcheck(profile, tmp_path)
    assert f"#SBATCH --partition={slurm_cluster.partition}" in batch
    assert f"#SBATCH --cpus-per-task={slurm_cluster.cpus_per_node}" in batch
    # sbatch itself accepts the drafted settings (--test-only: validated by slurmctld, not run)
    (tmp_path / "job.sbatch").write_text(batch)
    check = slurm_cluster.run(["sbatch", "--test-only", "--nodes=2", str(tmp_path / "job.sbatch")], cwd=tmp_path)
    assert check.returncode == 0, check.stderr


# ---- test double: prepared trees with canned commands (beside the real runs above) --------
def _stand_in(bin_dir: Path, name: str, cases: dict[str, str]) -> None:
    """A command stand-in that prints canned output for exact argument strings."""
    lines = ["#!/bin/sh", 'case "$*" in']
    for args, output in cases.items():
        body = output.replace("'", "'\\''")
        lines.append(f"  '{args}') printf '%s\\n' '{body}' ;;")
    lines += ["  *) exit 1 ;;", "esac"]
    path = bin_dir / name
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o755)


def _tree(root: Path, dirs: list[str], files: dict[str, str]) -> None:
    for d in dirs:
        (root / d.lstrip("/")).mkdir(parents=True, exist_ok=True)
    for f, text in files.items():
        path = root / f.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def slingshot_gh200_node(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """DOUBLE: an HPE Cray EX GH200 compute node (4 GPUs, cxi0-3, hsn0-3, Cray libfabric)."""
    root, bin_dir = tmp_path / "gh200-root", tmp_path / "gh200-bin"
    bin_dir.mkdir(parents=True)
    _tree(root, [f"/sys/class/cxi/cxi{i}" for i in range(4)] + [f"/sys/class/net/hsn{i}" for i in range(4)]
          + ["/sys/class/net/lo", "/sys/class/net/nmn0"],
          {"/opt/cray/libfabric/1.20.1/lib64/libfabric.so.1": "", "/opt/cray/libfabric/1.22.0/lib64/libfabric.so.1": "",
           "/usr/lib64/libcxi.so.1": "", "/opt/cray/pe/lib64/libnccl-net.so": "",
           "/proc/net/route": "Iface\tDestination\tGateway\nnmn0\t00000000\t0102A8C0\n"})
    _stand_in(bin_dir, "sinfo", {"-h -o %P|%G|%c|%m|%D|%l": "accel*|gpu:gh200:4(S:0-3)|288|857000|252|2-00:00:00\n"
                                 "normal|(null)|256|240000|500|7-00:00:00"})
    _stand_in(bin_dir, "scontrol", {"show node -o": "NodeName=gpu-1-1 Arch=aarch64 CPUTot=288 Partitions=accel\n"
                                    "NodeName=c-1-1 Arch=x86_64 CPUTot=256 Partitions=normal"})
    _stand_in(bin_dir, "nvidia-smi", {"-L": "\n".join(f"GPU {i}: NVIDIA GH200 120GB (UUID: GPU-{i})" for i in range(4))})
    _stand_in(bin_dir, "fi_info", {"": "provider: cxi\n    fabric: cxi\nprovider: tcp;ofi_rxm\nprovider: shm",
                                   "--version": "fi_info: 1.22.0\nlibfabric: 1.22.0\nlibfabric api: 1.22"})
    _stand_in(bin_dir, "uname", {"-m": "aarch64"})
    _stand_in(bin_dir, "ldd", {"--version": "ldd (GNU libc) 2.38"})
    _stand_in(bin_dir, "apptainer", {"--version": "apptainer version 1.3.6-1.el9"})
    return root, {"PATH": str(bin_dir), "HOME": str(tmp_path)}


def infiniband_a100_login(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """DOUBLE: an A100 InfiniBand cluster's login node (no GPUs of its own; GRES in sinfo)."""
    root, bin_dir = tmp_path / "ib-root", tmp_path / "ib-bin"
    bin_dir.mkdir(parents=True)
    _tree(root, ["/sys/class/net/ib0", "/sys/class/net/eno1", "/sys/class/net/lo"],
          {"/sys/class/infiniband/mlx5_0/ports/1/state": "4: ACTIVE", "/sys/class/infiniband/mlx5_0/ports/1/link_layer":
           "InfiniBand", "/sys/class/infiniband/mlx5_1/ports/1/state": "1: DOWN",
           "/sys/class/infiniband/mlx5_1/ports/1/link_layer": "InfiniBand",
           "/sys/class/infiniband/mlx5_2/ports/1/state": "4: ACTIVE",
           "/sys/class/infiniband/mlx5_2/ports/1/link_layer": "Ethernet",
           "/usr/lib64/libfabric.so.1": "",
           "/proc/net/route": "Iface\tDestination\tGateway\neno1\t00000000\t0101A8C0\n"})
    _stand_in(bin_dir, "sinfo", {"-h -o %P|%G|%c|%m|%D|%l": "cpu*|(null)|128|512000|300|3-00:00:00\n"
                                 "a100|gpu:a100:4|64|1000000|40|1-00:00:00\na100|gpu:a100:4|64|500000|24|1-00:00:00"})
    _stand_in(bin_dir, "scontrol", {"show node -o": "NodeName=g001 Arch=x86_64 Partitions=a100"})
    _stand_in(bin_dir, "fi_info", {"": "provider: verbs;ofi_rxm\nprovider: tcp", "--version": "libfabric: 1.18.0"})
    _stand_in(bin_dir, "uname", {"-m": "x86_64"})
    _stand_in(bin_dir, "ldd", {"--version": "ldd (GNU libc) 2.28"})
    _stand_in(bin_dir, "singularity", {"--version": "singularity-ce version 4.1.2"})
    return root, {"PATH": str(bin_dir), "HOME": str(tmp_path)}


def amd_slingshot_node(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """DOUBLE: an HPE Cray EX node with AMD GPUs (LUMI-G style: 8 GCDs seen as DRM cards,
    cxi0-3, hsn0-3, Cray libfabric); no nvidia-smi, no rocm-smi on PATH."""
    root, bin_dir = tmp_path / "amd-root", tmp_path / "amd-bin"
    bin_dir.mkdir(parents=True)
    _tree(root, [f"/sys/class/cxi/cxi{i}" for i in range(4)] + [f"/sys/class/net/hsn{i}" for i in range(4)]
          + ["/sys/class/net/lo", "/sys/class/net/nmn0"],
          {**{f"/sys/class/drm/card{i}/device/vendor": "0x1002\n" for i in range(8)},
           "/opt/cray/libfabric/1.22.0/lib64/libfabric.so.1": "", "/usr/lib64/libcxi.so.1": "",
           "/proc/net/route": "Iface\tDestination\tGateway\nnmn0\t00000000\t0102A8C0\n"})
    _stand_in(bin_dir, "sinfo", {"-h -o %P|%G|%c|%m|%D|%l": "standard-g|gpu:mi250:8|128|491520|2978|2-00:00:00"})
    _stand_in(bin_dir, "scontrol", {"show node -o": "NodeName=nid005000 Arch=x86_64 Partitions=standard-g"})
    _stand_in(bin_dir, "fi_info", {"": "provider: cxi\n    fabric: cxi\nprovider: tcp;ofi_rxm",
                                   "--version": "fi_info: 1.22.0\nlibfabric: 1.22.0\nlibfabric api: 1.22"})
    _stand_in(bin_dir, "uname", {"-m": "x86_64"})
    _stand_in(bin_dir, "ldd", {"--version": "ldd (GNU libc) 2.31"})
    _stand_in(bin_dir, "singularity", {"--version": "singularity-ce version 4.1.3-150500.10.7"})
    return root, {"PATH": str(bin_dir), "HOME": str(tmp_path)}


def test_init_double_slingshot_gh200_node(tmp_path: Path) -> None:
    root, env = slingshot_gh200_node(tmp_path)
    profile, report = init(tmp_path, "gh200", "--root", str(root), env=env)
    loaded = load_profile(str(profile), is_path=True)
    p = loaded.profile
    assert report["preset"] == "slingshot" and loaded.chain[0].name == "slingshot.yaml"
    assert (p.scheduler.partition, p.scheduler.gpus_per_node, p.scheduler.cpus_per_task, p.scheduler.mem) == \
        ("accel", 4, 288, "857000M")
    assert (p.container.runtime, p.container.gpu_flag, p.container.arch) == ("apptainer", "--nv", "aarch64")
    assert p.container.build.template == "slingshot.def"
    assert p.container.build.args["LIBFABRIC_VERSION"] == "1.22.0"  # the newest of 1.20.1 and 1.22.0
    assert {b.source: b.target for b in p.binds} == {"/opt/cray/libfabric/1.22.0/lib64": "/opt/libfabric/lib"}
    assert p.host_libraries.names == ["libcxi.so.1"] and p.host_libraries.search_path == ["/usr/lib64"]
    assert p.env["NCCL_SOCKET_IFNAME"] == "hsn0,hsn1,hsn2,hsn3" and p.launcher.head_interface == "hsn0"
    assert p.env["NCCL_PROTO"] == "^LL128" and p.env["FI_PROVIDER"] == "cxi"
    assert p.env["NCCL_NET"] == "AWS Libfabric"  # from the preset
    text = profile.read_text()
    assert "NVIDIA GH200 120GB" in text and "/opt/cray/pe/lib64/libnccl-net.so" in text
    assert "glibc" in text and "2.38" in text
    batch = renders_and_passes_shellcheck(profile, tmp_path)
    assert "fabrikit_bind /opt/cray/libfabric/1.22.0/lib64 /opt/libfabric/lib ro required" in batch


def test_init_double_amd_node_drafts_the_rocm_image(tmp_path: Path) -> None:
    root, env = amd_slingshot_node(tmp_path)
    profile, report = init(tmp_path, "amdg", "--root", str(root), env=env)
    loaded = load_profile(str(profile), is_path=True)
    p = loaded.profile
    assert report["preset"] == "slingshot" and p.scheduler.gpus_per_node == 8
    assert (p.container.runtime, p.container.gpu_flag, p.container.arch) == ("singularity", "--rocm", "x86_64")
    build = p.container.build
    assert (build.template, build.flavour, build.options) == ("rocm.def", "rocm", ["--fakeroot"])
    # the tag the draft pins is the definition's own default
    defaults = re.search(r"%arguments\n((?:[ \t]+\S.*\n)+)", (ROOT / "containers" / "rocm.def").read_text()).group(1)
    assert f"ROCM_PYTORCH_TAG={build.args['ROCM_PYTORCH_TAG']}" in defaults.split()
    assert build.args["LIBFABRIC_VERSION"] == "1.22.0"
    assert p.container.image.endswith("/amdg-pytorch-rocm.sif")
    assert p.library_path == ["/opt/libfabric/lib", "/opt/aws-ofi-rccl/lib"]  # not the preset's NVIDIA plugin
    assert "ROCm flavour yet" not in profile.read_text()
    renders_and_passes_shellcheck(profile, tmp_path)
    # build-image takes the drafted build section as it is
    dry = cli("--profile", str(profile), "--dry-run", prog="build-image", cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert "From: rocm/pytorch:{{ ROCM_PYTORCH_TAG }}" in dry.stdout
    assert f"--build-arg ROCM_PYTORCH_TAG={build.args['ROCM_PYTORCH_TAG']}" in dry.stdout + dry.stderr


def test_init_double_infiniband_a100_login_node(tmp_path: Path) -> None:
    root, env = infiniband_a100_login(tmp_path)
    profile, report = init(tmp_path, "a100ib", "--root", str(root), env=env)
    loaded = load_profile(str(profile), is_path=True)
    p = loaded.profile
    assert report["preset"] == "infiniband" and loaded.chain[0].name == "infiniband.yaml"
    # the GPU partition, not the default CPU one; two node groups: smallest memory, all nodes
    assert (p.scheduler.partition, p.scheduler.gpus_per_node, p.scheduler.mem) == ("a100", 4, "500000M")
    assert "64 nodes" in profile.read_text()
    assert (p.container.runtime, p.container.gpu_flag, p.container.arch) == ("singularity", "--nv", "x86_64")
    assert p.env["NCCL_IB_HCA"] == "mlx5_0"  # active InfiniBand port only (mlx5_1 down, mlx5_2 RoCE)
    assert p.env["NCCL_SOCKET_IFNAME"] == "ib0" and p.launcher.head_interface == "ib0"
    assert not p.binds and not p.host_libraries.names  # the image brings rdma-core; nothing bound
    renders_and_passes_shellcheck(profile, tmp_path)


def test_init_without_slurm_or_runtime_still_loads(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    (empty / "bin").mkdir(parents=True)
    profile, report = init(tmp_path, "bare", "--root", str(empty), env={"PATH": str(empty / "bin")})
    p = load_profile(str(profile), is_path=True).profile
    assert report["preset"] == "ethernet" and p.container.runtime == "apptainer"
    assert any("partition" in t for t in report["todo"]) and any("runtime" in t for t in report["todo"])


def test_init_refuses_to_overwrite_and_bad_names(tmp_path: Path) -> None:
    out = tmp_path / "x.yaml"
    out.write_text("mine\n")
    result = cli("sites", "init", "x", "-o", str(out), prog="fabrikit")
    assert "--force" in one_line_error(result) and out.read_text() == "mine\n"
    assert "site name" in one_line_error(cli("sites", "init", "X Y", "-o", "-", prog="fabrikit"))
