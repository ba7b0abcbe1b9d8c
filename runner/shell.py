"""The one place where values become shell text.

Every value that reaches a generated script goes through `quote` or `shell_word`, and comes
out as exactly one bash word that stands for exactly the value's characters: single-quoted,
or, when the value holds control characters (a line break, CR, ESC...), an ANSI-C `$'...'`
string with those characters escaped, so that the script itself stays plain printable text
(sbatch refuses scripts containing CR LF). Which names and characters are allowed at all is
decided in `runner.validate`, not here.

Slots are the only typed escape into expansion at run time. A launch description
(`runner.launch`) is made of `Word`s, each a sequence of literal text and `Slot`s: values
that only the backend knows (the run directory, the job id, the rendezvous endpoint...).
The Slurm script binds a slot to an `Expansion` (a double-quoted variable reference that
fabrikit writes itself, never input), the local backend to the value itself. Profile values
and job arguments may use two slots, written `{run_dir}` and `{job_id}`, and only where a
field documents them (job arguments, `env_expand` values): `template()` reads them.
"""

from __future__ import annotations

import enum
import re
import shlex
from collections.abc import Iterable, Mapping
from typing import Union

import msgspec


class Slot(enum.Enum):
    """A value each backend fills in itself."""

    RUN_DIR = "run_dir"  # the run directory ({run_dir} in profile values and job arguments)
    JOB_ID = "job_id"  # the job's id ({job_id}); the local backend uses the run directory's name
    NODES = "nodes"  # how many nodes the job has
    NPROC = "nproc"  # processes per node
    ENDPOINT = "endpoint"  # HOST:PORT of the c10d rendezvous
    IS_HOST = "is_host"  # the rdzv_conf text telling an agent whether it hosts the store
    BINDS = "binds"  # whole words: the container's --bind options
    LOCAL_ADDR = "local_addr"  # whole words: torchrun's --local_addr, where the backend sets it


# The slots profile values and job arguments may name, as `{name}`.
USER_SLOTS: tuple[Slot, ...] = (Slot.RUN_DIR, Slot.JOB_ID)

Part = Union[str, Slot]
Word = tuple[Part, ...]  # one argument: literal text and slots, concatenated


class Splice(msgspec.Struct, frozen=True):
    """Zero or more whole arguments that the backend supplies (its binds, say)."""

    slot: Slot


Arg = Union[Word, Splice]


class Expansion(msgspec.Struct, frozen=True):
    """Shell text that expands when the script runs, such as `"$SLURM_JOB_ID"` or
    `"${binds[@]}"`: written by fabrikit itself, never built from input."""

    text: str


# What a slot stands for in a script: literal text (quoted like any value), an expansion, or
# (for a splice) literal words.
ShellValue = Union[str, Expansion, tuple[str, ...]]
# What a slot stands for when fabrikit runs the command itself.
Value = Union[str, tuple[str, ...]]

_PLACEHOLDER = re.compile(r"\{(" + "|".join(slot.value for slot in USER_SLOTS) + r")\}")
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


def join(argv: Iterable[str]) -> str:
    """A command line that runs exactly `argv` (for messages and dry runs)."""
    return " ".join(quote(arg) for arg in argv)


def assignments(pairs: Iterable[tuple[str, str]]) -> str:
    """`NAME=value ...` with each value quoted (names are checked identifiers)."""
    return " ".join(f"{name}={quote(value)}" for name, value in pairs)


def template(text: str) -> Word:
    """A profile value or job argument: literal, except `{run_dir}` and `{job_id}`."""
    parts: list[Part] = []
    pos = 0
    for match in _PLACEHOLDER.finditer(text):
        if match.start() > pos:
            parts.append(text[pos : match.start()])
        parts.append(Slot(match.group(1)))
        pos = match.end()
    if pos < len(text) or not parts:
        parts.append(text[pos:])
    return tuple(parts)


def is_literal(word: Word) -> bool:
    return all(isinstance(part, str) for part in word)


def literal_text(word: Word) -> str:
    """The literal characters of `word` (its slots left out): what a reader of the script sees."""
    return "".join(part for part in word if isinstance(part, str))


def shell_word(word: Word, binding: Mapping[Slot, ShellValue]) -> str:
    """`word` as one shell word, its slots bound: literal runs quoted, expansions as written."""
    out: list[str] = []
    run: list[str] = []
    for part in word:
        value = binding[part] if isinstance(part, Slot) else part
        if isinstance(value, Expansion):
            if run:
                out.append(quote("".join(run)))
                run = []
            out.append(value.text)
        elif isinstance(value, str):
            run.append(value)
        else:
            raise ValueError(f"slot {part} stands for whole words; it cannot be part of one")
    if run and "".join(run) or not out:
        out.append(quote("".join(run)))
    return "".join(out)


def shell_words(args: Iterable[Arg], binding: Mapping[Slot, ShellValue]) -> str:
    """`args` as shell words separated by blanks; a splice bound to no words leaves nothing."""
    out: list[str] = []
    for arg in args:
        if isinstance(arg, Splice):
            value = binding[arg.slot]
            out.extend([value.text] if isinstance(value, Expansion) else [quote(v) for v in value])
        else:
            out.append(shell_word(arg, binding))
    return " ".join(out)


def value_word(word: Word, values: Mapping[Slot, Value]) -> str:
    """`word` with its slots replaced by their values (no shell involved)."""
    out = []
    for part in word:
        value = values[part] if isinstance(part, Slot) else part
        if not isinstance(value, str):
            raise ValueError(f"slot {part} stands for whole words; it cannot be part of one")
        out.append(value)
    return "".join(out)


def argv(args: Iterable[Arg], values: Mapping[Slot, Value]) -> list[str]:
    """`args` as a program's argument vector, slots replaced by their values."""
    out: list[str] = []
    for arg in args:
        if isinstance(arg, Splice):
            value = values[arg.slot]
            out.extend([value] if isinstance(value, str) else value)
        else:
            out.append(value_word(arg, values))
    return out


def placeholders_problem(text: str) -> str | None:
    """Why `text` is not a valid `env_expand` template, or None: it must use at least one
    placeholder, and `{`/`}` may appear only as part of one (so a typo such as `{jobid}` is
    an error instead of a literal)."""
    known = ", ".join("{" + slot.value + "}" for slot in USER_SLOTS)
    rest = _PLACEHOLDER.sub("", text)
    if rest == text:
        return f"uses no placeholder ({known}); a value without one belongs under env:"
    if "{" in rest or "}" in rest:
        stray = re.search(r"\{[^{}]*\}?|\}", rest)
        shown = stray.group(0) if stray else "{"
        return f"{shown!r} is not a placeholder (known: {known})"
    return None
