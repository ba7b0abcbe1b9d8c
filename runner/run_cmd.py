"""`run-multinode`: profile + flags -> request -> plan -> (print | submit | run locally).

The plan holds everything the launch will write and run; `--dry-run` prints it, and only
`slurm_submit.submit` / `local_launch.execute` touch the disk, after their preflight.
"""

from __future__ import annotations

from pathlib import Path

import click

from . import run_dir as rundir
from .errors import UserError
from .profile_loader import LoadedProfile, load_profile, site_name_of
from .request import LaunchRequest, build_request, host_library_binds
from .run_dir import LaunchRecord  # the record is built for --dry-run too: one shape for every launch
from .version_option import version_option

EPILOG = """\b
Examples:
  run-multinode --site local --nodes 2                 train on this machine, 2 simulated nodes
  run-multinode --site olivia --nodes 2 --dry-run      print the batch script, submit nothing
  run-multinode --site olivia --nodes 4 -- allreduce_bench.py --max-bytes 268435456
  run-multinode --profile ./mycluster.yaml --nodes 2   a profile file of your own
  run-multinode --resume runs/olivia-20261122-101500   resubmit a run, continue from its checkpoint

\b
The job after `--` is a bundled job (train_ddp.py, allreduce_bench.py, env_probe.py) or a
path to your own script; it replaces the site's default job. Site lookup: --profile FILE,
then $FABRIKIT_SITES (colon-separated dirs), ~/.config/fabrikit/bindings/, bundled bindings/.
"""


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100}, epilog=EPILOG)
@click.option("--site", metavar="SITE", help="Site profile name (see `fabrikit sites`).")
@click.option("--profile", "profile_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Use this profile file instead of looking up --site.")
@click.option("--nodes", type=int, metavar="N", help="Number of nodes (required unless --resume).")
@click.option("--gpus-per-node", type=int, metavar="G", help="Override the profile's GPUs per node.")
@click.option("--nproc-per-node", type=int, metavar="P",
              help="Processes per node (default: one per GPU, else the profile's CPU ranks).")
@click.option("--partition", metavar="P", help="Slurm partition.")
@click.option("--account", metavar="A", help="Slurm account to charge.")
@click.option("--time", "time_limit", metavar="T", help="Time limit, e.g. 30, 02:00:00 or 1-00:00:00.")
@click.option("--job-name", metavar="NAME", help="Slurm job name (default fabrikit-SITE).")
@click.option("--requeue/--no-requeue", default=None,
              help="Requeue after preemption or the time-limit signal, resuming from the checkpoint.")
@click.option("--run-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Run directory (default runs/SITE-YYYYmmdd-HHMMSS).")
@click.option("--resume", "resume_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Resubmit the run in this directory with its settings; training continues from its newest complete checkpoint.")
@click.option("--dry-run", is_flag=True, help="Print the batch script (or local agent commands) and exit.")
@version_option
@click.argument("job", nargs=-1, type=click.UNPROCESSED, metavar="[-- JOB_SCRIPT ARGS...]")
def run_multinode(site: str | None, profile_file: Path | None, nodes: int | None, gpus_per_node: int | None,
                  nproc_per_node: int | None, partition: str | None, account: str | None, time_limit: str | None,
                  job_name: str | None, requeue: bool | None, run_dir: Path | None, resume_dir: Path | None,
                  dry_run: bool, job: tuple[str, ...]) -> int:
    """Launch a multi-node PyTorch job: torchrun with c10d rendezvous on every node.

    On a Slurm site the batch script finds the head node's address, binds the host's fabric
    libraries into the container and runs `srun apptainer exec ... torchrun`. With
    `--site local` the same job runs on this machine as N torchrun agents.
    """
    if resume_dir is not None:
        record = rundir.load_launch(resume_dir)
        run_dir = resume_dir.resolve()
    else:
        if nodes is None:
            raise click.UsageError("Missing option '--nodes'.")
        if (site is None) == (profile_file is None):
            raise click.UsageError("give exactly one of --site SITE or --profile FILE")
        if nodes < 1:  # before the record, whose type says the same less helpfully
            raise UserError(f"--nodes: must be at least 1 (got {nodes})")
        record = LaunchRecord(
            site=site, profile_file=str(profile_file.resolve()) if profile_file else None,
            nodes=nodes, gpus_per_node=gpus_per_node, nproc_per_node=nproc_per_node,
            partition=partition, account=account, time=time_limit, job_name=job_name,
            requeue=requeue, job=tuple(job),
        )
    loaded = _load(record, resume_dir)
    request = _request(loaded, record)
    run_dir = (run_dir or rundir.new_run_dir(loaded.name)).resolve()
    run = rundir.RunDirPlan(run_dir, record=record, profile=loaded, resume=resume_dir is not None)

    if loaded.profile.backend == "local":
        import os

        from . import gpus, local_launch

        lplan = local_launch.plan(request, run, port=local_launch.free_port(), gpus=gpus.detect(os.environ),
                                  environ=os.environ, cpu_count=os.cpu_count() or 1,
                                  absent=local_launch.absent_binds(request))
        if dry_run:
            click.echo(lplan.describe(), nl=False)
            for line in lplan.notes():
                click.echo(line, err=True)
            return 0
        return local_launch.execute(lplan)

    from . import slurm_submit

    splan = slurm_submit.plan(request, run)
    if dry_run:
        click.echo(splan.describe(), nl=False)
        for line in splan.notes():
            click.echo(line, err=True)
        return 0
    submitted = slurm_submit.submit(splan)
    out, log = submitted.logs
    click.echo(f"submitted job {submitted.job_id} ({request.nodes} node(s), site {request.site})")
    click.echo(f"run directory: {run_dir}")
    click.echo(f"logs: {out} (batch script), {log} (all ranks)")
    return 0


def _load(record: LaunchRecord, resume_dir: Path | None) -> LoadedProfile:
    """The profile a run uses; a resumed run uses the resolved copy saved in its directory,
    so that later edits of the site file cannot change a run halfway through."""
    saved = resume_dir.resolve() / rundir.PROFILE_FILE if resume_dir is not None else None
    if saved is not None and saved.is_file():
        import msgspec

        name = record.site or site_name_of(Path(record.profile_file or rundir.PROFILE_FILE))
        return msgspec.structs.replace(load_profile(str(saved), is_path=True), name=name)
    if record.profile_file:
        return load_profile(record.profile_file, is_path=True)
    return load_profile(record.site or "")


def _request(loaded: LoadedProfile, record: LaunchRecord) -> LaunchRequest:
    job = record.job
    return build_request(
        loaded,
        nodes=record.nodes,
        gpus_per_node=record.gpus_per_node,
        nproc_per_node=record.nproc_per_node,
        partition=record.partition,
        account=record.account,
        time=record.time,
        job_name=record.job_name,
        job_script=job[0] if job else None,
        job_args=job[1:],
        requeue=record.requeue,
        host_binds=host_library_binds(loaded.profile, where=str(loaded.path)),
    )
