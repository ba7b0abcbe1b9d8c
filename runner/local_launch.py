"""The local backend: N torchrun agents on this machine, each one a simulated "node".

The agents join one c10d rendezvous on 127.0.0.1 (node 1 hosts the store), exactly as the
nodes of a Slurm job join the head node's. Output of every node is streamed with a
`[nodeK]` prefix and kept in `nodeK.log` in the run directory.

Failure handling is the point of this module: if any agent exits non-zero, the others are
stopped at once and the run fails with a line naming the node; Ctrl-C or SIGTERM stops every
agent and every worker. Each agent leads its own process group and carries a marker
variable, so its workers are found and stopped even if the agent itself was killed and they
were re-parented.

`plan()` is pure: what it needs from this machine (a free rendezvous port, the GPUs, the
environment, the CPU count, which bind sources exist) is found by the caller and handed in.
The launch itself comes from `runner.launch`, the same description the Slurm script renders.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import IO

from . import run_dir as rundir
from .errors import RuntimeFailure, UserError
from .gpus import GpuSplit, VisibleGpus, split
from .launch import LaunchSpec, describe
from .process_control import Interrupts, stop
from .request import LaunchRequest
from .run_dir import RunDirPlan
from .shell import Slot, Value, argv, assignments, join, value_word

MARKER = "FABRIKIT_LOCAL_AGENT"
STOP_GRACE_S = 10.0
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class Agent:
    node: int  # 1-based
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]  # variables set on top of the caller's environment
    cwd: str  # the launch description's working directory (the run directory)


@dataclass(frozen=True)
class LocalPlan:
    request: LaunchRequest
    run: RunDirPlan
    port: int
    agents: tuple[Agent, ...]
    gpus: GpuSplit | None = None  # each node's GPUs; None: no GPU on this machine
    # nvidia-smi sampling the nodes' GPUs into gpu-<host>.csv beside the logs, as the Slurm
    # script's monitor does: `fabrikit report` plots it. None: no NVIDIA GPU is used.
    gpu_sampler: tuple[str, ...] | None = None

    @property
    def run_dir(self) -> Path:
        return self.run.path

    def describe(self) -> str:
        """What --dry-run prints: the exact commands, one block per node."""
        out = [f"# fabrikit local run: {len(self.agents)} node(s) x {self.request.nproc_per_node} process(es), "
               f"rendezvous {LOOPBACK}:{self.port}, run directory {self.run_dir}"]
        if self.gpus is not None and self.gpus.note:
            out.append(f"# {self.gpus.note}")
        for agent in self.agents:
            out.append(f"# node{agent.node} (in {agent.cwd})\nenv {assignments(agent.env)} \\\n  {join(agent.argv)}")
        if self.gpu_sampler is not None:
            out.append(f"# GPU sampler, while the nodes run\n{join(self.gpu_sampler)} > {join([str(self.sampler_csv)])}")
        return "\n".join(out) + "\n"

    @property
    def sampler_csv(self) -> Path:
        """Where the GPU samples go: `gpu-<host>.csv`, the name the Slurm monitor writes."""
        return self.run_dir / f"gpu-{os.uname().nodename}.csv"

    def notes(self) -> list[str]:
        """What --dry-run prints on stderr."""
        return [self.run.describe()]


def free_port(low: int = 20000, high: int = 32767) -> int:
    """A free port BELOW the kernel's ephemeral range (32768+ by default).

    A port the kernel handed out (bind to 0) lies inside that range, where a node's own
    outgoing connections also take their source ports: while node 1 is still importing torch,
    node 2's retried connects to 127.0.0.1:PORT could be given PORT itself as source port and
    connect to themselves, after which node 1 cannot listen on it."""
    import random
    import socket

    for port in random.sample(range(low, high + 1), 200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((LOOPBACK, port))
            except OSError:
                continue
            return port
    raise RuntimeFailure(f"no free TCP port in {low}-{high} on {LOOPBACK} for the rendezvous")


def absent_binds(request: LaunchRequest) -> frozenset[str]:
    """Bind sources that do not exist on this machine (for `plan`'s `absent`)."""
    if request.profile.container.runtime == "none":
        return frozenset()
    return frozenset(bind.source for bind in request.binds if not Path(bind.source).exists())


def _values(spec: LaunchSpec, request: LaunchRequest, run_dir: Path, port: int,
            absent: frozenset[str]) -> dict[Slot, Value]:
    """The local backend's binding of the launch's slots (is_host differs per node)."""
    binds = ["--bind", str(run_dir)]
    for bind in spec.binds:
        if bind.source not in absent:
            binds += ["--bind", bind.option]
    return {
        Slot.RUN_DIR: str(run_dir),
        Slot.JOB_ID: run_dir.name,  # the rendezvous id: unique per run directory
        Slot.NODES: str(request.nodes),
        Slot.NPROC: str(request.nproc_per_node),
        Slot.ENDPOINT: f"{LOOPBACK}:{port}",
        Slot.BINDS: tuple(binds),
        Slot.LOCAL_ADDR: (f"--local_addr={LOOPBACK}",),
    }


def plan(request: LaunchRequest, run_dir: Path | RunDirPlan, *, port: int, gpus: VisibleGpus | None = None,
         environ: Mapping[str, str] = MappingProxyType({}), cpu_count: int = 1,
         absent: frozenset[str] = frozenset(), python: str = sys.executable) -> LocalPlan:
    """The agents' commands and environments, from what the caller found on this machine:
    the rendezvous `port` (`free_port`), its `gpus` (runner.gpus.detect), its `environ` (the
    LD_LIBRARY_PATH a job without container extends), `cpu_count`, and the bind sources that
    are `absent` (`absent_binds`). Pure: the same inputs give the same plan.

    The GPUs are shared out so that every node has its own; too few for the ranks, and they
    are hidden so that the job trains on CPU instead of failing in NCCL."""
    run = run_dir if isinstance(run_dir, RunDirPlan) else RunDirPlan(run_dir)
    run = run.adding(bundled_jobs=request.job.bundled)
    spec = describe(request)
    missing = [bind.source for bind in spec.binds if bind.required and bind.source in absent]
    if missing:
        raise UserError(f"bind source {missing[0]} does not exist on this machine")
    values = _values(spec, request, run.path, port, absent)
    env: dict[str, str] = {}
    for var in spec.env:
        value = value_word(var.value, values)
        old = environ.get(var.name) if var.prepend else None
        env[var.name] = f"{value}:{old}" if old else value
    threads = max(1, cpu_count // (request.nodes * request.nproc_per_node))
    env.setdefault(spec.env_name("OMP_NUM_THREADS"), str(threads))
    # Without a container, torchrun is this interpreter's: the one fabrikit was installed with.
    torchrun = None if spec.in_container else ((python,), ("-m",), ("torch.distributed.run",))
    gpu_split = split(gpus, request.nodes, request.nproc_per_node)
    agents = []
    for node in range(1, request.nodes + 1):
        node_values = {**values, Slot.IS_HOST: f",is_host={1 if node == 1 else 0}"}
        node_env = {**env, MARKER: f"{run.path}:{node}"}
        if gpu_split is not None:
            node_env[spec.env_name(gpu_split.variable)] = gpu_split.per_node[node - 1]
        agents.append(Agent(node=node, argv=tuple(argv(spec.argv(torchrun), node_values)),
                            env=tuple(node_env.items()), cwd=value_word(spec.workdir, node_values)))
    return LocalPlan(request=request, run=run, port=port, agents=tuple(agents), gpus=gpu_split,
                     gpu_sampler=gpu_split.sampler() if gpu_split is not None else None)


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


def _stop(running: list[_Running]) -> None:
    """SIGTERM every agent's process group, then SIGKILL whatever is left after a grace:
    the agents and every process carrying their marker (workers, even re-parented ones)."""
    stop([r.proc for r in running], [(signal.SIGTERM, STOP_GRACE_S)], send=lambda proc, sig: os.killpg(proc.pid, sig))
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


def preflight(p: LocalPlan) -> None:
    """Everything that can refuse the run, checked before anything is written."""
    runtime = p.request.profile.container.runtime
    if runtime != "none":
        from .apptainer import check_no_eval

        check_no_eval(runtime, required=True)  # the job runs here: the runtime must keep values literal
    rundir.preflight(p.run)


def execute(p: LocalPlan) -> int:
    """Preflight, write the run directory, run the agents; return 0 if every node succeeded,
    else raise with the failing node."""
    preflight(p)
    rundir.write(p.run)
    print(f"fabrikit: {p.request.nodes} local node(s) x {p.request.nproc_per_node} process(es); "
          f"run directory {p.run_dir}", file=sys.stderr, flush=True)
    with Interrupts() as interrupts:
        return _run_agents(p, interrupts)


def _run_agents(p: LocalPlan, interrupts: Interrupts) -> int:
    """Start every agent, stream their output, stop them all on a failure or a signal."""
    lock = threading.Lock()
    running: list[_Running] = []
    if p.gpus is not None:  # the nodes' GPUs, or the one line saying why they are not used
        print(f"fabrikit: {p.gpus.note or p.gpus.summary()}", file=sys.stderr, flush=True)
    sampler = _start_sampler(p)
    try:
        for agent in p.agents:
            env = {**os.environ, **dict(agent.env)}
            log = open(p.run_dir / f"node{agent.node}.log", "ab")
            try:
                proc = subprocess.Popen(agent.argv, env=env, cwd=agent.cwd, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
            except OSError as exc:
                log.close()
                _stop(running)
                raise RuntimeFailure(f"node{agent.node}: cannot start {agent.argv[0]}: {exc.strerror}") from None
            r = _Running(agent=agent, proc=proc, log=log)
            r.pump = threading.Thread(target=_pump, args=(r, lock), daemon=True)
            r.pump.start()
            running.append(r)
        failed: _Running | None = None
        while not interrupts.signum:
            states = [(r, r.proc.poll()) for r in running]
            failed = next((r for r, rc in states if rc not in (None, 0)), None)
            if failed is not None or all(rc == 0 for _, rc in states):
                break
            time.sleep(0.1)
        if interrupts.signum:
            name = interrupts.name
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
        if sampler is not None:
            stop([sampler], [(signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, STOP_GRACE_S)])


def _start_sampler(p: LocalPlan) -> subprocess.Popen[bytes] | None:
    """Start the GPU sampler, if the plan has one. A sampler that cannot start costs the
    report its GPU plot, not the run: one line says so."""
    if p.gpu_sampler is None:
        return None
    try:
        with open(p.sampler_csv, "ab") as out:
            return subprocess.Popen(p.gpu_sampler, stdout=out, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
    except OSError as exc:
        print(f"fabrikit: no GPU utilisation samples: cannot start {p.gpu_sampler[0]}: {exc.strerror}",
              file=sys.stderr, flush=True)
        return None
