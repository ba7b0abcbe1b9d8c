"""`fabrikit doctor`: check a site's binds, host libraries and image before submitting."""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.command("doctor")
@click.option("--site", metavar="SITE", help="Site profile name.")
@click.option("--profile", "profile_file", type=click.Path(dir_okay=False, path_type=Path), help="Profile file.")
@click.option("--image", metavar="SIF", help="Check this image instead of the profile's.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of the table.")
def doctor(site: str | None, profile_file: Path | None, image: str | None, as_json: bool) -> int:
    """Preflight a site: bind sources exist, bound host libraries find their dependencies
    (ELF DT_NEEDED, no ldd), their glibc is not newer than the image's, the image exists
    and carries matching labels, the runtime is new enough, GPUs are visible.

    Exit code 1 if any required check fails."""
    from .doctor import format_table, run_checks
    from .profile_loader import load_profile

    if (site is None) == (profile_file is None):
        raise click.UsageError("give exactly one of --site SITE or --profile FILE")
    loaded = load_profile(str(profile_file), is_path=True) if profile_file else load_profile(site)
    checks = run_checks(loaded, image=image)
    if as_json:
        import msgspec

        click.echo(json.dumps({"site": loaded.name, "ok": not any(c.failed for c in checks),
                               "checks": msgspec.to_builtins(checks)}, indent=2))
    else:
        click.echo(format_table(checks))
    return 1 if any(c.failed for c in checks) else 0
