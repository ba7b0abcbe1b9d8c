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
"""

from __future__ import annotations

import re

# A `\bX` (X a letter or `_`, no quantifier after it) and `X(?<=\bX)` match the same text
_WORD_START = re.compile(r"(?<!\\)((?:\\\\)*)\\b([A-Za-z_])(?![?*+{])")
# ... as do an alternative `[Xx]rest` and the two alternatives `Xrest|xrest`
_CASE_START = re.compile(r"\[([A-Za-z])([A-Za-z])\]")

# Each compiled fast form -> the pattern as written
WRITTEN_FORMS: dict[re.Pattern[str], str] = {}


def searched_fast(pattern: str) -> re.Pattern[str]:
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
    fast = re.compile("|".join(parts))
    WRITTEN_FORMS[fast] = pattern
    return fast


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
