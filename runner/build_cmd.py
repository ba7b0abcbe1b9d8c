"""`build-image`: build the site's Apptainer image from its definition template.

profile -> `image_plan.plan_build` (pure) -> `--dry-run` prints it | `image_cache` (label
hash) -> `image_preflight` (runtime version, arch, binds, output dir, free space) ->
`image_build.execute` or `image_submit.submit` (`--submit`).
"""

from __future__ import annotations

import time
from pathlib import Path

import click

from .errors import UserError
from .image_cache import CacheState, check_cache
from .image_labels import LABEL_HASH
from .image_plan import plan_build
from .image_preflight import preflight
from .profile_loader import load_profile
from .validate import BUILD_ARG_NAME, matches
from .version_option import version_option

EPILOG = """\b
Examples:
  build-image olivia --dry-run            print the rendered definition and the build command
  build-image raven                       build (or say the image is up to date)
  build-image olivia --submit             build on an aarch64 compute node through sbatch
  build-image --profile tests/sites/testcluster.yaml --build-arg TORCH_WHEEL=torch-...whl
  build-image raven --output /scratch/me/raven.sif --force

\b
The image is rebuilt only when its org.fabrikit.definition-sha256 label differs from the
hash of the rendered definition plus the build arguments (--force rebuilds anyway). Next to
the image: IMAGE.def (the rendered definition) and IMAGE.build.log.
"""


def _parse_build_args(values: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not matches(BUILD_ARG_NAME, key):
            raise click.BadParameter(f"{item!r} is not KEY=VALUE with KEY a valid name", param_hint="'--build-arg'")
        out[key] = value
    return out


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100}, epilog=EPILOG)
@click.argument("site", required=False)
@click.option("--profile", "profile_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Use this profile file instead of looking up SITE.")
@click.option("--dry-run", is_flag=True,
              help="Print the rendered definition and the exact build command; build nothing.")
@version_option
@click.option("--force", is_flag=True,
              help="Rebuild even if the image is up to date (or was not built by build-image).")
@click.option("--submit", is_flag=True,
              help="Build on a compute node through sbatch (for an image of another architecture).")
@click.option("--build-arg", "build_args", multiple=True, metavar="KEY=VALUE",
              help="Set a definition build argument (repeatable; overrides the profile's container.build.args).")
@click.option("--output", type=click.Path(path_type=Path), metavar="PATH",
              help="Write the image here instead of the profile's container.image.")
def build_image(site: str | None, profile_file: Path | None, dry_run: bool, force: bool, submit: bool,
                build_args: tuple[str, ...], output: Path | None) -> int:
    """Build SITE's Apptainer image from its definition template (containers/*.def)."""
    if (site is None) == (profile_file is None):
        raise click.UsageError("give exactly one of SITE or --profile FILE")
    cli_args = _parse_build_args(build_args)
    loaded = load_profile(str(profile_file), is_path=True) if profile_file else load_profile(site or "")
    plan = plan_build(loaded, cli_args=cli_args, output=output)

    from .apptainer import probe, require_binary, which

    if dry_run:
        click.echo(plan.describe(), nl=False)
        state = check_cache(plan, which(plan.runtime))
        for line in plan.summary_lines():
            click.echo(line, err=True)
        click.echo(f"# image: {_dry_verdict(state, force)}", err=True)
        return 0

    started = time.monotonic()
    runtime_path = which(plan.runtime)
    if runtime_path is None and not submit:
        runtime_path = require_binary(plan.runtime)  # raises the one-line "not found" error
    if not force:
        state = check_cache(plan, runtime_path)
        if state.status == "current":
            click.echo(f"up to date: {plan.output} ({LABEL_HASH} {plan.definition_sha256[:12]} matches; "
                       f"checked in {time.monotonic() - started:.2f} s; --force rebuilds)")
            return 0
        if state.status == "foreign":
            raise UserError(f"{state.detail}: refusing to replace it; pass --force to replace it, "
                            "or --output to build elsewhere")
    if submit:
        from .image_submit import submit as submit_build

        preflight(plan, submit=True)
        done = submit_build(plan, loaded)
        click.echo(f"submitted build job {done.job_id} for {plan.output} ({plan.arch})")
        click.echo(f"batch script: {done.script_path}")
        click.echo(f"log: {done.log_path}")
        return 0
    runtime = probe(plan.runtime)
    from .image_build import execute

    preflight(plan)
    result = execute(plan, runtime)
    size_mb = result.size_bytes / 1e6
    click.echo(f"built {result.image} ({size_mb:.1f} MB) in {result.seconds:.0f} s; "
               f"definition {plan.definition_path}, log {result.log_path}")
    if not result.labels_ok:
        click.echo(f"build-image: warning: {result.image} does not carry the expected {LABEL_HASH} label; "
                   "the next run will not recognise it as up to date", err=True)
    return 0


def _dry_verdict(state: CacheState, force: bool) -> str:
    if state.status == "missing":
        return f"would build ({state.detail})"
    if state.status == "current":
        return (f"would rebuild (--force; {state.detail})" if force
                else f"up to date, would do nothing ({state.detail})")
    if state.status == "stale":
        return f"would rebuild ({state.detail})"
    if state.status == "foreign":
        return (f"would replace it (--force; {state.detail})" if force
                else f"would refuse to replace it without --force ({state.detail})")
    return state.detail
