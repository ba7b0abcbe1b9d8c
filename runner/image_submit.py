"""`build-image --submit`: the same build, run on a compute node through sbatch.

For an image of another architecture (an aarch64 GH200 image from an x86_64 login node):
a batch script (`runner/templates/build.sbatch.in`) that checks the node's architecture,
runs the plan's build command into a temporary name and renames it. Its `#SBATCH` lines and
the sbatch call are `runner.sbatch`'s, as for run-multinode.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import __version__, sbatch
from .atomic_write import write_atomic
from .errors import UserError
from .image_plan import BuildPlan
from .profile_loader import LoadedProfile
from .shell import join, quote
from .templating import fill
from .validate import sbatch_word

BUILD_TIME_LIMIT = "02:00:00"


@dataclass(frozen=True)
class SubmittedBuild:
    job_id: str
    script_path: Path
    log_path: Path


def submit_paths(plan: BuildPlan) -> tuple[Path, str]:
    """(batch script, sbatch --output pattern) next to the image."""
    return (plan.output.with_name(f"{plan.output.name}.build.sbatch"),
            str(plan.output.with_name(f"{plan.output.name}.build-%j.log")))


def _options(plan: BuildPlan, loaded: LoadedProfile) -> list[str]:
    sched = loaded.profile.scheduler
    opts = [f"--job-name=fabrikit-build-{sbatch_word(plan.site, 'site')}", "--nodes=1", "--ntasks=1",
            f"--cpus-per-task={sched.cpus_per_task or 8}", f"--time={BUILD_TIME_LIMIT}"]
    if sched.partition:
        opts.append(f"--partition={sbatch_word(sched.partition, 'scheduler.partition')}")
    if sched.account:
        opts.append(f"--account={sbatch_word(sched.account, 'scheduler.account')}")
    if sched.constraint:
        opts.append(f"--constraint={sbatch_word(sched.constraint, 'scheduler.constraint')}")
    if sched.gpus_per_node > 0:
        # GPU partitions usually refuse jobs without a GPU; one also lets %test see a device.
        opts.append("--gpus-per-node=1")
    return opts


def submit_script(plan: BuildPlan, loaded: LoadedProfile) -> str:
    """A batch script that runs the same build command on a compute node of the right arch.
    Every value is one quoted word (control characters as $'...': sbatch refuses CR LF)."""
    env = [f"export {name}={quote(value)}" for name, value in plan.env.items()]
    if plan.env:
        env.append(f"mkdir -p {join(plan.env.values())}")
    return fill("build.sbatch.in", {
        "SBATCH": sbatch.directives(_options(plan, loaded)),
        "VERSION": __version__,
        "SITE": plan.site,
        "DEFINITION_PATH": str(plan.definition_path),
        "ARCH": plan.arch,
        "ENV": "\n".join(env) if env else "# (no build directories to set)",
        "IMAGE": quote(str(plan.output)),
        "BUILD": join(plan.argv[:-2]),
        "DEFINITION": quote(str(plan.definition_path)),
    })


def submit(plan: BuildPlan, loaded: LoadedProfile) -> SubmittedBuild:
    """Write the definition and the batch script next to the image, then sbatch it."""
    if loaded.profile.backend != "slurm":
        raise UserError(f"--submit needs a Slurm site; {plan.site} has backend {loaded.profile.backend}")
    sbatch.require("--submit runs build-image's build through sbatch: run it on a Slurm login node")
    script_path, log_pattern = submit_paths(plan)
    script = submit_script(plan, loaded)
    try:
        plan.output.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create {plan.output.parent}: {exc.strerror}") from None
    write_atomic(plan.definition_path, plan.definition)
    write_atomic(script_path, script, mode=0o755)
    command = sbatch.argv(script_path, chdir=plan.output.parent, output=log_pattern)
    job_id = sbatch.submit(command, what="build job")
    return SubmittedBuild(job_id, script_path, Path(log_pattern.replace("%j", job_id)))
