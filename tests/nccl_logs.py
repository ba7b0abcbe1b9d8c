"""Build synthetic NCCL_DEBUG=INFO logs for the tests of runner.nccl_log.

Every line is written here from the line formats listed in
shared/reference/fabric-facts.md ("NCCL_DEBUG=INFO lines that tell which transport is used",
the aws-ofi-nccl section) and NCCL's prefix format (`host:pid:tid [cudaDev] NCCL INFO msg`,
`host:pid:tid [cudaDev] file.cc:line [(func)] NCCL WARN msg`). No third-party log is copied.

A rank's log is a list of lines (no newline at the end). Helpers add launcher prefixes,
interleave several ranks with a fixed seed, cut lines, and write files with CRLF / ANSI /
non-UTF-8 noise.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Callable, Iterable, Sequence

DEFAULT_CUDA = "12.6"


def _vt(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("+")[0].split(".")[:3])


# --------------------------------------------------------------------------------------------
# Messages (the text after "NCCL INFO " / "NCCL WARN ")


def version_msg(nccl: str, cuda: str = DEFAULT_CUDA) -> str:
    return f"NCCL version {nccl}+cuda{cuda}"


def plugin_missing(nccl_version: str) -> str:
    """The 'no net plugin' line as the given NCCL version prints it."""
    v = _vt(nccl_version)[:2]
    if v <= (2, 18):
        return "NET/Plugin : No plugin found, using internal implementation"
    if v < (2, 23):
        return "NET/Plugin: No plugin found (libnccl-net.so)"
    if v < (2, 27):
        return "NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin."
    return "NET/Plugin: Could not find: libnccl-net.so"


def net_not_found(name: str = "AWS Libfabric") -> str:
    return f"Error: network {name} not found."


def env_echo(key: str, value: str) -> str:
    return f"{key} set by environment to {value}"


def comm_msgs(rank: int, nranks: int, dev: int, nccl: str, nnodes: int, local_ranks: int,
              comm: int = 0x55D0C0DE0000) -> list[str]:
    """Init START/COMPLETE lines (and nNodes line where the version prints it)."""
    c = f"0x{comm + rank * 0x100:x}"
    busid = f"{(dev + 1) * 0x1000:x}"
    if _vt(nccl)[:2] < (2, 19):
        return [f"comm {c} rank {rank} nranks {nranks} cudaDev {dev} busId {busid} - Init COMPLETE"]
    return [
        f"ncclCommInitRank comm {c} rank {rank} nranks {nranks} cudaDev {dev} nvmlDev {dev} "
        f"busId {busid} commId 0x1234abcd5678ef00 - Init START",
        f"comm {c} rank {rank} nRanks {nranks} nNodes {nnodes} localRanks {local_ranks} "
        f"localRank {dev} MNNVL 0",
        f"ncclCommInitRank comm {c} rank {rank} nranks {nranks} cudaDev {dev} nvmlDev {dev} "
        f"busId {busid} commId 0x1234abcd5678ef00 - Init COMPLETE",
    ]


def channel_msgs(rank: int, nranks: int, dev: int, net: str | None, gpn: int,
                 gdr: bool = True, count: int = 2) -> list[str]:
    """Channel lines: via NET/<net>/<idx>[/GDRDMA] across nodes, via P2P/IPC inside one."""
    out = []
    peer = (rank + gpn) % nranks
    for ch in range(count):
        if net is None or peer == rank:
            local_peer = rank - dev + (dev + 1) % gpn
            out.append(f"Channel {ch:02d}/0 : {rank}[{dev}] -> {local_peer}[{(dev + 1) % gpn}] "
                       "via P2P/IPC")
        else:
            suffix = "/GDRDMA" if gdr else ""
            out.append(f"Channel {ch:02d}/0 : {peer}[{dev}] -> {rank}[{dev}] [receive] "
                       f"via NET/{net}/{dev}{suffix}")
            out.append(f"Channel {ch:02d}/0 : {rank}[{dev}] -> {peer}[{dev}] [send] "
                       f"via NET/{net}/{dev}{suffix}")
    return out


# --------------------------------------------------------------------------------------------
# Lines with NCCL's own prefix


def info(host: str, pid: int, dev: int, msg: str, tid: int | None = None) -> str:
    return f"{host}:{pid}:{tid if tid is not None else pid} [{dev}] NCCL INFO {msg}"


def warn(host: str, pid: int, dev: int, msg: str, *, where: str = "plugin/net.cc:123",
         func: str | None = None, timestamp: str | None = None) -> list[str]:
    """A WARN line; NCCL writes an empty line before it. Newer NCCL adds `(func)` and a
    timestamp by default."""
    ts = f"[{timestamp}] " if timestamp else ""
    fn = f" ({func})" if func else ""
    return ["", f"{ts}{host}:{pid}:{pid} [{dev}] {where}{fn} NCCL WARN {msg}"]


def _rank_lines(host: str, pid: int, rank: int, nranks: int, dev: int | None, msgs: Sequence[str],
                *, gpn: int, nccl: str, nnodes: int | None, comm: bool,
                proxy_tid: bool = True) -> list[str]:
    d = rank % gpn if dev is None else dev
    nn = nnodes if nnodes is not None else max(1, nranks // gpn)
    out = [info(host, pid, d, m) for m in msgs]
    if comm:
        out += [info(host, pid, d, m)
                for m in comm_msgs(rank, nranks, d, nccl, nn, min(gpn, nranks))]
    return out


def _common_head(rank: int, nccl: str, version_line: bool | None, env: dict[str, str] | None,
                 bootstrap_iface: str) -> list[str]:
    msgs = []
    if version_line or (version_line is None and rank == 0):
        msgs.append(version_msg(nccl))
    msgs.append("cudaDriverVersion 12060")
    msgs.append(f"Bootstrap : Using {bootstrap_iface}:10.100.0.{rank % 250 + 1}<0>")
    for k, v in (env or {}).items():
        msgs.append(env_echo(k, v))
    return msgs


def ofi_cxi_rank(host: str, pid: int, rank: int, nranks: int, nccl: str = "2.23.4",
                 plugin: str = "1.6.0", current_plugin_format: bool = False, *,
                 net_name: str = "AWS Libfabric", provider: str = "cxi",
                 ofi_fabric: str | None = None, nics: int | None = None,
                 libfabric: str = "1.22", plugin_api: str = "v6", gdr: bool = True,
                 env: dict[str, str] | None = None, gpn: int = 4, dev: int | None = None,
                 nnodes: int | None = None, version_line: bool | None = None,
                 channels: bool = True, comm: bool = True,
                 missing_first: bool = False) -> list[str]:
    """A rank that uses aws-ofi-nccl. `current_plugin_format` switches to the current
    plugin's lines (Initializing ..., Using Libfabric version, 'provider is X, fabric is Y')."""
    msgs = _common_head(rank, nccl, version_line, env, "hsn0")
    if missing_first:  # e.g. NCCL_NET_PLUGIN=ofi tried first, then libnccl-net.so loaded
        msgs.append(plugin_missing(nccl).replace("libnccl-net.so", "libnccl-net-ofi.so"))
    msgs.append(f"NET/Plugin: Loaded net plugin {net_name} ({plugin_api})")
    if current_plugin_format:
        msgs.append(f"NET/OFI Initializing aws-ofi-nccl {plugin}")
        msgs.append(f"NET/OFI Using Libfabric version {libfabric}")
        msgs.append(f"NET/OFI Selected provider is {provider}, fabric is {ofi_fabric or provider} "
                    f"(found {nics if nics is not None else 4} nics)")
    else:
        msgs.append(f"NET/OFI Using aws-ofi-nccl {plugin}")
        msgs.append(f"NET/OFI Selected Provider is {provider} "
                    f"(found {nics if nics is not None else 8} nics)")
    msgs.append(f"Using network {net_name}")
    lines = _rank_lines(host, pid, rank, nranks, dev, msgs, gpn=gpn, nccl=nccl, nnodes=nnodes,
                        comm=comm)
    if channels:
        d = rank % gpn if dev is None else dev
        multi = (nnodes if nnodes is not None else nranks // gpn) > 1
        lines += [info(host, pid, d, m, tid=pid + 7) for m in
                  channel_msgs(rank, nranks, d, net_name if multi else None, gpn, gdr)]
    return lines


def ofi_efa_rank(host: str, pid: int, rank: int, nranks: int, nccl: str = "2.23.4",
                 plugin: str = "1.13.2-aws", **kw) -> list[str]:
    kw.setdefault("provider", "efa")
    return ofi_cxi_rank(host, pid, rank, nranks, nccl, plugin, **kw)


def ib_rank(host: str, pid: int, rank: int, nranks: int, nccl: str = "2.21.5", *,
            devices: Sequence[str] = ("mlx5_0:1", "mlx5_1:1"), link: str = "IB",
            oob: str = "ib0", net_name: str = "IB", gdr: bool = True,
            env: dict[str, str] | None = None, gpn: int = 4, dev: int | None = None,
            nnodes: int | None = None, version_line: bool | None = None,
            channels: bool = True, comm: bool = True) -> list[str]:
    msgs = _common_head(rank, nccl, version_line, env, oob)
    msgs.append(plugin_missing(nccl))
    devs = " ".join(f"[{i}]{d}/{link}" for i, d in enumerate(devices))
    msgs.append(f"NET/IB : Using {devs} [RO]; OOB {oob}:10.100.0.{rank % 250 + 1}<0>")
    msgs.append(f"Using network {net_name}")
    lines = _rank_lines(host, pid, rank, nranks, dev, msgs, gpn=gpn, nccl=nccl, nnodes=nnodes,
                        comm=comm)
    if channels:
        d = rank % gpn if dev is None else dev
        multi = (nnodes if nnodes is not None else nranks // gpn) > 1
        lines += [info(host, pid, d, m, tid=pid + 7) for m in
                  channel_msgs(rank, nranks, d, net_name if multi else None, gpn, gdr)]
    return lines


def socket_rank(host: str, pid: int, rank: int, nranks: int, nccl: str = "2.23.4", *,
                iface: str | Sequence[str] = "hsn0", with_plugin_missing: bool = True,
                ib_no_device: bool = True, env: dict[str, str] | None = None, gpn: int = 4,
                dev: int | None = None, nnodes: int | None = None,
                version_line: bool | None = None, channels: bool = True,
                comm: bool = True) -> list[str]:
    ifaces = [iface] if isinstance(iface, str) else list(iface)
    msgs = _common_head(rank, nccl, version_line, env, ifaces[0])
    if with_plugin_missing:
        msgs.append(plugin_missing(nccl))
    if ib_no_device:
        msgs.append("NET/IB : No device found.")
    used = " ".join(f"[{i}]{name}:10.250.0.{153 + i + rank % 50}<0>"
                    for i, name in enumerate(ifaces))
    msgs.append(f"NET/Socket : Using {used}")
    msgs.append("Using network Socket")
    lines = _rank_lines(host, pid, rank, nranks, dev, msgs, gpn=gpn, nccl=nccl, nnodes=nnodes,
                        comm=comm)
    if channels:
        d = rank % gpn if dev is None else dev
        multi = (nnodes if nnodes is not None else nranks // gpn) > 1
        lines += [info(host, pid, d, m, tid=pid + 7) for m in
                  channel_msgs(rank, nranks, d, "Socket" if multi else None, gpn, gdr=False)]
    return lines


def failed_rank(host: str, pid: int, rank: int, nranks: int, nccl: str = "2.23.4", *,
                name: str = "AWS Libfabric", gpn: int = 4, dev: int | None = None,
                timestamp: str | None = None, func: str | None = None,
                version_line: bool | None = None) -> list[str]:
    """NCCL_NET names a network whose plugin is absent: NCCL warns and init fails."""
    d = rank % gpn if dev is None else dev
    msgs = _common_head(rank, nccl, version_line, {"NCCL_NET": name}, "hsn0")
    msgs.append(plugin_missing(nccl))
    lines = [info(host, pid, d, m) for m in msgs]
    lines += warn(host, pid, d, net_not_found(name), timestamp=timestamp, func=func)
    return lines


def ib_no_device_only(host: str, pid: int, rank: int, nranks: int, nccl: str = "2.21.5",
                      gpn: int = 4) -> list[str]:
    d = rank % gpn
    msgs = _common_head(rank, nccl, None, None, "eth0")
    msgs += [plugin_missing(nccl), "NET/IB : No device found."]
    return [info(host, pid, d, m) for m in msgs]


# --------------------------------------------------------------------------------------------
# Jobs: several ranks over several nodes


RankFn = Callable[..., list[str]]


def job(rank_fn: RankFn, nodes: int = 2, gpn: int = 4, host_fmt: str = "nid{:06d}",
        pid0: int = 40000, **kw) -> list[list[str]]:
    """One list of lines per rank; rank r runs on node r // gpn with local device r % gpn."""
    nranks = nodes * gpn
    streams = []
    for r in range(nranks):
        host = host_fmt.format(1000 + r // gpn)
        streams.append(rank_fn(host, pid0 + 17 * r, r, nranks, gpn=gpn, **kw))
    return streams


def rank_host(rank: int, gpn: int = 4, host_fmt: str = "nid{:06d}") -> str:
    return host_fmt.format(1000 + rank // gpn)


OUTER_STYLES = ("none", "srun", "torchrun", "rank", "slurm_node", "fabrikit", "stacked")


def outer_prefix(lines: Iterable[str], style: str, *, rank: int, gpn: int = 4,
                 host: str | None = None) -> list[str]:
    """Add the prefix a launcher writes in front of each line."""
    node, local = rank // gpn, rank % gpn
    host = host or rank_host(rank, gpn)
    pre = {
        "none": "",
        "srun": f"{node}: ",
        "torchrun": f"[default{local}]:",
        "rank": f"[rank{rank}]:",
        "slurm_node": f"{host} [{local}]: ",
        "fabrikit": f"[{host}] ",
        "stacked": f"{node}: [default{local}]:",
    }[style]
    return [pre + line for line in lines]


def interleave(streams: Sequence[Sequence[str]], seed: int) -> list[str]:
    """Merge streams at random (seeded), keeping each stream's own order."""
    rng = random.Random(seed)
    pos = [0] * len(streams)
    live = [i for i, s in enumerate(streams) if s]
    out: list[str] = []
    while live:
        i = rng.choice(live)
        out.append(streams[i][pos[i]])
        pos[i] += 1
        if pos[i] == len(streams[i]):
            live.remove(i)
    return out


def cut_merge(lines: Sequence[str], seed: int, rate: float = 0.1) -> list[str]:
    """Simulate two writers sharing a stream: some lines lose their tail and the next line
    follows on the same line; the lost tail shows up on its own line later."""
    rng = random.Random(seed)
    out: list[str] = []
    pending: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if i + 1 < len(lines) and len(line) > 4 and rng.random() < rate:
            at = rng.randrange(1, len(line) - 1)
            out.append(line[:at] + lines[i + 1])
            pending.append(line[at:])
            i += 2
            continue
        out.append(line)
        if pending and rng.random() < 0.5:
            out.append(pending.pop(0))
        i += 1
    return out + pending


def cut_tail(lines: Sequence[str], chars: int) -> list[str]:
    """The log ends mid-line: keep `chars` characters of the last line."""
    if not lines:
        return []
    return [*lines[:-1], lines[-1][:chars]]


def ansi(line: str) -> str:
    return f"\x1b[32m{line[:10]}\x1b[0m{line[10:]}\x1b[0m"


def to_bytes(lines: Iterable[str], *, crlf: bool = False, colour: bool = False,
             bad_bytes: bool = False, final_newline: bool = True) -> bytes:
    """Join lines into a file body; optional CRLF, ANSI colour codes and invalid UTF-8."""
    nl = b"\r\n" if crlf else b"\n"
    parts = []
    for i, line in enumerate(lines):
        b = (ansi(line) if colour and line else line).encode("utf-8")
        if bad_bytes and i % 5 == 0:
            b = b"\xff\xfe\xc3" + b  # invalid UTF-8 in a launcher's own output
        parts.append(b)
    body = nl.join(parts)
    return body + nl if final_newline and parts else body


def write_log(path: Path, lines: Iterable[str], **kw) -> Path:
    path.write_bytes(to_bytes(lines, **kw))
    return path
