"""Typed view of the torchrun / Slurm environment, shared by the in-container jobs.

The jobs in this directory (``train_ddp.py``, ``allreduce_bench.py``, ``env_probe.py``) run
as ``torchrun /path/jobs/<script>.py`` inside the image, so this sibling module is importable
(torchrun puts the script's directory first on ``sys.path``). It exists so that no script
parses ``RANK``/``SLURM_*`` variables ad hoc or compares magic strings: each script asks
:class:`JobEnvironment` once, gets typed fields, and uses the :class:`Device` and
:class:`Backend` enums to decide between CPU+gloo and CUDA+NCCL.

Only torch and the standard library are imported: the jobs must run in any PyTorch image.
"""

from __future__ import annotations

import enum
import gc
import os
import socket
import sys
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

__all__ = [
    "Backend",
    "Device",
    "JobEnvironment",
    "ProcessGroups",
    "default_output_dir",
]


class Device(str, enum.Enum):
    """Kind of device a rank computes on."""

    CPU = "cpu"
    CUDA = "cuda"


class Backend(str, enum.Enum):
    """torch.distributed backend; the value is the name ``init_process_group`` takes."""

    GLOO = "gloo"
    NCCL = "nccl"

    @classmethod
    def for_device(cls, device: Device) -> Backend:
        """NCCL is the only backend that moves CUDA tensors over the fabric; gloo covers CPU."""
        return cls.NCCL if device is Device.CUDA else cls.GLOO


def _first_int(env: Mapping[str, str], names: tuple[str, ...], default: int) -> int:
    """First of ``names`` that is set, as int; several launchers name the same thing differently."""
    for name in names:
        value = env.get(name, "").strip()
        if value:
            try:
                return int(value)
            except ValueError as exc:
                raise ValueError(f"environment variable {name}={value!r} is not an integer") from exc
    return default


@dataclass(frozen=True)
class JobEnvironment:
    """Where this process sits in the job, read once from the environment.

    torchrun's variables win over Slurm's: under ``srun ... torchrun`` Slurm sees one task per
    node, so ``SLURM_PROCID`` is the node, not the worker. Without any launcher (plain
    ``python script.py``) the process is rank 0 of a world of 1, so the scripts still run.
    """

    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    node_rank: int
    nnodes: int
    hostname: str
    master_addr: str | None
    master_port: int | None
    slurm_job_id: str | None
    launched: bool
    """True when a launcher set ``RANK``/``WORLD_SIZE`` (then MASTER_ADDR/PORT rendezvous is used)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> JobEnvironment:
        """Build from ``environ`` (default ``os.environ``); pure, so tests can pass a dict."""
        env = os.environ if environ is None else environ
        launched = "RANK" in env and "WORLD_SIZE" in env
        rank = _first_int(env, ("RANK",), 0)
        world_size = _first_int(env, ("WORLD_SIZE",), 1)
        local_rank = _first_int(env, ("LOCAL_RANK",), 0)
        local_world_size = _first_int(env, ("LOCAL_WORLD_SIZE",), world_size)
        # GROUP_* are torchrun's per-agent (= per-node) numbers; SLURM_* cover srun-per-GPU launches.
        nnodes = _first_int(
            env,
            ("GROUP_WORLD_SIZE", "SLURM_JOB_NUM_NODES", "SLURM_NNODES"),
            max(1, world_size // max(1, local_world_size)),
        )
        node_rank = _first_int(env, ("GROUP_RANK", "SLURM_NODEID"), rank // max(1, local_world_size))
        port = env.get("MASTER_PORT", "").strip()
        return cls(
            rank=rank,
            local_rank=local_rank,
            world_size=world_size,
            local_world_size=local_world_size,
            node_rank=node_rank,
            nnodes=nnodes,
            hostname=socket.gethostname(),
            master_addr=env.get("MASTER_ADDR") or None,
            master_port=int(port) if port.isdigit() else None,
            slurm_job_id=env.get("SLURM_JOB_ID") or None,
            launched=launched,
        )

    @property
    def is_main(self) -> bool:
        """Rank 0 alone prints summaries and writes files, so lines are not repeated W times."""
        return self.rank == 0

    def choose_device(self, requested: str = "auto") -> torch.device:
        """One device per process: ``cuda:<local_rank>`` when GPUs are visible, else CPU.

        ``requested`` is ``auto``, ``cpu`` or ``cuda``. When a launcher gave each task a single
        visible GPU (``srun --gpus-per-task``), every local rank uses ``cuda:0``.
        """
        kind = Device(requested) if requested != "auto" else (
            Device.CUDA if torch.cuda.is_available() else Device.CPU
        )
        if kind is Device.CPU:
            return torch.device("cpu")
        count = torch.cuda.device_count()
        if count == 0:
            raise RuntimeError("--device cuda requested but torch sees no CUDA device")
        if count == 1:
            index = 0
        elif self.local_rank < count:
            index = self.local_rank
        else:
            raise RuntimeError(
                f"LOCAL_RANK {self.local_rank} but only {count} GPUs visible on {self.hostname}: "
                "--nproc-per-node is larger than the GPUs per node"
            )
        return torch.device("cuda", index)

    def bind_cpus(self, environ: Mapping[str, str] | None = None) -> set[int] | None:
        """Pin this worker to its CPU mask from ``FABRIKIT_CPU_BIND_MASKS``; returns the CPUs.

        The batch script exports one hex mask per local rank (the profile's
        ``launcher.cpu_bind_masks``, e.g. LUMI-G's GCD-to-core map). torchrun starts all
        workers of a node inside one Slurm task, so ``srun --cpu-bind`` cannot give each
        worker its own cores; each worker applies its mask here, before torch starts
        threads. The mask is intersected with the CPUs this process may use (Slurm's
        cgroup), so it never widens an allocation. ``None``: no masks, or none usable
        (no mask for this local rank, or an empty intersection); the affinity is unchanged.
        """
        env = os.environ if environ is None else environ
        text = env.get("FABRIKIT_CPU_BIND_MASKS", "").strip()
        if not text:
            return None
        masks = [m.strip() for m in text.split(",") if m.strip()]
        if self.local_rank >= len(masks):
            return None
        try:
            mask = int(masks[self.local_rank], 16)
        except ValueError as exc:
            raise ValueError(f"FABRIKIT_CPU_BIND_MASKS entry {masks[self.local_rank]!r} is not a hex mask") from exc
        wanted = {cpu for cpu in range(mask.bit_length()) if mask >> cpu & 1}
        cpus = wanted & os.sched_getaffinity(0)
        if not cpus:
            return None
        os.sched_setaffinity(0, cpus)
        return cpus

    def configure_threads(self, requested: int = 0, environ: Mapping[str, str] | None = None) -> int:
        """Set torch's intra-op threads; returns the number.

        Order: ``requested`` (> 0); else ``OMP_NUM_THREADS`` when a launcher or user chose
        it; else the CPUs this process may use (affinity mask, i.e. what Slurm's cgroup
        allows) divided among the local workers. torchrun itself sets ``OMP_NUM_THREADS=1``
        whenever it starts several workers, which would leave most cores idle on CPU runs,
        so a ``1`` with ``local_world_size > 1`` is treated as torchrun's and not honoured.
        An explicit value matters where "nodes" share cores (local multi-node runs, the
        network-namespace test cluster): dividing by local workers alone oversubscribes
        the cores there, and OpenMP spinning makes that several times slower.
        """
        env = os.environ if environ is None else environ
        omp = env.get("OMP_NUM_THREADS", "").strip()
        if requested > 0:
            threads = requested
        elif omp.isdigit() and int(omp) > 0 and (omp != "1" or self.local_world_size == 1):
            threads = int(omp)
        else:
            threads = max(1, len(os.sched_getaffinity(0)) // max(1, self.local_world_size))
        torch.set_num_threads(threads)
        return threads

    def init_process_group(
        self, device: torch.device, timeout: timedelta = timedelta(minutes=10)
    ) -> ProcessGroups:
        """Join the job's process group on the backend that fits ``device``.

        With NCCL a second, gloo group is created for small CPU-side control messages (stop
        flags, file names, RNG states): putting those on NCCL would need a device tensor and
        a host sync every step. Without a launcher an in-process store makes a world of 1.
        """
        kind = Device(device.type)
        backend = Backend.for_device(kind)
        if kind is Device.CUDA:
            torch.cuda.set_device(device)
        _import_group_defaults_first()
        if self.launched:
            dist.init_process_group(
                backend.value,
                timeout=timeout,
                device_id=device if kind is Device.CUDA else None,
            )
        else:
            dist.init_process_group(backend.value, store=dist.HashStore(), rank=0, world_size=1, timeout=timeout)
        control = dist.new_group(backend=Backend.GLOO.value) if backend is Backend.NCCL else None
        return ProcessGroups(backend=backend, device=device, control=control)


def _import_group_defaults_first() -> None:
    """Import ``torch.distributed.nn`` while no default group exists yet.

    Its functions take ``group=group.WORLD`` as default arguments, evaluated at import time.
    DDP's constructor imports it (through ``torch._dynamo``), i.e. after the group exists, and
    then ten default arguments hold the live default group for good: ``destroy_process_group``
    could not free it and its gloo threads ran on into interpreter exit (see
    :meth:`ProcessGroups.destroy`). Imported first, those defaults hold ``None``.
    """
    import torch.distributed.nn  # noqa: F401


@dataclass
class ProcessGroups:
    """The initialised groups: the default one on ``backend`` plus a gloo group for control."""

    backend: Backend
    device: torch.device
    control: dist.ProcessGroup | None
    """gloo group for CPU tensors/objects (``group=`` argument); ``None``: the default group is gloo."""

    def destroy(self) -> None:
        """Tear every group down now, joining its threads, before the interpreter exits.

        Callers first drop what holds a group: the DDP model (DDP and its C++ reducer keep a
        reference), pending work handles. Why it matters: a gloo worker thread releases a
        finished collective's tensors moments after ``wait()`` returned in the main thread
        (later under load), and releasing a tensor made in Python takes the GIL. Once the
        interpreter is finalising, CPython ends such a thread with ``pthread_exit``; its
        unwinding through a ``noexcept`` destructor calls ``std::terminate`` ("terminate called
        without an active exception", SIGABRT) after training had finished. A group that is
        really destroyed joins its threads first, with the GIL released (torch's Python
        wrapper does that), so nothing is left running at exit.
        """
        if not dist.is_initialized():
            return
        gc.collect()  # a dropped DDP model sits in reference cycles; its reducer holds the group
        rank = dist.get_rank()
        groups = [weakref.ref(group) for group in (dist.group.WORLD, self.control) if group is not None]
        self.control = None
        dist.destroy_process_group()  # drops torch's references: the last ones, if all went well
        if any(ref() is not None for ref in groups):
            gc.collect()
        left = sum(ref() is not None for ref in groups)
        if left:
            print(f"fabrikit-jobenv: warning: rank {rank}: {left} process group(s) still referenced after "
                  "destroy_process_group(); their threads run on into interpreter exit, which can abort "
                  "the process (SIGABRT)", file=sys.stderr, flush=True)


def default_output_dir(requested: str | None) -> Path:
    """Directory for a job's result files: ``requested``, else ``$FABRIKIT_RUN_DIR``, else cwd.

    fabrikit's batch script exports ``FABRIKIT_RUN_DIR`` (the run's directory on the shared
    file system), so results land next to the job's logs without extra flags.
    """
    path = Path(requested or os.environ.get("FABRIKIT_RUN_DIR") or os.getcwd())
    path.mkdir(parents=True, exist_ok=True)
    return path
