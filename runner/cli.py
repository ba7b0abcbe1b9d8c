"""Command-line entry points: `fabrikit`, `run-multinode`, `build-image`.

Subcommands are imported only when they run (`LazyGroup`), so `run-multinode --dry-run`
pays for click, yaml, msgspec and the renderer, nothing else. Every `UserError` and click
usage error is printed as ONE line (`prog: error: ...`) with exit code 2, never a traceback.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from .errors import RuntimeFailure, UserError

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
@click.version_option(package_name="fabrikit", prog_name="fabrikit")
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


def _run(command: click.Command | click.Group, prog: str, args: list[str] | None = None) -> None:
    """Invoke a click command with one-line errors and the right exit codes."""
    try:
        rv = command.main(args=args, prog_name=prog, standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:  # pragma: no cover - click >= 8.2
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
        sys.exit(2)
    except click.UsageError as exc:
        hint = f" (see {exc.ctx.command_path} --help)" if exc.ctx else ""
        click.echo(f"{prog}: error: {exc.format_message()}{hint}", err=True)
        sys.exit(2)
    except click.ClickException as exc:
        click.echo(f"{prog}: error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except (UserError, RuntimeFailure) as exc:
        click.echo(f"{prog}: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo(f"{prog}: interrupted", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        click.echo(f"{prog}: interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:  # `run-multinode --dry-run | head`
        sys.exit(0)
    sys.exit(rv if isinstance(rv, int) else 0)


def main() -> None:
    _run(fabrikit, "fabrikit")


def run_multinode_main() -> None:
    from .run_cmd import run_multinode

    _run(run_multinode, "run-multinode")


def build_image_main() -> None:
    from .build_cmd import build_image

    _run(build_image, "build-image")


if __name__ == "__main__":  # python -m runner.cli
    main()
