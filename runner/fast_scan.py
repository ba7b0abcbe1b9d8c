"""check-log's trigger passes run as one hyperscan database, where hyperscan is installed.

Why: check-log parses only the lines that one of a few regex passes finds
(`runner.nccl_log._PASS_PATTERNS`), and on a big log those passes are most of its time:
Python's regex engine runs them one after another, each about a cycle per byte, and the pass
for lines stripped of NCCL's prefix pays per line that starts like a launcher prefix
(`[rank3]: ...`). Hyperscan (Intel's multi-pattern matcher) runs all of them in one pass over
the text, several times faster. It is a dependency where PyPI has wheels for every supported
Python (Linux x86_64) and the extra `fabrikit[fast]` elsewhere: without it, or for logs too
small to pay for compiling its database, the same passes run in Python.

The two must find the same lines, or check-log would answer differently with and without
it. Both look for the same patterns (`_FAST_PATTERNS` beside `_PASS_PATTERNS`, rewritten
only where hyperscan lacks a construct); no pattern of either can match a newline, so "the
line holds a match" means the same for both; and a pattern that hyperscan is given in a
looser form (a superset, cheaper to compile) has each of its hits confirmed by the exact
Python pass. tests/test_fast_scan.py compares the lines both find, and the verdicts.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from .atomic_write import write_atomic

# Bump when what the database holds changes in a way its patterns do not show.
CACHE_FORMAT = 1

# Finds, in data[lo:hi] (whole lines), a position inside every line that a pass matches.
HitFinder = Callable[[bytes, int, int], list[int]]


class Unavailable(RuntimeError):
    """hyperscan is not installed, or cannot run here (a CPU without SSSE3)."""


@lru_cache(maxsize=1)
def available() -> bool:
    """Is hyperscan installed? (Imported only when a finder is built: small logs never
    pay for it.)"""
    return importlib.util.find_spec("hyperscan") is not None


def describe() -> str:
    """What runs check-log's passes over a big log, for `fabrikit --version` (whether
    hyperscan is there is a question of how fabrikit was installed)."""
    if not available():
        return "Python's regex engine (pip install 'fabrikit[fast]' reads big logs faster)"
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"hyperscan {version('hyperscan')} (on logs over 16 MiB)"
    except PackageNotFoundError:  # importable without its metadata (a bare PYTHONPATH)
        return "hyperscan (on logs over 16 MiB)"


def finder(patterns: Sequence[str], confirm: dict[int, re.Pattern[bytes]]) -> HitFinder:
    """A hit finder for `patterns` (one database per process: see `_database`).

    `confirm` maps the index of a pattern that hyperscan is given in a looser form to the
    exact pattern, which must start with the newline before its line (as the looser one
    does): a hit of the looser one counts only where the exact one matches there."""
    if not available():
        raise Unavailable("hyperscan is not installed (pip install 'fabrikit[fast]')")
    try:
        return _compiled(tuple(patterns), tuple(sorted(confirm.items(), key=lambda kv: kv[0])))
    except Exception as exc:  # hyperscan.HyperscanError and its kin (ArchitectureError)
        raise Unavailable(f"hyperscan cannot run here: {exc!r}") from exc


def cache_dir() -> Path:
    """Where compiled databases are kept: $FABRIKIT_CACHE_DIR, else $XDG_CACHE_HOME/fabrikit,
    else ~/.cache/fabrikit."""
    if os.environ.get("FABRIKIT_CACHE_DIR"):
        return Path(os.environ["FABRIKIT_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "fabrikit"


def _cpu_flags() -> str:
    """The CPU's feature flags: a database is compiled for the features of the CPU it was
    compiled on, and a home directory is shared by login and compute nodes of different
    generations."""
    try:
        with open("/proc/cpuinfo", "rb") as f:
            for line in f:
                if line.startswith((b"flags", b"Features")):
                    return line.decode("ascii", "replace").strip()
    except OSError:
        pass
    import platform  # (only when a database is built: 2 ms of every start-up otherwise)

    return platform.machine()


def _cache_path(patterns: Sequence[bytes]) -> Path:
    import hashlib

    import hyperscan

    hs_version = getattr(hyperscan, "__version__", "?")  # importlib.metadata: 30 ms more
    key = hashlib.sha256(repr((CACHE_FORMAT, hs_version, _cpu_flags(), list(patterns)))
                         .encode()).hexdigest()[:24]
    return cache_dir() / f"check-log-{key}.hsdb"


def _database(patterns: Sequence[bytes]) -> Any:
    """One block-mode database for `patterns`: loaded from the cache if this user compiled
    it before on this kind of CPU (under a millisecond), else compiled (about 0.1 s, more
    than the rest of check-log's start-up) and kept there for the next process. A cache
    file that does not load (cut short, another hyperscan) is compiled again and replaced;
    a cache that cannot be written costs only the compile."""
    import hyperscan

    path = _cache_path(patterns)
    db = load_cached(path)
    if db is not None:
        return db
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=list(patterns), ids=list(range(len(patterns))),
               elements=len(patterns), flags=[0] * len(patterns))
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_atomic(path, hyperscan.dumpb(db))
    except (OSError, hyperscan.error):
        pass
    return db


def load_cached(path: Path) -> Any | None:
    """The database kept at `path`, if it is this user's own file (no one else's bytes go
    to hyperscan's deserialiser) and loads; else None."""
    import hyperscan

    try:
        st = path.stat()
        if st.st_uid != os.getuid() or st.st_mode & 0o022:
            return None
        db = hyperscan.loadb(path.read_bytes(), hyperscan.HS_MODE_BLOCK)
        db.scratch = hyperscan.Scratch(db)  # a loaded database has none
        return db
    except (OSError, hyperscan.error):
        return None


@lru_cache(maxsize=4)
def _compiled(patterns: tuple[str, ...],
              confirm: tuple[tuple[int, re.Pattern[bytes]], ...]) -> HitFinder:
    db = _database([p.encode() for p in patterns])
    exact = dict(confirm)

    def hits(data: bytes, lo: int, hi: int) -> list[int]:
        ends: list[int] = []
        loose: list[tuple[int, int]] = []
        add, add_loose = ends.append, loose.append

        def on_match(pid: int, _start: int, end: int, _flags: int, _ctx: object) -> None:
            # `end` is exclusive: end - 1 is the match's last byte, inside the line it is on
            if pid in exact:
                add_loose((pid, lo + end))
            else:
                add(lo + end - 1)

        db.scan(data[lo:hi], match_event_handler=on_match)
        rfind = data.rfind
        for pid, end in loose:  # the match starts at the newline before its line
            nl = rfind(b"\n", lo, end)
            if nl >= 0 and exact[pid].match(data, nl, hi):
                ends.append(end - 1)
        return ends

    return hits
