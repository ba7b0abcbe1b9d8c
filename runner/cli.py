"""Command-line entry points: `fabrikit`, `run-multinode`, `build-image`.

Subcommands are imported only when they run (`LazyGroup`), so `run-multinode --dry-run`
pays for click, yaml, msgspec and the renderer, nothing else. Every `UserError` and click
usage error is printed as ONE line (`prog: error: ...`) with exit code 2, never a traceback.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

from .entry import run_command
from .version_option import version_option

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class LazyGroup(click.Group):
    """A click group whose subcommands live in other modules and load on first use."""

    def __init__(self, *args: Any, lazy: dict[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self._lazy])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self._lazy:
            module, attr = self._lazy[name].split(":")
            return getattr(importlib.import_module(module), attr)
        return super().get_command(ctx, name)


@click.group(
    cls=LazyGroup,
    context_settings=CONTEXT,
    lazy={
        "run-multinode": "runner.run_cmd:run_multinode",
        "build-image": "runner.build_cmd:build_image",
        "sites": "runner.sites_cmd:sites",
        "check-log": "runner.check_log_cmd:check_log",
        "doctor": "runner.doctor_cmd:doctor",
        "report": "runner.report_cmd:report",
        "job-end": "runner.job_end_cmd:job_end",
    },
)
@version_option
def fabrikit() -> None:
    """fabrikit: PyTorch on Slurm over Slingshot or InfiniBand, in Apptainer, provably fast.

    \b
    Typical session:
      fabrikit sites                         which clusters fabrikit knows
      build-image olivia                     build the site's image (once)
      run-multinode --site olivia --nodes 2 --dry-run   read the batch script
      run-multinode --site olivia --nodes 2  submit it
      fabrikit check-log runs/olivia-*/job-*.log        did NCCL use the fabric?
      run-multinode --site local --nodes 2   the same job on this machine
    """


def main() -> None:
    run_command(fabrikit, "fabrikit")


def run_multinode_main() -> None:
    from .entry import run_multinode_main as entry

    entry()


def build_image_main() -> None:
    from .entry import build_image_main as entry

    entry()


if __name__ == "__main__":  # python -m runner.cli
    main()
