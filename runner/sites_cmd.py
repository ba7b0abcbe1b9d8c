"""`fabrikit sites`: which clusters fabrikit knows, and what a profile resolves to."""

from __future__ import annotations

import click
import yaml

from .errors import UserError
from .profile import to_builtins
from .profile_loader import LoadedProfile, list_sites, load_profile


def profile_yaml(loaded: LoadedProfile) -> str:
    """The fully resolved profile (after `extends`) as YAML, with where it came from."""
    chain = " <- ".join(str(p) for p in reversed(loaded.chain))
    header = f"# site {loaded.name}: resolved from {chain}\n"
    return header + yaml.safe_dump(to_builtins(loaded.profile), sort_keys=False, default_flow_style=False, width=100)


@click.group(invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.pass_context
def sites(ctx: click.Context) -> None:
    """List the site profiles fabrikit can find (lookup order: $FABRIKIT_SITES,
    ~/.config/fabrikit/bindings/, bundled bindings/)."""
    if ctx.invoked_subcommand is not None:
        return
    rows = []
    for name, path in sorted(list_sites().items()):
        try:
            description = load_profile(name).profile.description
        except UserError as exc:
            description = f"INVALID: {exc}"
        rows.append((name, description, str(path)))
    width = max((len(r[0]) for r in rows), default=4)
    for name, description, path in rows:
        click.echo(f"{name:<{width}}  {description}")


@sites.command("show")
@click.argument("site")
def show(site: str) -> None:
    """Print SITE's fully resolved profile (after `extends`) as YAML."""
    click.echo(profile_yaml(load_profile(site)), nl=False)
