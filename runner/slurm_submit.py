"""The Slurm backend: a plan (the run directory's files, the batch script, the sbatch argv)
and its submission.

`plan()` is pure and is all that `--dry-run` needs. `submit()` runs the preflight (sbatch on
PATH, the container runtime where this host has one, the run directory) before it writes
anything, so a login node without Slurm is left as it was; then it writes the run directory
and hands the script to sbatch. It never changes the plan it was given.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from . import run_dir as rundir
from . import sbatch
from .request import LaunchRequest
from .run_dir import SCRIPT_FILE, RunDirPlan, RunFile
from .slurm_script import render


class SlurmPlan(msgspec.Struct, frozen=True):
    request: LaunchRequest
    script: str
    run: RunDirPlan  # the run directory, job.sbatch included

    @property
    def run_dir(self) -> Path:
        return self.run.path

    @property
    def script_path(self) -> Path:
        return self.run_dir / SCRIPT_FILE

    @property
    def sbatch_argv(self) -> tuple[str, ...]:
        return sbatch.argv(self.script_path, chdir=self.run_dir)

    def describe(self) -> str:
        """What --dry-run prints on stdout: the complete batch script."""
        return self.script

    def notes(self) -> list[str]:
        """What --dry-run prints on stderr: what would be written and run."""
        return [self.run.describe(), f"# dry run: would run {' '.join(self.sbatch_argv)}"]


def plan(request: LaunchRequest, run: Path | RunDirPlan) -> SlurmPlan:
    """The batch script of `request` and the run directory it is submitted from."""
    run = run if isinstance(run, RunDirPlan) else RunDirPlan(run)
    script = render(request)
    return SlurmPlan(request=request, script=script,
                     run=run.adding(RunFile(SCRIPT_FILE, script, 0o755), bundled_jobs=request.job.bundled))


class Submitted(msgspec.Struct, frozen=True):
    job_id: str
    run_dir: Path

    @property
    def logs(self) -> tuple[Path, Path]:
        return self.run_dir / f"slurm-{self.job_id}.out", self.run_dir / f"job-{self.job_id}.log"


def preflight(p: SlurmPlan) -> None:
    """Everything that can refuse the submission, checked before anything is written."""
    sbatch.require("run this on a Slurm login node, or use --dry-run, or --site local")
    runtime = p.request.profile.container.runtime
    if runtime != "none":
        from .apptainer import check_no_eval

        # A login node without the runtime is fine: the script checks it on the node.
        check_no_eval(runtime, required=False)
    rundir.preflight(p.run)


def submit(p: SlurmPlan) -> Submitted:
    """Preflight, then write the run directory and hand the script to sbatch."""
    preflight(p)
    rundir.write(p.run)
    return Submitted(job_id=sbatch.submit(p.sbatch_argv), run_dir=p.run_dir)
