"""End to end on the real test cluster: build-image's image, run-multinode's script, sbatch,
srun apptainer exec, torchrun c10d across network-namespace nodes. Nothing is stubbed."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import pytest

from tests.cluster_jobs import SMALL_TRAIN, finish, profile_variant, submit, train_lines

pytestmark = [pytest.mark.cluster, pytest.mark.apptainer, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(slurm_cluster, test_image):
    """The session's cluster, once the test image exists (built by build-image)."""
    return slurm_cluster


def check_training(job, nodes: int, cluster) -> dict[str, str]:
    assert job.state == "COMPLETED", f"{job.state}\n{job.out[-4000:]}"
    start = train_lines(job.out, "start")
    assert start, job.out[-3000:]
    world = int(start[0]["world_size"])
    assert world == nodes * int(start[0]["procs_per_node"]) == nodes * 2
    addr, _port = job.endpoint()
    assert addr == cluster.node_ips["node1"], "the rendezvous endpoint must be node 1's address"
    summary = train_lines(job.out, "summary")
    assert summary and summary[-1]["world_size"] == str(world)
    return summary[-1]


def test_two_node_training_completes(cluster, tmp_path: Path) -> None:
    job = finish(cluster, submit(cluster, tmp_path / "run", 2, SMALL_TRAIN))
    summary = check_training(job, 2, cluster)
    assert int(summary["global_steps"]) > 0
    assert list((tmp_path / "run" / "checkpoints").glob("ckpt-*.done")), "checkpoints in the run directory"
    assert job.out.rstrip().splitlines()[-1].startswith("fabrikit: "), "the job ends with fabrikit's verdict"


def test_four_node_training_completes(cluster, tmp_path: Path) -> None:
    job = finish(cluster, submit(cluster, tmp_path / "run", 4, SMALL_TRAIN))
    check_training(job, 4, cluster)


def test_probe_sees_two_hosts_and_the_hosts_libfabric(cluster, tmp_path: Path) -> None:
    job = finish(cluster, submit(cluster, tmp_path / "run", 2, ["env_probe.py"]))
    assert job.state == "COMPLETED", job.out[-4000:]
    records = [json.loads(p.read_text()) for p in sorted((tmp_path / "run" / "probe").glob("rank-*.json"))]
    assert len(records) == 4, f"one record per rank expected: {records}"
    hosts = {r["host"] for r in records}
    assert hosts == {"node1", "node2"}, hosts
    host_file = os.path.realpath("/usr/lib/x86_64-linux-gnu/libfabric.so.1")
    host_sha = hashlib.sha256(Path(host_file).read_bytes()).hexdigest()
    for record in records:
        lib = record["libs"]["libfabric.so.1"]
        assert lib["loaded"], lib
        assert lib["path"].startswith("/opt/fabrikit/hostlib/"), lib  # the bound copy, first on the path
        assert lib["sha256"] == host_sha, "the container loaded the host's libfabric file"
        assert record["ld_library_path"].split(":")[0] == "/opt/fabrikit/hostlib"


def test_two_jobs_on_the_same_nodes_use_different_ports(cluster, tmp_path: Path) -> None:
    pinned = profile_variant(tmp_path, "pinned", scheduler={"sbatch_extra": ["--nodelist=node1,node2"]})
    job_args = [*SMALL_TRAIN, "--epochs", "3"]
    first = submit(cluster, tmp_path / "a", 2, job_args, profile=pinned)
    second = submit(cluster, tmp_path / "b", 2, job_args, profile=pinned)
    finish(cluster, first)
    finish(cluster, second)
    for job in (first, second):
        assert job.state == "COMPLETED", job.out[-4000:]
    info = [cluster.job_info(j.job_id) for j in (first, second)]
    assert info[0]["NodeList"] == info[1]["NodeList"] == "node[1-2]"
    assert info[0]["StartTime"] <= info[1]["EndTime"] and info[1]["StartTime"] <= info[0]["EndTime"], \
        "the two jobs must have run at the same time"
    assert first.endpoint() != second.endpoint()
    assert first.endpoint()[0] == second.endpoint()[0] == cluster.node_ips["node1"]


def test_allreduce_benchmark_reports_busbw_and_no_wrong_elements(cluster, tmp_path: Path) -> None:
    job = finish(cluster, submit(cluster, tmp_path / "run", 2,
                                 ["allreduce_bench.py", "--max-bytes", "1048576", "--iters", "5", "--warmup", "2"]))
    assert job.state == "COMPLETED", job.out[-4000:]
    summary = re.search(r"fabrikit-allreduce: summary world_size=(\d+) max_busbw_gbps=([\d.]+) wrong=(\d+)", job.out)
    assert summary, job.out[-4000:]
    assert summary.group(1) == "4" and float(summary.group(2)) > 0 and summary.group(3) == "0"
    results = json.loads((tmp_path / "run" / "allreduce.json").read_text())
    assert results, "allreduce.json written into the run directory"


def test_the_job_step_asks_for_the_jobs_cpus(cluster, tmp_path: Path) -> None:
    """scheduler.cpus_per_task is passed to the job step too (srun >= 22.05 does not inherit it
    from sbatch): the real srun inside the real allocation accepts it and every rank runs.
    (The test cluster binds no CPUs, task/none, so the binding itself is not observable here.)"""
    profile = profile_variant(tmp_path, "cpus", scheduler={"cpus_per_task": 2})
    job = finish(cluster, submit(cluster, tmp_path / "run", 2, ["env_probe.py"], profile=profile))
    assert job.state == "COMPLETED", job.out[-4000:]
    step = next(line for line in (tmp_path / "run" / "job.sbatch").read_text().splitlines()
                if line.startswith('srun --nodes="$SLURM_JOB_NUM_NODES"'))
    assert "--cpus-per-task=2" in step
    records = [json.loads(p.read_text()) for p in sorted((tmp_path / "run" / "probe").glob("rank-*.json"))]
    assert len(records) == 4 and all(r["allreduce_ok"] for r in records), records
    assert {r["env"].get("SLURM_CPUS_PER_TASK") for r in records} == {"2"}
