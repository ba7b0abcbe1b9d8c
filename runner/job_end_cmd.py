"""`fabrikit job-end`: the last lines of every generated job.

Called by the batch script after the job step ends. Prints the transport verdict (when the
profile checks it) and, if the step failed, one line naming the cause; that line is the
last line of the job's output, where a user looks first.

The verdict line is `fabrikit check-log`'s summary: the same analysis (runner.nccl_log), fed
by the same block reader (`feed_stream`), so the two cannot read a log differently. When the
step failed, the failure-cause scan reads the log a second time, line by line; that costs
less than feeding the analysis line by line did (a 50 MB failing log: 6.5 s against 7.0 s),
and both passes hold bounded memory.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import click

from . import fabrics
from .errors import UserError


def _open(log: Path):
    try:
        return open(log, "rb")
    except OSError as exc:
        raise UserError(f"{log}: cannot read the job log: {exc.strerror}") from None


def _lines(log: Path) -> Iterator[str]:
    """The log's lines for the failure-cause scan (each cut as check-log cuts a line)."""
    from .bounded_lines import iter_stream_lines
    from .nccl_log import MAX_LINE_CHARS

    with _open(log) as stream:
        for raw in iter_stream_lines(stream, MAX_LINE_CHARS):
            yield raw.decode("utf-8", "replace")


@click.command("job-end", hidden=True)
@click.argument("log", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--status", type=int, required=True, help="Exit status of the job step.")
@click.option("--fabric", default=None, help="The profile's fabric kind.")
@click.option("--endpoint", default=None, help="The rendezvous endpoint the job used.")
@click.option("--check-transport/--no-check-transport", default=True)
def job_end(log: Path, status: int, fabric: str | None, endpoint: str | None, check_transport: bool) -> int:
    """Summarise a finished job step from its combined log (used by generated scripts)."""
    from .failure_cause import diagnose, from_nccl

    analyser = None
    if check_transport:
        from . import compressed_logs
        from .nccl_log import LogAnalyser, job_guard_env

        # Runs in the job's own batch script: its environment is the job's.
        analyser = LogAnalyser(source=str(log), expected_fabric=fabrics.checked(fabric),
                               env=job_guard_env(os.environ), reread=compressed_logs.blocks_again([log]))
    if analyser is not None:  # read in blocks, as check-log reads it
        with _open(log) as stream:
            analyser.feed_stream(stream, str(log))
    cause = None if status == 0 else diagnose(_lines(log), status=status, endpoint=endpoint)
    if analyser is not None:
        verdict = analyser.result()
        click.echo(verdict.summary)
        if cause is not None and cause.kind == "unknown":
            # no srun/torchrun report of its own, but maybe NCCL's (a link that broke
            # mid-run, a full /dev/shm)
            cause = from_nccl(status, verdict.ranks) or cause
    if cause is not None:
        click.echo(f"fabrikit: FAILED: {cause.message} (log: {log})")
        return 1
    return 0
