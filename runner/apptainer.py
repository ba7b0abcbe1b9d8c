"""Find the container runtime binary, check its version, read an image's labels.

We run the binary ourselves instead of using spython: spython's `Client` always runs the
literal `singularity` binary (it works on Apptainer installs only through the compatibility
link, and ignores `container.runtime`), its `inspect` adds flags we do not want, and its
`build` defaults to sudo and returns `None` on failure (apptainer-and-peers.md, "spython").
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass

from .errors import RuntimeFailure, UserError

# `{{ NAME }}` build arguments with `%arguments` defaults: Apptainer 1.2, SingularityCE 4.0.
MIN_VERSION: dict[str, tuple[int, int]] = {"apptainer": (1, 2), "singularity-ce": (4, 0)}
# `exec --no-eval` (values of APPTAINERENV_*/SINGULARITYENV_* not shell-evaluated): Apptainer
# 1.1.0 (CHANGELOG v1.1.0, apptainer/apptainer#438) and SingularityCE 3.10.0 (CHANGELOG 3.10.0,
# sylabs/singularity#704). Older runtimes, and the legacy `singularity` (hpcng 3.x, Sylabs
# before the CE fork), evaluate every value: `$(...)` runs, `$X` is expanded.
NO_EVAL_SINCE: dict[str, tuple[int, int]] = {"apptainer": (1, 1), "singularity-ce": (3, 10)}
_VERSION = re.compile(r"^(apptainer|singularity-ce|singularity) version v?(\d+)\.(\d+)(?:\.(\d+))?", re.M)


@dataclass(frozen=True)
class Runtime:
    """A runtime binary that was found and is new enough."""

    name: str  # as configured: apptainer | singularity
    path: str
    product: str  # what `--version` says: apptainer | singularity-ce | singularity
    version: tuple[int, ...]
    version_text: str


def which(name: str) -> str | None:
    return shutil.which(name)


def require_binary(name: str) -> str:
    """The binary's path, or a one-line UserError saying how to get one."""
    path = which(name)
    if path is None:
        raise UserError(
            f"{name} not found on PATH (container.runtime: {name}); install Apptainer >= 1.2 "
            f"or load its module (e.g. `module load {name}`), or use --dry-run")
    return path


def parse_version(text: str) -> tuple[str, tuple[int, ...]] | None:
    """('apptainer', (1, 4, 5)) from `apptainer version 1.4.5`; None if unrecognised."""
    match = _VERSION.search(text)
    if not match:
        return None
    parts = tuple(int(p) for p in match.group(2, 3, 4) if p is not None)
    return match.group(1), parts


def _identify(path: str) -> tuple[str, tuple[int, ...], str]:
    """(product, version, first line of `--version`) of the runtime binary at `path`."""
    try:
        result = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"`{path} --version` failed: {exc}") from None
    text = (result.stdout + result.stderr).strip()
    parsed = parse_version(text)
    if result.returncode != 0 or parsed is None:
        raise UserError(f"cannot tell the version of {path} (`--version` printed {text[:200]!r})")
    product, version = parsed
    return product, version, text.splitlines()[0]


def check_no_eval(name: str, *, required: bool) -> None:
    """Refuse a runtime that would shell-evaluate the job's environment values.

    `required`: the job runs here (local backend), so the binary must exist. Otherwise (a
    Slurm submission) a login node without the runtime is fine: the batch script checks the
    runtime on the node it runs on."""
    path = require_binary(name) if required else which(name)
    if path is None:
        return
    product, version, _line = _identify(path)
    since = NO_EVAL_SINCE.get(product)
    if since is None or version[:2] < since:
        shown = ".".join(map(str, version))
        raise UserError(f"{path} is {product} {shown}, which has no `exec --no-eval`: it would run $(...) and "
                        "expand $VARIABLES in the job's environment values; use Apptainer >= 1.1 or "
                        "SingularityCE >= 3.10")


def probe(name: str) -> Runtime:
    """Find `name` and check that it understands build arguments (`{{ NAME }}`)."""
    path = require_binary(name)
    product, version, first_line = _identify(path)
    needed = MIN_VERSION.get(product)
    shown = ".".join(map(str, version))
    if needed is None:
        raise UserError(f"{path} is {product} {shown}, which predates definition-file build "
                        "arguments: install Apptainer >= 1.2 (or SingularityCE >= 4.0)")
    if version[:2] < needed:
        want = ".".join(map(str, needed))
        raise UserError(f"{path} is {product} {shown}; build-image needs {product} >= {want} "
                        "for `{{ NAME }}` build arguments in definition files")
    return Runtime(name=name, path=path, product=product, version=version, version_text=first_line)


def inspect_labels(path: str, image: str) -> dict[str, str]:
    """An image's labels via `inspect --json --labels` (JSON `data.attributes.labels`)."""
    try:
        result = subprocess.run([path, "inspect", "--json", "--labels", image],
                                capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeFailure(f"`{path} inspect {image}` failed: {exc}") from None
    if result.returncode != 0:
        reason = (result.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise RuntimeFailure(f"cannot read the labels of {image}: {reason}")
    try:
        data = json.loads(result.stdout)
        labels = data["data"]["attributes"].get("labels") or {}
    except (ValueError, KeyError, TypeError, AttributeError):
        raise RuntimeFailure(f"`{path} inspect --json --labels {image}` printed no labels JSON") from None
    return {str(k): str(v) for k, v in labels.items()}
