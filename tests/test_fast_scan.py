"""hyperscan runs check-log's trigger passes (runner/fast_scan.py): the same lines, the same
answer as Python's regex passes.

These tests run the real hyperscan (a dependency on Linux x86_64, else `pip install
'fabrikit[fast]'`; CI installs it). Where a test double stands in (hyperscan made to look missing), it is named so,
beside the real test of the same path.
"""

from __future__ import annotations

import io
import os

import pytest

from runner import fast_scan
from runner import nccl_log as N
from runner.nccl_log import LogAnalyser
from tests import nccl_logs as L
from tests.helpers import require_module
from tests.test_nccl_log_field import CASES, _events

HOW = "pip install -e . (Linux x86_64) or 'fabrikit[fast]'"


@pytest.fixture
def finder():
    require_module("hyperscan", HOW)
    return fast_scan.finder(N._FAST_PATTERNS, N._FAST_CONFIRM)


def _hit_lines(data: bytes, hits: list[int]) -> list[bytes]:
    """The lines the hits fall in (a finder gives some position inside each)."""
    starts = sorted({data.rfind(b"\n", 0, p) + 1 for p in hits})
    return [data[s:data.find(b"\n", s)] for s in starts]


# Lines at the edges of each pass: what hyperscan is given differently (FI_ without the
# lookbehind, the bare pass looser and confirmed), bounded repeats just past their bound,
# whitespace that must not carry a match onto the next line, text that is not ASCII.
EDGES = [
    b"nid000001:11:11 [0] NCCL INFO NET/OFI Selected Provider is cxi (found 4 nics)",
    b"nid000001:11:11 [0] NCCL INFO AllReduce: opCount 0 comm 0x55d0 [nranks=8]",  # none
    b"[rank3]: epoch 1 step 20 loss 2.3",  # none
    b"[rank3]: NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>",  # bare, one prefix
    b"[1,3]<stdout>:[rank3]: 2024-01-02T03:04:05.123Z Using network IB",  # three prefixes
    b"[a] [b] [c] [d] [e] [f] Using network IB",  # six prefixes: past {0,5}, looser only
    b"[a] [b] [c] [d] [e] Using network IB",  # five
    b"  | 2024-12-04T05:27:39.074Z |   NET/IB : Using [0]mlx5_0:1/RoCE",  # indent after a tag
    b"(RayWorkerWrapper pid=5419, ip=10.0.0.2) [rank1]:ncclSocketInit: connecting to address ",
    b"(worker1, rank=1, pid=27522, ip=10.105.0.4) Using network IB",  # Ray's tags
    b"(EngineCore_DP0 pid=812) INFO 03-21 14:01:57 vLLM is using nccl==2.21.5",  # none
    b"[" + b"x" * 81 + b"] Using network IB",  # a tag past its 80: looser form only
    b"[" + b"x" * 80 + b"] Using network IB",  # at its bound
    b"     12: Using network Socket",  # five spaces: past ` {0,4}`, then an indent
    b"    12: Using network Socket",
    b"1234567: NET/Socket : Using [0]eth0:10.1.1.1<0>",  # a task number past 6 digits
    b" | 2024-12-04T05:27:39.074Z | Using network AWS Libfabric",
    b"export FI_PROVIDER=cxi",
    b"FI_CXI_RDZV_THRESHOLD set",  # FI_ + a capital: the lookbehind's branch
    b"XFI_ only",  # none
    b"NCCL_IB_HCA=mlx5_0",
    b"gpu1:1:1 [0] INFO Using internal Network IB",  # NCCL <= 2.2
    b"gpu1:1:1 [0] include/socket.h:194 WARN Net : Connect to 10.0.0.2<5>",
    b"gpu1:1:1 [0] NCCL INFO init.cc:1234 -> 2",
    b"gpu1:1:1 [0] NCCL INFO transport/net_ib/[p2p.cc:648](https://p2p.cc:648/) -> 2",
    b"libfabric:1234:1700000000::cxi:core:cxip_nic_alloc():123<warn> oops",
    b"#  Rank  0 Group  0 Pid  1234 on gpu-a07 device  0 [0x07] NVIDIA A100",
    b"#",  # `#` then, on the next line, `Rank`: no match across the newline
    b"  Rank  1 Group  0 Pid  1235 on gpu-a08 device  0 [0x07] NVIDIA A100",
    b"Rank  2 Pid  1236 on gpu-a09 device  0",
    b"Channel 00/02 :    0   1   2   3",
    b"Ring 00 :&nbsp;&nbsp;0&nbsp;1",
    "Channel 01/02 :\u00a00\u00a01".encode(),
    b"NCCL version 2.23.4+cuda12.6",
    "r\u00e9seau NCCL WARN NET/OFI caf\u00e9".encode(),
    b"comm 0x55d0c0000001 rank 0 nranks 8 cudaDev 0 nvmlDev 0 busId 1000 - Init COMPLETE",
    b"ncclCommInitRank comm 0x1 rank 0 nranks 2 cudaDev 0 busId 0 - Init START",
    b"NCCL_PROTO set by environment to ^LL128",
    b"  WARN NCCL",  # none
    b"gn07:51320:51417 [0] NCCL INFO Channel 00/32 :    0",  # a ring of one rank, ...
    b"Ring 01 :&nbsp;0 \r",
    b"Channel 02/32 :    0 then text",  # ... not followed by more
    b"#   Using network Socket",  # a comment quoting the log
    b"# Using devices",  # none: nccl-tests' own
    b"INFO: Function: ofi_init Line: 686: NET/OFI Selected Provider is efa",  # aws-ofi-nccl's
    b"10.3.35.83: WARN: Function: main Line: 66: NET/OFI OFI NCCL failure: 2",  # ... under pdsh
    b"node:176:4360 [5] NCCL INFO CollNet 05/0 : 5 [receive] via COLLNET/SHARP/5/GDRDMA",
    b"  NET/IB : Using [0]rocep1s0f1:1/RoCE [RO]; OOB enp1s0f1np1:10.0.0.1<0>",  # indented
    b"\tUsing network IB",
    b"          Using network IB",  # past the indent's 8: a second indent
    b"Call to ibv_modify_qp failed with 110 Connection timed out, on dev mlx5_0:1,",
    b"ibv_modify_qp failed with 110 Connection timed out,",  # a write-up's cut of it
    b"ibv_devinfo lists no device",  # none
    b"[rank0]:[E724 06:56:39 ProcessGroupNCCL.cpp:1795] detected by watchdog at work: 89, last "
    b"enqueued NCCL work: 89, last completed NCCL work: 88.",  # PyTorch's count of NCCL work
    b"w3:2736:2736 [0] NCCL INFO init.cc:1558 (initTransportsRank) -> 1",  # NCCL >= 2.28
    b"transport/net.cc:1006 (sendProxyConnect) -> 2",  # ... quoted bare
    b"init.cc:1558 (initTransportsRank) ok",  # none
    b"h:1:1 [0] NCCL INFO socketPollConnect: connect to 10.0.0.2<43893> returned No route to "
    b"host, retrying (1/34) after sleep for 100 msec",  # a retry that names its peer
]


def test_the_same_lines_as_the_python_passes(finder):
    require_module("hyperscan", HOW)
    bodies = [b"\n".join(EDGES) + b"\n", b"\n".join(reversed(EDGES)) + b"\n"]
    bodies += [L.to_bytes(CASES[c]()) for c in sorted(CASES)]
    for body in bodies:
        for lo in (0, body.find(b"\n") + 1):  # a window may start at any line
            want = _hit_lines(body, N._pass_hits(body, lo, len(body)))
            got = _hit_lines(body, finder(body, lo, len(body)))
            assert got == want
    edges = _hit_lines(bodies[0], finder(bodies[0], 0, len(bodies[0])))
    missed = [e for e in EDGES if e not in edges]
    assert missed == [EDGES[1], EDGES[2], EDGES[5], EDGES[10], EDGES[11], EDGES[15],
                      b"XFI_ only", b"#", b"  WARN NCCL",
                      b"Channel 02/32 :    0 then text", b"# Using devices",
                      b"ibv_devinfo lists no device", b"init.cc:1558 (initTransportsRank) ok"]


def test_the_looser_bare_pass_is_confirmed(finder):
    # hyperscan is given the bare pass with its bounded repeats unbounded (a tenth of the
    # compile time); lines only that looser form matches are dropped by the exact pass
    require_module("hyperscan", HOW)
    body = b"start\n" + b"\n".join(EDGES) + b"\n"
    unconfirmed = fast_scan.finder(N._FAST_PATTERNS, {})
    loose = _hit_lines(body, unconfirmed(body, 0, len(body)))
    confirmed = _hit_lines(body, finder(body, 0, len(body)))
    only_loose = set(loose) - set(confirmed)
    assert only_loose == {b"[a] [b] [c] [d] [e] [f] Using network IB",
                          b"[" + b"x" * 81 + b"] Using network IB",
                          b"1234567: NET/Socket : Using [0]eth0:10.1.1.1<0>"}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("block", [64, 4096, 1 << 20])
def test_the_same_answer_as_the_python_passes(case, block):
    require_module("hyperscan", HOW)
    body = L.to_bytes(CASES[case](), crlf=case == "fallback", colour=case == "failed")
    body = body * 3 + b"\n".join(EDGES) + b"\n"  # copies (_repeat), then odd lines
    a = LogAnalyser(source="x", scan_engine="python")
    a.feed_stream(io.BytesIO(body), block_bytes=block)
    b = LogAnalyser(source="x", scan_engine="hyperscan")
    b.feed_stream(io.BytesIO(body), block_bytes=block)
    assert b._fast is not None and a._fast is None
    assert a.result().to_dict() == b.result().to_dict()
    assert _events(a) == _events(b) and a.repeated_bytes == b.repeated_bytes


def _big_body() -> bytes:
    return L.to_bytes(CASES["legacy-ofi-cloudwatch"]()) + L.to_bytes(CASES["failed"]()) * 2


def test_auto_switches_to_hyperscan_past_the_threshold(monkeypatch):
    require_module("hyperscan", HOW)
    body = _big_body()
    monkeypatch.setattr(N, "FAST_SCAN_AFTER_BYTES", len(body) // 3)
    a = LogAnalyser(source="x")  # auto
    a.feed_stream(io.BytesIO(body), block_bytes=4096)
    assert a._fast is not None and a.scan_engine == "auto"
    b = LogAnalyser(source="x", scan_engine="python")
    b.feed_stream(io.BytesIO(body), block_bytes=4096)
    assert a.result().to_dict() == b.result().to_dict() and _events(a) == _events(b)
    small = LogAnalyser(source="x")  # below the threshold: Python's passes
    small.feed_stream(io.BytesIO(body[:len(body) // 4]), block_bytes=4096)
    assert small._fast is None


def test_auto_without_hyperscan_reads_with_python_test_double(monkeypatch):
    # test double: hyperscan made to look missing (the real one is tested above); `auto`
    # must then read on with Python's passes, and `hyperscan` must say what is missing
    body = _big_body()
    monkeypatch.setattr(N, "FAST_SCAN_AFTER_BYTES", 0)
    monkeypatch.setattr(fast_scan, "available", lambda: False)
    a = LogAnalyser(source="x")
    a.feed_stream(io.BytesIO(body), block_bytes=4096)
    assert a._fast is None and a.scan_engine == "python"
    b = LogAnalyser(source="x", scan_engine="python")
    b.feed_stream(io.BytesIO(body), block_bytes=4096)
    assert a.result().to_dict() == b.result().to_dict()
    with pytest.raises(fast_scan.Unavailable, match=r"fabrikit\[fast\]"):
        LogAnalyser(source="x", scan_engine="hyperscan")


def test_an_unknown_engine_is_refused():
    with pytest.raises(ValueError, match="scan_engine must be one of auto, python, hyperscan"):
        LogAnalyser(source="x", scan_engine="re2")


def test_a_big_file_is_scanned_by_hyperscan_from_its_first_byte(tmp_path, monkeypatch):
    # check_files knows the files' sizes: past the threshold, hyperscan from the first byte
    # (a spy on LogAnalyser.expect_bytes records what it was told; the real finder runs)
    require_module("hyperscan", HOW)
    from runner.check_log_cmd import check_files

    body = _big_body()
    log = tmp_path / "job.log"
    log.write_bytes(body)
    monkeypatch.setattr(N, "FAST_SCAN_AFTER_BYTES", len(body))
    told: list[tuple[int, bool]] = []
    real = LogAnalyser.expect_bytes

    def spy(self, n):
        real(self, n)
        told.append((n, self._fast is not None))

    monkeypatch.setattr(LogAnalyser, "expect_bytes", spy)
    verdict = check_files([str(log), str(log)])
    assert told == [(2 * len(body), True)]
    assert verdict.to_dict() == check_files([str(log), str(log)], scan_engine="python").to_dict()
    check_files([str(log)], scan_engine="python")  # `python` is never switched
    assert told[-1] == (len(body), False)
    a = LogAnalyser(source="x")  # below the threshold nothing changes
    a.expect_bytes(len(body) - 1)
    assert a._fast is None


# --- the compiled database is kept in the user's cache (fast_scan._database) ---------------

@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache directory of this test's own; finders built before are forgotten."""
    require_module("hyperscan", HOW)
    monkeypatch.setenv("FABRIKIT_CACHE_DIR", str(tmp_path / "cache"))
    fast_scan._compiled.cache_clear()
    yield tmp_path / "cache"
    fast_scan._compiled.cache_clear()


def _fresh_finder():
    fast_scan._compiled.cache_clear()  # as a new process would: nothing compiled yet
    return fast_scan.finder(N._FAST_PATTERNS, N._FAST_CONFIRM)


def _same_hits_as_python(find) -> None:
    body = b"\n".join(EDGES) + b"\n" + L.to_bytes(CASES["legacy-ofi-cloudwatch"]())
    assert _hit_lines(body, find(body, 0, len(body))) == _hit_lines(
        body, N._pass_hits(body, 0, len(body)))


def _kept(cache) -> list:
    return sorted(cache.glob("check-log-*.hsdb"))


def test_the_compiled_database_is_kept_and_loaded_by_the_next_process(cache):
    _same_hits_as_python(_fresh_finder())
    [kept] = _kept(cache)
    assert (cache.stat().st_mode & 0o777) == 0o700 and not kept.stat().st_mode & 0o022
    assert fast_scan.load_cached(kept) is not None
    before = (kept.stat().st_mtime_ns, kept.read_bytes())
    _same_hits_as_python(_fresh_finder())  # loaded, not compiled and written again
    assert (kept.stat().st_mtime_ns, kept.read_bytes()) == before and _kept(cache) == [kept]


def test_a_kept_database_that_does_not_load_is_compiled_again(cache):
    _fresh_finder()
    [kept] = _kept(cache)
    good = kept.read_bytes()
    for bad in (b"", good[: len(good) // 2], b"not a database" * 100):
        kept.write_bytes(bad)
        kept.chmod(0o644)
        assert fast_scan.load_cached(kept) is None
        _same_hits_as_python(_fresh_finder())
        assert fast_scan.load_cached(kept) is not None  # replaced by one that loads


def test_a_database_others_could_have_written_is_not_loaded(cache):
    # no bytes but this user's own go to hyperscan's deserialiser
    _fresh_finder()
    [kept] = _kept(cache)
    kept.chmod(0o666)
    assert fast_scan.load_cached(kept) is None
    _same_hits_as_python(_fresh_finder())
    assert not kept.stat().st_mode & 0o022 and fast_scan.load_cached(kept) is not None
    if os.getuid() == 0:  # root can give it away: another user's file is not loaded
        os.chown(kept, 65534, 65534)
        assert fast_scan.load_cached(kept) is None


def test_a_cache_that_cannot_be_written_costs_only_the_compile(tmp_path, monkeypatch, cache):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("FABRIKIT_CACHE_DIR", str(blocker / "cache"))  # under a file
    _same_hits_as_python(_fresh_finder())
    assert blocker.read_text() == "" and not _kept(cache)


def test_the_cache_is_where_users_expect_it(monkeypatch, tmp_path):
    monkeypatch.delenv("FABRIKIT_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert fast_scan.cache_dir() == tmp_path / "xdg" / "fabrikit"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert fast_scan.cache_dir() == tmp_path / "home" / ".cache" / "fabrikit"
    monkeypatch.setenv("FABRIKIT_CACHE_DIR", str(tmp_path / "mine"))
    assert fast_scan.cache_dir() == tmp_path / "mine"
