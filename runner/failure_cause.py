"""Name the cause of a failed job from its combined log, in one line.

A broken multi-node job prints hundreds of lines from every rank, srun and torchrun; the
user needs the first cause, not the last symptom. The rules are ordered from most to least
specific; each one recognises a message that srun, slurmstepd, torchrun or fabrikit itself
prints (formats as they appear in Slurm 22.05+ and torch 2.x).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:  # (the analysis is loaded only where a job step checks its transport)
    from runner.nccl_log import RankReport

_LABEL = re.compile(r"^\s*\d+: ")  # srun --label prefix
_SRUN_TASK = re.compile(r"srun: error: (?P<node>[\w.-]+): task (?P<task>\d+): (?P<what>.+)$")
_ROOT_HOST = re.compile(r"^\s*host\s*:\s*(?P<host>\S+)")
_ROOT_RANK = re.compile(r"^\s*rank\s*:\s*(?P<rank>\d+)")
_ROOT_EXIT = re.compile(r"^\s*exitcode\s*:\s*(?P<code>-?\d+)")
_TIME_LIMIT = re.compile(r"\*\*\* (?:JOB|STEP) [\d.]+ ON (?P<node>\S+) CANCELLED AT \S+ DUE TO TIME LIMIT")
_CANCELLED = re.compile(r"\*\*\* (?:JOB|STEP) [\d.]+ ON (?P<node>\S+) CANCELLED AT \S+(?: DUE TO (?P<why>[A-Z ]+))?")
_NODE_FAIL = re.compile(r"(?:DUE TO NODE FAILURE|Node (?P<node>\S+) not responding|NODE_FAIL)")
_PORT_IN_USE = re.compile(r"(?:errno: 98|EADDRINUSE|Address already in use)")
_RDZV_TIMEOUT = re.compile(r"RendezvousTimeoutError|rendezvous.*timed out|timed out.*rendezvous", re.I)
_RDZV_CONN = re.compile(r"RendezvousConnectionError|The connection to the C10d store has failed")
_NET_NOT_FOUND = re.compile(r"NCCL WARN Error: network (?P<net>.+?) not found")
_SIGNAL_STOP = re.compile(r"fabrikit-train: stopping on signal (?P<sig>\w+) at step (?P<step>\d+)")
_BIND_MISSING = re.compile(r"fabrikit: FAILED: bind source missing on (?P<node>\S+): (?P<paths>.+)$")


def _signal_name(code: int) -> str:
    import signal

    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


class Cause(msgspec.Struct, frozen=True):
    kind: str  # stable code: task-failed, time-limit, port-in-use, rendezvous-timeout, ...
    message: str
    node: str | None = None


def from_nccl(status: int, ranks: Iterable["RankReport"]) -> Cause | None:
    """The cause NCCL's analysis of the log (runner.nccl_log) names, for where the log's own
    lines name none: a link that broke while the job ran on it (a rank's link_error), else
    an init that failed within a node (a rank's local_failure: shared memory, P2P, NVLS)."""
    ranks = list(ranks)
    r = next((r for r in ranks if r.link_error), None)
    if r is not None:
        return Cause("link-failed", f"the job step exited with status {status} after a link "
                     f"broke on {r.host}: {r.link_error[:120]}", r.host)
    r = next((r for r in ranks if r.local_failure), None)
    if r is not None:
        return Cause("init-failed-in-node", f"the job step exited with status {status} after "
                     f"NCCL init failed within the node {r.host}: {r.local_failure[:120]}",
                     r.host)
    return None


def diagnose(lines: Iterable[str], *, status: int, endpoint: str | None = None) -> Cause | None:
    """The most specific cause found in the log of a job step that exited with `status`.

    A step that exited 0 has no cause, whatever noise its log holds (torchrun's exit barrier,
    for one, logs connection resets when the store's host leaves first)."""
    if status == 0:
        return None
    # srun reports task ends in the order they happen, and --kill-on-bad-exit kills the
    # others only after the first failure: the first report names the node that broke.
    first_task: tuple[str, str, str] | None = None
    roots: list[dict[str, str]] = []  # torchrun's "Root Cause (first observed failure)" blocks
    seen: dict[str, re.Match[str]] = {}
    rules = (("bind", _BIND_MISSING), ("limit", _TIME_LIMIT), ("nodefail", _NODE_FAIL), ("port", _PORT_IN_USE),
             ("rdzv_timeout", _RDZV_TIMEOUT), ("rdzv_conn", _RDZV_CONN), ("netnotfound", _NET_NOT_FOUND),
             ("signal", _SIGNAL_STOP), ("cancelled", _CANCELLED))
    for raw in lines:
        line = _LABEL.sub("", raw.rstrip("\n"))
        for key, pattern in rules:
            if key not in seen:
                match = pattern.search(line)
                if match:
                    seen[key] = match
        task = _SRUN_TASK.search(line)
        if task and first_task is None:
            first_task = (task.group("node"), task.group("task"), task.group("what").strip())
        if "Root Cause (first observed failure)" in line:
            roots.append({})
        elif roots:
            for name, pattern in (("host", _ROOT_HOST), ("rank", _ROOT_RANK), ("code", _ROOT_EXIT)):
                match = pattern.match(line)
                if match and name not in roots[-1]:
                    roots[-1][name] = match.group(name)
    if "bind" in seen:
        m = seen["bind"]
        return Cause("bind-missing", f"bind source missing on {m.group('node')}: {m.group('paths')}", m.group("node"))
    if "limit" in seen:
        stop = seen.get("signal")
        saved = f"; training stopped at step {stop.group('step')} with a checkpoint" if stop else ""
        return Cause("time-limit", f"time limit reached on {seen['limit'].group('node')}{saved}", seen["limit"].group("node"))
    if "signal" in seen and status != 0:
        m = seen["signal"]
        return Cause("signal-stop", f"training stopped on {m.group('sig')} at step {m.group('step')} and saved a checkpoint "
                     "(resume with --resume or requeue)")
    if "nodefail" in seen:
        node = seen["nodefail"].groupdict().get("node")
        return Cause("node-failure", f"node failure{f' ({node})' if node else ''}", node)
    if "port" in seen:
        where = f" ({endpoint})" if endpoint else ""
        return Cause("port-in-use", f"rendezvous port already in use{where}")
    if "rdzv_timeout" in seen:
        return Cause("rendezvous-timeout", f"rendezvous timed out waiting for all nodes at {endpoint or 'the endpoint'}")
    if "rdzv_conn" in seen:
        return Cause("rendezvous-unreachable", f"could not reach the rendezvous store at {endpoint or 'the endpoint'}")
    if "netnotfound" in seen:
        return Cause("nccl-network-missing", f"NCCL network '{seen['netnotfound'].group('net')}' not found "
                     "(plugin missing or not loadable in the container)")
    # A worker killed by a signal is the fault; the other nodes' failures follow from it.
    killed = [r for r in roots if r.get("code", "").startswith("-") and "host" in r]
    if killed:
        r = killed[0]
        name = _signal_name(int(r["code"]))
        return Cause("task-failed", f"rank {r.get('rank', '?')} on node {r['host']} was killed by {name}; "
                     "the other nodes stopped after it", r["host"])
    if first_task is not None:
        node, task, what = first_task
        root = next((r for r in roots if r.get("host") == node and "rank" in r), None)
        rank = f", rank {root['rank']}" if root else ""
        verb = "was killed" if what in ("Killed", "Terminated") else "failed first"
        return Cause("task-failed", f"task {task} on node {node} {verb} ({what}{rank}); the other nodes "
                     "were stopped after it", node)
    if roots and "host" in roots[0]:
        r = roots[0]
        return Cause("task-failed", f"rank {r.get('rank', '?')} on {r['host']} failed first "
                     f"(exit code {r.get('code', '?')})", r["host"])
    if "cancelled" in seen:
        m = seen["cancelled"]
        why = (m.group("why") or "").strip().lower()
        return Cause("cancelled", f"job cancelled{f' due to {why}' if why else ''}", m.group("node"))
    if status != 0:
        return Cause("unknown", f"the job step exited with status {status}; no known cause in the log")
    return None
