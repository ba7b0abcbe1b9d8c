"""Overhead of `run-multinode --site local` over a hand-written torchrun command line.

Runs the same short job (2 nodes x 1 process, a few training steps) both ways, interleaved,
and prints the median wall time of each and their ratio (target <= 1.05):
  A: run-multinode --site local --nodes 2 --run-dir DIR -- train_ddp.py ARGS
  B: what a user would type: two `torchrun --nnodes=2 --rdzv_backend=c10d
     --rdzv_endpoint=127.0.0.1:PORT ...` in the background of one shell, then `wait`.
Usage: python3 benchmarks/local_launch_overhead.py [--runs 5]
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from runner.local_launch import free_port  # noqa: E402  (same port choice for both sides)

JOB_ARGS = ["--max-steps", "4", "--synthetic-size", "128", "--batch-size", "16", "--width", "8", "--epochs", "1"]


def run_fabrikit(workdir: Path, n: int) -> float:
    run_dir = workdir / f"fabrikit-{n}"
    argv = [shutil.which("run-multinode") or "run-multinode", "--site", "local", "--nodes", "2",
            "--run-dir", str(run_dir), "--", "train_ddp.py", *JOB_ARGS]
    start = time.perf_counter()
    result = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        for log in sorted(run_dir.glob("node*.log")):
            result.stderr += f"\n--- {log.name}:\n" + log.read_text()[-2000:]
    _check(result, "run-multinode")
    return time.perf_counter() - start


def run_by_hand(workdir: Path, n: int) -> float:
    out = workdir / f"hand-{n}"
    out.mkdir()
    port = free_port()
    job = " ".join(shlex.quote(a) for a in [str(ROOT / "jobs" / "train_ddp.py"), *JOB_ARGS])
    torchrun = (f"OMP_NUM_THREADS=1 FABRIKIT_RUN_DIR={shlex.quote(str(out))} {shlex.quote(sys.executable)} "
                f"-m torch.distributed.run --nnodes=2 --nproc_per_node=1 --rdzv_backend=c10d "
                f"--rdzv_endpoint=127.0.0.1:{port} --rdzv_id=hand{n}")
    script = f"{torchrun} {job} & {torchrun} {job} & wait"
    start = time.perf_counter()
    _check(subprocess.run(["bash", "-c", script], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True),
           "hand-written torchrun")
    return time.perf_counter() - start


def _check(result: subprocess.CompletedProcess[str], what: str) -> None:
    if result.returncode != 0:
        raise SystemExit(f"{what} failed (exit {result.returncode}):\n{result.stderr[-3000:]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        run_fabrikit(workdir, 0)  # warm the page cache for both
        ours, hand = [], []
        for n in range(1, args.runs + 1):
            ours.append(run_fabrikit(workdir, n))
            hand.append(run_by_hand(workdir, n))
    m_ours, m_hand = statistics.median(ours), statistics.median(hand)
    print(f"run-multinode --site local --nodes 2: median {m_ours:.2f} s  ({', '.join(f'{t:.2f}' for t in ours)})")
    print(f"hand-written torchrun x2:             median {m_hand:.2f} s  ({', '.join(f'{t:.2f}' for t in hand)})")
    print(f"ratio {m_ours / m_hand:.3f} (target <= 1.05)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
