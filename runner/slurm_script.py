"""Render a `LaunchRequest` into a Slurm batch script: pure, deterministic, no I/O but
reading the templates.

Same request, same bytes: nothing here looks at the clock, the host or the environment, and
the run directory is the script's working directory (`sbatch --chdir`), not a path baked in.
"""

from __future__ import annotations

from . import __version__
from .container_env import NO_EVAL_FLAG
from .launch import RUN_DIR_VAR, LaunchSpec, describe
from .request import LaunchRequest
from .sbatch import directives
from .shell import Expansion, ShellValue, Slot, literal_text, quote, shell_word, shell_words, template
from .templating import fill
from .validate import sbatch_extra, sbatch_word

INDENT = "  "
# Literal values may contain `$` or backquotes on purpose; shellcheck's SC2016 ("expressions
# don't expand in single quotes") is exactly what we want there.
LITERAL_DOLLAR = "# shellcheck disable=SC2016  # literal value: not expanded, on purpose\n"


def _literal_note(*values: str) -> str:
    return LITERAL_DOLLAR if any("$" in v or "`" in v for v in values) else ""


def sbatch_options(request: LaunchRequest) -> list[str]:
    """`#SBATCH` options in a fixed order; values are checked to need no quoting (the
    profile loader and the flags checked them already: this is the last guard)."""
    sched = request.profile.scheduler
    opts = [
        f"--job-name={sbatch_word(request.job_name, 'job name')}",
        f"--nodes={request.nodes}",
        "--ntasks-per-node=1",
    ]
    if request.partition is not None:
        opts.append(f"--partition={sbatch_word(request.partition, 'partition')}")
    if request.account is not None:
        opts.append(f"--account={sbatch_word(request.account, 'account')}")
    if request.gpus_per_node > 0:
        opts.append(f"--gpus-per-node={request.gpus_per_node}")
    if sched.cpus_per_task:
        opts.append(f"--cpus-per-task={sched.cpus_per_task}")
    if sched.mem:
        opts.append(f"--mem={sched.mem}")
    opts.append(f"--time={sbatch_word(request.time, 'time')}")
    if sched.constraint:
        opts.append(f"--constraint={sbatch_word(sched.constraint, 'constraint')}")
    opts.append("--output=slurm-%j.out")
    if sched.signal_lead_s > 0:
        # TERM reaches every job step's tasks: apptainer forwards it to torchrun, which
        # forwards it to the workers; train_ddp.py then checkpoints and exits.
        opts.append(f"--signal=TERM@{sched.signal_lead_s}")
    if request.requeue:
        # A requeued job runs this script again in the same run directory; keep the output.
        opts += ["--requeue", "--open-mode=append"]
    else:
        opts.append("--no-requeue")
    opts.extend(sbatch_extra(extra, "scheduler.sbatch_extra") for extra in sched.sbatch_extra)
    return opts


# How the batch script fills the launch's slots: variables it sets itself (run_dir, nproc,
# head_addr, rdzv_port, binds) or Slurm's. `is_host` is left to torchrun, which compares
# the endpoint with the node's own addresses; --local_addr likewise.
BINDING: dict[Slot, ShellValue] = {
    Slot.RUN_DIR: Expansion('"$run_dir"'),
    Slot.JOB_ID: Expansion('"$SLURM_JOB_ID"'),
    Slot.NODES: Expansion('"$SLURM_JOB_NUM_NODES"'),
    Slot.NPROC: Expansion('"$nproc"'),
    Slot.ENDPOINT: Expansion('"$head_addr:$rdzv_port"'),
    Slot.IS_HOST: "",
    Slot.BINDS: Expansion('"${binds[@]}"'),
    Slot.LOCAL_ADDR: (),
}


def _binds(spec: LaunchSpec) -> str:
    if not spec.binds:
        return 'binds=(--bind "$run_dir")'
    lines = []
    for bind in spec.binds:
        need = "required" if bind.required else "optional"
        lines.append(f"{_literal_note(bind.source, bind.target)}fabrikit_bind {quote(bind.source)} "
                     f"{quote(bind.target)} {bind.mode} {need}")
    return fill("slurm_binds.sh.in", {"BIND_LINES": "\n".join(lines)}).rstrip("\n")


def _env(spec: LaunchSpec) -> str:
    """One `export` per variable. Values are single words (`quote`), so the batch shell
    passes them on unchanged, and `--no-eval` keeps the runtime from evaluating them; only
    `env_expand` values expand their `{run_dir}`/`{job_id}` placeholders."""
    lines = []
    for var in spec.env:
        if var.name == RUN_DIR_VAR:
            continue  # no container: the script's header exports it, for the batch shell and the job
        text = shell_word(var.value, BINDING)
        note = _literal_note(literal_text(var.value))
        if var.prepend:
            lines.append(f'{note}export {var.name}={text}"${{{var.name}:+:${var.name}}}"')
        else:
            lines.append(f"{note}export {var.name}={text}")
    return "\n".join(lines) if lines else "# (no variables)"


def _srun(request: LaunchRequest) -> str:
    """The job step: one task per node, with the CPUs the job asked for. Since Slurm 22.05
    srun no longer inherits sbatch's --cpus-per-task (sbatch(1), NOTE under --cpus-per-task;
    22.05 release notes: "srun will no longer read in SLURM_CPUS_PER_TASK"): without the
    option here, torchrun and all its workers would share one CPU."""
    scheduler = request.profile.scheduler
    srun = ['srun --nodes="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1']
    if scheduler.cpus_per_task:
        srun.append(f"--cpus-per-task={scheduler.cpus_per_task}")
    srun.append("--kill-on-bad-exit=1 --label")
    if scheduler.srun_extra:
        srun.append(shell_words((template(extra) for extra in scheduler.srun_extra), BINDING))
    return " ".join(srun)


def _launch(request: LaunchRequest, spec: LaunchSpec) -> str:
    lines = [_srun(request), *(shell_words(group, BINDING) for group in spec.groups())]
    text = (" \\\n" + INDENT).join(lines)
    if spec.in_container:
        # The wrapper is a constant single-quoted string expanded inside the container.
        return "# shellcheck disable=SC2016\n" + text
    seen = (*spec.torchrun, *spec.job, *(template(extra) for extra in request.profile.scheduler.srun_extra))
    return _literal_note(*(literal_text(word) for word in seen)) + text


def _nproc(request: LaunchRequest) -> str:
    if request.gpus_per_node > 0:
        return (
            "# one process per GPU: Slurm sets SLURM_GPUS_ON_NODE for --gpus-per-node\n"
            f'nproc=${{SLURM_GPUS_ON_NODE:-{request.nproc_per_node}}}'
        )
    return f"nproc={request.nproc_per_node}  # CPU ranks per node (profile launcher.nproc_per_node)"


def _epilogue(request: LaunchRequest) -> str:
    check = "--check-transport" if request.profile.fabric.check_transport else "--no-check-transport"
    requeue = fill("slurm_requeue.sh.in", {}).rstrip("\n") if request.requeue else "# (no requeue: --requeue to enable)"
    values = {"FABRIC": request.profile.fabric.kind, "CHECK": check, "REQUEUE": requeue}
    return fill("slurm_epilogue.sh.in", values).rstrip("\n")


def _runtime_check(runtime: str) -> str:
    """Stop before launching when the runtime would evaluate the environment's values."""
    if runtime == "none":
        return "# (no container: runtime none)"
    return fill("slurm_runtime_check.sh.in", {"RUNTIME": quote(runtime), "FLAG": NO_EVAL_FLAG}).rstrip("\n")


def _monitor(request: LaunchRequest) -> str:
    """The GPU sampler: nvidia-smi, or rocm-smi for AMD GPUs (`gpu_flag: --rocm`)."""
    if request.gpus_per_node <= 0:
        return "# (no GPUs: no utilisation monitor)"
    rocm = request.profile.container.gpu_flag == "--rocm"
    return fill("slurm_gpu_monitor_rocm.sh.in" if rocm else "slurm_gpu_monitor.sh.in", {}).rstrip("\n")


def render(request: LaunchRequest, spec: LaunchSpec | None = None) -> str:
    """The batch script for `request`; `spec` is its launch description (`launch.describe`)."""
    spec = describe(request) if spec is None else spec
    runtime = spec.runtime
    values = {
        "SBATCH": directives(sbatch_options(request)),
        "VERSION": __version__,
        "SITE": request.site,
        "DESCRIPTION": " ".join(request.profile.description.split()),
        "BINDS": _binds(spec) if spec.in_container else "# (no container: runtime none)",
        "ENV": _env(spec),
        "RUNTIME_CHECK": _runtime_check(runtime),
        "PORT_BASE": str(request.profile.launcher.port_base),
        "PORT_SPAN": str(request.profile.launcher.port_span),
        "IFACE": quote(request.profile.launcher.head_interface or ""),
        "NPROC": _nproc(request),
        "MONITOR": _monitor(request),
        "MONITOR_STOP": 'kill "$gpu_monitor" 2>/dev/null || true' if request.gpus_per_node > 0 else "",
        "LAUNCH": _launch(request, spec),
        "EPILOGUE": _epilogue(request),
    }
    return fill("slurm.sbatch.in", values)
