"""Render a `LaunchRequest` into a Slurm batch script: pure, deterministic, no I/O but
reading the templates.

Same request, same bytes: nothing here looks at the clock, the host or the environment, and
the run directory is the script's working directory (`sbatch --chdir`), not a path baked in.
"""

from __future__ import annotations

from . import __version__
from .container_env import LD_PREPEND, LD_WRAPPER, NO_EVAL_FLAG, env_prefix, job_environment
from .request import LaunchRequest
from .shell import quote, word, words
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


def _binds(request: LaunchRequest) -> str:
    if not request.binds:
        return 'binds=(--bind "$run_dir")'
    lines = []
    for bind in request.binds:
        mode = "ro" if bind.readonly else "rw"
        need = "required" if bind.required else "optional"
        target = bind.target or bind.source
        lines.append(f"{_literal_note(bind.source, target)}fabrikit_bind {quote(bind.source)} {quote(target)} {mode} {need}")
    return fill("slurm_binds.sh.in", {"BIND_LINES": "\n".join(lines)}).rstrip("\n")


def _env(request: LaunchRequest, runtime: str) -> str:
    """One `export` per variable. Values are single words (`quote`), so the batch shell
    passes them on unchanged, and `--no-eval` keeps the runtime from evaluating them; only
    `env_expand` values expand their `{run_dir}`/`{job_id}` placeholders (`word`)."""
    lines = []
    for name, value, template in job_environment(request):
        text = word(value) if template else quote(value)
        note = _literal_note(value)
        if runtime == "none":
            if name == LD_PREPEND:
                lines.append(f'{note}export LD_LIBRARY_PATH={text}"${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"')
            else:
                lines.append(f"{note}export {name}={text}")
        else:
            lines.append(f"{note}export {env_prefix(runtime)}{name}={text}")
    if runtime != "none":
        lines.append(f'export {env_prefix(runtime)}FABRIKIT_RUN_DIR="$run_dir"')
    return "\n".join(lines) if lines else "# (no variables)"


def _launch(request: LaunchRequest, runtime: str) -> str:
    profile = request.profile
    launcher = profile.launcher
    srun = ['srun --nodes="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 --kill-on-bad-exit=1 --label']
    if profile.scheduler.srun_extra:
        srun.append(words(profile.scheduler.srun_extra))
    lines = [" ".join(srun)]
    if runtime != "none":
        container = [quote(runtime), "exec", NO_EVAL_FLAG]
        if profile.container.gpu_flag != "none":
            container.append(profile.container.gpu_flag)
        container += ['"${binds[@]}"', quote(profile.container.image or "")]
        lines.append(" ".join(container))
        lines.append(f"/bin/sh -c {quote(LD_WRAPPER)} fabrikit-ld")
    rdzv_conf = f"join_timeout={request.join_timeout_s},read_timeout={launcher.read_timeout_s}"
    lines.append(
        f'{words(launcher.torchrun)} --nnodes="$SLURM_JOB_NUM_NODES" --nproc_per_node="$nproc"'
        ' --rdzv_id="$SLURM_JOB_ID" --rdzv_backend=c10d --rdzv_endpoint="$head_addr:$rdzv_port"'
    )
    lines.append(f"--rdzv_conf={rdzv_conf} --max_restarts={launcher.max_restarts}")
    lines.append(words(request.job.argv))
    text = (" \\\n" + INDENT).join(lines)
    if runtime != "none":
        # The wrapper is a constant single-quoted string expanded inside the container.
        text = "# shellcheck disable=SC2016\n" + text
    else:
        text = _literal_note(*launcher.torchrun, *profile.scheduler.srun_extra, *request.job.argv) + text
    return text


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


def render(request: LaunchRequest) -> str:
    runtime = request.profile.container.runtime
    values = {
        "SBATCH": "\n".join(f"#SBATCH {opt}" for opt in sbatch_options(request)),
        "VERSION": __version__,
        "SITE": request.site,
        "DESCRIPTION": " ".join(request.profile.description.split()),
        "BINDS": _binds(request) if runtime != "none" else "# (no container: runtime none)",
        "ENV": _env(request, runtime),
        "RUNTIME_CHECK": _runtime_check(runtime),
        "PORT_BASE": str(request.profile.launcher.port_base),
        "PORT_SPAN": str(request.profile.launcher.port_span),
        "IFACE": quote(request.profile.launcher.head_interface or ""),
        "NPROC": _nproc(request),
        "MONITOR": _monitor(request),
        "MONITOR_STOP": 'kill "$gpu_monitor" 2>/dev/null || true' if request.gpus_per_node > 0 else "",
        "LAUNCH": _launch(request, runtime),
        "EPILOGUE": _epilogue(request),
    }
    return fill("slurm.sbatch.in", values)
