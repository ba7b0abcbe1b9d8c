"""The typed site profile: what a cluster is, as data.

A profile is a YAML file in `bindings/` (or a user directory) converted into these frozen
msgspec structs. Unknown keys are rejected (`forbid_unknown_fields`), types are strict and
value constraints live next to the field they constrain, so a typo in a profile is an error
at load time instead of a silently ignored setting at 3 a.m. on 64 nodes.

Field names are the YAML keys. `runner.profile_loader` maps msgspec's error paths back to the
file and line the value came from.

No `from __future__ import annotations` here: with real (not string) annotations msgspec
does not have to `eval` ~50 type strings on every start-up.
"""


from typing import Annotated, Literal

import msgspec
from msgspec import Meta, Struct, field

from . import fabrics

# Constraint patterns live in `runner.validate` (full-string, one place for every name that
# reaches a script); the loader turns a failed pattern into that module's one-line hint.
from .validate import (ABSOLUTE_PATH, BUILD_ARG_NAME, CPU_MASK, ENV_NAME, INTERFACE, LIBRARY_DIR, MEMORY,
                       SLURM_TIME, SONAME)

AbsPath = Annotated[str, Meta(pattern=ABSOLUTE_PATH)]
NonNegInt = Annotated[int, Meta(ge=0)]
PosInt = Annotated[int, Meta(ge=1)]
Port = Annotated[int, Meta(ge=1024, le=65535)]
LibraryDir = Annotated[str, Meta(pattern=LIBRARY_DIR)]
Soname = Annotated[str, Meta(pattern=SONAME)]


class _Base(Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Common struct options: immutable, strict about keys, keyword-only."""


class Scheduler(_Base, kw_only=True):
    """What goes on `#SBATCH` lines and on the `srun` that launches the job."""

    partition: str | None = None
    account: str | None = None
    gpus_per_node: NonNegInt = 0
    cpus_per_task: PosInt | None = None
    mem: Annotated[str, Meta(pattern=MEMORY)] | None = None
    time: Annotated[str, Meta(pattern=SLURM_TIME)] = "01:00:00"
    constraint: str | None = None
    # Extra `#SBATCH` options, each one option as `--name=value` (no `#SBATCH ` prefix).
    sbatch_extra: list[str] = field(default_factory=list)
    # Extra options for the `srun` that starts the container on every node.
    srun_extra: list[str] = field(default_factory=list)
    # Seconds before the time limit at which Slurm sends SIGTERM to the job steps, so the
    # training checkpoints and exits cleanly (0 disables the `--signal` line).
    signal_lead_s: NonNegInt = 120
    # Requeue the job after a preemption or a time-limit stop (resume from its checkpoint).
    requeue: bool = False


class Fabric(_Base, kw_only=True):
    """The interconnect: decides which NCCL transport counts as the fast path."""

    kind: Literal[fabrics.NAMES]  # the kinds and what each means: runner.fabrics
    # Turn on NCCL_DEBUG=INFO (INIT,NET) and the end-of-job transport check.
    check_transport: bool = True


class Bind(_Base, kw_only=True):
    """A host path bound into the container (file or directory)."""

    source: AbsPath
    target: AbsPath | None = None  # defaults to the source path
    required: bool = True
    readonly: bool = True
    # Why this bind exists and where the fact comes from (shown by `fabrikit sites show`).
    note: str | None = None


class Build(_Base, kw_only=True):
    """How `build-image` produces the image named in `container.image`."""

    template: str  # a file in containers/ (e.g. slingshot.def) or an absolute path
    flavour: Literal["slingshot", "infiniband", "rocm", "test"]
    # Values are the text written in the YAML file (`1.20` stays "1.20"; see yaml_lines).
    args: dict[Annotated[str, Meta(pattern=BUILD_ARG_NAME)], str] = field(default_factory=dict)
    options: list[str] = field(default_factory=list)  # e.g. ["--fakeroot"]
    binds: list[Bind] = field(default_factory=list)  # bound during %post/%test only
    tmpdir: AbsPath | None = None  # APPTAINER_TMPDIR (must hold the whole unpacked image)
    cachedir: AbsPath | None = None  # APPTAINER_CACHEDIR
    min_free_gb: Annotated[float, Meta(ge=0)] = 10.0


class Container(_Base, kw_only=True):
    """The container runtime and image the job runs in."""

    runtime: Literal["apptainer", "singularity", "none"] = "apptainer"
    image: AbsPath | None = None
    gpu_flag: Literal["--nv", "--rocm", "none"] = "none"
    arch: Literal["x86_64", "aarch64"] = "x86_64"
    build: Build | None = None

    def __post_init__(self) -> None:
        if self.runtime != "none" and self.image is None:
            raise ValueError(f"runtime '{self.runtime}' needs `image` (an absolute path to the .sif)")


class Launcher(_Base, kw_only=True):
    """torchrun and its c10d rendezvous."""

    torchrun: list[str] = field(default_factory=lambda: ["torchrun"])
    # Processes per node when the node has no GPUs (CPU ranks); with GPUs, one per GPU.
    nproc_per_node: PosInt = 1
    # Rendezvous port = port_base + (SLURM_JOB_ID mod port_span): two jobs that share a head
    # node collide only if their ids are congruent modulo port_span.
    port_base: Port = 20000
    port_span: Annotated[int, Meta(ge=1, le=40000)] = 12000
    # Interface whose IPv4 address is the rendezvous endpoint (e.g. hsn0); None uses
    # `hostname --ip-address` of the head node.
    head_interface: Annotated[str, Meta(pattern=INTERFACE)] | None = None
    # Fail fast instead of torchrun's 600 s join default (None: scaled by node count).
    join_timeout_s: PosInt | None = None
    read_timeout_s: PosInt = 60
    max_restarts: NonNegInt = 0
    # One CPU mask per local rank (GPU), applied by the bundled jobs with sched_setaffinity
    # before they start threads: with one task per node, torchrun's workers cannot get
    # per-GPU masks from `srun --cpu-bind=mask_cpu:`, which binds tasks, not workers.
    cpu_bind_masks: list[Annotated[str, Meta(pattern=CPU_MASK)]] = field(default_factory=list)


class Job(_Base, kw_only=True):
    """The default job: a bundled job name (see jobs/) or a path, plus arguments."""

    script: str = "train_ddp.py"
    # Literal, except the placeholders `{run_dir}` (the run directory) and `{job_id}` (the
    # Slurm job id), expanded when the job starts.
    args: list[str] = field(default_factory=list)


class HostLibraries(_Base, kw_only=True):
    """Host libraries named by soname, resolved with their dependency closure (doctor)."""

    names: list[Soname] = field(default_factory=list)
    search_path: list[AbsPath] = field(default_factory=lambda: ["/usr/lib64", "/usr/lib/x86_64-linux-gnu"])
    target_dir: LibraryDir = "/opt/fabrikit/hostlib"  # also the first library_path entry


class Profile(_Base, kw_only=True):
    """A whole, resolved site profile (after `extends`)."""

    description: str
    backend: Literal["slurm", "local"] = "slurm"
    fabric: Fabric
    scheduler: Scheduler = field(default_factory=Scheduler)
    container: Container = field(default_factory=Container)
    binds: list[Bind] = field(default_factory=list)
    host_libraries: HostLibraries = field(default_factory=HostLibraries)
    # Literal values: each reaches the job byte for byte, as written in the YAML file (never
    # evaluated by a shell or by the container runtime, never retyped by YAML).
    env: dict[Annotated[str, Meta(pattern=ENV_NAME)], str] = field(default_factory=dict)
    # The one way to have a value expanded when the job starts: `{run_dir}` and `{job_id}`
    # placeholders, nothing else (see README, "Values are literal").
    env_expand: dict[Annotated[str, Meta(pattern=ENV_NAME)], str] = field(default_factory=dict)
    # Directories prepended to LD_LIBRARY_PATH inside the container, in this order.
    library_path: list[LibraryDir] = field(default_factory=list)
    launcher: Launcher = field(default_factory=Launcher)
    job: Job = field(default_factory=Job)


def to_builtins(profile: Profile) -> dict:
    """The profile as plain data (for `fabrikit sites show` and image labels)."""
    return msgspec.to_builtins(profile)
