"""Run directories: one per launch, holding everything needed to understand or resume it.

Layout: `job.sbatch` (Slurm), `launch.json` (the request's inputs, for `--resume`),
`profile.yaml` (the resolved profile as used), `jobs/` (copies of the bundled jobs, so a
later edit of fabrikit cannot change a running or requeued job), logs (`slurm-ID.out` and
`job-ID.log`, or `nodeN.log` in local mode) and `checkpoints/`.

A launch plans its run directory as data (`RunDirPlan`: the files, their contents and
modes), checks it (`preflight`: nothing is created, so a failed check leaves nothing behind)
and only then writes it (`write`). Files are written to a temporary name and renamed, so an interrupted
submission never leaves a half-written script behind. `launch.json` is read and written
only here (`load_launch`, `encode_launch`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import msgspec

from .atomic_write import check_creatable, writable_dir, write_atomic
from .errors import UserError
from .resources import bundled_jobs_dir

if TYPE_CHECKING:
    from .profile_loader import LoadedProfile

# The files every run directory has (the layout above); read them through these names.
LAUNCH_FILE = "launch.json"
PROFILE_FILE = "profile.yaml"
SCRIPT_FILE = "job.sbatch"  # Slurm runs only
MAX_LAUNCH_BYTES = 1 << 20  # a record is a few hundred bytes; a bigger file is not one


class LaunchRecord(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """What a launch was asked to do (`launch.json`): the site and the flags as given, so that
    `--resume` repeats it and `fabrikit report` can describe it. `None` means "the profile's
    value". Read and written only here (`load_launch`, `encode_launch`)."""

    site: str | None = None  # --site, or None with --profile
    profile_file: str | None = None  # --profile, resolved to an absolute path
    nodes: Annotated[int, msgspec.Meta(ge=1)]
    gpus_per_node: Annotated[int, msgspec.Meta(ge=0)] | None = None
    nproc_per_node: Annotated[int, msgspec.Meta(ge=1)] | None = None
    partition: str | None = None
    account: str | None = None
    time: str | None = None
    job_name: str | None = None
    requeue: bool | None = None
    job: tuple[str, ...] = ()  # `-- JOB ARGS`, empty for the profile's default job

    def __post_init__(self) -> None:
        if (self.site is None) == (self.profile_file is None):
            raise ValueError("needs exactly one of `site` and `profile_file`")


def new_run_dir(site: str, parent: Path | None = None) -> Path:
    """`runs/<site>-<YYYYmmdd-HHMMSS>[-N]` under the current directory, not yet created."""
    base = (parent or Path("runs")) / f"{site}-{time.strftime('%Y%m%d-%H%M%S')}"
    candidate, n = base, 1
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return candidate


def copy_bundled_jobs(run_dir: Path) -> None:
    """Copy the bundled job scripts into the run directory (replacing an older copy as a
    whole). File by file, without modes: an installed package may be read-only (a site-wide
    install), its copy must stay the user's to replace. The package marker `__init__.py`
    stays behind: inside the container the jobs are plain scripts."""
    import shutil

    target = run_dir / "jobs"
    staging = run_dir / ".jobs.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    for script in sorted(bundled_jobs_dir().glob("*.py")):
        if script.name != "__init__.py":
            shutil.copyfile(script, staging / script.name)
    shutil.rmtree(target, ignore_errors=True)
    os.replace(staging, target)


def encode_launch(record: LaunchRecord) -> bytes:
    """`launch.json`'s content for `record`."""
    return msgspec.json.format(msgspec.json.encode(record), indent=2) + b"\n"


def load_launch(run_dir: Path) -> LaunchRecord:
    """The run's launch record, or a one-line UserError naming the file and what is wrong."""
    path = run_dir / LAUNCH_FILE
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_LAUNCH_BYTES + 1)
    except FileNotFoundError:
        raise UserError(f"{run_dir} is not a fabrikit run directory (no {LAUNCH_FILE})") from None
    except OSError as exc:
        raise UserError(f"{path}: unreadable: {exc.strerror or exc}") from None
    if len(data) > MAX_LAUNCH_BYTES:
        raise UserError(f"{path}: larger than {MAX_LAUNCH_BYTES // 1024} KiB: not a launch record")
    try:
        return msgspec.json.decode(data, type=LaunchRecord)
    except msgspec.ValidationError as exc:
        raise UserError(f"{path}: not a fabrikit launch record: {exc}") from None
    except msgspec.DecodeError as exc:
        raise UserError(f"{path}: unreadable: {exc}") from None


class RunFile(msgspec.Struct, frozen=True):
    """A file a launch writes into its run directory."""

    name: str  # relative to the run directory
    data: str | bytes
    mode: int = 0o644


class RunDirPlan(msgspec.Struct, frozen=True):
    """What a launch will write into its run directory, and whether it makes a new one or
    continues one (`--resume`). Data: `preflight` and `write` act on it.

    Every launch keeps its record (`launch.json`) and its resolved profile (`profile.yaml`);
    their text follows from the typed values held here (`files()`), the way the sbatch argv
    follows from the run directory, so that a dry run, which never writes them, does not pay
    for rendering YAML. A backend adds its own files (`job.sbatch`) as they are."""

    path: Path
    record: LaunchRecord | None = None  # launch.json
    profile: LoadedProfile | None = None  # profile.yaml
    resume: bool = False
    extra: tuple[RunFile, ...] = ()  # the backend's own files, contents included
    bundled_jobs: bool = False  # copy the bundled jobs into jobs/

    def adding(self, *files: RunFile, bundled_jobs: bool) -> RunDirPlan:
        return msgspec.structs.replace(self, extra=(*self.extra, *files), bundled_jobs=bundled_jobs)

    def names(self) -> list[str]:
        """The files the plan writes, in order (`jobs/` for the bundled jobs)."""
        names = [PROFILE_FILE] if self.profile is not None else []
        names += [LAUNCH_FILE] if self.record is not None else []
        return names + [f.name for f in self.extra] + (["jobs/"] if self.bundled_jobs else [])

    def files(self) -> tuple[RunFile, ...]:
        """Every file with its content and mode."""
        out: list[RunFile] = []
        if self.profile is not None:
            from .profile_loader import profile_yaml

            out.append(RunFile(PROFILE_FILE, profile_yaml(self.profile)))
        if self.record is not None:
            out.append(RunFile(LAUNCH_FILE, encode_launch(self.record)))
        return (*out, *self.extra)

    def describe(self) -> str:
        """One line for a dry run: the directory and what would be written there."""
        verb = "would update" if self.resume else "would create"
        return f"# dry run: {verb} {self.path} with {', '.join(self.names()) or 'nothing'}"


def preflight(plan: RunDirPlan) -> None:
    """Every check of the run directory that can fail, before anything is created."""
    path = plan.path
    if plan.resume:
        if not path.is_dir():
            raise UserError(f"--resume: {path} does not exist")
    elif (path / LAUNCH_FILE).exists():
        raise UserError(f"{path} already holds a run; use --resume {path} to continue it")
    check_creatable(path, "run directory")


def write(plan: RunDirPlan) -> None:
    """Create the run directory (and parents) and write the plan's files into it."""
    writable_dir(plan.path, "run directory")
    for file in plan.files():
        write_atomic(plan.path / file.name, file.data, mode=file.mode)
    if plan.bundled_jobs:
        copy_bundled_jobs(plan.path)
