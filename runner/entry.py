"""Process entry points and the one-line error handling they share.

`run-multinode` and `build-image` start here rather than in `runner.cli`, so that they
import only the command they run (the `fabrikit` group and its version option cost start-up
time a dry run does not need). Every `UserError` and click usage error is printed as ONE
line (`prog: error: ...`) with exit code 2, never a traceback.
"""

from __future__ import annotations

import sys

import click

from .errors import RuntimeFailure, UserError


def run_command(command: click.Command | click.Group, prog: str, args: list[str] | None = None) -> None:
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



def run_multinode_main() -> None:
    from .run_cmd import run_multinode

    run_command(run_multinode, "run-multinode")


def build_image_main() -> None:
    from .build_cmd import build_image

    run_command(build_image, "build-image")
