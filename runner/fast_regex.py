"""Regex patterns compiled in a form that Python's regex engine searches faster.

Why: CPython's `re` skips ahead to where a search can begin by the first characters of a
pattern's alternatives, but only where each alternative begins with a plain character. One
alternative that begins with `\\b` or a class (`[Cc]onnect`) turns the skip off, and each
position of the text is then tried with every alternative: 2-4 times slower. check-log's
WARN patterns run on every line of a failing job's WARN flood, so they are compiled here
(runner/nccl_log.py). `searched_fast` writes each `\\bX` as `X(?<=\\bX)`, and an alternative
`[Xx]rest` as the two alternatives `Xrest|xrest`: both match exactly what the pattern as
written matches (tests/test_nccl_log_regex_forms.py compares every match of the two forms;
the written form is kept in WRITTEN_FORMS for it).

Where every alternative of a pattern begins with a word of its own (`NET/OFI|[Ll]ibfabric
|...`), a search is also skipped outright on a text that holds none of those words: an `in`
test is a C substring search, far cheaper than a search that fails (GatedPattern).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

try:  # (CPython's own regex parser; where it cannot be had, patterns are not gated)
    from re import _constants as _sre_constants, _parser as _sre_parser
except ImportError:  # pragma: no cover - Python < 3.11
    import sre_constants as _sre_constants  # type: ignore[no-redef]
    import sre_parse as _sre_parser  # type: ignore[no-redef]

# A `\bX` (X a letter or `_`, no quantifier after it) and `X(?<=\bX)` match the same text
_WORD_START = re.compile(r"(?<!\\)((?:\\\\)*)\\b([A-Za-z_])(?![?*+{])")
# ... as do an alternative `[Xx]rest` and the two alternatives `Xrest|xrest`
_CASE_START = re.compile(r"\[([A-Za-z])([A-Za-z])\]")

# At most this many words gate a pattern (beyond, testing them costs what a search does)
MAX_GATE_WORDS = 8

# Each compiled fast form -> the pattern as written
WRITTEN_FORMS: dict[re.Pattern[str] | GatedPattern, str] = {}


class GatedPattern:
    """A compiled pattern that is searched only in a text holding one of `words`, where
    every match of the pattern holds one of them (its alternatives' leading words, so a
    text without any has no match). Has the methods of a compiled pattern that check-log
    uses, with the same results."""

    __slots__ = ("rx", "words")

    def __init__(self, rx: re.Pattern[str], words: tuple[str, ...]) -> None:
        self.rx, self.words = rx, words

    def _may_match(self, text: str) -> bool:
        for word in self.words:
            if word in text:
                return True
        return False

    def search(self, text: str, *args: int) -> re.Match[str] | None:
        return self.rx.search(text, *args) if self._may_match(text) else None

    def match(self, text: str, *args: int) -> re.Match[str] | None:
        return self.rx.match(text, *args) if self._may_match(text) else None

    def finditer(self, text: str, *args: int) -> Iterator[re.Match[str]]:
        return self.rx.finditer(text, *args) if self._may_match(text) else iter(())

    @property
    def pattern(self) -> str:
        return self.rx.pattern

    def __repr__(self) -> str:
        return f"GatedPattern({self.rx!r}, {self.words!r})"


def searched_fast(pattern: str) -> re.Pattern[str] | GatedPattern:
    """`pattern` compiled in a form that matches the same and is searched faster (see the
    module's docstring). A `\\b` inside a class (a backspace) is refused: the rewrite would
    break it."""
    if re.search(r"\[[^\]]*\\b", pattern):
        raise ValueError(f"a class holding \\b in {pattern!r}: write it \\x08")
    parts = []
    for alt in alternatives(_WORD_START.sub(r"\1\2(?<=\\b\2)", pattern)):
        m = _CASE_START.match(alt)
        # (an alternative holding a numbered group is not copied: the groups after it
        # would be numbered anew)
        if m and m.group(1).lower() == m.group(2).lower() and not re.compile(alt).groups:
            parts += [m.group(1) + alt[4:], m.group(2) + alt[4:]]
        else:
            parts.append(alt)
    rx = re.compile("|".join(parts))
    words = _gate_words(parts)
    fast = GatedPattern(rx, words) if words else rx
    WRITTEN_FORMS[fast] = pattern
    return fast


def _gate_words(parts: list[str]) -> tuple[str, ...]:
    """The words that alternatives `parts` begin with (each alternative's leading run of
    plain characters, past zero-width assertions): every match holds one of them. Empty
    where an alternative begins with no plain character, or there are too many words."""
    words: list[str] = []
    for alt in parts:
        try:
            parsed = _sre_parser.parse(alt)
            items = parsed.data
            if parsed.state.flags & re.IGNORECASE:
                return ()  # (its words may come in any case)
        except Exception:  # (a parser of another Python: no gate, searched as it is)
            return ()
        run: list[str] = []
        for op, av in items:
            if op is _sre_constants.LITERAL:
                run.append(chr(av))
            elif op not in (_sre_constants.AT, _sre_constants.ASSERT,
                            _sre_constants.ASSERT_NOT):
                break  # (a quantifier wraps what it repeats: the run before it holds)
        if len(run) < 2:
            return ()
        if "".join(run) not in words:
            words.append("".join(run))
    return tuple(words) if len(words) <= MAX_GATE_WORDS else ()


def alternatives(pattern: str) -> list[str]:
    """`pattern`'s alternatives at its top level (not those inside a group)."""
    parts: list[str] = []
    depth, start, i, in_class = 0, 0, 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 1  # (the escaped character too)
        elif in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            # (a `]` first in a class is one of its characters)
            i += 2 if pattern.startswith("^]", i + 1) else pattern.startswith("]", i + 1)
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            parts.append(pattern[start:i])
            start = i + 1
        i += 1
    parts.append(pattern[start:])
    return parts
