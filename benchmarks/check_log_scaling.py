"""How `fabrikit check-log` scales with the number of hosts and with log size.

Two logs, written to a temporary directory, measured side by side in one run:

1. 16,384 hosts x 1 process (one line each, all with the same pid, as containers give):
   wall time of `fabrikit check-log --json` as a subprocess (what a user runs) and of the
   analysis in-process. Target: under 1 s.
2. Two ~200 MB NCCL_DEBUG=INFO logs: a long job (64 ranks' init, then collective calls as
   NCCL_DEBUG_SUBSYS=COLL prints them, and training lines) and a dense one (the init of tens
   of thousands of ranks on 8-GPU nodes, OFI/cxi, every channel line: a third of its lines
   must be parsed). For each, the in-process analysis (`check_files`) against the time to
   just read the file line by line in Python, interleaved over --runs rounds; the median
   ratio is printed (target: about 1 where few lines matter; the dense log shows the cost
   per parsed line).

Usage: python3 benchmarks/check_log_scaling.py [--runs 3] [--megabytes 200] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def hosts_log(path: Path, hosts: int = 16384) -> None:
    with open(path, "w") as f:
        for i in range(hosts):
            f.write(f"nid{i:06d}:4242:4242 [0] NCCL INFO NET/OFI Selected Provider is cxi "
                    "(found 8 nics)\n")


def rank_block(node: int, local: int, nodes: int, gpn: int = 8, channels: int = 32) -> str:
    """One rank's NCCL 2.23 + aws-ofi-nccl 1.6 init on Slingshot, as NCCL prints it."""
    rank, nranks = node * gpn + local, nodes * gpn
    host, pid = f"nid{node:06d}", 30000 + local
    p = f"{host}:{pid}:{pid} [{local}] NCCL INFO "
    q = f"{host}:{pid}:{pid + 41} [{local}] NCCL INFO "
    comm = f"0x55d0c0{rank:06x}"
    out = [
        f"{p}cudaDriverVersion 12060",
        f"{p}Bootstrap : Using hsn0:10.{node // 250 % 250}.{node % 250}.1<0>",
        f"{p}NCCL_PROTO set by environment to ^LL128",
        f"{p}NET/Plugin: Loaded net plugin AWS Libfabric (v6)",
        f"{p}NET/OFI Using aws-ofi-nccl 1.6.0",
        f"{p}NET/OFI Selected Provider is cxi (found 8 nics)",
        f"{p}Using network AWS Libfabric",
        f"{p}DMA-BUF is available on GPU device {local}",
        f"{p}ncclCommInitRank comm {comm} rank {rank} nranks {nranks} cudaDev {local} nvmlDev "
        f"{local} busId {local + 1}000 commId 0x9d2f61c1d2e7a3b5 - Init START",
        f"{p}Setting affinity for GPU {local} to ffffffff,ffffffff",
        f"{p}comm {comm} rank {rank} nRanks {nranks} nNodes {nodes} localRanks {gpn} "
        f"localRank {local} MNNVL 0",
        f"{p}Trees [0] {rank + 1}/-1/-1->{rank}->{rank - 1} [1] {rank + 1}/-1/-1->{rank}->{rank - 1}",
        f"{p}P2P Chunksize set to 131072",
    ]
    nxt, prv = (local + 1) % gpn, (local - 1) % gpn
    for ch in range(channels):
        out.append(f"{q}Channel {ch:02d}/0 : {rank}[{local}] -> {node * gpn + nxt}[{nxt}] "
                   "via P2P/CUMEM/read")
    if local in (0, gpn - 1):  # the ring leaves the node here
        peer = (rank + gpn) % nranks
        for ch in range(channels):
            out.append(f"{q}Channel {ch:02d}/0 : {peer}[{local}] -> {rank}[{local}] [receive] "
                       f"via NET/AWS Libfabric/{local // 2}/GDRDMA")
            out.append(f"{q}Channel {ch:02d}/0 : {rank}[{local}] -> {peer}[{local}] [send] "
                       f"via NET/AWS Libfabric/{local // 2}/GDRDMA")
    out += [
        f"{p}Connected all rings, use ring PXN 0 GDR 1",
        f"{p}Connected all trees",
        f"{p}threadThresholds 8/8/64 | 128/8/64 | 512 | 512",
        f"{p}32 coll channels, 32 collnet channels, 0 nvls channels, 32 p2p channels, "
        "32 p2p channels per peer",
        f"{p}ncclCommInitRank comm {comm} rank {rank} nranks {nranks} cudaDev {local} nvmlDev "
        f"{local} busId {local + 1}000 commId 0x9d2f61c1d2e7a3b5 - Init COMPLETE",
    ]
    if local == 0:
        out += [f"[rank{rank}]: step {s} loss {2.5 - s / 1000:.4f} lr 0.0010 "
                f"images/s {5100 + s % 7}" for s in range(0, 200, 10)]
    return "\n".join(out) + "\n"


def big_log(path: Path, megabytes: int) -> tuple[int, int]:
    """Write rank blocks until the file reaches `megabytes`; return (nodes, ranks)."""
    target = megabytes << 20
    gpn = 8
    nodes_total = max(2, target // (len(rank_block(0, 0, 2)) * 2 + 6 * len(rank_block(0, 1, 2))))
    written = ranks = nodes = 0
    with open(path, "w") as f:
        while written < target:
            for local in range(gpn):
                block = rank_block(nodes, local, nodes_total, gpn)
                f.write(block)
                written += len(block)
                ranks += 1
            nodes += 1
    return nodes, ranks


def long_job_log(path: Path, megabytes: int, nodes: int = 16, gpn: int = 4) -> int:
    """A long training job's log: the init of `nodes` x `gpn` ranks, then every rank's
    collective calls (NCCL_DEBUG_SUBSYS=COLL, what makes NCCL logs big) and training lines,
    until the file reaches `megabytes`. Returns the number of ranks."""
    target = megabytes << 20
    with open(path, "w") as f:
        for node in range(nodes):
            for local in range(gpn):
                f.write(rank_block(node, local, nodes, gpn))
        step = 0
        while f.tell() < target:
            lines = []
            for rank in range(nodes * gpn):
                node, local = divmod(rank, gpn)
                lines.append(
                    f"nid{node:06d}:{30000 + local}:{30000 + local} [{local}] NCCL INFO AllReduce: "
                    f"opCount {step:x} sendbuff 0x7f3a5c000000 recvbuff 0x7f3a5c000000 count "
                    f"25557032 datatype 7 op 0 root 0 comm 0x55d0c0{rank:06x} [nranks={nodes * gpn}]"
                    " stream 0x55d0c1a3e2b0")
            lines.append(f"[rank0]: step {step} loss {2.5 - step / 1e5:.5f} lr 0.0010 images/s "
                         f"{5100 + step % 7}")
            f.write("\n".join(lines) + "\n")
            step += 1
    return nodes * gpn


def read_lines(path: Path) -> float:
    start = time.perf_counter()
    with open(path, "rb") as f:
        for _ in f:
            pass
    return time.perf_counter() - start


def analyse(path: Path, cpu: list[float] | None = None) -> float:
    """Wall seconds of check-log's analysis in this process; its CPU seconds go to `cpu`
    (on a loaded machine the wall time also counts waiting for a core)."""
    from runner.check_log_cmd import check_files

    start, start_cpu = time.perf_counter(), time.process_time()
    check_files([str(path)]).to_json()
    if cpu is not None:
        cpu.append(time.process_time() - start_cpu)
    return time.perf_counter() - start


def cli(path: Path) -> float:
    """`check-log --json` as a fresh process (`fabrikit check-log`'s own entry module)."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "runner.check_log_cmd", "--json", str(path)],
                   stdout=subprocess.DEVNULL, check=False, cwd=ROOT)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--megabytes", type=int, default=200)
    parser.add_argument("--keep", type=Path, default=None, help="write the logs here, keep them")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="check-log-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        small = work / "hosts-16384.log"
        hosts_log(small)
        dense = work / f"dense-{args.megabytes}mb.log"
        nodes, ranks = big_log(dense, args.megabytes)
        long = work / f"long-{args.megabytes}mb.log"
        long_ranks = long_job_log(long, args.megabytes)
        cli(small), read_lines(dense), read_lines(long)  # warm page cache and imports
        t_cli, t_small, c_small = [], [], []
        t_read = {dense: [], long: []}
        t_ana = {dense: [], long: []}
        for _ in range(args.runs):
            t_cli.append(cli(small))
            t_small.append(analyse(small, c_small))
            for big in (long, dense):
                t_read[big].append(read_lines(big))
                t_ana[big].append(analyse(big))
        med = statistics.median
        print(f"16,384 hosts x 1 process ({os.path.getsize(small) / 1e6:.1f} MB, one shared pid): "
              f"check-log --json {med(t_cli):.2f} s as a subprocess, analysis {med(t_small):.2f} s "
              f"in-process ({med(c_small):.2f} s CPU) (median of {args.runs}; target < 1 s)")
        for big, what in ((long, f"long job: {long_ranks} ranks' init, then collective and "
                                 "training lines"),
                          (dense, f"dense: the init of {ranks:,} ranks on {nodes:,} nodes")):
            size = os.path.getsize(big) / 1e6
            ratios = [a / r for a, r in zip(t_ana[big], t_read[big])]
            print(f"{size:.0f} MB log ({what}): read lines {med(t_read[big]):.2f} s, check-log "
                  f"analysis {med(t_ana[big]):.2f} s ({size / med(t_ana[big]):.0f} MB/s), "
                  f"ratio {med(ratios):.1f} (median of {args.runs} interleaved rounds)")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
