"""Fixtures for the tests of the in-container jobs (``jobs/``).

The jobs run for real: ``python -m torch.distributed.run --standalone --nproc-per-node 2``
on CPU with gloo, no mocks. ``jobs/`` is put on ``sys.path`` so unit tests can import the
scripts' functions the same way the scripts import ``jobenv``.

Helpers reach the tests as fixtures (``run_job``, ``start_job``, ``fake_cifar10``), not by
``from conftest import``: several conftest.py files share that module name, so which one
such an import finds depends on collection order.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

JOBS_DIR = Path(__file__).resolve().parents[2] / "jobs"
if str(JOBS_DIR) not in sys.path:
    sys.path.insert(0, str(JOBS_DIR))


def job_env(**extra: str) -> dict[str, str]:
    """Environment for a launched job: one thread per worker (2 cores, 2 workers), no
    FABRIKIT_RUN_DIR leaking in from the developer's shell."""
    env = {k: v for k, v in os.environ.items() if k != "FABRIKIT_RUN_DIR"}
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", **extra)
    return env


def torchrun_cmd(script: str, args: list[str], nproc: int = 2) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
            str(JOBS_DIR / script), *args]


def kv(line: str) -> dict[str, str]:
    """``key=value`` pairs of a machine-readable line (anything without ``=`` is ignored)."""
    return dict(tok.split("=", 1) for tok in line.split() if "=" in tok)


@dataclass
class Finished:
    """A finished job: exit status and combined stdout+stderr."""

    returncode: int
    output: str

    def lines(self, prefix: str) -> list[str]:
        """Lines starting with ``prefix`` (rank 0's machine-readable lines)."""
        return [ln for ln in self.output.splitlines() if ln.startswith(prefix)]

    def all(self, prefix: str) -> list[dict[str, str]]:
        """key=value pairs of every line starting with ``prefix``."""
        return [kv(line) for line in self.lines(prefix)]

    def one(self, prefix: str) -> dict[str, str]:
        """key=value pairs of the single line starting with ``prefix``."""
        found = self.lines(prefix)
        assert len(found) == 1, f"expected one {prefix!r} line, got {len(found)}:\n{self.output}"
        return kv(found[0])


def _run_job(script: str, args: list[str], cwd: Path, nproc: int = 2, timeout: float = 120, **env: str) -> Finished:
    """Run a job to completion under torchrun."""
    proc = subprocess.run(torchrun_cmd(script, args, nproc), cwd=cwd, env=job_env(**env), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout)
    return Finished(proc.returncode, proc.stdout)


def child_pids(pid: int) -> list[int]:
    """Direct children of ``pid`` (torchrun's workers), from /proc."""
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                children.append(int(entry.name))
    return children


class RunningJob:
    """A torchrun job started in the background whose output is read line by line, so a
    test can act (send a signal) when a given line appears."""

    def __init__(self, script: str, args: list[str], cwd: Path, nproc: int = 2) -> None:
        self.proc = subprocess.Popen(torchrun_cmd(script, args, nproc), cwd=cwd, env=job_env(), stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._seen: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def wait_for(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        """Block until a line matches ``pattern`` (regex, from the line start)."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                break
            self._seen.append(line)
            if m := re.match(pattern, line):
                return m
        raise AssertionError(f"no line matching {pattern!r} within {timeout}s; output so far:\n{''.join(self._seen)}")

    def worker_pid(self, rank: int) -> int:
        """pid of the worker with ``RANK=<rank>`` (read from its environment)."""
        for pid in child_pids(self.proc.pid):
            try:
                environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if f"RANK={rank}".encode() in environ:
                return pid
        raise AssertionError(f"no worker with RANK={rank} under torchrun pid {self.proc.pid}")

    def finish(self, timeout: float = 90) -> Finished:
        """Wait for exit and return everything it printed."""
        self.proc.wait(timeout=timeout)
        while (line := self._lines.get(timeout=10)) is not None:
            self._seen.append(line)
        return Finished(self.proc.returncode, "".join(self._seen))

    def kill(self) -> None:
        """Teardown for failed tests: stop the agent and any worker it left behind."""
        if self.proc.poll() is None:
            workers = child_pids(self.proc.pid)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            for pid in workers:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


@pytest.fixture(scope="session")
def run_job():
    """``run_job(script, args, cwd, nproc=2, timeout=120, **env) -> Finished``."""
    return _run_job


@pytest.fixture(scope="session")
def fake_cifar10():
    """``fake_cifar10(root, per_batch=20) -> Path`` of a generated cifar-10-batches-py."""
    return _write_fake_cifar10


@pytest.fixture
def start_job():
    """Factory for :class:`RunningJob`; whatever is still running at teardown is stopped."""
    jobs: list[RunningJob] = []

    def start(script: str, args: list[str], cwd: Path, nproc: int = 2) -> RunningJob:
        job = RunningJob(script, args, cwd, nproc)
        jobs.append(job)
        return job

    yield start
    for job in jobs:
        job.kill()


def _write_fake_cifar10(root: Path, per_batch: int = 20, seed: int = 0) -> Path:
    """A tiny data set in CIFAR-10's exact python format (``cifar-10-batches-py``).

    Same structure as the real files: pickled dicts with bytes keys ``batch_label``,
    ``labels`` (list of ints), ``data`` (uint8 numpy array N x 3072: the red, green, blue
    planes of 32x32 row-major), ``filenames``; plus ``batches.meta``. Pixel values encode
    (image, channel, row) so a loader that mixes up the layout is caught.
    """
    import pickle

    import numpy as np

    out = root / "cifar-10-batches-py"
    out.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    for b, name in enumerate(names):
        data = rng.integers(0, 256, size=(per_batch, 3072), dtype=np.uint8)
        data[:, 0] = b  # image's first red pixel = batch number
        data[:, 1024] = np.arange(per_batch)  # first green pixel = index in batch
        labels = [int(x) for x in rng.integers(0, 10, size=per_batch)]
        batch = {b"batch_label": f"{name} of 6".encode(), b"labels": labels, b"data": data,
                 b"filenames": [f"img_{b}_{i}.png".encode() for i in range(per_batch)]}
        with (out / name).open("wb") as f:
            pickle.dump(batch, f, protocol=2)
    meta = {b"num_cases_per_batch": per_batch, b"label_names": [b"airplane", b"automobile", b"bird", b"cat", b"deer",
                                                                b"dog", b"frog", b"horse", b"ship", b"truck"],
            b"num_vis": 3072}
    with (out / "batches.meta").open("wb") as f:
        pickle.dump(meta, f, protocol=2)
    return out
