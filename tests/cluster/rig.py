"""Python side of the fabrikit test cluster (tests/cluster/slurm-netns.sh).

A real multi-node Slurm cluster on one machine: one slurmd per network + UTS namespace
(own hostname, own IP), a private munged, slurmctld in the root namespace. The pytest
fixtures in tests/conftest.py build on this module; nothing here imports pytest.
"""
from __future__ import annotations

import atexit
import fcntl
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "slurm-netns.sh"

TERMINAL_STATES = frozenset({
    "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
    "BOOT_FAIL", "DEADLINE", "PREEMPTED", "SPECIAL_EXIT", "REVOKED",
})
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
NEEDED_TOOLS = ("bash", "ip", "unshare", "setsid", "nsenter", "slurmctld", "slurmd", "scontrol",
                "sinfo", "squeue", "srun", "sbatch", "scancel", "munged", "munge", "unmunge")
DAEMONS = frozenset({"slurmd", "slurmstepd"})


def _which(tool: str) -> str | None:
    return shutil.which(tool, path=os.environ.get("PATH", "") + os.pathsep + SYSTEM_PATH)


def missing_prerequisites() -> list[str]:
    """Why the cluster cannot run on this machine (empty list: it can)."""
    if not sys.platform.startswith("linux"):
        return [f"needs Linux network namespaces (platform is {sys.platform})"]
    if os.geteuid() != 0:
        return ["needs root (ip netns, veth/bridge, unshare --uts)"]
    reasons = []
    missing = [t for t in NEEDED_TOOLS if _which(t) is None]
    if missing:
        reasons.append(f"missing tools: {' '.join(missing)} (tools/ci-install.sh installs them: "
                       "slurmctld slurmd slurm-client munge iproute2 util-linux)")
    unshare = _which("unshare")
    if unshare:
        try:
            r = subprocess.run([unshare, "--net", "--uts", "true"], capture_output=True, text=True, timeout=20)
            if r.returncode != 0:
                reasons.append("no network/UTS namespace support "
                               f"(`unshare --net --uts true`: {r.stderr.strip() or r.returncode})")
        except (OSError, subprocess.TimeoutExpired) as e:
            reasons.append(f"`unshare --net --uts true` failed: {e}")
    return reasons


@dataclass(frozen=True)
class ClusterSettings:
    """Names and sizes of the test cluster; every field can be overridden by environment."""

    nodes: int = 4
    cpus: int = 4            # advertised per node (the machine may have fewer cores)
    mem_mb: int = 4096       # advertised per node; memory is not a consumable resource (CR_Core)
    base: str = "/tmp/fabrikit-cluster"
    net: str = "10.78.0"
    bridge: str = "fkbr0"
    ns_prefix: str = "fknode"
    veth_prefix: str = "fkv"
    node_prefix: str = "node"
    ctl_name: str = "fkctl"
    ctld_port: int = 6917
    partition: str = "debug"
    oversubscribe: str = "FORCE:2"

    @classmethod
    def from_env(cls, environ: dict | None = None) -> "ClusterSettings":
        env = os.environ if environ is None else environ
        d = cls()

        def get(name, default, conv=str):
            v = env.get(name)
            return default if v in (None, "") else conv(v)

        return cls(
            nodes=get("FABRIKIT_CLUSTER_NODES", d.nodes, int),
            cpus=get("SLURM_NETNS_CPUS", d.cpus, int),
            mem_mb=get("SLURM_NETNS_MEM_MB", d.mem_mb, int),
            base=get("SLURM_NETNS_BASE", d.base),
            net=get("SLURM_NETNS_NET", d.net),
            bridge=get("SLURM_NETNS_BRIDGE", d.bridge),
            ns_prefix=get("SLURM_NETNS_NS_PREFIX", d.ns_prefix),
            veth_prefix=get("SLURM_NETNS_VETH_PREFIX", d.veth_prefix),
            node_prefix=get("SLURM_NETNS_NODE_PREFIX", d.node_prefix),
            ctl_name=get("SLURM_NETNS_CTL_NAME", d.ctl_name),
            ctld_port=get("SLURM_NETNS_CTLD_PORT", d.ctld_port, int),
            partition=get("SLURM_NETNS_PARTITION", d.partition),
            oversubscribe=get("SLURM_NETNS_OVERSUBSCRIBE", d.oversubscribe),
        )

    def script_env(self) -> dict[str, str]:
        return {
            "SLURM_NETNS_CPUS": str(self.cpus),
            "SLURM_NETNS_MEM_MB": str(self.mem_mb),
            "SLURM_NETNS_BASE": self.base,
            "SLURM_NETNS_NET": self.net,
            "SLURM_NETNS_BRIDGE": self.bridge,
            "SLURM_NETNS_NS_PREFIX": self.ns_prefix,
            "SLURM_NETNS_VETH_PREFIX": self.veth_prefix,
            "SLURM_NETNS_NODE_PREFIX": self.node_prefix,
            "SLURM_NETNS_CTL_NAME": self.ctl_name,
            "SLURM_NETNS_CTLD_PORT": str(self.ctld_port),
            "SLURM_NETNS_PARTITION": self.partition,
            "SLURM_NETNS_OVERSUBSCRIBE": self.oversubscribe,
        }


def _clean_env() -> dict[str, str]:
    """os.environ without Slurm job/input variables (pytest may itself run inside a Slurm job)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "SBATCH_", "SALLOC_", "SRUN_", "SLURMD_"))}
    path = env.get("PATH", "")
    missing = [p for p in SYSTEM_PATH.split(":") if p not in path.split(":")]
    env["PATH"] = ":".join([path] + missing) if path else SYSTEM_PATH
    return env


_KV = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=(.*?)(?=\s[A-Za-z][A-Za-z0-9_:/]*=|$)")


def parse_oneliner(line: str) -> dict[str, str]:
    """Parse one `scontrol show ... -o` record (values may contain spaces)."""
    return {m.group(1): m.group(2) for m in _KV.finditer(line.strip())}


@dataclass
class SlurmCluster:
    """A running (or about to run) test cluster. The fixture `slurm_cluster` yields one."""

    settings: ClusterSettings = field(default_factory=ClusterSettings)
    script: Path = SCRIPT
    submitted: list[str] = field(default_factory=list)
    up_seconds: float | None = None
    _up: bool = False
    _lock_fd: int | None = None
    _old_handlers: dict = field(default_factory=dict)

    # ------------------------------------------------------------------ identity
    @property
    def base(self) -> Path:
        return Path(self.settings.base)

    @property
    def conf(self) -> str:
        return str(self.base / "etc" / "slurm.conf")

    @property
    def partition(self) -> str:
        return self.settings.partition

    @property
    def cpus_per_node(self) -> int:
        return self.settings.cpus

    @property
    def nodes(self) -> list[str]:
        return [f"{self.settings.node_prefix}{i}" for i in range(1, self.settings.nodes + 1)]

    @property
    def node_ips(self) -> dict[str, str]:
        return {f"{self.settings.node_prefix}{i}": f"{self.settings.net}.{10 + i}"
                for i in range(1, self.settings.nodes + 1)}

    @property
    def ctl_name(self) -> str:
        return self.settings.ctl_name

    @property
    def ctl_ip(self) -> str:
        return f"{self.settings.net}.1"

    @property
    def log_dir(self) -> Path:
        return self.base / "log"

    @property
    def env(self) -> dict[str, str]:
        """Environment for subprocesses: the caller's, minus Slurm job variables, plus SLURM_CONF."""
        env = _clean_env()
        env["SLURM_CONF"] = self.conf
        return env

    def node_ns(self, name: str) -> str:
        self._check_node(name)
        return f"{self.settings.ns_prefix}{name[len(self.settings.node_prefix):]}"

    def _check_node(self, name: str) -> None:
        if name not in self.node_ips:
            raise ValueError(f"unknown node {name!r}; nodes are {self.nodes}")

    # ------------------------------------------------------------------ life cycle
    def _script(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
        env = _clean_env()
        env.update(self.settings.script_env())
        return subprocess.run(["bash", str(self.script), *args], env=env, capture_output=True,
                              text=True, timeout=timeout)

    def acquire_lock(self, timeout: float = 600, on_wait=None) -> None:
        """Serialise test sessions that would use the same cluster names on this machine."""
        path = f"{self.settings.base}.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + timeout
        warned = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not warned and on_wait is not None:
                    holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
                    on_wait(f"test cluster {self.settings.bridge} is in use by another session "
                            f"(pid {holder or '?'}, lock {path}); waiting up to {timeout:.0f} s")
                    warned = True
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise TimeoutError(f"test cluster lock {path} still held after {timeout:.0f} s")
                time.sleep(1)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd

    def release_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing drops the flock
            self._lock_fd = None

    def up(self, timeout: float = 120) -> float:
        """Start the cluster (cleaning up stale state of a crashed run first). Returns seconds taken."""
        t0 = time.monotonic()
        self._up = True  # from here on, teardown must run
        r = self._script("up", str(self.settings.nodes), timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"slurm-netns.sh up {self.settings.nodes} failed (rc {r.returncode}):\n"
                               f"{r.stdout}\n{r.stderr}")
        self.wait_idle(timeout=30)
        self.up_seconds = time.monotonic() - t0
        return self.up_seconds

    def down(self, timeout: float = 120) -> float:
        t0 = time.monotonic()
        r = self._script("down", timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"slurm-netns.sh down failed (rc {r.returncode}):\n{r.stdout}\n{r.stderr}")
        self._up = False
        return time.monotonic() - t0

    def teardown(self) -> None:
        """Idempotent: down (if up), restore signal handlers, release the lock."""
        try:
            if self._up:
                self.down()
        finally:
            self._restore_signals()
            self.release_lock()

    def install_emergency_teardown(self) -> None:
        """Fallbacks for when pytest's own finalizers do not run.

        SIGTERM/SIGHUP become KeyboardInterrupt (pytest then runs finalizers, as on Ctrl-C);
        atexit tears down a cluster that is still marked up.
        """
        atexit.register(self._atexit)
        for sig in (signal.SIGTERM, signal.SIGHUP):
            try:
                if signal.getsignal(sig) in (signal.SIG_DFL, None):
                    self._old_handlers[sig] = signal.signal(sig, self._on_signal)
            except (ValueError, OSError):  # not the main thread
                pass

    def _on_signal(self, signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    def _restore_signals(self) -> None:
        for sig, old in self._old_handlers.items():
            try:
                signal.signal(sig, old)
            except (ValueError, OSError):
                pass
        self._old_handlers.clear()

    def _atexit(self) -> None:
        if self._up:
            try:
                self.down()
            except Exception as e:  # noqa: BLE001 - last resort, report and go on
                print(f"fabrikit test cluster: emergency teardown failed: {e}", file=sys.stderr)
        self.release_lock()

    def wait_idle(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while True:
            r = self.run(["sinfo", "-h", "-N", "-o", "%N %T"])
            states = dict(line.split()[:2] for line in r.stdout.splitlines() if len(line.split()) >= 2)
            if r.returncode == 0 and all(states.get(n) == "idle" for n in self.nodes):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"nodes not idle after {timeout} s: {states or r.stderr}\n{self.log_tail()}")
            time.sleep(0.2)

    def log_tail(self, lines: int = 20) -> str:
        out = []
        for f in sorted(self.log_dir.glob("*")):
            try:
                out.append(f"--- {f}\n" + "\n".join(f.read_text(errors="replace").splitlines()[-lines:]))
            except OSError:
                pass
        return "\n".join(out)

    # ------------------------------------------------------------------ Slurm clients
    def run(self, argv, *, check: bool = False, timeout: float = 120, env: dict | None = None,
            **kw) -> subprocess.CompletedProcess:
        """Run a command on the host (e.g. a Slurm client) with the cluster's environment."""
        full_env = self.env
        if env:
            full_env.update(env)
        return subprocess.run(list(argv), env=full_env, capture_output=True, text=True,
                              timeout=timeout, check=check, **kw)

    def srun(self, *args: str, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
        return self.run(["srun", *args], timeout=timeout, **kw)

    def sbatch(self, script_path, *args: str, script_args=(), cwd=None, env: dict | None = None,
               timeout: float = 60) -> str:
        """`sbatch --parsable [args...] script_path [script_args...]`; returns the job id.

        `args` are sbatch options (e.g. "-N2", "--output=/tmp/x/%j.out"); they go before the script.
        """
        r = self.run(["sbatch", "--parsable", *args, str(script_path), *map(str, script_args)],
                     cwd=cwd, env=env, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"sbatch failed (rc {r.returncode}): {r.stderr.strip()}")
        job_id = r.stdout.strip().split(";")[0]
        if not job_id.isdigit():
            raise RuntimeError(f"sbatch printed no job id: {r.stdout!r} {r.stderr!r}")
        self.submitted.append(job_id)
        return job_id

    def job_info(self, job_id) -> dict[str, str] | None:
        """`scontrol show job -o` as a dict (JobState, NodeList, StartTime, EndTime, StdOut, ...).

        None if Slurm does not know the job (MinJobAge is 3600 s, so finished jobs stay visible).
        """
        r = self.run(["scontrol", "show", "job", "-o", str(job_id)], timeout=30)
        if r.returncode != 0:
            if "Invalid job id" in r.stderr:
                return None
            raise RuntimeError(f"scontrol show job {job_id} failed: {r.stderr.strip()}")
        line = r.stdout.strip().splitlines()[0] if r.stdout.strip() else ""
        return parse_oneliner(line) if line else None

    def job_state(self, job_id) -> str | None:
        """The job's state (PENDING, RUNNING, COMPLETING, COMPLETED, FAILED, ...), None if unknown."""
        info = self.job_info(job_id)
        return info.get("JobState") if info else None

    def wait(self, job_id, timeout: float = 120, poll: float = 0.2, cancel_on_timeout: bool = True) -> str:
        """Poll until the job is in a terminal state; returns it (e.g. "COMPLETED").

        On timeout the job is cancelled (unless cancel_on_timeout=False) and TimeoutError is raised.
        """
        deadline = time.monotonic() + timeout
        state, errors = None, 0
        while True:
            try:
                state = self.job_state(job_id)
                errors = 0
            except (RuntimeError, subprocess.TimeoutExpired):
                errors += 1
                if errors > 20:
                    raise
            else:
                if state is None:
                    raise RuntimeError(f"job {job_id} is unknown to slurmctld")
                if state in TERMINAL_STATES:
                    return state
            if time.monotonic() > deadline:
                if cancel_on_timeout:
                    self.scancel(job_id)
                raise TimeoutError(f"job {job_id} still {state} after {timeout} s")
            time.sleep(poll)

    def scancel(self, *job_ids) -> None:
        if job_ids:
            self.run(["scancel", *map(str, job_ids)], timeout=30)

    def cancel_all(self) -> None:
        """Cancel every job submitted through sbatch() that is not finished."""
        live = [j for j in self.submitted if (self.job_state(j) or "COMPLETED") not in TERMINAL_STATES]
        self.scancel(*live)

    # ------------------------------------------------------------------ nodes
    def slurmd_pid(self, name: str) -> int | None:
        self._check_node(name)
        try:
            pid = int((self.base / "pids" / f"slurmd-{name}.pid").read_text().strip())
            with open(f"/proc/{pid}/comm") as f:
                return pid if f.read().strip() == "slurmd" else None
        except (OSError, ValueError):
            return None

    def node_argv(self, name: str, argv) -> list[str]:
        """argv prefixed so that it runs "on" the node: its network, hostname and mount view."""
        pid = self.slurmd_pid(name)
        if pid is not None:
            return ["nsenter", f"--target={pid}", "--net", "--uts", "--mount", "--", *argv]
        return ["ip", "netns", "exec", self.node_ns(name), *argv]

    def run_on_node(self, name: str, argv, *, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
        """Run argv on node `name` (outside Slurm), with the cluster environment."""
        return self.run(self.node_argv(name, list(argv)), timeout=timeout, **kw)

    def node_pids(self, name: str) -> list[int]:
        r = subprocess.run(["ip", "netns", "pids", self.node_ns(name)], capture_output=True, text=True)
        return [int(p) for p in r.stdout.split()]

    def kill_on_node(self, name: str, match, sig: int = signal.SIGTERM,
                     include_daemons: bool = False) -> list[int]:
        """Send `sig` to the processes on node `name` whose command line matches.

        `match`: an int PID, or a regex searched in the space-joined command line.
        slurmd/slurmstepd are spared unless include_daemons=True. Returns the PIDs signalled.
        """
        killed = []
        for pid in self.node_pids(name):
            if pid == os.getpid():
                continue
            try:
                with open(f"/proc/{pid}/comm") as f:
                    comm = f.read().strip()
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                continue
            if comm in DAEMONS and not include_daemons:
                continue
            hit = pid == match if isinstance(match, int) else re.search(match, cmd) is not None
            if hit:
                try:
                    os.kill(pid, sig)
                    killed.append(pid)
                except ProcessLookupError:
                    pass
        return killed


# ---------------------------------------------------------------------- Apptainer
MIN_APPTAINER = (1, 2)  # fabrikit renders definition files with {{ }} build args (apptainer >= 1.2)


def find_apptainer() -> tuple[str | None, str]:
    """(path, reason): path of a working apptainer >= 1.2, or None and why not."""
    path = _which("apptainer")
    if path is None:
        return None, "apptainer not found on PATH (tools/install-apptainer.sh installs it)"
    try:
        r = subprocess.run([path, "version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"`{path} version` failed: {e}"
    if r.returncode != 0:
        return None, f"`{path} version` failed (rc {r.returncode}): {r.stderr.strip()[-500:]}"
    m = re.match(r"(\d+)\.(\d+)", r.stdout.strip())
    if not m or (int(m.group(1)), int(m.group(2))) < MIN_APPTAINER:
        return None, f"apptainer {r.stdout.strip()!r} at {path} is older than 1.2"
    return path, ""


def build_tiny_sif(apptainer: str, workdir: Path) -> tuple[Path | None, str]:
    """Build a ~1 MB busybox-only SIF (no %post, so a plain root build works). (path, reason)."""
    busybox = _which("busybox")
    if busybox is None:
        return None, "busybox not found (apt-get install busybox-static)"
    rootfs = workdir / "rootfs"
    for d in ("bin", "usr/bin", "etc", "tmp", "root", "home", "proc", "sys", "dev", "var/tmp"):
        (rootfs / d).mkdir(parents=True, exist_ok=True)
    shutil.copy2(busybox, rootfs / "bin" / "busybox")
    applets = subprocess.run([busybox, "--list"], capture_output=True, text=True).stdout.split()
    for a in applets or ["sh", "hostname", "cat", "echo", "env", "sleep", "ls", "id"]:
        link = rootfs / "bin" / a
        if not link.exists() and a != "busybox":
            link.symlink_to("busybox")
    if not (rootfs / "usr/bin/env").exists():
        (rootfs / "usr/bin/env").symlink_to("../../bin/busybox")
    (rootfs / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (rootfs / "etc/group").write_text("root:x:0:\n")
    sif = workdir / "tiny.sif"
    r = subprocess.run([apptainer, "-q", "build", "--force", str(sif), str(rootfs)],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        return None, f"apptainer build {sif} failed (rc {r.returncode}): {(r.stdout + r.stderr)[-2000:]}"
    r = subprocess.run([apptainer, "exec", str(sif), "sh", "-c", "echo tiny-ok"],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0 or "tiny-ok" not in r.stdout:
        return None, (f"apptainer exec {sif} failed (rc {r.returncode}; a dynamically linked busybox "
                      f"cannot run in it, install busybox-static): {(r.stdout + r.stderr)[-2000:]}")
    return sif, ""
