"""`fabrikit sites`: which clusters fabrikit knows, and what a profile resolves to."""

from __future__ import annotations

import click
import yaml

from .errors import UserError
from .profile import to_builtins
from .profile_loader import LoadedProfile, load_profile, site_dirs, site_files


def profile_yaml(loaded: LoadedProfile) -> str:
    """The fully resolved profile (after `extends`) as YAML, with where it came from."""
    chain = " <- ".join(str(p) for p in reversed(loaded.chain))
    header = f"# site {loaded.name}: resolved from {chain}\n"
    return header + yaml.safe_dump(to_builtins(loaded.profile), sort_keys=False, default_flow_style=False, width=100)


@click.group(invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.pass_context
def sites(ctx: click.Context) -> None:
    """List the site profiles fabrikit can find, where each comes from (env: $FABRIKIT_SITES,
    user: ~/.config/fabrikit/bindings/, bundled: shipped with fabrikit) and which file
    shadows which. The first match in that order wins."""
    if ctx.invoked_subcommand is not None:
        return
    click.echo(sites_listing(), nl=False)


def sites_listing() -> str:
    """The `fabrikit sites` table: one row per site (the winning file's origin and
    description), under it the file when it is not a bundled one and every file it shadows,
    then the directories searched."""
    rows: list[tuple[str, str, str, list[str]]] = []
    for name, files in sorted(site_files().items()):
        try:
            description = load_profile(name).profile.description
        except UserError as exc:
            description = f"INVALID: {exc}"
        origin, path = files[0]
        notes = [] if origin == "bundled" else [f"file: {path}"]
        notes.extend(f"shadows: {other} {other_path}" for other, other_path in files[1:])
        rows.append((name, origin, description, notes))
    width = max([4, *(len(row[0]) for row in rows)])
    lines = [f"{'site':<{width}}  {'from':<7}  description"]
    for name, origin, description, notes in rows:
        lines.append(f"{name:<{width}}  {origin:<7}  {description}")
        lines.extend(f"{'':<{width}}  {'':<7}  {note}" for note in notes)
    lines.append("")
    lines.append("searched in this order (first match wins):")
    for origin, directory in site_dirs():
        note = "" if directory.is_dir() else "  (does not exist)"
        lines.append(f"  {origin:<7}  {directory}{note}")
    return "\n".join(lines) + "\n"


@sites.command("show")
@click.argument("site")
def show(site: str) -> None:
    """Print SITE's fully resolved profile (after `extends`) as YAML."""
    click.echo(profile_yaml(load_profile(site)), nl=False)
