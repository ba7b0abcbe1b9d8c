"""check-log's WARN patterns are compiled in a faster form (runner.fast_regex.searched_fast):
it must match exactly where, and what, the pattern as written matches.

The forms differ only in how a search can skip ahead, so any difference would be a wrong
verdict on some WARN line, never a slower one: these tests compare every match (span and
groups) of the two forms on random text made of the pattern's own words, and on every line
of the test logs."""

from __future__ import annotations

import ast
import functools
import random
import re
import sys
import zlib
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import nccl_logs as L  # noqa: E402

from runner import nccl_log  # noqa: E402
from runner.fast_regex import (  # noqa: E402
    WRITTEN_FORMS, GatedPattern, alternatives, searched_fast)
from runner.nccl_log import _warn_facts  # noqa: E402

# Characters that sit beside words in NCCL's messages (and test \b both ways)
_GLUE = [" ", " ", "_", "x", "0", "7", ":", "/", "(", ")", "[", "]", "<", ">", ".", ",", "-",
         "a", "Z", "\t", "|"]


def _words(pattern: str) -> list[str]:
    """Pieces of text that the pattern looks for (and their other case)."""
    plain = re.sub(r"\\.", " ", pattern)
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_/ ]*", plain))
    words |= set(re.split(r"[()\[\]|?*+{}^$.\\]+", pattern))  # runs between operators
    words |= {w.lower() for w in words} | {w.capitalize() for w in words}
    return sorted(w for w in words if w.strip())


def _samples(pattern: str, n: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    words = _words(pattern)
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rnd.randint(1, 8)):
            parts.append(rnd.choice(_GLUE) if rnd.random() < 0.45 else rnd.choice(words))
        out.append("".join(parts))
    return out


def _matches(rx: re.Pattern[str], text: str) -> list[tuple]:
    return [(m.span(), m.groups()) for m in rx.finditer(text)] + [
        (m.span(), m.groups()) for m in [rx.match(text)] if m]


@functools.lru_cache(maxsize=1)
def _corpus_lines() -> tuple[str, ...]:
    """Lines of NCCL logs: the test logs' generators (every kind of rank, every init
    failure), the text of the test files, and the messages that runner/nccl_log.py quotes
    in its comments (real WARNs, cited from issue threads)."""
    lines: list[str] = []
    for fn in (L.ofi_cxi_rank, L.ofi_efa_rank, L.ib_rank, L.socket_rank, L.failed_rank,
               L.ib_no_device_only, L.legacy_rank, L.ofi_fails_then,
               L.ofi_verbs_then_ib, L.rccl_rank):
        for stream in L.job(fn, nodes=2, gpn=2):
            lines += stream
    for kind in L.INIT_FAILURES:
        for stream in L.job(L.failing_rank, nodes=2, gpn=1, case=kind):
            lines += stream
    here = Path(__file__).parent
    for path in [*here.glob("test_*.py"), here / "nccl_logs.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                lines += node.value.splitlines()
    source = Path(nccl_log.__file__).read_text()
    lines += re.findall(r"`([^`\n]{8,})`", source)
    return tuple(lines)


FORMS = sorted(WRITTEN_FORMS.items(), key=lambda kv: kv[1])


def test_the_warn_patterns_are_all_kept_in_their_written_form():
    # the patterns that every WARN line of a flood meets
    for name in ("_NET_WARN", "_SETUP_WARN", "_LINK_ERROR", "_WARN_OFI", "_WARN_IB",
                 "_PROXY_ECHO", "_NEVER_ESTABLISHED", "_SOCKET_WORD", "_NET_NOT_FOUND"):
        assert getattr(nccl_log, name) in WRITTEN_FORMS, name
    # ... and the rewriting changed them (else they were not made faster)
    assert all(fast.pattern != written for fast, written in FORMS if "\\b" in written)


@pytest.mark.parametrize("fast,written", FORMS, ids=[w[:40] for _, w in FORMS])
def test_fast_form_matches_as_written_on_random_text(fast: re.Pattern[str], written: str):
    slow = re.compile(written)
    # (a seed of the pattern's own, the same in every process: `hash()` of a str is
    # randomised per process, and some seeds gave samples that never met a pattern)
    samples = _samples(written, 4000, zlib.crc32(written.encode()) & 0xFFFF)
    hits = 0
    for text in samples:
        expected = _matches(slow, text)
        assert _matches(fast, text) == expected, (written, text)
        hits += bool(expected)
    assert hits  # the samples do meet the pattern, not only miss it


@pytest.mark.parametrize("fast,written", FORMS, ids=[w[:40] for _, w in FORMS])
def test_fast_form_matches_as_written_on_the_test_logs(fast: re.Pattern[str], written: str):
    slow = re.compile(written)
    lines = _corpus_lines()
    assert len(lines) > 1000
    hits = 0
    for line in lines:
        for text in (line, line[line.find("NCCL WARN ") + 10:] if "NCCL WARN " in line else ""):
            expected = _matches(slow, text)
            assert _matches(fast, text) == expected, (written, text)
            hits += bool(expected)
    assert hits


@pytest.mark.parametrize("pattern,expected", [
    (r"a|b", ["a", "b"]),
    (r"a\|b|c", [r"a\|b", "c"]),  # an escaped bar
    (r"[|]x|y", ["[|]x", "y"]),  # a bar in a class
    (r"[]|]x|y", ["[]|]x", "y"]),  # ... after a ] that the class begins with
    (r"[^]|]x|y", ["[^]|]x", "y"]),
    (r"(?:a|b)c|d", ["(?:a|b)c", "d"]),  # a group's own alternatives
    (r"\\|x", ["\\\\", "x"]),  # an escaped backslash, then a bar
    (r"[\]|]x|y", [r"[\]|]x", "y"]),  # an escaped ] inside a class
])
def test_alternatives_are_split_only_at_the_top_level(pattern: str, expected: list[str]):
    assert alternatives(pattern) == expected


@pytest.mark.parametrize("written", [
    r"\bcat\b|[Dd]og|\bfi_x|e\bfa",
    r"(?:\bIB\b|[Ss]ocket)|\bab?",  # inside a group; a \b before a quantified letter
    r"\\bfoo|[Cc]at(?P<n>\d+)|[Bb]ird",  # an escaped backslash: no \b there; a named group
    r"[Aa](b)|\b_u|[Cc](?:d|e)",  # a numbered group (not split)
    r"^[Nn]et|[Xx]",
])
def test_tricky_patterns_keep_their_matches(written: str):
    fast = searched_fast(written)
    slow = re.compile(written)
    for text in _samples(written, 3000, 7) + ["cat", "Dog", "x fi_x", "\\bfoo", "Cat12", "ab"]:
        assert _matches(fast, text) == _matches(slow, text), (written, text)


def test_patterns_whose_alternatives_each_begin_with_a_word_are_gated_by_those_words():
    # (the test above compares what a gated pattern finds with what the pattern as written
    # finds: a gate that hid a match would fail it)
    assert isinstance(nccl_log._WARN_OFI, GatedPattern)
    assert set(nccl_log._WARN_OFI.words) == {"NET/OFI", "Libfabric", "libfabric", "fi_", "OFI",
                                             "efa", "cxi"}
    assert nccl_log._SOCKET_WORD.words == ("Socket", "socket")
    assert nccl_log._NEVER_ESTABLISHED.search("x Error: 4126 y")
    assert nccl_log._NEVER_ESTABLISHED.search("x Error: 4125 y") is None
    # not gated: an alternative that begins with no word, a case-blind pattern, too many
    assert not isinstance(nccl_log._NET_WARN, GatedPattern)
    assert not isinstance(searched_fast(r"(?i)abc|def"), GatedPattern)
    assert not isinstance(searched_fast("|".join(f"w{i}x" for i in range(20))), GatedPattern)
    # a lookbehind or \b inside an alternative's leading run does not cut its word
    assert searched_fast(r"\bfi_x|\bcq").words == ("fi_x", "cq")


def test_a_class_holding_a_backspace_is_refused():
    with pytest.raises(ValueError, match="backspace|class"):
        searched_fast(r"[\bA]x|y")


def test_a_warn_message_has_the_same_facts_memoised_or_not():
    """The memo of a WARN's facts only saves work: a message met again (or after the memo
    was cleared) gets the facts it got the first time."""
    msgs = [line.split("NCCL WARN ", 1)[-1].strip() for line in _corpus_lines()]
    msgs = [m for m in msgs if m]
    assert len(msgs) > 1000
    nccl_log._WARN_FACTS_MEMO.clear()
    first = [_warn_facts(m) for m in msgs]
    again = [_warn_facts(m) for m in msgs]
    nccl_log._WARN_FACTS_MEMO.clear()
    fresh = [_warn_facts(m) for m in msgs]
    assert first == again == fresh
    assert any(f.net for f in first) and any(f.link for f in first) \
        and any(f.setup for f in first) and any(f.kind for f in first)


def test_the_warn_memo_stays_bounded():
    nccl_log._WARN_FACTS_MEMO.clear()
    for i in range(3 * nccl_log._WARN_FACTS_MEMO_SIZE):
        _warn_facts(f"NET/OFI Request 0x{i:x} completed with error. RC: 5")
    _warn_facts("NET/IB : " + "x" * 4 * nccl_log._WARN_FACTS_MEMO_CHARS)
    assert 0 < len(nccl_log._WARN_FACTS_MEMO) <= nccl_log._WARN_FACTS_MEMO_SIZE
    assert max(map(len, nccl_log._WARN_FACTS_MEMO)) <= nccl_log._WARN_FACTS_MEMO_CHARS
