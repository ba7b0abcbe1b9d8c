"""Where the bundled data lives: site profiles, job scripts, definition and script templates.

The one place that knows. Every folder is found through the import system, as the package
`runner.bundled.<name>` (or `runner` for the script templates), so the answer is whatever the
installation made of it (see `runner/bundled/__init__.py`):

* a wheel, sdist, `pip install .`, pipx, `pip install git+URL`: copies inside the installed
  package, `.../site-packages/runner/bundled/{bindings,containers,jobs}`;
* `pip install -e .`: the checkout's own `bindings/`, `containers/`, `jobs/`, mapped there by
  setuptools' editable finder, so edits show without reinstalling.

Never a path computed from this file's location: an installed `runner` has no checkout
beside it. We ask `importlib` for the package's directory rather than calling
`importlib.resources.files()`, which would cost `run-multinode --dry-run` ~8 ms of imports
for the same answer (the packages are regular directories; pip never installs zipped).
"""

from __future__ import annotations

import importlib
from functools import cache
from pathlib import Path

from .errors import RuntimeFailure

# name -> (package, folder inside it); `fabrikit --version` lists them in this order.
DATA_PACKAGES = {
    "bindings": ("runner.bundled.bindings", ""),
    "containers": ("runner.bundled.containers", ""),
    "jobs": ("runner.bundled.jobs", ""),
    "templates": ("runner", "templates"),
}


@cache
def _package_dir(package: str) -> Path:
    """The directory of the regular package `package` as the import system finds it."""
    try:
        module = importlib.import_module(package)
    except ModuleNotFoundError as exc:
        raise RuntimeFailure(
            f"fabrikit's bundled data is missing ({exc.name} cannot be imported): install fabrikit "
            "with pip (`python3 -m pip install .`, or `-e .` in a checkout); a checkout put on "
            "PYTHONPATH without installing has no data") from None
    locations = list(module.__spec__.submodule_search_locations or [])
    if not locations or not Path(locations[0]).is_dir():
        raise RuntimeFailure(f"fabrikit's bundled data: package {package} is not a directory ({locations})")
    return Path(locations[0])


def _data_dir(name: str) -> Path:
    package, folder = DATA_PACKAGES[name]
    return _package_dir(package) / folder if folder else _package_dir(package)


def bundled_bindings_dir() -> Path:
    """Bundled site profiles; presets in its `presets/`."""
    return _data_dir("bindings")


def bundled_jobs_dir() -> Path:
    """The scripts run inside the container (copied into every run directory)."""
    return _data_dir("jobs")


def containers_dir() -> Path:
    """Apptainer definition templates; shared fragments in its `common/`."""
    return _data_dir("containers")


def templates_dir() -> Path:
    """The `@NAME@` templates of generated batch scripts."""
    return _data_dir("templates")


def data_locations() -> dict[str, Path]:
    """Every bundled-data folder and where it was found (for `fabrikit --version`)."""
    return {name: _data_dir(name) for name in DATA_PACKAGES}


def install_kind() -> str:
    """How the `fabrikit` distribution was installed, from its PEP 610 `direct_url.json`:
    `editable install of DIR`, `installed from URL` (a wheel file, a git URL, a directory) or
    `installed from an index`."""
    import json
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        dist = distribution("fabrikit")
    except PackageNotFoundError:
        return "not installed (no package metadata)"
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
    except ValueError:
        direct = {}
    url = direct.get("url", "")
    if not url:
        return "installed from an index"
    if direct.get("dir_info", {}).get("editable"):
        return f"editable install of {url.removeprefix('file://')}"
    vcs = direct.get("vcs_info", {})
    return f"installed from {url}" + (f" @ {vcs['commit_id'][:12]}" if vcs.get("commit_id") else "")


def version_report() -> str:
    """`fabrikit --version`: the version, how it is installed, the code and every
    bundled-data folder as found now (an editable install shows the checkout's folders)."""
    import sys

    from . import __version__

    lines = [f"fabrikit {__version__} ({install_kind()})",
             f"  python      {sys.executable} ({sys.version.split()[0]})",
             f"  code        {_package_dir('runner')}"]
    for name in DATA_PACKAGES:
        try:
            lines.append(f"  {name:<10}  {_data_dir(name)}")
        except RuntimeFailure as exc:  # --version is where one looks when data is missing
            lines.append(f"  {name:<10}  MISSING: {exc}")
    from .fast_scan import describe

    lines.append(f"  {'check-log':<10}  {describe()}")
    return "\n".join(lines) + "\n"
