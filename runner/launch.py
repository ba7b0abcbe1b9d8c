"""One launch, described once: what starts on every node, with which environment and binds.

`describe(request)` turns a `LaunchRequest` into a `LaunchSpec`, and both backends render that
same spec: the Slurm script (`runner.slurm_script`) as shell text, the local backend
(`runner.local_launch`) as the argv and environment of each agent. So the env-prefix mapping
(`APPTAINERENV_*`), the `FABRIKIT_LD_PREPEND` case, the container exec prefix (`--no-eval`,
the GPU flag, the image, the LD wrapper) and torchrun's rendezvous options exist here once;
a fix here is a fix for both.

What differs per backend is a `runner.shell.Slot` in the spec: the run directory, the job
id, the number of nodes, processes per node, the rendezvous endpoint, `is_host`, the bind
options, torchrun's local address. Each backend binds them (shell variables in the batch
script, values on this machine). Pure: nothing here reads files, the environment or the clock.
"""

from __future__ import annotations

import msgspec

from .container_env import LD_PREPEND, LD_WRAPPER, NO_EVAL_FLAG, env_prefix, job_environment
from .request import LaunchRequest
from .shell import Arg, Slot, Splice, Word, template

# The variable that tells the job (jobs/jobenv.py) where its run directory is.
RUN_DIR_VAR = "FABRIKIT_RUN_DIR"


class EnvVar(msgspec.Struct, frozen=True):
    """One variable as the launching side sets it (`APPTAINERENV_X` for a container's `X`)."""

    name: str
    value: Word
    # A search path put in front of the launching side's own value of `name`
    # (LD_LIBRARY_PATH when there is no container to do it inside).
    prepend: bool = False


class BindSpec(msgspec.Struct, frozen=True):
    """A host path bound into the container; the run directory is always bound as well."""

    source: str
    target: str
    mode: str  # ro | rw
    required: bool

    @property
    def option(self) -> str:
        """The value of `--bind`."""
        return f"{self.source}:{self.target}:{self.mode}"


class LaunchSpec(msgspec.Struct, frozen=True):
    """What every node runs, as argument groups in command-line order: the container exec
    prefix (up to the image), the LD wrapper, torchrun with its rendezvous, torchrun's other
    options, the job. Groups are empty where they do not apply (no container)."""

    runtime: str  # apptainer | singularity | none
    env_prefix: str  # how the launching side names a variable for the job: APPTAINERENV_, or ""
    env: tuple[EnvVar, ...]
    binds: tuple[BindSpec, ...]
    container: tuple[Arg, ...]
    wrapper: tuple[Word, ...]
    torchrun: tuple[Word, ...]  # the program, e.g. ("torchrun",)
    rendezvous: tuple[Word, ...]
    options: tuple[Arg, ...]
    job: tuple[Word, ...]
    # Where every node starts the job: the run directory on both backends (Slurm: the batch
    # script runs there through `sbatch --chdir` and srun keeps it; local: the agents' cwd), so
    # a relative path in a job means the same thing wherever it runs.
    workdir: Word = (Slot.RUN_DIR,)

    @property
    def in_container(self) -> bool:
        return self.runtime != "none"

    def env_name(self, name: str) -> str:
        """The name under which the launching side sets the job's variable `name`."""
        return self.env_prefix + name

    def groups(self, torchrun: tuple[Word, ...] | None = None) -> tuple[tuple[Arg, ...], ...]:
        """The non-empty argument groups; `torchrun` replaces the program (the local backend
        runs this interpreter's torch.distributed.run when there is no container)."""
        program = self.torchrun if torchrun is None else torchrun
        parts = (self.container, self.wrapper, (*program, *self.rendezvous), self.options, self.job)
        return tuple(group for group in parts if group)

    def argv(self, torchrun: tuple[Word, ...] | None = None) -> tuple[Arg, ...]:
        return tuple(arg for group in self.groups(torchrun) for arg in group)


def _env(request: LaunchRequest, runtime: str, prefix: str) -> tuple[EnvVar, ...]:
    """The job's variables, named as the launching side sets them."""
    out = []
    for var in job_environment(request):
        value = template(var.value) if var.template else (var.value,)
        if var.name == LD_PREPEND and runtime == "none":
            out.append(EnvVar("LD_LIBRARY_PATH", value, prepend=True))  # no wrapper to do it inside
        else:
            out.append(EnvVar(prefix + var.name, value))
    out.append(EnvVar(prefix + RUN_DIR_VAR, (Slot.RUN_DIR,)))
    return tuple(out)


def describe(request: LaunchRequest) -> LaunchSpec:
    """The launch of `request`, with every backend-specific value left as a slot."""
    profile = request.profile
    launcher = profile.launcher
    runtime = profile.container.runtime
    prefix = env_prefix(runtime) if runtime != "none" else ""
    container: tuple[Arg, ...] = ()
    wrapper: tuple[Word, ...] = ()
    binds: tuple[BindSpec, ...] = ()
    if runtime != "none":
        gpu = () if profile.container.gpu_flag == "none" else ((profile.container.gpu_flag,),)
        container = ((runtime,), ("exec",), (NO_EVAL_FLAG,), *gpu, Splice(Slot.BINDS),
                     (profile.container.image or "",))
        # The wrapper prepends FABRIKIT_LD_PREPEND inside the container, then execs torchrun.
        wrapper = (("/bin/sh",), ("-c",), (LD_WRAPPER,), ("fabrikit-ld",))
        binds = tuple(BindSpec(b.source, b.target or b.source, "ro" if b.readonly else "rw", b.required)
                      for b in request.binds)
    rdzv_conf = f"--rdzv_conf=join_timeout={request.join_timeout_s},read_timeout={launcher.read_timeout_s}"
    return LaunchSpec(
        runtime=runtime,
        env_prefix=prefix,
        env=_env(request, runtime, prefix),
        binds=binds,
        container=container,
        wrapper=wrapper,
        torchrun=tuple(template(word) for word in launcher.torchrun),
        rendezvous=(
            ("--nnodes=", Slot.NODES),
            ("--nproc_per_node=", Slot.NPROC),
            ("--rdzv_id=", Slot.JOB_ID),
            ("--rdzv_backend=c10d",),
            ("--rdzv_endpoint=", Slot.ENDPOINT),
        ),
        options=((rdzv_conf, Slot.IS_HOST), (f"--max_restarts={launcher.max_restarts}",), Splice(Slot.LOCAL_ADDR)),
        job=tuple(template(word) for word in request.job.argv),
    )
