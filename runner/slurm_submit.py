"""The Slurm backend: a plan (script text + sbatch argv + run directory) and its submission.

`plan()` is pure and is all that `--dry-run` needs; `submit()` is the only function here
that writes files or runs a program, and it never changes the plan it was given.
"""

from __future__ import annotations

import re
from pathlib import Path

import msgspec

from .atomic_write import write_atomic
from .errors import RuntimeFailure, UserError
from .request import LaunchRequest
from .slurm_script import render

SCRIPT_NAME = "job.sbatch"
_JOB_ID = r"^(\d+)(?:;\S+)?$"


class SlurmPlan(msgspec.Struct, frozen=True):
    request: LaunchRequest
    script: str
    run_dir: Path

    @property
    def script_path(self) -> Path:
        return self.run_dir / SCRIPT_NAME

    @property
    def sbatch_argv(self) -> tuple[str, ...]:
        return ("sbatch", "--parsable", f"--chdir={self.run_dir}", str(self.script_path))

    def describe(self) -> str:
        """What --dry-run prints on stdout: the complete batch script."""
        return self.script


def plan(request: LaunchRequest, run_dir: Path) -> SlurmPlan:
    return SlurmPlan(request=request, script=render(request), run_dir=run_dir)


class Submitted(msgspec.Struct, frozen=True):
    job_id: str
    run_dir: Path

    @property
    def logs(self) -> tuple[Path, Path]:
        return self.run_dir / f"slurm-{self.job_id}.out", self.run_dir / f"job-{self.job_id}.log"


def require_sbatch() -> None:
    """Checked before the run directory is written, so a login node without Slurm leaves nothing."""
    import shutil

    if shutil.which("sbatch") is None:
        raise UserError("sbatch not found: run this on a Slurm login node, or use --dry-run, or --site local")


def submit(p: SlurmPlan, *, resume: bool = False) -> Submitted:
    """Write the run directory and hand the script to sbatch."""
    import subprocess

    require_sbatch()
    from . import run_dir as rundir

    if p.request.job.bundled:
        rundir.copy_bundled_jobs(p.run_dir)
    write_atomic(p.script_path, p.script, mode=0o755)
    try:
        result = subprocess.run(p.sbatch_argv, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise RuntimeFailure(f"could not run sbatch: {exc}") from None
    if result.returncode != 0:
        reason = (result.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise RuntimeFailure(f"sbatch refused the job: {reason} (script kept in {p.script_path})")
    match = re.match(_JOB_ID, result.stdout.strip())
    if not match:
        raise RuntimeFailure(f"sbatch printed no job id: {result.stdout.strip()!r}")
    return Submitted(job_id=match.group(1), run_dir=p.run_dir)
