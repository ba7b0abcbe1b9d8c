"""jobs/jobenv.py: the typed view of torchrun/Slurm variables."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from jobenv import Backend, Device, JobEnvironment, default_output_dir

TORCHRUN_ENV = {  # what torchrun gives worker 5 of 2 nodes x 4 processes, inside srun
    "RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "1",
    "GROUP_WORLD_SIZE": "2", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500",
    "SLURM_JOB_ID": "4242", "SLURM_PROCID": "1", "SLURM_NODEID": "1", "SLURM_JOB_NUM_NODES": "2",
}


def test_from_env_reads_torchrun_variables_first() -> None:
    job = JobEnvironment.from_env(TORCHRUN_ENV)
    assert (job.rank, job.local_rank, job.world_size, job.local_world_size) == (5, 1, 8, 4)
    assert (job.node_rank, job.nnodes) == (1, 2)
    assert (job.master_addr, job.master_port, job.slurm_job_id) == ("10.0.0.1", 29500, "4242")
    assert job.launched and not job.is_main


def test_from_env_falls_back_to_slurm_then_to_arithmetic() -> None:
    env = {k: v for k, v in TORCHRUN_ENV.items() if not k.startswith("GROUP_")}
    job = JobEnvironment.from_env(env)
    assert (job.node_rank, job.nnodes) == (1, 2)  # SLURM_NODEID, SLURM_JOB_NUM_NODES
    bare = {k: v for k, v in env.items() if not k.startswith("SLURM_")}
    job = JobEnvironment.from_env(bare)
    assert (job.node_rank, job.nnodes) == (5 // 4, 8 // 4)


def test_without_a_launcher_it_is_a_world_of_one() -> None:
    job = JobEnvironment.from_env({})
    assert (job.rank, job.world_size, job.local_world_size, job.nnodes, job.node_rank) == (0, 1, 1, 1, 0)
    assert not job.launched and job.is_main and job.master_port is None


def test_bad_integer_names_the_variable() -> None:
    with pytest.raises(ValueError, match="LOCAL_RANK='x'"):
        JobEnvironment.from_env({**TORCHRUN_ENV, "LOCAL_RANK": "x"})


def test_device_and_backend_choice() -> None:
    job = JobEnvironment.from_env(TORCHRUN_ENV)
    assert job.choose_device("cpu") == torch.device("cpu")
    assert Backend.for_device(Device.CPU) is Backend.GLOO and Backend.for_device(Device.CUDA) is Backend.NCCL
    if not torch.cuda.is_available():
        assert job.choose_device("auto") == torch.device("cpu")
        with pytest.raises(RuntimeError, match="no CUDA device"):
            job.choose_device("cuda")


def test_configure_threads() -> None:
    before = torch.get_num_threads()
    cpus = len(os.sched_getaffinity(0))
    one = JobEnvironment.from_env({**TORCHRUN_ENV, "LOCAL_WORLD_SIZE": "1"})
    four = JobEnvironment.from_env(TORCHRUN_ENV)
    try:
        # No OMP_NUM_THREADS: the CPUs divided among the local workers.
        assert one.configure_threads(environ={}) == cpus
        assert JobEnvironment.from_env({**TORCHRUN_ENV, "LOCAL_WORLD_SIZE": str(cpus * 4)}).configure_threads(environ={}) == 1
        # torchrun's automatic OMP_NUM_THREADS=1 (several workers) is not honoured ...
        assert four.configure_threads(environ={"OMP_NUM_THREADS": "1"}) == max(1, cpus // 4)
        # ... but a launcher's choice is: any value with one worker per node, or a value other than 1.
        assert one.configure_threads(environ={"OMP_NUM_THREADS": "1"}) == 1
        assert four.configure_threads(environ={"OMP_NUM_THREADS": "3"}) == 3
        assert four.configure_threads(5, environ={"OMP_NUM_THREADS": "3"}) == 5 == torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


def test_default_output_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FABRIKIT_RUN_DIR", str(tmp_path / "run"))
    assert default_output_dir(None) == tmp_path / "run" and (tmp_path / "run").is_dir()
    assert default_output_dir(str(tmp_path / "given")) == tmp_path / "given"
    monkeypatch.delenv("FABRIKIT_RUN_DIR")
    monkeypatch.chdir(tmp_path)
    assert default_output_dir(None) == tmp_path


def _affinity_after_bind(local_rank: int, masks: str) -> str:
    """bind_cpus() in a fresh interpreter (it changes the process's affinity)."""
    import subprocess
    import sys

    code = ("import os, jobenv; job = jobenv.JobEnvironment.from_env(); got = job.bind_cpus(); "
            "print(sorted(got) if got is not None else None, sorted(os.sched_getaffinity(0)))")
    env = {**os.environ, "LOCAL_RANK": str(local_rank), "RANK": str(local_rank), "WORLD_SIZE": "2",
           "LOCAL_WORLD_SIZE": "2", "FABRIKIT_CPU_BIND_MASKS": masks,
           "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "jobs")}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return result.stdout.strip()


def test_bind_cpus_applies_the_mask_of_the_local_rank() -> None:
    cpus = sorted(os.sched_getaffinity(0))
    first, last = cpus[0], cpus[-1]
    masks = f"{1 << first:#x},{1 << last:#x}"
    assert _affinity_after_bind(0, masks) == f"[{first}] [{first}]"
    assert _affinity_after_bind(1, masks) == f"[{last}] [{last}]"
    # A mask outside this process's CPUs never widens it, and a rank without a mask keeps its CPUs.
    outside = max(cpus) + 1
    assert _affinity_after_bind(0, f"{1 << outside:#x}") == f"None {cpus}"
    assert _affinity_after_bind(1, f"{1 << first:#x}") == f"None {cpus}"


def test_bind_cpus_without_masks_changes_nothing() -> None:
    assert JobEnvironment.from_env(TORCHRUN_ENV).bind_cpus(environ={}) is None
    with pytest.raises(ValueError, match="not a hex mask"):
        JobEnvironment.from_env({**TORCHRUN_ENV, "LOCAL_RANK": "0"}).bind_cpus(
            environ={"FABRIKIT_CPU_BIND_MASKS": "zz"})
