"""Small helpers shared by the fast tests: run the real console scripts as subprocesses."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 60,
        prog: str = "run-multinode") -> subprocess.CompletedProcess[str]:
    """Run a fabrikit console script exactly as a user would (falls back to `python -m`)."""
    exe = shutil.which(prog)
    if exe is not None:
        argv = [exe, *args]
    else:  # not pip-installed: same code path through the module entry point
        entry = {"run-multinode": "run_multinode_main", "build-image": "build_image_main", "fabrikit": "main"}[prog]
        argv = [sys.executable, "-c", f"import sys; from runner.cli import {entry}; sys.argv[0] = {prog!r}; {entry}()", *args]
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(argv, capture_output=True, text=True, env=full_env, cwd=cwd, timeout=timeout)


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    """Assert the CLI failed the way bad input must fail, and return the message."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def wait_for(predicate, timeout: float, what: str, poll: float = 0.2) -> None:
    """Poll `predicate` until it is true; fail naming `what` after `timeout` seconds."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
