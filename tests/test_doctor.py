"""`fabrikit doctor` on real host libraries (Debian's libfabric1 and its closure)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from runner.elf_deps import closure, read_elf
from tests.helpers import ROOT, cli, require_file

LIBDIRS = ["/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu"]


@pytest.fixture(autouse=True)
def _libfabric() -> None:
    require_file("/usr/lib/x86_64-linux-gnu/libfabric.so.1", "Debian's libfabric1", "apt-get install libfabric1")


def libfabric_closure() -> dict[str, str]:
    found = closure(["libfabric.so.1"], LIBDIRS).found
    assert len(found) >= 5, found  # librdmacm, libibverbs, libnl-3, libnuma, ...
    return found


def profile_with_binds(tmp_path: Path, files: dict[str, str], extra: list[dict] | None = None) -> Path:
    binds = [{"source": src, "target": f"/opt/fabrikit/hostlib/{name}"} for name, src in files.items()]
    data = {"description": "doctor test", "fabric": {"kind": "ethernet"}, "container": {"runtime": "none"},
            "binds": binds + (extra or []), "library_path": ["/opt/fabrikit/hostlib"]}
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def doctor(path: Path) -> tuple[int, dict]:
    result = cli("doctor", "--profile", str(path), "--json", prog="fabrikit")
    assert result.returncode in (0, 1), result.stderr
    return result.returncode, json.loads(result.stdout)


def test_closure_reads_real_elf_files() -> None:
    files = libfabric_closure()
    info = read_elf(files["libfabric.so.1"])
    assert info.soname == "libfabric.so.1" and "libc.so.6" in info.needed
    assert info.glibc is not None and info.glibc >= (2, 2)
    assert "libc.so.6" not in files, "the container's own glibc is never bound"


def test_full_closure_passes(tmp_path: Path) -> None:
    rc, report = doctor(profile_with_binds(tmp_path, libfabric_closure()))
    assert rc == 0, report
    assert report["ok"] is True


def test_one_dependency_left_out_fails_and_names_it(tmp_path: Path) -> None:
    files = libfabric_closure()
    left_out = "libnuma.so.1" if "libnuma.so.1" in files else sorted(set(files) - {"libfabric.so.1"})[0]
    del files[left_out]
    rc, report = doctor(profile_with_binds(tmp_path, files))
    assert rc == 1
    failed = [c for c in report["checks"] if c["status"] == "FAIL"]
    assert failed and all(left_out in c["detail"] for c in failed), failed
    human = cli("doctor", "--profile", str(profile_with_binds(tmp_path, files)), prog="fabrikit")
    assert human.returncode == 1 and left_out in human.stdout and "fix: bind" in human.stdout


def test_missing_bind_source_fails_and_names_it(tmp_path: Path) -> None:
    ghost = "/opt/nowhere/libcxi.so.1"
    rc, report = doctor(profile_with_binds(tmp_path, libfabric_closure(),
                                           extra=[{"source": ghost, "target": "/opt/fabrikit/hostlib/libcxi.so.1"}]))
    assert rc == 1
    assert any(c["status"] == "FAIL" and ghost in c["name"] for c in report["checks"]), report


def test_optional_missing_bind_only_warns(tmp_path: Path) -> None:
    rc, report = doctor(profile_with_binds(tmp_path, libfabric_closure(),
                                           extra=[{"source": "/opt/nowhere/x.so.1", "required": False}]))
    assert rc == 0 and any(c["status"] == "warn" for c in report["checks"])


def test_named_host_library_expands_to_its_closure(tmp_path: Path) -> None:
    script = cli("--dry-run", "--profile", str(ROOT / "tests/sites/testcluster.yaml"), "--nodes", "2").stdout
    for name in libfabric_closure():
        assert f"/opt/fabrikit/hostlib/{name} ro required" in script, name


@pytest.mark.apptainer
def test_doctor_passes_on_the_test_cluster_profile(test_image) -> None:
    """With the real image: labels, the image's own loader cache and its glibc label all checked."""
    result = cli("doctor", "--profile", str(ROOT / "tests/sites/testcluster.yaml"), "--json", prog="fabrikit")
    assert result.returncode == 0, result.stdout
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert checks["image"]["status"] == "pass"
    assert checks["image labels"]["status"] == "pass"
    assert checks["glibc"]["status"] == "pass", checks["glibc"]
    assert checks["dependencies of libfabric.so.1"]["status"] == "pass"


# ---- ROCm: no nvidia-smi; /dev/kfd, /dev/dri/renderD*, rocm-smi -------------------------

# `rocm-smi --showtoponuma` on a LUMI-G node (8 GCDs), as printed in the LUMI user guide,
# docs/runjobs/scheduled-jobs/distribution-binding.md (Lumi-supercomputer/lumi-userguide).
LUMI_ROCM_SMI = """\
====================== Numa Nodes ======================
GPU[0]          : (Topology) Numa Node: 3
GPU[0]          : (Topology) Numa Affinity: 3
GPU[1]          : (Topology) Numa Node: 3
GPU[1]          : (Topology) Numa Affinity: 3
GPU[2]          : (Topology) Numa Node: 1
GPU[2]          : (Topology) Numa Affinity: 1
GPU[3]          : (Topology) Numa Node: 1
GPU[3]          : (Topology) Numa Affinity: 1
GPU[4]          : (Topology) Numa Node: 0
GPU[4]          : (Topology) Numa Affinity: 0
GPU[5]          : (Topology) Numa Node: 0
GPU[5]          : (Topology) Numa Affinity: 0
GPU[6]          : (Topology) Numa Node: 2
GPU[6]          : (Topology) Numa Affinity: 2
GPU[7]          : (Topology) Numa Node: 2
GPU[7]          : (Topology) Numa Affinity: 2
================= End of ROCm SMI Log ==================
"""


def rocm_profile(tmp_path: Path, gpus: int = 8) -> Path:
    data = {"description": "rocm doctor test", "fabric": {"kind": "slingshot"}, "container": {"runtime": "none",
            "gpu_flag": "--rocm"}, "scheduler": {"gpus_per_node": gpus}}
    path = tmp_path / "rocm.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_count_rocm_gpus_reads_rocm_smi_output() -> None:
    from runner.doctor import count_rocm_gpus

    assert count_rocm_gpus(LUMI_ROCM_SMI) == 8
    assert count_rocm_gpus("device,GPU use (%)\ncard0,3\ncard1,0\n") == 2
    assert count_rocm_gpus("no GPUs here\n") == 0


@pytest.mark.skipif(Path("/dev/kfd").exists(), reason="this machine has an AMD GPU driver")
def test_rocm_profile_never_runs_nvidia_smi_and_skips_without_kfd(tmp_path: Path) -> None:
    """The real CLI on a machine without the amdgpu driver: the GPU check names /dev/kfd
    (not nvidia-smi) and is skipped, not failed."""
    rc, report = doctor(rocm_profile(tmp_path))
    gpus = next(c for c in report["checks"] if c["name"] == "GPUs")
    assert gpus["status"] == "skip" and "/dev/kfd" in gpus["detail"] and "nvidia" not in gpus["detail"], gpus
    assert rc == 0


def test_rocm_gpu_check_counts_render_nodes_without_rocm_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from runner.doctor import Status, rocm_gpu_check

    dev = tmp_path / "dev"
    (dev / "dri").mkdir(parents=True)
    (dev / "kfd").touch()
    for minor in range(128, 136):  # one render node per GCD, as the amdgpu driver creates them
        (dev / "dri" / f"renderD{minor}").touch()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    check = rocm_gpu_check(8, dev=dev)
    assert check.status is Status.PASS and check.detail.startswith("8 visible") and "rocm-smi not on PATH" in check.detail
    assert rocm_gpu_check(4, dev=dev).status is Status.WARN


def test_rocm_gpu_check_uses_rocm_smi_double(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Test double: a `rocm-smi` script printing LUMI's published output (there is no AMD
    GPU here); the real no-driver path is test_rocm_profile_never_runs_nvidia_smi_..."""
    import sys

    from runner.doctor import Status, rocm_gpu_check

    dev = tmp_path / "dev"
    dev.mkdir()
    (dev / "kfd").touch()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    double = bin_dir / "rocm-smi"
    double.write_text(f"#!{sys.executable}\nimport sys\nassert sys.argv[1:] == ['--showid'], sys.argv\n"
                      f"print({LUMI_ROCM_SMI!r})\n")
    double.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    check = rocm_gpu_check(8, dev=dev)
    assert check.status is Status.PASS and "rocm-smi --showid" in check.detail, check


def test_a_silent_fallback_to_sockets_is_warned(tmp_path: Path) -> None:
    """A Slingshot profile without NCCL_NET (NCCL would fall back to TCP instead of failing),
    and one that does not check the transport, are warnings; the preset's settings pass."""
    def fabric(extra: dict) -> dict:
        data = {"description": "fabric check", "fabric": {"kind": "slingshot"}, "container": {"runtime": "none"},
                **extra}
        path = tmp_path / "f.yaml"
        path.write_text(yaml.safe_dump(data))
        rc, report = doctor(path)
        return next(c for c in report["checks"] if c["name"] == "fabric")

    assert fabric({})["status"] == "warn" and "NCCL_NET" in fabric({})["fix"]
    unchecked = fabric({"env": {"NCCL_NET": "AWS Libfabric"}, "fabric": {"kind": "slingshot", "check_transport": False}})
    assert unchecked["status"] == "warn" and "check_transport" in unchecked["fix"]
    assert fabric({"env": {"NCCL_NET": "AWS Libfabric"}})["status"] == "pass"
