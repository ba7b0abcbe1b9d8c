"""Where the bundled data lives: site profiles, job scripts, definition templates.

fabrikit is installed from its checkout (`pip install -e .`), so the data directories sit
beside the `runner` package. One function per directory keeps that assumption in one place.
"""

from __future__ import annotations

from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent


def project_root() -> Path:
    return _ROOT


def bundled_bindings_dir() -> Path:
    return _ROOT / "bindings"


def bundled_jobs_dir() -> Path:
    return _ROOT / "jobs"


def containers_dir() -> Path:
    return _ROOT / "containers"


def templates_dir() -> Path:
    return Path(__file__).resolve().parent / "templates"
