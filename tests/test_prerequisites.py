"""A missing program is a skip locally and an error in CI (FABRIKIT_REQUIRE_TOOLS=1).

Runs real tests of this suite in a child pytest with an empty PATH, so the console scripts
and shellcheck they need are not found; CI must never turn such a test into a silent skip.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REQUIRE_TOOLS, ROOT

NEEDS_A_PROGRAM = [
    "tests/test_build_image.py::test_missing_apptainer_through_the_console_script",  # build-image
    "tests/test_render.py::test_script_passes_shellcheck[olivia]",  # shellcheck
]


def _child_pytest(node: str, tmp_path: Path, require: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != REQUIRE_TOOLS}
    env["PATH"] = str(tmp_path / "empty-bin")  # nothing on it: no build-image, no shellcheck
    if require is not None:
        env[REQUIRE_TOOLS] = require
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", node],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)


@pytest.mark.parametrize("node", NEEDS_A_PROGRAM, ids=lambda n: n.split("::")[1])
def test_missing_program_skips_locally_and_fails_when_required(node: str, tmp_path: Path) -> None:
    (tmp_path / "empty-bin").mkdir()
    local = _child_pytest(node, tmp_path, require=None)
    assert local.returncode == 0 and "1 skipped" in local.stdout, local.stdout[-2000:]
    assert "not found on PATH" in local.stdout
    required = _child_pytest(node, tmp_path, require="1")
    assert required.returncode == 1 and "1 failed" in required.stdout, required.stdout[-2000:]
    assert f"[{REQUIRE_TOOLS}=1: this is an error, not a skip]" in required.stdout
