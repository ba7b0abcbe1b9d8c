"""Start-up cost of `run-multinode --dry-run` against the floor of any click+yaml CLI.

Prints the median wall time of each command over interleaved runs and their ratio
(target: <= 1.5). Both commands run side by side in one process tree, so machine noise
affects them alike. Usage: python3 benchmarks/dryrun_startup.py [--runs 21] [--site olivia]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time


def wall(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--site", default="olivia")
    args = parser.parse_args()
    tool = shutil.which("run-multinode")
    if tool is None:
        print("run-multinode is not on PATH: pip install -e . first", file=sys.stderr)
        return 2
    ours = [tool, "--site", args.site, "--nodes", "2", "--dry-run"]
    floor = [sys.executable, "-c", "import click, yaml"]
    for argv in (ours, floor):  # warm the page cache
        wall(argv)
    t_ours, t_floor = [], []
    for _ in range(args.runs):
        t_ours.append(wall(ours))
        t_floor.append(wall(floor))
    m_ours, m_floor = statistics.median(t_ours), statistics.median(t_floor)
    print(f"run-multinode --site {args.site} --nodes 2 --dry-run: median {m_ours * 1000:.1f} ms over {args.runs} runs")
    print(f"python -c 'import click, yaml':                 median {m_floor * 1000:.1f} ms over {args.runs} runs")
    print(f"ratio {m_ours / m_floor:.2f} (target <= 1.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
