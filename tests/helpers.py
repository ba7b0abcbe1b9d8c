"""Small helpers shared by the fast tests: run the real console scripts as subprocesses."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REQUIRE_TOOLS = "FABRIKIT_REQUIRE_TOOLS"


def unavailable(require_var: str, what: str, reasons) -> None:
    """Skip for a missing prerequisite, with the reason; when ``require_var`` is 1 (CI sets
    them all) fail instead, so a prerequisite that went missing cannot turn tests green."""
    import pytest

    reason = f"{what}: " + "; ".join([reasons] if isinstance(reasons, str) else reasons)
    if os.environ.get(require_var) == "1":
        pytest.fail(f"{reason} [{require_var}=1: this is an error, not a skip]", pytrace=False)
    pytest.skip(reason)


def require_program(name: str, how: str) -> str:
    """Path of the program ``name`` (a console script, shellcheck, ...), else skip, or fail
    under FABRIKIT_REQUIRE_TOOLS=1. ``how`` says how to install it."""
    path = shutil.which(name)
    if path is None:
        unavailable(REQUIRE_TOOLS, f"{name} not found on PATH", how)
    return path


def require_file(path: str | Path, what: str, how: str) -> None:
    """Like `require_program`, for a library or data file at a fixed path."""
    if not Path(path).exists():
        unavailable(REQUIRE_TOOLS, f"{what} not found ({path})", how)


def require_module(name: str, how: str) -> None:
    """Like `require_program`, for a Python module (torch for the local-launch tests)."""
    import importlib.util

    if importlib.util.find_spec(name) is None:
        unavailable(REQUIRE_TOOLS, f"Python module {name} not importable", how)


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
