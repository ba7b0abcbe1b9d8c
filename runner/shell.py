"""The one place where values become shell text.

Every value that reaches a generated script goes through `quote` or `word`. Placeholders
(`{run_dir}`, `{job_id}`) are the only typed escape into shell expansion: they become
double-quoted variable references, never verbatim strings.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping

from .errors import UserError

# Placeholder -> the shell variable it expands to in generated Slurm scripts.
PLACEHOLDERS: dict[str, str] = {"run_dir": "run_dir", "job_id": "SLURM_JOB_ID"}
_PLACEHOLDER = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")


def quote(value: str) -> str:
    return shlex.quote(value)


def word(text: str) -> str:
    """One shell word; `{run_dir}`/`{job_id}` expand at run time, the rest is literal."""
    parts: list[str] = []
    pos = 0
    for match in _PLACEHOLDER.finditer(text):
        if match.start() > pos:
            parts.append(shlex.quote(text[pos : match.start()]))
        parts.append(f'"${PLACEHOLDERS[match.group(1)]}"')
        pos = match.end()
    if pos < len(text) or not parts:
        parts.append(shlex.quote(text[pos:]))
    return "".join(parts)


def words(items: Iterable[str]) -> str:
    return " ".join(word(item) for item in items)


def expand(text: str, values: Mapping[str, str]) -> str:
    """Substitute placeholders with concrete values (local backend, no shell involved)."""
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], text)


def plain(value: str, field: str) -> str:
    """A value that must need no quoting at all (e.g. on `#SBATCH` lines, which sbatch
    parses with its own rules rather than a shell's)."""
    if not value or shlex.quote(value) != value:
        raise UserError(f"{field}: {value!r} contains characters that are not allowed here "
                        "(use letters, digits and . _ - / = : , @ + %)")
    return value
