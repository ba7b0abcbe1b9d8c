"""check-log reads compressed logs (gzip, bzip2, xz; zstd where Python can) as their text.

The files are made by the real compressors (Debian's gzip, bzip2, xz-utils and zstd), or by
Python's modules where a tool is missing (the bytes are the same format), and read by a
real `python -m runner.check_log_cmd` process, by path and on stdin. Read as bytes, these
logs held no NCCL line and check-log said "no network selection seen", exit 0.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import nccl_logs as L  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
_PYTHON = {"gzip": gzip.compress, "bzip2": bz2.compress, "xz": lzma.compress}
_SUFFIX = {"gzip": ".gz", "bzip2": ".bz2", "xz": ".xz", "zstd": ".zst"}


def _zstd_in_python() -> bool:
    try:
        from compression import zstd  # noqa: F401  # Python >= 3.14
    except ImportError:
        return False
    return True


def compress(path: Path, tool: str) -> Path:
    """`path` compressed by `tool` (its CLI if installed, else Python's module)."""
    out = path.with_name(path.name + _SUFFIX[tool])
    if shutil.which(tool):
        with open(out, "wb") as f:
            subprocess.run([tool, "-c", str(path)], stdout=f, check=True, timeout=60)
    else:
        out.write_bytes(_PYTHON[tool](path.read_bytes()))
    return out


def check_log(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "runner.check_log_cmd", *args], cwd=REPO,
                          env=env, input=stdin, capture_output=True, timeout=120)


def verdict_of(proc: subprocess.CompletedProcess) -> dict:
    d = json.loads(proc.stdout)
    d.pop("source"), d.pop("sources")  # the file's name is all that may differ
    for rank in d["ranks"]:
        rank.pop("sources")
    return d


@pytest.fixture()
def plain(tmp_path: Path) -> Path:
    """A 4-node Slingshot job whose ranks' lines come one rank after the other."""
    streams = L.job(L.ofi_cxi_rank, nodes=4, gpn=4)
    return L.write_log(tmp_path / "job.log", [line for s in streams for line in s])


@pytest.mark.parametrize("tool", ["gzip", "bzip2", "xz"])
def test_compressed_log_reads_as_its_text(plain: Path, tool: str):
    want = check_log("--json", str(plain))
    assert want.returncode == 0 and json.loads(want.stdout)["provider"] == "cxi"
    packed = compress(plain, tool)
    assert packed.read_bytes()[:2] != plain.read_bytes()[:2]
    by_path = check_log("--json", str(packed))
    assert by_path.returncode == 0, by_path.stderr
    assert verdict_of(by_path) == verdict_of(want)
    on_stdin = check_log("--json", "-", stdin=packed.read_bytes())
    assert on_stdin.returncode == 0 and verdict_of(on_stdin) == verdict_of(want)


def test_zstd_is_read_or_named_with_the_pipe_that_reads_it(plain: Path):
    want = verdict_of(check_log("--json", str(plain)))
    if shutil.which("zstd"):
        packed = compress(plain, "zstd")
    else:  # a frame's magic: Python without zstd stops at it
        packed = plain.with_name("job.log.zst")
        packed.write_bytes(b"\x28\xb5\x2f\xfd" + b"\0" * 64)
    proc = check_log("--json", str(packed))
    if _zstd_in_python():
        assert proc.returncode == 0 and verdict_of(proc) == want
        return
    err = proc.stderr.decode()
    assert proc.returncode == 2 and proc.stdout == b"" and err.count("\n") == 1
    assert f"{packed}: zstd-compressed" in err and f"`zstd -dc {packed} | fabrikit check-log -`" in err
    if shutil.which("zstd"):  # the advice works
        unpacked = subprocess.run(["zstd", "-dc", str(packed)], capture_output=True, check=True,
                                  timeout=60).stdout
        assert verdict_of(check_log("--json", "-", stdin=unpacked)) == want


def test_cut_gzip_log_is_judged_on_the_text_before_the_cut(plain: Path):
    # a log compressed as it was written (`job | gzip > job.log.gz`) and read before the end
    packed = compress(plain, "gzip")
    data = packed.read_bytes()
    cut = packed.with_name("cut.log.gz")
    cut.write_bytes(data[:len(data) * 2 // 3])
    proc = check_log("--json", str(cut))
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    assert d["transport"] == "ofi" and d["provider"] == "cxi"
    full = json.loads(check_log("--json", str(plain)).stdout)
    assert 0 < len(d["ranks"]) < len(full["ranks"]) and d["lines"] < full["lines"]
    cuts = [w["message"] for w in d["warnings"] if w["code"] == "input-cut"]
    assert cuts == [f"{cut}: its gzip data ends early (cut while written or copied): the "
                    "verdict covers the text before that"]
    assert "input-cut" not in {w["code"] for w in full["warnings"]}


def test_compressed_data_that_is_corrupt_from_its_start_is_one_line_exit_2(tmp_path: Path):
    bad = tmp_path / "job.log.xz"
    bad.write_bytes(b"\xfd7zXZ\x00" + b"not xz at all\n" * 8)
    proc = check_log(str(bad))
    err = proc.stderr.decode()
    assert proc.returncode == 2 and proc.stdout == b"" and err.count("\n") == 1
    assert f"{bad}: corrupt xz data" in err and "Traceback" not in err


def test_a_plain_log_that_starts_like_a_magic_is_read_as_text(plain: Path):
    # bzip2's magic is text (`BZh` and a digit): a log whose first word is `BZh` is a log
    log = plain.with_name("bzh.log")
    log.write_bytes(b"BZh hosts follow\n" + plain.read_bytes())
    proc = check_log("--json", str(log))
    assert proc.returncode == 0 and json.loads(proc.stdout)["provider"] == "cxi", proc.stderr


def test_compressed_binary_data_is_binary_data(tmp_path: Path):
    zeros = tmp_path / "core.gz"
    with open(zeros, "wb") as f:  # 64 MiB of NULs, as a crashed node's padded file
        subprocess.run(["gzip", "-c"], input=b"\0" * (64 << 20), stdout=f, check=True,
                       timeout=120)
    proc = check_log(str(zeros))
    err = proc.stderr.decode()
    assert proc.returncode == 2 and err.count("\n") == 1
    assert "binary data inside its gzip compression, not a text log" in err
