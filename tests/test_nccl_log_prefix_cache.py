"""check-log's prefix cache: the lines of a prefix seen before skip the full parse of their
prefix (runner.nccl_log: `_cached_proc`, `LogAnalyser._take_cached`). It must only save
work: each process ends in the state that the full parse of every line gives it.

The reference here is the analyser with `_cached_proc` replaced by a test double that never
finds a prefix (every line then takes the full parse in `_piece`); it runs beside the real
analyser on the same logs, and everything each process holds is compared.
"""

from __future__ import annotations

import io
import random
import re
import sys
from pathlib import Path
from unittest import mock

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import nccl_logs as L  # noqa: E402

from runner import nccl_log  # noqa: E402
from runner.nccl_log import LogAnalyser, _another_record  # noqa: E402

# Records that name NCCL in their message (IB's line for each queue pair it connects, the
# version), that hold a `=` or `lib`, WARNs with and without a source, and records of other
# levels: each inserted among a rank's own lines, under its own prefix.
EXTRA = [
    "INFO NET/IB: NCCL Dev {d} IbDev {d} Port 1 qpn {q} mtu 5 LID 0 subnet-prefix 0 FLID 0 "
    "fifoRkey=0x{r:x} fifoLkey=0x{r:x}",
    "INFO NET/IB: NCCL Dev {d} IbDev {d} Port 1 qpn {q} mtu 5 query_ece={{supported=1, "
    "vendor_id=0x15b3, options=0x30000002, comp_mask=0x0}} GID 3 (0/FFFF0000) fifoRkey=0x{r:x}",
    "INFO NCCL version 2.21.5+cuda12.4",
    "WARN NCCL version 2.21.5+cuda12.4",
    "INFO NCCL_IB_HCA set to mlx5_{d}",
    "INFO cudaDriverVersion 12060 NCCL_SOCKET_IFNAME=ib0 FI_PROVIDER=cxi",
    "INFO x=1 y=2 lib NCCL Dev",
    "transport/shm.cc:{q} NCCL WARN Error: failed to open shared memory segment",
    "transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.0.0.{d}<{q}> with "
    "error 12, opcode 0, len 0, vendor err 129 (Recv)",
    "misc/socket.cc:{d} NCCL WARN socketProgress: Connection closed by remote peer h{d}<{q}>",
    "init.cc:263 NCCL WARN Cuda failure 'initialization error'",
    "WARN NET/OFI Request 0x{r:x} completed with error. RC: 5",
    "TRACE NET/IB : NCCL Dev {d} trace",
    "ABORT comm 0x{r:x} aborted",
]
RANKS = [L.ib_rank, L.ofi_cxi_rank, L.socket_rank, L.ofi_verbs_then_ib, L.legacy_rank,
         L.rccl_rank, L.ofi_efa_rank, L.failed_rank]


def _job_with(seed: int, ranks: list, extra: list[str], nodes: list[int],
              inserts: tuple[int, int]) -> list[str]:
    """A random job of one of `ranks`, each rank's lines with `inserts` (a range) records of
    `extra` inserted under its own prefix, then interleaved (even seeds) or one rank after
    another."""
    rnd = random.Random(seed)
    streams = L.job(rnd.choice(ranks), nodes=rnd.choice(nodes), gpn=rnd.choice([1, 2, 4]))
    out = []
    for stream in streams:
        stream = list(stream)
        head = stream[0].split(" NCCL ")[0]
        for _ in range(rnd.randint(*inserts)):
            x = rnd.choice(extra).format(d=rnd.randrange(4), q=rnd.randrange(99999),
                                         r=rnd.randrange(1 << 24))
            sep = " NCCL " if x.startswith(("INFO", "WARN", "TRACE", "ABORT")) else " "
            stream.insert(rnd.randint(0, len(stream)), head + sep + x)
        out.append(stream)
    return [x for s in out for x in s] if seed % 2 else L.interleave(out, seed)


def _log(seed: int) -> bytes:
    lines = _job_with(seed, RANKS, EXTRA, [1, 2, 3], (2, 14))
    if seed % 3 == 0:
        lines = L.cut_merge(lines, seed)
    return ("\n".join(lines) + "\n").encode()


def _analysed(data: bytes, name: str | None = None, double: object = None) -> tuple[dict, str]:
    """Every slot of every process, and the JSON, after reading `data`; with `name`, the
    module's `name` replaced by the test double `double` meanwhile."""
    a = LogAnalyser(scan_engine="python")
    if name:
        with mock.patch.object(nccl_log, name, double):
            a.feed_stream(io.BytesIO(data), "job.log")
    else:
        a.feed_stream(io.BytesIO(data), "job.log")
    procs = {key: {f: getattr(p, f) for f in p.__slots__} for key, p in a._procs.items()}
    return procs, a.result().to_json()


def _assert_same(got: tuple[dict, str], want: tuple[dict, str]) -> None:
    assert got[0].keys() == want[0].keys()
    for key in got[0]:
        assert got[0][key] == want[0][key], key
    assert got[1] == want[1]


def _state(data: bytes, full_parse: bool) -> tuple[dict, str]:
    if full_parse:
        return _analysed(data, "_cached_proc", lambda *args, **kw: None)
    return _analysed(data)


@pytest.mark.parametrize("seed", range(60))
def test_every_process_ends_as_the_full_parse_leaves_it(seed: int):
    data = _log(seed)
    _assert_same(_state(data, False), _state(data, True))


def test_the_logs_above_do_take_the_fast_path():
    """(else the comparison above would compare the full parse with itself)"""
    calls = []
    real = nccl_log.LogAnalyser._take_cached

    def counted(self, *args):
        calls.append(args[1])
        return real(self, *args)

    with mock.patch.object(nccl_log.LogAnalyser, "_take_cached", counted):
        for seed in range(20):
            _state(_log(seed), False)
    assert sum("NCCL Dev" in t for t in calls) > 50  # IB's queue pairs' lines
    assert sum(" NCCL WARN " in t and ".cc:" in t for t in calls) > 20  # WARNs with a source


def test_a_big_ib_jobs_queue_pair_lines_take_the_fast_path():
    """NCCL >= 2.19 prints a line for each IB queue pair it connects (`NET/IB: NCCL Dev 0
    IbDev 0 Port 1 qpn ...`), thousands in a big job's log. They name NCCL and hold `=`,
    which once sent each one to the full parse, whose search for a second record costs
    tens of microseconds a line (a 43 MB log of them took 8.8 s). Once a process's prefix
    is known, none of its lines is parsed in full again."""
    lines = []
    for r in range(8):
        node, local = divmod(r, 4)
        p = f"gpu{node:03d}:{300 + local}:{300 + local} [{local}] NCCL INFO "
        lines += [p + f"NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.{node}<0>",
                  p + "Using network IB",
                  p + f"comm 0x5{r} rank {r} nRanks 8 nNodes 2 localRanks 4 localRank {local} "
                  "MNNVL 0"]
    rnd = random.Random(1)
    for _ in range(500):
        r = rnd.randrange(8)
        node, local = divmod(r, 4)
        lines.append(f"gpu{node:03d}:{300 + local}:{300 + local} [{local}] NCCL INFO NET/IB: "
                     f"NCCL Dev {local % 2} IbDev {local % 2} Port 1 qpn {rnd.randrange(99999)} "
                     f"mtu 5 LID 0 subnet-prefix 0 FLID 0 fifoRkey=0x{rnd.randrange(1 << 24):x}")
    parsed = []
    real = nccl_log.LogAnalyser._piece

    def counted(self, text, src):
        parsed.append(text)
        return real(self, text, src)

    a = LogAnalyser(scan_engine="python")
    with mock.patch.object(nccl_log.LogAnalyser, "_piece", counted):
        a.feed_stream(io.BytesIO(("\n".join(lines) + "\n").encode()), "job.log")
    v = a.result()
    assert v.to_dict()["transport"] == "ib" and v.to_dict()["world_size"] == 8
    assert len(parsed) <= 8  # each process's first line only
    assert a._nccl_lines == len(lines)


@pytest.mark.parametrize("text,another", [
    ("h:1:1 [0] NCCL INFO NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn 5", False),
    ("h:1:1 [0] NCCL INFO NCCL version 2.21.5", False),
    ("h:1:1 [0] NCCL INFO Channel 00/0 : 0h:2:2 [1] NCCL INFO Using network IB", True),
    ("h:1:1 [0] NCCL INFO NCCL version 2.21.5h:2:2 [1] NCCL WARN NET/IB : x", True),
    ("h:1:1 [0] NCCL INFO NET/IB: NCCL Dev 0 and NCCL TRACE y", True),
    ("h:1:1 [0] NCCL INFO abc", False),
])
def test_another_record_is_a_level_after_a_second_nccl(text: str, another: bool):
    i = text.find(" NCCL ")
    assert _another_record(text, text.find("NCCL ", i + 6)) is another


def test_a_record_spliced_into_a_queue_pair_line_is_still_read():
    """A line that names NCCL in its message and holds another process's record: the
    second record is read as its own (a splice), not as part of the first's message."""
    head = ["h1:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>",
            "h2:2:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.2<0>"]
    spliced = ("h1:1:1 [0] NCCL INFO NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn 7 mtu 5 "
               "fifoRkey=0x1 h2:2:2 [0] NCCL INFO Using network IB")
    a = LogAnalyser(scan_engine="python")
    a.feed_stream(io.BytesIO(("\n".join(head + [spliced]) + "\n").encode()), "job.log")
    ranks = {r["host"]: r for r in a.result().to_dict()["ranks"]}
    assert ranks["h2"]["network"] == "IB"
    assert ranks["h1"]["network"] is None  # (the cut record says nothing of h1's choice)


# Queue pairs' lines in the forms `_Proc.take`'s shortcut must treat as the full parse does:
# before and after a choice, of IB's plugins and aliases, at other levels, with `FI_`, in a
# table's cells or quotes, after a `[Rank N]` tag, and NCCL 2.21's virtual device.
QP_FORMS = [
    "INFO NET/IB: NCCL Dev {d} IbDev {d} Port 1 qpn {q} mtu 5 LID 0 fifoRkey=0x{r:x}",
    "INFO NET/IB : IbDev {d} Port 1 qpn {q} set_ece={{supported=1, vendor_id=0x15b3}}",
    "INFO NET/IBext_v8: NCCL Dev {d} IbDev {d} Port 1 qpn {q} mtu 5",
    "INFO NET/gIB: NCCL Dev {d} IbDev {d} Port 1 qpn {q} mtu 5",
    "INFO NET/IB: NCCL MergedDev {d} IbDev {d} Port 1 qpn {q} mtu 5",
    "INFO NET/IB : Made virtual device [{d}] name=mlx5_0+mlx5_1 speed=200000 ndevs=2",
    "WARN NET/IB: NCCL Dev {d} IbDev {d} Port 1 qpn {q} mtu 5",
    "TRACE NET/IB: NCCL Dev {d} IbDev {d} Port 1 qpn {q} mtu 5",
    "INFO NET/IB: NCCL Dev {d} IbDev {d} Port 1 qpn {q} FI_PROVIDER=verbs",
    "INFO NET/IB: NCCL Dev {d} IbDev {d} Port 1 qpn {q} mtu 5 | |",
    "INFO NET/IB: NCCL Dev {d} IbDev {d} Port 1 qpn {q} mtu 5`",
    "INFO [Rank {d}] NET/IB: NCCL Dev {d} IbDev {d} Port 1 qpn {q} mtu 5",
    "INFO NET/IB : No device found.",
    "INFO NET/IB : GPU Direct RDMA Enabled for HCA {d} 'mlx5_{d}'",
]
QP_RANKS = [L.ib_rank, L.socket_rank, L.ofi_cxi_rank, L.failed_rank, L.ofi_verbs_then_ib,
            L.legacy_rank]


def _qp_log(seed: int) -> bytes:
    return ("\n".join(_job_with(seed, QP_RANKS, QP_FORMS, [1, 2], (4, 30))) + "\n").encode()


class _CountedRegex:
    """The real `_QP_ADDS_NOTHING`, counting the lines it lets `take` skip."""

    def __init__(self, rx):
        self.rx, self.skipped = rx, 0

    def match(self, text):
        m = self.rx.match(text)
        self.skipped += m is not None
        return m


@pytest.mark.parametrize("seed", range(40))
def test_a_queue_pairs_line_after_a_choice_leaves_a_process_as_the_full_parse_does(seed: int):
    """`_Proc.take` returns at once for IB's line of a queue pair once the process holds a
    weak choice (thousands of such lines a process in a big IB job): each process must end
    as parsing each of those lines leaves it. The reference turns the shortcut off with a
    test double that never matches."""
    data = _qp_log(seed)
    _assert_same(_analysed(data), _analysed(data, "_QP_ADDS_NOTHING", re.compile(r"(?!)")))


def test_the_queue_pair_logs_above_do_take_the_shortcut():
    """(else the comparison above would compare the full parse with itself)"""
    rx = _CountedRegex(nccl_log._QP_ADDS_NOTHING)
    for seed in range(40):
        _analysed(_qp_log(seed), "_QP_ADDS_NOTHING", rx)
    assert rx.skipped > 200
