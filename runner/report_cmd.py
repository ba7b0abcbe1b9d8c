"""`fabrikit report RUN_DIR [--baseline RUN_DIR] [--output DIR] [--json]`.

Prints the run's configuration, throughput per epoch and overall, the scaling table against
a baseline run, GPU utilisation (from `gpu-<host>.csv`) and the NCCL transport verdict; writes
`throughput.png`, `gpu_utilisation.png` (only when GPU samples exist) and `report.json` into
`--output` (default `RUN_DIR/report/`). Reading the run and writing the files live in
runner.run_report (its docstring maps the report's modules); this module imports them (and
matplotlib) only when the command runs.

Exit codes: 0 report written; 2 bad input (not a run directory, no training lines, an
unreadable file, an unwritable output directory), as one line.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from .errors import UserError


@click.command("report")
@click.argument("run_dir", type=click.Path(path_type=Path), metavar="RUN_DIR")
@click.option("--baseline", type=click.Path(path_type=Path), metavar="RUN_DIR",
              help="A run to compare with (e.g. the same job on 1 node): adds the scaling "
                   "table (speed-up, efficiency) and its series to throughput.png.")
@click.option("--output", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              help="Where the plots and report.json go (default RUN_DIR/report/).")
@click.option("--json", "as_json", is_flag=True,
              help="Print report.json's content instead of the text report.")
def report(run_dir: Path, baseline: Path | None, output: Path | None, as_json: bool) -> int:
    """Throughput, scaling, GPU utilisation and transport of a finished (or running) run."""
    from .report_text import format_report
    from .run_report import load_run, write_report
    from .throughput import scaling

    rep = load_run(run_dir)
    base = load_run(baseline) if baseline is not None else None
    if base is not None and base.run_dir.resolve() == rep.run_dir.resolve():
        raise UserError("--baseline is the run itself; give another run directory")
    scale = scaling(rep, base) if base is not None else None
    out_dir = output if output is not None else run_dir / "report"
    data, paths = write_report(rep, out_dir, base, scale)
    if as_json:
        click.echo(json.dumps(data, indent=2))
    else:
        click.echo(format_report(rep, scale, paths))
        for note in data["warnings"][len(rep.warnings):]:
            click.echo(f"fabrikit report: warning: {note}", err=True)
    return 0


def main() -> None:  # python -m runner.report_cmd
    from .entry import run_command

    run_command(report, "fabrikit report")


if __name__ == "__main__":
    main()
