"""The environment a job sees inside its container, shared by the Slurm and local backends.

Values are literal: each reaches the job byte for byte. The runtime is told not to evaluate
them (`--no-eval`: Apptainer >= 1.1, SingularityCE >= 3.10 otherwise run `$(...)` and expand
`$VAR` in every `APPTAINERENV_*` value), and the renderers quote them as single words. The
one exception is explicit: `env_expand:` values, whose `{run_dir}`/`{job_id}` placeholders
(and nothing else) are expanded when the job starts.

Rules that are facts about fabrics, not about one site, live here once:
- NCCL_DEBUG=INFO with INIT,NET subsystems when the transport is to be checked (the log
  lines `fabrikit check-log` reads), unless the profile sets them itself;
- variables the fabric kind says a single-node run must not set (`runner.fabrics`: HPE's
  NCCL_NET, a needless VNI allocation on one node);
- the library path is prepended inside the container (never imported from the host:
  Apptainer does not pass LD_LIBRARY_PATH through);
- per-GPU CPU masks (`launcher.cpu_bind_masks`) travel as FABRIKIT_CPU_BIND_MASKS, which the
  bundled jobs apply to each torchrun worker.
"""

from __future__ import annotations

from typing import NamedTuple

from . import fabrics
from .request import LaunchRequest

# Inside the container, prepend FABRIKIT_LD_PREPEND to the image's own LD_LIBRARY_PATH and
# exec the command. A constant string, so there is nothing to quote into it; the variable's
# value is used as data (`"$FABRIKIT_LD_PREPEND"`), never evaluated.
LD_WRAPPER = (
    'if [ -n "${FABRIKIT_LD_PREPEND:-}" ]; then '
    'LD_LIBRARY_PATH="$FABRIKIT_LD_PREPEND${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; '
    "export LD_LIBRARY_PATH; fi; exec \"$@\""
)
LD_PREPEND = "FABRIKIT_LD_PREPEND"

NCCL_DEBUG_DEFAULTS = (("NCCL_DEBUG", "INFO"), ("NCCL_DEBUG_SUBSYS", "INIT,NET"))

# The runtime flag that keeps APPTAINERENV_*/SINGULARITYENV_* values literal (which versions
# have it: runner.apptainer.NO_EVAL_SINCE).
NO_EVAL_FLAG = "--no-eval"


class JobVar(NamedTuple):
    """One variable for the job; `template` values carry `{run_dir}`/`{job_id}` placeholders."""

    name: str
    value: str
    template: bool = False


def job_environment(request: LaunchRequest) -> list[JobVar]:
    """Ordered variables for the job: profile env, env_expand, plus the fabric rules."""
    profile = request.profile
    env: dict[str, JobVar] = {name: JobVar(name, value) for name, value in profile.env.items()}
    if profile.fabric.check_transport:
        for name, value in NCCL_DEBUG_DEFAULTS:
            env.setdefault(name, JobVar(name, value))
    if request.nodes == 1:
        for name in fabrics.get(profile.fabric.kind).single_node_unset:
            env.pop(name, None)
    for name, value in profile.env_expand.items():
        env[name] = JobVar(name, value, template=True)
    if profile.launcher.cpu_bind_masks:
        # Read by jobs/jobenv.py (JobEnvironment.bind_cpus): mask N for local rank N.
        env["FABRIKIT_CPU_BIND_MASKS"] = JobVar("FABRIKIT_CPU_BIND_MASKS", ",".join(profile.launcher.cpu_bind_masks))
    if request.library_path:
        env[LD_PREPEND] = JobVar(LD_PREPEND, ":".join(request.library_path))
    return list(env.values())


def env_prefix(runtime: str) -> str:
    """Variables with this prefix are injected into the container by the runtime."""
    return "SINGULARITYENV_" if runtime == "singularity" else "APPTAINERENV_"
