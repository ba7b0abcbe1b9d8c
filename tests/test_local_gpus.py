"""Local mode on a machine with GPUs: each simulated node gets its own, or none at all.

There is no GPU here, so the GPU lists are injected: into the pure split and plan, and into
the real CLI through a `nvidia-smi` test double on PATH (named as such below). The real
detection path without a GPU (no nvidia-smi, no KFD GPU node) is what every other local
test runs through; it is also asserted here.
"""

from __future__ import annotations

import os
import shlex
import stat
from pathlib import Path

import pytest

from runner import gpus
from runner.gpus import GpuSplit, VisibleGpus
from runner.local_launch import plan
from runner.profile_loader import load_profile
from runner.request import build_request
from tests.helpers import cli

NVIDIA_SMI_4 = """\
GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-4d1c3b2a-0000-1111-2222-333344445555)
GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-4d1c3b2a-0000-1111-2222-333344445556)
GPU 2: NVIDIA H100 80GB HBM3 (UUID: GPU-4d1c3b2a-0000-1111-2222-333344445557)
GPU 3: NVIDIA H100 80GB HBM3 (UUID: GPU-4d1c3b2a-0000-1111-2222-333344445558)
"""
NVIDIA_SMI_MIG = """\
GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-5a2e6c31-aaaa-bbbb-cccc-ddddeeeeffff)
  MIG 3g.20gb     Device  0: (UUID: MIG-2c1f0e6a-1111-5b6d-9c2e-0a1b2c3d4e5f)
  MIG 3g.20gb     Device  1: (UUID: MIG-7e3d5a1c-2222-5f4e-8d3c-1b2c3d4e5f60)
GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-5a2e6c31-aaaa-bbbb-cccc-ddddeeee0000)
"""


def no_kfd(tmp_path: Path) -> Path:
    return tmp_path / "no-kfd"


# --------------------------------------------------------------------------------- detection


def test_nvidia_smi_list_gives_indices_or_mig_uuids() -> None:
    assert gpus.parse_nvidia_smi_list(NVIDIA_SMI_4) == ["0", "1", "2", "3"]
    assert gpus.parse_nvidia_smi_list(NVIDIA_SMI_MIG) == [
        "MIG-2c1f0e6a-1111-5b6d-9c2e-0a1b2c3d4e5f", "MIG-7e3d5a1c-2222-5f4e-8d3c-1b2c3d4e5f60", "1"]
    assert gpus.parse_nvidia_smi_list("No devices were found\n") == []


def test_detect_nvidia_respects_an_existing_visibility_variable(tmp_path: Path) -> None:
    smi = lambda: NVIDIA_SMI_4  # noqa: E731
    found = gpus.detect({}, smi, no_kfd(tmp_path))
    assert found == VisibleGpus(("0", "1", "2", "3"), "CUDA_VISIBLE_DEVICES", "nvidia-smi -L")
    narrowed = gpus.detect({"CUDA_VISIBLE_DEVICES": "2, 3"}, smi, no_kfd(tmp_path))
    assert narrowed is not None and narrowed.ids == ("2", "3") and narrowed.source == "CUDA_VISIBLE_DEVICES"
    hidden = gpus.detect({"CUDA_VISIBLE_DEVICES": ""}, smi, no_kfd(tmp_path))
    assert hidden is not None and hidden.ids == ()


def test_detect_amd_from_the_kfd_topology(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes"
    for n, simds in enumerate((0, 104, 104)):  # node 0 is the CPU
        (nodes / str(n)).mkdir(parents=True)
        (nodes / str(n) / "properties").write_text(f"cpu_cores_count {0 if simds else 64}\nsimd_count {simds}\n")
    none = lambda: None  # noqa: E731  (no nvidia-smi)
    assert gpus.detect({}, none, nodes) == VisibleGpus(("0", "1"), "ROCR_VISIBLE_DEVICES", "KFD topology")
    assert gpus.detect({"ROCR_VISIBLE_DEVICES": "1"}, none, nodes).ids == ("1",)


def test_this_machine_has_no_gpu_so_nothing_is_set(tmp_path: Path) -> None:
    """The real detection path, as every other local test runs it here."""
    if gpus._nvidia_smi_list() or gpus._kfd_gpu_count(gpus.KFD_NODES):
        pytest.skip("this machine has GPUs")
    assert gpus.detect(os.environ) is None
    assert gpus.split(None, 2, 1) is None


# ------------------------------------------------------------------------------------- split


def four(*ids: str) -> VisibleGpus:
    return VisibleGpus(ids or ("0", "1", "2", "3"), "CUDA_VISIBLE_DEVICES", "nvidia-smi -L")


@pytest.mark.parametrize("nodes,nproc,expected", [
    (2, 2, ("0,1", "2,3")),
    (4, 1, ("0", "1", "2", "3")),
    (2, 1, ("0", "1")),  # GPUs 2 and 3 stay idle
    (1, 4, ("0,1,2,3",)),
])
def test_each_node_gets_its_own_gpus(nodes: int, nproc: int, expected: tuple[str, ...]) -> None:
    result = gpus.split(four(), nodes, nproc)
    assert result == GpuSplit("CUDA_VISIBLE_DEVICES", expected)
    assert result.summary() == "GPUs " + " ".join(f"node{k}={v}" for k, v in enumerate(expected, start=1))
    used = [g for v in expected for g in v.split(",")]
    assert len(used) == len(set(used)), "a GPU given to two ranks: NCCL 'Duplicate GPU detected'"


def test_uuids_from_the_callers_variable_are_split_as_given() -> None:
    uuids = VisibleGpus(("GPU-a", "GPU-b"), "CUDA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
    assert gpus.split(uuids, 2, 1).per_node == ("GPU-a", "GPU-b")


@pytest.mark.parametrize("available,nodes,nproc,hint", [
    (("0",), 2, 1, "--nodes 1 trains on the GPUs"),
    (("0", "1", "2"), 2, 2, "--nodes 1 trains on the GPUs"),
    (("0",), 1, 2, "--nproc-per-node 1 trains on the GPUs"),
])
def test_fewer_gpus_than_ranks_hides_them_and_says_so_in_one_line(available, nodes, nproc, hint) -> None:
    result = gpus.split(four(*available), nodes, nproc)
    assert result.per_node == ("",) * nodes and result.hidden and result.summary() is None
    assert result.note is not None and "\n" not in result.note
    assert f"need {nodes * nproc} GPUs but {len(available)} GPU" in result.note
    assert "training on CPU with gloo, GPUs hidden" in result.note and result.note.endswith(hint)


def test_no_gpus_listed_leaves_the_environment_alone() -> None:
    assert gpus.split(VisibleGpus((), "CUDA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"), 2, 1) is None


# -------------------------------------------------------------------------------------- plan


def _env(agent) -> dict[str, str]:
    return dict(agent.env)


def test_plan_gives_every_agent_its_gpus(tmp_path: Path) -> None:
    request = build_request(load_profile("local"), nodes=2, nproc_per_node=2)
    lplan = plan(request, tmp_path / "run", port=20001, gpus=four())
    assert [_env(a)["CUDA_VISIBLE_DEVICES"] for a in lplan.agents] == ["0,1", "2,3"]
    assert "CUDA_VISIBLE_DEVICES=0,1" in lplan.describe() and "CUDA_VISIBLE_DEVICES=2,3" in lplan.describe()

    cpu_only = plan(request, tmp_path / "run", port=20001, gpus=None)
    assert all("CUDA_VISIBLE_DEVICES" not in _env(a) for a in cpu_only.agents) and cpu_only.gpus is None


def test_plan_hides_the_gpus_inside_a_container_too(tmp_path: Path) -> None:
    profile = tmp_path / "box.yaml"
    profile.write_text((Path(__file__).resolve().parents[1] / "bindings" / "local.yaml").read_text().replace(
        "  runtime: none", "  runtime: apptainer\n  image: /images/box.sif\n  gpu_flag: --nv"))
    request = build_request(load_profile(str(profile), is_path=True), nodes=2)
    lplan = plan(request, tmp_path / "run", port=20001, gpus=four("0"))
    assert [_env(a)["APPTAINERENV_CUDA_VISIBLE_DEVICES"] for a in lplan.agents] == ["", ""]
    assert lplan.describe().splitlines()[1].startswith("# 2 nodes x 1 process need 2 GPUs but 1 GPU is visible")


def test_plan_samples_exactly_the_gpus_the_nodes_use(tmp_path: Path) -> None:
    """The sampler is what makes `fabrikit report` plot a local run's GPU use, as it does a
    Slurm run's; it watches the nodes' GPUs only, and nothing when the GPUs are hidden."""
    def sampler(nodes: int, nproc: int, found: VisibleGpus | None) -> tuple[str, ...] | None:
        request = build_request(load_profile("local"), nodes=nodes, nproc_per_node=nproc)
        return plan(request, tmp_path / "run", port=20001, gpus=found).gpu_sampler

    query = ("nvidia-smi", "--query-gpu=timestamp,index,utilization.gpu,memory.used", "--format=csv", "-lms", "1000")
    assert sampler(2, 2, four()) == (*query, "-i", "0,1,2,3")
    assert sampler(1, 1, four()) == (*query, "-i", "0")  # GPUs 1-3 are not this run's
    assert sampler(2, 1, four("GPU-a", "GPU-b")) == (*query, "-i", "GPU-a,GPU-b")
    assert sampler(1, 1, four("MIG-2c1f0e6a")) == query  # -i takes no MIG UUID: every GPU
    assert sampler(2, 1, four("0")) is None  # hidden: the job trains on CPU
    assert sampler(1, 1, None) is None
    assert sampler(1, 1, VisibleGpus(("0",), "ROCR_VISIBLE_DEVICES", "KFD topology")) is None  # no nvidia-smi

    request = build_request(load_profile("local"), nodes=1)
    shown = plan(request, tmp_path / "run", port=20001, gpus=four()).describe()
    assert f"{' '.join(query)} -i 0 > {tmp_path / 'run'}/gpu-{os.uname().nodename}.csv" in shown


# ------------------------------------------------------------------ the CLI, with a double


@pytest.fixture
def fake_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """TEST DOUBLE for `nvidia-smi -L` (no GPU here): prints the given listing. The real
    detection without GPUs is `test_this_machine_has_no_gpu_so_nothing_is_set`."""

    def install(listing: str) -> dict[str, str]:
        bin_dir = tmp_path / "double-bin"
        bin_dir.mkdir(exist_ok=True)
        exe = bin_dir / "nvidia-smi"
        exe.write_text(f"#!/bin/sh\n[ \"$1\" = -L ] || exit 9\nprintf %s {shlex.quote(listing)}\n")
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)  # the listing alone decides
        return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}

    return install


def test_dry_run_splits_four_gpus_between_two_nodes(fake_nvidia_smi, tmp_path: Path) -> None:
    res = cli("--site", "local", "--nodes", "2", "--nproc-per-node", "2", "--run-dir", str(tmp_path / "run"),
              "--dry-run", env=fake_nvidia_smi(NVIDIA_SMI_4))
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("CUDA_VISIBLE_DEVICES=0,1") == 1 and res.stdout.count("CUDA_VISIBLE_DEVICES=2,3") == 1


@pytest.mark.slow
def test_two_nodes_on_one_gpu_train_on_cpu_after_one_line(fake_nvidia_smi, tmp_path: Path) -> None:
    """The case that used to end in NCCL `Duplicate GPU detected`: a real 2-node run."""
    one_gpu = fake_nvidia_smi(NVIDIA_SMI_4.splitlines()[0] + "\n")
    res = cli("--site", "local", "--nodes", "2", "--run-dir", str(tmp_path / "run"), "--", "train_ddp.py",
              "--synthetic-size", "64", "--batch-size", "16", "--width", "8", "--epochs", "1",
              env=one_gpu, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    notes = [line for line in res.stderr.splitlines() if "need 2 GPUs" in line]
    assert notes == ["fabrikit: 2 nodes x 1 process need 2 GPUs but 1 GPU is visible (nvidia-smi -L): "
                     "training on CPU with gloo, GPUs hidden; --nodes 1 trains on the GPUs"]
    assert "Traceback" not in res.stdout + res.stderr
    assert "device=cpu backend=gloo" in res.stdout


@pytest.fixture
def sampling_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """TEST DOUBLE for `nvidia-smi` (no GPU here): `-L` lists one GPU; the sampling call
    writes nvidia-smi's CSV header and a row every 0.1 s until SIGTERM, and leaves a file
    saying how it ended and with which arguments. The real nvidia-smi ran in this path on
    the lent H100 (benchmarks/gpu_figures.sh; the closing note of issue 13 gives the run)."""
    bin_dir = tmp_path / "double-bin"
    bin_dir.mkdir()
    ended = tmp_path / "sampler-ended"
    exe = bin_dir / "nvidia-smi"
    exe.write_text(f"""#!/bin/sh
if [ "$1" = -L ]; then printf %s {shlex.quote(NVIDIA_SMI_4.splitlines()[0])}; echo; exit 0; fi
trap 'echo "TERM $*" > {shlex.quote(str(ended))}; exit 0' TERM
echo 'timestamp, index, utilization.gpu [%], memory.used [MiB]'
while :; do
    echo "$(date '+%Y/%m/%d %H:%M:%S.000'), 0, 87 %, 1234 MiB"
    sleep 0.1
done
""")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}, ended


@pytest.mark.slow
def test_a_local_gpu_run_samples_its_gpus_for_the_report(sampling_nvidia_smi, tmp_path: Path) -> None:
    env, ended = sampling_nvidia_smi
    run = tmp_path / "run"
    res = cli("--site", "local", "--nodes", "1", "--run-dir", str(run), "--", "train_ddp.py",
              "--synthetic-size", "64", "--batch-size", "16", "--width", "8", "--epochs", "1",
              env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "fabrikit: GPUs node1=0" in res.stderr
    # Stopped by the launcher once the node was done, not left running or killed.
    assert ended.read_text().split() == ["TERM", "--query-gpu=timestamp,index,utilization.gpu,memory.used",
                                         "--format=csv", "-lms", "1000", "-i", "0"]
    rows = (run / f"gpu-{os.uname().nodename}.csv").read_text().splitlines()
    assert rows[0].startswith("timestamp, index") and len(rows) >= 2 and rows[1].endswith(", 0, 87 %, 1234 MiB")

    report = cli("report", str(run), prog="fabrikit")
    assert report.returncode == 0, report.stderr
    assert (run / "report" / "gpu_utilisation.png").stat().st_size > 0
    assert f"GPU utilisation (gpu-{os.uname().nodename}.csv)" in report.stdout
