"""Read NCCL_DEBUG=INFO output and say which network NCCL used, per rank and for the job.

The worst NCCL failure is silent: with no usable plugin or driver NCCL falls back to TCP
sockets (5-40x slower), and on GH200 + Slingshot with NCCL >= 2.27 the LL128 protocol can
return wrong all-reduce results. This module turns a job's log into a `LogVerdict` that names
the transport between nodes (`ofi` with its libfabric provider, `ib`, `socket`, `failed` with
the transport it was trying, `none` when no traffic crossed nodes) and raises stable warning
codes. RCCL logs (ROCm: `RCCL version`, aws-ofi-rccl's `NET/OFI` lines, `NET/UCX`) are read
the same way.

Design:

- Pure: no file, environment or subprocess access. Callers hand in lines (str or bytes), or a
  binary stream, and optionally the expected fabric and the job's environment.
- One pass, linear time, bounded memory: a stream is read in blocks and each block is
  scanned by a few regex passes that start with a literal (`_PASS_PATTERNS`), so the engine
  skips at C speed to the few lines that matter; only those are decoded and parsed, the rest
  is counted. A pass runs only on blocks that hold a byte its matches need (`_GATES`),
  and searches a window of _SEARCH_BYTES only when reading reaches it, so text taken in one
  step is not searched: a run of one process's channel lines
  (`_channel_run`), and text that repeats the text before it (a log concatenated from
  copies of one job's log, one line written over and over: `_repeat` reads two copies and,
  if the second only moved counts and line numbers, adds that change once per remaining
  copy). `feed()` (one line) applies the same passes to its line, so line-by-line and block
  reads give the same answer. Where hyperscan is installed (a dependency on Linux x86_64),
  a stream past FAST_SCAN_AFTER_BYTES has the same passes run by it in one go
  (runner/fast_scan.py): the same lines are found, several times faster. Lines are cut at
  MAX_LINE_CHARS, processes capped at MAX_PROCESSES, every per-process list is capped, and
  a stream that turns out to be binary (`/dev/zero`) is stopped after a few MiB.
- Processes are told apart by NCCL's own `host:pid:tid [cudaDev]` prefix (hosts may be
  redacted, `<cluster_name>`, or empty) and mapped to a global rank by `comm 0x... rank N
  nranks M` lines (the communicator with the most ranks wins). Outer prefixes written by
  srun `--label`, Open MPI `--tag-output`, torchrun, PyTorch, CloudWatch exports or fabrikit's
  local launcher are skipped; lines whose `host:pid:tid` or even `NCCL INFO` was stripped are
  grouped by those outer prefixes.
- What a rank used is decided in this order: the networks its channel/ring lines go through
  (`via NET/X/...`), the `Using network X` / `Using internal Network X` (`external`, a
  plugin's) / `Assigned NET plugin X` lines, and only then the last device line (`NET/IB :
  Using [0]mlx5_0:1/IB`, `NET/Socket : Using [0]hsn0`, `NET/OFI Selected provider is cxi`).
  NCCL 2.4 prints a `NET/Socket` line for its bootstrap on every rank, so a later device line
  wins over it.
- A transport chosen and then given up during init (a WARN and an error chain such as
  `init.cc:NNN -> 2`, with no `Init COMPLETE` after the choice) makes the rank `failed`,
  keeping the transport it tried as `attempted`; after an `Init COMPLETE` only a network
  error NCCL passed up does (NCCL >= 2.22 connects at the first collective), not a CUDA
  fault or a bad argument of a running job. A link that was up and then broke (a request
  that completed with an error, after init or with no init line in the paste) is no failed
  init: the rank keeps the transport it ran on, with `link_error` and the `link-failed`
  warning. Probing noise (`include/net.h:24 -> 2`,
  `NET/OFI No eligible providers`) is not a failure; a plugin that fails before NCCL picks
  another network is a fallback, not a failure.
- Inter-node traffic: `nNodes N` (NCCL >= 2.18) decides where printed; else `via NET/...`
  channel lines, unless one host (one name, one address) holds every rank of the
  communicator; else host names (unless redacted), bootstrap addresses and communicator
  coverage. A job whose communicators all live on one host gets transport `none`.
- Tolerant: ANSI colours, CR/CRLF, NUL and non-UTF-8 bytes, lines that two writers spliced
  (`...Using netnode2:7:7 [1] NCCL INFO ...`: the cut first part is dropped), one process's
  records joined by blanks (a quote-reply of a rendered paste), truncated last lines. A
  value is only taken when the text after it shows it is complete.
- Deterministic: the verdict depends only on each process's own line order, so any
  interleaving of the same per-rank logs gives the same answer.

Line formats are the ones listed in shared/reference/fabric-facts.md ("NCCL_DEBUG=INFO lines
that tell which transport is used", the aws-ofi-nccl section, "Real-world NCCL logs").
"""

from __future__ import annotations

import gc
import html
import json
import operator
import re
import sys
from collections import Counter
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from functools import cached_property, lru_cache, wraps
from typing import IO, Any, Callable, Iterable, Iterator, Mapping, NamedTuple, Sequence, TypeVar

from runner import fabrics, fast_scan
from runner.fast_regex import WRITTEN_FORMS, searched_fast
from runner.bounded_lines import (  # the shared reader; pass MAX_LINE_CHARS
    PieceAfterCR, iter_stream_lines, last_piece)
from runner.errors import UserError

__all__ = [
    "Transport",
    "Fabric",
    "Verdict",
    "LogWarning",
    "RankReport",
    "LogVerdict",
    "LogAnalyser",
    "StreamStats",
    "analyse",
    "iter_stream_lines",
    "WARNING_CODES",
]


class Transport(Enum):
    """The network NCCL used between nodes."""

    OFI = "ofi"  # a libfabric net plugin (aws-ofi-nccl/rccl): "AWS Libfabric"/"Libfabric"/"OFI"
    IB = "ib"  # verbs: NCCL's internal IB/RoCE transport, an IBext/SHARP plugin, or UCX
    SOCKET = "socket"  # TCP: NCCL's internal socket transport or a TCP plugin (FastSocket)
    FAILED = "failed"  # network init failed (see `attempted` for what it was trying)
    NONE = "none"  # no inter-node traffic (single host), or no network selection seen


# The fabric the job runs on, as the caller (site profile) knows it: the kinds whose transport
# this check judges (runner.fabrics.CHECKED), e.g. Fabric.SLINGSHOT = "slingshot". What a kind
# means (its fast path, hints, warnings) is asked of runner.fabrics, once per analysis.
Fabric = Enum("Fabric", [(name.upper(), name) for name in fabrics.CHECKED], module=__name__)
# No fabric given nor inferred: every transport is the expected one, nothing kind-specific is
# warned about (a socket job is reported with a note that a fallback cannot be told).
_NO_FABRIC = fabrics.FabricKind(name="", title="unknown", checked=False)


def _kind_of(fabric: Fabric | None) -> fabrics.FabricKind:
    """What runner.fabrics knows about `fabric` (resolved once per verdict, never per rank)."""
    return fabrics.get(fabric._value_) if fabric is not None else _NO_FABRIC


def _checked(kind: fabrics.FabricKind | None) -> Fabric | None:
    """The Fabric of an inferred kind, if this check judges that kind."""
    return Fabric(kind.name) if kind is not None and kind.checked else None


class Verdict(Enum):
    """What the job as a whole did. `exit_code` of `LogVerdict` maps it to 0/1."""

    FAST = "fast"  # every rank with a transport used the fabric's expected (fast) path
    FALLBACK = "fallback"  # at least one rank used a slower path than the fabric offers
    FAILED = "failed"  # at least one rank's network init failed
    SINGLE_NODE = "single-node"  # all ranks on one node: the network carried no traffic
    NONE = "none"  # no network selection seen at all


# Stable warning codes, in the order warnings are reported. New codes go at the end.
WARNING_CODES: tuple[str, ...] = (
    "network-not-found",
    "net-init-failed",
    "socket-fallback",
    "ofi-slow-provider",
    "plugin-missing",
    "ib-no-device",
    "ibverbs-no-driver",
    "mixed-transports",
    "ll128-hazard",
    "mixed-nccl-versions",
    "provider-unknown",
    "no-gdrdma",
    "unknown-network",
    "ranks-without-transport",
    "ranks-missing",
    "no-transport",
    "plugin-failed",
    "binary-input",
    "input-cut",
    "processes-dropped",
    "link-failed",
    "init-failed-in-node",
    "docker-bridge",
)

# --------------------------------------------------------------------------------------------
# Limits that keep memory bounded whatever the input.

MAX_LINE_CHARS = 16384  # longer lines are cut (NCCL's own buffer is 1024 bytes)
MAX_PROCESSES = 65536
BLOCK_BYTES = 1 << 20  # feed_stream reads this much at a time, and tells text from binary
SCAN_BLOCKS = 4  # plain text is scanned this many blocks at a time (more copies of a period)
# ... and up to this many while the text is copies of a period: each scan block reads its
# first two copies before it counts the rest, so bigger blocks read fewer; for other text
# 4 MiB (which stays in the CPU's caches while it is counted and scanned) is faster
MAX_SCAN_BLOCKS = 16
BINARY_STOP_BYTES = 4 << 20  # this many bytes of binary data in a row end a stream
_MAX_ITEMS = 16  # devices, interfaces, nets per process
_MAX_NCCL_WARNINGS = 5  # raw NCCL WARN messages kept per process
_MAX_ENV = 64  # echoed env settings kept per process (and for the job)
_MAX_RANKS_SEEN = 1024  # world ranks one process drives (one process may drive 8 GPUs)
# A channel from one rank to another through P2P (NVLink, PCIe) or shared memory: both ranks
# on one node (`Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM`, `Ring 00 : 0[0] -> 1[1] via
# P2P/IPC`, `via SHM/direct/direct`, NCCL 2.4's `via direct shared memory`; on a page that
# escaped its arrow, `-&gt;`). Read only by LogAnalyser.p2p_joins, on demand.
_LOCAL_CHANNEL = re.compile(rb"(?:Channel|Ring) \d+(?:/\d+)? : +(\d+)(?:\[[^\]\n]*\])? -(?:>|&gt;) (\d+)"
                            rb"(?:\[[^\]\n]*\])? via (?:P2P|SHM|direct shared memory)")
# Communicators up to this size are judged by those channels: one node's GPUs. (Nodes of
# NVLink domains that span trays, GB200 NVL72's P2P between nodes, print nNodes, which is
# read first.)
_P2P_WORLD_MAX = 16
_MAX_HOST = 255  # a host name longer than a DNS name is not one
_MAX_WRAPPED = 4  # indented lines taken as the message of a WARN line that has none
# ... or whose message is only the network's tag, the rest wrapped onto lines that a paste
# did not indent (`transport/net_ib.cc:2470 NCCL WARN NET/IB:`, then `Got completion from
# peer 10.77.0.1<35162> with status=12 ...`, a DGX Spark pair's alltoall notes)
_WARN_TAG_ONLY = re.compile(r"NCCL WARN NET/\w+ ?:$")
_MAX_SEEN_LINES = 4096  # parsed lines remembered per block, to notice text that repeats
_MAX_SEEN_LINE = 1024  # bytes: longer lines are not remembered (NCCL's own are shorter)
_MAX_REPEAT_PROCS = 8192  # beyond this many processes, repeated text is read as usual
_GALLOP_BYTES = 1 << 16  # counting copies compares at most about twice this at a time
_SEARCH_BYTES = 1 << 18  # the passes search this much text at a time (_scan_range)

# --------------------------------------------------------------------------------------------
# Regular expressions. Each one is written so that a value cut short by truncation is not
# taken (the text after the value must be there).

_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
_CTRL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# A run of channel lines of one process (see LogAnalyser._channel_run): the line just parsed,
# then lines with the same prefix and network (greedy: those lines hold one " NCCL INFO " and
# one " via NET/" each, which the caller checks).
# (Each of those lines may begin with `clock`: see _CHANNEL_RUN_CLOCKED.)
_CHANNEL_RUN_FORM = (
    rb"%(clock)s(?P<pre>[^\n]*) NCCL INFO [^\n]* via NET/(?P<net>[^/\n]*)/[^\n]*\n"
    rb"(?P<run>(?:%(clock)s(?P=pre) NCCL INFO (?:Channel|Ring)[^\n]* via NET/(?P=net)/[0-9]"
    rb"[^\n]*\n){1,256})")
_CHANNEL_RUN = re.compile(_CHANNEL_RUN_FORM % {b"clock": b""})
_CTRL_NO_NL = bytes(range(0, 10)) + bytes(range(11, 32)) + b"\x7f"  # not printable ASCII
_LONG_LINE = re.compile(rb"[^\n]{%d}" % (MAX_LINE_CHARS + 1))
_CTRL_BYTES = bytes(range(0, 9)) + b"\x0b\x0c" + bytes(range(0x0e, 0x1b)) + bytes(
    range(0x1c, 0x20)) + b"\x7f"  # ESC (0x1b) is text: colour codes

# A line is parsed only if one of these passes finds something in it. Each pass starts with
# a literal, so the regex engine skips to candidates at C speed (one alternation of all of
# them is 50x slower: it tries every branch at every position). None can match a newline.
# Each pass costs about a cycle per byte, so a 200 MB log pays for every pass it runs.
_MSG_HEADS = (r"NET/|NET : |Using (?:network|(?:in|ex)ternal Network) |"
              r"comm (?:0x|rank \d|<\w+> rank)|"
              r"Destroyed comm |"
              r"ncclComm|Bootstrap|Init timings|CUDA Dev \d+\[\d+\], |Setting affinity for GPU \d|"
              r"NCCL_IB_HCA set to |(?:socket(?:Poll|Start)Connect: c|Call to c)onnect "
              r"(?:to [^\s<]{1,80}<\d{1,5}> )?returned |"
              r"Assigned NET plugin|Initialized NET plugin|Failed to initialize|P2P plugin |"
              r"rank \d+ nranks|[NR]CCL version|[A-Z][A-Z0-9_]* set by environment|"
              # a ring's order, its ranks (spaced with &nbsp; on a page that escaped it),
              # or a ring of one rank at its line's end (`Channel 00/32 :    0`: a
              # communicator of one, vissl#480; `$` is a line's end: the passes that hold
              # these heads are read with (?m), by Python and hyperscan alike; or a
              # quoted line's end: a notebook's JSON string's `\n",`, a CSV field's `"`,
              # a JSON log record's message, `\n"` and the record's other fields)
              "(?:Channel \\d+(?:/\\d+)?|Ring \\d+) :(?: |&nbsp;|\u00a0)+\\d+"
              "(?:(?: |&nbsp;|\u00a0)+\\d|[^\\S\\n]*(?:(?:\\\\n)?[\"'`]?,?$|\\\\n\"))")
# Prefixes a stripped line may still carry: Open MPI/torchrun tags (and Open MPI's time before
# them, `Thu Jun 18 14:28:58 2020`), CloudWatch, srun, time,
# a markdown quote (`> `, a reporter quoting the whole paste), a comment (`#   Using network
# Socket`: a job script's notes quoting what its run printed, NCSA Delta's), pdsh's host
# address (`10.3.35.83: `), a markdown list's item and inline code (`` - `NET/OFI Selected
# provider is efa, ...` ``), aws-ofi-nccl's own logger in its test programs
# (`INFO: Function: ofi_init Line: 686: NET/OFI Selected Provider is efa`, aws-ofi-nccl#22),
# and Ray's (and vLLM's) tag of the worker process that printed the line (`(RayWorkerWrapper
# pid=5419, ip=10.0.0.2) `, `(worker1, rank=1, pid=27522, ip=10.105.0.4) `, `(EngineCore_DP0
# pid=812) `), and a JSON log record's opening (Docker's json-file driver: `{"log":"`),
# all after an indent (a markdown list's code block: `  NET/IB : Using [0]rocep1s0f1:1/RoCE`;
# outside the repeat, which it would slow by a tenth on lines that carry a tag; the
# alternatives that start with blanks, ` | ` and ` 3: `, match after it with none), and
# before one (that indented line as an export keeps it: `  | 2024-12-04T05:27:39.074Z |
#   NET/IB : Using ...`). Up to five of them (`_outer` takes eight): a CloudWatch export of
# Open MPI's tags on pdsh's lines of aws-ofi-nccl's test logger is four.
# At most one alternative can match at a place (they start differently), and what follows
# (a head) never starts with what an alternative could give back, so backtracking into them
# never finds a match: Python >= 3.11 is told so (possessive `+`), which makes the bare pass
# 3x cheaper on lines that start like a prefix (`[rank0]: ...`). Same language either way.
# (Open MPI's tag may come HTML-escaped from a page: `[1,0]&lt;stdout&gt;:`)
_OUTER_HEAD_PLAIN = (r"[ \t]{0,40}(?:\[[^\]\n]{1,80}\](?:<std(?:out|err)>|&lt;std(?:out|err)&gt;)?"
                     r":? ?|"
                     r" {0,4}\| [^|\n]{0,40}\| ?| {0,4}\d{1,6}: ?|"
                     r"\d{4}-\d\d-\d\d[T ][\d:.,]{8,18}(?:Z|[+-]\d\d:?\d\d)?(?: |,\"?)|> ?|"
                     r"[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4} ?|"
                     r"#{1,3}[ \t]{1,4}|\d{1,3}(?:\.\d{1,3}){3}: |[-*+][ \t]{1,4}|`|\"|"
                     r"(?:INFO|WARN|TRACE): Function: \w{1,60} Line: \d{1,6}: |"
                     r"\((?:[\w\-]{1,40}(?:, rank=\d{1,6})?,? )?pid=\d{1,10}(?:, ip=[\d.]{7,15})?\) |"
                     r"\{\"(?:log|message|msg|textPayload|MESSAGE)\": ?\""
                     r"){0,5}[ \t]{0,40}")
_OUTER_HEAD = _OUTER_HEAD_PLAIN
if sys.version_info >= (3, 11):
    _OUTER_HEAD = (r"[ \t]{0,40}+(?:\[[^\]\n]{1,80}+\](?:<std(?:out|err)>|&lt;std(?:out|err)&gt;)?+"
                   r":?+ ?+|"
                   r" {0,4}+\| [^|\n]{0,40}+\| ?+| {0,4}+\d{1,6}+: ?+|"
                   r"\d{4}-\d\d-\d\d[T ][\d:.,]{8,18}+(?:Z|[+-]\d\d:?\d\d)?+(?: |,\"?+)|> ?+|"
                   r"[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4} ?+|"
                   r"#{1,3}+[ \t]{1,4}+|\d{1,3}+(?:\.\d{1,3}+){3}+: |[-*+][ \t]{1,4}+|`|\"|"
                   r"(?:INFO|WARN|TRACE): Function: \w{1,60}+ Line: \d{1,6}+: |"
                   r"\((?:[\w\-]{1,40}+(?:, rank=\d{1,6}+)?+,?+ )?+pid=\d{1,10}+"
                   r"(?:, ip=[\d.]{7,15}+)?+\) |"
                   r"\{\"(?:log|message|msg|textPayload|MESSAGE)\": ?+\""
                   r"){0,5}+[ \t]{0,40}+")
# The first characters _OUTER_HEAD or a head can start with: most lines (`nid001:...`) fail
# this at once instead of entering the repeat, which halves the bare pass.
_BARE_START = r"(?=[\[({ \t|0-9A-Z>#*+`\"-]|nccl|comm |rank |ibv_)"
# Two WARNs that write-ups quote with neither prefix nor level, read as those WARNs (the bare
# pass finds them, _BARE_MSG_HEADS routes them, _STRIPPED_WARN makes them WARNs): NCCL's
# verbs wrapper (`Call to ibv_modify_qp failed with 110 Connection timed out, on dev
# rocep1s0f1:1, ...`), and libfabric's EFA provider opening an endpoint, then calling
# abort() (`FI_EFA_USE_DEVICE_RDMA=1 was set by user, but EFA device has no rdma-read
# capability.  Application will abort().`, a g5; efa_rdm_get_use_device_rdma; its `FI_`
# is what the settings pass finds)
# (two branches, not an optional `Call to `: the regex engine then tests each by its first
# character, which keeps the bare pass as cheap as before it had them)
_VERBS_FAILED = r"Call to ibv_\w{1,40} failed with |ibv_\w{1,40} failed with "
_EFA_ABORTS = r"FI_EFA_USE_DEVICE_RDMA(?:=\d)? was set (?:by user|to an invalid value)"
# ... and nccl-tests' rank table without its `#` (see _TESTS_RANK)
# (`[^\S\n]`: no pass may match a newline, so that "a line holds a match" means the same to
# every reader of the passes: the block scan, feed(), and hyperscan in runner/fast_scan.py)
_BARE_HEADS = _MSG_HEADS + r"|Rank[^\S\n]+\d+[^\S\n]+(?:Group[^\S\n]+\d+[^\S\n]+)?Pid[^\S\n]" + (
    # ... and the WARN of a socket that could not be set up, as PyTorch echoes it after
    # `Last error:` (see _SOCKET_INIT_ECHO)
    r"|ncclSocketInit: connecting to |Bootstrap : no socket interface found"
    # ... and the last WARN as RCCL's error quotes it (`Last RCCL warning: '...'`, see
    # _LAST_WARNING; NCCL's own, as XLA quotes it, is found by its `NCCL warning`)
    r"|Last RCCL warning"
    # ... and a verbs call's WARN with neither prefix nor level
    r"|" + _VERBS_FAILED)
# NCCL's WARN that a socket connect failed for good (its retries spent: `socketPollConnect:
# connect to 10.0.0.2<42307> returned Connection timed out, exceeded error retry count (35)`;
# or refused at once: `socketStartConnect: Connect to 172.18.0.2<44801> failed : Software
# caused connection abort`), the words PyTorch, vLLM's logger or XLA echo after `Last error:`
# (a page may wrap it after `returned Connection timed out,`, or escape its `<port>`)
_SOCKET_CONNECT_FAILED = (r"(?m)socket(?:Poll|Start)Connect: [Cc]onnect "
                          r"(?:to [^\s<&]{1,80}(?:<|&lt;|\\u003c)\d{1,5}(?:>|&gt;|\\u003e) )?"
                          r"(?:returned [^,\n]{1,80},(?: exceeded|[ \t]*$)|failed )")
_PASS_PATTERNS = (
    # NCCL's own lines, and its version line under any prefix (NCCL_DEBUG=VERSION prints it
    # without NCCL's; pdsh, kubectl or an indent may come before it)
    # (`Test NCCL failure ...` is nccl-tests' line: found by its `NCCL failure`, so that
    # every branch starts with `NCCL `, which the engine then skips to as one literal)
    # (and XLA's quote of the last WARN, `Last NCCL warning(error): '...'`: _LAST_WARNING)
    r"(?m)NCCL (?:WARN|ABORT)\b|NCCL (?:INFO|TRACE) (?:\[Rank \d+\] )?(?:%s)|NCCL version \d|"
    r"NCCL failure |NCCL work: \d|NCCL warning" % _MSG_HEADS,
    r"via (?:COLL)?NET/",  # channel and ring lines that cross nodes (and CollNet's)
    # error chains, and NCCL <= 2.2's WARN after a source file (`include/socket.h:194 WARN`)
    # (a page that rendered the log may have made `p2p.cc:648` a link: `.cc` is a domain)
    # (NCCL >= 2.28 names the function: `init.cc:1565 (initTransportsRank) -> 2`)
    r"\.(?:cc|cu|c|h|cpp|cuh):\d+(?:\]\(https?://[^)\s]{0,200}\))? (?:\([\w:~]{1,80}\) )?"
    r"(?:(?:->|-&gt;|-\\u003e) -?\d|WARN )",
    r"(?m)\n%s%s(?:%s)" % (_BARE_START, _OUTER_HEAD, _BARE_HEADS),  # stripped of NCCL's prefix
    r"lib(?:fabric:|ibverbs)",  # libfabric's and libibverbs' own lines
    r"_(?:(?<=FI_)[A-Z]|[A-Z][A-Z0-9_]*=)",  # FI_* names, KEY=value settings
    r"(?m)\] INFO (?:%s)" % _MSG_HEADS,  # NCCL <= 2.2: `host:pid:tid [0] INFO NET/IB: ...`
    # nccl-tests' table of every rank's host (`#  Rank  0 Group  0 Pid`)
    r"#[^\S\n]+Rank[^\S\n]+\d+[^\S\n]",
    # a socket connect that failed for good, anywhere in a line (see _SOCKET_CONNECT_ECHO)
    _SOCKET_CONNECT_FAILED,
)
_BARE_PASS = 3  # anchored after a newline: its match starts one before the line
# Bytes one of which every match of a pass contains: a block with none of them skips that
# pass. Looking for one byte is memchr, several times cheaper than a pass, and the lines
# that make a long job's log big (NCCL_DEBUG_SUBSYS=COLL's `AllReduce: opCount ...`) hold
# no `T`, `>`, `W` or `_`. (`W`: an old `file.h:194 WARN` line with no chain near it;
# `&gt;`: a chain whose arrow a page escaped, `init.cc:1 -&gt; 3`, pytorch#76288; `u003e`: as
# Docker's json-file driver escapes it, `-\u003e 2`, HTML-safe JSON.)
_GATES = ((), (b"T",), (b">", b"W", b"&gt;", b"u003e"), (), (), (b"_",), (), (b"#",),
          (b"onnect: ",))
_PASSES = tuple(re.compile(p.encode()) for p in _PASS_PATTERNS)  # blocks are scanned as bytes
_SCAN = tuple(zip(_PASSES, _GATES, [i == _BARE_PASS for i in range(len(_PASSES))]))
_FIRST_LINE = re.compile(("(?m)%s(?:%s)" % (_OUTER_HEAD, _BARE_HEADS)).encode())  # at offset 0
# The same passes for hyperscan (runner/fast_scan.py), which has no lookbehind: `FI_` is
# matched instead of looked behind. The bare pass is given looser (bounded repeats unbounded,
# no lookahead: a superset that compiles in a fifth of the time) and each of its hits is
# confirmed by the exact pass. The lines that hold a match are the same either way.
_LOOSE_OUTER_HEAD = re.sub(r"\{[1-9]\d*,\d+\}", "+", re.sub(r"\{0,\d+\}", "*", _OUTER_HEAD_PLAIN))
_FAST_REWRITTEN = {
    _PASS_PATTERNS.index(r"_(?:(?<=FI_)[A-Z]|[A-Z][A-Z0-9_]*=)"): r"FI_[A-Z]|_[A-Z][A-Z0-9_]*=",
    _BARE_PASS: r"(?m)\n%s(?:%s)" % (_LOOSE_OUTER_HEAD, _BARE_HEADS),
}
_FAST_PATTERNS = tuple(_FAST_REWRITTEN.get(i, p) for i, p in enumerate(_PASS_PATTERNS))
_FAST_CONFIRM = {_BARE_PASS: _PASSES[_BARE_PASS]}
SCAN_ENGINES = ("auto", "python", "hyperscan")
# Below this much text a stream is scanned by the Python passes: compiling hyperscan's
# database (about 0.1 s, the first time; then it is loaded from the user's cache) costs more
# than it saves on a smaller log.
FAST_SCAN_AFTER_BYTES = 16 << 20
# The same test for one line (feed()): a line is parsed iff a pass above would find it.
_LINE_PASSES = tuple(re.compile(p, re.ASCII).search for i, p in enumerate(_PASS_PATTERNS)
                     if i != _BARE_PASS) + (re.compile(_FIRST_LINE.pattern.decode(), re.ASCII).match,)


def _triggers(line: str) -> bool:
    """Would a pass find something in this one line? (Separate searches: 3x faster than
    one alternation of them.)"""
    for test in _LINE_PASSES:
        if test(line):
            return True
    return False


# A colour code whose ESC a paste showed as text or dropped (Ray's dedup suffix: `Using
# network Socket←[32m [repeated 7x across cluster]←[0m`, `... [32m ...[0m`; vLLM#5405)
_PASTED_COLOUR = re.compile(r"(?:ESC|\u2190|\^\[)?\[\d{1,3}(?:;\d{1,3})*m")
_ANSI_BYTES = re.compile(
    rb"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")

# NCCL's prefix: [timestamp] host:pid:tid [cudaDev] [file:line [(func)]] NCCL LEVEL.
# The host may be redacted (`<cluster_name>`, `xxx-xxx`) or stripped (`:22901:22901 [0]`);
# a markdown backtick or emphasis before it (`` `gpu2:19989:20082 [1] ...``, `*ip-10-0-2-54:14:14
# [0] ...*`, an AWS tutorial's), or the double quote that opens a quoted line, is no part of it;
# no host name holds a quote, a comma or a backslash (a CSV export's `...074Z,"host:...`, a
# notebook's JSON string that escaped a quote: `\"w8:6:6 [0]`).
_NCCL_PREFIX = re.compile(
    r"(?P<host>[^\s:\[\]`*\\\"',]{0,%d}):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>-?\d+)\] "
    r"(?:(?P<src>[^\[\]\n]{0,200}?) )?NCCL (?P<level>INFO|WARN|ABORT|TRACE|CALL)\b ?" % _MAX_HOST
)
_LEVEL_WORDS = ("INFO", "WARN", "ABORT", "TRACE", "CALL")  # (_NCCL_PREFIX's levels)


def _another_record(text: str, k: int) -> bool:
    """Is the `NCCL ` at `text[k]`, or one after it, a record's `NCCL <level>`: a second
    record on the line (another process's spliced in, or a paste that lost its newlines)?
    NCCL's own messages may name NCCL (`NCCL version 2.21.5`; IB's line for each queue pair
    it connects, `NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn 1234 ...`, thousands in a big job's
    log): such a line is one record, read on the prefix cache's fast path."""
    while k >= 0:
        if text.startswith(_LEVEL_WORDS, k + 5):
            return True
        k = text.find("NCCL ", k + 5)
    return False


def _level_end(text: str, k: int) -> int:
    """Where the level word at `text[k:]` ends, as _NCCL_PREFIX reads one (`INFO`, ...,
    then no letter, digit or `_`); -1 where there is none."""
    for word in _LEVEL_WORDS:
        if text.startswith(word, k):
            e = k + len(word)
            return e if e == len(text) or not (text[e].isalnum() or text[e] == "_") else -1
    return -1


def _plain_record(text: str, i: int) -> bool:
    """May the prefix cache's fast path take this line, whose ` NCCL ` is at `i`: one
    record (_another_record), no libfabric or libibverbs line (`lib`), no echo of a setting
    (_env_assign_echo)? Those the full parse (_piece) reads."""
    k = text.find("NCCL ", i + 6)
    return (k < 0 or not _another_record(text, k)) and "lib" not in text \
        and not _env_assign_echo(text)


def _env_assign_echo(text: str) -> bool:
    """May the line echo an `NCCL_X=...`/`FI_X=...` setting (a job script's `set -x`, `env`)?
    (_take_env_assign reads it; the prefix cache's fast path does not.)"""
    return "=" in text and ("NCCL_" in text or "FI_" in text) \
        and " set by environment " not in text


# `[cudaDev] NCCL INFO msg` (host:pid:tid stripped), and any `NCCL LEVEL msg` without a prefix.
# (also with `pid:tid` and no host: `78244:78244 [0] NCCL INFO`, pytorch#49095)
_DEV_NCCL = re.compile(
    r"^(?:(?P<pid>\d+):\d+ )?\[(?P<dev>\d+)\] (?:[^\[\]\n]{0,200}? )?"
    r"NCCL (?P<level>INFO|WARN|ABORT|TRACE)\b ?")
# A host name that is no clock (`12:00:01 [0] main.c:12 WARN`): not digits only.
_HOST_NOT_CLOCK = (r"(?P<host>(?=[^\s:\[\]`*\\\"',]*[^\d\s:\[\]`*\\\"',])[^\s:\[\]`*\\\"',]{1,%d})"
                   % _MAX_HOST)
# A host whose pid and thread were redacted into one field (`node-a7:XXXXXX [5] ibvwrap.c:262
# NCCL WARN`, nccl#2013) or left out (`gpusrv [0] misc/ibvwrap.cu:269 WARN`, NCCL 2.1 as
# pasted in horovod#98): read like `[5] ... NCCL WARN`, the host kept. As for _OLD_PREFIX, a
# WARN without `NCCL` needs a source file, and a host of digits only is a clock.
_LOOSE_PREFIX = re.compile(
    r"^" + _HOST_NOT_CLOCK + r"(?::[^\s\[\]`]{1,40})? "
    r"\[(?P<dev>\d+)\] (?:(?P<src>[\w./\-]+\.(?:cc|cu|c|cpp|h):\d+) (?:\([\w:~]+\) )?)?"
    r"(?:NCCL (?P<level>INFO|WARN|ABORT|TRACE)|(?<=\d )(?P<old>WARN))\b ?")
# NCCL's level after a prefix that no rule above knows (`[09:14:02] [gpu-x rank 0] NCCL INFO`,
# `[pod/w-0/main] NCCL INFO`, journald's `host prog[pid]: NCCL INFO`): the prefix, clock times
# taken out, names the process (the last resort: NCCL's own prefix is gone)
# (not the tail of NCCL's own prefix that a splice cut, `0119:40126 [3] NCCL INFO` or just
# `0] NCCL INFO`: a number before the device, or a device's bracket alone, makes no process)
_ANY_PREFIX_NCCL = re.compile(r"^(?P<pre>[^\n]{1,160}?) ?\bNCCL (?P<level>INFO|WARN|ABORT|TRACE)\b ?")
# aws-ofi-nccl's own logger, as its test programs (nccl_message_transfer, ring) print it
_OFI_TEST_HEAD = re.compile(r"^(?P<level>INFO|WARN|TRACE): Function: \w+ Line: \d+: ")
_CUT_PREFIX_TAIL = re.compile(r"\d \[-?\d+\]\s*$|^-?\d*\]\s*$")
_CLOCK = re.compile(r"\d{4}-\d\d-\d\d|\b\d{1,2}:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?|[\[\]]")
_BARE_NCCL = re.compile(  # after a source file, or aws-ofi-nccl's `function:line`
    r"^(?:[\w./\-]+\.(?:cc|cu|c|cpp|h):\d+ (?:\([\w:~]+\) )?|[A-Za-z_][\w:~]*:\d+ )?"
    r"NCCL (?P<level>INFO|WARN|ABORT|TRACE)\b ?")
# Messages recognised even with both the prefix and `NCCL INFO` stripped.
_BARE_MSG_HEADS = (
    r"(?:Using (?:network|(?:in|ex)ternal Network) |NET/|NET : |Channel \d|Ring \d|"
    r"comm (?:0x|rank \d)|"
    r"[NR]CCL version|ncclCommInitRank|rank \d+ nranks \d|Bootstrap ?: ?Using|"
    r"Assigned NET plugin|Initialized NET plugin|Failed to initialize (?:any )?NET plugin|"
    r"P2P plugin |\d+(?:\[\w+\])? -> \d+(?:\[\w+\])? (?:\[\w+\] )?via NET/|"
    # an error chain's line (`init.cc:1565 (initTransportsRank) -> 2`, a write-up's quote)
    r"[\w./\-]+\.(?:cc|cu|c|cpp|h):\d+ (?:\([\w:~]+\) )?-> -?\d|"
    + _VERBS_FAILED + "|" + _EFA_ABORTS + ")")
_BARE_MSG = re.compile("^" + _BARE_MSG_HEADS)
# NCCL <= 2.2 wrote no `NCCL` before the level: `gpu11:3412:3433 [0] INFO Using internal
# Network IB`, `gpu11:3412:3433 [1] misc/ibvwrap.cu:60 WARN Failed to open libibverbs.so`.
# Taken only with a message NCCL writes (INFO) or a source file (WARN), so that a log line
# that merely looks like `10:00:00 [0] INFO ...` makes no process.
_OLD_PREFIX = re.compile(
    _HOST_NOT_CLOCK + r":(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>-?\d+)\] "
    r"(?:(?P<src>\S+\.(?:cc|cu|c|h|cpp|cuh):\d+) (?=WARN))?(?P<level>(?<=\] )INFO(?= (?:%s|\S+\.cu?:\d+ -> |"
    r"\d+ -> \d+ via |CUDA Dev \d|"
    r"[A-Z][A-Z0-9_]* set by environment))|(?<=\d )WARN)\b ?" % _BARE_MSG_HEADS)

# Outer prefixes written by launchers and log exporters, applied repeatedly (they stack).
# A date and time as loggers, kubectl and CloudWatch write it (`2024-12-04T05:27:39.074Z`)
_CLOCK_TIME = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d[.,\d]*(?:Z|[+-]\d\d:?\d\d)?"
_OUTER_PREFIXES = (
    # CloudWatch / console exports: "  | 2024-12-04T05:27:39.074Z | "
    re.compile(r"^\s*\|?\s*%s\s*\|\s?" % _CLOCK_TIME),
    # Open MPI --tag-output `[1,3]<stdout>:`, SageMaker's `[1,mpirank:3,algo-1]<stdout>:`,
    # horovodrun --gloo's `[3]<stdout>:`
    re.compile(r"^\[(?:\d+,)?(?:mpirank:)?(?P<rank>\d+)(?:,[^\]]{0,80})?\]<(?:stdout|stderr)>:\s?"),
    # torchrun [default0]:, torch [rank3]:
    re.compile(r"^\[(?P<kind>default|rank)(?P<n>\d+)\]:\s?"),
    re.compile(r"^(?P<host>[A-Za-z][\w.\-]*) \[(?P<n>\d+)\]: ?"),  # node2 [1]:
    # srun --label: "3: " (not NCCL's own `pid:tid [0] ` with its host left out)
    re.compile(r"^\s*(?P<task>\d+):(?! ?\d+ \[\d+\] ) ?"),
    re.compile(r"^\[(?P<host>[A-Za-z][\w.\-]*)\] "),  # fabrikit local launcher: [node1]
    # `kubectl logs --prefix`: `[pod/trainer-0/trainer] ` (a pod's name is its host's)
    re.compile(r"^\[pod/(?P<host>[\w.\-]{1,63})/[\w.\-]{1,63}\] "),
    re.compile(r"^\[[A-Za-z]\w* (?P<host>[\w.\-]+)\] "),  # [node 192.168.184.241] (Ray, cut)
    # Ray's tag of the worker that printed the line, vLLM's of its engine process:
    # `(RayWorkerWrapper pid=5419, ip=10.0.0.2) `, `(worker1, rank=1, pid=27522,
    # ip=10.105.0.4) `, `(EngineCore_DP0 pid=812) `: the worker's node is its ip, if given
    re.compile(r"^\((?:[\w\-]{1,40}(?:, rank=(?P<rank>\d{1,6}))?,? )?pid=\d{1,10}"
               r"(?:, ip=(?P<host>\d{1,3}(?:\.\d{1,3}){3}))?\) "),
    # Open MPI's --timestamp-output, `Thu Jun 18 14:28:58 2020[1,7]<stdout>:` (its tag follows)
    re.compile(r"^(?P<clock>[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4} ?)"),
    # a logger's time, `[2024-12-04 05:27:39] `: no launcher's, so no label (each line's
    # differs: as a label, it would make each line a process of its own)
    re.compile(r"^(?P<clock>\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[^\]]*\] )"),
    re.compile(r"^(?P<quote>> ?)"),  # a markdown quote (`> > ` nested: one at a time), no label
    # a markdown list's item, code in a line (`` - `NET/OFI Selected provider is efa, fabric
    # is efa-direct (found 16 nics)` ``, notes on a GIN proxy between two p6 nodes): no
    # launcher's, so no label (see _outer)
    re.compile(r"^(?P<quote>[-*+][ \t]{1,4}|`|\")"),  # (and a notebook's JSON string)
    re.compile(r"^#{1,3}[ \t]{1,4}"),  # a comment quoting the log (nccl-tests' `#` lines
    # hold no NCCL line, and their rank table is read before any prefix is taken)
    # kubectl's `--timestamps`, a logger's time; a CSV export's `2024-12-04T05:27:39.074Z,"`
    re.compile(r"^%s(?:\s+|,\"?)" % _CLOCK_TIME),
    re.compile(r"^(?P<host>[A-Za-z][\w.\-]*): (?=\S+:\d+:\d+ \[)"),  # pdsh/clush "host: "
    re.compile(r"^(?P<host>\d{1,3}(?:\.\d{1,3}){3}): "),  # pdsh's "10.3.35.83: " (any line)
    # NCCL's own prefix with placeholders pasted over it: `[Node-A]:[PID]:[Thread] [0] `
    re.compile(r"^\[?(?P<host>[A-Za-z][\w.\-]*)\]?:(?:\[\w+\]|<\w+>|[A-Za-z]\w*):"
               r"(?:\[\w+\]|<\w+>|[A-Za-z]\w*) (?=\[\d+\] )"),
)

# A clock before NCCL's prefix that names no process: a logger's `[2024-12-04 05:27:39.074] `,
# kubectl's or Docker's `--timestamps` (`2024-12-04T05:27:39.074123456Z `), CloudWatch's
# `  | 2024-12-04T05:27:39.074Z | ` (each a subset of what _outer strips first and with no
# label: a time before a bar is CloudWatch's, whole). Such a line's process is the one the
# rest of its prefix names, so the prefix cache is keyed without the clock: each line's clock
# differs, and with it in the key every line was parsed in full (3x the time of a log
# without clocks; benchmarks/check_log_scaling.py).
_LEAD_CLOCK = re.compile(r"\[%s\] |%s(?![ \t]*\|)[ \t]+|[ \t]*\|?[ \t]*%s[ \t]*\|[ \t]?"
                         % (_CLOCK_TIME, _CLOCK_TIME, _CLOCK_TIME))
_LEAD_CLOCK_STARTS = "[0123456789 |\t"
# A channel run (_CHANNEL_RUN) whose lines each begin with a clock (see _LEAD_CLOCK)
_CHANNEL_RUN_CLOCKED = re.compile(
    _CHANNEL_RUN_FORM % {b"clock": b"(?:%s)" % _LEAD_CLOCK.pattern.encode()})


def _clock_end(text: str, i: int) -> int:
    """Where a _LEAD_CLOCK at the start of `text[:i]` ends; 0 if there is none."""
    if text[:1] in _LEAD_CLOCK_STARTS:
        c = _LEAD_CLOCK.match(text, 0, i)
        if c is not None:
            return c.end()
    return 0


def _cached_proc(prefixes: dict[str, "_Proc"], text: str, i: int) -> "_Proc | None":
    """The process of a line parsed before whose prefix was `text[:i]` (the text before
    ` NCCL `), or that with its _LEAD_CLOCK taken off (the key it is kept under)."""
    proc = prefixes.get(text[:i])
    if proc is None and (k := _clock_end(text, i)):
        return prefixes.get(text[k:i])
    return proc


# nccl-tests' own report of a failed NCCL call (`node1: Test NCCL failure common.cu:345
# 'unhandled system error'`; newer: `node1 pid 27: ... 'remote process exited or there was a
# network error / ...'`), and the errors of it that are a network's (nccl-tests#36)
_TESTS_FAILURE = re.compile(
    r"(?P<host>[\w.\-]*)(?: pid \d+)?: Test NCCL failure \S+:\d+ '(?P<err>[^'\n]{1,200})'")
# PyTorch's watchdog: `... detected by watchdog at work: 89, last enqueued NCCL work: 89, last
# completed NCCL work: 88.`: the job's collectives ran (before any work completes, older
# releases print -1, or a huge number: an unset counter)
_WORK_DONE = re.compile(r"last completed NCCL work: (\d{1,19})\b")
_TESTS_NET_ERROR = re.compile(r"unhandled system error|remote process exited|network error")
# A paste whose newlines became spaces (GitHub's quote-reply of a rendered log: `> > [0] NCCL
# INFO NET/IB : No device found. [0] NCCL INFO NET/Socket : Using [0]eth0:... [0] NCCL INFO
# Using network Socket`, LLaMA-Factory#6111): split before each record after a blank.
_FLAT_HEAD = re.compile(
    r"(?:(?<=[\s\"])|^)(?P<pre>(?P<who>[^\s:\[\]\"]+:\d+):\d+ )?\[\d+\] "
    r"(?:[\w./\-]{1,80}\.(?:cc|cu|c|h|cpp):\d+ )?NCCL (?:INFO|WARN) ")
# ... but a record whose `host:pid:tid` is glued to the text before it shows only its `[1]
# NCCL INFO` as a head: another process's line spliced in (`[send]nid1:85:85 [1] NCCL INFO`),
# unless it has the first one's pid (newlines lost between one process's lines: aws-ofi-nccl#990)
_GLUED_PID_TID = re.compile(r":(?P<pid>\d+):\d+ $")
# nccl-tests prints where every rank of the job runs, before NCCL's own lines:
# `#  Rank  3 Group  0 Pid  80221 on gpu-a07 device  3 [0x82] NVIDIA A100` (older: no Group;
# a page that rendered the paste as markdown made the `#` lines headings, without the `#`)
_TESTS_RANK = re.compile(
    r"(?:#|^|\s)\s*Rank\s+(?P<rank>\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(?P<host>\S+)\s+device\s")
# `trn-w0: NCCL version 2.14.3+cuda11.8`, `[pod/w-0/pytorch] NCCL version ...`: the version
# line alone after a prefix that is no launcher's we know (the line must end with it)
_PREFIXED_VERSION = re.compile(
    r"(?:^|[\s:\]])(?P<msg>[NR]CCL version\s*:?\s*\d+\.\d+\.\d+(?:[+-][\w.+-]*)?)\s*$")
_VERSION = re.compile(r"^(?P<lib>[NR])CCL version\s*:?\s*(?P<v>\d+\.\d+\.\d+)(?![\d.])")
# (an author's note may follow it: `Loaded net plugin gIB (v11)   <- the plugin loads fine`)
_PLUGIN_LOADED = re.compile(
    r"^NET/Plugin ?: ?Loaded net plugin (?P<name>.+?) \((?P<api>v\d+)\)(?:\s|$)")
_PLUGIN_MISSING = re.compile(
    r"^NET/Plugin ?: ?(?:.*\bNo plugin found\b|Could not find: ?\S*lib[nr]ccl-net|"
    r".*lib[nr]ccl-net\S*: cannot open shared object|Plugin load returned)"
)
_OFI_VERSION = re.compile(r"^NET/OFI (?:Using|Initializing) aws-ofi-[nr]ccl (?P<v>\S+)")
_LIBFABRIC_VERSION = re.compile(r"^NET/OFI Using Libfabric version (?P<v>\d+\.\d+)")
# (a doc may align notes with blanks, `is cxi   (found 2 nics)   <- ...`, or join the line
# to the one before it, `NET/OFI Using aws-ofi-nccl 1.6.0 ... Selected Provider is cxi`)
_PROVIDER = re.compile(
    r"^NET/OFI (?:.{0,120}? )?Selected [Pp]rovider is (?P<prov>[^\s,()*]+)\**"
    r"(?=,|\s+\(found|(?P<end>\s*$))"
    r"(?:, fabric is (?P<fabric>[^\s,()]+)(?=\s+\(found))?"
    r"(?:\s+\(found (?P<nics>\d+) nics?\))?"
)
# aws-ofi-nccl's INFO lines that say it may not go on (the rest are its init's progress)
_OFI_TROUBLE = re.compile(r"[Ff]ail|[Ee]rror|[Uu]nable|Couldn't|[Cc]ould not find|No eligible|"
                          r"not supported|[Ii]nvalid")
_PROVIDER_FILTER = re.compile(r"^NET/OFI Setting provider_filter to (?P<prov>[\w;]+)")
# aws-ofi-nccl giving up before NCCL picks another network (a fallback, not a failure).
_OFI_PLUGIN_FAILED = re.compile(
    r"^NET/OFI (?:aws-ofi-[nr]ccl initialization failed|Initializing plugin failed|"
    r"Could not find any optimal provider|Unable to find a protocol|"
    r"No eligible providers? (?:were|was) found.*(?:[Ff]ail|[Aa]bort)|"
    r"Only EFA provider is supported)"  # 1.4 off AWS: aws/deep-learning-containers#2675
)
# (Ray's log dedup appends ` [repeated 15x across cluster]` to a line)
# (a name holds single spaces at most, `AWS Libfabric`: two or more end it, and so does a
# note that a doc or blog wrote after the line, `Using network Socket # Ethernet`, `(TCP)`)
_USING_NETWORK = re.compile(
    r"^Using (?:network|(?:in|ex)ternal Network) (?P<name>\S+(?: \S+)*?)"
    # (and a paste that lost its newlines: `Using network Socket NCCL version 2.7.8+cuda10.2`)
    r"(?:\s*\[repeated \d+x across cluster\]|\s{2,}\S.*|\s+(?:#|\(|\u2190|<-|//|NCCL version ).*)?"
    r"\s*$")
# NCCL 2.3-2.4 (no `Using network` line in 2.4): `CUDA Dev 0[0], IB NIC distance :  PIX`,
# the name being the chosen network's (ncclNetName()); polyaxon#657, nccl#246, pytorch#22531
_NIC_DISTANCE = re.compile(r"^CUDA Dev \d+\[\d+\], (?P<name>\S+(?: \S+)*?) NIC distance :")
# The two ranks of a channel or ring line: `Channel 00/0 : 3[3000] -> 0[1000] [send] via ...`
_CHANNEL_PEERS = re.compile(r"(\d+)(?:\[\w*\])? -> (\d+)\b")
# NCCL 2.2 writes a ring's link with no `Ring NN :` before it: `7 -> 8 via NET/Socket/0`
_BARE_RING = re.compile(r"\d+(?:\[\w+\])? -> \d+(?:\[\w+\])? (?:\[\w+\] )?via NET/")
_ASSIGNED = re.compile(r"^Assigned NET plugin (?P<name>.+?) to comm\b")
_NET_PLUGIN_INIT_FAILED = re.compile(r"^Failed to initialize NET plugin (?P<name>.+?)\s*$")
_ANY_NET_PLUGIN_FAILED = "Failed to initialize any NET plugin"
# WARNs of freeing a communicator, not of setting one up (ncclCommDestroy/Abort): the
# bootstrap closing with connections it never took (bootstrapClose, `Unexpected connections
# are not empty`), commReclaim's cleanup failing; and the chain under them runs through
# init.cc's commFree, as an init's does. A teardown's error, after a job that ran: no
# network's init failed (a helper's log: Init COMPLETE over IB, the training done, then
# these at destroy_process_group())
_TEARDOWN_WARN = re.compile(r"Unexpected connections are not empty|commReclaim: ")
_NET_USING = re.compile(r"^NET/(?P<net>[\w\-]+) ?: ?Using (?P<rest>.*)")
# (an author may condense the list: `[0..7]mlx5_bond_*:1/RoCE`, eight bonded RoCE ports)
_IB_DEVICE = re.compile(
    r"\[\d+(?:\.\.\d+)?\] ?(?P<dev>[\w.\-]+\*?:\d+)/(?:IB|RoCE)(?:/SHARP)?(?=[\s;]|$)")
_UVERBS = re.compile(r":uverbs\d+(?=:)")
_IB_DEVICE_LINE = re.compile(r"^NET/IB\w* ?: ?\[\d+\] ?(?P<dev>[\w.\-]+(?::[\w.\-]+)?:\d+)/(?:IB|RoCE)\b")
_NET_CONNECTED = re.compile(r"^NET/(?P<net>[\w\-]+) ?: ?(?:Connected|Accepted)\b")
# A queue pair the IB transport created to connect to a peer (NCCL >= 2.19: `NET/IB: NCCL Dev
# 3 IbDev 3 Port 1 qpn 1033 mtu 5 LID 0 ...`, `NET/IB: IbDev 4 Port 1 qpn 103534
# set_ece={...}`): IB was chosen (a paste may keep no other line of it)
# ... and the virtual NICs its init made of the devices it opened (NCCL >= 2.21: `NET/IB : Made
# virtual device [2] name=mlx5_0+mlx5_1 speed=200000 ndevs=2`; a paste of an IB resiliency
# test kept these and its fail-over lines only)
_IB_QP = re.compile(r"^NET/IB\w* ?: ?(?:(?:NCCL (?:Merged)?Dev \d+ )?IbDev \d+ Port \d+ "
                    r"qpn \d+|Made virtual device \[)")
# ... which add nothing but a line to a process that holds a weak choice (the first of them
# makes one, `_weak_default`, where no line chose before): the full parse would find that
# choice taken. A big IB job prints one for each queue pair of every connection (tens of
# thousands a process in a long log), so `take` returns at once for them. (A name of its own
# so that tests/test_nccl_log_prefix_cache.py can turn the shortcut off and compare.)
_QP_ADDS_NOTHING = _IB_QP
# The IB transport checking GPUDirect for a device it uses (no device line in a paste that
# kept only this: GKE A3 Ultra's `NET/gIB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'`).
# (The socket transport's `NET/Socket : GPU Direct RDMA Disabled for HCA 0 'lan0'` is no
# choice of the checker's: the real pastes that hold only it were of one host, nccl#901,
# nccl-tests#117, and would read socket where nothing says how many hosts there were.)
_IB_GDR = re.compile(r"^NET/IB\w* ?: ?GPU Direct RDMA (?:\([^)]*\) )?[EeDd]\w*abled for HCA")
# ... and the libfabric plugin's own (`NET/OFI : GPU Direct RDMA Enabled for HCA 0 'cxi0'`,
# a field guide's lines from a 2-node Slingshot run that kept nothing else): Slingshot's
# NICs are named cxi<N> by their provider
_OFI_GDR = re.compile(r"^NET/(?:OFI|AWS Libfabric|Libfabric) ?: ?GPU Direct RDMA "
                      r"(?:\([^)]*\) )?[EeDd]\w*abled for HCA \d+(?: '(?P<dev>[^']*)')?")
_CXI_NIC = re.compile(r"cxi\d+$")
# aws-ofi-nccl's tuner (1.9+) says how many nodes the communicator it tunes spans (a HyperPod
# TP4xDP2 job on two p6-b200, whose paste kept the TP communicators' `nNodes 1` only)
_OFI_TUNER = re.compile(r"^NET/OFI (?:Region )?Tuner init(?: \(platform \d+\))?: comm with "
                        r"\d+ ranks and (?P<n>\d+) nodes")
_IB_NO_DEVICE = re.compile(r"^NET/IB\w* ?: No device found")
_SOCKET_IFACE = re.compile(r"\[\d+\](?P<iface>[^\s:<>\[\]]+):\S*?<\d+>")
# (a doc that elided the addresses: `NET/Socket : Using [0]ens5 ... [1]roce0 ...`)
_SOCKET_IFACE_ELIDED = re.compile(r"\[\d+\](?P<iface>[A-Za-z][\w.\-]*)(?=[\s:]|$)")
# (... or put a placeholder for it: `NET/Socket : Using [0]<lan-if>:<head-ip><0>`, a DGX Spark
# pair's README: sockets chosen, on an interface the paste does not name)
_SOCKET_IFACE_REDACTED = re.compile(r"\[\d+\]<[^<>\s]{1,40}>")
_IFACE_IP = re.compile(r"(?:^|[\s\]])(?P<iface>[\w.\-]+):(?P<ip>[0-9a-fA-F.:%]+?)<\d+>")
# (a guide may elide the pointer, `comm ... rank 0`, or leave it out; a sanitized log may put
# a placeholder in it, `comm <PTR>`)
_COMM = re.compile(
    r"(?:\bcomm (?:(?P<comm>0x[0-9a-fA-F]+|0x\.\.\.|\.\.\.|\u2026|<\w+>) )?|"
    r"^ncclCommInitRank\w* (?:\.\.\.|\u2026) )rank (?P<rank>\d+) "
    r"n[Rr]anks (?P<nranks>\d+)(?=\s)")
_OLD_RANK = re.compile(r"^rank (?P<rank>\d+) nranks (?P<nranks>\d+)\s*$")  # NCCL 2.2-2.3
_NNODES = re.compile(r"\bnNodes (?P<n>\d+)(?=\s)")
_COMPLETE = re.compile(r"- (?:Init )?COMPLETE\b|\bInit COMPLETE\b")  # (`… Init COMPLETE`: elided)
_ENV_ECHO = re.compile(r"^(?P<key>[A-Z][A-Z0-9_]*) set by environment to (?P<value>.*?)\s*$")
# Environment settings echoed by job scripts (`set -x`, `env | grep`, `mpirun -x`).
_ENV_ASSIGN = re.compile(
    r"(?:^|[\s'\"])(?P<key>(?:NCCL|FI)_[A-Z0-9_]+)="
    r"(?:(?P<q>['\"])(?P<quoted>[^'\"\n]*)(?P=q)|(?P<value>[^\s'\"]*))")
# ... and `env`'s (or a notes') line of one setting, whose value runs to the end of the line
# (`NCCL_NET=AWS Libfabric`)
_ENV_LINE = re.compile(r"^\s*(?:export\s+)?(?P<key>(?:NCCL|FI)_[A-Z0-9_]+)="
                       r"(?P<value>[\w.;:,^/+-]+(?: [\w.;:,^/+-]+)*)\s*$")
_NET_NOT_FOUND = searched_fast(r"\bnetwork (?P<name>.*?) ?not found")
_CHAIN = re.compile(
    r"^(?P<file>\S+\.(?:cc|cu|c|h|cpp|hpp|cuh)):(?P<line>\d+) (?:\((?P<func>[\w:~]+)\) )?"
    r"-> (?P<code>-?\d+)(?P<rest>.*)")
# An error chain reaching init.cc/group.cc: the communicator's init returned an error.
_TOP_CHAIN_FILE = re.compile(r"(?:^|/)(?:init|group)\.c[cu]?$")
_INIT_FILE = re.compile(r"(?:^|/)init\.c[cu]?$")  # (group.cc ends a running job's calls too)
# The transport a link of the chain belongs to (bootstrap, proxy and misc/socket belong to none)
_IB_PLUGIN_FILE = r"(?:ib|ucx|ucx_rma|p2p)_plugin\.c$"  # nccl-rdma-sharp-plugins: verbs, UCX
_CHAIN_KIND = (
    (re.compile(r"(?:^|/)net_ib\.c[cu]?$|" + _IB_PLUGIN_FILE), Transport.IB),
    (re.compile(r"(?:^|/)net_socket\.c[cu]?$"), Transport.SOCKET),
)
# Links below it that are about the network (probing links such as include/net.h are not).
_NET_CHAIN_FILE = re.compile(
    r"(?:^|/)(?:transport|bootstrap|proxy)\.c[cu]?$|(?:^|/)transport/net(?:_ib|_socket)?"
    r"(?:\.c[cu]?|/)|(?:^|/)net_ib\.c[cu]?$|(?:^|/)net_socket\.c[cu]?$|" + _IB_PLUGIN_FILE)
_NET_WARN = searched_fast(
    r"NET/|\bNet\b|NET devices?\b|[Nn]etwork|ibv_|\bIB\b|[Ss]ocket|[Cc]onnect|OFI|[Ll]ibfabric|"
    r"\bfi_|RDMA|"
    r"wrong type|NET plugin|[Pp]lugin|No device|[Cc]ompletion|verbs|[Pp]roxy|[Bb]ootstrap|\bpeer\b|"
    # (the socket helper's own calls: `include/socket.h:347 NCCL WARN Call to bind failed :
    # Address already in use`, mmdetection#7047's 2-node job on NCCL 2.8; not RAS's `Call to
    # bind failed: ...` of NCCL >= 2.24, whose client socket init goes on without, vllm#19204)
    r"Call to (?:bind|listen|accept) failed :|\(detected in ncclIb")
# EFA's unresponsive receiver whose handshake never completed (FI_EFA_ERR_UNESTABLISHED_
# RECV_UNRESP, 4126: "reachable by EFA device but handshake failed"; libfabric's efa_errno.h):
# that connection was never up, so it is no running link's error (_LINK_ERROR) but a setup
# error (_SETUP_WARN). (4124, "connection previously established", is a running link's.)
_NEVER_ESTABLISHED = searched_fast(r"\bError: 4126\b|handshake failed")
# Errors that set a connection up (as opposed to ones on a working link, "Got completion
# ... error 12"): with NCCL >= 2.22 connecting after Init COMPLETE, these still mean the
# transport never carried the job.
_SETUP_WARN = searched_fast(
    r"ibv_(?:create|modify|reg|open|alloc|query)|Couldn't (?:open|create|get|find)|"
    r"[Cc]reat(?:e|ion|ing)\b.*fail|socketFinalizeAccept|wrong type|[Cc]onnect(?:ion)? refused|"
    r"Call to (?:connect|bind|listen|accept)|not found|No device|Failed to initialize|"
    r"initialization failed|" + WRITTEN_FORMS[_NEVER_ESTABLISHED] + "|"
    r"Unable to (?:find|create|open|init|insert)|Address family|[Cc]ould not find")
# IB's async thread's WARN of an event, in NCCL <= 2.22's words (`Got async event : port
# error`) and NCCL >= 2.23's for the events it calls non-fatal (`Got async error event: ...`)
_IB_ASYNC_EVENT = r"Got async (?:error )?event ?: ?"
# ... and errors of a link in use: a request that completed with an error. NCCL does not retry
# it (the communicator's operations fail), so after Init COMPLETE the job failed on its link,
# also where the paste ends before the chain (nccl#733, error 12 at 3+ nodes, cut mid-word;
# aws-ofi-nccl on cxi with every SEND `completed with error`, VNI not found, the job hung)
_IB_FATAL_SEEN = r"encountered a fatal error \(detected in ncclIb(?:Isend|Irecv|Iflush|Test)\)"
_LINK_ERROR = searched_fast(
    # (IB's `collective mismatch error local size 32768 remote 1048576`: the peer posted a
    # receive of another size on a link in use, nccl#531's first iteration)
    r"Got compl|completed with error|[Cc]ompletion (?:queue )?error|\bcq_readerr\b|"
    r"collective mismatch|"
    # (the socket transport's own receive on a data connection, nccl#626's running job:
    # `NET/Socket : peer 192.168.161.30<59210> message truncated : receiving 1048576 bytes
    # instead of 65536`, no peer named before NCCL 2.8; not the bootstrap's `Message
    # truncated : received ...`)
    r"NET/Socket : (?:peer \S+ )?message truncated|" +
    # (... and its test of a request, which only sends and receives on a connection that
    # is up: `NET/Socket : socket progress error`, after `Net : Call to recv from <peer>
    # failed : Connection timed out` in nccl#706's 32-pod job, hung after training steps)
    r"NET/Socket : socket progress error|" +
    # (IB's async thread, which runs once IB opened its devices: an error on a work queue
    # or a completion queue, which exist and carry requests only once a connection is up,
    # a RoCE CX7 job's AllReduce, nccl#1710; a port that went down or a device that failed,
    # mid-run in lit-llama#380's 4-node job and nccl#230's after 830K iterations; then the
    # thread's own `Call to ibv_get_async_event failed`. NCCL >= 2.23 words them `async
    # fatal event on QP (0x...): ...`, `async fatal event: ...`, `Got async error event:
    # port error`. Where the paste shows init still under way, link_failure keeps them a
    # failed init; the events that change nothing are _PROBE_WARN's.)
    _IB_ASYNC_EVENT + r"(?:[\w ]*work queue (?:catastrophic )?error|CQ error|port error|"
    r"local catastrophic error)|async fatal event(?: on (?:QP|CQ)\b|:)|"
    r"ibv_get_async_event failed|"
    r"fi_cq_read\w* failed|ibv_poll_cq failed|" +
    # (NCCL >= 2.24 checks, at each data call, whether the async thread saw a fatal event,
    # and says where it noticed: `transport/net_ib.cc:113 NCCL WARN communicator
    # encountered a fatal error (detected in ncclIbIrecv)`, then the chain up to the
    # progress thread; nccl-tests#360's alltoall after its all-reduce had run)
    _IB_FATAL_SEEN)
_WARN_OFI = searched_fast(r"NET/OFI|[Ll]ibfabric|\bfi_|\bOFI\b|\befa\b|\bcxi\b")
_WARN_IB = searched_fast(r"ibv_|NET/(?:IB|gIB|SPCX)|mlx\d|\bIB\b|verbs|RoCE|\(detected in ncclIb")
# Plugins that print NCCL's own IB lines under their name (`NET/gIB : Using [0]mlx5_0:1/RoCE`,
# Google's A3 Ultra / A4; NVIDIA's Spectrum-X `NET/SPCX`): read as NET/IB's
_IB_ALIASES = ("NET/gIB", "NET/SPCX")
_IB_ALIAS_NAME = re.compile(r"^(?:%s)\w*" % "|".join(_IB_ALIASES))  # (and any suffix)
# Only the socket transport's own WARNs (net_socket.cc: `NET/Socket : ...`) name it. NCCL's
# socket helper (misc/socket.cc, include/socket.h, os/linux.cc; a plugin's socket.c) serves
# the bootstrap, the proxy and every transport's connection setup, so its WARNs
# (`socketPollConnect: connect to ... returned Connection refused`, `Net : Socket creation
# failed`, `socketProgressOpt: Call to recv ... failed`) say that a socket failed, not that
# the socket transport was tried (nccl-tests#14, nccl#947, sglang's bootstrap mismatch).
# ... as do the TCP plugins' own WARNs (Google's `NET/FasTrak ...: INVALID_ARGUMENT: Buffer
# registration request ...`, A3 Mega's TCPXO; `NET/GPUDirectTCPX : gpu_tx_reg_mr failed -5`)
_WARN_SOCKET = re.compile(r"NET/(?:(?:Fast)?Socket|GPUDirectTCPXO?|TCPXO?|FasTrak)\b")
_SOCKET_WORD = searched_fast(r"[Ss]ocket")
# The provider an aws-ofi-nccl error names in its own words: `Unresponsive receiver
# (reachable by EFA device but handshake failed) My EFA addr: fi_addr_efa://[fe80::..]`
# (group `a` names the provider; the other alternative is EFA's own words)
_OFI_WARN_PROVIDER = searched_fast(r"\bfi_addr_(?P<a>efa|psmx[23]|opx)://|\bEFA (?:device|addr)\b")
# WARNs of a probe that goes on (not a failure, and about no transport that was tried):
# aws-ofi-nccl's NVLS version check (`Could not find ncclGetVersion symbol`, a TRACE in later
# releases, which then return 0), and NCCL's look for rdma-core (`Failed to open
# libibverbs.so[.1]`, printed on every host without it; NCCL goes on with sockets).
_COLLNET_FALLBACK = "Cannot initialize CollNet"
# (two ranks on one GPU: NCCL >= 2.31 words it `Multiple Ranks are using the same
# GPU/Partition. Set NCCL_MULTI_RANK_GPU_ENABLE=1 ...`, nccl#1716)
_DUPLICATE_GPU = ("Duplicate GPU detected", "Multiple Ranks are using the same GPU")
_SYSFS_HIDDEN = "Could not find real path of /sys"
_RING_OPEN = "Error : ring "
_IN_NODE_WARN = re.compile(
    r"(?:%s|%s|%s|%s\d+ does not loop back)" % (*_DUPLICATE_GPU, _SYSFS_HIDDEN, _RING_OPEN))
# IB's init skipping a device it cannot open (a probe WARN, below); which device, where no
# other then opened (see _Judge._fabric)
_IB_OPEN_FAILED = re.compile(r"^NET/IB\w* ?: ?Unable to open device ([\w.\-]+)")
_PROBE_WARN = re.compile(r"^(?:NET/OFI )?Could not find ncclGetVersion symbol|"
                         # (IB's async thread telling of an event that fails nothing: a
                         # subnet manager's `client reregistration` on a running node
                         # (DeepSpeed#3272), `GID table change` (a vLLM TP=4 pod); NCCL
                         # itself calls them non-fatal; SRQs it does not use)
                         r"^NET/IB\w* ?: ?(?:\S+:\d+ )?(?:" + _IB_ASYNC_EVENT +
                         r"(?:GID table change|client reregistration|port active|LID change|"
                         r"P_Key change|SM change|path migration successful|send queue "
                         r"drained|last WQE reached|SRQ limit reached|communication "
                         r"established)|async fatal event on SRQ)|"
                         # (SHARP failing is CollNet failing: NCCL goes on point-to-point)
                         r"^NET/IB ?: SHARP coll init error|"
                         r"^Failed to open libibverbs|" +
                         # (NCCL's cudawrap.cc probing cuMem: the device lacks VMM, so NCCL
                         # goes without its cuMem path; printed beside the real fault on
                         # consumer Radeons, whose RCCL kernels then fail to launch)
                         r"^cuMem support requires VMM RDMA support|" +
                         # (NCCL >= 2.30's advice that IB resiliency has no second device to
                         # fail over to: the run goes on)
                         r"^NET/IB\w* ?: ?Resiliency is enabled on a \w+ communicator|" +
                         # (aws-ofi-nccl without /dev/gdrdrv: GDRCopy only speeds up small
                         # copies, and GIN goes without it; healthy EFA runs print it, and
                         # AWS's own EKS notes call it benign)
                         r"^NET/OFI (?:\S+ )?Failed to initialize GDRCopy\b|" +
                         # (IB's init skips a device it cannot open and goes on with the
                         # others: `No device found` follows where none opened; nccl#2428's
                         # eRDMA job ran on erdma_0 after `Unable to open device erdma_1`)
                         _IB_OPEN_FAILED.pattern + "|"
                         # (a stray connection, an HTTP scrape on NCCL's port: closed, and
                         # the accept goes on; nccl#1808, nccl#1871)
                         r"^socketFinalizeAccept: wrong magic|"
                         # ... and the proxy's complaints while communicators are destroyed
                         # (DeepEP#41: after the test ran; `operation Close` is never init)
                         r"^\[Service thread\] (?:Accept failed|Could not receive type from)|"
                         r"^\[Proxy Service \d+\] Failed to execute operation Close\b")
# libfabric's own log lines: libfabric:PID:TS:[domain:]PROV:subsys:func():line<level> msg;
# ~1.17 wrote no TS (`libfabric:2833295:efa:core:fi_param_get_():280<info>`), <= ~1.7 no
# PID either (`libfabric:ofi_rxm:cq:rxm_cq_read_write_error():819<warn>`)
_LIBFABRIC = re.compile(
    r"\blibfabric:(?:(?P<pid>\d+):(?:\d+:)?)?(?P<fields>[\w:;\-]*?):?\w*\(\)")
_FI_PROVIDER_ENV = re.compile(
    r"\bFI_PROVIDER(?:\s*=\s*|\s+set by environment to\s+|:\s+)['\"]?(?P<prov>[a-z][\w;]*)")
_FI_PROV_PREFIX = re.compile(r"\bFI_(?:OPT_)?(?P<p>CXI|EFA|VERBS|TCP|PSM2|PSM3|OPX|UCX|SOCKETS)_")
_JSON_MSG = re.compile(r'"(?:log|message|msg|textPayload|MESSAGE)"\s*:\s*"(?P<v>(?:[^"\\]|\\.)*)"')
# NCCL's WARN that its socket layer could not even be set up (no usable interface, or a
# peer's address unreadable: NCCL_SOCKET_IFNAME naming no interface, nccl#1837; nodes of
# different NCCL versions), as PyTorch echoes it after `Last error:` under a launcher's
# prefix, where the rank's own WARN is not in the log: init failed before any network was
# chosen
_SOCKET_INIT_ECHO = re.compile(
    r"(?:ncclSocketInit: connecting to address .* is neither AF_INET|"
    r"Bootstrap : no socket interface found)")
# ... and the same of a socket connect (_SOCKET_CONNECT_FAILED): read as that WARN only where
# nothing else in the log names a network (result()), as _STRIPPED_WARN's echoes are
_SOCKET_CONNECT_ECHO = re.compile(_SOCKET_CONNECT_FAILED)
# The last WARN as an error's text quotes it: RCCL's `Last RCCL warning: 'Call to
# ibv_modify_qp failed with 110 Connection timed out, ...'`, XLA's `Last NCCL warning(error)
# log entry (may be unrelated) '...'`: an echo like PyTorch's `Last error:` (result())
_LAST_WARNING = re.compile(
    r"Last [NR]CCL warning(?:\(error\))?(?: log entry \(may be unrelated\))?:? ?'")
# Words of an aws-ofi-nccl / NET/IB error that a paste stripped of `NCCL WARN` still shows
_STRIPPED_WARN = re.compile(
    _VERBS_FAILED + "|" + _EFA_ABORTS + "|"
    # (and the plugins' own, GKE's TCPX plugin registering GPU memory among them:
    # `NET/GPUDirectTCPX : gpu_tx_reg_mr failed -5`, a runbook's tier where every rank died)
    r"NET/(?:OFI|IB|GPUDirectTCPX\w*)\b.*(?:completed with error|"
    r"Couldn't (?:open|create|get|find|register)|[Uu]nable to (?:register|create|open|insert)|"
    r"failed with error|Got completion from peer|Unexpected number of remote rails|"
    r"reg_mr failed)")
# The topology's XML lacks what NCCL needs (a WARN: fatal; the same words at INFO are not)
_TOPO_FATAL = re.compile(r"Attribute \S+ of node \S+ not found")
# A WARN that init.cc itself prints when init cannot go on (not its advice, such as RCCL's
# `Missing "iommu=pt" from kernel command line`)
_INIT_FAULT = re.compile(r"(?:Cuda|CUDA|HIP|Hip|hip) (?:failure|error)\b")
# The proxy thread's report of a failure it passed on, over its own local sockets
_PROXY_ECHO = searched_fast(
    r"\[Proxy Service|\[Service thread\] Error encountered|polling for opId|[Pp]roxy [Cc]all")
# ... and, after a fault within the node, the proxy's sockets to the node's ranks closing
# (and a rank's own proxy client, to the proxy of the rank whose setup failed)
_LOCAL_ECHO = searched_fast(
    WRITTEN_FORMS[_PROXY_ECHO] + r"|socketProgress|closed by remote peer|ncclProxyClient|"
    r"\[Service thread\]")
# The transports within a node (a WARN's source, a chain's link), and transport.cc, which
# passes any transport's error on
_LOCAL_FILE = re.compile(r"(?:^|/)(?:shm\.h|shmutils\.cc|transport/(?:shm|p2p|nvls)\.c[cu]?)$")
_GENERIC_TRANSPORT_FILE = re.compile(r"(?:^|/)transport\.c[cu]?$")
# The transports' connection setup (ncclTransportP2pSetup, and NCCL >= 2.22's connecting at
# the first collective through transport/generic.cc): an error passed up here was setting a
# connection up, not moving data on one that was up
_CONNECT_FILE = re.compile(r"(?:^|/)transport(?:/generic)?\.c[cu]?$")
_BOOTSTRAP_FILE = re.compile(r"(?:^|/)bootstrap\.c[cu]?$")
_RING_ORDER = re.compile(r"^(?:Channel \d+(?:/\d+)?|Ring \d+) :(?P<ranks>(?: +\d+)+) *$")
_NO_DEVICE_ONLY = "NET/IB : No device found, and no other network"
# NCCL 2.28 names the rank before some messages: `NCCL INFO [Rank 5] ncclCommInitRankConfig
# comm 0x55d1632f46d0 rank 5 nranks 8 ... - Init START` (NeMo Automodel's single-node log)
_RANK_TAG = re.compile(r"\[Rank \d+\] ?")
_MD_LINK = re.compile(r"\[([^\[\]\s]{1,200})\]\(https?://[^)\s]{0,200}\)")
_BOX_EDGES = "\u2502\u2503\u2551"  # the vertical border of a terminal viewer's box: │ ┃ ║
_BOX_EDGE = re.compile(r"^ |\s*[%s]\s*$" % _BOX_EDGES)
_HTML_ENTITY = re.compile(r"&(?:[a-z]{2,6}|#\d{2,5});")
_WRAPPED_START = _BOX_EDGES + "{"  # (an empty line is `in` it too: harmless)
_NOTEBOOK_ENDS = ('\\n",', '\\n"')  # a notebook's line of output, as a JSON string
_IBVERBS_NO_DRIVER = "libibverbs: Warning: no userspace device-specific driver found"
# (`node01`, `node031`, `server2`: a number tells machines apart, so a name with one is taken
# as a real host name, which such names usually are: horovod#492, nccl-tests#307)
_REDACTED_HOST = re.compile(
    r"^$|[<>*?{}$]|^x+(?:[-_.]x+)*$|_ip$|^(?:\.{2,}|\u2026)$|"  # (an elision: `...:81:150 [3]`)
    r"^(?:ip|host|hostname|node|nodename|user|server|"
    r"machine|computer|myhost|yourhost|redacted|hidden|anonymi[sz]ed)$", re.I)

# Network names NCCL prints in "Using network X" and "via NET/X/...".
_OFI_NAMES = frozenset({"AWS Libfabric", "Libfabric", "OFI"})
_KNOWN_NAMES = {
    **{n: Transport.OFI for n in _OFI_NAMES}, "IB": Transport.IB, "Socket": Transport.SOCKET,
    "FastSocket": Transport.SOCKET,  # Google's plugin: TCP, however fast
    "UCX": Transport.IB, "UCX-RMA": Transport.IB, "UCX_RMA": Transport.IB,  # verbs through UCX
    "UCX-UCT": Transport.IB, "UCX-UCT-RD": Transport.IB,  # (nccl-rdma-sharp-plugins' UCT ones)
    "RCCL-ANP": Transport.IB, "ANP": Transport.IB,  # AMD's plugin for its AINIC cards: RoCE
    "IB-CAST": Transport.IB, "IB-ROCM": Transport.IB,  # RCCL's own verbs networks (AINIC)
    "Libfabric_GDAKI": Transport.OFI,  # libfabric with device-initiated transfers (DeepEP GIN)
}
_KNOWN_LOWER = {n.lower(): kind for n, kind in _KNOWN_NAMES.items()}
# HPC-X / nccl-rdma-sharp plugin's verbs network: `IBext_v8`, or the plugin's own name
# (`Using network NCCL RDMA Plugin v8`, `via NET/NCCL RDMA Plugin v8/0/GDRDMA`)
# (UCCL's plugin names itself RDMA_Plugin: verbs on IB/RoCE NICs, uccl#172)
# Google's gIB (A3 Ultra, A4, A4X: "the gIB (InfiniBand) plugin", RoCE) and NVIDIA's
# Spectrum-X plugin (`via NET/SPCX/2(0)/GDRDMA`, RoCE) are verbs too
_IBEXT = re.compile(r"^(?:IBext(?:_v\d+)?|NCCL RDMA Plugin(?: v\d+)?|RDMA_Plugin(?:_v\d+)?|"
                    r"gIB(?:_v\d+)?|SPCX(?:_v\d+)?)$")
# Google's GPUDirect-TCPX (A3) and TCPXO/FasTrak (A3 Mega) plugins move the data over TCP on
# the VM's Ethernet NICs, into GPU memory: TCP, like FastSocket, however fast
_TCP_PLUGIN = re.compile(r"^(?:GPUDirectTCPXO?|TCPXO?|FasTrak)(?:_v\d+)?$")
# ... whose WARNs name a function of theirs, not a file (`tcpxResult_t tcpxCommProgress(...)`)
_TCPX_SOURCE = re.compile(r"\btcpx\w*\(|nccl-fastsocket|\btcpx\w*\.cc?:\d", re.I)

# Provider names taken even at the end of a line (a line that may have been cut short).
_OFI_PROVIDERS = frozenset({"cxi", "efa", "tcp", "sockets", "udp", "shm", "verbs", "psm2",
                            "psm3", "opx", "ucx", "mlx", "lnx", "sm2", "usnic", "gni"})
_HELPER_PROVIDERS = frozenset({"shm", "sm2", "core", "util", "lnx"})  # never the inter-node one
_LL128_MIN_VERSION = (2, 27)
_RDZV_GUARD = ("FI_CXI_RDZV_EAGER_SIZE", "FI_CXI_RDZV_THRESHOLD", "FI_CXI_RDZV_GET_MIN")


def _net_kind(name: str) -> Transport | None:
    if name in _KNOWN_NAMES:
        return _KNOWN_NAMES[name]
    if name.lower() in _KNOWN_LOWER:  # (NCCL_NET is matched ignoring case, and `network ib
        return _KNOWN_LOWER[name.lower()]  # not found` prints it as the user typed it)
    if _IBEXT.match(name):
        return Transport.IB
    if _TCP_PLUGIN.match(name):
        return Transport.SOCKET
    return None


def _is_truncated_name(name: str) -> bool:
    """True if `name` is a proper prefix of a known network name (a line cut short)."""
    return any(known.startswith(name) and known != name
               for known in (*_KNOWN_NAMES, "IBext", "NCCL RDMA Plugin", "gIB", "SPCX"))


def _version_tuple(v: str | None) -> tuple[int, ...]:
    if not v:
        return ()
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def _ofi_base_provider(provider: str | None) -> str | None:
    """"tcp;ofi_rxm" -> "tcp", "ofi_rxm;verbs" -> "verbs", "EFA" -> "efa"."""
    if not provider:
        return None
    if provider in _OFI_PROVIDERS:  # the usual case, asked once per rank
        return provider
    parts = [p for p in provider.lower().split(";") if p]
    for p in parts:
        if not p.startswith("ofi_"):
            return p
    return parts[0] if parts else None


def _warn_kind(msg: str) -> Transport | None:
    """The transport a WARN message is about, if it says."""
    if _WARN_OFI.search(msg):
        return Transport.OFI
    if _WARN_IB.search(msg):
        return Transport.IB
    if _WARN_SOCKET.search(msg):
        return Transport.SOCKET
    return None


def _held_warn(tail: str) -> bool | None:
    """May the lines after this (right-stripped) line hold its WARN's message? True: on
    indented lines only (a WARN with no message); False: on any lines (a network's tag
    alone, _WARN_TAG_ONLY); None: it is no such WARN."""
    if tail.endswith("NCCL WARN"):
        return True
    if tail.endswith(":") and _WARN_TAG_ONLY.search(tail):
        return False
    return None


@lru_cache(maxsize=1024)
def _source_facts(where: str) -> tuple[bool, bool, bool]:
    """What the source a WARN's prefix names (`transport/shm.cc:123`, a plugin's function)
    says, whichever process printed it: a transport within the node, a TCP plugin's
    function (source_names_plugin), a file whose error ends init (_TOP_CHAIN_FILE).
    Kept: a flood of WARNs names a few sources over and over."""
    file = where.split(":", 1)[0]
    return (_LOCAL_FILE.search(file) is not None, _TCPX_SOURCE.search(where) is not None,
            _TOP_CHAIN_FILE.search(file) is not None)


class _WarnFacts(NamedTuple):
    """What a WARN's message says, whatever process printed it (_Proc._take_warn)."""
    probe: bool = False  # a probe's WARN that fails nothing (_PROBE_WARN)
    in_node: bool = False  # a fault of no network (_IN_NODE_WARN)
    not_found: str | None = None  # the network that `network X not found` names
    ofi_plugin_failed: bool = False  # aws-ofi-nccl giving up (_OFI_PLUGIN_FAILED)
    ofi_provider: str | None = None  # the provider an aws-ofi-nccl error names
    net: bool = False  # about a network at all (_NET_WARN); the rest only then
    proxy_echo: bool = False  # the proxy passing a failure on (_PROXY_ECHO)
    kind: Transport | None = None  # the transport it is about (_warn_kind)
    link: bool = False  # an error of a link in use (_LINK_ERROR, not _NEVER_ESTABLISHED)
    socket_word: bool = False
    setup: bool = False  # an error setting a connection up (_SETUP_WARN)


# A flood of WARNs repeats a few messages many times (every request in flight failing the
# same way, every rank losing the same peer): each message's facts are worked out once.
# Bounded: cleared when full, and only messages of a usual length are kept.
_WARN_FACTS_MEMO: dict[str, _WarnFacts] = {}
_WARN_FACTS_MEMO_SIZE = 4096
_WARN_FACTS_MEMO_CHARS = 512
_NO_WARN_FACTS = _WarnFacts()


def _warn_facts(msg: str) -> _WarnFacts:
    """The facts of a WARN's message (a pure function of it, so kept in a memo)."""
    f = _WARN_FACTS_MEMO.get(msg)
    if f is not None:
        return f
    if _PROBE_WARN.match(msg):
        f = _NO_WARN_FACTS._replace(probe=True)
    else:
        in_node = _IN_NODE_WARN.match(msg) is not None
        m = _NET_NOT_FOUND.search(msg)
        ofi = msg.startswith("NET/OFI")
        p = _OFI_WARN_PROVIDER.search(msg) if ofi else None
        net = _NET_WARN.search(msg) is not None
        kind = _warn_kind(msg) if net else None
        f = _WarnFacts(
            in_node=in_node,
            not_found=(m.group("name").strip() or "(unnamed)") if m else None,
            ofi_plugin_failed=ofi and _OFI_PLUGIN_FAILED.match(msg) is not None,
            ofi_provider=(p.group("a") or "efa") if p else None,
            net=net,
            proxy_echo=net and _PROXY_ECHO.search(msg) is not None,
            kind=kind,
            link=net and _LINK_ERROR.search(msg) is not None
            and _NEVER_ESTABLISHED.search(msg) is None,
            # (read only where the message names no transport: see _take_warn)
            socket_word=net and kind is None and _SOCKET_WORD.search(msg) is not None,
            setup=net and _SETUP_WARN.search(msg) is not None)
    if len(msg) <= _WARN_FACTS_MEMO_CHARS:
        if len(_WARN_FACTS_MEMO) >= _WARN_FACTS_MEMO_SIZE:
            _WARN_FACTS_MEMO.clear()
        _WARN_FACTS_MEMO[msg] = f
    return f


def _wrap_ends(piece: str) -> bool:
    """Is this stripped line a log line of its own, which ends a WARN's wrapped message?"""
    return " NCCL " in piece or _triggers(piece)


def _maybe_wrapped(text: str) -> bool:
    """Might `_unwrapped` find something to take off? (Cheap: most lines are none.)"""
    return text[:1] in _WRAPPED_START or "](http" in text or "&" in text or '{"' in text or (
        text[:1] in ' "[' and ('": "' in text or text.endswith(_NOTEBOOK_ENDS)))


def _unwrapped(text: str) -> str:
    """The log line inside what a viewer or a shipper wrapped it in: a terminal viewer's box
    (k9s: `│ <line>   padding   │`), a page's links over source files
    (`net_ib/[p2p.cc:648](https://p2p.cc:648/)`: `.cc` is a domain), a JSON log record
    (Docker's json-file, log shippers, cloud exports:
    `{"log":"host:pid:tid [0] NCCL INFO ...\\n","stream":"stdout",...}`), a web page's
    HTML escapes (pytorch#76288: `-&gt;`, `&nbsp;`), a notebook's output (each line one JSON
    string of its `text` list: `      "host:pid:tid [0] NCCL INFO ...\\n",`). Callers test
    `_maybe_wrapped` first: most lines are none of these."""
    if text[:1] in _BOX_EDGES and text[1:2] == " ":
        text = _BOX_EDGE.sub("", text[1:])
    if "](http" in text:  # (a link in a link, `[[proxy.cc:1519](http://...)](http://...)`,
        text = _MD_LINK.sub(r"\1", text)  # HugeCTR#433: the outer one is a link after it)
        if "](http" in text:
            text = _MD_LINK.sub(r"\1", text)
    if "&" in text and _HTML_ENTITY.search(text):  # `-&gt;`, `<0&gt;`, `&nbsp;`
        text = html.unescape(text).replace("\u00a0", " ")
    if text[:1] in '{["' or text[:1] == " " and text.lstrip()[:1] == '"':
        # (or one field of a pretty-printed record: `    "textPayload": "...\n",`; or several
        # records on one line, a search engine's response: every message, one per line)
        msgs = _json_messages(text, 0)
        if msgs:
            text = "\n".join(msgs)
        elif text.endswith(_NOTEBOOK_ENDS):
            try:
                line = json.loads(text.strip().rstrip(","))
            except ValueError:
                line = None  # (not one JSON string: the line as it is)
            if isinstance(line, str):
                text = line.rstrip("\r\n")
    elif '{"' in text:
        # ... or after a prefix of its own, which is kept: `grep -H` over Docker's json-file
        # logs (`/var/lib/docker/containers/<id>/<id>-json.log:{"log":"...\n",...}`), a clock
        # that kubectl or a shipper put before the record
        k = text.find('{"')
        msgs = _json_messages(text, k)
        if msgs:
            text = text[:k] + "\n".join(msgs)
    return text


def _json_messages(text: str, start: int) -> list[str]:
    """The messages of the JSON log records in `text` from `start` (`"log"`, `"message"`, ...
    fields, decoded); none where one does not decode (not a record after all, or cut)."""
    try:
        return [json.loads(f'"{m.group("v")}"').rstrip("\r\n")
                for m in _JSON_MSG.finditer(text, start)]
    except ValueError:
        return []


def _is_redacted(host: str) -> bool:
    return bool(_REDACTED_HOST.search(host))


def proto_excludes_ll128(value: str | None) -> bool:
    """True if an NCCL_PROTO value keeps LL128 off (`^LL128`, `^LL,LL128`, `Simple,LL`)."""
    if value is None:
        return False
    v = value.strip().strip("'\"").strip().rstrip(".")
    if not v:
        return False
    negate = v.startswith("^")
    tokens = {t.strip().lower() for t in v.lstrip("^").split(",") if t.strip()}
    return ("ll128" in tokens) if negate else ("ll128" not in tokens)


def _rdzv_guarded(env: Mapping[str, str]) -> bool:
    return all(str(env.get(k, "")).strip() == "0" for k in _RDZV_GUARD)


# Environment variables that decide the LL128 guard.
GUARD_ENV = ("NCCL_PROTO", *_RDZV_GUARD, "FI_CXI_RDZV_PROTO")


def job_guard_env(environ: Mapping[str, Any]) -> dict[str, str]:
    """The LL128 guard settings a job's container saw, from the environment its batch script
    ran in (or a profile's `env:`). Generated scripts hand them to the container as
    `APPTAINERENV_X` (the runtime's prefix wins over the host's own `X`, which Apptainer
    passes through too), and NCCL prints its `NCCL_PROTO set by environment` line only under
    NCCL_DEBUG_SUBSYS=ENV, which the scripts do not set: without this the check warns about
    LL128 on every guarded job."""
    env = {}
    for key in GUARD_ENV:
        for name in (f"APPTAINERENV_{key}", f"SINGULARITYENV_{key}", key):
            if name in environ:
                env[key] = str(environ[name])
                break
    return env


# --------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class LogWarning:
    """One finding: a stable `code` (see WARNING_CODES) and a message for humans."""

    code: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


@dataclass(frozen=True)
class RankReport:
    """What one process (one rank) printed about its network."""

    host: str
    pid: int | None  # None for lines without NCCL's own prefix (grouped by launcher prefix)
    rank: int | None  # global rank from the largest communicator, else a [rankN]: hint
    nranks: int | None
    cuda_dev: int | None
    transport: Transport  # between nodes: `none` where this rank sent nothing across nodes
    network: str | None  # the name NCCL printed: "AWS Libfabric", "IB", "Socket", ...
    provider: str | None = None  # libfabric provider, base name (cxi, efa, verbs, tcp, ...)
    ofi_fabric: str | None = None  # libfabric fabric name, current plugin only
    nics: int | None = None
    ib_devices: tuple[str, ...] = ()
    socket_ifaces: tuple[str, ...] = ()
    net_channels: int = 0  # "via NET/..." channel lines seen
    gdrdma: bool | None = None  # any of them GDRDMA; None if no channel line
    nccl_version: str | None = None  # only if this process printed it (rank 0 usually does)
    plugin: str | None = None
    plugin_api: str | None = None
    plugin_version: str | None = None
    libfabric_version: str | None = None
    plugin_missing: str | None = None  # the NCCL line saying no net plugin was found
    ib_no_device: bool = False
    failure: str | None = None
    nccl_warnings: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    selected: Transport = Transport.NONE  # what NCCL chose (or failed with), across nodes or not
    attempted: Transport | None = None  # failed only: the transport it was trying
    inter_node: bool | None = None  # True/False where the log says; None where it cannot tell
    provider_stack: str | None = None  # the provider as printed: "verbs;ofi_rxm"
    plugin_failed: str | None = None  # a net plugin that gave up, after which NCCL went on
    library: str | None = None  # "nccl" or "rccl" where this process printed its version
    # failed only: after its Init COMPLETE (a link that broke at the first collective or later)
    failed_after_init: bool = False
    # not failed: the error of a link this rank used, which broke while the job ran on it
    link_error: str | None = None
    # not failed: why init failed within its node (shared memory, P2P, NVLS), where nothing
    # says the job spanned nodes and the rank opened no network channel: no network's failure
    local_failure: str | None = None

    @cached_property  # asked per rank by the summary and the JSON: computed once
    def label(self) -> str:
        """Short transport label: OFI/cxi, IB/mlx5_0:1,mlx5_1:1, Socket/hsn0, failed, none."""
        return self._label(self.transport)

    @cached_property
    def selected_label(self) -> str:
        """The label of what NCCL chose, also where no traffic crossed nodes."""
        return self._label(self.selected)

    def _label(self, t: Transport) -> str:
        if t is Transport.OFI:
            return f"OFI/{self.provider or '?'}"
        if t is Transport.IB:
            return "IB/" + ",".join(self.ib_devices) if self.ib_devices else "IB"
        if t is Transport.SOCKET:
            return "Socket/" + ",".join(self.socket_ifaces) if self.socket_ifaces else "Socket"
        return t._value_

    @property
    def who(self) -> str:
        return f"{self.host}:{self.pid}" if self.pid is not None else self.host

    @classmethod
    def _of(cls, **fields: Any) -> "RankReport":
        """Build from every field at once: a frozen dataclass sets each field through
        object.__setattr__, which dominates for tens of thousands of ranks."""
        r = object.__new__(cls)
        r.__dict__.update(fields)
        return r

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "nranks": self.nranks,
            "host": self.host,
            "pid": self.pid,
            "cuda_dev": self.cuda_dev,
            "transport": self.transport._value_,  # (Enum.value is a slow property)
            "label": self.label,
            "network": self.network,
            "provider": self.provider,
            "ofi_fabric": self.ofi_fabric,
            "nics": self.nics,
            "ib_devices": list(self.ib_devices),
            "socket_ifaces": list(self.socket_ifaces),
            "net_channels": self.net_channels,
            "gdrdma": self.gdrdma,
            "nccl_version": self.nccl_version,
            "plugin": self.plugin,
            "plugin_api": self.plugin_api,
            "plugin_version": self.plugin_version,
            "libfabric_version": self.libfabric_version,
            "plugin_missing": self.plugin_missing,
            "ib_no_device": self.ib_no_device,
            "failure": self.failure,
            "nccl_warnings": list(self.nccl_warnings),
            "sources": list(self.sources),
            "selected": self.selected._value_,
            "attempted": self.attempted._value_ if self.attempted else None,
            "inter_node": self.inter_node,
            "provider_stack": self.provider_stack,
            "plugin_failed": self.plugin_failed,
            "library": self.library,
            "failed_after_init": self.failed_after_init,
            "link_error": self.link_error,
            "local_failure": self.local_failure,
        }


@dataclass(frozen=True)
class LogVerdict:
    """The job-level answer. `summary` is the one-line report; `to_json()` the machine one."""

    source: str
    expected_fabric: Fabric | None  # as given by the caller
    fabric: Fabric | None  # as used for the checks: given, or inferred (see fabric_inferred_from)
    fabric_inferred_from: str | None
    transport: Transport  # between nodes; `none` for a single-host job or no selection seen
    provider: str | None  # libfabric provider (base name) wherever a line names one
    ofi_fabric: str | None
    nccl_version: str | None
    plugin: str | None
    plugin_api: str | None
    plugin_version: str | None
    libfabric_version: str | None
    # distinct hosts in NCCL prefixes, or NCCL's nNodes if larger; at least 2 where traffic
    # crossed nodes (a lower bound: a paste may hold some hosts' lines only); None where one
    # host's lines say nothing of whether other hosts took part
    nodes: int | None
    world_size: int | None  # largest nranks seen
    ranks: tuple[RankReport, ...]
    warnings: tuple[LogWarning, ...]
    verdict: Verdict
    summary: str
    lines: int = 0
    nccl_lines: int = 0
    ll128_guard: str | None = None  # how the LL128 hazard is avoided, if it is
    sources: tuple[str, ...] = field(default=())
    selected: Transport = Transport.NONE  # what NCCL chose, also where nothing crossed nodes
    attempted: Transport | None = None  # failed only: the transport init was trying
    mixed: bool = False  # ranks moving data between nodes do not all use the same transport
    inter_node: bool | None = None  # did any traffic cross nodes (None: cannot tell)
    library: str | None = None  # "nccl" or "rccl"
    provider_stack: str | None = None  # the provider as printed ("verbs;ofi_rxm")

    @property
    def exit_code(self) -> int:
        """0 fast/single-node; 1 fallback/failed; `none` is 1 only where the fabric needs a
        network (runner.fabrics: slingshot, infiniband), since that job cannot be confirmed
        fast."""
        if self.verdict in (Verdict.FAST, Verdict.SINGLE_NODE):
            return 0
        if self.verdict is Verdict.NONE:
            return 1 if _kind_of(self.fabric).needs_network else 0
        return 1

    @property
    def warning_codes(self) -> tuple[str, ...]:
        return tuple(w.code for w in self.warnings)

    def transport_counts(self) -> dict[str, int]:
        c = Counter(r.transport.value for r in self.ranks)
        return {t.value: c[t.value] for t in Transport if c[t.value]}

    def to_dict(self) -> dict[str, Any]:
        return self._dict([r.to_dict() for r in self.ranks])

    def _dict(self, ranks: Any) -> dict[str, Any]:
        return {
            "source": self.source,
            "sources": list(self.sources),
            "fabric": self.fabric.value if self.fabric else None,
            "expected_fabric": self.expected_fabric.value if self.expected_fabric else None,
            "fabric_inferred_from": self.fabric_inferred_from,
            "transport": self.transport.value,
            "provider": self.provider,
            "ofi_fabric": self.ofi_fabric,
            "nccl_version": self.nccl_version,
            "plugin": self.plugin,
            "plugin_api": self.plugin_api,
            "plugin_version": self.plugin_version,
            "libfabric_version": self.libfabric_version,
            "nodes": self.nodes,
            "world_size": self.world_size,
            "transport_counts": self.transport_counts(),
            "ll128_guard": self.ll128_guard,
            "ranks": ranks,
            "warnings": [w.to_dict() for w in self.warnings],
            "verdict": self.verdict.value,
            "exit_code": self.exit_code,
            "summary": self.summary,
            "lines": self.lines,
            "nccl_lines": self.nccl_lines,
            "selected": self.selected.value,
            "attempted": self.attempted.value if self.attempted else None,
            "mixed": self.mixed,
            "inter_node": self.inter_node,
            "library": self.library,
            "provider_stack": self.provider_stack,
        }

    def to_json(self, indent: int | None = 2) -> str:
        """The JSON document. With `indent`, each rank is one compact line (json's indenting
        encoder is pure Python, 5x slower on 16k ranks); beyond JSON_RANK_LINES ranks the
        rank list is one compact array. Ranks are encoded by _ranks_json (as json.dumps
        would, without building their dicts)."""
        text = json.dumps(self._dict(_RANKS_MARK), indent=indent, sort_keys=False)
        ranks = _ranks_json(self.ranks)
        pad = " " * (indent or 0)
        if indent is None or len(ranks) > JSON_RANK_LINES:
            body = "[" + ", ".join(ranks) + "]"
        elif ranks:
            body = "[\n" + ",\n".join(pad * 2 + r for r in ranks) + "\n" + pad + "]"
        else:
            body = "[]"
        return text.replace(json.dumps(_RANKS_MARK), body, 1)


_RANKS_MARK = "\u0000ranks\u0000"  # placeholder: cannot occur in a JSON-encoded log string
JSON_RANK_LINES = 256  # up to this many ranks, --json writes one line per rank
_RANK_HEAD = ("rank", "nranks", "host", "pid", "cuda_dev")  # what to_dict() puts first
_RANK_TAIL = tuple(f.name for f in fields(RankReport) if f.name not in _RANK_HEAD)
_encode_str = json.encoder.encode_basestring_ascii  # json.dumps(str) (the C one)
_rank_tail_of = operator.itemgetter(*_RANK_TAIL)  # a rank's tail fields, as one tuple


def _json_int(v: int | None) -> str:
    return "null" if v is None else str(int(v))


def _ranks_json(ranks: Iterable[RankReport]) -> list[str]:
    """`json.dumps(r.to_dict())` of each rank, 10x faster for big jobs: ranks differ in
    rank, host, pid and device, and most share everything else, which is encoded once."""
    tails: dict[tuple, str] = {}
    out = []
    for r in ranks:
        key = _rank_tail_of(r.__dict__)
        try:
            tail = tails.get(key)
        except TypeError:  # a RankReport built by hand with a list in it
            key, tail = None, None
        if tail is None:
            full = json.dumps(r.to_dict())
            # keys are unescaped, string values escape their quotes: the first match is it
            tail = full[full.index(', "transport": '):]
            if key is not None:
                tails[key] = tail
        out.append('{"rank": %s, "nranks": %s, "host": %s, "pid": %s, "cuda_dev": %s%s' % (
            _json_int(r.rank), _json_int(r.nranks), _encode_str(r.host), _json_int(r.pid),
            _json_int(r.cuda_dev), tail))
    return out


@dataclass
class StreamStats:
    """What `LogAnalyser.feed_stream` read from one stream."""

    bytes_read: int = 0
    lines: int = 0
    text: bool = False  # anything but whitespace seen
    binary: bool = False  # stopped early: the stream is binary data, not a text log


# --------------------------------------------------------------------------------------------
# Per-process state while reading


_NONE: list = []  # the shared "no items yet" of a _Proc list (never appended to)
_NO_ENV: dict = {}  # the shared "nothing echoed" of a _Proc env (never written to)


def _add_capped(items: list, value: Any, cap: int = _MAX_ITEMS) -> None:
    if value not in items and len(items) < cap:
        items.append(value)


class _Proc:
    """Mutable state for one process; turned into a frozen RankReport at the end.

    Events carry this process's own line number (`seq`), so the order of a process's lines
    decides (a choice, then a failure after it), never the interleaving with other processes.
    """

    __slots__ = (
        "host", "pid", "real", "dev", "dev_warn", "devs", "sources", "rank", "nranks", "rank_hint",
        "nnodes", "ring_ranks",
        "ranks_seen", "ips", "nets", "via_nets", "net_channels", "gdrdma", "provider",
        "provider_seq", "ofi_fabric", "nics", "named_providers", "ib_devices", "ib_no_device",
        "socket_ifaces", "nccl_version", "library", "plugin", "plugin_api", "plugin_version",
        "libfabric_version", "plugin_missing", "plugin_failed", "plugin_failed_seq", "not_found",
        "unknown_nets", "nccl_warnings", "env", "lines", "label", "sel_seq", "weak_kind",
        "weak_in_use", "weak_seq", "complete_seq", "chan_seq", "err_seq", "err_msg", "err_kind",
        "chain_msg", "fatal_msg", "fatal_seq", "setup_seq", "last_warn", "top_seq", "warn_seq",
        "recover_seq", "net_chain_seq", "socket_is_choice", "verbs_missing", "local_seq",
        "link_seq", "chan_rank_max", "boot_loopback", "init_chain_seq", "progress_seq",
        "conn_seq", "comm_seq", "end_seq", "node_comm_seq", "teardown_seq",
    )

    def __init__(self, host: str, pid: int | None, real: bool) -> None:
        self.host = host
        self.pid = pid
        self.real = real
        self.dev: int | None = None
        self.dev_warn = False  # `dev` is so far only that of WARN lines (see _piece)
        self.devs: list[int] = _NONE  # type: ignore[assignment]  # devices other than `dev`
        self.sources: list[str] = []
        self.rank: int | None = None
        self.nranks: int | None = None
        self.rank_hint: int | None = None
        self.nnodes: int | None = None
        self.ring_ranks = 0  # ranks that a ring-order line lists (`Channel 00/02 :    0   1`)
        self.ranks_seen: set[int] = _NONE  # type: ignore[assignment]
        self.ips: list[str] = _NONE  # type: ignore[assignment]
        self.nets: list[str] = _NONE  # type: ignore[assignment]
        self.via_nets: list[str] = _NONE  # type: ignore[assignment]
        self.net_channels = 0
        self.gdrdma = False
        self.provider: str | None = None
        self.provider_seq = -1
        self.ofi_fabric: str | None = None
        self.nics: int | None = None
        self.named_providers: list[str] = _NONE  # type: ignore[assignment]
        self.ib_devices: list[str] = _NONE  # type: ignore[assignment]
        self.ib_no_device = False
        self.socket_ifaces: list[str] = _NONE  # type: ignore[assignment]
        self.nccl_version: str | None = None
        self.library: str | None = None
        self.plugin: str | None = None
        self.plugin_api: str | None = None
        self.plugin_version: str | None = None
        self.libfabric_version: str | None = None
        self.plugin_missing: str | None = None
        self.plugin_failed: str | None = None
        self.plugin_failed_seq = -1
        self.not_found: str | None = None
        self.unknown_nets: list[str] = _NONE  # type: ignore[assignment]
        self.nccl_warnings: list[str] = _NONE  # type: ignore[assignment]
        self.env: dict[str, str] = _NO_ENV  # type: ignore[assignment]
        self.lines = 0
        self.label: str | None = None
        self.sel_seq = -1  # last network choice (strong or weak)
        self.weak_kind: Transport | None = None  # what the last device line chose
        # the weak choice is only a line showing a network in use (_weak_default)
        self.weak_in_use = False
        self.boot_loopback: bool | None = None  # the bootstrap's own address is 127.x / ::1
        self.init_chain_seq = -1  # last error chain link in init.cc
        self.progress_seq = -1  # last error chain link in the proxy's progress thread
        self.weak_seq = -1
        self.complete_seq = -1  # last "Init COMPLETE"
        self.chan_seq = -1  # last "via NET/..." line
        self.err_seq = -1  # last network WARN or fatal error-chain line
        self.err_msg: str | None = None
        self.err_kind: Transport | None = None
        self.chain_msg: str | None = None
        self.fatal_msg: str | None = None  # "Failed to initialize any NET plugin"
        self.fatal_seq = -1
        self.setup_seq = -1  # last WARN about setting a connection up
        self.last_warn: str | None = None
        self.top_seq = -1  # last error chain line from init.cc / group.cc / [Async thread]
        self.warn_seq = -1  # last WARN about the network (err_seq also counts chains)
        self.recover_seq = -1  # NCCL said it goes on without what failed before (CollNet)
        self.net_chain_seq = -1  # last error-chain link through a network file
        # NCCL < 2.5: this process's `NET/Socket : Using` line is no bootstrap's (see
        # _bootstrap_only): it printed `Bootstrap : Using` apart (2.4.8), or found no
        # libibverbs or had IB disabled, after which sockets are all it has
        self.socket_is_choice = False
        self.verbs_missing = False  # `Failed to open libibverbs.so[.1]`: no IB without a plugin
        self.local_seq = -1  # last WARN or chain link of a transport within a node (shm, p2p)
        self.link_seq = -1  # last WARN that a request failed on a working link
        self.conn_seq = -1  # last error chain link through the transports' connection setup
        self.comm_seq = -1  # first communicator line of its init (not of its abort)
        self.end_seq = -1  # its communicator destroyed or aborted, and no init line since
        self.node_comm_seq = -1  # its last communicator line said `nNodes 1` (one node's)
        self.teardown_seq = -1  # a WARN of freeing a communicator, and no init line since
        self.chan_rank_max = -1  # the higher rank of this process's first `via NET/` line

    def copy(self) -> "_Proc":
        new = _Proc(self.host, self.pid, self.real)
        for name in self.__slots__:
            value = getattr(self, name)
            setattr(new, name, value.copy() if isinstance(value, (list, dict, set))
                    and value is not _NONE and value is not _NO_ENV else value)
        return new

    def absorb(self, other: "_Proc") -> None:
        """Take in what a cut line attributed to a shortened host name (`de1:7:7 [0] ...`
        is the tail of `node1:7:7 [0] ...` whose head went to another line). Sequence
        numbers of the other part are not comparable with ours, so its events count as
        facts only (it holds few lines)."""
        for name in self.__slots__:
            mine, theirs = getattr(self, name), getattr(other, name)
            if name in ("host", "pid", "real", "rank", "nranks", "label") or name.endswith(
                    "_seq") or name in ("err_msg", "err_kind", "chain_msg", "fatal_msg",
                                        "weak_kind", "weak_in_use"):
                continue
            if name == "ranks_seen":
                if theirs and len(mine) < _MAX_RANKS_SEEN:
                    self.ranks_seen = set(mine) | set(list(theirs)[: _MAX_RANKS_SEEN - len(mine)])
            elif isinstance(mine, list):
                for v in theirs:
                    self._push(name, v, max(_MAX_ITEMS, len(mine)))
            elif isinstance(mine, dict):
                if theirs and mine is _NO_ENV:
                    self.env = mine = {}
                for k, v in theirs.items():
                    mine.setdefault(k, v)
            elif isinstance(mine, bool):
                setattr(self, name, mine or theirs)
            elif name in ("net_channels", "lines"):
                setattr(self, name, mine + theirs)
            elif name == "ring_ranks":
                self.ring_ranks = max(mine, theirs)
            elif name == "nnodes":
                if theirs is not None and (mine is None or theirs > mine):
                    self.nnodes = theirs
            elif mine is None:
                setattr(self, name, theirs)
        if other.nranks is not None and (self.nranks is None or other.nranks > self.nranks):
            self.rank, self.nranks = other.rank, other.nranks
        if self.weak_kind is None and other.weak_kind is not None:
            self.weak_kind, self.weak_in_use = other.weak_kind, other.weak_in_use
        if self.err_kind is None and other.err_kind is not None:
            self.err_kind, self.err_msg = other.err_kind, self.err_msg or other.err_msg
        if other.complete_seq >= 0 and self.complete_seq < 0:
            # its part completed (or carried data): place that after what we read, since
            # the two parts' line numbers cannot be compared
            self.complete_seq = self.lines
        if other.link_seq >= 0 and self.link_seq < 0 and other.err_msg and not (
                other.err_kind is Transport.SOCKET and self.err_kind in (Transport.IB,
                                                                        Transport.OFI)):
            # its part holds a running link's error and ours none: that error follows ours,
            # as _take_warn would have taken it (nccl#706: `Net : Call to recv ... failed`,
            # then the socket transport's `socket progress error` under a prefix cut to
            # `[15]23:83:2526`)
            self.link_seq = self.err_seq = max(self.err_seq, 0)
            self.err_msg, self.err_kind = other.err_msg, other.err_kind or self.err_kind

    # -- one message (the text after "NCCL INFO " / "NCCL WARN ") ---------------------------
    def take(self, level: str, msg: str) -> None:
        self.lines += 1
        if self.weak_kind is not None and msg.startswith("NET/IB") and level == "INFO" \
                and "FI_" not in msg and _QP_ADDS_NOTHING.match(msg):
            return  # (see _QP_ADDS_NOTHING)
        seq = self.lines
        msg = msg.strip()
        if not msg:
            return
        if msg[-1] == "m" and "[" in msg and _PASTED_COLOUR.search(msg):
            msg = _PASTED_COLOUR.sub("", msg).strip()
        elif msg[-1] == "|" and msg[-2:-1] in (" ", "|"):
            # a page that rendered the paste as a table left its cells' bars after each
            # line (`Using internal Network Socket | |`, a gist's copy): no message of
            # NCCL's ends with one
            msg = msg.rstrip("| \t")
            if not msg:
                return
        elif msg[-1] in "`\"',":
            # a line quoted as markdown code (`` - `misc/ibvwrap.cc:203 NCCL WARN Call to
            # ibv_create_cq failed with error Cannot allocate memory` ``), in double quotes
            # (a LUMI course's Q&A), or as an item of a list in JSON or code (`"...NCCL INFO
            # Using network IB",`, a test's fixture; a demo's data): the closing mark (and
            # the item's comma) is no part of the message
            if msg[-1] == "," and msg[-2:-1] in ("\"", "'"):
                msg = msg[:-1]
            if msg[-1] in "`\"'" and msg.count(msg[-1]) == 1:
                msg = msg[:-1].rstrip()
            if not msg:
                return
        if msg[0] == "[" and msg.startswith("[Rank "):  # NCCL >= 2.28: `[Rank 5] ncclComm...`
            m = _RANK_TAG.match(msg)
            if m:
                msg = msg[m.end():]
                if not msg:
                    return
        k = msg.find(" via NET/")
        if k > 0 and level == "INFO" and (msg.startswith("Channel") or msg.startswith("Ring")
                                          or (msg[0].isdigit() and _BARE_RING.match(msg))):
            self._take_channel(msg, k + 9, seq)  # most lines of a big job: keep it short
            return
        if k < 0 and msg[0] == "C" and msg.startswith("CollNet ") and " via COLLNET/" in msg:
            # `CollNet 05/0 : 5 [receive] via COLLNET/SHARP/5/GDRDMA`: SHARP's reduction in
            # the IB switches, which runs between nodes only (nccl#1219, a paste whose
            # rings' lines were cut); IB where nothing else says which network
            self._weak_default(Transport.IB, seq)
            self.net_channels += 1
            self.chan_seq = seq
            self.gdrdma = self.gdrdma or "GDRDMA" in msg
            return
        if "FI_" in msg:
            self._take_fi(msg)
        if level == "WARN":
            self._take_warn(msg, seq)
            return
        if level not in ("INFO", "TRACE"):
            return
        c = msg[0]
        if c == "N":
            if msg.startswith(_IB_ALIASES):  # (its name only: `NET/gIB: IbDev 6 ...`)
                msg = _IB_ALIAS_NAME.sub("NET/IB", msg, 1)
            self._take_n(msg, seq)
        elif c == "U":
            m = _USING_NETWORK.match(msg)
            if m:
                self._strong(m.group("name"), seq)
        elif (c == "C" or c == "R") and (msg[-1:].isdigit() or msg[-1:] == " ") and (
                msg.startswith("Channel") or msg.startswith("Ring ")):
            m = _RING_ORDER.match(msg)  # every rank of the communicator, in ring order
            if m:
                self.ring_ranks = max(self.ring_ranks, len(m.group("ranks").split()))
        elif c == "C" and msg.startswith("CUDA Dev "):
            m = _NIC_DISTANCE.match(msg)  # NCCL 2.3-2.4 name the network they chose here
            if m:
                self._strong(m.group("name"), seq)
        elif c == "R" and msg.startswith("RCCL version"):
            m = _VERSION.match(msg)
            if m:
                self.nccl_version = m.group("v")
                self.library = "rccl"
        elif c == "A":
            m = _ASSIGNED.match(msg)
            if m:
                self._strong(m.group("name"), seq)
        elif c == "P" and msg.startswith("P2P plugin ") and self.plugin is None:
            # HPC-X's plugin names itself when it loads (`P2P plugin IBext`, NCCL <= 2.11
            # printing no `Loaded net plugin` line): the plugin, but no choice, as `Loaded
            # net plugin` is none (nccl#952, where that rank's next lines were `No device
            # found` and `Using network Socket`)
            self.plugin = msg[11:].strip()[:80] or None
        elif c == "F":
            if msg.startswith(_ANY_NET_PLUGIN_FAILED):
                self.fatal_msg, self.fatal_seq = msg[:200], seq
            else:
                m = _NET_PLUGIN_INIT_FAILED.match(msg)
                if m and m.group("name") not in ("IB", "Socket"):  # internal: no device
                    self.plugin_failed = self.plugin_failed or msg[:200]
                    self.plugin_failed_seq = seq
        elif c == "B" and msg.startswith("Bootstrap"):
            self.socket_is_choice = True
            ips = self._take_ips(msg)
            if ips:
                self.boot_loopback = all(_loopback(ip) for ip in ips)
        elif c == "r":
            m = _OLD_RANK.match(msg)
            if m:
                self._rank(int(m.group("rank")), int(m.group("nranks")), seq)
        if " -> " in msg and self.teardown_seq < 0:  # (after one, the teardown's chain)
            m = _CHAIN.match(msg)
            if m and m.group("code") != "0" and self.provider_seq >= 0 \
                    and self.plugin_failed is None and self.complete_seq < 0 \
                    and m.group("file").endswith("plugin/net.cc"):
                # NCCL's plugin loader passing up the error of a plugin's init after it
                # chose a provider (aws-ofi-nccl 1.6 with `verbs;ofi_rxm`: `NET/OFI Invalid
                # type of PCI bus returned 0`, `plugin/net.cc:118 -> 2`): the plugin gave
                # up, and NCCL goes on with its own IB or sockets (a committed sglang log)
                self.plugin_failed = f"net plugin init returned an error ({msg[:120]})"
                self.plugin_failed_seq = seq
            if m and m.group("code") != "0" and _CONNECT_FILE.search(m.group("file")) \
                    and "[" not in m.group("rest"):
                # (not NCCL <= 2.11's proxy thread, which ran in transport.cc: `transport.cc:163
                # -> 3 [Proxy Thread]` passes up a running link's error, tensorflow#34375; a
                # paste may cut the marker to its `[`, nccl-tests#24)
                self.conn_seq = seq
            if m and m.group("code") != "0":
                # (the proxy's progress thread returning an error fails the communicator's
                # operations: `proxy.cc:878 -> 6 [Progress Thread]`, `[Proxy Thread]` before
                # 2.19; after Init COMPLETE, with a network error before it, a failed job:
                # nccl-tests#252's IB completion error 4 on the first collective)
                # (NCCL >= 2.28 names the function instead: `transport/net.cc:1684
                # (recvProxyProgress) -> 2`, after a GDR flush's `ibv_post_send() failed`
                # in a run whose IB links had carried data)
                progress = "[Progress Thread]" in msg or (
                    m.group("func") or "").endswith("ProxyProgress")
                if _TOP_CHAIN_FILE.search(m.group("file")) or "[Async thread]" in msg \
                        or progress or "[Proxy Thread]" in msg:
                    self.top_seq = seq
                    if progress:  # (NCCL >= 2.19: data only; before it
                        self.progress_seq = seq  # the `[Proxy Thread]` set links up too)
                    if _INIT_FILE.search(m.group("file")) and self.end_seq < 0:
                        # (not group.cc's async thread: it also runs the connections NCCL
                        # >= 2.22 makes at the first collective, `enqueue.cc` after it)
                        # (nor init.cc's teardown after the communicator was destroyed: a
                        # CUDA fault freeing it, `init.cu:1143 -> 1`, after an IB link's
                        # completion error, nccl-tests#24)
                        self.init_chain_seq = seq
                    self.chain_msg = self.chain_msg or msg[:200]
                elif _LOCAL_FILE.search(m.group("file")) or (
                        0 <= self.local_seq >= self.warn_seq
                        and _GENERIC_TRANSPORT_FILE.search(m.group("file"))):
                    # shared memory or P2P failed, and transport.cc passed it on: no network's
                    # error (Paddle#55987's full /dev/shm in a container)
                    self.local_seq = seq
                elif _NET_CHAIN_FILE.search(m.group("file")):
                    self.err_seq = self.net_chain_seq = seq
                    below = self.chain_msg or ""  # the link below this one
                    if self.err_kind is Transport.SOCKET and _BOOTSTRAP_FILE.search(
                            m.group("file")) and "net_socket" not in below \
                            and "bootstrap" not in below:
                        # a socket error on the bootstrap's own sockets (which are sockets
                        # whatever the transport): no transport was being tried
                        self.err_kind = None
                    self.chain_msg = msg[:200]
                    if self.err_kind is None:  # a chain with no WARN that named a transport
                        for rx, kind in _CHAIN_KIND:
                            if rx.search(m.group("file")):
                                self.err_kind = kind
                                break
        if "comm " in msg or msg.startswith("ncclCommInitRank"):
            self._take_comm(msg, seq)
        if ("COMPLETE" in msg and _COMPLETE.search(msg)) or msg.startswith("Init timings"):
            # (NCCL >= 2.27 prints `Init timings - ncclCommInitRank: ...` once init is done)
            self.complete_seq = seq
        if " set by environment to " in msg:
            m = _ENV_ECHO.match(msg)
            if m and self._set_env(m.group("key"), m.group("value")):
                if m.group("key") == "NCCL_IB_DISABLE" and m.group("value").rstrip(". ") == "1":
                    self.socket_is_choice = True

    def _set_env(self, key: str, value: str) -> bool:
        """Keep a setting the log echoes (capped at _MAX_ENV keys; the dict exists only
        once it holds one). False where the cap left it out."""
        if key not in self.env and len(self.env) >= _MAX_ENV:
            return False
        if self.env is _NO_ENV:
            self.env = {}
        self.env[key] = value[:200]
        return True

    def _push(self, name: str, value: Any, cap: int = _MAX_ITEMS) -> None:
        """Add to a capped list that exists only once it holds something (most processes
        never fill most lists: 16k processes pay for empty lists otherwise)."""
        items = getattr(self, name)
        if items is _NONE:
            items = []
            setattr(self, name, items)
        if value not in items and len(items) < cap:
            items.append(value)

    def _take_channel(self, msg: str, at: int, seq: int) -> None:
        """`Channel 00/0 : 0[0] -> 4[0] [receive] via NET/AWS Libfabric/7/GDRDMA` (also
        `Ring 00 : 7 -> 8 [receive] via NET/IB/0`); `at` is where the network name starts.
        A name is taken only if `/<index>` follows it (else the line was cut), or if the
        line ends with a whole known name (`... -> 4[b0000] via NET/Socket`: a guide's
        quote that left the index out)."""
        end = msg.find("/", at)
        if end < 0:
            whole = msg[at:].rstrip(" .,;")
            if _net_kind(whole) is None:
                return
            end = at + len(whole)
        elif not msg[end + 1:end + 2].isdigit():
            return
        name = msg[at:end]
        if name in self.via_nets or _net_kind(name) is not None:
            if name not in self.via_nets:
                self._push("via_nets", name)
                m = _CHANNEL_PEERS.search(msg)
                if m and self.chan_rank_max < 0:
                    self.chan_rank_max = max(int(m.group(1)), int(m.group(2)))
            self.net_channels += 1
            self.chan_seq = seq
            if not self.gdrdma and "GDRDMA" in msg[end:]:
                self.gdrdma = True
        elif not _is_truncated_name(name):
            self._push("unknown_nets", name[:80], 4)

    def take_warn_source(self, where: str, msg: str) -> None:
        """What the source NCCL's prefix names for the WARN just taken (`file.cc:NN`, or a
        plugin's function) says about it."""
        local, _, top = _source_facts(where)
        if local:
            self.local_seq = self.lines  # shared memory or P2P failed (see failure())
        self.source_names_plugin(where)
        if (msg.startswith("Attribute ") and _TOPO_FATAL.match(msg)) or (
                top and _INIT_FAULT.match(msg)):
            # the topology's XML lacks what NCCL needs: init returns an internal error
            # (Azure's NHC on one VM, `graph/xml.h:85 ... busid of node nic not found`;
            # aws-ofi-nccl#476 on p5), also where the paste holds no chain after it; or
            # `init.cc:263 NCCL WARN Cuda failure 'initialization error'`: init itself
            # failed, as a chain reaching init.cc says (nccl#1029)
            self.top_seq = self.lines
            self.chain_msg = self.chain_msg or msg[:200]

    def source_names_plugin(self, where: str) -> None:
        """A WARN whose source is a TCP plugin's function (`tcpxResult_t tcpxCommProgress(
        tcpxComm*):1231 NCCL WARN ... rx ctrl timeout`, GPUDirect-TCPX, nccl#1652): that
        plugin carries the job, where no line says which network was chosen."""
        if _source_facts(where)[1]:
            self._weak_default(Transport.SOCKET, self.lines)

    def _strong(self, name: str, seq: int) -> None:
        if _net_kind(name) is not None:
            self._push("nets", name)
            self.sel_seq = seq
        elif not _is_truncated_name(name):
            self._push("unknown_nets", name[:80], 4)

    def _weak(self, kind: Transport, seq: int) -> None:
        self.weak_kind, self.weak_seq, self.sel_seq = kind, seq, seq
        self.weak_in_use = False

    def _weak_default(self, kind: Transport, seq: int) -> None:
        """A weak choice from a line that only shows a network in use (a plugin's own init
        line, IB's GPUDirect check), taken only where no device line chose before it. After
        an error passed up to init, it says which network init was setting up, not that a
        choice came after the failure: it is placed before it (a write-up's two blocks, the
        failed chain first, then `NET/IB : GPU Direct RDMA Disabled for HCA 0`)."""
        if self.weak_kind is None:
            self._weak(kind, seq if self.top_seq < 0 else 0)
            self.weak_in_use = True

    def without_weak_choice(self) -> "_Proc":
        """A copy that chose nothing by a weak line (the judge's second thought about it);
        the analyser's own state stays as it was, since more lines may come."""
        p = self.copy()
        p.weak_kind, p.weak_seq, p.sel_seq, p.weak_in_use = None, -1, -1, False
        return p

    def _rank(self, rank: int, nranks: int, seq: int = -1) -> None:
        """A communicator's rank line; `seq` where it is one of its init (not its abort)."""
        if self.comm_seq < 0 <= seq:
            self.comm_seq = seq
        if self.nranks is None or nranks > self.nranks:
            self.rank, self.nranks = rank, nranks
            self.ranks_seen = {rank}
        elif nranks == self.nranks and len(self.ranks_seen) < _MAX_RANKS_SEEN:
            self.ranks_seen.add(rank)

    def _take_ips(self, msg: str) -> list[str]:
        ips = [m.group("ip") for m in _IFACE_IP.finditer(msg)]
        for ip in ips:
            self._push("ips", ip, 4)
        return ips

    def _take_fi(self, msg: str) -> None:
        m = _FI_PROVIDER_ENV.search(msg)
        if m and not m.group("prov").startswith("^"):
            self._push("named_providers", _ofi_base_provider(m.group("prov")), 4)
        if "FI_EFA_FORK_SAFE environment" in msg:
            # aws-ofi-nccl (aws-ofi-rccl 1.4 too) set it at init whatever the provider:
            # `NET/OFI Setting FI_EFA_FORK_SAFE environment variable to 1` on LUMI's cxi
            return
        for m in _FI_PROV_PREFIX.finditer(msg):
            self._push("named_providers", m.group("p").lower(), 4)

    def _take_warn(self, msg: str, seq: int) -> None:
        self._push("nccl_warnings", msg[:300], _MAX_NCCL_WARNINGS)
        if msg[0] in "Uc" and _TEARDOWN_WARN.match(msg):
            self.teardown_seq = seq
            return
        f = _warn_facts(msg)
        if f.probe:
            if msg.startswith("Failed to open libibverbs"):
                self.socket_is_choice = self.verbs_missing = True
            return
        if 0 <= self.local_seq >= max(self.err_seq, self.warn_seq, self.complete_seq) \
                and _LOCAL_ECHO.search(msg):  # (rare: not worth a fact)
            # shared memory or P2P setup failed in the proxy's service thread, which then
            # fails the operation and closes its sockets to this host's ranks: echoes of the
            # fault within the node, no network's error (rccl#908's `hipIpcGetMemHandle
            # failed`, then `[Proxy Service 1] Failed to execute operation Setup`,
            # `socketProgress: Connection closed by remote peer <its own host>`)
            return
        if f.in_node:
            # faults of no network, whatever was chosen: two ranks of one host on one GPU
            # (init.cc's check, ncclInvalidUsage: horovod#3929, pytorch#47885); a container
            # or WSL that hides the PCI topology from /sys (topo.cc, xml.cc: CrowdDet#86);
            # ranks whose topologies disagree, so that a ring does not close (rings.cc:
            # nccl#520, nccl#577)
            self.local_seq = seq
        if msg.startswith(_COLLNET_FALLBACK):
            # `Cannot initialize CollNet, using point-to-point network instead`: the SHARP
            # errors and the chain before it were CollNet's; init goes on (nccl#1050)
            self.recover_seq = seq
            return
        self.last_warn = msg[:200]
        if f.not_found is not None:
            self.not_found = self.not_found or f.not_found
            self.fatal_seq = seq
            return
        if msg.startswith(_ANY_NET_PLUGIN_FAILED):
            self.fatal_msg, self.fatal_seq = msg[:200], seq
            return
        if msg.startswith(("NET/IB", *_IB_ALIASES)) and self.weak_kind is None:
            # `NET/IB : Got completion from peer ... error 4`: the IB transport was in use
            # (a paste may hold no `Using network` line); any selection line still wins
            self.weak_kind, self.weak_seq = Transport.IB, seq
        if msg.startswith("NET/OFI"):
            self._take_n(msg, seq, info=False)  # provider lines can come as WARN in old plugins
            if f.ofi_plugin_failed:
                self.plugin_failed = self.plugin_failed or msg[:200]
                self.plugin_failed_seq = seq
            if f.ofi_provider:
                self._push("named_providers", f.ofi_provider, 4)
        if f.net:
            self.err_seq = seq
            if not f.proxy_echo:  # (the proxy's own sockets echo any failure)
                self.warn_seq = seq
            kind = f.kind
            if kind is None and self.err_kind is None and "[Proxy thread error]" in msg:
                # NCCL 2.3-2.4's proxy thread runs the network transports; with no IB or
                # plugin error before it, what failed in it was a socket's send or receive
                # (nccl#193: `include/socket.h 398 NCCL WARN Call to write failed :
                # Connection reset by peer.`, then this; Kubernetes pods over flannel)
                kind = Transport.SOCKET
            # NCCL's bootstrap and proxy talk over sockets whatever the transport: a socket
            # error after an IB or OFI one is its echo (`ibv_modify_qp failed`, then the
            # proxy's `Socket recv failed`), not the transport that was tried, nor the cause
            # (... and a link's later completion errors follow from its first: IB's error 12,
            # retry exceeded, then status 5, flushed, for every request still queued)
            if not ((kind is Transport.SOCKET or kind is None and f.socket_word)
                    and self.err_kind in (Transport.IB, Transport.OFI)) \
                    and not (f.proxy_echo and self.err_msg) \
                    and not (f.link and self.link_seq >= 0):
                self.err_msg = msg[:200]
                self.err_kind = kind or self.err_kind
            if f.setup:
                self.setup_seq = seq
            if f.link:
                self.link_seq = seq

    def _take_n(self, msg: str, seq: int, info: bool = True) -> None:
        if msg.startswith("NCCL_IB_HCA set to "):  # (NCCL >= 2.12's own echo of it)
            value = msg[19:].strip()
            if value:
                self._set_env("NCCL_IB_HCA", value)
            return
        if msg.startswith("NCCL version"):
            m = _VERSION.match(msg)
            if m:
                self.nccl_version = m.group("v")
                self.library = self.library or "nccl"
        elif msg.startswith(("NET/OFI", "NET/AWS Libfabric", "NET/Libfabric")) and (
                g := _OFI_GDR.match(msg)):
            self._weak_default(Transport.OFI, seq)
            if g.group("dev") and _CXI_NIC.match(g.group("dev")):
                self._push("named_providers", "cxi", 4)
        elif msg.startswith("NET/OFI"):
            # (every line it matches says `rovider is`: most NET/OFI lines are not tried)
            m = _PROVIDER.match(msg) if "rovider is" in msg else None
            if m and (m.group("end") is None
                      or _ofi_base_provider(m.group("prov")) in _OFI_PROVIDERS):
                self.provider = m.group("prov")
                self.provider_seq = seq
                self.ofi_fabric = m.group("fabric") or self.ofi_fabric
                if m.group("nics"):
                    self.nics = int(m.group("nics"))
                self._weak(Transport.OFI, seq)
                return
            m = _OFI_VERSION.match(msg)
            if m:
                self.plugin_version = m.group("v")
                if msg.startswith("rccl", m.start("v") - 5):  # `aws-ofi-rccl 1.4.0`: RCCL's
                    self.library = "rccl"
                # the plugin initialised (a paste that kept only this line: LUMI's course
                # quotes it as the proof that OFI is used); a later choice, or the plugin
                # giving up, still wins
                self._weak_default(Transport.OFI, seq)
                return
            m = _LIBFABRIC_VERSION.match(msg)
            if m:
                self.libfabric_version = m.group("v")
            elif (m := _PROVIDER_FILTER.match(msg)):
                self._push("named_providers", _ofi_base_provider(m.group("prov")), 4)
                return
            elif "Tuner init" in msg and (m := _OFI_TUNER.match(msg)):
                self.nnodes = max(self.nnodes or 0, int(m.group("n")))
                return
            if _OFI_PLUGIN_FAILED.match(msg):
                self.plugin_failed = self.plugin_failed or msg[:200]
                self.plugin_failed_seq = seq
            elif info and not _OFI_TROUBLE.search(msg) and not msg.startswith(
                    "NET/OFI Selected", 0, 16):  # (a provider's line cut short says nothing)
                # any other line of the plugin's own init (`NET/OFI Setting NCCL_PROTO to
                # "simple"`, `Libfabric provider associates MRs with domains`: nccl-tests#245,
                # two g5 nodes, a paste cut before the choice): the plugin initialised, as
                # its version line says
                self._weak_default(Transport.OFI, seq)
        elif msg.startswith("NET/Plugin"):
            m = _PLUGIN_LOADED.match(msg)
            if m:
                self.plugin = m.group("name")
                self.plugin_api = m.group("api")
            elif _PLUGIN_MISSING.match(msg):
                self.plugin_missing = self.plugin_missing or msg[:200]
        elif msg.startswith("NET/IB"):
            m = _NET_USING.match(msg)
            if m:
                devs = [d.group("dev") for d in _IB_DEVICE.finditer(m.group("rest").split(";", 1)[0])]
                for d in devs:
                    self._push("ib_devices", d)
                if devs:
                    self._weak(Transport.IB, seq)
                # (NCCL 2.2-2.3's `NET/IB : Using interface X for sideband communication` comes
                # before it looks for an HCA, also on hosts with none: `Net/IB: call to
                # devices() returned 0 devices`, then Socket; no choice, horovod#685, #67)
                self._take_ips(msg)
            elif _IB_NO_DEVICE.match(msg):
                self.ib_no_device = True
            elif _IB_GDR.match(msg):
                self._weak_default(Transport.IB, seq)
            elif _IB_QP.match(msg):
                # (nccl#1669's 3-host all-to-all kept these, then RAS's crash in 2.26.2)
                self._weak_default(Transport.IB, seq)
            else:
                m = _IB_DEVICE_LINE.match(msg)
                if m:  # NCCL 2.2-2.3 list the devices one per line, once IB found them
                    # (2.28 details each device of its `Using` line so: `NET/IB: [1]
                    # rocep1s0f1:uverbs1:1/RoCE provider=Mlx5 ...`, the same device)
                    self._push("ib_devices", _UVERBS.sub("", m.group("dev")))
                    self._weak_default(Transport.IB, seq)
        elif msg.startswith("NET/Socket"):
            m = _NET_USING.match(msg)
            if m:
                found = False
                for i in _SOCKET_IFACE.finditer(m.group("rest")):
                    self._push("socket_ifaces", i.group("iface"))
                    found = True
                if not found and "<" not in m.group("rest"):
                    for i in _SOCKET_IFACE_ELIDED.finditer(m.group("rest")):
                        self._push("socket_ifaces", i.group("iface"))
                        found = True
                if found or _SOCKET_IFACE_REDACTED.search(m.group("rest")):
                    self._weak(Transport.SOCKET, seq)
                self._take_ips(msg)
        elif msg.startswith("NET/"):
            m = _NET_USING.match(msg)  # another plugin's device line: NET/FastSocket, NET/UCX
            c = None if m else _NET_CONNECTED.match(msg)
            if c:  # `NET/FastSocket : Connected after 1000 retries.`: a link set up after
                # the plugin's retry WARNs (and the plugin in use)
                kind = _net_kind(c.group("net"))
                if kind is not None:
                    self._weak_default(kind, seq)
                    self.chan_seq = seq
            if m:
                kind = _net_kind(m.group("net"))
                if kind is Transport.SOCKET:
                    for i in _SOCKET_IFACE.finditer(m.group("rest")):
                        self._push("socket_ifaces", i.group("iface"))
                elif kind is Transport.IB:
                    for d in _IB_DEVICE.finditer(m.group("rest")):
                        self._push("ib_devices", d.group("dev"))
                if kind is not None:
                    self._weak(kind, seq)
                self._take_ips(msg)
            elif not c and self.weak_kind is None:
                # any other line of a plugin's own (`NET/FastSocket : Flow placement
                # enabled.`, nccl#1267 cut after it): the plugin initialised, as
                # aws-ofi-nccl's version line says of it; a later choice still wins
                # (`NET/FasTrak: SCTP Closed`: a colon with no blank before it, GKE's TCPXO)
                k = msg.find(" ", 4)
                kind = _net_kind((msg[4:k] if k > 0 else msg[4:]).rstrip(":"))
                if kind is not None:
                    self._weak_default(kind, seq)
        elif msg.startswith("NET : Using"):  # NCCL 2.2-2.3 bootstrap interface
            self._take_ips(msg)

    def _take_comm(self, msg: str, seq: int) -> None:
        m = _COMM.search(msg)
        # (NCCL <= 2.4 said `Destroyed comm 0x7f24c4001af0 rank 4`, with no nranks)
        aborted = msg.endswith(("Abort COMPLETE", "Destroy COMPLETE")) or msg.startswith(
            "Destroyed comm ")
        self.end_seq = seq if aborted else -1
        if not aborted:
            self.teardown_seq = -1
        if not m:
            return
        self._rank(int(m.group("rank")), int(m.group("nranks")), -1 if aborted else seq)
        n = _NNODES.search(msg)
        if n:
            self.nnodes = max(self.nnodes or 0, int(n.group("n")))
            self.node_comm_seq = seq if n.group("n") == "1" and not aborted else -1

    # -- classification -------------------------------------------------------------------
    @property
    def has_net_evidence(self) -> bool:
        return self.has_choice_evidence or self.weak_in_use

    @property
    def has_choice_evidence(self) -> bool:
        """Network evidence beyond a line that only shows a network in use: the tail of a
        cut line (`0] NCCL INFO NET/OFI Using aws-ofi-nccl 1.6.0`, its host went to another
        line) holds nothing more, and makes no rank of its own beside the real ones."""
        return bool(
            self.nets or self.via_nets or self.provider or self.ib_devices or self.socket_ifaces
            or self.not_found or self.ib_no_device or self.plugin_missing or self.unknown_nets
            or (self.weak_kind and not self.weak_in_use) or self.fatal_msg or self.err_msg
            or self.local_seq >= 0  # shared memory or P2P failed: the job failed at init
        )

    def selection(self) -> tuple[Transport | None, str | None]:
        """(what NCCL chose, the network name it printed)."""
        names = self.via_nets or self.nets  # channels show what was really used
        for t in (Transport.SOCKET, Transport.OFI, Transport.IB):  # worst first if several
            for name in names:
                if _net_kind(name) is t:
                    return t, name
        kind = self.weak_kind
        if kind is Transport.OFI and self.plugin_failed_seq > self.provider_seq:
            kind = None  # the plugin picked a provider, then gave up
        return kind, None

    def failure(self, selected: Transport | None, inter_node: bool | None = None,
                collnet_fallback: bool = False,
                work_done: bool = False) -> tuple[str | None, Transport | None]:
        """(why init failed, the transport it was trying), or (None, None). On a job that
        stayed on one node, an init that failed with no WARN about the network since the
        choice (a topology search: `graph/paths.cc:82 NCCL WARN Failed to find reverse
        path`; GPU to GPU setup: `transport/p2p.cc:235 NCCL WARN hipIpcGetMemHandle failed`,
        shm; a CUDA fault) is no network's failure: the network was never to be used. (A
        fault in shared memory or P2P is returned wherever it happened: report() makes it
        the node's own failure where the job is not known to cross nodes.)"""
        completed_after = self.complete_seq > max(self.sel_seq, 0)
        if self.not_found and self.complete_seq < self.fatal_seq:
            name = self.not_found
            return f"network {name} not found", _net_kind(name) or (
                Transport.OFI if "ibfabric" in name or "OFI" in name else None)
        if self.fatal_msg and self.complete_seq < self.fatal_seq:
            # "Failed to initialize any NET plugin": what NCCL_NET asked for, else the net
            # plugin that loaded and then gave up (aws-ofi-nccl on Slingshot)
            return self.fatal_msg, selected or _attempted_from_env(self.env) or (
                _net_kind(self.plugin) if self.plugin else None) or (
                Transport.OFI if (self.plugin_failed or "").startswith("NET/OFI") else None)
        why = self.err_msg or self.last_warn or self.chain_msg or "NCCL init failed"
        # (a communicator of one rank, or one on the loopback interface only, connects no
        # network: nccl-tests#217's `-g 1` on `lo`, whose localhost socket failed)
        local = inter_node is False and (self.warn_seq <= self.sel_seq or self.nranks == 1 or (
            bool(self.ips) and all(_loopback(ip) for ip in self.ips)))
        # (a rank that named no network and whose WARN names none failed too when its error
        # chain ran through a network file up to init: NCCL 2.19.3's bootstrap `Message
        # truncated : received 256 bytes instead of 4`, nccl#1176)
        chained = self.top_seq > self.err_seq >= 0
        # aws-ofi-nccl gave up (`NET/OFI aws-ofi-nccl initialization failed`, after its own
        # WARNs such as `Only EFA provider is supported`) and nothing failed after that: NCCL
        # goes on with its internal transport, a fallback (aws-ofi-nccl#174's one instance)
        gave_up = self.plugin_failed_seq >= max(self.err_seq, self.top_seq, self.sel_seq)
        # (NCCL went on without CollNet: this rank's errors before it said so were CollNet's;
        # where another rank said so, a rank with an error chain and no WARN of its own)
        recovered = 0 <= self.recover_seq >= max(self.err_seq, self.top_seq) or (
            collnet_fallback and self.last_warn is None and self.err_msg is None)
        if recovered:
            return None, None
        if self.local_fault:
            # shared memory or P2P setup failed (a full /dev/shm: `include/shm.h:48 NCCL WARN
            # Error while creating shared memory segment`, then `transport/shm.cc:101 -> 2`,
            # `transport.cc:30 -> 2`): the job failed, on no network (Paddle#55987; report()
            # names it the node's failure where the job is not known to cross nodes); in a
            # job across nodes it was trying the network it chose (a W&B log: channels over
            # NET/Socket, then shm's CUDA failure)
            return self.last_warn or self.chain_msg or "NCCL init failed", (
                selected if inter_node is True else None)
        if inter_node is not False and selected is None and self.err_msg is None \
                and self.last_warn and self.top_seq > self.complete_seq:
            # a rank of a job across nodes (or of one not known to stay on one) whose init
            # died of a fault that is no network's (`include/shm.h:42 NCCL WARN Cuda
            # failure`, a chain through init.cc), in a paste that cut its own network lines,
            # or before it chose one (aws-ofi-nccl#476: p5's topology file lacks `arch`,
            # `graph/xml.h:101 NCCL WARN Attribute arch of node cpu not found`, chain to
            # group.cc): the job failed (pytorch#37325, horovod#893); what it was trying is
            # what the other ranks chose
            return self.last_warn, None
        if self.link_failure(work_done) is not None:
            return None, None  # the link was up: the job ran on it (see link_failure)
        if (selected is not None or self.err_msg or self.err_kind or chained) and not local \
                and not gave_up:
            # init.cc/group.cc returned an error after the choice, and no Init COMPLETE since;
            # after an Init COMPLETE only a network error counts (NCCL >= 2.22 connects at the
            # first collective), not a CUDA fault or a bad argument in a running job
            if self.top_seq > self.sel_seq and self.complete_seq < self.top_seq and (
                    not completed_after or self.err_seq > self.complete_seq):
                return why, selected or self.err_kind
            # a network error after the choice, before init completed (or while setting a
            # connection up), and no channel set up after it
            late_setup = self.setup_seq > self.sel_seq and self.chan_seq < self.setup_seq
            # ... or a network error after init that NCCL passed up its chain, setting up a
            # connection at the first collective (nccl#2057: `ncclSocketInit: connecting to
            # address with family 1`, then `transport/net.cc:860 -> 3`): the job failed on
            # it, after init (a running link's error is link_failure's, above)
            if completed_after and self.net_chain_seq > self.warn_seq > self.complete_seq:
                return why, selected or self.err_kind
            if self.err_seq > self.sel_seq and (late_setup or not completed_after) \
                    and self.chan_seq < self.err_seq:
                return why, selected or self.err_kind
        # (only where init then failed: after `No device found` NCCL looks for sockets, and
        # prints them or a WARN; a rank with neither was cut there: vLLM#2734 under Ray's
        # dedup, nccl-tests' and ml-engineering's one-node runs, three helpers of rounds 20
        # to 23; wave 1 called that rank failed)
        if selected is None and self.ib_no_device and not self.unknown_nets \
                and not self.plugin_failed and self.complete_seq < 0 and inter_node is not False \
                and (self.last_warn is not None or self.top_seq >= 0):
            return _NO_DEVICE_ONLY, Transport.IB
        return None, None

    def link_failure(self, work_done: bool = False) -> str | None:
        """The error of a link that was up, where it is this process's first error: a
        request that completed with an error (`NET/IB : Got completion from peer ... error
        12`, `NET/OFI Request ... completed with error`), after Init COMPLETE, or with no
        Init COMPLETE in the paste, no communicator line before it (that init was under way;
        an aborted communicator's `comm ... - Abort COMPLETE` after it says nothing of init,
        a 2-node socket job whose peer died) and nothing passed up to init (the progress
        thread's chain, or none: a paste of the WARNs). The job chose that network and ran
        on it, then broke (nccl#733, nccl#1405, sglang#4857, DeepSpeed#6875, a cxi VNI
        mismatch): the rank's transport is what it used, and a warning says how it broke,
        since the issue's `failed` is a transport chosen and then failed during init ("such
        a job did not run on that transport", fabric-facts). An error before a link was up
        (`ibv_modify_qp failed`, a chain to init.cc after the completion error) is a failed
        init. (Helpers' readings of these logs followed how their brief worded `failed`,
        both ways: stop 26's note.)"""
        if not self.err_msg:
            return None
        if work_done and max(self.complete_seq, self.comm_seq, self.sel_seq,
                             self.conn_seq, self.init_chain_seq) < 0:
            # PyTorch's watchdog says the job's NCCL work had completed (`last completed
            # NCCL work: 88`), and nothing of this process's own says init was under way:
            # its errors are a running job's (a GKE job whose node was killed after 88
            # all-reduces, NCCL_DEBUG=WARN: `socketProgress: Connection closed by remote
            # peer`, the proxy's sockets closing)
            return self.err_msg
        if self.link_seq < 0 or not _LINK_ERROR.search(self.err_msg):
            # (or any network error the progress thread passed up: from NCCL 2.19 on it
            # moves data on links that are up, and the proxy's service thread sets them up;
            # aws-ofi-nccl#927's `NET/OFI Unexpected status (0) for message 246` in a
            # reduce_scatter; also where the paste cut the last error's chain before its
            # progress-thread line and an earlier one had it: LlamaFactory#6849's
            # `socketProgressOpt: Call to recv ... Broken pipe` WARNs, each passed up
            # through net_socket.cc to `proxy.cc:878 -> 6 [Progress Thread]`)
            if not (self.progress_seq >= 0 and self.err_seq >= 0 and self.err_kind is not None
                    and self.init_chain_seq < self.err_seq):
                return None
            link = self.err_seq
        else:
            link = self.link_seq
        if self.conn_seq > link:
            # the request failed while the connection was being set up (aws-ofi-nccl's
            # connection manager, `cm_req_handle_error_entry ... completed with error ...
            # handshake failed`, then `transport.cc:198 -> 6`): no link was up yet
            return None
        if 0 <= self.complete_seq < link or (
                self.complete_seq < 0 and not 0 <= self.comm_seq < link
                and self.init_chain_seq < link):
            return self.err_msg
        return None

    def report(self, inter_node: bool | None, lf_providers: Iterable[str] = (),
               collnet_fallback: bool = False, work_done: bool = False,
               echoed_net: Transport | None = None) -> RankReport:
        """What this process's lines say, given the job's facts: whether traffic crossed
        nodes, libfabric's own lines of its pid, whether NCCL went on without CollNet, the
        network the job script's echo of NCCL_NET names (see below), and
        whether PyTorch said NCCL work had completed (`last completed NCCL work: N`)."""
        selected, network = self.selection()
        failure, attempted = self.failure(selected, inter_node, collnet_fallback, work_done)
        local_failure = None
        if failure is not None and inter_node is not True and self.local_fault and \
                not self.net_channels:
            # Shared memory, P2P or NVLS setup failed (a full /dev/shm in a container, a P2P
            # buffer's CUDA OOM, NVLS's CUDA failure) where nothing says the job spanned
            # nodes: no network carried or was to carry anything the log shows. Helpers of
            # every round since 20 read these (Paddle#55987, kserve#3791, nccl#1235, rccl#2188,
            # vllm#9369, nccl#1485) as no network's failure, one host's; the issue's `failed`
            # is a network "chosen and then failed". (Where the job crossed nodes it stays a
            # failed init of the network it chose: the failure branch above.)
            local_failure, failure, attempted = failure, None, None
        elif failure is not None and inter_node is False and selected is None \
                and self.err_kind is None and not self.net_channels:
            # ... and any init failure of a job that stayed on one node, where no network
            # was chosen and the error names none: NCCL's bootstrap between the node's own
            # processes (nccl#1382, JAX on nine 4090s: `socketTryAccept: Accept failed: Bad
            # file descriptor`, then bootstrap.cc and init.cc; nccl-tests#166's proxy socket
            # closed by its own host)
            local_failure, failure, attempted = failure, None, None
        ran_before = False
        if failure is not None and inter_node is True and self.local_fault \
                and selected is not None \
                and 0 <= self.complete_seq < self.node_comm_seq <= self.local_seq:
            # ... and where a communicator had completed its init on the network the process
            # chose, and then the init of a communicator within one node (`nNodes 1`: a
            # tensor-parallel group of a job across nodes) failed setting up shared memory or
            # P2P (its buffers out of GPU memory): that communicator had no network to try,
            # and the job's had carried its own on the network. The rank keeps that network,
            # and the node's own failure is reported beside it. (NCCL >= 2.19 prints `Using
            # network X` again for each communicator, the split's too, before its init's
            # lines.) (Without that Init COMPLETE, as in the W&B log above, or in a
            # communicator across nodes, the job failed while it was setting its network up.)
            local_failure, failure, attempted = failure, None, None
            ran_before = True
        if failure is not None and attempted is None and self.plugin is None \
                and self.verbs_missing:
            # (libibverbs would not load, so sockets were all the rank could try: a WARN-only
            # log of NCCL 2.4's, `Failed to open libibverbs.so[.1]`, then `Connect to
            # 172.18.0.1<49273> failed : Connection refused`, pytorch/examples#689)
            attempted = Transport.SOCKET
        if failure is not None and attempted is None and echoed_net is not None and (
                self.plugin_failed or "NET plugin" in failure):
            # (the job script echoed NCCL_NET, `export NCCL_NET=OFI`, `env`'s `NCCL_NET=AWS
            # Libfabric`, which NCCL's own lines print only under NCCL_DEBUG_SUBSYS=ENV: the
            # one network a rank that failed loading a net plugin was trying, where nothing of
            # its own says: `Failed to initialize any NET plugin`, NCCL >= 2.26's words where
            # the plugin NCCL_NET names is not there; not a bootstrap's failure, before any
            # network was tried)
            attempted = echoed_net
        link_error = self.link_failure(work_done) if failure is None else None
        if selected is None and link_error is not None:
            selected = self.err_kind  # a paste of a running job's errors: the link's network
        if failure is not None:
            chosen = Transport.FAILED
        else:
            chosen = selected or Transport.NONE
            attempted = None
        transport = chosen
        if chosen is not Transport.FAILED and (inter_node is False
                                               or local_failure and not ran_before):
            transport = Transport.NONE
        named = self.provider or next(iter(self.named_providers), None) or next(
            iter(lf_providers), None)
        return RankReport._of(
            host=self.host,
            pid=self.pid,
            rank=self.rank if self.rank is not None else self.rank_hint,
            nranks=self.nranks,
            cuda_dev=self.dev,
            transport=transport,
            network=network,
            provider=_ofi_base_provider(named),
            ofi_fabric=self.ofi_fabric,
            nics=self.nics,
            ib_devices=tuple(self.ib_devices) if self.ib_devices else (),
            socket_ifaces=tuple(self.socket_ifaces) if self.socket_ifaces else (),
            net_channels=self.net_channels,
            gdrdma=self.gdrdma if self.net_channels else None,
            nccl_version=self.nccl_version,
            plugin=self.plugin,
            plugin_api=self.plugin_api,
            plugin_version=self.plugin_version,
            libfabric_version=self.libfabric_version,
            plugin_missing=self.plugin_missing,
            ib_no_device=self.ib_no_device,
            failure=failure,
            nccl_warnings=tuple(self.nccl_warnings) if self.nccl_warnings else (),
            sources=tuple(self.sources),
            selected=chosen,
            attempted=attempted,
            inter_node=inter_node,
            provider_stack=named,
            plugin_failed=self.plugin_failed,
            library=self.library,
            failed_after_init=failure is not None and 0 <= self.complete_seq < max(
                self.err_seq, self.top_seq, self.fatal_seq),
            link_error=link_error,
            local_failure=local_failure,
        )

    def inter_node(self) -> bool | None:
        """What this process's own lines say about traffic between nodes."""
        if self.nnodes is not None:
            return self.nnodes > 1
        if self.net_channels:
            return self.channels_cross()
        return None

    @property
    def local_fault(self) -> bool:
        """Shared memory or P2P failed, and no network error nor Init COMPLETE came after."""
        return 0 <= self.local_seq >= max(self.err_seq, self.warn_seq, self.complete_seq)

    def channels_cross(self) -> bool:
        """Do its `via NET/` lines link to another node? Not where one process drives the
        GPUs of both ends (ranks 0..n-1 of its n devices) through the NIC within its host
        (nccl#707: `-g 4` over NET/IB/GDRDMA). A link to another node names a rank of that
        node, one of n and up, so its first line tells."""
        return self.net_channels > 0 and not (
            self.devs is not _NONE and 0 <= self.chan_rank_max <= len(self.devs))


_COUNT_SLOTS = frozenset({"lines", "net_channels"})
_SEQ_SLOTS = frozenset(n for n in _Proc.__slots__ if n.endswith("_seq"))


def _copied(value: Any) -> Any:
    return value.copy() if isinstance(value, (list, set, dict)) else value


@dataclass
class _State:
    """What LogAnalyser._repeat compares before and after reading one copy of repeated text:
    the processes that copy touched (all their fields), every process's line count, and
    the analyser's own counts and collections."""

    n_procs: int
    lines: list[int]
    touched: dict[int, tuple]  # index in _procs -> that process's field values
    counts: tuple[int, ...]  # NCCL lines, libibverbs warnings, dropped processes
    lf_providers: dict[str, int]
    fixed: tuple  # what a repeat must leave as it is

    @classmethod
    def of(cls, a: "LogAnalyser", src: str, touched: list[int]) -> "_State":
        procs = list(a._procs.values())
        return cls(
            n_procs=len(procs),
            lines=[p.lines for p in procs],
            touched={i: tuple(_copied(getattr(procs[i], n)) for n in _Proc.__slots__)
                     for i in touched if i < len(procs)},
            counts=(a._nccl_lines, a._ibverbs_no_driver, a._dropped_procs),
            lf_providers=dict(a._lf_providers),
            fixed=(list(a._ibverbs_hosts), {k: list(v) for k, v in a._lf_by_pid.items()},
                   {k: set(v) for k, v in a._log_env.items()}, dict(a._tests_hosts),
                   set(a._tests_host_names), a._tests_several, a._tests_spread,
                   dict(a._tests_failures), a._init_echo,
                   a._n_prefixes,
                   len(a._prefixes), len(a._prefixes.get(src, ()))),
        )


@dataclass
class _StateChange:
    """What reading one more copy of repeated text did, when it only counted: per touched
    process its line-count and channel-count steps and the `*_seq` fields that moved by
    its line-count step; the analyser's count steps. `apply` adds that change n times."""

    procs: list[tuple[int, int, int, tuple[str, ...]]]  # index, lines, channels, seqs
    counts: tuple[int, ...]
    lf_providers: dict[str, int]

    @classmethod
    def between(cls, before: _State, after: _State) -> "_StateChange | None":
        """The change, or None if anything but counts and line numbers changed."""
        if before.n_procs != after.n_procs or before.fixed != after.fixed \
                or before.lf_providers.keys() != after.lf_providers.keys() \
                or before.touched.keys() != after.touched.keys():
            return None
        for i, (x, y) in enumerate(zip(before.lines, after.lines)):
            if x != y and i not in before.touched:
                return None
        names = _Proc.__slots__
        line_at, chan_at = names.index("lines"), names.index("net_channels")
        procs = []
        for i, old in before.touched.items():
            new = after.touched[i]
            step = new[line_at] - old[line_at]
            seqs = []
            for name, x, y in zip(names, old, new):
                if x == y or name in _COUNT_SLOTS:
                    continue
                if name in _SEQ_SLOTS and y - x == step:
                    seqs.append(name)
                    continue
                return None  # a fact changed: this copy was not a pure repeat
            procs.append((i, step, new[chan_at] - old[chan_at], tuple(seqs)))
        return cls(procs=procs,
                   counts=tuple(y - x for x, y in zip(before.counts, after.counts)),
                   lf_providers={k: after.lf_providers[k] - v
                                 for k, v in before.lf_providers.items()})

    def apply(self, a: "LogAnalyser", times: int) -> None:
        procs = list(a._procs.values())
        for i, step, channels, seqs in self.procs:
            p = procs[i]
            p.lines += step * times
            p.net_channels += channels * times
            for name in seqs:
                setattr(p, name, getattr(p, name) + step * times)
        a._nccl_lines += self.counts[0] * times
        a._ibverbs_no_driver += self.counts[1] * times
        a._dropped_procs += self.counts[2] * times
        for k, v in self.lf_providers.items():
            if v:
                a._lf_providers[k] += v * times


def _clock(m: re.Match[str]) -> bool:
    """Is NCCL's `host:pid:tid` in `m` a time of day? A logger's clock before a line whose
    host was stripped (`2024-12-04 05:27:39 [0] NCCL INFO ...`) reads as host 05, pid 27,
    thread 39; no host is two digits with a process and its thread both under 60."""
    h, p, t = m.group("host"), m.group("pid"), m.group("tid")
    return len(h) == len(p) == len(t) == 2 and h.isdigit() and int(h) < 24 and int(p) < 60 \
        and int(t) < 60


def _one_process_records(text: str) -> list[str] | None:
    """The records of one line that holds several of one process's (a paste that lost its
    newlines: GitHub's quote-reply joins them with blanks, LLaMA-Factory#6111; or glues
    them, `...32 nics)h100-316:1747:1747 [1] NCCL INFO ...`, aws-ofi-nccl#990), each under
    the first one's `host:pid:tid` where it lost its own; None where the line holds another
    process's record too (a splice) or one record only.

    A record's own prefix glued to the text before it shows either as a longer name
    (`nics)h100-316:1747`, after a blank) or not at all (`12080h100-316:1747:1747 [1]`:
    the head is `[1] NCCL INFO`); both end with the first record's host and pid."""
    heads = list(_FLAT_HEAD.finditer(text))
    if len(heads) < 2:
        return None
    whos = [m.group("who") for m in heads]
    if len(heads) >= 3 and all(whos) and len(set(whos)) > 1 and len(
            {w.rpartition(":")[0] for w in whos}) == 1:
        # several processes of one host, each record whole behind its own `host:pid:tid`
        # (a quote-reply that joined a one-machine paste's lines with blanks: two ranks'
        # `Using network Socket`, then each one's `Duplicate GPU detected`). A splice shows
        # a name that the glued text lengthened (`nrc0b58536a5f1:324666` beside
        # `c0b58536a5f1:324667`), or only two records.
        cuts = [0] + [m.start() for m in heads[1:]] + [len(text)]
        return [text[a:b].rstrip() for a, b in zip(cuts, cuts[1:])]
    ref = next((m.group("who") for m in heads if m.group("who")), None)
    ref_host, _, ref_pid = (ref or "").rpartition(":")
    cuts, bare = [0], [False]
    for m in heads[1:]:
        who, at = m.group("who"), m.start()
        if who:
            if who != ref:
                if not (ref and who.endswith(ref) and (
                        who[-len(ref) - 1] in ")]>\"'.,;" or who[-len(ref) - 1].isdigit())):
                    return None  # another process's record: a splice
                at += len(who) - len(ref)
        else:
            g = _GLUED_PID_TID.search(text, 0, at)
            if g:
                if ref is None or ref_pid != g.group("pid"):
                    return None
                k = text.rfind(ref_host, 0, g.start())
                if k <= cuts[-1] or k + len(ref_host) != g.start():
                    return None
                at = k
        cuts.append(at)
        bare.append(not who and at == m.start())
    cuts.append(len(text))
    own = heads[0].group("pre") or ""
    return [own + text[a:b].rstrip() if bare[k] else text[a:b].rstrip()
            for k, (a, b) in enumerate(zip(cuts, cuts[1:]))]


def _pass_hits(data: bytes, pos: int, h: int) -> list[int]:
    """A position inside every line of `data[pos:h]` (whole lines) that a pass matches,
    by Python's regex engine (runner/fast_scan.py finds the same lines with hyperscan)."""
    find = data.find
    hits: list[int] = []
    for rx, gate, bare in _SCAN:
        if gate and all(find(g, pos, h) < 0 for g in gate):
            continue  # no match possible in this window
        if bare:  # its match starts at the \n before the line
            hits += [m.start() + 1 for m in rx.finditer(data, pos, h)]
        else:
            hits += [m.start() for m in rx.finditer(data, pos, h)]
    return hits


def _attempted_from_env(env: Mapping[str, str]) -> Transport | None:
    return _nccl_net_kind(env.get("NCCL_NET"))


def _nccl_net_kind(value: str | None) -> Transport | None:
    """The transport an NCCL_NET setting asks for (None: unset, or a name not known)."""
    return _net_kind(value.strip().strip("'\"")) if value else None


# --------------------------------------------------------------------------------------------
# The analyser


_F = TypeVar("_F", bound=Callable[..., Any])


def _cycle_collector_paused(fn: _F) -> _F:
    """Run `fn` with Python's cyclic garbage collector off (and back on after, if it was).
    A big log leaves tens of thousands of processes and ranks alive, and the collector
    would walk them again and again (10-20% of the time) to find none of them in a cycle:
    the analysis frees what it drops by reference counting."""

    @wraps(fn)
    def paused(*args: Any, **kwargs: Any) -> Any:
        if not gc.isenabled():
            return fn(*args, **kwargs)
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            gc.enable()

    return paused  # type: ignore[return-value]


def _coerce_fabric(fabric: Fabric | str | None) -> Fabric | None:
    if fabric is None or isinstance(fabric, Fabric):
        return fabric
    try:
        return Fabric(str(fabric).strip().lower())
    except ValueError:
        valid = ", ".join(f.value for f in Fabric)
        raise UserError(f"unknown fabric {fabric!r} (valid: {valid})") from None


class LogAnalyser:
    """Streaming analyser: `feed()` lines or `feed_stream()` streams, then `result()`.

    Parameters
    ----------
    source:
        Name used in messages when `feed()` is not told where a line came from.
    expected_fabric:
        The job's fabric (one of runner.fabrics.CHECKED: `slingshot`, `infiniband`,
        `ethernet`) or None (then it is inferred where possible from the libfabric provider
        or the socket interfaces: cxi or `hsn*` for Slingshot, `ib*` for InfiniBand).
    env:
        The job's environment, if the caller knows it; used for the LL128 guard
        (`NCCL_PROTO` excluding LL128, or `FI_CXI_RDZV_EAGER_SIZE/THRESHOLD/GET_MIN=0`).
    scan_engine:
        What runs the passes over `feed_stream`'s blocks (the answer is the same): `auto`
        (hyperscan, if it is installed, once FAST_SCAN_AFTER_BYTES were read or from the
        start if `expect_bytes` said that much is coming; else Python),
        `python` (Python's regex engine only), `hyperscan` (from the first byte; an error
        if it is not installed).
    """

    def __init__(
        self,
        source: str = "<log>",
        expected_fabric: Fabric | str | None = None,
        env: Mapping[str, str] | None = None,
        scan_engine: str = "auto",
        reread: Callable[[], Iterator[bytes]] | None = None,
    ) -> None:
        if scan_engine not in SCAN_ENGINES:
            raise ValueError(f"scan_engine must be one of {', '.join(SCAN_ENGINES)}")
        self.source = source
        self.scan_engine = scan_engine
        # feed_stream's pass engine: None = Python's regex passes (_pass_hits)
        self._fast: fast_scan.HitFinder | None = None
        if scan_engine == "hyperscan":
            self._fast = fast_scan.finder(_FAST_PATTERNS, _FAST_CONFIRM)
        self._stream_bytes = 0
        self.expected_fabric = _coerce_fabric(expected_fabric)
        self.env = dict(env) if env else {}
        self._procs: dict[tuple, _Proc] = {}
        self._sources: list[str] = []
        self._lines = 0
        self._nccl_lines = 0
        self._ibverbs_no_driver = 0
        self._ibverbs_hosts: list[str] = []
        self._tests_hosts: dict[int, str] = {}  # nccl-tests' rank table: rank -> host
        # ... every host its tables named, whether the log held more than one table (a rank
        # listed again starts the next run's), and whether an earlier one named more than
        # one host (two runs pasted one after the other, one on each of two hosts, are two
        # single-node runs)
        self._tests_host_names: set[str] = set()
        self._tests_several = False
        self._tests_spread = False
        self._tests_failures: dict[str, str] = {}  # nccl-tests' failed calls: host -> error
        self._init_echo: str | None = None  # an echo of a socket init's WARN (_SOCKET_INIT_ECHO)
        # PyTorch's echoes of a network's WARN after `Last error:` under its `[rankN]: `,
        # with the process they came under (see result())
        self._warn_echoes: list[tuple[_Proc, str]] = []
        self._dropped_procs = 0
        self._lf_by_pid: dict[int, list[str]] = {}  # libfabric's own lines, by process id
        self._lf_providers: Counter[str] = Counter()
        self._log_env: dict[str, set[str]] = {}  # NCCL_*/FI_* settings a job script echoed
        self._binary_sources: list[str] = []
        self._cut_sources: list[str] = []  # "<source>: why its data ended early"
        self._work_done = False  # PyTorch's watchdog: `last completed NCCL work: N`, N >= 1
        # source -> text before " NCCL " -> its process: a prefix is parsed once
        self._prefixes: dict[str, dict[str, _Proc]] = {}
        self._n_prefixes = 0
        self.repeated_bytes = 0  # text counted as copies of the text before it (_repeat)
        self._held: list[str] = []  # feed(): a WARN with no message, and its wrapped lines
        self._held_src = ""
        self._held_indented = True  # (False: its message may follow on lines not indented)
        # The input's text once more, from its start (compressed_logs.blocks_again, for
        # files; None for stdin): the passes never hand P2P channel lines to Python (they
        # are most of a big job's log), so the rare judgment that needs them reads them
        # again (p2p_joins).
        self.reread = reread

    def p2p_joins(self, world: int) -> bool:
        """Whether the log's P2P and shared-memory channels join ranks 0..world-1 into one
        group: every rank of the communicator on one node. False where the input cannot be
        read again (stdin). Asked once, and only where nothing else tells the node count."""
        return self.reread is not None and _joined(self.reread(), world)

    # -- input ----------------------------------------------------------------------------
    def feed_lines(self, lines: Iterable[str | bytes], source: str | None = None) -> "LogAnalyser":
        for line in lines:
            self.feed(line, source)
        return self

    def feed(self, line: str | bytes, source: str | None = None) -> None:
        """One line (a trailing newline is fine)."""
        src = self._source_name(source)
        if isinstance(line, (bytes, bytearray)):
            raw = bytes(line)
            tail_bytes = last_piece(raw, MAX_LINE_CHARS * 4) if len(raw) > MAX_LINE_CHARS * 4 \
                else b""
            line = raw[:MAX_LINE_CHARS * 4].decode("utf-8", "replace")
            if tail_bytes:  # (as below)
                self.feed(line, source)
                self.feed(tail_bytes, source)
                return
        if len(line) > MAX_LINE_CHARS:
            tail = last_piece(line, MAX_LINE_CHARS)
            line = line[:MAX_LINE_CHARS]
            if tail:  # a progress bar's line, and what the job printed after its last redraw
                self.feed(line, source)
                self.feed(tail, source)
                return
        self._lines += 1
        if not line.isprintable():  # tabs, CR, colours, NUL, a byte-order mark: the rare case
            line = line.lstrip("\ufeff")
            if "\x1b" in line:
                line = _ANSI.sub("", line)
            if _CTRL.search(line):
                line = _CTRL.sub("", line)
        line = line.rstrip("\n")
        for piece in line.split("\n") if "\n" in line else (line,):
            if self._held:
                if piece.strip() and len(self._held) <= _MAX_WRAPPED and (
                        piece[:1] in (" ", "\t") if self._held_indented
                        else not _wrap_ends(piece.strip())):
                    self._held.append(piece.strip())  # the WARN's message, wrapped
                    continue
                self._flush_held()
            if _triggers(piece):
                tail = piece.rstrip()
                indented = _held_warn(tail)
                if indented is not None:  # its message may follow
                    self._held, self._held_src = [tail], src
                    self._held_indented = indented
                    continue
                self._line(piece, src)

    def _flush_held(self) -> None:
        if self._held:
            held, self._held = " ".join(self._held), []
            self._line(held, self._held_src)

    @_cycle_collector_paused
    def feed_stream(self, stream: IO[bytes], source: str | None = None,
                    block_bytes: int = BLOCK_BYTES) -> StreamStats:
        """A whole binary stream, read in blocks: linear time, memory bounded by the block
        and line limits. Stops early on binary data (see StreamStats.binary)."""
        self._flush_held()
        src = self._source_name(source)
        stats = StreamStats()
        limit = MAX_LINE_CHARS * 4  # bytes of one line kept (UTF-8: up to 4 per character)
        carry = b""  # the start of a line that the next block ends
        # inside an over-long line: its bytes are dropped up to the next newline, but for its
        # piece after its last CR
        rest: PieceAfterCR | None = None
        binary_run = 0
        pending = b""  # a block read ahead that was not plain text
        scan_blocks = SCAN_BLOCKS
        while True:
            raw, pending = pending or stream.read(block_bytes), b""
            if not raw:
                break
            if not stats.bytes_read and raw[:1] in (b"\xef", b"\xff", b"\xfe"):
                # a byte-order mark (Notepad's UTF-8, PowerShell's UTF-16 of `> log.txt`):
                # no part of the first line, whose prefix names its process
                raw = raw[3:] if raw.startswith(b"\xef\xbb\xbf") else raw[2:] if raw[:2] in (
                    b"\xff\xfe", b"\xfe\xff") else raw
            repeated = self.repeated_bytes
            plain = b"\0" not in raw and raw.isascii()  # C-speed tests
            if plain:  # plain ASCII text: read on while it stays plain, scan it as one
                parts = [raw]
                while len(parts) < scan_blocks:
                    more = stream.read(block_bytes)
                    if not more:
                        break
                    if b"\0" in more or not more.isascii():
                        pending = more
                        break
                    parts.append(more)
                if len(parts) > 1:
                    raw = b"".join(parts)
            stats.bytes_read += len(raw)
            self._stream_bytes += len(raw)
            if self._fast is None and self.scan_engine == "auto" \
                    and self._stream_bytes >= FAST_SCAN_AFTER_BYTES:
                self._fast_scan_on()
            block = raw
            if not plain:
                block = raw.translate(None, _CTRL_BYTES)  # control bytes go, as feed drops them
                if len(raw) - len(block) > len(raw) // 20:  # >5% control bytes: not text
                    binary_run += len(raw)
                    if binary_run >= BINARY_STOP_BYTES:
                        stats.binary = True
                        _add_capped(self._binary_sources, src, 64)
                        return stats
                else:
                    binary_run = 0
            else:
                binary_run = 0
            lo = 0  # where this block's unread text starts
            if rest is not None:
                lo = block.find(b"\n") + 1
                rest.add(block[:lo - 1] if lo else block)
                if lo == 0:
                    continue
                piece, rest = rest.end(newline=True), None
                if piece:  # what the job printed after a progress bar's last redraw
                    self._text_block(piece + b"\n", src, stats)
            cut = block.rfind(b"\n")
            if cut < lo:
                carry += block[lo:] if lo else block
            else:
                # The line that the last block began ends here: read it alone, then the
                # block's whole lines in place (a slice or a join would copy the block).
                if carry and (b"\x1b" in carry or block.find(b"\x1b", lo, cut) >= 0):
                    # colour codes: remove them from the text as one (an OSC sequence can
                    # span lines), as before
                    self._text_block(carry + block[lo:cut + 1], src, stats)
                    lo = cut + 1
                elif carry:
                    first = block.find(b"\n", lo)
                    self._text_block(carry + block[lo:first + 1], src, stats)
                    lo = first + 1
                if lo <= cut:
                    self._text_block(block, src, stats, lo, cut + 1)
                carry = block[cut + 1:]
            # mostly copies of a period: read on in bigger blocks while it lasts
            scan_blocks = min(2 * scan_blocks, MAX_SCAN_BLOCKS) if plain and (
                self.repeated_bytes - repeated > len(raw) // 2) else SCAN_BLOCKS
            if len(carry) > limit:
                self._text_block(carry[:limit], src, stats)  # one line, cut
                rest = PieceAfterCR(carry[:limit], limit)
                rest.add(carry[limit:])
                carry = b""
        if carry:
            self._text_block(carry, src, stats)
        elif rest is not None and (piece := rest.end(newline=False)):
            self._text_block(piece, src, stats)
        return stats

    def input_cut(self, source: str, why: str) -> None:
        """The caller's stream of `source` ended before its data did (a compressed log cut
        while it was written): the verdict covers the text read, and a warning says so."""
        _add_capped(self._cut_sources, f"{source}: {why}", 64)

    def expect_bytes(self, n: int) -> None:
        """The caller knows how much text is coming (check_files: the files' sizes). With
        `auto`, a log that will pass FAST_SCAN_AFTER_BYTES is then scanned by hyperscan from
        its first byte, not only past the threshold."""
        if self._fast is None and self.scan_engine == "auto" and n >= FAST_SCAN_AFTER_BYTES:
            self._fast_scan_on()

    def _fast_scan_on(self) -> None:
        """From here on, hyperscan runs the passes, if it can (`auto`: else Python does)."""
        try:
            self._fast = fast_scan.finder(_FAST_PATTERNS, _FAST_CONFIRM)
        except fast_scan.Unavailable:
            self.scan_engine = "python"

    def _text_block(self, data: bytes, src: str, stats: StreamStats, lo: int = 0,
                    hi: int | None = None) -> None:
        """Scan the whole lines of `data[lo:hi]` (a last one may lack its newline), control
        bytes removed."""
        if hi is None:
            hi = len(data)
        if not stats.text and data[lo:hi].strip():
            stats.text = True
        lines = data.count(b"\n", lo, hi) + (0 if data[hi - 1:hi] == b"\n" else 1)
        stats.lines += lines
        self._lines += lines
        if data.find(b"\x1b", lo, hi) >= 0:
            data = _ANSI_BYTES.sub(b"", data[lo:hi]).replace(b"\x1b", b"")  # and a stray ESC
            lo, hi = 0, len(data)
        self._scan(data, src, lo, hi)

    def _source_name(self, source: str | None) -> str:
        src = source or self.source
        if not self._sources or self._sources[-1] != src:
            if src not in self._sources and len(self._sources) < 1024:
                self._sources.append(src)
        return src

    def _scan(self, data: bytes, src: str, lo: int, hi: int) -> None:
        """Parse the lines of `data[lo:hi]` (whole lines) that a trigger pass finds, decoding
        only those; the rest is skipped at the regex engine's speed. Text that repeats the
        text just before it (a log concatenated from copies, one line printed over and
        over) is read twice and then counted (`_repeat`)."""
        prefixes = self._prefixes.get(src)
        if prefixes is None:
            prefixes = self._prefixes[src] = {}
        seen: dict[bytes, int] = {}  # a parsed line -> where it started, in this block
        self._scan_range(data, src, lo, hi, prefixes, seen)

    def _scan_range(self, data: bytes, src: str, lo: int, hi: int, prefixes: dict[str, "_Proc"],
                    seen: dict[bytes, int] | None) -> None:
        """The hits of `data[lo:hi]`, line by line, in windows of about _SEARCH_BYTES: the
        passes search a window only when reading gets there, so text that a channel run
        or `_repeat` takes in one step is not searched. With `seen`, a parsed line whose
        text was parsed before, at a place whose text may repeat, goes to `_repeat`."""
        rfind, find = data.rfind, data.find
        pos = lo
        while pos < hi:
            h = hi if pos + _SEARCH_BYTES >= hi else find(b"\n", pos + _SEARCH_BYTES, hi) + 1 or hi
            hits = self._fast(data, pos, h) if self._fast else _pass_hits(data, pos, h)
            if _FIRST_LINE.match(data, pos, h):  # the window's first line (no \n before)
                hits.append(pos)
            hits.sort()
            end = pos - 1
            for p in hits:
                if p <= end:
                    continue  # another hit on a line already read
                e = find(b"\n", p, hi)
                if e < 0:
                    e = hi
                start = rfind(b"\n", 0, p) + 1
                end = self._hit(data, src, start, e, hi, prefixes, seen)
                if end < 0:  # a line that may start a copy of the text before it
                    end = self._repeat(data, src, start, -end - 1, hi, prefixes) - 1
                if end >= h:
                    break  # a channel run or copies read past the window
            pos = max(h, end + 1)

    def _hit(self, data: bytes, src: str, start: int, e: int, hi: int,
             prefixes: dict[str, "_Proc"], seen: dict[bytes, int] | None) -> int:
        """Parse the line `data[start:e]`; return where the text it read ends (a channel
        run reads on), or -1 - q when `seen` says the line was parsed at q before (it is not
        parsed then)."""
        line = data[start:e]
        if seen is not None and e - start <= _MAX_SEEN_LINE:
            q = seen.get(line)
            if q is not None and q < start and start + 2 * (start - q) <= hi:
                seen[line] = start
                if data.startswith(line, 2 * start - q, hi):  # the same line a period on
                    return -1 - q
            elif len(seen) < _MAX_SEEN_LINES:
                seen[line] = start
        text = line.decode("utf-8", "replace")
        if _maybe_wrapped(text):
            text = _unwrapped(text)
        if e < hi and text.endswith(("N", ":", " ", "\t", "\r")):
            indented = _held_warn(text.rstrip())
            if indented is False or indented and data[e + 1:e + 2] in (b" ", b"\t"):
                text, e = self._wrapped_warn(data, text, e, hi, indented)
        if len(text) > MAX_LINE_CHARS or not text.isprintable():
            self._line(text, src)
            return e
        # The usual line: a process seen before, with its prefix (as in _piece).
        i = text.find(" NCCL ")
        if i < 0:
            self._piece(text, src)
            return e
        proc = _cached_proc(prefixes, text, i)
        if proc is None or not _plain_record(text, i):
            self._piece(text, src)
            return e
        j = self._take_cached(proc, text, i)
        if j < 0:
            self._piece(text, src)
        elif j == i + 10 and e < hi and text.startswith(("Channel", "Ring"), j + 1) \
                and text.startswith("INFO ", i + 6):
            return self._channel_run(data, start, e, hi, text, i, text[j + 1:], proc)
        return e

    def _take_cached(self, proc: _Proc, text: str, i: int) -> int:
        """Give `proc` the record `text` of a prefix seen before (`text[:i]`, which the
        prefix cache maps to it): its level and message, and, for a WARN, the source its
        prefix names, as the full parse gives them (_piece; tests/test_nccl_log_prefix_
        cache.py compares the two). Returns where the level ends, or -1 where no level
        follows the prefix (a cut or spliced line: the caller parses it in full)."""
        e = i + 10 if text.startswith(("INFO ", "WARN "), i + 6) else _level_end(text, i + 6)
        if e < 0:
            return e
        self._nccl_lines += 1
        level = text[i + 6:e]
        warn = level == "WARN"
        if proc.dev_warn and not warn:
            # its device so far was a WARN's (a helper thread's): this line's says which
            # (as _piece reads it)
            a = text.rfind("[", 0, i) + 1
            b = text.find("]", a, i)
            if 0 < a < b and text[a:b].lstrip("-").isdigit():
                proc.dev, proc.dev_warn = int(text[a:b]), False
        msg = text[e + 1:] if text.startswith(" ", e) else text[e:]
        proc.take(level, msg)
        if warn:
            b = text.rfind("] ", 0, i) + 2  # (the end of `[dev] `; a source has no `]`)
            if 1 < b < i:
                proc.take_warn_source(text[b:i], msg)
        return e

    @staticmethod
    def _wrapped_warn(data: bytes, text: str, e: int, hi: int,
                      indented: bool = True) -> tuple[str, int]:
        """A WARN line with no message, whose message a note or a mail wrapped onto the
        indented lines after it (or, after a tag alone, _WARN_TAG_ONLY, onto any lines up to
        a blank one or a log line): the joined line, and where it ends (as feed() joins)."""
        parts = [text.rstrip()]
        while e < hi and (not indented or data[e + 1:e + 2] in (b" ", b"\t")) \
                and len(parts) <= _MAX_WRAPPED:
            nxt = data.find(b"\n", e + 1, hi)
            nxt = hi if nxt < 0 else nxt
            piece = data[e + 1:nxt].decode("utf-8", "replace").strip()
            if not piece or not indented and _wrap_ends(piece):
                break
            parts.append(piece)
            e = nxt
        return " ".join(parts), e

    def _repeat(self, data: bytes, src: str, s: int, q: int, hi: int,
                prefixes: dict[str, "_Proc"]) -> int:
        """`data[s:]` may repeat `data[q:s]`, which was just read (a log made of copies of
        one job's log, or one line written over and over). Count the copies at C speed;
        read the first two as usual and compare the state before and after the second:
        if it changed only by counts and line numbers (its processes saw the same
        messages again, so every fact they hold was already there), the remaining copies
        are applied as that change times their number. Otherwise they are read as usual.
        Returns where reading goes on."""
        unit = data[q:s]
        n = len(unit)
        copies, at = 0, s
        chunk, k = unit, 1
        while data.startswith(chunk, at, hi):  # gallop: 1, 2, 4, ... copies at a time
            copies += k
            at += len(chunk)
            if len(chunk) <= _GALLOP_BYTES:
                chunk, k = chunk + chunk, k * 2
        while k > 1:  # then back down: fewer than k copies are left
            k //= 2
            chunk = chunk[:n * k]
            if data.startswith(chunk, at, hi):
                copies += k
                at += len(chunk)
        # Comparing states costs about a step per process: it must buy more than it costs
        size = len(self._procs) + len(self._lf_by_pid)
        if copies < 3 or size > _MAX_REPEAT_PROCS or (copies - 2) * n < 64 * size:
            if not copies:  # only the line repeats: read a period's length as usual, so
                # that comparing periods costs at most the length of the text
                at = data.find(b"\n", min(s + n, hi) - 1, hi) + 1 or hi
            self._scan_range(data, src, s, at, prefixes, None)
            return at
        procs = list(self._procs.values())
        lines = [p.lines for p in procs]
        self._scan_range(data, src, s, s + n, prefixes, None)  # the first copy
        procs = list(self._procs.values())
        touched = [i for i, p in enumerate(procs) if i >= len(lines) or p.lines != lines[i]]
        before = _State.of(self, src, touched)
        self._scan_range(data, src, s + n, s + 2 * n, prefixes, None)  # the second
        change = _StateChange.between(before, _State.of(self, src, touched))
        if change is None:  # not a pure repeat after all: read every copy
            self._scan_range(data, src, s + 2 * n, at, prefixes, None)
        else:
            change.apply(self, copies - 2)
            self.repeated_bytes += n * (copies - 2)
        return at

    def _channel_run(self, data: bytes, start: int, e: int, hi: int, text: str, i: int,
                     msg: str, proc: "_Proc") -> int:
        """After a channel line (`text`, `data[start:e]`) that the prefix cache took: take
        the lines right after it that repeat its prefix and network in one step (a big
        job's init is mostly such runs). Returns where the run ends (`e` if none).

        A run line is one that `_piece` would give to `proc` and `_take_channel` would
        only count (the same network, already in `via_nets`): printable ASCII, no `lib`,
        `=` or second `NCCL `, one ` via NET/` (the one read), no GDRDMA unless `proc`
        already has it, at most MAX_LINE_CHARS. Anything else ends the run; that line is
        then parsed alone, as before."""
        at = msg.find(" via NET/")
        if at <= 0:
            return e
        at += 9
        slash = msg.find("/", at)
        if slash < 0 or msg[at:slash] not in proc.via_nets:
            return e
        head = data[start:start + i + 11]  # the prefix and " NCCL INFO "
        if data.startswith(head, e + 1, hi):
            m, pre = _CHANNEL_RUN.match(data, start, hi), text[:i]
        elif (k := _clock_end(text, i)) and data.startswith(head[k:], e + 1 + k, hi):
            # each line's clock differs (kubectl's --timestamps, a logger's): the prefix
            # after it must repeat (a run is looked for where the next line's clock is as
            # long), as _cached_proc reads such lines one by one
            m, pre = _CHANNEL_RUN_CLOCKED.match(data, start, hi), text[k:i]
        else:
            return e  # the next line is another process's (interleaved ranks)
        if m is None or m.group("pre") != pre.encode() \
                or m.group("net") != msg[at:slash].encode():
            return e
        run = m.group("run")
        k = run.count(b"\n")
        if run.count(b" via NET/") != k or run.count(b"NCCL ") != k or b"lib" in run \
                or b"=" in run or (not proc.gdrdma and b"GDRDMA" in run) or not run.isascii() \
                or len(run.translate(None, _CTRL_NO_NL)) != len(run) \
                or (len(run) > MAX_LINE_CHARS and _LONG_LINE.search(run)):
            return e
        proc.lines += k
        proc.chan_seq = proc.lines
        proc.net_channels += k
        self._nccl_lines += k
        return m.end() - 1

    def _line(self, line: str, src: str) -> None:
        if _maybe_wrapped(line):
            line = _unwrapped(line)
        if "\n" in line:  # a log record's message of several lines (a JSON export's `\n`)
            for piece in line.split("\n"):
                if piece.strip():
                    self._line(piece, src)
            return
        if len(line) > MAX_LINE_CHARS:
            tail = last_piece(line, MAX_LINE_CHARS)
            line = line[:MAX_LINE_CHARS]
            if tail:  # a progress bar's line, and what the job printed after its last redraw
                self._line(line, src)
                self._line(tail, src)
                return
        if line.isprintable():  # the usual line: no CR, tab, colour or control character
            self._piece(line, src)
            return
        if _CTRL.search(line):  # a BEL or BS left in ASCII text
            line = _CTRL.sub("", line)
        if "\r" in line:  # CR (CRLF, progress bars) ends a line too
            for piece in line.split("\r"):
                if piece and _triggers(piece):
                    self._piece(piece, src)
        else:
            self._piece(line, src)

    def _piece(self, text: str, src: str) -> None:
        # Most lines come from a process seen before, with its prefix: skip to its message.
        i = text.find(" NCCL ")
        if i >= 0 and text.startswith("work: ", i + 6):  # PyTorch's watchdog (_WORK_DONE)
            w = _WORK_DONE.search(text)
            if w and 0 < int(w.group(1)) < 1 << 32:
                self._work_done = True
            return
        if i < 0 and "Rank" in text:
            t = _TESTS_RANK.search(text)
            if t:
                rank, host = int(t.group("rank")), t.group("host")
                if rank in self._tests_hosts:  # the next run's table begins
                    self._tests_spread = self._tests_spread or len(
                        set(self._tests_hosts.values())) > 1
                    self._tests_hosts = {}
                    self._tests_several = True
                if len(self._tests_hosts) < MAX_PROCESSES:
                    self._tests_hosts[rank] = host
                    if len(self._tests_host_names) < MAX_PROCESSES:
                        self._tests_host_names.add(host)
                return
        prefixes = self._prefixes.get(src)
        if prefixes is None:
            prefixes = self._prefixes[src] = {}
        if i >= 0 and text.startswith("failure ", i + 6):
            t = _TESTS_FAILURE.search(text)
            if t and len(self._tests_failures) < _MAX_ITEMS:
                self._tests_failures.setdefault(t.group("host"), t.group("err"))
            return
        if i >= 0:
            proc = _cached_proc(prefixes, text, i)
            if proc is not None and _plain_record(text, i) \
                    and self._take_cached(proc, text, i) >= 0:
                return
        if "lib" in text:
            if _IBVERBS_NO_DRIVER in text:
                self._ibverbs_no_driver += 1
                host = self._outer(text)[1].get("host")
                if host:
                    _add_capped(self._ibverbs_hosts, host)
            if "libfabric:" in text:
                m = _LIBFABRIC.search(text)
                if m:
                    pid = m.group("pid")
                    self._take_libfabric(int(pid) if pid else None, m.group("fields"))
                    return
        if _env_assign_echo(text):
            self._take_env_assign(text)
        if i >= 0 and not _another_record(text, text.find("NCCL ", i + 6)):
            # one record: maybe of a prefix seen before
            proc = _cached_proc(prefixes, text, i)
            if proc is not None and self._take_cached(proc, text, i) >= 0:
                return
        if text.count("NCCL ") > 1:  # possibly two writers on one line
            records = _one_process_records(text)
            if records is not None:
                for part in records:
                    self._piece(part, src)
                return
            matches = [m for m in _NCCL_PREFIX.finditer(text) if not _clock(m)]
        else:
            first = _NCCL_PREFIX.search(text) or (
                _OLD_PREFIX.search(text) if "] INFO " in text or " WARN" in text else None)
            matches = [first] if first and not _clock(first) else []
        if matches:
            labels = self._outer(text[: matches[0].start()])[1] if matches[0].start() else {}
            # Every segment but the last was cut by the next writer: ignore what it says.
            m = matches[-1]
            msg = text[m.end():]
            if "NCCL INFO" in msg or "NCCL WARN" in msg:
                return  # a spliced line whose second prefix could not be split off
            host, pid = m.group("host"), int(m.group("pid"))
            proc = self._proc((host, pid), host, pid, True, src)
            if proc is None:
                return
            dev, warn = int(m.group("dev")), m.group("level") == "WARN"
            if proc.dev is None:
                proc.dev, proc.dev_warn = dev, warn
            elif dev != proc.dev and not warn:
                if proc.dev_warn:
                    # the device of a WARN only, first: a helper thread's, which set none
                    # (IB's async thread prints `[0]` in a rank on GPU 1, nccl-tests#360);
                    # the process's own lines say which
                    proc.dev, proc.dev_warn = dev, False
                else:
                    # one process driving several GPUs (nccl-tests -g 8); not a WARN, which
                    # a proxy thread may print under another device (nccl#733's `[0]` in a
                    # rank of `[1]`)
                    proc._push("devs", dev, 64)
            elif not warn:
                proc.dev_warn = False
            if proc.rank_hint is None and "rank" in labels:
                proc.rank_hint = labels["rank"]
            if len(matches) == 1 and m.start("level") == i + 6 and m.end() == i + 7 + len(
                    m.group("level")):  # the next line with this prefix skips the parse
                if self._n_prefixes >= 4 * MAX_PROCESSES:
                    for cache in self._prefixes.values():
                        cache.clear()
                    self._n_prefixes = 0
                key = text[_clock_end(text, matches[0].start()):i]  # (see _LEAD_CLOCK)
                if key not in prefixes:
                    self._n_prefixes += 1
                prefixes[key] = proc
            self._nccl_lines += 1
            proc.take(m.group("level"), msg)
            where = m.group("src")
            if where and m.group("level") == "WARN":
                proc.take_warn_source(where, msg)
            return
        rest, labels = self._outer(text)
        dev: int | None = None
        pid: int | None = None
        head = 0  # where the prefix before NCCL's level ends (its source, if a WARN names one)
        echo = False  # PyTorch's echo of a network's WARN (see result())
        d = _DEV_NCCL.match(rest) or _LOOSE_PREFIX.match(rest)
        if d:
            head = d.end()
            dev, level, msg = int(d.group("dev")), d.group("level") or "WARN", rest[d.end():]
            if "host" in d.re.groupindex:  # one process per host and device
                labels = {**labels, "host": labels.get("host") or d.group("host"), "label": (
                    labels.get("label", "") + " " + rest[:d.end("dev") + 1]).strip()}
            elif d.group("pid"):
                pid_tid = rest[:d.start("dev") - 2].split(":")
                pid, tid = int(pid_tid[0]), int(pid_tid[1])
                if pid_tid[0].startswith("0") or not pid <= tid <= pid + 20000:
                    # no pid:tid (a thread's id is its process's or a little later; no pid
                    # starts with 0): the tail of a line a splice cut, `0119:40126 [3] NCCL
                    # INFO ...` (a process's own prefix cut to `40068:40070 [1]` is told
                    # by its pid, when judging)
                    return
                # one process per pid (not a real one: no host says where it ran)
                labels = {**labels, "label": (labels.get("label", "") + " pid " +
                                              d.group("pid")).strip()}
        elif rest[:1] in "IWT" and (t := _OFI_TEST_HEAD.match(rest)):
            # aws-ofi-nccl's test programs log with their own prefix, no pid or host
            level, msg = t.group("level"), rest[t.end():]
        elif ("ncclSocketInit: " in rest or "Bootstrap : no socket" in rest) and (
                "NCCL WARN" not in rest) and (e := _SOCKET_INIT_ECHO.search(rest)):
            # (under any launcher's prefix: `[trainer0|0]:ncclSocketInit: ...`; the WARN
            # itself, stripped of its host, `bootstrap.cc:48 NCCL WARN Bootstrap : no socket
            # interface found`, is a process's own line, below)
            if self._init_echo is None:
                self._init_echo = rest[e.start():e.start() + 200]
            return
        elif "CCL warning" in rest and (w := _LAST_WARNING.search(rest)):
            quoted = rest[w.end():].rstrip().rstrip("'.,;").rstrip()
            if _SOCKET_INIT_ECHO.match(quoted):
                if self._init_echo is None:
                    self._init_echo = quoted[:200]
                return
            if not (_STRIPPED_WARN.match(quoted) or _SOCKET_CONNECT_ECHO.match(quoted)):
                return  # (a fault of the node's own, `Cuda failure 2 'out of memory'`: no
                # network's, and nothing a rank's lines would not tell)
            level, msg = "INFO", quoted
            echo = len(self._warn_echoes) < _MAX_ITEMS
        elif "onnect: " in rest and "NCCL WARN" not in rest and "NCCL INFO" not in rest and (
                e := _SOCKET_CONNECT_ECHO.search(rest)):
            # the last error as PyTorch echoes it under its `[rank1]: ` (the rank's own lines
            # showing only its retries, `socketPollConnect: connect returned Connection
            # refused, retrying (33/34)`), or a logger writes it after its own prefix (vLLM's
            # `ERROR 03-21 14:01:57 worker_base.py:581] socketStartConnect: Connect to ...`):
            # kept, for result() to read where nothing else names a network
            level, msg = "INFO", rest[e.start():]
            echo = len(self._warn_echoes) < _MAX_ITEMS
            name = " ".join(_CLOCK.sub(" ", rest[:e.start()]).split())[:80]
            if name and not labels.get("label"):  # (a prefix _outer does not know, Ray's
                # `(worker1, rank=1, pid=27522, ip=10.105.0.4) [rank4]: `: it names the rank
                # that echoed, which a file of real processes reports only with a label)
                labels = {**labels, "label": name}
        elif _BARE_MSG.match(rest):
            # no level and no prefix left (a paste stripped of both): the plugin's error
            # wording, which no INFO line has, was a WARN. (Under a launcher's prefix it is
            # PyTorch's echo of the last error: `[rank3]: NET/OFI Request completed with
            # error`, which the rank's own WARN already told.)
            # (a comment's `#` or a quote's `>` is no launcher: `#   NET/OFI Unable to
            # register memory ...` in a job script's notes, an Alps reproducer)
            launched = bool(labels) and (set(labels) != {"label"} or bool(
                labels["label"].replace("#", "").replace(">", "").strip()))
            level = "INFO"
            if _STRIPPED_WARN.match(rest):
                if not launched or rest.startswith("FI_EFA_"):
                    # (libfabric's EFA provider writes its abort itself, under whatever
                    # launcher ran the job: no NCCL WARN that PyTorch could echo)
                    level = "WARN"
                elif len(self._warn_echoes) < _MAX_ITEMS:
                    echo = True  # (kept: result() reads it where it is all there is)
            msg = rest
        else:
            b = _BARE_NCCL.match(rest)
            a = None if b else _ANY_PREFIX_NCCL.match(rest)
            if a and _CUT_PREFIX_TAIL.search(a.group("pre")):
                a = None
            if b or a:
                head = (b or a).end()
                level, msg = (b or a).group("level"), rest[head:]
                name = " ".join(_CLOCK.sub(" ", a.group("pre")).split()) if a else ""
                if name:
                    labels = {**labels, "label": (labels.get("label", "") + " " + name).strip()}
            else:  # only a whole version line is taken after a prefix we do not know
                v = _PREFIXED_VERSION.search(rest)
                if not v:
                    return
                level, msg = "INFO", v.group("msg")
        label = labels.get("label")
        host = labels.get("host") or (f"rank{labels['rank']}" if "rank" in labels else None)
        proc = self._proc(("", src, label), host or label or src, pid, False, src)
        if proc is None:
            return
        proc.label = label
        if proc.dev is None:
            proc.dev = dev
        if proc.rank_hint is None and "rank" in labels:
            proc.rank_hint = labels["rank"]
        self._nccl_lines += 1
        proc.take(level, msg)
        if echo:
            self._warn_echoes.append((proc, msg))
        if head and level == "WARN":
            # (also with nothing before the source: `tcpxResult_t tcpxCommProgress(tcpxComm*):
            # 1126 NCCL WARN ... rx ctrl timeout`, DeepSpeed#5693's one line)
            proc.source_names_plugin(rest[:head])

    def _take_libfabric(self, pid: int | None, fields: str) -> None:
        for f in fields.split(":"):
            base = _ofi_base_provider(f)
            if base in _OFI_PROVIDERS:
                if len(self._lf_providers) < 64 or base in self._lf_providers:
                    self._lf_providers[base] += 1
                if base not in _HELPER_PROVIDERS and pid is not None:
                    got = self._lf_by_pid.get(pid)
                    if got is None and len(self._lf_by_pid) < MAX_PROCESSES:
                        self._lf_by_pid[pid] = [base]
                    elif got is not None:
                        _add_capped(got, base, 4)
                return

    def _take_env_assign(self, text: str) -> None:
        if text.lstrip().startswith("#"):
            return  # a commented-out setting (a pasted job script's `# export NCCL_NET=...`)
        whole = _ENV_LINE.match(text)
        for m in (whole,) if whole else _ENV_ASSIGN.finditer(text):
            key = m.group("key")
            value = (m.group("value") if m.group("value") is not None
                     else m.group("quoted"))[:200]
            vals = self._log_env.get(key)
            if vals is None:
                if len(self._log_env) < _MAX_ENV:
                    self._log_env[key] = {value}
            elif len(vals) < 4:
                vals.add(value)

    @staticmethod
    def _outer(text: str) -> tuple[str, dict[str, Any]]:
        """Strip launcher prefixes; return the rest and what they said (host, rank, label)."""
        labels: dict[str, Any] = {}
        parts: list[str] = []
        for _ in range(8):
            text = text.lstrip()  # (a list's code block indents the whole paste)
            for rx in _OUTER_PREFIXES:
                m = rx.match(text)
                if m:
                    g = m.groupdict()
                    if g.get("quote") is not None or g.get("clock") is not None:
                        text = text[m.end():]
                        break
                    if g.get("kind") == "rank":
                        labels["rank"] = int(g["n"])
                    if g.get("rank") is not None:  # (Open MPI's tag, Ray Train's)
                        labels["rank"] = int(g["rank"])
                    if g.get("host"):
                        labels["host"] = g["host"]
                    if m.group(0).strip() and "|" not in m.group(0) and not m.group(0)[:1].isdigit():
                        parts.append(m.group(0).strip())
                    elif g.get("task") is not None:
                        parts.append(m.group(0).strip())
                    text = text[m.end():]
                    break
            else:
                break
        if parts:
            labels["label"] = " ".join(parts)
        return text.lstrip(), labels

    def _proc(self, key: tuple, host: str, pid: int | None, real: bool, src: str) -> _Proc | None:
        proc = self._procs.get(key)
        if proc is None:
            if len(self._procs) >= MAX_PROCESSES:
                self._dropped_procs += 1
                return None
            proc = self._procs[key] = _Proc(host, pid, real)
        if not proc.sources or proc.sources[-1] != src:
            if src not in proc.sources:
                _add_capped(proc.sources, src, 8)
        return proc

    # -- output ---------------------------------------------------------------------------
    @_cycle_collector_paused
    def result(self) -> LogVerdict:
        self._flush_held()
        verdict = _Judge(self).verdict()
        if self._warn_echoes and verdict.transport is Transport.NONE and not any(
                p.has_net_evidence or p.err_kind for p in self._procs.values()):
            # A log that holds only PyTorch's traceback (NCCL_DEBUG unset, or its lines
            # not pasted): the echo of the last error (`[rank1]: Last error:`, then
            # `[rank1]: NET/OFI Unable to insert remote address into address vector ...`,
            # aws-ofi-nccl#663's two p5 nodes; `NET/OFI Request ... completed with error
            # ... UNDELIVERABLE`, nccl#1928 on Slingshot) is all that names the network,
            # and it is that network's WARN. (Beside NCCL's own lines it is only their echo.)
            echoes, self._warn_echoes = self._warn_echoes, []
            for proc, msg in echoes:
                proc.take("WARN", msg)
            verdict = _Judge(self).verdict()
        return verdict


def analyse(
    lines: Iterable[str | bytes],
    source: str = "<log>",
    expected_fabric: Fabric | str | None = None,
    env: Mapping[str, str] | None = None,
) -> LogVerdict:
    """Analyse one log (any iterable of lines, str or bytes) in one pass."""
    return LogAnalyser(source, expected_fabric, env).feed_lines(lines).result()


# --------------------------------------------------------------------------------------------
# Judging: from per-process state to the job verdict


def ofi_plugin_name(library: str | None) -> str:
    """The libfabric plugin of the library a log names: aws-ofi-rccl for RCCL."""
    return "aws-ofi-rccl" if library == "rccl" else "aws-ofi-nccl"


def _in_words_of(library: str | None, hint: str) -> str:
    """A fabric's advice in RCCL's words on an RCCL log (its plugin is aws-ofi-rccl,
    loaded as librccl-net.so)."""
    if library != "rccl":
        return hint
    return hint.replace("aws-ofi-nccl", "aws-ofi-rccl").replace("libnccl-net", "librccl-net")


# The errors of NCCL's bootstrap sockets (not the proxy's, whose `Socket recv failed while
# polling` echoes a fault in shared memory or P2P)
_BOOTSTRAP_SOCKET = re.compile(r"socket(?:Try)?Accept|socketPoll|socketConnect|[Bb]ootstrap|"
                               r"Call to (?:bind|connect|accept|listen|recv from)|"
                               r"Connect to \S+ failed|Connection reset")


def _in_node_advice(why: str) -> str:
    """What failed, for the init-failed-in-node warning, and the usual fix."""
    if why.startswith(_DUPLICATE_GPU):
        return ("two ranks on one GPU, not the network (each process must select its own "
                "device: torch.cuda.set_device(local_rank), or one CUDA_VISIBLE_DEVICES entry "
                "per task)")
    if why.startswith(_SYSFS_HIDDEN):
        return ("NCCL's topology detection, not the network: the container or WSL hides the "
                "PCI devices' paths in /sys (run with the host's /sys, or give NCCL_TOPO_FILE)")
    if why.startswith(_RING_OPEN):
        return ("the ranks' topologies disagree, not the network (hosts or containers that "
                "report one host id, or different NCCL versions on the nodes)")
    if _BOOTSTRAP_SOCKET.search(why):
        return ("NCCL's bootstrap sockets between the node's own processes, not the network "
                "(NCCL_SOCKET_IFNAME must name an interface that all of them can reach; a "
                "firewall or a network namespace per process breaks it)")
    return ("shared memory, P2P or NVLS setup, not the network (in a container, a /dev/shm "
            "too small is the usual cause: docker --shm-size, a larger emptyDir medium Memory)")


def _failure_phase(failed: Sequence[RankReport]) -> tuple[str, str]:
    """How the summary words the failure of these ranks: after init (an Init COMPLETE came
    before it), else init failed (a link that broke while the job ran is no failure: see
    _Proc.link_failure)."""
    if all(r.failed_after_init for r in failed):
        return "failed after init", "on"
    return "init failed", "while trying"


def _most_common(values: Iterable[str | None], key=None) -> str | None:
    c = Counter(v for v in values if v)
    if not c:
        return None
    # Deterministic: highest count, then highest value (versions: the newest).
    return max(c.items(), key=lambda kv: (kv[1], key(kv[0]) if key else kv[0]))[0]


def _worst(ts: Iterable[Transport]) -> Transport:
    """The transport that bounds a collective: a failed or socket rank slows all others."""
    got = set(ts)
    for t in (Transport.FAILED, Transport.SOCKET, Transport.OFI, Transport.IB):
        if t in got:
            return t
    return Transport.NONE


def _kind(r: RankReport) -> str:
    """What makes two ranks' transports 'the same': OFI and its provider, IB, Socket."""
    if r.transport is Transport.OFI:
        return f"OFI/{r.provider or '?'}"
    return {Transport.IB: "IB", Transport.SOCKET: "Socket"}.get(r.transport, r.transport.value)


def _a(word: str | None) -> str:
    """'a slingshot', 'an infiniband', 'an ethernet'."""
    w = word or "unknown"
    return ("an " if w[0] in "aeiou" else "a ") + w


def _frac(n: int, total: int) -> str:
    return f"{n}/{total}"


_MERGE_HOST_MAX = 64  # cut-host repair looks at host names up to this long
# What a cut line leaves before the next line's host: the head of a pid, tid or address
# (`g183:161258:16169g183:161264:...`): such a name is the shorter one's, also on a tie
_CUT_NUMBER_HEAD = re.compile(r"[\d.]{1,24}")


def _suffixes(host: str) -> Iterator[str]:
    """Proper, non-empty suffixes of a host name."""
    return (host[i:] for i in range(1, len(host)))


def _merge_cut_hosts(procs: list[_Proc]) -> list[_Proc]:
    """Fold processes that exist only because a line was cut into the real one.

    Two writers sharing a stream give `...Using hsn0node1:7:7 [0] NCCL INFO x` (host read as
    `hsn0node1`) and orphaned tails such as `de1:7:7 [0] NCCL INFO y` (host `de1`). Such a
    made-up host has a real host as a suffix, or is a suffix of one.

    1. A host is renamed to the related host that runs the most pids, if that one runs more
       than it does and is the only such, and each of its processes can be the one with the
       same pid there (then they are merged).
    2. Left over (e.g. one rank per node): within one pid, a process is folded into a related
       one with more lines (ties are left alone, but for a name that is a number's head
       glued to the other, `16169g183`); one whose host was cut whole (`:7:7 [0]`) into the
       only process of that pid with a host.

    A process is never folded into one that contradicts it: another rank of the same
    communicator, or addresses of which the other host shows none (`gpu1` and `agpu1` are
    both real hosts; a machine's several NICs are one host's addresses).

    Related hosts are found through an index of host-name suffixes, so the work is linear in
    the number of processes (times the length of a host name), never pairwise. Works on
    copies, so the analyser's own state is unchanged; the result does not depend on the
    order of the lines of different processes.
    """
    real = [p for p in procs if p.real and p.pid is not None
            and len(p.host) <= _MERGE_HOST_MAX]
    if len(real) < 2:
        return procs
    pids_on_host = Counter(p.host for p in real)
    # A cut name's lines were written by the real process: same pid, and nothing that
    # contradicts it. A host whose names only look related (`node1`, `gnode1`) runs other
    # pids, or its process has another rank or address.
    by_host_pid: dict[tuple[str, int | None], _Proc] = {}
    procs_of: dict[str, list[_Proc]] = {}

    host_ips: dict[str, set[str]] = {}  # a machine has several (bootstrap, socket NICs)

    def apart(a: _Proc, b: _Proc) -> bool:
        if not host_ips:  # (built when first asked: most jobs have no related hosts at all)
            for p in real:
                host_ips.setdefault(p.host, set()).update(
                    ip for ip in p.ips if not _loopback(ip))
        ia = {ip for ip in a.ips if not _loopback(ip)}
        ib = host_ips.get(b.host, set())
        return (bool(ia) and bool(ib) and ia.isdisjoint(ib)) or (
            a.nranks is not None and a.nranks == b.nranks
            and not set(a.ranks_seen) & set(b.ranks_seen))

    def fits(h: str, H: str) -> bool:
        """Could every process named `h` be one of `H`'s (the one with its pid)?"""
        for p in procs_of[h]:
            q = by_host_pid.get((H, p.pid))
            if q is None or apart(p, q):
                return False
        return True

    rename: dict[str, str] = {}
    if len(pids_on_host) > 1 and max(pids_on_host.values()) > 1:
        for p in real:  # (what fits() asks, built only where a host can be a target)
            by_host_pid[(p.host, p.pid)] = p
            procs_of.setdefault(p.host, []).append(p)
        # Only a host with more pids than another can be a target: index those.
        ends_with: dict[str, list[str]] = {}
        for H, c in pids_on_host.items():
            if c > 1:
                for s in _suffixes(H):
                    ends_with.setdefault(s, []).append(H)
        for h, n in pids_on_host.items():
            cands = [H for H in _suffixes(h) if pids_on_host.get(H, 0) > n]
            cands += [H for H in ends_with.get(h, ()) if pids_on_host[H] > n]
            cands = [H for H in cands if fits(h, H)]
            if cands:
                best = max(pids_on_host[H] for H in cands)
                top = {H for H in cands if pids_on_host[H] == best}
                if len(top) == 1:
                    rename[h] = top.pop()
    # (processes are keyed by host and pid: with nothing renamed, no two share a group)
    groups: dict[tuple[str, int], list[_Proc]] = {}
    for p in real if rename else ():
        groups.setdefault((rename.get(p.host, p.host), p.pid), []).append(p)  # type: ignore

    merged: dict[int, _Proc] = {}  # id(original kept) -> merged copy
    absorbed: set[int] = set()
    for (host, _pid), group in groups.items():
        if len(group) == 1 and group[0].host == host:
            continue
        group.sort(key=lambda p: (p.host != host, -p.lines, p.host))
        keep = group[0]
        target = keep.copy()
        target.host = host
        for other in group[1:]:
            target.absorb(other)
            absorbed.add(id(other))
        merged[id(keep)] = target

    # Step 2: within one pid, fold by line count.
    current = [merged.get(id(p), p) for p in real if id(p) not in absorbed]
    by_pid: dict[int, list[_Proc]] = {}
    for p in current:
        by_pid.setdefault(p.pid, []).append(p)  # type: ignore[arg-type]
    folded: dict[int, _Proc] = {}
    gone: set[int] = set()
    for group in by_pid.values():
        lengths = sorted({len(p.host) for p in group})
        if len(group) < 2 or len(lengths) < 2:
            continue  # a suffix is shorter: hosts of one length are never related
        group.sort(key=lambda p: (-p.lines, p.host))
        order = {id(p): i for i, p in enumerate(group)}
        by_host = {p.host: p for p in group}
        # related[h]: the processes whose host is a proper suffix of h, then those of which
        # h is one (a suffix that is no host of this pid relates nothing: not indexed)
        related: dict[str, list[_Proc]] = {}
        sizes = [n for n in lengths if n]  # (a suffix is never empty)
        for p in group:
            h = p.host
            for n in sizes:  # (only a suffix as long as some host can be one)
                if n >= len(h):
                    break
                s = h[-n:]
                if s in by_host:
                    related.setdefault(h, []).append(by_host[s])
                    related.setdefault(s, []).append(p)
        named = [g for g in group if g.host]  # (once per pid: per process, it was quadratic)
        whole_cut = len(named) == 1 and "" in by_host
        for small in group:
            cands = related.get(small.host)
            if cands is None and small.host and not whole_cut:
                continue  # (most processes: nothing related)
            cands = list(cands or ())
            if not small.host:  # the whole host cut (`:40068:40068 [0] ...`): the one
                cands += named if len(named) == 1 else ()  # process of that pid that has one
            elif whole_cut:
                # ... and the other way round, where the cut lines are most of them (a host
                # redacted as `NAME ` with a blank, then once as `NAME`: nccl-tests#217)
                cands.append(by_host[""])
            owners = [g for g in cands if (g.lines > small.lines or g.lines == small.lines and (
                          _CUT_NUMBER_HEAD.fullmatch(small.host[:-len(g.host)] or "x")))
                      and id(g) not in gone and not apart(small, g)]
            if owners:
                owner = min(owners, key=lambda g: order[id(g)])
                into = folded.setdefault(id(owner), owner.copy())
                into.absorb(small)
                into.host = into.host or small.host
                gone.add(id(small))
    out = []
    for p in procs:
        if id(p) in absorbed:
            continue
        q = merged.get(id(p), p)
        if id(q) in gone:
            continue
        out.append(folded.get(id(q), q))
    return out


def _bootstrap_only(procs: list[_Proc]) -> list[_Proc]:
    """NCCL 2.3-2.4's bootstrap uses the socket transport, so every rank prints `NET/Socket :
    Using [0]ib0:...` before it loads a net plugin or looks for IB devices. A rank of such
    a job with no IB line after it (a paste cut before its `NET/IB : Using` line) chose no
    network yet; after `NET/IB : No device found` the socket it found is what it uses, as
    it is after `Failed to open libibverbs.so` or where the bootstrap printed its own
    `Bootstrap : Using` line (NCCL 2.4.7-2.4.8: fairseq#2329, NVIDIA/nccl#257).
    A paste without the version line shows the era by that order: a process whose IB line
    came after its NET/Socket line (from 2.5 on, NCCL prints a NET/Socket line only where
    it found no IB device, after saying so; nccl-tests#29)."""
    version = _most_common((p.nccl_version for p in procs), key=_version_tuple)
    if version and _version_tuple(version) >= (2, 5):
        return procs
    if not version and not any(p.weak_kind is Transport.IB and p.socket_ifaces
                               and not p.ib_no_device for p in procs):
        return procs
    out = []
    for p in procs:
        if p.weak_kind is Transport.SOCKET and not p.ib_no_device and not p.nets \
                and not p.via_nets and not p.socket_is_choice:
            p = p.without_weak_choice()
        out.append(p)
    return out


def _plugin_given_up(procs: list[_Proc]) -> list[_Proc]:
    """A process whose only sign of a network is the OFI plugin's own start-up line (its
    version, `NET/OFI Using aws-ofi-nccl 1.4.0aws`) chose nothing yet where another process
    of the job shows that plugin giving up and NCCL going on without it: the paste was cut
    before this one's give-up too (aws/deep-learning-containers#2675, where it made the job
    mixed)."""
    if not any(p.plugin_failed and p.selection()[0] not in (None, Transport.OFI)
               for p in procs):
        return procs
    out = []
    for p in procs:
        if p.weak_in_use and p.weak_kind is Transport.OFI and not p.provider \
                and not p.nets and not p.via_nets and not p.plugin_failed:
            p = p.without_weak_choice()
        out.append(p)
    return out


def _world_size(procs: Iterable[_Proc]) -> int:
    """The largest communicator's size the processes printed (0: none). A ring-order line
    lists every rank: a paste cut before the comm lines still tells it."""
    return max((max(p.nranks or 0, p.ring_ranks) for p in procs), default=0)


def _joined(blocks: Iterable[bytes], world: int) -> bool:
    """Whether the local channels (_LOCAL_CHANNEL) in ``blocks`` join ranks 0..world-1 into
    one group. Linear in the input, and done as soon as they are joined."""
    parent = list(range(world))

    def root(r: int) -> int:
        while parent[r] != r:
            parent[r] = parent[parent[r]]
            r = parent[r]
        return r

    groups = world

    def join(data: bytes) -> bool:
        nonlocal groups
        for m in _LOCAL_CHANNEL.finditer(data):
            a, b = int(m.group(1)), int(m.group(2))
            if a < world and b < world and root(a) != root(b):
                parent[root(a)] = root(b)
                groups -= 1
                if groups == 1:
                    return True
        return False

    tail = b""
    for block in blocks:
        data = tail + block
        cut = data.rfind(b"\n") + 1  # whole lines now, the rest with the next block
        if join(data[:cut]):
            return True
        tail = data[cut:][-MAX_LINE_CHARS * 4:]
    return join(tail)  # a last line without its newline


def _one_address(ip_lists: Iterable[list[str]]) -> bool:
    """Do all processes that name addresses share one (a host with two NICs lists both; a
    second host, even of the same name, has its own)?"""
    common: set[str] | None = None
    for ips in ip_lists:
        mine = {ip for ip in ips if not _loopback(ip)}
        if mine:
            common = mine if common is None else common & mine
            if not common:
                return False
    return True


def _machines(ip_lists: Iterable[list[str]]) -> int:
    """How many machines the processes of one host name are, by their addresses: processes
    that share an address are one machine (two cloud VMs both called `ubuntu` are two)."""
    groups: list[set[str]] = []
    for ips in ip_lists:
        mine = {ip for ip in ips if not _loopback(ip)}
        if not mine:
            continue
        joined = [g for g in groups if g & mine]
        for g in joined:
            groups.remove(g)
            mine |= g
        groups.append(mine)
    return max(len(groups), 1)


def _loopback(ip: str) -> bool:
    return ip.startswith("127.") or ip in ("::1", "0:0:0:0:0:0:0:1")


_CONTAINER_ID = re.compile(r"[0-9a-f]{12}")  # Docker names a container's host by its id


def _docker_bridge_only(procs: Sequence[_Proc]) -> bool:
    """Do these processes run in a Docker container on its default bridge (a hostname that
    is the container's id, every address in 172.17.0.0/16)? That network is NATed to its
    own machine: no other machine reaches a container at those addresses, so NCCL's
    sockets there connect ranks of one machine only (a job across machines runs with
    --network=host, under the machine's own name and addresses)."""
    ips = [ip for p in procs for ip in p.ips if not _loopback(ip)]
    return bool(ips) and all(ip.startswith("172.17.") for ip in ips) and all(
        _CONTAINER_ID.fullmatch(p.host) for p in procs)


class _Judge:
    def __init__(self, a: LogAnalyser) -> None:
        self.a = a
        procs = _plugin_given_up(_bootstrap_only(_merge_cut_hosts(list(a._procs.values()))))
        self.all_procs = procs
        # NCCL lines without NCCL's prefix and without a launcher prefix, in a file that has
        # prefixed lines, are tails of cut lines: their facts count for the job, but they do
        # not make a rank of their own.
        real_sources = {s for p in procs if p.real for s in p.sources}
        # (a `pid:tid [d]` process whose pid a process with a host has is that one's line,
        # its host cut off by a splice)
        real_pids = {p.pid for p in procs if p.real}
        self.reportable = [p for p in procs if p.real or (
            (p.has_net_evidence if not set(p.sources) & real_sources
             else p.label and p.has_choice_evidence)
            and (p.pid is None or p.pid not in real_pids))]
        self.docker_bridge = False  # (set by _inter_node: see _docker_bridge_only)
        self.inter_node, self.identities = self._inter_node()
        pid_count = Counter(p.pid for p in self.reportable if p.pid is not None)
        collnet = any(p.recover_seq >= 0 for p in procs)  # NCCL went on without CollNet
        # the one network the job script's echoes of NCCL_NET name, if they name one
        echoed = {_nccl_net_kind(v) for v in a._log_env.get("NCCL_NET", ())}
        echoed_net = next(iter(echoed)) if len(echoed) == 1 else None
        reports = []
        for p in self.reportable:
            own = p.inter_node()
            inter = False if self.inter_node is False else (own if own is not None
                                                            else self.inter_node)
            lf = a._lf_by_pid.get(p.pid, ()) if p.pid is not None and pid_count[p.pid] == 1 \
                else ()
            rep = p.report(inter, lf, collnet, a._work_done, echoed_net)
            reports.append(rep)
            if p.devs and len(p.ranks_seen) > 1 and rep.rank in p.ranks_seen:
                # One process driving several GPUs holds one rank per GPU: each is a rank of
                # the job, with what the process printed (its lines do not say which rank's).
                reports += [replace(rep, rank=r, cuda_dev=None)
                            for r in sorted(p.ranks_seen) if r != rep.rank]
        if any(r.selected not in (Transport.NONE, Transport.FAILED) for r in reports):
            # Other ranks chose a network: a rank whose only network line is `NET/IB : No
            # device found` was cut before its own choice (NCCL <= 2.5 printed its socket
            # line before that one), not left without a network
            reports = [replace(r, transport=Transport.NONE, selected=Transport.NONE,
                               failure=None, attempted=None)
                       if r.failure == _NO_DEVICE_ONLY else r for r in reports]
        reports = self._failed_by_other_lines(reports)
        if self.inter_node is None and any(r.local_failure for r in reports):
            # init died within a node, and nothing shows traffic between nodes: the ranks
            # that chose a network and opened no channel on it carried nothing either (the
            # other ranks of ROCm/rccl#2188's one MI350X node: P2P failed on two, the rest
            # had chosen Socket)
            reports = [replace(r, transport=Transport.NONE)
                       if r.transport in (Transport.OFI, Transport.IB, Transport.SOCKET)
                       and not r.net_channels else r for r in reports]
            # ... and those whose only failure was the echo of it, over the proxy's sockets
            # to the rank that failed, naming no network (a torchrun job that Slurm put on
            # one node: P2P's `invalid device ordinal` on one rank, `ncclProxyClientGetFd
            # call to tpRank 4 ... failed` and `socketProgress: Connection closed by remote
            # peer <the same host>` on another)
            reports = [replace(r, transport=Transport.NONE, selected=Transport.NONE,
                               failure=None, failed_after_init=False)
                       if r.transport is Transport.FAILED and r.attempted is None
                       and not r.net_channels and r.failure and _LOCAL_ECHO.search(r.failure)
                       else r for r in reports]
        self.ranks = tuple(sorted(
            reports,
            key=lambda r: (r.rank is None, r.rank if r.rank is not None else 0, r.host,
                           r.pid if r.pid is not None else -1),
        ))
        self.warnings: list[LogWarning] = []

    def warn(self, code: str, message: str) -> None:
        assert code in WARNING_CODES, code
        self.warnings.append(LogWarning(code, message))

    # -- facts about the whole job -------------------------------------------------------
    def _inter_node(self) -> tuple[bool | None, int]:
        world = _world_size(self.all_procs)
        inter, n_ident = self._inter_node_by_names(world)
        if inter is None and n_ident <= 1 and 1 < world <= _P2P_WORLD_MAX and self.a.p2p_joins(world):
            # Nothing names the nodes, no channel crosses them, and P2P or shared-memory
            # channels join every rank of the communicator: one node. (Three round logs of
            # 2-rank jobs whose pastes lost the host names or held one process: a TRACE
            # build's notes, a vLLM TP=2 pod, a `via P2P/CUMEM` example; each chose Socket
            # or IB, as NCCL does on one node too.)
            return False, 1
        return inter, n_ident

    def _inter_node_by_names(self, world: int) -> tuple[bool | None, int]:
        """(did traffic cross nodes: True/False/None, number of distinct hosts seen), where
        `world` is the largest communicator's size (_world_size)."""
        procs = self.all_procs
        real = [p for p in procs if p.real]
        ident: dict[str, set[int]] = {}
        n_procs: Counter[str] = Counter()  # processes per host, rank line printed or not
        gpus: dict[str, set[object]] = {}  # ... and the GPUs they name (see `whole`)
        split: set[str] = set()  # hosts whose processes are in different communicators
        ends: dict[str, set[int]] = {}  # the ends of the world a host's GPUs hold (see whole)
        unknown = 0
        # The largest communicator each host's processes printed, and the ranks they printed
        # of it where it is smaller than the world (see holds_whole)
        keys: list[str | None] = []
        host_world: dict[str, int] = {}
        for p in real:
            ips = [ip for ip in p.ips if not _loopback(ip)]
            key = p.host if not _is_redacted(p.host) else (f"ip:{ips[0]}" if ips else None)
            keys.append(key)
            if key is not None:
                host_world[key] = max(host_world.get(key, 0), p.nranks or 0, p.ring_ranks)
        own_seen: dict[str, set[int]] = {}
        own_split: set[str] = set()
        for p, key in zip(real, keys):
            if key is None:
                unknown += 1
                continue
            seen = ident.setdefault(key, set())
            n_procs[key] += 1
            gpus.setdefault(key, set()).add(p.dev if p.dev is not None else p)
            if p.nranks == world and len(seen) < _MAX_RANKS_SEEN:
                mine = p.ranks_seen or ({p.rank} if p.rank is not None else set())
                if mine & seen:  # one rank twice on a host: two communicators of that size
                    split.add(key)
                seen.update(mine)
                if p.rank is not None and p.rank == p.dev and p.rank in (0, world - 1):
                    ends.setdefault(key, set()).add(p.rank)
            elif p.nranks and p.nranks == host_world[key] < world:
                mine = p.ranks_seen or ({p.rank} if p.rank is not None else set())
                theirs = own_seen.setdefault(key, set())
                if mine & theirs:
                    own_split.add(key)
                if len(theirs) < _MAX_RANKS_SEEN:
                    theirs.update(mine)
        n_ident = len(ident) + (1 if unknown and not ident else 0)
        if len(ident) == 1 and not unknown and not _one_address(p.ips for p in real):
            # one name at addresses that no process shares: machines of the same name
            n_ident = _machines(p.ips for p in real)
        nn = [p.nnodes for p in procs if p.nnodes is not None]
        if any(n > 1 for n in nn):
            return True, n_ident
        if nn:  # every communicator that says so stays on one node
            if any(p.nnodes is None and p.channels_cross() for p in procs):
                return True, n_ident
            return False, n_ident
        if world == 1 and not any(p.channels_cross() for p in procs):
            # communicators of one rank each (a probe, ncclCommInitAll of 1 GPU)
            return False, max(n_ident, 1)
        tests_hosts = self.a._tests_host_names
        if tests_hosts and not any(_is_redacted(h) for h in tests_hosts) and all(
                p.host in tests_hosts for p in real if not _is_redacted(p.host)):
            # nccl-tests listed every rank's host (and NCCL's lines name no other): one host
            # is no network, several are (and so is one name at several addresses); where
            # several runs' tables each named one host, each run stayed on its host
            if self.a._tests_several and not (self.a._tests_spread or len(
                    set(self.a._tests_hosts.values())) > 1):
                return False, max(n_ident, len(tests_hosts))
            return len(tests_hosts) > 1 or n_ident > 1, max(n_ident, len(tests_hosts))
        ips = [ip for p in procs for ip in p.ips]
        ifaces = [i for p in procs for i in p.socket_ifaces]
        boot = {p.boot_loopback for p in procs if p.boot_loopback is not None}
        if (ips and all(_loopback(ip) for ip in ips)) or (ifaces and set(ifaces) == {"lo"}) \
                or boot == {True}:
            # loopback reaches no other host (a bootstrap on `lo:127.0.0.1` hands its peers
            # an address only its own machine can reach: every rank was there; a Docker
            # g5.12xlarge of aws/deep-learning-containers#2675, whose sockets list eth0 too)
            return False, max(n_ident, 1)
        # every host named holds the whole communicator: its processes printed every rank,
        # or there are as many of them as ranks (a hung init prints no rank line for some)
        # (counting processes holds only where they can be one communicator: a per-node file
        # of a vLLM job, each process `rank 1 nranks 2` of its own pipeline pair, is not)
        # (or its GPUs 0 and n-1 hold ranks 0 and n-1 of a world of n: a node of a bigger
        # job holds the last rank on GPU n-1 only with every rank before it there too, as
        # blocks or round-robin place them; vllm#18731's TP=8 pod, of whose 8 ranks the
        # paste kept ranks 0 and 7)
        # (or more than half of its ranks: nodes hold as many ranks each, so a host with
        # most of them is the only one; vllm#14025's TP=4 pod, whose paste kept ranks 1-3)
        # (... counted by the GPUs its processes name, where they name several: two runs
        # pasted one after the other give a host more processes than GPUs, nccl-tests#128's
        # 2 x 4 GPUs with 5 processes each; where all name GPU 0, each saw one GPU, as in
        # a container per rank, and processes count)
        # (and where the hosts that printed the world's communicator hold every rank of it,
        # a host whose processes printed only a smaller one holds a job of its own if it
        # holds every rank of that: two hosts each running a job of its own, 8 ranks on one
        # and 4 on the other, NCCL < 2.18 saying no nNodes, a helper's pastes of two such
        # runs. Not where the world spans hosts: a 12-rank job on an 8-GPU node and
        # another, the second's world lines cut, holds its 4 ranks' own communicator too.)
        world_whole = all(len(ident[k]) >= world for k in ident if host_world[k] == world)

        def holds_whole(key: str, seen: set[int]) -> bool:
            own = host_world[key]
            if world_whole and 0 < own < world and key in own_seen:
                return len(own_seen[key]) >= own and key not in own_split
            return len(seen) >= world or (n_procs[key] >= world and key not in split) or (
                world > 1 and ends.get(key) == {0, world - 1} and key not in split) or (
                world > 2 and 2 * max(len(seen), len(gpus[key]) if len(gpus[key]) > 1
                                      else n_procs[key]) > world and key not in split)

        whole = bool(ident) and not unknown and bool(world) and all(
            holds_whole(key, seen) for key, seen in ident.items())
        if any(p.channels_cross() for p in procs):
            # Channels through the network prove traffic between hosts, unless one host,
            # named in every line and at one address, holds every rank (NCCL_P2P_DISABLE and
            # NCCL_SHM_DISABLE on one node, `mpirun -H localhost:2` in a container). A log
            # of one node of a bigger job lacks ranks, so it stays inter-node.
            # (the ranks themselves seen, not only as many processes: a per-node file of a
            # vLLM job holds 8 processes of which one says `rank 1 nranks 2`, its pipeline
            # pair's other rank on the other node)
            seen_all = bool(ident) and not unknown and bool(world) and all(
                len(seen) >= world for seen in ident.values())
            if seen_all and len(ident) == 1 and all(p.real for p in procs if p.net_channels) \
                    and _one_address(p.ips for p in real):
                return False, 1
            return True, n_ident
        if len(ident) == 1 and not unknown and n_ident == 1 and (
                any(p.devs for p in real) or "localhost" in ident):
            # one host, and no link that crosses nodes, where a process drives several GPUs
            # (a single-process job: ncclCommInitAll, nccl-tests `-g 4`, DataParallel) or
            # the host calls itself localhost: one machine (round 23: the 5 real pastes of
            # this shape were all of one box; with one GPU per process, most pastes of one
            # host were one node of a bigger job, so those stay unknown)
            return False, 1
        if len(ident) == 1 and not unknown and n_ident == 1 and _docker_bridge_only(real):
            # one container on Docker's default bridge: its sockets reach its own machine
            # only (the 9 of 10 such round logs whose threads said: one machine; vllm,
            # Megatron, sglang, ms-swift, DeepSpeed-Chat and Lightning in `docker run`)
            self.docker_bridge = True
            return False, 1
        if not ident or unknown or not world:
            return None, n_ident
        if whole and n_ident == len(ident):
            return False, n_ident
        if n_ident > 1:
            return True, n_ident
        return None, n_ident

    def _failed_by_other_lines(self, reports: list[RankReport]) -> list[RankReport]:
        """nccl-tests said a NCCL call failed with a network's error (`Test NCCL failure
        common.cu:345 'unhandled system error'`) where NCCL's own lines show no failure
        (the paste holds no WARN): the ranks on that host that crossed nodes failed on
        their link (nccl-tests#36: rings over NET/IB/GDRDMA, then this on both hosts; the
        maintainer: "the IB communication problem"). One node's ranks are left as they are.
        PyTorch's echo of a link's error (`Last error:` then `NET/IB : Got completion from
        peer ... error 12`, a line of no rank's, which does not say whose link it was) fails
        no rank: the ranks that crossed nodes get it as their link_error (link_failure)."""
        fails = {h: f"nccl-tests: Test NCCL failure '{e}'"
                 for h, e in self.a._tests_failures.items() if _TESTS_NET_ERROR.search(e)}
        active = (Transport.OFI, Transport.IB, Transport.SOCKET)
        if not fails:
            ranks = {id(p) for p in self.reportable}
            echo = next((p.err_msg for p in self.all_procs if p.link_seq >= 0 and p.err_msg
                         and id(p) not in ranks), None)
            if echo and not any(r.link_error or r.transport is Transport.FAILED
                                for r in reports):
                # (the echo's link broke while the job ran on it, as link_failure says)
                return [replace(r, link_error=echo) if r.transport in active else r
                        for r in reports]
        if not fails and self.a._init_echo and reports and not any(
                r.transport is Transport.FAILED or r.link_error for r in reports) and not any(
                p.complete_seq >= 0 or p.net_channels for p in self.all_procs):
            # The echo of a socket init's WARN (`Last error:` then `ncclSocketInit: ...
            # neither AF_INET`, nccl#1837) where no rank's own lines show it, nor an init
            # that completed: the job's init failed, trying what each rank had chosen
            return [replace(r, transport=Transport.FAILED, failure=self.a._init_echo,
                            attempted=r.selected if r.selected in active else None)
                    for r in reports]
        if not fails or any(r.transport is Transport.FAILED for r in reports):
            return reports
        # (where a rank of that host shows its link's error, a running link broke, as
        # link_failure says, and nccl-tests' failure is what the application saw of it:
        # results printed over IB, then `Got completion from peer ... status=12` and
        # `Test NCCL failure common.cu:1035 'remote process exited or there was a network
        # error'`, a helper's log)
        fails = {h: e for h, e in fails.items()
                 if not any(r.link_error and r.host == h for r in reports)}
        if not fails:
            return reports
        on = {r.host for r in reports if r.transport in active} & set(fails)
        return [replace(r, transport=Transport.FAILED, attempted=r.transport,
                        failure=fails.get(r.host) or next(iter(fails.values())))
                if r.transport in active and (r.host in on or not on) else r
                for r in reports]

    def _fabric(self) -> tuple[Fabric | None, str | None]:
        """The given fabric, else the one the first rank's provider, then the first socket
        interface, points to (runner.fabrics); each distinct name is looked up once."""
        if self.a.expected_fabric is not None:
            return self.a.expected_fabric, None
        for provider in dict.fromkeys(r.provider for r in self.ranks
                                      if r.selected is Transport.OFI):
            fabric = _checked(fabrics.by_provider(provider))
            if fabric is not None:
                return fabric, f"libfabric provider {provider}"
        # Only ranks that chose sockets: NCCL 2.4-2.6 print a NET/Socket line for their
        # bootstrap anyway.
        for i in dict.fromkeys(i for r in self.ranks if r.selected is Transport.SOCKET
                               for i in r.socket_ifaces):
            fabric = _checked(fabrics.by_interface(i))
            if fabric is not None:
                return fabric, f"interface {i}"
        # A rank on sockets whose libfabric plugin gave up on the provider it was told to
        # use (`Setting provider_filter to efa`, then `aws-ofi-nccl initialization failed`,
        # then `Using network Socket`: a Databricks notebook on p4d): that provider's fabric
        # is what sockets stood in for
        for provider in dict.fromkeys(r.provider for r in self.ranks if r.selected is
                                      Transport.SOCKET and r.plugin_failed and r.provider):
            fabric = _checked(fabrics.by_provider(provider))
            if fabric is not None:
                return fabric, f"libfabric provider {provider}, whose plugin failed"
        # A rank on sockets after IB found an HCA it could not open and then none (a Docker
        # container on a RoCE host, no /dev/infiniband: `NET/IB : Unable to open device
        # mlx5_bond_0`, `No device found`, `Using network Socket`; nccl#451's "extremely
        # slow" DeepSpeed job): the host has the RDMA fabric that sockets stood in for
        for r in self.ranks:
            if r.selected is Transport.SOCKET and r.ib_no_device:
                dev = next((m.group(1) for w in r.nccl_warnings
                            if (m := _IB_OPEN_FAILED.match(w))), None)
                if dev:
                    return Fabric.INFINIBAND, f"IB device {dev}, which NCCL could not open"
        # Ranks across nodes of which some used IB and others sockets (NeMo#4035: one node's
        # ranks on IBext, the other's with NCCL_IB_DISABLE=1 on sockets): the fabric is
        # there, and the socket ranks did not use it
        used = {r.transport for r in self.ranks}
        if Transport.IB in used and Transport.SOCKET in used:
            return Fabric.INFINIBAND, "the ranks that used IB"
        return None, None

    def _ib_hca_note(self) -> str:
        """Where the log shows NCCL_IB_HCA, the other way IB finds no device: the setting
        names none that is there and up (a port that is down, `ib0` given for `mlx5_0`; two
        helpers' Slurm logs, whose advice named the image)."""
        value = next((p.env["NCCL_IB_HCA"] for p in self.all_procs if "NCCL_IB_HCA" in p.env),
                     None)
        if value is None:
            return ""
        return (f"; or NCCL_IB_HCA={value} (the log echoes it) names no HCA that is there "
                "with its port up: ibv_devinfo lists them (an HCA, mlx5_0, not an interface, "
                "ib0)")

    def _ll128_guard(self) -> str | None:
        env = self.a.env
        if proto_excludes_ll128(env.get("NCCL_PROTO")):
            return f"NCCL_PROTO={env['NCCL_PROTO']} (job environment)"
        if _rdzv_guarded(env):
            return "FI_CXI_RDZV_*=0 (job environment)"
        told = [p for p in self.all_procs if p.env]
        if told:
            def order(p: _Proc) -> tuple[str, int]:
                return p.host, p.pid or -1

            def guard(p: _Proc) -> str | None:
                if proto_excludes_ll128(p.env.get("NCCL_PROTO")):
                    return f"NCCL_PROTO={p.env['NCCL_PROTO']} (log)"
                return "FI_CXI_RDZV_*=0 (log)" if _rdzv_guarded(p.env) else None

            # the first process in that order usually says it (all ranks echo the same)
            said = guard(min(told, key=order))
            for p in () if said else sorted(told, key=order):
                said = guard(p)
                if said:
                    break
            if said:
                return said
        for value in sorted(self.a._log_env.get("NCCL_PROTO", ())):
            if proto_excludes_ll128(value):
                return f"NCCL_PROTO={value} (log)"
        if _rdzv_guarded(self.log_env):
            return "FI_CXI_RDZV_*=0 (log)"
        return None

    @cached_property
    def log_env(self) -> dict[str, str]:
        """The settings the job's script echoed (`set -x`, `env | grep`), one value each
        (the largest, where lines disagree), as a process's own `env` holds them."""
        return {k: max(v) for k, v in self.a._log_env.items() if v}

    @cached_property  # asked by the socket-fallback warning and by the summary
    def socket_forced(self) -> str | None:
        """`NCCL_IB_DISABLE=1` or `NCCL_NET=Socket`, where a process or the job's script
        echoed it: then sockets were no fallback's doing (the usual hint would mislead)."""
        for env in [p.env for p in self.all_procs if p.env] + [self.log_env]:
            if env.get("NCCL_IB_DISABLE", "").strip().rstrip(".") == "1":
                return "NCCL_IB_DISABLE=1"
            if env.get("NCCL_NET", "").strip().strip("'\"").rstrip(".").lower() == "socket":
                return "NCCL_NET=Socket"
        return None

    def _job_provider(self, on_t: list[RankReport]) -> tuple[str | None, str | None]:
        """(base name, as printed): the ranks on the job's transport first, then any rank,
        then libfabric's own lines, then FI_* settings the log echoes."""
        for rs in (on_t, self.ranks):
            stack = _most_common(r.provider_stack for r in rs)
            if stack:
                return _ofi_base_provider(stack), stack
        # lines that make no rank of their own (a paste's unprefixed plugin lines) name it
        stack = _most_common(p.provider or next(iter(p.named_providers), None)
                             for p in self.all_procs)
        if stack:
            return _ofi_base_provider(stack), stack
        lf = Counter({k: v for k, v in self.a._lf_providers.items() if k not in _HELPER_PROVIDERS})
        if lf:
            best = max(lf.items(), key=lambda kv: (kv[1], kv[0]))[0]
            return best, best
        env = self.a._log_env
        for value in sorted(env.get("FI_PROVIDER", ())):
            base = _ofi_base_provider(value)
            if base and not value.startswith("^"):
                return base, value
        named = sorted({m.group("p").lower() for k in env for m in [_FI_PROV_PREFIX.match(k + "_")]
                        if m})
        if len(named) == 1:
            return named[0], named[0]
        return None, None

    # -- the verdict -----------------------------------------------------------------------
    def verdict(self) -> LogVerdict:
        a = self.a
        ranks = self.ranks
        fabric, inferred_from = self._fabric()
        kind = _kind_of(fabric)
        world = max((p.nranks or 0 for p in self.all_procs), default=0) or None
        nnodes = max((p.nnodes or 0 for p in self.all_procs), default=0)
        nodes = max(self.identities, nnodes) or None
        if self.inter_node and (nodes or 0) < 2:
            # traffic crossed nodes (channels to a rank of another node) in a paste of one
            # host's lines: the job spans at least two, not the one host the lines name
            nodes = 2
        elif self.inter_node is False and nnodes and any(
                "NCCL_HOSTID" in env for env in [p.env for p in self.all_procs] + [self.log_env]):
            # NCCL_HOSTID told NCCL which processes share a machine, and NCCL counted the
            # nodes (`nNodes 1`), across which no traffic went: its count, not the host
            # names (two pods on one machine, nccl#1781). (Without it, host names count:
            # `nNodes 1` is one communicator's, a tensor-parallel group of a bigger job.)
            nodes = nnodes
        elif nodes == 1 and self.inter_node is None:
            # one host's lines, and nothing says whether other hosts took part (most such
            # pastes are one node of a bigger job): how many nodes is not known
            nodes = None
        total = max(len(ranks), world or 0)
        single = self.inter_node is False

        with_sel = [r for r in ranks if r.selected is not Transport.NONE]  # chose or failed
        active = [r for r in ranks if r.transport is not Transport.NONE]  # across nodes
        failed = [r for r in ranks if r.transport is Transport.FAILED]
        transport = _worst(r.transport for r in active)
        selected = _worst(r.selected for r in with_sel)
        attempted_s = _most_common(r.attempted.value for r in failed if r.attempted)
        local = {(p.host, p.pid) for p in self.all_procs if p.local_fault}
        if failed and not attempted_s and (self.inter_node is True or not all(
                (r.host, r.pid) in local for r in failed)):
            # the failed ranks died before naming a network (a bootstrap error): the job was
            # trying the one that its other ranks chose (where it crossed nodes, also when
            # shared memory or P2P failed, horovod#1122; not where nothing says it did:
            # ROCm/rccl#2188's hipIpcGetMemHandle, one node's paste)
            attempted_s = _most_common(r.selected.value for r in with_sel
                                       if r.selected is not Transport.FAILED)
        if failed and not attempted_s:
            # ... else the net plugin that loaded and did not give up (NCCL tries it first),
            # where the log says so: a paste may keep its lines without their prefix while
            # the failed rank's chain has one (nccl#1913: `Loaded net plugin Libfabric`)
            attempted_s = _most_common(
                k.value for p in self.all_procs if p.plugin and not p.plugin_failed
                for k in (_net_kind(p.plugin),) if k is not None)
        if failed and not attempted_s:
            # ... else the network whose error such lines name (nccl#1913's `NET/OFI
            # Unexpected number of remote rails ...`, pasted apart from the rank's chain)
            attempted_s = _most_common(p.err_kind.value for p in self.all_procs
                                       if p.err_kind is not None)
        attempted = Transport(attempted_s) if attempted_s else None
        on_t = [r for r in active if r.transport is transport]
        provider, provider_stack = self._job_provider(on_t)
        ofi_fabric = _most_common(r.ofi_fabric for r in on_t if r.transport is Transport.OFI)
        told = [p for p in self.all_procs if p.nccl_version or p.plugin or p.plugin_version
                or p.libfabric_version]  # most processes print none of these
        versions = Counter(p.nccl_version for p in told if p.nccl_version)
        nccl_version = _most_common((p.nccl_version for p in told), key=_version_tuple)
        libs = {p.library for p in told if p.library}
        library = "rccl" if "rccl" in libs else ("nccl" if libs else None)
        plugin = _most_common(p.plugin for p in told)
        plugin_api = _most_common(p.plugin_api for p in told)
        plugin_version = _most_common(p.plugin_version for p in told)
        libfabric_version = _most_common(p.libfabric_version for p in told)

        fast_of: dict[tuple[Transport, str | None], bool] = {}  # ranks share a few of these

        def is_fast(r: RankReport) -> bool:
            """Failed never; else as the kind says (ethernet / no fabric: any transport)."""
            key = (r.transport, r.provider)
            fast = fast_of.get(key)
            if fast is None:
                fast = fast_of[key] = (r.transport is not Transport.FAILED
                                       and kind.is_fast(r.transport._value_, r.provider))
            return fast

        slow = [r for r in active if not is_fast(r)]
        kinds = Counter(_kind(r) for r in active if r.transport is not Transport.FAILED)
        named = [k for k in kinds if k.startswith("OFI/") and k != "OFI/?"]
        if "OFI/?" in kinds and len(named) == 1:
            # a rank whose provider line is missing (a pasted log cut its init) is no other
            # transport: count it with the one provider the others name
            kinds[named[0]] += kinds.pop("OFI/?")
        mixed = len(kinds) > 1
        if failed:
            verdict = Verdict.FAILED
        elif not with_sel:
            verdict = Verdict.NONE
        elif not active:
            verdict = Verdict.SINGLE_NODE
        elif slow:
            verdict = Verdict.FALLBACK
        else:
            verdict = Verdict.FAST

        fab = fabric.value if fabric else None
        fab_note = f" (inferred from {inferred_from})" if inferred_from else ""

        # -- warnings, in WARNING_CODES order ---------------------------------------------
        not_found = Counter(r.failure for r in failed if r.failure and "not found" in r.failure
                            and r.failure.startswith("network "))
        for msg, n in sorted(not_found.items()):
            name = msg[len("network "):-len(" not found")]
            ofi = _net_kind(name) is Transport.OFI or "ibfabric" in name or "OFI" in name
            self.warn("network-not-found",
                      f"{msg} on {_frac(n, total)} ranks: NCCL_NET names a network whose plugin "
                      + ("did not load (bind/build aws-ofi-nccl; do not combine "
                         "NCCL_NET_PLUGIN=ofi with NCCL_NET; a cudart-dynamic plugin needs "
                         "libcudart.so)" if ofi else
                         "did not load (is its libnccl-net library where NCCL_NET_PLUGIN and "
                         "LD_LIBRARY_PATH say, inside the container?)"))
        other_failed = [r for r in failed if r.failure and not r.failure.startswith("network ")]
        if other_failed:
            what = other_failed[0].attempted or attempted
            phase, on = _failure_phase(other_failed)  # as the summary says
            trying = f" {on} {what.value}" if what else ""
            self.warn("net-init-failed",
                      f"NCCL network {phase} on {_frac(len(other_failed), total)} ranks"
                      f"{trying} ({other_failed[0].failure})")
        sockets = [r for r in active if r.transport is Transport.SOCKET]
        if sockets and kind.needs_network:
            ifaces = ",".join(dict.fromkeys(i for r in sockets for i in r.socket_ifaces)) or "?"
            forced = self.socket_forced
            hint = (f"the job set {forced} (the log echoes it): sockets were asked for"
                    if forced else _in_words_of(library, kind.fallback_hint)
                    + (self._ib_hca_note() if kind.verbs_devices else ""))
            self.warn("socket-fallback",
                      f"NCCL {'ran on' if forced else 'fell back to'} TCP sockets "
                      f"(Socket/{ifaces}) on "
                      f"{_frac(len(sockets), total)} ranks on {_a(fab)} fabric{fab_note} "
                      f"(5-40x slower): {hint}")
        slow_ofi = [r for r in slow if r.transport is Transport.OFI]
        if slow_ofi:
            provs = ",".join(sorted({r.provider or "?" for r in slow_ofi}))
            self.warn("ofi-slow-provider",
                      f"libfabric used provider {provs}, not {kind.fast_provider}, on "
                      f"{_frac(len(slow_ofi), total)} ranks on {_a(fab)} fabric{fab_note}: "
                      "check FI_PROVIDER and the host libfabric/libcxi binds")
        if kind.net_plugin is not None:
            missing = [p for p in self.all_procs if p.plugin_missing and not p.plugin
                       and not p.plugin_version and p.selection()[0] is not Transport.OFI]
            if missing:
                line = _most_common(p.plugin_missing for p in missing)
                self.warn("plugin-missing",
                          f"NCCL found no net plugin on {len(missing)} process(es) "
                          f"({line!r}): {_in_words_of(library, kind.net_plugin_hint)}")
        if kind.verbs_devices:
            nodev = [r for r in ranks if r.ib_no_device]
            if nodev:
                self.warn("ib-no-device",
                          f"NET/IB : No device found on {_frac(len(nodev), total)} ranks on "
                          f"{_a(fab)} fabric: rdma-core/libmlx5 missing in the image, or "
                          f"/dev/infiniband not visible{self._ib_hca_note()}")
        if a._ibverbs_no_driver:
            where = f" (on {', '.join(a._ibverbs_hosts)})" if a._ibverbs_hosts else ""
            self.warn("ibverbs-no-driver",
                      "libibverbs: no userspace device-specific driver found"
                      f"{where}: the image lacks the verbs provider (ibverbs-providers / "
                      "libmlx5); NCCL cannot use InfiniBand and drops to TCP")
        if mixed:
            parts = ", ".join(f"{k} on {_frac(n, total)}" for k, n in
                              sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))
            self.warn("mixed-transports", f"ranks use different transports: {parts} ranks")
        ll128_guard = self._ll128_guard()
        vt = _version_tuple(nccl_version)
        cxi_fabric = "cxi" in kind.providers  # an OFI rank without a provider line is on cxi
        on_cxi = [r for r in active if r.transport is Transport.OFI and (
            r.provider == "cxi" or (r.provider is None and cxi_fabric))]
        hazard = (bool(on_cxi) and library != "rccl" and vt[:2] >= _LL128_MIN_VERSION
                  and ll128_guard is None)  # one node: no NIC path, no hazard
        if hazard:
            self.warn("ll128-hazard",
                      f"NCCL {nccl_version} (>= 2.27) on the OFI/cxi path without "
                      "NCCL_PROTO=^LL128 (or FI_CXI_RDZV_EAGER_SIZE/THRESHOLD/GET_MIN=0): "
                      "all-reduce can return wrong results on GH200 + Slingshot "
                      "(NVIDIA/nccl #2001)")
        if len(versions) > 1:
            self.warn("mixed-nccl-versions",
                      "processes report different NCCL versions: "
                      + ", ".join(sorted(versions, key=_version_tuple)))
        if cxi_fabric:
            noprov = [r for r in active if r.transport is Transport.OFI and not r.provider]
            if noprov:
                self.warn("provider-unknown",
                          f"no 'NET/OFI Selected provider is ...' line on "
                          f"{_frac(len(noprov), total)} ranks: cannot confirm the cxi provider")
        if kind.needs_network:
            fast_chan = [r for r in active if is_fast(r) and r.net_channels]
            if fast_chan and not any(r.gdrdma for r in fast_chan):
                self.warn("no-gdrdma",
                          "no 'via NET/.../GDRDMA' channel: GPUDirect RDMA is not used "
                          "(check NCCL_NET_GDR_LEVEL, e.g. PHB)")
        unknown = sorted({n for p in self.all_procs for n in p.unknown_nets})
        if unknown:
            self.warn("unknown-network",
                      "NCCL used a network this check does not know: " + ", ".join(unknown))
        no_t = [r for r in ranks if r.selected is Transport.NONE]
        if with_sel and no_t:
            self.warn("ranks-without-transport",
                      f"{len(no_t)} of {len(ranks)} processes printed no network selection "
                      f"(e.g. {no_t[0].who}); the log may be cut short")
        shown = len(ranks)
        if world:
            covered: set[int] = set()
            for p in self.reportable:
                if p.nranks == world and len(covered) < world:
                    covered.update(p.ranks_seen)
            shown = max(shown, len(covered))
        if world and shown < world:
            self.warn("ranks-missing",
                      f"the log shows {shown} of {world} ranks; verdict covers those only")
        if self.docker_bridge:
            # (the one such round log of a job meant for two machines hung there: nccl#367)
            self.warn("docker-bridge",
                      "the processes run in a Docker container on its default bridge network "
                      "(172.17.0.0/16): NCCL's sockets reach this machine only, so the job is "
                      "read as one node's; a job across machines hangs there (run its "
                      "containers with --network=host)")
        if not with_sel and kind.needs_network:
            self.warn("no-transport",
                      f"no NCCL network selection in {self._source()}: cannot confirm the "
                      f"{fab} fast path (run with NCCL_DEBUG=INFO)")
        broke = [r for r in ranks if r.link_error]
        if broke:
            what, how = "a link broke while the job ran on it", (
                "then a request on it failed (the job stopped or hung on it: check the links, "
                "NICs and switches between its nodes)")
            if "collective mismatch" in broke[0].link_error:
                # (net_ib.cc's sanity check in isend: the peer posted a receive of another
                # size; NCCL's own comment calls it a user's collective count/size mismatch)
                what, how = "a request failed on a link the job ran on", (
                    "then a send met a receive of another size (ranks called a collective "
                    "with different sizes or out of step: the application's bug, not the "
                    "network's)")
            chose = (f"NCCL chose {broke[0].selected_label} and connected"
                     if broke[0].selected is not Transport.NONE else
                     "the log does not name the network NCCL chose")
            self.warn("link-failed",
                      f"{what}, on {_frac(len(broke), total)} ranks ({broke[0].link_error}): "
                      f"{chose}; {how}")
        gave_up = [r for r in ranks if r.plugin_failed and r.transport is not Transport.FAILED]
        if gave_up:
            went = sorted({r.selected_label for r in gave_up if r.selected is not Transport.NONE})
            # (a paste that ends with the plugin's give-up: NCCL goes on with its own
            # transports, which the log does not show; a UCCL postmortem's p5en pods, whose
            # author says sockets)
            then = (f"NCCL went on with {','.join(went)}" if went else
                    "the log does not show what NCCL went on with (its own IB or Socket)")
            self.warn("plugin-failed",
                      f"a net plugin gave up on {_frac(len(gave_up), total)} ranks "
                      f"({gave_up[0].plugin_failed}); {then}")
        in_node = [r for r in ranks if r.local_failure]
        if in_node:
            why = in_node[0].local_failure
            self.warn("init-failed-in-node",
                      f"NCCL init failed within a node on {_frac(len(in_node), total)} ranks "
                      f"({why}): {_in_node_advice(why)}")
        if a._binary_sources:
            self.warn("binary-input",
                      f"stopped reading binary data in {', '.join(a._binary_sources)}")
        if a._cut_sources:
            self.warn("input-cut", f"{'; '.join(a._cut_sources)}: the verdict covers the "
                      "text before that")
        if a._dropped_procs:
            self.warn("processes-dropped",
                      f"more than {MAX_PROCESSES} processes: lines of further processes "
                      f"ignored ({a._dropped_procs} lines)")

        summary = self._summary(
            verdict=verdict, transport=transport, active=active, with_sel=with_sel, total=total,
            slow=slow, failed=failed, fabric=fabric, kind=kind, fab_note=fab_note,
            nccl_version=nccl_version, plugin=plugin, plugin_version=plugin_version,
            hazard=hazard, library=library, kinds=kinds, nodes=nodes)
        if broke and verdict is not Verdict.FAILED:  # (what a job's epilogue shows)
            summary += (f"; then a link broke on {_frac(len(broke), total)} ranks: "
                        f"{broke[0].link_error[:120]}")
        if in_node and verdict is not Verdict.FAILED:
            summary += (f"; NCCL init failed within the node on {_frac(len(in_node), total)} "
                        f"ranks: {in_node[0].local_failure[:120]}")
        order = {c: i for i, c in enumerate(WARNING_CODES)}
        warnings = tuple(sorted(self.warnings, key=lambda w: order[w.code]))
        return LogVerdict(
            source=self._source(),
            expected_fabric=a.expected_fabric,
            fabric=fabric,
            fabric_inferred_from=inferred_from,
            transport=transport,
            provider=provider,
            ofi_fabric=ofi_fabric,
            nccl_version=nccl_version,
            plugin=plugin,
            plugin_api=plugin_api,
            plugin_version=plugin_version,
            libfabric_version=libfabric_version,
            nodes=nodes,
            world_size=world,
            ranks=ranks,
            warnings=warnings,
            verdict=verdict,
            summary=summary,
            lines=a._lines,
            nccl_lines=a._nccl_lines,
            ll128_guard=ll128_guard,
            sources=tuple(a._sources),
            selected=selected,
            attempted=attempted,
            mixed=mixed,
            inter_node=self.inter_node,
            library=library,
            provider_stack=provider_stack,
        )

    def _source(self) -> str:
        s = self.a._sources or [self.a.source]
        return s[0] if len(s) == 1 else f"{s[0]} (+{len(s) - 1} more)"

    def _summary(self, *, verdict, transport, active, with_sel, total, slow, failed, fabric,
                 kind, fab_note, nccl_version, plugin, plugin_version, hazard, library,
                 kinds, nodes) -> str:
        fab = fabric.value if fabric else None
        details = []
        if nccl_version:
            details.append(f"{'RCCL' if library == 'rccl' else 'NCCL'} {nccl_version}")
        if plugin_version:
            details.append(f"{ofi_plugin_name(library)} {plugin_version}")
        elif plugin:
            details.append(f"plugin {plugin}")
        detail = f" ({', '.join(details)})" if details else ""

        def top(rs, attr: str = "label") -> tuple[str, int]:
            """The most common label (the most detailed on a tie: `Socket/eth0` over a rank
            that printed only channel lines) and how many ranks share its kind (an OFI rank
            whose provider is not named shares the one provider the others name)."""
            labels = Counter(getattr(r, attr) for r in rs)
            kinds: Counter[str] = Counter()
            for lab, n in labels.items():
                kinds[lab if lab.startswith("OFI/") else lab.split("/", 1)[0]] += n
            unnamed = kinds.pop("OFI/?", 0)
            if not kinds:
                return "OFI/?", unnamed
            best, n = max(((k, n + (unnamed if k.startswith("OFI/") else 0))
                           for k, n in kinds.items()), key=lambda kv: (kv[1], len(kv[0]), kv[0]))
            if best.startswith("OFI/"):
                return best, n
            # (`Socket` and `Socket/eth0,eth1` are one kind: shown by its most detailed label)
            return max((lab for lab in labels if lab.split("/", 1)[0] == best),
                       key=lambda lab: ("/" in lab, labels[lab], len(lab), lab)), n

        if verdict is Verdict.FAILED:
            reason = _most_common(r.failure for r in failed) or "network init failed"
            tried = _most_common(r.attempted.value for r in failed if r.attempted)
            what, on = _failure_phase(failed)
            trying = f" ({on} {tried})" if tried and not reason.startswith("network ") else ""
            return (f"fabrikit: ERROR NCCL network {what} on {_frac(len(failed), total)} "
                    f"ranks: {reason}{trying}{detail}")
        if verdict is Verdict.NONE:
            base = f"no NCCL network selection seen in {self._source()}"
            if kind.needs_network:
                return (f"fabrikit: WARNING {base}: cannot confirm the {fab} fast path "
                        "(run with NCCL_DEBUG=INFO)")
            if nodes and nodes > 1:  # no single node: NCCL said nNodes, or hosts differ
                return (f"fabrikit: {base}, though the job spans {nodes} nodes (the log may "
                        "end before NCCL chose a network)")
            if self.inter_node is False or not self.a._nccl_lines:
                return f"fabrikit: {base} (single node, or NCCL_DEBUG=INFO not set)"
            # (NCCL's lines are there, and none says one node: a paste cut before the
            # choice is as likely; three helpers read "NCCL_DEBUG=INFO not set" as wrong)
            return (f"fabrikit: {base} (the log may end before NCCL chose one, or the job "
                    "ran on one node)")
        if verdict is Verdict.SINGLE_NODE:
            label, n = top(with_sel, "selected_label")
            return (f"fabrikit: single node: NCCL network not used (selected {label} on "
                    f"{_frac(n, total)} ranks){detail}")
        if len(kinds) > 1:
            parts = ", ".join(f"{k} on {_frac(n, total)}" for k, n in
                              sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))
            tail = (f": fallback on {len(slow)} ranks on {_a(fab)} fabric{fab_note}"
                    if slow else "")
            return f"fabrikit: WARNING mixed transports: {parts} ranks{tail}"
        label, n = top(active)
        if verdict is Verdict.FALLBACK:
            if transport is Transport.SOCKET:
                # (where the job asked for sockets, no fallback's doing: its setting is named)
                forced = self.socket_forced
                how = f"ran on TCP sockets as the job asked ({forced})" if forced else \
                    "fell back to TCP sockets"
                why = f"NCCL {how} on {_a(fab)} fabric{fab_note} (5-40x slower)"
            else:
                why = (f"NCCL did not use the {kind.fast_text} fast path on {_a(fab)} "
                       f"fabric{fab_note} (5-40x slower)")
            return f"fabrikit: WARNING transport {label} on {_frac(n, total)} ranks: {why}"
        if hazard:
            return (f"fabrikit: WARNING transport {label} on {_frac(n, total)} ranks{detail}: "
                    "NCCL >= 2.27 on Slingshot without NCCL_PROTO=^LL128: all-reduce can "
                    "return wrong results on GH200")
        note = ""
        if transport is Transport.SOCKET and fabric is None:
            note = " [no --fabric given: cannot tell whether this is a fallback]"
        return f"fabrikit: transport {label} on {_frac(n, total)} ranks{detail}{note}"
