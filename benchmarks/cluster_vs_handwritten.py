"""The same 2-node training job on the real test cluster, through run-multinode and through a
hand-written batch script in the seed guides' style, side by side in one run.

Both use the test image that build-image makes, the same bound host libfabric closure, the
same nodes and the same training arguments; each is timed from `sbatch` to COMPLETED.
Prints the median of each and their ratio (target <= 1.10).

Needs root and the packages of tools/ci-install.sh; starts and stops the test cluster of
tests/cluster itself (waiting for its lock if a test session holds it).
Usage: python3 benchmarks/cluster_vs_handwritten.py [--runs 3]
"""

from __future__ import annotations

import argparse
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "cluster"))

import rig  # noqa: E402  (tests/cluster/rig.py: the real-cluster helper)

from runner.elf_deps import closure  # noqa: E402
from runner.profile_loader import load_profile  # noqa: E402

PROFILE = ROOT / "tests" / "sites" / "testcluster.yaml"
JOB_ARGS = ["--synthetic-size", "256", "--batch-size", "16", "--width", "8", "--epochs", "2"]

# The seed's way: discover the head node, bind what is needed, call torchrun by hand.
HANDWRITTEN = """#!/bin/bash
#SBATCH --job-name=by-hand
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --time=00:10:00
#SBATCH --output=slurm-%j.out
set -euo pipefail
nodes=($(scontrol show hostnames "$SLURM_JOB_NODELIST"))
head_node=${{nodes[0]}}
head_node_ip=$(srun --nodes=1 --ntasks=1 -w "$head_node" hostname --ip-address | awk '{{print $1}}')
export APPTAINERENV_GLOO_SOCKET_IFNAME=eth0
srun --nodes=2 --ntasks-per-node=1 apptainer exec {binds} --bind "$PWD" {image} \\
  bash -c "export LD_LIBRARY_PATH=/opt/fabrikit/hostlib:\\${{LD_LIBRARY_PATH:-}}; \\
  torchrun --nnodes=2 --nproc_per_node=2 --rdzv_id=$SLURM_JOB_ID --rdzv_backend=c10d \\
  --rdzv_endpoint=$head_node_ip:29400 {job} {args}"
"""


def wait_done(cluster: rig.SlurmCluster, job_id: str) -> str:
    return cluster.wait(job_id, timeout=600)


def run_fabrikit(cluster: rig.SlurmCluster, workdir: Path, n: int) -> float:
    run_dir = workdir / f"fabrikit-{n}"
    argv = [sys.executable, "-c", "from runner.cli import run_multinode_main; run_multinode_main()",
            "--profile", str(PROFILE), "--nodes", "2", "--run-dir", str(run_dir), "--", "train_ddp.py", *JOB_ARGS]
    start = time.perf_counter()
    out = subprocess.run(argv, capture_output=True, text=True, env=cluster.env, check=True).stdout
    job_id = re.search(r"submitted job (\d+)", out).group(1)
    state = wait_done(cluster, job_id)
    took = time.perf_counter() - start
    if state != "COMPLETED":
        raise SystemExit(f"fabrikit job {job_id} ended {state}; see {run_dir}")
    return took


def run_by_hand(cluster: rig.SlurmCluster, workdir: Path, n: int, script_text: str) -> float:
    run_dir = workdir / f"hand-{n}"
    run_dir.mkdir()
    (run_dir / "job.sbatch").write_text(script_text)
    start = time.perf_counter()
    job_id = cluster.sbatch(run_dir / "job.sbatch", cwd=run_dir)
    state = wait_done(cluster, job_id)
    took = time.perf_counter() - start
    if state != "COMPLETED":
        raise SystemExit(f"hand-written job {job_id} ended {state}; see {run_dir}")
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    missing = rig.missing_prerequisites()
    if missing:
        print("cannot start the test cluster: " + "; ".join(missing), file=sys.stderr)
        return 2
    profile = load_profile(str(PROFILE), is_path=True).profile
    image = profile.container.image
    build = subprocess.run([sys.executable, "-c", "from runner.cli import build_image_main; build_image_main()",
                            "--profile", str(PROFILE)], capture_output=True, text=True)
    if build.returncode != 0:
        print(f"build-image failed: {build.stderr.strip()}", file=sys.stderr)
        return 2
    libs = closure(profile.host_libraries.names, list(profile.host_libraries.search_path)).found
    binds = " ".join(f"--bind {shlex.quote(src)}:/opt/fabrikit/hostlib/{name}:ro" for name, src in libs.items())
    cluster = rig.SlurmCluster(rig.ClusterSettings.from_env())
    cluster.acquire_lock(timeout=1800)
    cluster.install_emergency_teardown()
    try:
        cluster.up()
        with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
            workdir = Path(tmp)
            job = workdir / "jobs"
            subprocess.run(["cp", "-r", str(ROOT / "jobs"), str(job)], check=True)
            script = HANDWRITTEN.format(binds=binds, image=shlex.quote(image), job=shlex.quote(str(job / "train_ddp.py")),
                                        args=" ".join(JOB_ARGS))
            run_fabrikit(cluster, workdir, 0)  # warm the page cache for both
            ours, hand = [], []
            for n in range(1, args.runs + 1):
                ours.append(run_fabrikit(cluster, workdir, n))
                hand.append(run_by_hand(cluster, workdir, n, script))
    finally:
        cluster.teardown()
    m_ours, m_hand = statistics.median(ours), statistics.median(hand)
    print(f"run-multinode (2 nodes, sbatch -> COMPLETED): median {m_ours:.2f} s  ({', '.join(f'{t:.2f}' for t in ours)})")
    print(f"hand-written batch script:                 median {m_hand:.2f} s  ({', '.join(f'{t:.2f}' for t in hand)})")
    print(f"ratio {m_ours / m_hand:.3f} (target <= 1.10)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
