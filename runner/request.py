"""A launch request: the site profile plus the user's flags, resolved into typed values.

This is the single input of the launch description (`runner.launch`) that both backends
render. Flag overrides are applied here, once, so that no renderer has to know whether a
value came from the profile or from the command line; what the host has to say (the job
script, the host-library closure) is resolved here too, so that rendering stays pure.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from . import profile as schema
from . import validate
from .errors import UserError
from .profile_loader import LoadedProfile
from .resources import bundled_jobs_dir


class JobSpec(msgspec.Struct, frozen=True):
    """What torchrun runs: a bundled job (copied into the run directory) or a user path."""

    script: str  # a shell word template: '{run_dir}/jobs/train_ddp.py' or '/abs/path.py'
    args: tuple[str, ...]
    bundled: bool

    @property
    def argv(self) -> tuple[str, ...]:
        return (self.script, *self.args)


class LaunchRequest(msgspec.Struct, frozen=True):
    """Everything a backend needs; immutable so renderers cannot change what they were given."""

    site: str
    profile: schema.Profile
    nodes: int
    gpus_per_node: int
    nproc_per_node: int  # processes per node (GPUs if any, else the profile's CPU ranks)
    partition: str | None
    account: str | None
    time: str
    job_name: str
    job: JobSpec
    requeue: bool
    # Profile binds plus the resolved `host_libraries` closure (one file bind per library).
    binds: tuple[schema.Bind, ...] = ()
    # Directories prepended to LD_LIBRARY_PATH inside the container.
    library_path: tuple[str, ...] = ()

    @property
    def world_size(self) -> int:
        return self.nodes * self.nproc_per_node

    @property
    def join_timeout_s(self) -> int:
        """Fail fast: torchrun's default join timeout is 600 s. Agents start within seconds
        of each other under srun, so 120 s plus 1 s per node is generous but still quick."""
        configured = self.profile.launcher.join_timeout_s
        return configured if configured is not None else 120 + self.nodes


def resolve_job(script: str | None, args: tuple[str, ...], profile: schema.Profile) -> JobSpec:
    """`-- JOB ARGS` replaces the profile's default job; a bare name of a file in jobs/
    selects a bundled job, anything else is a path on the host."""
    if script is None:
        script, args = profile.job.script, tuple(profile.job.args)
    else:
        validate.literal(script, "job script")
        for index, arg in enumerate(args, 1):
            validate.literal(arg, f"job argument {index}")
    bundled = bundled_jobs_dir() / script
    if "/" not in script and bundled.is_file() and not Path(script).exists():
        return JobSpec(script=f"{{run_dir}}/jobs/{script}", args=args, bundled=True)
    path = Path(script).expanduser()
    if not path.is_file():
        raise UserError(f"job script {script!r} not found (bundled jobs: {', '.join(bundled_job_names())})")
    return JobSpec(script=str(path.resolve()), args=args, bundled=False)


# The binds of a launch and the directories prepended to LD_LIBRARY_PATH in the container.
HostBinds = tuple[tuple[schema.Bind, ...], tuple[str, ...]]


def host_library_binds(profile: schema.Profile, *, where: str | None = None) -> HostBinds:
    """Profile binds plus one file bind per library in the `host_libraries` closure.

    Resolved here, on the submitting host, so that rendering stays pure. A named library
    that this host does not have (a login node without the fabric stack) is still bound by
    its expected path, as a required bind: the job then stops at once on a node that lacks
    it, with a message naming it; `fabrikit doctor` reports the missing dependencies."""
    hostlibs = profile.host_libraries
    binds = list(profile.binds)
    library_path = list(profile.library_path)
    if not hostlibs.names:
        return tuple(binds), tuple(library_path)
    from .elf_deps import ElfError, closure

    try:
        resolved = closure(hostlibs.names, list(hostlibs.search_path))
    except ElfError as exc:
        raise UserError(f"host_libraries: {exc}", where=where) from None
    files = dict(resolved.found)
    for name in hostlibs.names:
        files.setdefault(name, f"{hostlibs.search_path[0]}/{name}")
    taken = {b.target or b.source for b in binds}
    for soname, source in files.items():
        target = f"{hostlibs.target_dir}/{soname}"
        if target not in taken:
            binds.append(schema.Bind(source=source, target=target, note="host_libraries closure"))
    if hostlibs.target_dir not in library_path:
        library_path.insert(0, hostlibs.target_dir)
    return tuple(binds), tuple(library_path)


def bundled_job_names() -> list[str]:
    return sorted(p.name for p in bundled_jobs_dir().glob("*.py") if not p.name.startswith("_") and p.name != "jobenv.py")


def build_request(
    loaded: LoadedProfile,
    *,
    nodes: int,
    gpus_per_node: int | None = None,
    nproc_per_node: int | None = None,
    partition: str | None = None,
    account: str | None = None,
    time: str | None = None,
    job_name: str | None = None,
    job_script: str | None = None,
    job_args: tuple[str, ...] = (),
    requeue: bool | None = None,
    host_binds: HostBinds | None = None,
) -> LaunchRequest:
    """Apply flag overrides to the profile and check what the flags alone can get wrong.

    `host_binds` is the profile's binds plus its resolved host-library closure
    (`host_library_binds`, which reads this host's libraries); None resolves it here."""
    profile = loaded.profile
    for flag, value in (("--partition", partition), ("--account", account)):
        if value is not None:
            validate.sbatch_word(value, flag)  # "" is an error, not "use the profile's"
    if nodes < 1:
        raise UserError(f"--nodes: must be at least 1 (got {nodes})")
    gpus = profile.scheduler.gpus_per_node if gpus_per_node is None else gpus_per_node
    if gpus < 0:
        raise UserError(f"--gpus-per-node: must be 0 or more (got {gpus})")
    if nproc_per_node is not None and nproc_per_node < 1:
        raise UserError(f"--nproc-per-node: must be at least 1 (got {nproc_per_node})")
    nproc = nproc_per_node or (gpus if gpus > 0 else profile.launcher.nproc_per_node)
    if time is not None:  # the profile's was checked at load
        validate.check(validate.SLURM_TIME, time, "--time")
    limit = profile.scheduler.time if time is None else time
    masks = profile.launcher.cpu_bind_masks
    if masks and nproc > len(masks):
        raise UserError(f"launcher.cpu_bind_masks has {len(masks)} mask(s) but {nproc} processes per node would "
                        "start: give one mask per local rank, or lower --nproc-per-node/--gpus-per-node",
                        where=str(loaded.path))
    if job_name is not None:
        validate.check(validate.JOB_NAME, job_name, "--job-name")
    name = f"fabrikit-{loaded.name}" if job_name is None else job_name
    binds, library_path = host_binds or host_library_binds(profile, where=str(loaded.path))
    return LaunchRequest(
        site=loaded.name,
        profile=profile,
        nodes=nodes,
        gpus_per_node=gpus,
        nproc_per_node=nproc,
        partition=partition if partition is not None else profile.scheduler.partition,
        account=account if account is not None else profile.scheduler.account,
        time=limit,
        job_name=name,
        job=resolve_job(job_script, job_args, profile),
        requeue=profile.scheduler.requeue if requeue is None else requeue,
        binds=binds,
        library_path=library_path,
    )
