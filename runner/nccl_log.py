"""Read NCCL_DEBUG=INFO output and say which network NCCL used, per rank and for the job.

The worst NCCL failure is silent: with no usable plugin or driver NCCL falls back to TCP
sockets (5-40x slower), and on GH200 + Slingshot with NCCL >= 2.27 the LL128 protocol can
return wrong all-reduce results. This module turns a job's log into a `LogVerdict` that names
the transport (`ofi` with its libfabric provider, `ib` with its devices, `socket` with its
interfaces, `failed`, `none`) and raises stable warning codes.

Design:

- Pure: no file, environment or subprocess access. Callers hand in lines (str or bytes) and,
  optionally, the expected fabric and the job's environment.
- One pass, bounded memory: `LogAnalyser.feed()` takes one line at a time and keeps only small
  per-process state (every list is capped); `result()` can be called at any point.
- Processes are told apart by NCCL's own `hostname:pid:tid [cudaDev]` prefix and mapped to a
  global rank by `comm 0x... rank N nranks M` lines (the communicator with the most ranks
  wins: that is the world). Outer prefixes written by srun `--label`, torchrun, PyTorch or
  fabrikit's local launcher are skipped; NCCL lines without NCCL's prefix are grouped by those
  outer prefixes.
- Tolerant: ANSI colours, CR/CRLF, NUL and non-UTF-8 bytes, lines that two writers merged
  (`...Using netnode2:7:7 [1] NCCL INFO ...`: the cut first part is dropped), truncated last
  lines. A value is only taken when the text after it shows it is complete (a provider must
  be followed by `,` or ` (found`, a network name must be a complete known name, ...).
  Unparseable text is ignored, never raised on.
- Deterministic: the verdict depends only on each process's own line order, so any
  interleaving of the same per-rank logs gives the same answer.

Line formats are the ones listed in shared/reference/fabric-facts.md ("NCCL_DEBUG=INFO lines
that tell which transport is used", the aws-ofi-nccl section, "Recurring failures").
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum
from typing import IO, Any, Iterable, Iterator, Mapping

from runner.errors import UserError

__all__ = [
    "Transport",
    "Fabric",
    "Verdict",
    "LogWarning",
    "RankReport",
    "LogVerdict",
    "LogAnalyser",
    "analyse",
    "iter_stream_lines",
    "WARNING_CODES",
]


class Transport(Enum):
    """The network NCCL used between nodes."""

    OFI = "ofi"  # a libfabric net plugin (aws-ofi-nccl): network "AWS Libfabric"/"Libfabric"/"OFI"
    IB = "ib"  # NCCL's internal InfiniBand/RoCE verbs transport (or an IBext plugin)
    SOCKET = "socket"  # NCCL's internal TCP socket transport: the silent fallback
    FAILED = "failed"  # network init failed (e.g. "network AWS Libfabric not found")
    NONE = "none"  # no network selection seen


class Fabric(Enum):
    """The fabric the job runs on, as the caller (site profile) knows it."""

    SLINGSHOT = "slingshot"
    INFINIBAND = "infiniband"
    ETHERNET = "ethernet"


class Verdict(Enum):
    """What the job as a whole did. `exit_code` of `LogVerdict` maps it to 0/1."""

    FAST = "fast"  # every rank with a transport used the fabric's expected (fast) path
    FALLBACK = "fallback"  # at least one rank used a slower path than the fabric offers
    FAILED = "failed"  # at least one rank's network init failed
    SINGLE_NODE = "single-node"  # all ranks on one node: the network carried no traffic
    NONE = "none"  # no network selection seen at all


# Stable warning codes, in the order warnings are reported.
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
)

# --------------------------------------------------------------------------------------------
# Limits that keep memory bounded whatever the input.

MAX_LINE_CHARS = 16384  # longer lines are cut (NCCL's own buffer is 1024 bytes)
MAX_PROCESSES = 65536
_MAX_ITEMS = 16  # devices, interfaces, nets per process
_MAX_NCCL_WARNINGS = 5  # raw NCCL WARN messages kept per process
_MAX_ENV = 64  # echoed env settings kept per process

# --------------------------------------------------------------------------------------------
# Regular expressions. Each one is written so that a value cut short by truncation is not
# taken (the text after the value must be there).

_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
_CTRL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

# NCCL's prefix: [optional timestamp] host:pid:tid [cudaDev] [file:line [(func)]] NCCL LEVEL
_NCCL_PREFIX = re.compile(
    r"(?P<host>[A-Za-z0-9_][\w.\-]*):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] "
    r"(?:[^\[\]\n]{0,200}? )?NCCL (?P<level>INFO|WARN|ABORT|TRACE|CALL)\b ?"
)
# NCCL lines without NCCL's host:pid:tid prefix (NCCL_DEBUG=VERSION, or another log layer).
_BARE_NCCL = re.compile(r"^NCCL (?P<level>INFO|WARN)\b ?")
_BARE_VERSION = re.compile(r"^NCCL version \d")

# Outer prefixes written by launchers, applied repeatedly (they can stack).
_OUTER_PREFIXES = (
    # torchrun [default0]:, torch [rank3]:
    re.compile(r"^\[(?P<kind>default|rank)(?P<n>\d+)\]:\s?"),
    re.compile(r"^(?P<host>[A-Za-z][\w.\-]*) \[(?P<n>\d+)\]: ?"),  # node2 [1]:
    re.compile(r"^\s*(?P<task>\d+): ?"),  # srun --label: "3: "
    re.compile(r"^\[(?P<host>[A-Za-z][\w.\-]*)\] "),  # fabrikit local launcher: [node1]
    re.compile(r"^\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[^\]]*\] "),  # NCCL / generic timestamp
)

_VERSION = re.compile(r"^NCCL version (?P<v>\d+\.\d+\.\d+)(?![\d.])")
_PLUGIN_LOADED = re.compile(r"^NET/Plugin ?: ?Loaded net plugin (?P<name>.+?) \((?P<api>v\d+)\)")
_PLUGIN_MISSING = re.compile(
    r"^NET/Plugin ?: ?(?:.*\bNo plugin found\b|Could not find: ?\S*libnccl-net|"
    r".*libnccl-net\S*: cannot open shared object)"
)
_OFI_VERSION = re.compile(r"^NET/OFI (?:Using|Initializing) aws-ofi-nccl (?P<v>\S+)")
_LIBFABRIC_VERSION = re.compile(r"^NET/OFI Using Libfabric version (?P<v>\d+\.\d+)")
_PROVIDER = re.compile(
    r"^NET/OFI Selected [Pp]rovider is (?P<prov>[^\s,()]+)(?=,| \(found|(?P<end>\s*$))"
    r"(?:, fabric is (?P<fabric>[^\s,()]+)(?= \(found))?"
    r"(?: \(found (?P<nics>\d+) nics?\))?"
)
_USING_NETWORK = re.compile(r"^Using network (?P<name>.+?)\s*$")
_IB_USING = re.compile(r"^NET/IB\w* ?: Using (?P<rest>.*)")
_IB_DEVICE = re.compile(r"\[\d+\](?P<dev>[\w.\-]+:\d+)/(?:IB|RoCE)(?=[\s;]|$)")
_IB_NO_DEVICE = re.compile(r"^NET/IB\w* ?: No device found")
_SOCKET_USING = re.compile(r"^NET/Socket ?: Using (?P<rest>.*)")
_SOCKET_IFACE = re.compile(r"\[\d+\](?P<iface>[^\s:<>\[\]]+):\S*?<\d+>")
_CHANNEL_NET = re.compile(r"\bvia NET/(?P<name>[^/\n]+)/(?P<idx>\d+)(?P<rest>\S*)")
_COMM = re.compile(
    r"\bcomm (?P<comm>0x[0-9a-fA-F]+) rank (?P<rank>\d+) n[Rr]anks (?P<nranks>\d+)(?=\s)")
_NNODES = re.compile(r"\bnNodes (?P<n>\d+)(?=\s)")
_ENV_ECHO = re.compile(r"^(?P<key>[A-Z][A-Z0-9_]*) set by environment to (?P<value>.*?)\s*$")
_NET_NOT_FOUND = re.compile(r"\bnetwork (?P<name>.*?) ?not found")
_IBVERBS_NO_DRIVER = "libibverbs: Warning: no userspace device-specific driver found"

# Network names NCCL prints in "Using network X" and "via NET/X/...".
_OFI_NAMES = frozenset({"AWS Libfabric", "Libfabric", "OFI"})
_KNOWN_NAMES = {
    **{n: Transport.OFI for n in _OFI_NAMES}, "IB": Transport.IB, "Socket": Transport.SOCKET}
_IBEXT = re.compile(r"^IBext(?:_v\d+)?$")  # HPC-X / nccl-rdma-sharp plugin's verbs network

# Provider names taken even at the end of a line (a line that may have been cut short).
_OFI_PROVIDERS = frozenset({"cxi", "efa", "tcp", "sockets", "udp", "shm", "verbs", "psm2",
                            "psm3", "opx", "ucx", "mlx"})
_SLOW_OFI_PROVIDERS = frozenset({"tcp", "sockets", "udp", "shm"})
_IB_OFI_PROVIDERS = frozenset({"verbs", "mlx"})
_LL128_MIN_VERSION = (2, 27)
_RDZV_GUARD = ("FI_CXI_RDZV_EAGER_SIZE", "FI_CXI_RDZV_THRESHOLD", "FI_CXI_RDZV_GET_MIN")


def _net_kind(name: str) -> Transport | None:
    if name in _KNOWN_NAMES:
        return _KNOWN_NAMES[name]
    if _IBEXT.match(name):
        return Transport.IB
    return None


def _is_truncated_name(name: str) -> bool:
    """True if `name` is a proper prefix of a known network name (a line cut short)."""
    return any(known.startswith(name) and known != name for known in (*_KNOWN_NAMES, "IBext"))


def _version_tuple(v: str | None) -> tuple[int, ...]:
    if not v:
        return ()
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def _ofi_base_provider(provider: str | None) -> str | None:
    # "tcp;ofi_rxm" -> "tcp"
    return provider.split(";", 1)[0].lower() if provider else None


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
    transport: Transport
    network: str | None  # the name NCCL printed: "AWS Libfabric", "IB", "Socket", ...
    provider: str | None = None  # libfabric provider (ofi only): cxi, efa, tcp, ...
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

    @property
    def label(self) -> str:
        """Short transport label: OFI/cxi, IB/mlx5_0:1,mlx5_1:1, Socket/hsn0, failed, none."""
        if self.transport is Transport.OFI:
            return f"OFI/{self.provider or '?'}"
        if self.transport is Transport.IB:
            return "IB/" + ",".join(self.ib_devices) if self.ib_devices else "IB"
        if self.transport is Transport.SOCKET:
            return "Socket/" + ",".join(self.socket_ifaces) if self.socket_ifaces else "Socket"
        return self.transport.value

    @property
    def who(self) -> str:
        return f"{self.host}:{self.pid}" if self.pid is not None else self.host

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "nranks": self.nranks,
            "host": self.host,
            "pid": self.pid,
            "cuda_dev": self.cuda_dev,
            "transport": self.transport.value,
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
        }


@dataclass(frozen=True)
class LogVerdict:
    """The job-level answer. `summary` is the one-line report; `to_json()` the machine one."""

    source: str
    expected_fabric: Fabric | None  # as given by the caller
    fabric: Fabric | None  # as used for the checks: given, or inferred (see fabric_inferred_from)
    fabric_inferred_from: str | None
    transport: Transport
    provider: str | None
    ofi_fabric: str | None
    nccl_version: str | None
    plugin: str | None
    plugin_api: str | None
    plugin_version: str | None
    libfabric_version: str | None
    nodes: int | None  # distinct hosts in NCCL prefixes, or NCCL's nNodes if larger
    world_size: int | None  # largest nranks seen
    ranks: tuple[RankReport, ...]
    warnings: tuple[LogWarning, ...]
    verdict: Verdict
    summary: str
    lines: int = 0
    nccl_lines: int = 0
    ll128_guard: str | None = None  # how the LL128 hazard is avoided, if it is
    sources: tuple[str, ...] = field(default=())

    @property
    def exit_code(self) -> int:
        """0 fast/single-node; 1 fallback/failed; `none` is 1 only where the fabric needs a
        network (slingshot, infiniband), since that job cannot be confirmed fast."""
        if self.verdict in (Verdict.FAST, Verdict.SINGLE_NODE):
            return 0
        if self.verdict is Verdict.NONE:
            return 1 if self.fabric in (Fabric.SLINGSHOT, Fabric.INFINIBAND) else 0
        return 1

    @property
    def warning_codes(self) -> tuple[str, ...]:
        return tuple(w.code for w in self.warnings)

    def transport_counts(self) -> dict[str, int]:
        c = Counter(r.transport.value for r in self.ranks)
        return {t.value: c[t.value] for t in Transport if c[t.value]}

    def to_dict(self) -> dict[str, Any]:
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
            "ranks": [r.to_dict() for r in self.ranks],
            "warnings": [w.to_dict() for w in self.warnings],
            "verdict": self.verdict.value,
            "exit_code": self.exit_code,
            "summary": self.summary,
            "lines": self.lines,
            "nccl_lines": self.nccl_lines,
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)


# --------------------------------------------------------------------------------------------
# Per-process state while reading


def _add_capped(items: list, value: Any, cap: int = _MAX_ITEMS) -> None:
    if value not in items and len(items) < cap:
        items.append(value)


class _Proc:
    """Mutable state for one process; turned into a frozen RankReport at the end."""

    __slots__ = (
        "host", "pid", "real", "dev", "sources", "rank", "nranks", "rank_hint", "nnodes",
        "nets", "via_nets", "net_channels", "gdrdma", "provider", "ofi_fabric", "nics",
        "ib_devices", "ib_no_device", "socket_ifaces", "nccl_version", "plugin", "plugin_api",
        "plugin_version", "libfabric_version", "plugin_missing", "not_found", "unknown_nets",
        "nccl_warnings", "env", "lines", "label",
    )

    def __init__(self, host: str, pid: int | None, real: bool) -> None:
        self.host = host
        self.pid = pid
        self.real = real
        self.dev: int | None = None
        self.sources: list[str] = []
        self.rank: int | None = None
        self.nranks: int | None = None
        self.rank_hint: int | None = None
        self.nnodes: int | None = None
        self.nets: list[str] = []
        self.via_nets: list[str] = []
        self.net_channels = 0
        self.gdrdma = False
        self.provider: str | None = None
        self.ofi_fabric: str | None = None
        self.nics: int | None = None
        self.ib_devices: list[str] = []
        self.ib_no_device = False
        self.socket_ifaces: list[str] = []
        self.nccl_version: str | None = None
        self.plugin: str | None = None
        self.plugin_api: str | None = None
        self.plugin_version: str | None = None
        self.libfabric_version: str | None = None
        self.plugin_missing: str | None = None
        self.not_found: str | None = None
        self.unknown_nets: list[str] = []
        self.nccl_warnings: list[str] = []
        self.env: dict[str, str] = {}
        self.lines = 0
        self.label: str | None = None

    def copy(self) -> "_Proc":
        new = _Proc(self.host, self.pid, self.real)
        for name in self.__slots__:
            value = getattr(self, name)
            setattr(new, name, value.copy() if isinstance(value, (list, dict)) else value)
        return new

    def absorb(self, other: "_Proc") -> None:
        """Take in what a cut line attributed to a shortened host name (`de1:7:7 [0] ...`
        is the tail of `node1:7:7 [0] ...` whose head went to another line)."""
        for name in self.__slots__:
            mine, theirs = getattr(self, name), getattr(other, name)
            if name in ("host", "pid", "real", "rank", "nranks", "label"):
                continue
            if isinstance(mine, list):
                for v in theirs:
                    _add_capped(mine, v, max(_MAX_ITEMS, len(mine)))
            elif isinstance(mine, dict):
                for k, v in theirs.items():
                    mine.setdefault(k, v)
            elif isinstance(mine, bool):
                setattr(self, name, mine or theirs)
            elif name in ("net_channels", "lines"):
                setattr(self, name, mine + theirs)
            elif mine is None:
                setattr(self, name, theirs)
        if other.nranks is not None and (self.nranks is None or other.nranks > self.nranks):
            self.rank, self.nranks = other.rank, other.nranks

    # -- one message (the text after "NCCL INFO " / "NCCL WARN ") ---------------------------
    def take(self, level: str, msg: str) -> None:
        self.lines += 1
        msg = msg.strip()
        if not msg:
            return
        if level == "WARN":
            _add_capped(self.nccl_warnings, msg[:300], _MAX_NCCL_WARNINGS)
        m = _NET_NOT_FOUND.search(msg)
        if m and level == "WARN":
            self.not_found = self.not_found or m.group("name").strip() or "(unnamed)"
            return
        if level != "INFO":
            return
        c = msg[0]
        if c == "N":
            self._take_n(msg)
        elif c == "U":
            m = _USING_NETWORK.match(msg)
            if m:
                name = m.group("name")
                if _net_kind(name) is not None:
                    _add_capped(self.nets, name)
                elif not _is_truncated_name(name):
                    _add_capped(self.unknown_nets, name[:80], 4)
        elif c == "C":
            if msg.startswith("Channel"):
                m = _CHANNEL_NET.search(msg)
                if m:
                    name = m.group("name")
                    if _net_kind(name) is not None:
                        _add_capped(self.via_nets, name)
                        self.net_channels += 1
                        if "GDRDMA" in m.group("rest"):
                            self.gdrdma = True
                    elif not _is_truncated_name(name):
                        _add_capped(self.unknown_nets, name[:80], 4)
        if "comm 0x" in msg:
            self._take_comm(msg)
        if " set by environment to " in msg:
            m = _ENV_ECHO.match(msg)
            if m and (m.group("key") in self.env or len(self.env) < _MAX_ENV):
                self.env[m.group("key")] = m.group("value")[:200]

    def _take_n(self, msg: str) -> None:
        if msg.startswith("NCCL version"):
            m = _VERSION.match(msg)
            if m:
                self.nccl_version = m.group("v")
        elif msg.startswith("NET/OFI"):
            m = _PROVIDER.match(msg)
            if m and (m.group("end") is None
                      or _ofi_base_provider(m.group("prov")) in _OFI_PROVIDERS):
                self.provider = m.group("prov")
                self.ofi_fabric = m.group("fabric") or self.ofi_fabric
                if m.group("nics"):
                    self.nics = int(m.group("nics"))
                return
            m = _OFI_VERSION.match(msg)
            if m:
                self.plugin_version = m.group("v")
                return
            m = _LIBFABRIC_VERSION.match(msg)
            if m:
                self.libfabric_version = m.group("v")
        elif msg.startswith("NET/Plugin"):
            m = _PLUGIN_LOADED.match(msg)
            if m:
                self.plugin = m.group("name")
                self.plugin_api = m.group("api")
            elif _PLUGIN_MISSING.match(msg):
                self.plugin_missing = self.plugin_missing or msg[:200]
        elif msg.startswith("NET/IB"):
            m = _IB_USING.match(msg)
            if m:
                for d in _IB_DEVICE.finditer(m.group("rest").split(";", 1)[0]):
                    _add_capped(self.ib_devices, d.group("dev"))
            elif _IB_NO_DEVICE.match(msg):
                self.ib_no_device = True
        elif msg.startswith("NET/Socket"):
            m = _SOCKET_USING.match(msg)
            if m:
                for i in _SOCKET_IFACE.finditer(m.group("rest")):
                    _add_capped(self.socket_ifaces, i.group("iface"))

    def _take_comm(self, msg: str) -> None:
        m = _COMM.search(msg)
        if not m:
            return
        rank, nranks = int(m.group("rank")), int(m.group("nranks"))
        if self.nranks is None or nranks > self.nranks:
            self.rank, self.nranks = rank, nranks
        n = _NNODES.search(msg)
        if n:
            self.nnodes = max(self.nnodes or 0, int(n.group("n")))

    # -- classification -------------------------------------------------------------------
    @property
    def has_net_evidence(self) -> bool:
        return bool(
            self.nets or self.via_nets or self.provider or self.ib_devices or self.socket_ifaces
            or self.not_found or self.ib_no_device or self.plugin_missing or self.unknown_nets
        )

    def classify(self) -> tuple[Transport, str | None, str | None]:
        """(transport, network name, failure message)."""
        names = self.via_nets or self.nets  # channels show what was really used
        kinds = {n: _net_kind(n) for n in names}
        for t in (Transport.SOCKET, Transport.OFI, Transport.IB):  # worst first if several
            for name, k in kinds.items():
                if k is t:
                    return t, name, None
        if self.not_found:
            return Transport.FAILED, None, f"network {self.not_found} not found"
        if self.provider:
            return Transport.OFI, None, None
        if self.ib_devices:
            return Transport.IB, None, None
        if self.socket_ifaces:
            return Transport.SOCKET, None, None
        if self.ib_no_device and not self.unknown_nets:
            return Transport.FAILED, None, "NET/IB : No device found, and no other network"
        return Transport.NONE, None, None

    def report(self) -> RankReport:
        transport, network, failure = self.classify()
        ofi = transport is Transport.OFI
        return RankReport(
            host=self.host,
            pid=self.pid,
            rank=self.rank if self.rank is not None else self.rank_hint,
            nranks=self.nranks,
            cuda_dev=self.dev,
            transport=transport,
            network=network,
            provider=self.provider if ofi else None,
            ofi_fabric=self.ofi_fabric if ofi else None,
            nics=self.nics if ofi else None,
            ib_devices=tuple(self.ib_devices),
            socket_ifaces=tuple(self.socket_ifaces),
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
            nccl_warnings=tuple(self.nccl_warnings),
            sources=tuple(self.sources),
        )


# --------------------------------------------------------------------------------------------
# The analyser


def _coerce_fabric(fabric: Fabric | str | None) -> Fabric | None:
    if fabric is None or isinstance(fabric, Fabric):
        return fabric
    try:
        return Fabric(str(fabric).strip().lower())
    except ValueError:
        valid = ", ".join(f.value for f in Fabric)
        raise UserError(f"unknown fabric {fabric!r} (valid: {valid})") from None


class LogAnalyser:
    """Streaming analyser: `feed()` lines (from one or more files) then `result()`.

    Parameters
    ----------
    source:
        Name used in messages when `feed()` is not told where a line came from.
    expected_fabric:
        The job's fabric (`slingshot`, `infiniband`, `ethernet`) or None (then it is inferred
        from `hsn*`/`ib*` socket interfaces or the cxi provider where possible).
    env:
        The job's environment, if the caller knows it; used for the LL128 guard
        (`NCCL_PROTO` excluding LL128, or `FI_CXI_RDZV_EAGER_SIZE/THRESHOLD/GET_MIN=0`).
    """

    def __init__(
        self,
        source: str = "<log>",
        expected_fabric: Fabric | str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.source = source
        self.expected_fabric = _coerce_fabric(expected_fabric)
        self.env = dict(env) if env else {}
        self._procs: dict[tuple, _Proc] = {}
        self._sources: list[str] = []
        self._lines = 0
        self._nccl_lines = 0
        self._ibverbs_no_driver = 0
        self._ibverbs_hosts: list[str] = []
        self._dropped_procs = 0

    # -- input ----------------------------------------------------------------------------
    def feed_lines(self, lines: Iterable[str | bytes], source: str | None = None) -> "LogAnalyser":
        for line in lines:
            self.feed(line, source)
        return self

    def feed(self, line: str | bytes, source: str | None = None) -> None:
        src = source or self.source
        if not self._sources or self._sources[-1] != src:
            if src not in self._sources and len(self._sources) < 1024:
                self._sources.append(src)
        if isinstance(line, (bytes, bytearray)):
            line = bytes(line[:MAX_LINE_CHARS * 4]).decode("utf-8", "replace")
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS]
        self._lines += 1
        if "\x1b" in line:
            line = _ANSI.sub("", line)
        # CR (CRLF, progress bars) and embedded newlines end a line, too.
        for piece in re.split(r"[\r\n]", line) if ("\r" in line or "\n" in line) else (line,):
            if piece:
                self._piece(_CTRL.sub("", piece) if _CTRL.search(piece) else piece, src)

    def _piece(self, text: str, src: str) -> None:
        if _IBVERBS_NO_DRIVER in text:
            self._ibverbs_no_driver += 1
            host = self._outer(text)[1].get("host")
            if host:
                _add_capped(self._ibverbs_hosts, host)
        if "NCCL" not in text:
            return
        if text.count("NCCL ") > 1:  # possibly two writers on one line
            matches = list(_NCCL_PREFIX.finditer(text))
        else:
            first = _NCCL_PREFIX.search(text)
            matches = [first] if first else []
        if matches:
            labels = self._outer(text[: matches[0].start()])[1] if matches[0].start() else {}
            # Every segment but the last was cut by the next writer: ignore what it says.
            m = matches[-1]
            msg = text[m.end():]
            if "NCCL INFO" in msg or "NCCL WARN" in msg:
                return  # a merged line whose second prefix could not be split off
            proc = self._proc((m.group("host"), int(m.group("pid"))), m.group("host"),
                              int(m.group("pid")), True, src)
            if proc is None:
                return
            if proc.dev is None:
                proc.dev = int(m.group("dev"))
            if proc.rank_hint is None and "rank" in labels:
                proc.rank_hint = labels["rank"]
            self._nccl_lines += 1
            proc.take(m.group("level"), msg)
            return
        rest, labels = self._outer(text)
        if _BARE_VERSION.match(rest):
            level, msg = "INFO", rest
        else:
            b = _BARE_NCCL.match(rest)
            if not b:
                return
            level, msg = b.group("level"), rest[b.end():]
        label = labels.get("label")
        host = labels.get("host") or (f"rank{labels['rank']}" if "rank" in labels else None)
        proc = self._proc(("", src, label), host or label or src, None, False, src)
        if proc is None:
            return
        proc.label = label
        if proc.rank_hint is None and "rank" in labels:
            proc.rank_hint = labels["rank"]
        self._nccl_lines += 1
        proc.take(level, msg)

    @staticmethod
    def _outer(text: str) -> tuple[str, dict[str, Any]]:
        """Strip launcher prefixes; return the rest and what they said (host, rank, label)."""
        labels: dict[str, Any] = {}
        parts: list[str] = []
        for _ in range(6):
            for rx in _OUTER_PREFIXES:
                m = rx.match(text)
                if m:
                    g = m.groupdict()
                    if g.get("kind") == "rank":
                        labels["rank"] = int(g["n"])
                    if g.get("host"):
                        labels["host"] = g["host"]
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
        if src not in proc.sources:
            _add_capped(proc.sources, src, 8)
        return proc

    # -- output ---------------------------------------------------------------------------
    def result(self) -> LogVerdict:
        return _Judge(self).verdict()


def analyse(
    lines: Iterable[str | bytes],
    source: str = "<log>",
    expected_fabric: Fabric | str | None = None,
    env: Mapping[str, str] | None = None,
) -> LogVerdict:
    """Analyse one log (any iterable of lines, str or bytes) in one pass."""
    return LogAnalyser(source, expected_fabric, env).feed_lines(lines).result()


def iter_stream_lines(stream: IO[bytes], max_len: int = MAX_LINE_CHARS) -> Iterator[bytes]:
    """Lines of a binary stream with bounded memory: an over-long line is cut to `max_len`
    bytes and the rest of it skipped."""
    while True:
        chunk = stream.readline(max_len)
        if not chunk:
            return
        if len(chunk) >= max_len and not chunk.endswith(b"\n"):
            while True:  # drop the remainder of this line
                more = stream.readline(max_len)
                if not more or more.endswith(b"\n"):
                    break
        yield chunk


# --------------------------------------------------------------------------------------------
# Judging: from per-process state to the job verdict


def _most_common(values: Iterable[str | None], key=None) -> str | None:
    c = Counter(v for v in values if v)
    if not c:
        return None
    # Deterministic: highest count, then highest value (versions: the newest).
    return max(c.items(), key=lambda kv: (kv[1], key(kv[0]) if key else kv[0]))[0]


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


def _related(a: str, b: str) -> bool:
    return a != b and (a.endswith(b) or b.endswith(a))


def _merge_cut_hosts(procs: list[_Proc]) -> list[_Proc]:
    """Fold processes that exist only because a line was cut into the real one.

    Two writers sharing a stream give `...Using hsn0node1:7:7 [0] NCCL INFO x` (host read as
    `hsn0node1`) and orphaned tails such as `de1:7:7 [0] NCCL INFO y` (host `de1`). Such a
    made-up host has a real host as a suffix, or is a suffix of one.

    1. A host is renamed to the related host that runs the most pids, if that one runs more
       than it does and is the only such (then merged with the same pid there).
    2. Left over (e.g. one rank per node): within one pid, a process is folded into a related
       one with more lines (ties are left alone).

    Works on copies, so the analyser's own state is unchanged; the result does not depend on
    the order of the lines of different processes.
    """
    real = [p for p in procs if p.real and p.pid is not None]
    if not real:
        return procs
    pids_on_host = Counter(p.host for p in real)
    rename: dict[str, str] = {}
    if len(pids_on_host) > 1 and max(pids_on_host.values()) > 1:
        hosts = sorted(pids_on_host)
        for h in hosts:
            n = pids_on_host[h]
            cands = [H for H in hosts if pids_on_host[H] > n and _related(h, H)]
            if cands:
                best = max(pids_on_host[H] for H in cands)
                top = [H for H in cands if pids_on_host[H] == best]
                if len(top) == 1:
                    rename[h] = top[0]
    groups: dict[tuple[str, int], list[_Proc]] = {}
    for p in real:
        groups.setdefault((rename.get(p.host, p.host), p.pid), []).append(p)

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
        if len(group) < 2:
            continue
        group.sort(key=lambda p: (-p.lines, p.host))
        for k, small in enumerate(group):
            owners = [g for g in group[:k] if id(g) not in gone and g.lines > small.lines
                      and _related(g.host, small.host)]
            if owners:
                folded.setdefault(id(owners[0]), owners[0].copy()).absorb(small)
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


class _Judge:
    def __init__(self, a: LogAnalyser) -> None:
        self.a = a
        procs = _merge_cut_hosts(list(a._procs.values()))
        self.all_procs = procs
        # NCCL lines without NCCL's prefix and without a launcher prefix, in a file that has
        # prefixed lines, are tails of cut lines: their facts count for the job, but they do
        # not make a rank of their own.
        real_sources = {s for p in procs if p.real for s in p.sources}
        self.reportable = [p for p in procs if p.real or (
            p.has_net_evidence and (p.label or not set(p.sources) & real_sources))]
        self.ranks = tuple(sorted(
            (p.report() for p in self.reportable),
            key=lambda r: (r.rank is None, r.rank if r.rank is not None else 0, r.host,
                           r.pid if r.pid is not None else -1),
        ))
        self.warnings: list[LogWarning] = []

    def warn(self, code: str, message: str) -> None:
        assert code in WARNING_CODES, code
        self.warnings.append(LogWarning(code, message))

    # -- facts about the whole job -------------------------------------------------------
    def _fabric(self) -> tuple[Fabric | None, str | None]:
        if self.a.expected_fabric is not None:
            return self.a.expected_fabric, None
        for r in self.ranks:
            if r.transport is Transport.OFI and _ofi_base_provider(r.provider) == "cxi":
                return Fabric.SLINGSHOT, "libfabric provider cxi"
        for r in self.ranks:
            for i in r.socket_ifaces:
                if i.startswith("hsn"):
                    return Fabric.SLINGSHOT, f"interface {i}"
                if i.startswith("ib"):
                    return Fabric.INFINIBAND, f"interface {i}"
        return None, None

    def _nodes(self) -> tuple[int | None, bool]:
        """(node count, positively single node)."""
        hosts = Counter(p.host for p in self.all_procs if p.real)
        nnodes = max((p.nnodes or 0 for p in self.all_procs), default=0)
        world = max((p.nranks or 0 for p in self.all_procs), default=0)
        nodes = max(len(hosts), nnodes) or None
        via_net = any(r.net_channels for r in self.ranks)
        single = (
            not via_net
            and (nnodes == 1 or (nnodes == 0 and len(hosts) == 1 and world > 0
                                 and next(iter(hosts.values())) >= world))
            and len(hosts) <= 1
        )
        return nodes, single

    def _ll128_guard(self) -> str | None:
        env = self.a.env
        if proto_excludes_ll128(env.get("NCCL_PROTO")):
            return f"NCCL_PROTO={env['NCCL_PROTO']} (job environment)"
        if _rdzv_guarded(env):
            return "FI_CXI_RDZV_*=0 (job environment)"
        for p in sorted(self.all_procs, key=lambda p: (p.host, p.pid or -1)):
            if proto_excludes_ll128(p.env.get("NCCL_PROTO")):
                return f"NCCL_PROTO={p.env['NCCL_PROTO']} (log)"
            if _rdzv_guarded(p.env):
                return "FI_CXI_RDZV_*=0 (log)"
        return None

    # -- the verdict -----------------------------------------------------------------------
    def verdict(self) -> LogVerdict:
        a = self.a
        ranks = self.ranks
        fabric, inferred_from = self._fabric()
        nodes, single = self._nodes()
        world = max((p.nranks or 0 for p in self.all_procs), default=0) or None
        total = max(len(ranks), world or 0)

        with_t = [r for r in ranks if r.transport is not Transport.NONE]
        failed = [r for r in with_t if r.transport is Transport.FAILED]
        counts = Counter(r.transport for r in with_t)
        transport = Transport.NONE
        for t in (Transport.FAILED, Transport.SOCKET, Transport.OFI, Transport.IB):
            if counts[t]:
                transport = t
                break
        # Job-level values, order independent.
        on_t = [r for r in with_t if r.transport is transport]
        provider = _most_common(r.provider for r in on_t)
        ofi_fabric = _most_common(r.ofi_fabric for r in on_t)
        versions = Counter(p.nccl_version for p in self.all_procs if p.nccl_version)
        nccl_version = _most_common(
            (p.nccl_version for p in self.all_procs), key=_version_tuple)
        plugin = _most_common(p.plugin for p in self.all_procs)
        plugin_api = _most_common(p.plugin_api for p in self.all_procs)
        plugin_version = _most_common(p.plugin_version for p in self.all_procs)
        libfabric_version = _most_common(p.libfabric_version for p in self.all_procs)

        def is_fast(r: RankReport) -> bool:
            base = _ofi_base_provider(r.provider)
            if r.transport is Transport.FAILED:
                return False
            if fabric is Fabric.SLINGSHOT:
                return r.transport is Transport.OFI and base in (None, "cxi")
            if fabric is Fabric.INFINIBAND:
                return r.transport is Transport.IB or (
                    r.transport is Transport.OFI and base in _IB_OFI_PROVIDERS)
            return True  # ethernet / unknown fabric: sockets are the expected path

        slow = [r for r in with_t if not is_fast(r)]
        if failed:
            verdict = Verdict.FAILED
        elif not with_t:
            verdict = Verdict.NONE
        elif single:
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
            self.warn("network-not-found",
                      f"{msg} on {_frac(n, total)} ranks: NCCL_NET names a network whose plugin "
                      "did not load (bind/build aws-ofi-nccl; do not combine NCCL_NET_PLUGIN=ofi "
                      "with NCCL_NET; a cudart-dynamic plugin needs libcudart.so)")
        other_failed = [r for r in failed if r.failure and not r.failure.startswith("network ")]
        if other_failed:
            self.warn("net-init-failed",
                      f"NCCL found no usable network on {_frac(len(other_failed), total)} ranks "
                      f"({other_failed[0].failure})")
        sockets = [r for r in with_t if r.transport is Transport.SOCKET]
        if sockets and fabric in (Fabric.SLINGSHOT, Fabric.INFINIBAND) and not single:
            ifaces = ",".join(dict.fromkeys(i for r in sockets for i in r.socket_ifaces)) or "?"
            hint = (
                'the libfabric plugin (aws-ofi-nccl) did not load; set NCCL_NET="AWS Libfabric" '
                "so NCCL fails instead of falling back" if fabric is Fabric.SLINGSHOT else
                "the image lacks rdma-core userspace (libibverbs1, ibverbs-providers) or the "
                "IB devices are not visible"
            )
            self.warn("socket-fallback",
                      f"NCCL fell back to TCP sockets (Socket/{ifaces}) on "
                      f"{_frac(len(sockets), total)} ranks on {_a(fab)} fabric{fab_note} "
                      f"(5-40x slower): {hint}")
        slow_ofi = [r for r in slow if r.transport is Transport.OFI]
        if slow_ofi:
            provs = ",".join(sorted({r.provider or "?" for r in slow_ofi}))
            want = "cxi" if fabric is Fabric.SLINGSHOT else "verbs"
            self.warn("ofi-slow-provider",
                      f"libfabric used provider {provs}, not {want}, on "
                      f"{_frac(len(slow_ofi), total)} ranks on {_a(fab)} fabric{fab_note}: "
                      "check FI_PROVIDER and the host libfabric/libcxi binds")
        if fabric is Fabric.SLINGSHOT:
            missing = [p for p in self.all_procs if p.plugin_missing and not p.plugin
                       and not p.plugin_version and p.report().transport is not Transport.OFI]
            if missing:
                line = _most_common(p.plugin_missing for p in missing)
                self.warn("plugin-missing",
                          f"NCCL found no net plugin on {len(missing)} process(es) "
                          f"({line!r}): on Slingshot NCCL needs aws-ofi-nccl "
                          "(libnccl-net.so / NCCL_NET_PLUGIN) to use the cxi NICs")
        if fabric is Fabric.INFINIBAND:
            nodev = [r for r in ranks if r.ib_no_device]
            if nodev:
                self.warn("ib-no-device",
                          f"NET/IB : No device found on {_frac(len(nodev), total)} ranks on an "
                          "infiniband fabric: rdma-core/libmlx5 missing in the image, or "
                          "/dev/infiniband not visible")
        if a._ibverbs_no_driver:
            where = f" (on {', '.join(a._ibverbs_hosts)})" if a._ibverbs_hosts else ""
            self.warn("ibverbs-no-driver",
                      "libibverbs: no userspace device-specific driver found"
                      f"{where}: the image lacks the verbs provider (ibverbs-providers / "
                      "libmlx5); NCCL cannot use InfiniBand and drops to TCP")
        kinds = Counter(_kind(r) for r in with_t)
        if len(kinds) > 1:
            parts = ", ".join(f"{k} on {_frac(n, total)}" for k, n in
                              sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))
            self.warn("mixed-transports", f"ranks use different transports: {parts} ranks")
        ll128_guard = self._ll128_guard()
        vt = _version_tuple(nccl_version)
        on_cxi = [r for r in with_t if r.transport is Transport.OFI and (
            _ofi_base_provider(r.provider) == "cxi"
            or (r.provider is None and fabric is Fabric.SLINGSHOT))]
        hazard = (bool(on_cxi) and vt[:2] >= _LL128_MIN_VERSION and ll128_guard is None
                  and not single)  # one node: no NIC path, no hazard
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
        if fabric is Fabric.SLINGSHOT:
            noprov = [r for r in with_t if r.transport is Transport.OFI and not r.provider]
            if noprov:
                self.warn("provider-unknown",
                          f"no 'NET/OFI Selected provider is ...' line on "
                          f"{_frac(len(noprov), total)} ranks: cannot confirm the cxi provider")
        if fabric in (Fabric.SLINGSHOT, Fabric.INFINIBAND):
            fast_chan = [r for r in with_t if is_fast(r) and r.net_channels]
            if fast_chan and not any(r.gdrdma for r in fast_chan):
                self.warn("no-gdrdma",
                          "no 'via NET/.../GDRDMA' channel: GPUDirect RDMA is not used "
                          "(check NCCL_NET_GDR_LEVEL, e.g. PHB)")
        unknown = sorted({n for p in self.all_procs for n in p.unknown_nets})
        if unknown:
            self.warn("unknown-network",
                      "NCCL used a network this check does not know: " + ", ".join(unknown))
        no_t = [r for r in ranks if r.transport is Transport.NONE]
        if with_t and no_t:
            self.warn("ranks-without-transport",
                      f"{len(no_t)} of {len(ranks)} processes printed no network selection "
                      f"(e.g. {no_t[0].who}); the log may be cut short")
        if world and len(ranks) < world:
            self.warn("ranks-missing",
                      f"the log shows {len(ranks)} of {world} ranks; verdict covers those only")
        if not with_t and fabric in (Fabric.SLINGSHOT, Fabric.INFINIBAND):
            self.warn("no-transport",
                      f"no NCCL network selection in {self._source()}: cannot confirm the "
                      f"{fab} fast path (run with NCCL_DEBUG=INFO)")

        summary = self._summary(
            verdict=verdict, transport=transport, with_t=with_t, total=total, slow=slow,
            failed=failed, fabric=fabric, fab_note=fab_note, nccl_version=nccl_version,
            plugin=plugin, plugin_version=plugin_version, hazard=hazard, single=single)
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
        )

    def _source(self) -> str:
        s = self.a._sources or [self.a.source]
        return s[0] if len(s) == 1 else f"{s[0]} (+{len(s) - 1} more)"

    def _summary(self, *, verdict, transport, with_t, total, slow, failed, fabric, fab_note,
                 nccl_version, plugin, plugin_version, hazard, single) -> str:
        fab = fabric.value if fabric else None
        details = []
        if nccl_version:
            details.append(f"NCCL {nccl_version}")
        if plugin_version:
            details.append(f"aws-ofi-nccl {plugin_version}")
        elif plugin:
            details.append(f"plugin {plugin}")
        detail = f" ({', '.join(details)})" if details else ""
        kinds = Counter(_kind(r) for r in with_t)

        def top(rs) -> tuple[str, int]:
            c = Counter(r.label for r in rs)
            label, _ = max(c.items(), key=lambda kv: (kv[1], kv[0]))
            return label, sum(1 for r in rs if r.label == label)

        if verdict is Verdict.FAILED:
            reason = _most_common(r.failure for r in failed) or "network init failed"
            return (f"fabrikit: ERROR NCCL network init failed on {_frac(len(failed), total)} "
                    f"ranks: {reason}{detail}")
        if verdict is Verdict.NONE:
            base = f"no NCCL network selection seen in {self._source()}"
            if fabric in (Fabric.SLINGSHOT, Fabric.INFINIBAND):
                return (f"fabrikit: WARNING {base}: cannot confirm the {fab} fast path "
                        "(run with NCCL_DEBUG=INFO)")
            return f"fabrikit: {base} (single node, or NCCL_DEBUG=INFO not set)"
        if verdict is Verdict.SINGLE_NODE:
            label, n = top(with_t)
            return (f"fabrikit: single node: NCCL network not used (selected {label} on "
                    f"{_frac(n, total)} ranks){detail}")
        if len(kinds) > 1:
            parts = ", ".join(f"{k} on {_frac(n, total)}" for k, n in
                              sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))
            tail = (f": fallback on {len(slow)} ranks on {_a(fab)} fabric{fab_note}"
                    if slow else "")
            return f"fabrikit: WARNING mixed transports: {parts} ranks{tail}"
        label, n = top(with_t)
        if verdict is Verdict.FALLBACK:
            if transport is Transport.SOCKET:
                why = f"NCCL fell back to TCP sockets on {_a(fab)} fabric{fab_note} (5-40x slower)"
            else:
                want = "cxi" if fabric is Fabric.SLINGSHOT else "InfiniBand"
                why = (f"NCCL did not use the {want} fast path on {_a(fab)} fabric{fab_note} "
                       "(5-40x slower)")
            return f"fabrikit: WARNING transport {label} on {_frac(n, total)} ranks: {why}"
        if hazard:
            return (f"fabrikit: WARNING transport {label} on {_frac(n, total)} ranks{detail}: "
                    "NCCL >= 2.27 on Slingshot without NCCL_PROTO=^LL128: all-reduce can "
                    "return wrong results on GH200")
        note = ""
        if transport is Transport.SOCKET and fabric is None:
            note = " [no --fabric given: cannot tell whether this is a fallback]"
        return f"fabrikit: transport {label} on {_frac(n, total)} ranks{detail}{note}"
