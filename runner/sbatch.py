"""Handing a batch script to Slurm: its `#SBATCH` lines, the sbatch command, the job id.

Shared by `run-multinode` (runner.slurm_submit) and `build-image --submit`
(runner.image_build.submit), so both write options the same way, call sbatch the same way
and read its answer the same way. Values on `#SBATCH` lines are never quoted: sbatch reads
those lines itself, so the callers check them with `runner.validate.sbatch_word`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from .errors import RuntimeFailure, UserError

# `sbatch --parsable` prints "ID" or "ID;CLUSTER" (compiled on first use: dry runs never read it).
_JOB_ID = r"^(\d+)(?:;\S+)?$"


def directives(options: Iterable[str]) -> str:
    """One `#SBATCH` line per option, in the given order."""
    return "\n".join(f"#SBATCH {option}" for option in options)


def argv(script: Path, *, chdir: Path, output: str | None = None) -> tuple[str, ...]:
    """The sbatch command for `script`, run in `chdir`; `output` is an --output pattern."""
    return ("sbatch", "--parsable", *([f"--output={output}"] if output else []), f"--chdir={chdir}", str(script))


def require(hint: str) -> None:
    """A one-line UserError (`hint` says what to do instead) when sbatch is not on PATH."""
    import shutil

    if shutil.which("sbatch") is None:
        raise UserError(f"sbatch not found: {hint}")


def submit(command: tuple[str, ...], *, what: str = "job") -> str:
    """Run the sbatch `command` (see `argv`) and return the job id; a refusal is one line
    naming the script, which stays where it was written."""
    import subprocess

    try:
        result = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise RuntimeFailure(f"could not run sbatch: {exc}") from None
    if result.returncode != 0:
        reason = (result.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise RuntimeFailure(f"sbatch refused the {what}: {reason} (script kept in {command[-1]})")
    match = re.match(_JOB_ID, result.stdout.strip())
    if not match:
        raise RuntimeFailure(f"sbatch printed no job id: {result.stdout.strip()!r}")
    return match.group(1)
