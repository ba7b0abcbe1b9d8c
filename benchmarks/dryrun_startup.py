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
from pathlib import Path


def wall(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--site", default="olivia")
    args = parser.parse_args()
    # The console script beside this interpreter: a PATH lookup may find a wrapper (a pyenv
    # shim runs bash and pyenv first) and measure that instead.
    beside = Path(sys.executable).parent / "run-multinode"
    tool = str(beside) if beside.exists() else shutil.which("run-multinode")
    if tool is None:
        print("run-multinode is not on PATH: pip install -e . first", file=sys.stderr)
        return 2
    ours = [tool, "--site", args.site, "--nodes", "2", "--dry-run"]
    floor = [sys.executable, "-c", "import click, yaml"]
    # Byte-compile the package first, as a regular (non-editable) pip install does: with
    # PYTHONDONTWRITEBYTECODE set (it is on these machines) an editable checkout would
    # otherwise recompile every runner module on every start, and click/yaml have their .pyc.
    import compileall

    compileall.compile_dir(str(Path(__file__).resolve().parent.parent / "runner"), quiet=1)
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
