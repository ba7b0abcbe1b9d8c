"""`fabrikit job-end`: the last lines of every generated job.

Called by the batch script after the job step ends. Prints the transport verdict (when the
profile checks it) and, if the step failed, one line naming the cause; that line is the
last line of the job's output, where a user looks first.
"""

from __future__ import annotations

from pathlib import Path

import click

from .errors import UserError


@click.command("job-end", hidden=True)
@click.argument("log", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--status", type=int, required=True, help="Exit status of the job step.")
@click.option("--fabric", default=None, help="The profile's fabric kind.")
@click.option("--endpoint", default=None, help="The rendezvous endpoint the job used.")
@click.option("--check-transport/--no-check-transport", default=True)
def job_end(log: Path, status: int, fabric: str | None, endpoint: str | None, check_transport: bool) -> int:
    """Summarise a finished job step from its combined log (used by generated scripts)."""
    from .failure_cause import diagnose

    try:
        text = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        raise UserError(f"{log}: cannot read the job log: {exc.strerror}") from None
    if check_transport:
        from .nccl_log import analyse

        expected = fabric if fabric in ("slingshot", "infiniband", "ethernet") else None
        click.echo(analyse(text, source=str(log), expected_fabric=expected).summary)
    cause = diagnose(text, status=status, endpoint=endpoint)
    if cause is not None:
        click.echo(f"fabrikit: FAILED: {cause.message} (log: {log})")
        return 1
    return 0
