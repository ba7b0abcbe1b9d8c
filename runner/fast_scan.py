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
import re
from collections.abc import Callable, Sequence
from functools import lru_cache

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
    """A hit finder for `patterns` (one database, compiled once per process: about 0.1 s).

    `confirm` maps the index of a pattern that hyperscan is given in a looser form to the
    exact pattern, which must start with the newline before its line (as the looser one
    does): a hit of the looser one counts only where the exact one matches there."""
    if not available():
        raise Unavailable("hyperscan is not installed (pip install 'fabrikit[fast]')")
    try:
        return _compiled(tuple(patterns), tuple(sorted(confirm.items(), key=lambda kv: kv[0])))
    except Exception as exc:  # hyperscan.HyperscanError and its kin (ArchitectureError)
        raise Unavailable(f"hyperscan cannot run here: {exc!r}") from exc


@lru_cache(maxsize=4)
def _compiled(patterns: tuple[str, ...],
              confirm: tuple[tuple[int, re.Pattern[bytes]], ...]) -> HitFinder:
    import hyperscan

    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=[p.encode() for p in patterns], ids=list(range(len(patterns))),
               elements=len(patterns), flags=[0] * len(patterns))
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
