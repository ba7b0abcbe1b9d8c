"""The local backend: N torchrun agents on this machine, each one a simulated "node".

The agents join one c10d rendezvous on 127.0.0.1 (node 1 hosts the store), exactly as the
nodes of a Slurm job join the head node's. Output of every node is streamed with a
`[nodeK]` prefix and kept in `nodeK.log` in the run directory.

Failure handling is the point of this module: if any agent exits non-zero, the others are
stopped at once and the run fails with a line naming the node; Ctrl-C or SIGTERM stops every
agent and every worker. Each agent leads its own process group and carries a marker
variable, so its workers are found and stopped even if the agent itself was killed and they
were re-parented.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from .container_env import LD_PREPEND, LD_WRAPPER, NO_EVAL_FLAG, env_prefix, job_environment
from .errors import RuntimeFailure, UserError
from .gpus import GpuSplit, VisibleGpus, split
from .request import LaunchRequest
from .shell import expand, quote

MARKER = "FABRIKIT_LOCAL_AGENT"
STOP_GRACE_S = 10.0


@dataclass(frozen=True)
class Agent:
    node: int  # 1-based
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]  # variables set on top of the caller's environment


@dataclass(frozen=True)
class LocalPlan:
    request: LaunchRequest
    run_dir: Path
    port: int
    agents: tuple[Agent, ...]
    gpus: GpuSplit | None = None  # each node's GPUs; None: no GPU on this machine

    def describe(self) -> str:
        """What --dry-run prints: the exact commands, one block per node."""
        out = [f"# fabrikit local run: {len(self.agents)} node(s) x {self.request.nproc_per_node} process(es), "
               f"rendezvous 127.0.0.1:{self.port}, run directory {self.run_dir}"]
        if self.gpus is not None and self.gpus.note:
            out.append(f"# {self.gpus.note}")
        for agent in self.agents:
            env = " ".join(f"{name}={quote(value)}" for name, value in agent.env)
            out.append(f"# node{agent.node}\nenv {env} \\\n  {' '.join(quote(a) for a in agent.argv)}")
        return "\n".join(out) + "\n"


def free_port(low: int = 20000, high: int = 32767) -> int:
    """A free port BELOW the kernel's ephemeral range (32768+ by default).

    A port the kernel handed out (bind to 0) lies inside that range, where a node's own
    outgoing connections also take their source ports: while node 1 is still importing torch,
    node 2's retried connects to 127.0.0.1:PORT could be given PORT itself as source port and
    connect to themselves, after which node 1 cannot listen on it."""
    import random

    for port in random.sample(range(low, high + 1), 200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeFailure(f"no free TCP port in {low}-{high} on 127.0.0.1 for the rendezvous")


def plan(request: LaunchRequest, run_dir: Path, port: int | None = None,
         gpus: VisibleGpus | None = None) -> LocalPlan:
    """The agents' commands and environments. ``gpus`` (detected by the caller, see
    runner.gpus) are shared out so that every node has its own; too few for the ranks, and
    they are hidden so that the job trains on CPU instead of failing in NCCL."""
    profile = request.profile
    runtime = profile.container.runtime
    port = port or free_port()
    values = {"run_dir": str(run_dir), "job_id": run_dir.name}
    job_argv = [expand(request.job.script, values), *(expand(a, values) for a in request.job.args)]
    env: dict[str, str] = {}
    threads = max(1, (os.cpu_count() or 1) // (request.nodes * request.nproc_per_node))
    for name, value, template in job_environment(request):
        value = expand(value, values) if template else value
        env[f"{env_prefix(runtime)}{name}" if runtime != "none" else name] = value
    if runtime == "none":
        prepend = env.pop(LD_PREPEND, None)
        if prepend:
            old = os.environ.get("LD_LIBRARY_PATH")
            env["LD_LIBRARY_PATH"] = f"{prepend}:{old}" if old else prepend
        env.setdefault("OMP_NUM_THREADS", str(threads))
        env["FABRIKIT_RUN_DIR"] = str(run_dir)
        torchrun = [sys.executable, "-m", "torch.distributed.run"]
        prefix: list[str] = []
    else:
        p = env_prefix(runtime)
        env.setdefault(f"{p}OMP_NUM_THREADS", str(threads))
        env[f"{p}FABRIKIT_RUN_DIR"] = str(run_dir)
        torchrun = list(profile.launcher.torchrun)
        prefix = [runtime, "exec", NO_EVAL_FLAG]
        if profile.container.gpu_flag != "none":
            prefix.append(profile.container.gpu_flag)
        prefix += ["--bind", str(run_dir)]
        for bind in request.binds:
            if Path(bind.source).exists():
                prefix += ["--bind", f"{bind.source}:{bind.target or bind.source}:{'ro' if bind.readonly else 'rw'}"]
            elif bind.required:
                raise UserError(f"bind source {bind.source} does not exist on this machine")
        prefix += [profile.container.image or "", "/bin/sh", "-c", LD_WRAPPER, "fabrikit-ld"]
    gpu_split = split(gpus, request.nodes, request.nproc_per_node)
    agents = []
    for node in range(1, request.nodes + 1):
        rdzv_conf = (f"join_timeout={request.join_timeout_s},read_timeout={profile.launcher.read_timeout_s},"
                     f"is_host={1 if node == 1 else 0}")
        argv = [
            *prefix,
            *torchrun,
            f"--nnodes={request.nodes}",
            f"--nproc_per_node={request.nproc_per_node}",
            f"--rdzv_id={values['job_id']}",
            "--rdzv_backend=c10d",
            f"--rdzv_endpoint=127.0.0.1:{port}",
            f"--rdzv_conf={rdzv_conf}",
            f"--max_restarts={profile.launcher.max_restarts}",
            "--local_addr=127.0.0.1",
            *job_argv,
        ]
        node_env = {**env, MARKER: f"{run_dir}:{node}"}
        if gpu_split is not None:
            name = gpu_split.variable if runtime == "none" else f"{env_prefix(runtime)}{gpu_split.variable}"
            node_env[name] = gpu_split.per_node[node - 1]
        agents.append(Agent(node=node, argv=tuple(argv), env=tuple(node_env.items())))
    return LocalPlan(request=request, run_dir=run_dir, port=port, agents=tuple(agents), gpus=gpu_split)


@dataclass
class _Running:
    agent: Agent
    proc: subprocess.Popen[bytes]
    log: IO[bytes]
    pump: threading.Thread = field(init=False)


def _marked_pids(marker_value: str) -> list[int]:
    """PIDs whose environment carries our marker (agents, workers, even re-parented ones)."""
    needle = f"{MARKER}={marker_value}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if needle in fh.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def _stop(running: list[_Running], reason_sig: int = signal.SIGTERM) -> None:
    """SIGTERM every agent's process group, then SIGKILL whatever is left after a grace."""
    for r in running:
        if r.proc.poll() is None:
            try:
                os.killpg(r.proc.pid, reason_sig)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + STOP_GRACE_S
    while time.monotonic() < deadline and any(r.proc.poll() is None for r in running):
        time.sleep(0.1)
    for r in running:
        pids = _marked_pids(dict(r.agent.env)[MARKER])
        if r.proc.poll() is None:
            pids.append(r.proc.pid)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        r.proc.wait()


def _pump(r: _Running, lock: threading.Lock) -> None:
    prefix = f"[node{r.agent.node}] ".encode()
    assert r.proc.stdout is not None
    for line in iter(r.proc.stdout.readline, b""):
        r.log.write(line)
        r.log.flush()
        with lock:
            sys.stdout.buffer.write(prefix + line)
            sys.stdout.buffer.flush()


def execute(p: LocalPlan) -> int:
    """Run the agents; return 0 if every node succeeded, else raise with the failing node."""
    lock = threading.Lock()
    running: list[_Running] = []
    stop_signal: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        stop_signal.append(signum)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    if p.gpus is not None:  # the nodes' GPUs, or the one line saying why they are not used
        print(f"fabrikit: {p.gpus.note or p.gpus.summary()}", file=sys.stderr, flush=True)
    try:
        for agent in p.agents:
            env = {**os.environ, **dict(agent.env)}
            log = open(p.run_dir / f"node{agent.node}.log", "ab")
            try:
                proc = subprocess.Popen(agent.argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, start_new_session=True)
            except OSError as exc:
                log.close()
                _stop(running)
                raise RuntimeFailure(f"node{agent.node}: cannot start {agent.argv[0]}: {exc.strerror}") from None
            r = _Running(agent=agent, proc=proc, log=log)
            r.pump = threading.Thread(target=_pump, args=(r, lock), daemon=True)
            r.pump.start()
            running.append(r)
        failed: _Running | None = None
        while not stop_signal:
            states = [(r, r.proc.poll()) for r in running]
            failed = next((r for r, rc in states if rc not in (None, 0)), None)
            if failed is not None or all(rc == 0 for _, rc in states):
                break
            time.sleep(0.1)
        if stop_signal:
            name = signal.Signals(stop_signal[0]).name
            print(f"fabrikit: {name} received: stopping all {len(running)} agents", file=sys.stderr, flush=True)
            _stop(running)
            raise RuntimeFailure(f"run interrupted by {name}; logs in {p.run_dir}")
        if failed is not None:
            rc = failed.proc.returncode
            how = f"was killed by {signal.Signals(-rc).name}" if rc < 0 else f"exited with status {rc}"
            print(f"fabrikit: node{failed.agent.node} (agent pid {failed.proc.pid}) {how}; "
                  "stopping the other nodes", file=sys.stderr, flush=True)
            _stop(running)
            raise RuntimeFailure(f"node{failed.agent.node} failed ({how}); see {p.run_dir / f'node{failed.agent.node}.log'}")
        return 0
    finally:
        if any(r.proc.poll() is None for r in running):
            _stop(running)
        for r in running:
            r.pump.join(timeout=5)
            r.log.close()
        for s, handler in previous.items():
            signal.signal(s, handler)
