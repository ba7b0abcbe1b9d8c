"""Soak: local multi-node training runs under CPU load must all succeed.

Runs `run-multinode --site local` with 2 and with 4 nodes, interleaved, RUNS times each, while
busy-loop processes (one per core, nice 5) keep every core busy, the way a loaded CI machine
is. A run passes when run-multinode exits 0 and the run's metrics.jsonl holds its summary
record; any failure is shown with the end of its node logs. Prints one line per run and, per
node count: runs, failures, and the min / median / max wall time, plus the median of the
4-node runs over the 2-node ones measured side by side.

The failure this guards against: a rank aborting at exit ("terminate called without an active
exception", SIGABRT) after training had finished, when a gloo thread outlived the process
group (see jobs/jobenv.py ProcessGroups.destroy).

Usage: python3 benchmarks/soak_local_runs.py [--runs 20] [--nodes 2,4] [--burners N] [--keep DIR]
Exit status: 0 when no run failed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The jobs of the tests that failed this way: tests/test_local_launch.py::test_four_nodes and
# the 2-node run of tests/test_report.py's fixture.
JOBS = {
    2: ["--epochs", "2", "--synthetic-size", "128", "--batch-size", "16", "--width", "8", "--blocks", "1,1",
        "--threads", "1"],
    4: ["--synthetic-size", "64", "--batch-size", "8", "--width", "8", "--epochs", "1"],
}
DEFAULT_JOB = JOBS[2]


def _run_multinode() -> list[str]:
    exe = shutil.which("run-multinode")
    return [exe] if exe else [sys.executable, "-c", "from runner.cli import run_multinode_main; run_multinode_main()"]


def start_burners(count: int) -> list[subprocess.Popen[bytes]]:
    """`count` processes that spin forever at nice 5 (slightly below the runs' priority)."""
    return [subprocess.Popen(["nice", "-n", "5", sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.kill()
    for proc in procs:
        proc.wait()


def one_run(nodes: int, run_dir: Path) -> tuple[bool, float, str]:
    """(passed, seconds, why it failed)."""
    argv = [*_run_multinode(), "--site", "local", "--nodes", str(nodes), "--run-dir", str(run_dir), "--",
            "train_ddp.py", *JOBS.get(nodes, DEFAULT_JOB)]
    start = time.perf_counter()
    result = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    seconds = time.perf_counter() - start
    summary = False
    metrics = run_dir / "metrics.jsonl"
    if metrics.is_file():
        summary = any(json.loads(line).get("event") == "summary" for line in metrics.read_text().splitlines() if line)
    if result.returncode == 0 and summary:
        return True, seconds, ""
    why = f"exit {result.returncode}, summary record {'present' if summary else 'missing'}\n{result.stderr[-1500:]}"
    for log in sorted(run_dir.glob("node*.log")):
        text = log.read_text(errors="replace")
        if "terminate called" in text:
            why += f"\n{log.name}: 'terminate called' found"
        why += f"\n--- {log.name} (end):\n" + "\n".join(text.splitlines()[-8:])
    return False, seconds, why


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="runs per node count")
    parser.add_argument("--nodes", default="2,4", help="comma-separated node counts, interleaved")
    parser.add_argument("--burners", type=int, default=os.cpu_count() or 2, help="busy-loop processes (default: one per core)")
    parser.add_argument("--keep", type=Path, default=None, help="keep the run directories here")
    args = parser.parse_args()
    counts = [int(n) for n in args.nodes.split(",")]
    times: dict[int, list[float]] = {n: [] for n in counts}
    failures: dict[int, int] = {n: 0 for n in counts}
    top = args.keep or Path(tempfile.mkdtemp(prefix="fabrikit-soak-"))
    burners = start_burners(args.burners)
    print(f"soak: {args.runs} runs each of {', '.join(f'{n} nodes' for n in counts)}, {args.burners} busy-loop "
          f"process(es) on {os.cpu_count()} core(s); run directories under {top}", flush=True)
    try:
        for i in range(1, args.runs + 1):
            for nodes in counts:
                passed, seconds, why = one_run(nodes, top / f"n{nodes}-{i:02d}")
                times[nodes].append(seconds)
                failures[nodes] += not passed
                print(f"run {i:2d} nodes={nodes} {'ok  ' if passed else 'FAIL'} {seconds:6.1f} s", flush=True)
                if not passed:
                    print("  " + why.replace("\n", "\n  "), flush=True)
    finally:
        stop(burners)
        if args.keep is None and not any(failures.values()):
            shutil.rmtree(top, ignore_errors=True)
    for nodes in counts:
        t = times[nodes]
        print(f"nodes={nodes}: runs {len(t)}, failures {failures[nodes]}, wall time min {min(t):.1f} s, "
              f"median {statistics.median(t):.1f} s, max {max(t):.1f} s")
    if len(counts) == 2 and all(times.values()):
        a, b = counts
        print(f"median {b}-node / {a}-node run time: {statistics.median(times[b]) / statistics.median(times[a]):.2f}")
    total = sum(failures.values())
    print(f"total: {sum(len(t) for t in times.values())} runs, {total} failed")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
