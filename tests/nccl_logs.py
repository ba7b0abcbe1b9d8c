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
import zlib
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

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


def host_ip(host: str, net: int = 100) -> str:
    """The address of `host` (every process of one machine bootstraps from the same one, as
    NCCL does: it takes the first interface that matches, on every rank alike)."""
    n = zlib.crc32(host.encode())
    return f"10.{net}.{n % 250}.{n // 250 % 250 + 1}"


def _common_head(host: str, rank: int, nccl: str, version_line: bool | None,
                 env: dict[str, str] | None, bootstrap_iface: str) -> list[str]:
    msgs = []
    if version_line or (version_line is None and rank == 0):
        msgs.append(version_msg(nccl))
    msgs.append("cudaDriverVersion 12060")
    msgs.append(f"Bootstrap : Using {bootstrap_iface}:{host_ip(host)}<0>")
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
    msgs = _common_head(host, rank, nccl, version_line, env, "hsn0")
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
    msgs = _common_head(host, rank, nccl, version_line, env, oob)
    msgs.append(plugin_missing(nccl))
    devs = " ".join(f"[{i}]{d}/{link}" for i, d in enumerate(devices))
    msgs.append(f"NET/IB : Using {devs} [RO]; OOB {oob}:{host_ip(host)}<0>")
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
    msgs = _common_head(host, rank, nccl, version_line, env, ifaces[0])
    if with_plugin_missing:
        msgs.append(plugin_missing(nccl))
    if ib_no_device:
        msgs.append("NET/IB : No device found.")
    used = " ".join(f"[{i}]{name}:{host_ip(host, 250 - i)}<0>" for i, name in enumerate(ifaces))
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
    msgs = _common_head(host, rank, nccl, version_line, {"NCCL_NET": name}, "hsn0")
    msgs.append(plugin_missing(nccl))
    lines = [info(host, pid, d, m) for m in msgs]
    lines += warn(host, pid, d, net_not_found(name), timestamp=timestamp, func=func)
    return lines


def ib_no_device_only(host: str, pid: int, rank: int, nranks: int, nccl: str = "2.21.5",
                      gpn: int = 4) -> list[str]:
    d = rank % gpn
    msgs = _common_head(host, rank, nccl, None, None, "eth0")
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


# --------------------------------------------------------------------------------------------
# Formats met in the field (fabric-facts.md, "Real-world NCCL logs"). Written from the facts
# listed there; no third-party log is copied.


def _ip(rank: int, gpn: int, net: int = 100) -> str:
    return f"10.{net}.0.{rank // gpn % 250 + 1}"


def legacy_rank(host: str, pid: int, rank: int, nranks: int, nccl: str = "2.4.8", *,
                net: str = "IB", gpn: int = 4, dev: int | None = None, iface: str = "ib0",
                devices: Sequence[str] = ("mlx5_0:1",), provider: str = "efa",
                ring: bool = True, version_line: bool | None = None,
                nnodes: int | None = None, complete: bool = True) -> list[str]:
    """A rank of NCCL 2.2 to 2.17, in that version's words.

    2.2-2.3: `NET : Using interface`, `NET/IB : Using interface X for sideband
    communication`, one `NET/IB: [n] dev/IB` line per device, `Using internal Network X`,
    `rank N nranks M`, ring lines `Ring 00 : a -> b via NET/X/0`.
    2.4-2.6: a `NET/Socket : Using [0]iface` bootstrap line on every rank whatever the data
    path, no `Using network` line, ring lines (2.4 `a -> b`, 2.5+ `a[bus] -> b[bus]`).
    2.7-2.11: `Using network X`, `Channel 00 : a[bus] -> b[bus] [receive] via NET/X/0`.
    2.12-2.17: `Channel 00/0 : ...`. `net` is IB, Socket or "AWS Libfabric"."""
    v = _vt(nccl)[:2]
    d = rank % gpn if dev is None else dev
    multi = (nnodes if nnodes is not None else nranks // gpn) > 1
    ip = _ip(rank, gpn)
    msgs: list[str] = []
    ofi = net in ("AWS Libfabric", "Libfabric", "OFI")
    if v <= (2, 3):
        msgs.append(f"NET : Using interface {iface}:{ip}<0>")
        if net == "IB":
            msgs.append(f"NET/IB : Using interface {iface} for sideband communication")
            msgs += [f"NET/IB: [{i}] {x}/IB" for i, x in enumerate(devices)]
            msgs.append("Using internal Network IB")
        elif ofi:
            msgs += ["NET/OFI Selected Provider is " + provider, f"Using network {net}"]
        else:
            msgs += ["NET/IB : No device found.", "NET/Socket : 1 interfaces found",
                     "Using internal Network Socket"]
        msgs.append(f"rank {rank} nranks {nranks}")
    else:
        msgs.append(f"NET/Socket : Using [0]{iface}:{ip}<0>")  # 2.4-2.6: bootstrap, every rank
        if ofi:
            msgs += [f"NET/Plugin: Loaded net plugin {net} (v2)",
                     f"NET/OFI Selected Provider is {provider}"]
        else:
            msgs.append("NET/Plugin : No plugin found (libnccl-net.so).")
            if net == "IB":
                devs = " ".join(f"[{i}]{x}/IB" for i, x in enumerate(devices))
                msgs.append(f"NET/IB : Using {devs} ; OOB {iface}:{ip}<0>")
            else:
                msgs.append("NET/IB : No device found.")
        if v >= (2, 7):
            msgs.append(f"Using network {net}")
    lines = [info(host, pid, d, m) for m in msgs]
    if version_line or (version_line is None and rank == 0):
        lines.insert(1, f"NCCL version {nccl}+cuda10.1")  # printed without NCCL's prefix
    peer = (rank + gpn) % nranks
    chan = []
    if ring:
        for ch in range(2):
            for a, b, way in ((peer, rank, "receive"), (rank, peer, "send")):
                if not multi:
                    chan.append(f"Ring {ch:02d} : {rank}[{d}] -> {rank - d + (d + 1) % gpn}"
                                f"[{(d + 1) % gpn}] via P2P/IPC")
                    break
                if v <= (2, 4):
                    head, ends = f"Ring {ch:02d}", f"{a} -> {b}"
                    ways = "" if v <= (2, 3) else f" [{way}]"
                elif v <= (2, 6):
                    head, ends, ways = f"Ring {ch:02d}", f"{a}[{d}000] -> {b}[{d}000]", f" [{way}]"
                elif v <= (2, 11):
                    head, ends, ways = f"Channel {ch:02d}", f"{a}[{d}000] -> {b}[{d}000]", f" [{way}]"
                else:
                    head, ends, ways = f"Channel {ch:02d}/0", f"{a}[{d}] -> {b}[{d}]", f" [{way}]"
                chan.append(f"{head} : {ends}{ways} via NET/{net}/0")
    lines += [info(host, pid, d, m, tid=pid + 7) for m in chan]
    if complete:
        if v <= (2, 3):
            lines.append(info(host, pid, d, f"comm 0x7f00{rank:04x} rank {rank} nranks {nranks}"))
        else:
            lines.append(info(host, pid, d, f"comm 0x7f00{rank:04x} rank {rank} nranks {nranks} "
                                            f"cudaDev {d} nvmlDev {d} - Init COMPLETE"))
    return lines


def plugin_rank(host: str, pid: int, rank: int, nranks: int, nccl: str = "2.21.5", *,
                plugin: str, net_name: str, device_line: str | None = None, gpn: int = 4,
                dev: int | None = None, nnodes: int | None = None, channels: bool = True,
                gdr: bool = True) -> list[str]:
    """A rank whose net plugin is not aws-ofi-nccl: `NCCL RDMA Plugin` with IBext (verbs,
    SHARP), Google's FastSocket (TCP), UCX."""
    d = rank % gpn if dev is None else dev
    msgs = _common_head(host, rank, nccl, None, None, "eth0")
    msgs.append(f"NET/Plugin: Loaded net plugin {plugin}")
    if device_line:
        msgs.append(device_line.format(ip=_ip(rank, gpn)))
    msgs += ["Using non-device net plugin version 0", f"Using network {net_name}"]
    lines = _rank_lines(host, pid, rank, nranks, d, msgs, gpn=gpn, nccl=nccl, nnodes=nnodes,
                        comm=True)
    if channels:
        multi = (nnodes if nnodes is not None else nranks // gpn) > 1
        lines += [info(host, pid, d, m, tid=pid + 7) for m in
                  channel_msgs(rank, nranks, d, net_name if multi else None, gpn, gdr)]
    return lines


def ofi_fails_then(host: str, pid: int, rank: int, nranks: int, nccl: str = "2.21.5", *,
                   then: str = "Socket", why: str = "Couldn't open CQ. RC: -22, ERROR: Invalid "
                   "argument", provider: str = "efa", gpn: int = 4, iface: str = "eth0",
                   libfabric_lines: bool = True) -> list[str]:
    """The OFI plugin loads, fails during its own init on this rank, and NCCL goes on with
    its internal IB or Socket transport (a fallback, not a failure)."""
    d = rank % gpn
    out = [info(host, pid, d, m) for m in _common_head(host, rank, nccl, None, None, iface)]
    out.append(info(host, pid, d, "NET/Plugin: Loaded net plugin AWS Libfabric (v8)"))
    out.append(info(host, pid, d, "NET/OFI Initializing aws-ofi-nccl 1.11.0"))
    if libfabric_lines:
        out.append(f"libfabric:{pid}:1732779731::{provider}:cq:{provider}_cq_open():92<warn> "
                   "Unable to create extended CQ: Cannot allocate memory")
    out += warn(host, pid, d, f"NET/OFI {why}", where="nccl_ofi_ofiutils_init_connection:274")
    out += warn(host, pid, d, "NET/OFI aws-ofi-nccl initialization failed",
                where="nccl_net_ofi_create_plugin:259")
    out += warn(host, pid, d, "NET/OFI Initializing plugin failed", where="nccl_net_ofi_init:155")
    if then == "IB":
        out.append(info(host, pid, d, f"NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB {iface}:"
                                      f"{_ip(rank, gpn)}<0>"))
    else:
        out.append(info(host, pid, d, "NET/IB : No device found."))
        out.append(info(host, pid, d, f"NET/Socket : Using [0]{iface}:{_ip(rank, gpn)}<0>"))
    out.append(info(host, pid, d, "Using non-device net plugin version 0"))
    out.append(info(host, pid, d, f"Using network {then}"))
    out += [info(host, pid, d, m) for m in comm_msgs(rank, nranks, d, nccl, nranks // gpn, gpn)]
    out += [info(host, pid, d, m, tid=pid + 7)
            for m in channel_msgs(rank, nranks, d, then, gpn, gdr=then == "IB")]
    return out


def ofi_verbs_then_ib(host: str, pid: int, rank: int, nranks: int, nccl: str = "2.27.5", *,
                      gpn: int = 4) -> list[str]:
    """The OFI plugin loads with a `verbs;ofi_rxm` provider, errors out, and NCCL assigns
    its internal IB plugin to the communicator."""
    d = rank % gpn
    out = [info(host, pid, d, m) for m in _common_head(host, rank, nccl, None, None, "ib0")]
    out.append(info(host, pid, d, "NET/Plugin: Loaded net plugin Libfabric (v9)"))
    out.append(info(host, pid, d, "NET/OFI Initializing aws-ofi-nccl 1.14.0"))
    out.append(info(host, pid, d, "NET/OFI Selected provider is verbs;ofi_rxm, fabric is "
                                  "IB-0xfe80000000000000 (found 1 nics)"))
    out += warn(host, pid, d, "NET/OFI Unable to find a protocol that worked. Failing "
                "initialization.", where="nccl_net_ofi_create_plugin:300")
    out.append(info(host, pid, d, "plugin/net.cc:118 -> 2"))
    out.append(info(host, pid, d, "Failed to initialize NET plugin Libfabric"))
    out.append(info(host, pid, d, f"NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB ib0:{_ip(rank, gpn)}<0>"))
    out.append(info(host, pid, d, "Initialized NET plugin IB"))
    out.append(info(host, pid, d, "Assigned NET plugin IB to comm"))
    out.append(info(host, pid, d, "Using network IB"))
    out += [info(host, pid, d, m) for m in comm_msgs(rank, nranks, d, nccl, nranks // gpn, gpn)]
    out += [info(host, pid, d, m, tid=pid + 7) for m in channel_msgs(rank, nranks, d, "IB", gpn)]
    return out


# Failures after a transport was chosen: (WARN where, WARN text, chain files) per transport.
INIT_FAILURES = {
    "ib-create-cq": ("IB", "misc/ibvwrap.cc:268", "Call to ibv_create_cq failed",
                     ("transport/net_ib.cc:611", "transport/net.cc:288", "init.cc:1142")),
    "ib-modify-qp": ("IB", "misc/ibvwrap.cc:187", "Call to ibv_modify_qp failed with error "
                     "No such device", ("transport/net_ib.cc:849", "transport/net.cc:698",
                                        "proxy.cc:1328")),
    "socket-wrong-type": ("Socket", "misc/socket.cc:441", "socketFinalizeAccept: wrong type "
                          "4 != 3", ("misc/socket.cc:492", "transport/net_socket.cc:420",
                                     "transport/net.cc:305", "init.cc:1203")),
    "ofi-open-av": ("AWS Libfabric", "create_nccl_ofi_component:459", "NET/OFI Couldn't open "
                    "AV. RC: -22, ERROR: Invalid argument", ("include/net.h:24",
                                                           "transport/net.cc:291",
                                                           "init.cc:627")),
    "socket-family": ("Socket", "misc/socket.cc:373", "Net : Socket creation failed : Address "
                      "family not supported", ("transport/net_socket.cc:331",
                                               "transport/net.cc:288", "init.cc:1142")),
}


def failing_rank(host: str, pid: int, rank: int, nranks: int, case: str, *,
                 nccl: str = "2.18.5", gpn: int = 4, async_thread: bool = True) -> list[str]:
    """A rank that chose a transport (Using network, channel lines) and then failed during
    init: a WARN and an error chain up to init.cc/group.cc, no `Init COMPLETE`."""
    net, where, text, chain = INIT_FAILURES[case]
    d = rank % gpn
    if net == "IB":
        lines = ib_rank(host, pid, rank, nranks, nccl, gpn=gpn, comm=False)
    elif net == "Socket":
        lines = socket_rank(host, pid, rank, nranks, nccl, iface="eth0", gpn=gpn, comm=False)
    else:
        lines = ofi_efa_rank(host, pid, rank, nranks, nccl, gpn=gpn, comm=False)
    head = [m for m in comm_msgs(rank, nranks, d, nccl, nranks // gpn, gpn)
            if "Init COMPLETE" not in m]
    lines = lines[:4] + [info(host, pid, d, m) for m in head] + lines[4:]
    suffix = ".cu" if _vt(nccl)[:2] <= (2, 3) else ""
    lines += warn(host, pid, d, text, where=where.replace(".cc", suffix or ".cc"))
    for f in chain:
        lines.append(info(host, pid, d, f"{f.replace('.cc', suffix or '.cc')} -> 2"))
    if async_thread:
        lines.append(info(host, pid, d, "group.cc:64 -> 2 [Async thread]"))
    return lines


def single_host_job(n: int = 8, host: str = "dgx01", pid0: int = 500, *, nccl: str = "2.23.4",
                    iface: str = "lo", one_process: bool = False, plugin: bool = True,
                    nnodes_line: bool = False) -> list[list[str]]:
    """All ranks on one host, printing network lines anyway: one process driving `n` GPUs
    (`one_process`), or `n` processes (`mpirun -H localhost:n`, NCCL_SOCKET_IFNAME=lo)."""
    streams = []
    for r in range(n):
        pid = pid0 if one_process else pid0 + r
        msgs = _common_head(host, r, nccl, None, {"NCCL_SOCKET_IFNAME": iface}, iface)
        if plugin:
            msgs += ["NET/Plugin: Loaded net plugin AWS Libfabric (v6)",
                     "NET/OFI Using aws-ofi-nccl 1.6.0",
                     "NET/OFI Selected Provider is cxi (found 8 nics)",
                     "Using network AWS Libfabric"]
        else:
            ip = "127.0.0.1" if iface == "lo" else "10.1.1.1"
            msgs += [plugin_missing(nccl), "NET/IB : No device found.",
                     f"NET/Socket : Using [0]{iface}:{ip}<0>", "Using network Socket"]
        lines = [info(host, pid, r, m) for m in msgs]
        if nnodes_line:
            lines += [info(host, pid, r, m) for m in comm_msgs(r, n, r, nccl, 1, n)]
        else:
            lines.append(info(host, pid, r, f"comm 0x5500{r:02x} rank {r} nranks {n} cudaDev {r} "
                                            "busId 1000 - Init COMPLETE"))
        lines += [info(host, pid, r, m, tid=pid + 7) for m in channel_msgs(r, n, r, None, n)]
        streams.append(lines)
    return streams


def rccl_rank(host: str, pid: int, rank: int, nranks: int, rccl: str = "2.18.3", *,
              net: str = "AWS Libfabric", provider: str = "cxi", gpn: int = 8,
              new_banner: bool = False, nnodes: int | None = None) -> list[str]:
    """An RCCL rank (ROCm): `RCCL version` line, librccl-net plugin lines, aws-ofi-rccl's
    NET/OFI lines, UCX or internal IB/Socket, channel lines with RCCL's `comm` suffix."""
    d = rank % gpn
    out = []
    if rank == 0:
        if new_banner:  # RCCL >= 2.20 prints a block without NCCL's prefix
            out += [f"RCCL version : {rccl}-HEAD:9a0e6a1", "HIP version  : 6.2.41134-",
                    "ROCm version : 6.2.4.0-139", f"Hostname     : {host}"]
        else:
            out.append(info(host, pid, d, f"RCCL version {rccl}+hip6.0 HEAD:8a3b5c1"))
    out.append(info(host, pid, d, f"Bootstrap : Using hsn0:{_ip(rank, gpn)}<0>"))
    if net in _OFI_NETS:
        out += [info(host, pid, d, f"NET/Plugin: Loaded net plugin {net} (v6)"),
                info(host, pid, d, "NET/OFI Using aws-ofi-rccl 1.4.0"),
                info(host, pid, d, f"NET/OFI Selected Provider is {provider} (found 4 nics)")]
    elif net == "UCX":
        out += [info(host, pid, d, "NET/Plugin: Loaded net plugin NCCL RDMA Plugin (v5)"),
                info(host, pid, d, f"NET/UCX : Using [0]mlx5_0:1/IB ; OOB ib0:{_ip(rank, gpn)}<0>")]
    else:
        out += [info(host, pid, d, "NET/Plugin: No plugin found (librccl-net.so)"),
                info(host, pid, d, "NET/Plugin: Using internal network plugin."),
                info(host, pid, d, f"NET/Socket : Using [0]hsn0:{_ip(rank, gpn)}<0>")]
    out.append(info(host, pid, d, f"Using network {net}"))
    nn = nnodes if nnodes is not None else max(1, nranks // gpn)
    out += [info(host, pid, d, m) for m in comm_msgs(rank, nranks, d, "2.18.3", nn, gpn)]
    comm = f" comm 0x{0x2aaf44000c00 + rank:x} nRanks {nranks:02d}"
    out += [info(host, pid, d, m + comm, tid=pid + 7) for m in
            channel_msgs(rank, nranks, d, net if nn > 1 else None, gpn)]
    return out


_OFI_NETS = ("AWS Libfabric", "Libfabric", "OFI")


# --------------------------------------------------------------------------------------------
# Line shapes


def ompi_tag(lines: Iterable[str], rank: int, stream: str = "stdout") -> list[str]:
    """Open MPI `--tag-output`: `[jobid,rank]<stdout>:`."""
    return [f"[1,{rank}]<{stream}>:{x}" for x in lines]


def cloudwatch(lines: Iterable[str], t0: int = 0) -> list[str]:
    """A CloudWatch console export: `  | 2024-12-04T05:27:39.074Z | line`."""
    out = []
    for i, x in enumerate(lines):
        ms = t0 + i
        out.append(f"  | 2024-12-04T05:27:{39 + ms // 1000 % 20:02d}.{ms % 1000:03d}Z | {x}")
    return out


def strip_prefix(lines: Iterable[str], keep_dev: bool = False, keep_level: bool = True) -> list[str]:
    """What reporters paste: `host:pid:tid` removed (optionally `[dev]` kept), and
    optionally `NCCL INFO` removed too."""
    import re as _re

    pat = _re.compile(r"^[^\s:\[\]]*:\d+:\d+ (\[\d+\]) (.*?NCCL (?:INFO|WARN) )")
    out = []
    for x in lines:
        m = pat.match(x)
        if not m:
            out.append(x)
            continue
        level = m.group(2) if keep_level else ""
        if not keep_level and "WARN" in m.group(2):
            level = m.group(2)  # a WARN keeps its word
        head = f"{m.group(1)} " if keep_dev else ""
        out.append(head + level + x[m.end():])
    return out


def redact(lines: Iterable[str], hosts: Mapping[str, str]) -> list[str]:
    """Replace host names (a reporter hiding them: `<cluster_name>`, `nodea_ip`)."""
    out = []
    for x in lines:
        for h, r in hosts.items():
            x = x.replace(h, r)
        out.append(x)
    return out


def trace_timestamps(lines: Iterable[str]) -> list[str]:
    """NCCL_DEBUG=TRACE: a time stamp and `file:line` before the level, plus TRACE lines."""
    import re as _re

    pat = _re.compile(r"^(\S+:\d+:\d+ \[\d+\]) NCCL INFO ")
    out = []
    for i, x in enumerate(lines):
        m = pat.match(x)
        if m:
            out.append(f"{m.group(1)} {1000.5 + i:.6f} init.cc:{100 + i} NCCL INFO {x[m.end():]}")
            if i % 3 == 0:
                out.append(f"{m.group(1)} {1000.7 + i:.6f} ncclCommInitRank:{200 + i} NCCL TRACE "
                           f"comm {i} done")
        else:
            out.append(x)
    return out


OMPI_HELP = [
    "--------------------------------------------------------------------------",
    "WARNING: There was an error initializing an OpenFabrics device.",
    "",
    "  Local host:   worker-7",
    "  Local device: mlx5_0",
    "--------------------------------------------------------------------------",
]


def app_noise(i: int) -> str:
    return f"Epoch 0 step {i}: loss=2.{i % 97:02d} lr=0.001 (rank printing 0->1 done)"
