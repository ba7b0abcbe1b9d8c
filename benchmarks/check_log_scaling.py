"""How `fabrikit check-log` scales with the number of hosts and with log size.

Three measurements, of logs written to a temporary directory, side by side in one run:

1. 16,384 hosts x 1 process (one line each, all with the same pid, as containers give),
   named as Cray pads them (`nid000042`, one length) and as most clusters do (`gpu42`: names
   of several lengths, which the cut-host repair relates through its suffix index; it was
   quadratic in them, 5.8 s, until 2026-11-24); and 65,536 such hosts, the number of
   processes check-log keeps (MAX_PROCESSES). `fabrikit check-log --json` as a fresh process
   (what a user runs; its wall and CPU seconds) and the analysis in-process
   (`check_files(...).to_json()`). Target: under 1 s for 16,384; linear beyond.
2. Seven ~200 MB NCCL_DEBUG=INFO logs: a long job (64 ranks' init, then collective calls as
   NCCL_DEBUG_SUBSYS=COLL prints them, and training lines); a training job (the same init,
   then every rank's `[rankN]: epoch ... step ... loss` lines, as torchrun prints them);
   copies of one 16-rank job's log (how big test logs are often made: its copies are
   counted, not read); a failing job (the same init, then nothing but WARNs, each rank's
   links failing: requests with their own addresses, sockets to their own peers, so that
   most lines differ; the log a user most wants checked); an InfiniBand job (each rank's
   init, then NCCL >= 2.19's line for each queue pair it connects, `NET/IB: NCCL Dev 0
   IbDev 0 ... qpn ... fifoRkey=0x...`, interleaved: until 2026-11-24 each such line took
   the full parse, 45 us); and a dense one (the init of tens of thousands of ranks on 8-GPU
   nodes, OFI/cxi, every channel line: a third of its lines must be parsed), also with
   each line after its own clock, as kubectl --timestamps gives it (no two lines' prefixes
   are the same text: the prefix cache and channel runs look past the clock). Each is
   analysed in-process (as `fabrikit check-log` does: with hyperscan on logs over 16 MiB
   where it is installed, as it is with fabrikit on Linux x86_64; beside it, with Python's
   regex passes only, and as a fresh `check-log --json` process, interpreter start and
   loading hyperscan's database from the cache included; its first compile is printed
   apart) and
   compared with "the time of reading it":
   `for line in f` over the file opened in binary mode (Python's own buffered line
   splitting, the cheapest way a Python program can see every line). Two more floors are
   printed for scale: reading the file in 1 MiB blocks (no line splitting at all) and
   reading its lines as text (`open(path, errors="replace")`: decoded, as most log readers
   do). All are interleaved over --runs rounds; medians are printed, and the ratios to the
   line read, in CPU seconds (what the work costs: on a shared machine a process's wall
   time also counts the time it waits for a core) and in wall seconds. Target: about 1; the
   dense log shows the cost per parsed line.
3. Peak memory (VmHWM) of a fresh process analysing each 200 MB log, beside that of a
   process that only imports the analyser: it must not grow with the log's size, only with
   its number of processes (each one's state is capped, and so is their number).

Usage: python3 benchmarks/check_log_scaling.py [--runs 3] [--megabytes 200] [--keep DIR]
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def hosts_log(path: Path, hosts: int = 16384, name: str = "nid{:06d}") -> None:
    """One line per host, every host with the same pid (containers). `name`: Cray's padded
    `nid000042` (one length), or `gpu42` (names of several lengths, which the cut-host
    repair must relate through its suffix index: a name that is another's tail)."""
    with open(path, "w") as f:
        for i in range(hosts):
            f.write(f"{name.format(i)}:4242:4242 [0] NCCL INFO NET/OFI Selected Provider is "
                    "cxi (found 8 nics)\n")


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


def clocked_log(src: Path, path: Path, megabytes: int) -> None:
    """`src`'s lines, each after its own clock as kubectl's (or Docker's) --timestamps writes
    it, `2024-12-04T05:27:39.074123456Z `, until the file reaches `megabytes`."""
    target = megabytes << 20
    with open(src) as f, open(path, "w") as out:
        for n, line in enumerate(f):
            out.write(f"2024-12-04T{n // 3600000 % 24:02d}:{n // 60000 % 60:02d}:"
                      f"{n // 1000 % 60:02d}.{n % 1000:03d}{n * 7919 % 1000000:06d}Z {line}")
            if n % 4096 == 0 and out.tell() >= target:
                break


def job_init(nodes: int, gpn: int) -> str:
    """The init lines of a `nodes` x `gpn` job, one rank after the other."""
    return "".join(rank_block(n, local, nodes, gpn) for n in range(nodes) for local in range(gpn))


def init_then_rounds(path: Path, megabytes: int, init: str,
                     round_lines: Callable[[int], Iterable[str]]) -> None:
    """Write a job's `init` lines, then `round_lines(i)` for i = 0, 1, ... until the file
    reaches `megabytes`."""
    target = megabytes << 20
    with open(path, "w") as f:
        f.write(init)
        i = 0
        while f.tell() < target:
            f.write("".join(line + "\n" for line in round_lines(i)))
            i += 1


def long_job_log(path: Path, megabytes: int, nodes: int = 16, gpn: int = 4) -> int:
    """A long training job's log: the init of `nodes` x `gpn` ranks, then every rank's
    collective calls (NCCL_DEBUG_SUBSYS=COLL, what makes NCCL logs big) and training lines,
    until the file reaches `megabytes`. Returns the number of ranks."""
    def step_lines(step: int) -> Iterator[str]:
        for rank in range(nodes * gpn):
            node, local = divmod(rank, gpn)
            yield (f"nid{node:06d}:{30000 + local}:{30000 + local} [{local}] NCCL INFO AllReduce: "
                   f"opCount {step:x} sendbuff 0x7f3a5c000000 recvbuff 0x7f3a5c000000 count "
                   f"25557032 datatype 7 op 0 root 0 comm 0x55d0c0{rank:06x} [nranks={nodes * gpn}]"
                   " stream 0x55d0c1a3e2b0")
        yield (f"[rank0]: step {step} loss {2.5 - step / 1e5:.5f} lr 0.0010 images/s "
               f"{5100 + step % 7}")

    init_then_rounds(path, megabytes, job_init(nodes, gpn), step_lines)
    return nodes * gpn


def training_log(path: Path, megabytes: int, nodes: int = 4, gpn: int = 4) -> int:
    """A training job's log: the init of `nodes` x `gpn` ranks, then each rank's training
    lines (`[rankN]: ...`, torchrun's prefix) until the file reaches `megabytes`."""
    init_then_rounds(path, megabytes, job_init(nodes, gpn), lambda step: (
        f"[rank{r}]: epoch {step // 500} step {step} loss {2.5 - step / 1e5:.5f} "
        f"lr 0.00100 grad_norm {0.9 + r / 100:.3f} images/s {5100 + (step + r) % 7}"
        for r in range(nodes * gpn)))
    return nodes * gpn


def warn_flood_log(path: Path, megabytes: int, nodes: int = 16, gpn: int = 4) -> int:
    """A failing job's log: the init of `nodes` x `gpn` ranks (OFI/cxi), then every rank's
    WARNs as its links fail, until the file reaches `megabytes`: aws-ofi-nccl's requests
    completing with an error (each with its own address), and the proxy's sockets to dead
    peers closing (each peer's own). Most lines differ. Returns the number of ranks."""
    def round_lines(i: int) -> Iterator[str]:
        for rank in range(nodes * gpn):
            node, local = divmod(rank, gpn)
            peer = (node + 1 + i % (nodes - 1)) % nodes
            head = f"nid{node:06d}:{30000 + local}:{30100 + local} [{local}]"
            if (i + rank) % 3:
                yield (f"{head} nccl_ofi_rdma.cpp:{1200 + local} NCCL WARN NET/OFI Request "
                       f"0x7f{(i * 7919 + rank * 104729) % 16 ** 8:08x} completed with error. "
                       f"RC: {5 + i % 2}. Error: 5 (Input/output error). Completed length: 0")
            else:
                yield (f"{head} misc/socket.cc:{500 + local} NCCL WARN socketProgress: "
                       f"Connection closed by remote peer nid{peer:06d}-hsn0<{50000 + local}>")

    init_then_rounds(path, megabytes, job_init(nodes, gpn), round_lines)
    return nodes * gpn


def ib_connections_log(path: Path, megabytes: int, nodes: int = 16, gpn: int = 4) -> int:
    """An InfiniBand job's log (NCCL 2.21): each rank's init, then the line NCCL prints for
    each IB queue pair it connects (`NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn ... fifoRkey=
    0x...`; connections are made as the job first talks to each peer, so they come
    interleaved, thousands in a big job), until the file reaches `megabytes`. Returns the
    number of ranks."""
    ranks = nodes * gpn
    heads = [f"gpu{r // gpn:04d}:{40000 + r % gpn}:{40000 + r % gpn} [{r % gpn}] NCCL INFO "
             for r in range(ranks)]
    init = "".join(
        f"{p}NCCL version 2.21.5+cuda12.4\n{p}NET/Plugin: Could not find: libnccl-net.so. "
        f"Using internal network plugin.\n{p}NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB "
        f"[RO]; OOB ib0:10.1.{r // gpn // 250}.{r // gpn % 250}<0>\n{p}Using network IB\n"
        f"{p}comm 0x5611c0{r:06x} rank {r} nRanks {ranks} nNodes {nodes} localRanks {gpn} "
        f"localRank {r % gpn} MNNVL 0\n{p}ncclCommInitRank comm 0x5611c0{r:06x} rank {r} "
        f"nranks {ranks} cudaDev {r % gpn} nvmlDev {r % gpn} busId {r % gpn + 1}000 commId "
        "0x7d2f61c1d2e7a3b5 - Init COMPLETE\n" for r, p in enumerate(heads))
    init_then_rounds(path, megabytes, init, lambda i: (
        f"{heads[(i * 7 + k * 13) % ranks]}NET/IB: NCCL Dev {k % 2} IbDev {k % 2} Port 1 "
        f"qpn {(i * 1009 + k * 37) % 262144} mtu 5 query_ece={{supported=1, vendor_id="
        f"0x2c9, options=0x30000002, comp_mask=0x0}} GID 3 (0/{(i * 31 + k) % 65536:x}"
        f"FFFF0000) fifoRkey=0x{(i * 7919 + k) % 16 ** 6:x} fifoLkey=0x"
        f"{(i * 104729 + k) % 16 ** 6:x}" for k in range(ranks)))
    return ranks


def copies_log(path: Path, megabytes: int, nodes: int = 2, gpn: int = 8) -> int:
    """One `nodes` x `gpn` job's init log, copied until the file reaches `megabytes`."""
    one = job_init(nodes, gpn)
    with open(path, "w") as f:
        f.write(one * max(1, (megabytes << 20) // len(one)))
    return nodes * gpn


class Timer:
    """Wall and CPU seconds of one measured call (CPU: this process, or its children)."""

    def __init__(self, children: bool = False) -> None:
        self.children = children

    def _cpu(self) -> float:
        if self.children:
            ru = resource.getrusage(resource.RUSAGE_CHILDREN)
            return ru.ru_utime + ru.ru_stime
        return time.process_time()

    def __enter__(self) -> "Timer":
        self.t0, self.c0 = time.perf_counter(), self._cpu()
        return self

    def __exit__(self, *exc) -> None:
        self.wall, self.cpu = time.perf_counter() - self.t0, self._cpu() - self.c0


def read_lines(path: Path) -> Timer:
    """The baseline: every line of the file as a Python object (binary, no decoding)."""
    with Timer() as t, open(path, "rb") as f:
        for _ in f:
            pass
    return t


def read_blocks(path: Path) -> Timer:
    with Timer() as t, open(path, "rb") as f:
        while f.read(1 << 20):
            pass
    return t


def read_text_lines(path: Path) -> Timer:
    with Timer() as t, open(path, encoding="utf-8", errors="replace") as f:
        for _ in f:
            pass
    return t


def analyse(path: Path, scan_engine: str = "auto") -> Timer:
    """check-log's analysis in this process, JSON included (`auto`: as `fabrikit check-log`
    runs it, with hyperscan on logs over 16 MiB where it is installed)."""
    from runner.check_log_cmd import check_files

    with Timer() as t:
        check_files([str(path)], scan_engine=scan_engine).to_json()
    return t


def analyse_python(path: Path) -> Timer:
    """The same with Python's regex passes only (no hyperscan): side by side."""
    return analyse(path, "python")


def cli(path: Path) -> Timer:
    """`check-log --json` as a fresh process (`fabrikit check-log`'s own entry module)."""
    with Timer(children=True) as t:
        subprocess.run([sys.executable, "-m", "runner.check_log_cmd", "--json", str(path)],
                       stdout=subprocess.DEVNULL, check=False, cwd=ROOT)
    return t


def peak_rss_mb(path: Path | None) -> float:
    """Peak RSS (VmHWM) of a fresh process that analyses `path` (None: that only imports).
    Not getrusage: Linux carries a parent's peak RSS into its forked child across exec."""
    code = ("import sys\n"
            "from runner.check_log_cmd import check_files\n"
            "import runner.nccl_log\n"
            "if sys.argv[1:]:\n"
            "    check_files(sys.argv[1:]).to_json()\n"
            "print(open('/proc/self/status').read().split('VmHWM:')[1].split()[0])\n")
    out = subprocess.run([sys.executable, "-c", code, *([str(path)] if path else [])],
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout
    return int(out.split()[-1]) / 1024  # KiB


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--megabytes", type=int, default=200)
    parser.add_argument("--keep", type=Path, default=None, help="write the logs here, keep them")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="check-log-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    # A fresh `check-log` process byte-compiles nothing when .pyc files are there (with
    # PYTHONDONTWRITEBYTECODE set, as on these machines, an editable checkout would compile
    # every runner module on every start; a regular pip install ships them compiled).
    compileall.compile_dir(str(ROOT / "runner"), quiet=1)
    # hyperscan's compiled database is kept in the user's cache: the fresh processes below
    # load it from a cache of the benchmark's own, filled before the first round
    os.environ["FABRIKIT_CACHE_DIR"] = str(work / "cache")
    try:
        smalls = ((work / "hosts-16384.log", "nid000042", 16384, "nid{:06d}"),
                  (work / "hosts-16384-unpadded.log", "gpu42", 16384, "gpu{}"),
                  (work / "hosts-65536-unpadded.log", "gpu42", 65536, "gpu{}"))
        dense = work / f"dense-{args.megabytes}mb.log"
        long = work / f"long-{args.megabytes}mb.log"
        training = work / f"training-{args.megabytes}mb.log"
        copies = work / f"copies-{args.megabytes}mb.log"
        warns = work / f"warns-{args.megabytes}mb.log"
        ib_qps = work / f"ib-connections-{args.megabytes}mb.log"
        sizes = work / f"dense-{args.megabytes}mb.txt"  # its nodes and ranks
        clocked = work / f"dense-kubectl-{args.megabytes}mb.log"
        for small, _, hosts, name in smalls:  # (--keep: a log that is there is reused)
            if not small.exists():
                hosts_log(small, hosts, name)
        if not all(p.exists() for p in (long, training, copies, sizes)):
            long_job_log(long, args.megabytes)
            training_log(training, args.megabytes)
            copies_log(copies, args.megabytes)
            sizes.write_text("%d %d\n" % big_log(dense, args.megabytes))
        if not clocked.exists():
            clocked_log(dense, clocked, args.megabytes)
        if not warns.exists():
            warn_flood_log(warns, args.megabytes)
        if not ib_qps.exists():
            ib_connections_log(ib_qps, args.megabytes)
        nodes, ranks = (int(x) for x in sizes.read_text().split())
        from runner import fast_scan
        from runner.nccl_log import MAX_PROCESSES

        floors = (("read lines", read_lines), ("read blocks", read_blocks),
                  ("read text lines", read_text_lines), ("check-log", analyse),
                  ("  Python passes", analyse_python), ("  fresh process", cli))
        bigs = ((long, "long job: 64 ranks' init, then collective and training lines"),
                (training, "training job: 16 ranks' init, then [rankN]: training lines"),
                (copies, "copies of one 16-rank job's init log"),
                (warns, "failing job: 64 ranks' init, then their WARNs as links fail"),
                (ib_qps, "IB job: 64 ranks' init, then the line of each queue pair they "
                 "connect"),
                (dense, f"dense: the init of {ranks:,} ranks on {nodes:,} nodes"),
                (clocked, "the dense log's lines as kubectl --timestamps gives them, each "
                 "after its own clock"))
        cli(smalls[0][0]), analyse(smalls[0][0]), cli(long)  # warm caches, imports, hyperscan
        for big, _ in bigs:
            read_lines(big)
        t_cli: dict[Path, list[Timer]] = {x[0]: [] for x in smalls}
        t_small: dict[Path, list[Timer]] = {x[0]: [] for x in smalls}
        t_big: dict[Path, dict[str, list[Timer]]] = {b: {k: [] for k, _ in floors}
                                                     for b, _ in bigs}
        for _ in range(args.runs):
            for small, *_ in smalls:
                t_cli[small].append(cli(small))
                t_small[small].append(analyse(small))
            for big, _ in bigs:
                for name, fn in floors:
                    t_big[big][name].append(fn(big))
        med = statistics.median

        def m(ts: list[Timer], what: str) -> float:
            return med(getattr(t, what) for t in ts)

        if fast_scan.available():
            from runner import nccl_log

            os.environ["FABRIKIT_CACHE_DIR"] = str(work / "cold-cache")
            shutil.rmtree(work / "cold-cache", ignore_errors=True)
            with Timer() as t_hs:
                fast_scan._compiled.cache_clear()
                fast_scan.finder(nccl_log._FAST_PATTERNS, nccl_log._FAST_CONFIRM)
            with Timer() as t_load:
                fast_scan._compiled.cache_clear()
                fast_scan.finder(nccl_log._FAST_PATTERNS, nccl_log._FAST_CONFIRM)
            print(f"check-log runs its passes with hyperscan on logs over "
                  f"{nccl_log.FAST_SCAN_AFTER_BYTES >> 20} MiB (on a pipe: past that much); "
                  f"its database is compiled in {t_hs.wall:.3f} s the first time, then loaded "
                  f"from the user's cache in {t_load.wall:.3f} s (the fresh-process rows load "
                  "it; the in-process rows have it already)")
        else:
            print("hyperscan is not installed (pip install 'fabrikit[fast]'): check-log runs "
                  "its passes with Python's regex engine, so `check-log` = `Python passes`")
        for small, like, hosts, _ in smalls:
            print(f"{hosts:,} hosts x 1 process, named like {like} ({os.path.getsize(small) / 1e6:.1f}"
                  f" MB, one shared pid), median of {args.runs}"
                  + (" (target < 1 s):" if hosts <= 16384 else
                     f" (the cap: {MAX_PROCESSES:,} processes are kept):"))
            print(f"  check-log --json, fresh process: {m(t_cli[small], 'cpu'):.2f} s CPU, "
                  f"{m(t_cli[small], 'wall'):.2f} s wall")
            print(f"  analysis + JSON, in-process:     {m(t_small[small], 'cpu'):.2f} s CPU, "
                  f"{m(t_small[small], 'wall'):.2f} s wall")
        for big, what in bigs:
            size = os.path.getsize(big) / 1e6
            t = t_big[big]
            print(f"{size:.0f} MB log ({what}), median of {args.runs} interleaved rounds:")
            for name, _ in floors:
                r_cpu = med(a.cpu / b.cpu for a, b in zip(t[name], t["read lines"]))
                r_wall = med(a.wall / b.wall for a, b in zip(t[name], t["read lines"]))
                print(f"  {name:16} {m(t[name], 'cpu'):6.2f} s CPU {m(t[name], 'wall'):6.2f} s wall"
                      f"   ratio to read lines: {r_cpu:5.1f} CPU {r_wall:5.1f} wall"
                      + (f"   ({size / m(t[name], 'cpu'):.0f} MB/s CPU)" if "read" not in name
                         else ""))
        base = peak_rss_mb(None)
        print(f"peak RSS: import only {base:.0f} MB; analysing the long log "
              f"{peak_rss_mb(long):.0f} MB, the dense log {peak_rss_mb(dense):.0f} MB "
              f"(the state of its {ranks:,} ranks)")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
