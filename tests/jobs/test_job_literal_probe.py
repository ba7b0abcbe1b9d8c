"""jobs/literal_probe.py: records argv, environment and files as exact bytes (hex)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

PROBE = Path(__file__).resolve().parents[2] / "jobs" / "literal_probe.py"


def test_probe_records_exact_bytes(tmp_path: Path) -> None:
    walk = tmp_path / "walk"
    odd = os.fsencode(str(walk)) + b"/n\xffme\nx"  # not UTF-8, with a line break
    os.makedirs(odd)
    with open(odd + b"/f", "wb") as fh:
        fh.write(b"\x00\x01content")
    out = tmp_path / "out"
    env = {**os.environ, "RANK": "3", "ODD": "a'b\"c $(x)\n"}
    args = [os.fsencode(str(out)), os.fsencode(str(walk)), b"\xfe", b"", b"--help"]
    result = subprocess.run([sys.executable.encode(), os.fsencode(str(PROBE)), *args], env=env,
                            capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr
    record = json.loads((out / "rank-3.json").read_text())
    assert [bytes.fromhex(a) for a in record["argv"]] == args
    got_env = {bytes.fromhex(k): bytes.fromhex(v) for k, v in record["env"].items()}
    assert got_env[b"ODD"] == b"a'b\"c $(x)\n"
    assert {bytes.fromhex(k): bytes.fromhex(v) for k, v in record["files"].items()} == {odd + b"/f": b"\x00\x01content"}


def test_probe_without_arguments_explains_itself() -> None:
    result = subprocess.run([sys.executable, str(PROBE)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "usage: literal_probe.py" in result.stderr
