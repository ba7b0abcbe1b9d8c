"""The one place where values become shell text.

Every value that reaches a generated script goes through `quote` or `word`, and comes out as
exactly one bash word that stands for exactly the value's characters: single-quoted, or, when
the value holds control characters (a line break, CR, ESC...), an ANSI-C `$'...'` string with
those characters escaped, so that the script itself stays plain printable text (sbatch
refuses scripts containing CR LF). Which names and characters are allowed at all is decided
in `runner.validate`, not here.

Placeholders (`{run_dir}`, `{job_id}`) are the only typed escape into expansion at run time,
and only where a field documents them (job arguments, `env_expand` values): they become
double-quoted variable references, never verbatim strings.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping

# Placeholder -> the shell variable it expands to in generated Slurm scripts.
PLACEHOLDERS: dict[str, str] = {"run_dir": "run_dir", "job_id": "SLURM_JOB_ID"}
_PLACEHOLDER = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f]")


def _ansi_c(value: str) -> str:
    """`$'...'` with backslash, quote and control characters escaped (bash)."""
    out = []
    for char in value:
        if char in "\\'":
            out.append("\\" + char)
        elif _UNPRINTABLE.match(char):
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(char)
    return "$'" + "".join(out) + "'"


def quote(value: str) -> str:
    """One bash word for `value`, nothing expanded."""
    if _UNPRINTABLE.search(value):
        return _ansi_c(value)
    return shlex.quote(value)


def word(text: str) -> str:
    """One shell word; `{run_dir}`/`{job_id}` expand at run time, the rest is literal."""
    parts: list[str] = []
    pos = 0
    for match in _PLACEHOLDER.finditer(text):
        if match.start() > pos:
            parts.append(quote(text[pos : match.start()]))
        parts.append(f'"${PLACEHOLDERS[match.group(1)]}"')
        pos = match.end()
    if pos < len(text) or not parts:
        parts.append(quote(text[pos:]))
    return "".join(parts)


def words(items: Iterable[str]) -> str:
    return " ".join(word(item) for item in items)


def expand(text: str, values: Mapping[str, str]) -> str:
    """Substitute placeholders with concrete values (local backend, no shell involved)."""
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], text)


def placeholders_problem(text: str) -> str | None:
    """Why `text` is not a valid `env_expand` template, or None: it must use at least one
    placeholder, and `{`/`}` may appear only as part of one (so a typo such as `{jobid}` is
    an error instead of a literal)."""
    known = ", ".join("{" + name + "}" for name in PLACEHOLDERS)
    rest = _PLACEHOLDER.sub("", text)
    if rest == text:
        return f"uses no placeholder ({known}); a value without one belongs under env:"
    if "{" in rest or "}" in rest:
        stray = re.search(r"\{[^{}]*\}?|\}", rest)
        shown = stray.group(0) if stray else "{"
        return f"{shown!r} is not a placeholder (known: {known})"
    return None
