"""Faults on the real test cluster: a dead node, an occupied port, the time limit, and a
half-written checkpoint. Each test prints how long the fault took to surface; none asserts a
duration. Tests assert events and their order, with deadlines derived from documented limits."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import wait_for
from tests.cluster_jobs import SMALL_TRAIN, Job, finish, profile_variant, resubmit, submit, train_lines

pytestmark = [pytest.mark.cluster, pytest.mark.apptainer, pytest.mark.slow]

JOB_PROCESS = re.compile(r"torch\.distributed\.run|torchrun|train_ddp\.py|starter|apptainer")
# Deadlines come from documented behaviour, not from how long things took here:
PROCESS_GROUP_TIMEOUT_S = 600  # jobs/jobenv.py: a rank blocked in a collective gives up after this
SIGNAL_EARLY_S = 60  # sbatch(1) --signal: "the signal may be sent up to 60 seconds earlier than specified"
REQUEUE_HOLD_S = 120  # slurm.conf(5) AuthInfo cred_expire (default 120 s): how long a requeued job waits


@pytest.fixture(scope="module")
def cluster(slurm_cluster, test_image):
    return slurm_cluster


def steps(text: str) -> list[int]:
    return [int(m.group(1)) for m in re.finditer(r"fabrikit-train: step=(\d+) ", text)]


def job_processes(cluster, node: str) -> list[str]:
    """Command lines of job processes (not Slurm daemons) still alive in a node's namespace."""
    left = []
    for pid in cluster.node_pids(node):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if JOB_PROCESS.search(cmd) and "slurmd" not in cmd:
            left.append(cmd)
    return left


def test_killed_node_ends_the_job_fast_and_is_named(cluster, tmp_path: Path) -> None:
    job = submit(cluster, tmp_path / "run", 2, [*SMALL_TRAIN, "--epochs", "100", "--log-every-step",
                                                "--step-sleep", "0.2"])
    wait_for(lambda: len(steps(job.log)) >= 3, 180, "training steps")
    killed = cluster.kill_on_node("node2", r"train_ddp\.py", sig=signal.SIGKILL)
    assert killed, "no training process found on node2"
    t_fault = time.monotonic()
    # "Fast": srun --kill-on-bad-exit ends node1's task (KillWait 5 s on the test cluster) rather
    # than node1's training waiting out the collective timeout; half of that is the deadline.
    finish(cluster, job, timeout=PROCESS_GROUP_TIMEOUT_S / 2)
    took = time.monotonic() - t_fault
    assert job.state == "FAILED", job.state
    last = job.out.rstrip().splitlines()[-1]
    assert last.startswith("fabrikit: FAILED:") and "node2" in last, last
    wait_for(lambda: not job_processes(cluster, "node1") and not job_processes(cluster, "node2"), 30,
             "no job process left on any node")
    print(f"\n[fault] node2 killed -> job FAILED in {took:.1f} s; last line: {last}")


def test_occupied_rendezvous_port_is_skipped(cluster, tmp_path: Path) -> None:
    port = 29555
    fixed = profile_variant(tmp_path, "fixedport", launcher={"port_base": port, "port_span": 1},
                            scheduler={"sbatch_extra": ["--nodelist=node1,node2"]})
    squatter = subprocess.Popen(
        ["ip", "netns", "exec", cluster.node_ns("node1"), sys.executable, "-c",
         f"import socket,time; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
         f"s.bind(('0.0.0.0', {port})); s.listen(); print('listening', flush=True); time.sleep(600)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert squatter.stdout is not None and squatter.stdout.readline().strip() == "listening"
        t0 = time.monotonic()
        job = finish(cluster, submit(cluster, tmp_path / "run", 2, SMALL_TRAIN, profile=fixed))
        took = time.monotonic() - t0
    finally:
        squatter.kill()
        squatter.wait()
    assert job.state == "COMPLETED", job.out[-4000:]
    assert f"rendezvous port {port} is in use on node1; trying the next one" in job.out
    assert job.endpoint() == (cluster.node_ips["node1"], port + 1)
    print(f"\n[fault] port {port} occupied -> job moved to {port + 1} and completed in {took:.1f} s")


def test_time_limit_checkpoints_requeues_and_finishes(cluster, tmp_path: Path) -> None:
    """Time limit -> TERM -> checkpoint -> requeue -> resume, until every step is done once.

    Sized from Slurm's documented behaviour, not from measured timings: with --time T and
    --signal=TERM@L the signal comes between T-L-60 s and T-L s into an attempt (sbatch(1)).
    T = 3 min, L = 60 s: the TERM comes 60-120 s in, after start-up (apptainer, torch import,
    rendezvous) on a loaded machine, and leaves 60 s to finish the step, write the checkpoint
    and requeue before the limit. Steps take at least --step-sleep, so TOTAL_STEPS seconds of
    sleep outlast the latest possible signal: the first attempt is always stopped by it. A
    requeued job waits REQUEUE_HOLD_S before it runs again; a job the limit ends before its
    requeue lands (TIMEOUT) is resubmitted with --resume instead, as a user would.
    """
    limit_s, lead_s = 180, 60
    total_steps = limit_s - lead_s  # steps of >= 1 s: more than fit before the latest signal
    limited = profile_variant(tmp_path, "limited",
                              scheduler={"time": str(limit_s // 60), "signal_lead_s": lead_s, "requeue": True})
    job_args = ["train_ddp.py", "--synthetic-size", "64", "--batch-size", "8", "--width", "8", "--epochs", "100",
                "--max-steps", str(total_steps), "--log-every-step", "--step-sleep", "1.0",
                "--checkpoint-dir", "{run_dir}/checkpoints", "--resume"]
    max_attempts = 4  # every attempt trains >= limit - lead - SIGNAL_EARLY_S - start-up seconds
    t0 = time.monotonic()
    job = submit(cluster, tmp_path / "run", 2, job_args, profile=limited)
    attempts = 1
    deadline = time.monotonic() + max_attempts * (limit_s + REQUEUE_HOLD_S + SIGNAL_EARLY_S)
    while True:
        state = cluster.wait(job.job_id, timeout=max(10, deadline - time.monotonic()))
        if state == "COMPLETED" or time.monotonic() > deadline:
            break
        # Not requeued by Slurm (e.g. it ended before the requeue landed): resubmit as a user would.
        assert "stopping on signal" in job.log, job.out[-4000:]
        job = resubmit(cluster, tmp_path / "run")
        attempts += 1
    took = time.monotonic() - t0
    assert state == "COMPLETED", job.out[-4000:]
    logs = "".join(p.read_text() for p in sorted((tmp_path / "run").glob("job-*.log")))
    done = steps(logs)
    assert sorted(done) == list(range(1, total_steps + 1)), f"steps lost or repeated: {done}"
    stops = [int(m) for m in re.findall(r"fabrikit-train: stopping on signal SIGTERM at step (\d+)", logs)]
    assert stops, "the time-limit signal never arrived"
    resumed = [int(m) for m in re.findall(r"fabrikit-train: resuming from ckpt-\d+\.pt \(step (\d+)\)", logs)]
    # every stop is picked up by the next attempt at exactly that step (file order may not be
    # attempt order, see below, hence sets)
    assert sorted(resumed) == sorted(stops), (stops, resumed)
    restarts = len(list((tmp_path / "run").glob("job-*.r*.log")))
    # Attempts may span job ids (a resubmission gets a new one, and job-10 sorts before job-9),
    # so take the furthest summary rather than the last file's.
    assert max(int(s["global_steps"]) for s in train_lines(logs, "summary")) == total_steps
    print(f"\n[fault] time limit: {total_steps} steps over {attempts} submission(s) and {restarts} requeue(s) "
          f"in {took:.1f} s, none lost or repeated; stopped at steps {stops}")


def test_resume_skips_a_half_written_checkpoint(cluster, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    first = finish(cluster, submit(cluster, run_dir, 2, SMALL_TRAIN))
    assert first.state == "COMPLETED", first.out[-4000:]
    complete = sorted((run_dir / "checkpoints").glob("ckpt-*.pt"))[-1]
    newest_step = int(complete.stem.split("-")[1])
    half = run_dir / "checkpoints" / f"ckpt-{newest_step + 50:08d}.pt"
    half.write_bytes(complete.read_bytes()[: complete.stat().st_size // 2])  # no completion marker
    again: Job = finish(cluster, resubmit(cluster, run_dir))
    assert again.state == "COMPLETED", again.out[-4000:]
    assert f"resuming from {complete.name} (step {newest_step})" in again.out, again.out[-3000:]
    assert f"skipped {half.name}" in again.out
