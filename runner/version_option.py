"""`--version` for every console script (`fabrikit`, `run-multinode`, `build-image`).

A user who runs `run-multinode --version` wants to know which fabrikit answered and where it
was installed from, as `fabrikit --version` says; the report is imported only when asked
for, so the option costs a dry run nothing.
"""

from __future__ import annotations

import click


def _show(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from .resources import version_report

    click.echo(version_report(), nl=False)
    ctx.exit()


version_option = click.option(
    "--version", is_flag=True, expose_value=False, is_eager=True, callback=_show,
    help="Show the version, how fabrikit is installed and where its bundled data is, then exit.")
