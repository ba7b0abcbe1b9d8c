"""`fabrikit sites`: which clusters fabrikit knows, and what a profile resolves to."""

from __future__ import annotations

from pathlib import Path

import click

from .errors import UserError
from .profile_loader import load_profile, profile_yaml, site_dirs, site_files


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


def _output_name(output: str | None, name: str) -> str:
    return output if output is not None else f"{name}.yaml"


@sites.command("import")
@click.argument("script", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--name", metavar="NAME", help="Site name (default: from the script's file name).")
@click.option("-o", "--output", metavar="FILE", help="Profile to write (default NAME.yaml here; - for stdout).")
@click.option("--force", is_flag=True, help="Replace FILE if it exists.")
@click.option("--json", "as_json", is_flag=True, help="Print the hazard report as JSON.")
def import_(script: Path, name: str | None, output: str | None, force: bool, as_json: bool) -> None:
    """Turn a site guide's Slurm job script into a profile that reproduces it, and report the
    hazards it fixed (whole /usr/lib64 binds, --env values with commas, a fixed rendezvous port,
    no NCCL_NET or NCCL_DEBUG, GH200 without NCCL_PROTO=^LL128, --cleanenv, ...) or could not.

    The script is read, never run: values that only the job knows ($SLURM_JOB_ID, $(hostname))
    become TODO lines, since profile values are literal.
    """
    from .site_import import import_script
    from .site_report import import_report

    if not script.is_file():
        raise UserError(f"{script}: no such file")
    site = name or _site_name_from(script)
    from .profile_loader import check_site_name

    check_site_name(site)
    result = import_script(script, site)
    _write(result.text, site, output, force)
    click.echo(import_report(result, script, _output_name(output, site), as_json),
               err=output == "-")


def _site_name_from(script: Path) -> str:
    import re

    stem = re.sub(r"[^a-z0-9_-]+", "-", script.stem.lower()).strip("-_") or "imported"
    return stem if stem[0].isalnum() else f"site-{stem}"


def _write(text: str, site: str, output: str | None, force: bool) -> None:
    from .profile_writer import check_loads, write_profile

    check_loads(text, site)
    write_profile(text, _output_name(output, site), force=force)


@sites.command("init")
@click.argument("name")
@click.option("-o", "--output", metavar="FILE", help="Profile to write (default NAME.yaml here; - for stdout).")
@click.option("--force", is_flag=True, help="Replace FILE if it exists.")
@click.option("--root", type=click.Path(file_okay=False, exists=True, path_type=Path), default="/",
              show_default=True, help="Probe this directory tree as if it were / (a mounted node image).")
@click.option("--json", "as_json", is_flag=True, help="Print what was found as JSON.")
def init(name: str, output: str | None, force: bool, root: Path, as_json: bool) -> None:
    """Probe this machine (run it on a login or, better, a compute node) and write a draft
    profile for site NAME: Slurm GPU partitions, GRES, CPUs and memory; the fabric (CXI,
    InfiniBand, hsn*/ib* interfaces, fi_info providers); host libfabric, libcxi and NCCL net
    plugins; GPUs, architecture, glibc and the container runtime. Each value says where it was
    found; TODO marks what the probe could not decide. Then: fabrikit doctor --profile FILE.
    """
    from .profile_loader import check_site_name
    from .site_init import draft_profile
    from .site_probe import probe
    from .site_report import init_report

    check_site_name(name)
    out = _output_name(output, name)
    image_dir = Path(out).expanduser().resolve().parent if out != "-" else Path.cwd()
    result = draft_profile(name, probe(root.resolve()), image_dir)
    _write(result.text, name, output, force)
    click.echo(init_report(result, out, as_json), err=output == "-")
