"""The environment a job sees inside its container, shared by the Slurm and local backends.

Rules that are facts about fabrics, not about one site, live here once:
- NCCL_DEBUG=INFO with INIT,NET subsystems when the transport is to be checked (the log
  lines `fabrikit check-log` reads), unless the profile sets them itself;
- HPE: do not set NCCL_NET for single-node runs (a needless VNI allocation;
  fabric-facts.md "Sigma2 Olivia");
- the library path is prepended inside the container (never imported from the host:
  Apptainer does not pass LD_LIBRARY_PATH through);
- per-GPU CPU masks (`launcher.cpu_bind_masks`) travel as FABRIKIT_CPU_BIND_MASKS, which the
  bundled jobs apply to each torchrun worker.
"""

from __future__ import annotations

from .profile import env_text
from .request import LaunchRequest

# Inside the container, prepend FABRIKIT_LD_PREPEND to the image's own LD_LIBRARY_PATH and
# exec the command. A constant string, so there is nothing to quote into it.
LD_WRAPPER = (
    'if [ -n "${FABRIKIT_LD_PREPEND:-}" ]; then '
    'LD_LIBRARY_PATH="$FABRIKIT_LD_PREPEND${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; '
    "export LD_LIBRARY_PATH; fi; exec \"$@\""
)

NCCL_DEBUG_DEFAULTS = (("NCCL_DEBUG", "INFO"), ("NCCL_DEBUG_SUBSYS", "INIT,NET"))


def job_environment(request: LaunchRequest) -> list[tuple[str, str]]:
    """Ordered (name, value) pairs for the job: profile env plus the fabric rules."""
    profile = request.profile
    env: dict[str, str] = {name: env_text(value) for name, value in profile.env.items()}
    if profile.fabric.check_transport:
        for name, value in NCCL_DEBUG_DEFAULTS:
            env.setdefault(name, value)
    if request.nodes == 1 and profile.fabric.kind == "slingshot":
        env.pop("NCCL_NET", None)
    if profile.launcher.cpu_bind_masks:
        # Read by jobs/jobenv.py (JobEnvironment.bind_cpus): mask N for local rank N.
        env["FABRIKIT_CPU_BIND_MASKS"] = ",".join(profile.launcher.cpu_bind_masks)
    if request.library_path:
        env["FABRIKIT_LD_PREPEND"] = ":".join(request.library_path)
    return list(env.items())


def env_prefix(runtime: str) -> str:
    """Variables with this prefix are injected into the container by the runtime."""
    return "SINGULARITYENV_" if runtime == "singularity" else "APPTAINERENV_"
