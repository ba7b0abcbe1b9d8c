"""Run directories: one per launch, holding everything needed to understand or resume it.

Layout: `job.sbatch` (Slurm) or `agents.txt` (local), `launch.json` (the request's inputs,
for `--resume`), `profile.yaml` (the resolved profile as used), `jobs/` (copies of the
bundled jobs, so a later edit of fabrikit cannot change a running or requeued job), logs and
`checkpoints/`. Files are written to a temporary name and renamed, so an interrupted
submission never leaves a half-written script behind.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from .atomic_write import writable_dir, write_atomic
from .errors import UserError
from .resources import bundled_jobs_dir

LAUNCH_FILE = "launch.json"


def new_run_dir(site: str, parent: Path | None = None) -> Path:
    """`runs/<site>-<YYYYmmdd-HHMMSS>[-N]` under the current directory, not yet created."""
    base = (parent or Path("runs")) / f"{site}-{time.strftime('%Y%m%d-%H%M%S')}"
    candidate, n = base, 1
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return candidate


def create(run_dir: Path) -> Path:
    """Create the run directory (and parents); refuse one that already has a launch in it."""
    run_dir = run_dir.resolve()
    if (run_dir / LAUNCH_FILE).exists():
        raise UserError(f"{run_dir} already holds a run; use --resume {run_dir} to continue it")
    return writable_dir(run_dir, "run directory")


def copy_bundled_jobs(run_dir: Path) -> None:
    """Copy the bundled job scripts into the run directory (replacing an older copy as a
    whole). File by file, without modes: an installed package may be read-only (a site-wide
    install), its copy must stay the user's to replace. The package marker `__init__.py`
    stays behind: inside the container the jobs are plain scripts."""
    import shutil

    target = run_dir / "jobs"
    staging = run_dir / ".jobs.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    for script in sorted(bundled_jobs_dir().glob("*.py")):
        if script.name != "__init__.py":
            shutil.copyfile(script, staging / script.name)
    shutil.rmtree(target, ignore_errors=True)
    os.replace(staging, target)


def save_launch(run_dir: Path, inputs: dict[str, Any]) -> None:
    import json

    write_atomic(run_dir / LAUNCH_FILE, json.dumps(inputs, indent=2, sort_keys=True) + "\n")


def load_launch(run_dir: Path) -> dict[str, Any]:
    import json

    path = run_dir / LAUNCH_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{run_dir} is not a fabrikit run directory (no {LAUNCH_FILE})") from None
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: unreadable: {exc}") from None
