"""Local mode for real: N torchrun agents on this machine, c10d on 127.0.0.1, gloo on CPU."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runner.local_launch import STOP_GRACE_S
from tests.helpers import cli, require_module, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _torch() -> None:
    require_module("torch", "pip install torch==2.13.0 (tools/ci-install.sh)")

PROCESS_GROUP_TIMEOUT_S = 600  # jobs/jobenv.py: init_process_group's default collective timeout
# A small, quick training job: a few steps of the default model on a tiny synthetic set.
SMALL = ["--synthetic-size", "128", "--batch-size", "16", "--width", "8", "--epochs", "2"]


def marked_processes(run_dir: Path) -> list[int]:
    """PIDs still carrying this run's agent marker (agents and their workers)."""
    needle = f"FABRIKIT_LOCAL_AGENT={run_dir.resolve()}:".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/environ", "rb") as fh:
                    if any(v.startswith(needle) for v in fh.read().split(b"\0")):
                        pids.append(int(entry))
            except OSError:
                pass
    return pids


def logged_steps(path: Path) -> list[int]:
    return [int(m.group(1)) for m in re.finditer(r"fabrikit-train: step=(\d+) ", path.read_text())]


def start(run_dir: Path, *args: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-c", "from runner.cli import run_multinode_main; run_multinode_main()",
            "--site", "local", "--run-dir", str(run_dir), *args]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_nodes_train_and_print_the_summary(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    started = time.monotonic()
    result = cli("--site", "local", "--nodes", "2", "--run-dir", str(run_dir), "--", "train_ddp.py", *SMALL,
                 timeout=300)
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr[-2000:]
    summary = [line for line in result.stdout.splitlines() if "fabrikit-train: summary" in line]
    assert summary and summary[0].startswith("[node1] "), result.stdout[-2000:]
    assert "nodes=2 procs_per_node=1 world_size=2" in summary[0]
    assert "fabrikit-train: summary" in (run_dir / "node1.log").read_text()  # rank 0 is on node 1
    assert (run_dir / "node2.log").is_file()
    assert json.loads((run_dir / "launch.json").read_text())["nodes"] == 2
    assert (run_dir / "jobs" / "train_ddp.py").is_file()
    print(f"2-node local training run: {elapsed:.1f} s")


def test_four_nodes(tmp_path: Path) -> None:
    result = cli("--site", "local", "--nodes", "4", "--run-dir", str(tmp_path / "run"), "--", "train_ddp.py",
                 "--synthetic-size", "64", "--batch-size", "8", "--width", "8", "--epochs", "1", timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "nodes=4 procs_per_node=1 world_size=4" in result.stdout


def test_allreduce_bench_and_probe_run_through_the_same_command(tmp_path: Path) -> None:
    bench = cli("--site", "local", "--nodes", "2", "--run-dir", str(tmp_path / "bench"), "--", "allreduce_bench.py",
                "--max-bytes", "65536", "--iters", "3", "--warmup", "1", timeout=300)
    assert bench.returncode == 0, bench.stderr[-2000:]
    assert re.search(r"fabrikit-allreduce: summary world_size=2 .*wrong=0", bench.stdout), bench.stdout[-2000:]
    probe = cli("--site", "local", "--nodes", "2", "--run-dir", str(tmp_path / "probe"), "--", "env_probe.py",
                timeout=300)
    assert probe.returncode == 0, probe.stderr[-2000:]
    records = [json.loads(line.split("fabrikit-probe: ", 1)[1]) for line in probe.stdout.splitlines()
               if "fabrikit-probe: " in line]
    assert sorted(r["rank"] for r in records) == [0, 1]


def test_killing_one_agent_fails_the_run_fast_and_names_the_node(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = start(run_dir, "--nodes", "2", "--", "train_ddp.py", *SMALL, "--epochs", "50", "--log-every-step")
    try:
        wait_for(lambda: (run_dir / "node1.log").exists() and logged_steps(run_dir / "node1.log"), 180, "a step")
        agents = [pid for pid in marked_processes(run_dir)
                  if Path(f"/proc/{pid}/environ").read_bytes().find(f"{run_dir.resolve()}:2".encode()) >= 0
                  and "torch.distributed.run" in Path(f"/proc/{pid}/cmdline").read_text()]
        assert agents, "node2's agent not found"
        killed_at = time.monotonic()
        os.kill(agents[0], signal.SIGKILL)
        # "Fast" means: run-multinode notices the dead agent and stops the others (grace
        # STOP_GRACE_S, then SIGKILL) instead of waiting for node1's training to hit the
        # process group's 10-minute collective timeout. Half of that is the deadline.
        _, stderr = proc.communicate(timeout=PROCESS_GROUP_TIMEOUT_S / 2)
        took = time.monotonic() - killed_at
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert re.search(r"^fabrikit: node2 \(agent pid \d+\) was killed by SIGKILL; stopping the other nodes$",
                     stderr, re.M), stderr
    assert stderr.strip().splitlines()[-1].startswith("run-multinode: error: node2 failed (was killed by SIGKILL)")
    wait_for(lambda: not marked_processes(run_dir), STOP_GRACE_S + 30, "no process of the run left")
    print(f"failure detected and every agent stopped {took:.1f} s after node2 was killed")


def test_sigterm_checkpoints_and_resume_continues_the_step_count(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    job = ["train_ddp.py", *SMALL, "--epochs", "3", "--log-every-step", "--checkpoint-every", "1",
           "--step-sleep", "0.3", "--checkpoint-dir", str(run_dir / "checkpoints"), "--resume"]
    proc = start(run_dir, "--nodes", "2", "--", *job)
    try:
        wait_for(lambda: (run_dir / "node1.log").exists() and len(logged_steps(run_dir / "node1.log")) >= 3,
                 180, "three steps")
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1 and "SIGTERM" in stderr, stderr
    first = logged_steps(run_dir / "node1.log")
    assert "stopping on signal SIGTERM" in (run_dir / "node1.log").read_text()
    assert not marked_processes(run_dir)

    resumed = cli("--resume", str(run_dir), timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    all_steps = logged_steps(run_dir / "node1.log")
    second = all_steps[len(first):]
    assert second and second[0] == first[-1] + 1, (first, second)
    summary = re.search(r"global_steps=(\d+)", resumed.stdout)
    assert summary, resumed.stdout[-2000:]
    total = int(summary.group(1))
    assert sorted(all_steps) == list(range(1, total + 1)), "a step was repeated or skipped"
    assert "resuming from ckpt-" in resumed.stdout
