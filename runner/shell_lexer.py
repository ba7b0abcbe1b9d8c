"""Split a shell script the way bash does: simple commands, words (quotes, `$(...)`,
`${...}` and line numbers kept), redirections, heredocs and comments. Nothing is expanded
here (runner.shell_expand does that); runner.shell_script explains why a lexer of our own.

The lexer follows POSIX "Token Recognition" plus bash's `$'...'`, arrays and process
substitution, and never refuses a script. Compound commands (`if`, `for`, functions, `case`)
are flattened into the simple commands they contain: a static reading considers every
branch. The quote-aware scanners (`skip_*`) are shared with the expander.
"""

from __future__ import annotations

import re
from typing import NamedTuple

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\[[^\]]*\])?(\+?=)")
_OPERATOR_CHARS = set(";&|()<>")
_ARRAY_START = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
_BLANK = " \t"
# Words that open or close compound commands: dropped where a command would start.
_RESERVED = {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "{", "}", "!", "time", "esac"}
# Commands whose remaining words are a loop/case header, not a command.
_HEADERS = {"for", "case", "select", "function"}


class Word(NamedTuple):
    raw: str  # as written, quotes and expansions included
    line: int


class Heredoc(NamedTuple):
    delimiter: str
    body: str
    quoted: bool  # `<<'EOF'`: the body is not expanded by the shell that writes it
    line: int  # line of the first body line


class Command(NamedTuple):
    """One simple command: its words (prefix assignments included), redirections, heredocs."""

    words: tuple[Word, ...]
    redirects: tuple[tuple[str, Word], ...]
    heredocs: tuple[Heredoc, ...]
    line: int


class Comment(NamedTuple):
    text: str  # without the leading '#'
    line: int


class Script(NamedTuple):
    commands: tuple[Command, ...]
    comments: tuple[Comment, ...]


class _Builder:
    """Collects the words of the command being read; heredoc bodies are attached to the
    command that opened them once the line ends (`cat <<EOF | tee x` ends it earlier)."""

    def __init__(self) -> None:
        self.commands: list[Command] = []
        self.words: list[Word] = []
        self.redirects: list[tuple[str, Word]] = []
        self.heredocs: list[Heredoc] = []
        self.pending: list[list] = []  # [delimiter, strip_tabs, quoted, owning command index]

    def end(self) -> None:
        words = list(self.words)
        while words and words[0].raw in _RESERVED:
            words.pop(0)
        index = -1
        if words and words[0].raw not in _HEADERS:
            self.commands.append(Command(tuple(words), tuple(self.redirects), tuple(self.heredocs), words[0].line))
            index = len(self.commands) - 1
        for entry in self.pending:
            if entry[3] is None:
                entry[3] = index
        self.words, self.redirects, self.heredocs = [], [], []

    def read_bodies(self, text: str, i: int, line: int) -> tuple[int, int]:
        for delimiter, strip, quoted, owner in self.pending:
            body, i, used = _read_heredoc(text, i, delimiter, strip)
            doc = Heredoc(delimiter, body, quoted, line)
            line += used
            if owner is not None and owner >= 0:
                command = self.commands[owner]
                self.commands[owner] = command._replace(heredocs=command.heredocs + (doc,))
        self.pending = []
        return i, line


def parse(text: str, first_line: int = 1) -> Script:
    """Split `text` into simple commands and comments; never raises on odd input."""
    b = _Builder()
    comments: list[Comment] = []
    i, n, line = 0, len(text), first_line
    while i < n:
        c = text[i]
        if c in _BLANK:
            i += 1
        elif c == "\\" and text.startswith("\\\n", i):
            i, line = i + 2, line + 1
        elif c == "\n":
            i += 1
            line += 1
            b.end()
            if b.pending:
                i, line = b.read_bodies(text, i, line)
        elif c == "#":
            end = text.find("\n", i)
            end = n if end < 0 else end
            comments.append(Comment(text[i + 1 : end], line))
            i = end
        elif c in "<>" and text.startswith("(", i + 1):  # process substitution <(...) >(...)
            end = skip_balanced(text, i + 1, "(", ")")
            b.words.append(Word(text[i:end], line))
            line += text.count("\n", i, end)
            i = end
        elif c in "<>" or text.startswith("&>", i):
            op = _match_operator(text, i)
            i += len(op)
            while i < n and text[i] in _BLANK:
                i += 1
            start_line = line
            if text.startswith(("<(", ">("), i):  # `< <(command)`
                end = skip_balanced(text, i + 1, "(", ")")
                raw, used = text[i:end], text.count("\n", i, end)
                i = end
            else:
                raw, i, used = _read_word(text, i)
            line += used
            if op in ("<<", "<<-"):
                delimiter = _unquote_simple(raw)
                b.pending.append([delimiter, op == "<<-", delimiter != raw, None])
            else:
                b.redirects.append((op, Word(raw, start_line)))
        elif c in _OPERATOR_CHARS:
            i += len(_match_operator(text, i))
            b.end()
        else:
            start_line = line
            raw, i, used = _read_word(text, i)
            line += used
            if raw.isdigit() and i < n and text[i] in "<>":
                continue  # a file descriptor number: `2>&1`
            b.words.append(Word(raw, start_line))
    b.end()
    if b.pending:
        b.read_bodies(text, n, line)
    return Script(tuple(b.commands), tuple(comments))


def _match_operator(text: str, i: int) -> str:
    for op in ("&>>", "<<<", "<<-", ";;&", "&&", "||", ";;", "<<", ">>", ">&", "<&", "&>", ">|", "<>", "|&"):
        if text.startswith(op, i):
            return op
    return text[i]


def _read_heredoc(text: str, i: int, delimiter: str, strip_tabs: bool) -> tuple[str, int, int]:
    """The body up to the delimiter line; returns (body, index after it, lines consumed)."""
    lines: list[str] = []
    used = 0
    while i < len(text):
        end = text.find("\n", i)
        end = len(text) if end < 0 else end
        current = text[i:end]
        used += 1
        i = end + 1
        if (current.lstrip("\t") if strip_tabs else current) == delimiter:
            return "\n".join(lines) + ("\n" if lines else ""), i, used
        lines.append(current.lstrip("\t") if strip_tabs else current)
    return "\n".join(lines), len(text), used


def _unquote_simple(raw: str) -> str:
    return raw.replace("'", "").replace('"', "").replace("\\", "")


def _read_word(text: str, i: int) -> tuple[str, int, int]:
    """One word from `i`: returns (raw text, index after it, newlines inside it)."""
    out: list[str] = []
    n = len(text)
    used = 0
    while i < n:
        c = text[i]
        if c in _BLANK or c == "\n":
            break
        if c in _OPERATOR_CHARS:
            if c == "(" and _ARRAY_START.fullmatch("".join(out)):
                end = skip_balanced(text, i, "(", ")")  # array assignment a=(x y)
            else:
                break
        elif c == "\\":
            if text.startswith("\\\n", i):
                i, used = i + 2, used + 1
                continue
            end = min(i + 2, n)
        elif c == "'":
            end = text.find("'", i + 1)
            end = n if end < 0 else end + 1
        elif c == "$" and text.startswith("$'", i):
            end = skip_ansi(text, i + 2)
        elif c == '"':
            end = skip_double(text, i + 1)
        elif c == "$" and text.startswith("$(", i):
            end = skip_balanced(text, i + 1, "(", ")")
        elif c == "$" and text.startswith("${", i):
            end = skip_balanced(text, i + 1, "{", "}")
        elif c == "`":
            end = skip_backtick(text, i + 1)
        else:
            end = i + 1
        piece = text[i:end]
        used += piece.count("\n")
        out.append(piece.replace("\\\n", "") if c == '"' else piece)
        i = end
    return "".join(out), i, used


def skip_ansi(text: str, i: int) -> int:
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == "'":
            return i + 1
        else:
            i += 1
    return len(text)


def skip_backtick(text: str, i: int) -> int:
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == "`":
            return i + 1
        else:
            i += 1
    return len(text)


def skip_double(text: str, i: int) -> int:
    """From just after an opening `"`, the index after its closing `"`."""
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
        elif c == '"':
            return i + 1
        elif text.startswith("$(", i):
            i = skip_balanced(text, i + 1, "(", ")")
        elif text.startswith("${", i):
            i = skip_balanced(text, i + 1, "{", "}")
        elif c == "`":
            i = skip_backtick(text, i + 1)
        else:
            i += 1
    return len(text)


def skip_balanced(text: str, i: int, open_: str, close: str) -> int:
    """From an opening bracket at `i`, the index after its match (quotes respected)."""
    depth = 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "'" and open_ == "(":
            end = text.find("'", i + 1)
            i = len(text) if end < 0 else end + 1
            continue
        if c == '"':
            i = skip_double(text, i + 1)
            continue
        if c == "`":
            i = skip_backtick(text, i + 1)
            continue
        if c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return len(text)


def assignment_name(raw: str) -> str | None:
    """`NAME` if the word is an assignment (`NAME=...`, `NAME+=...`, `NAME[i]=...`)."""
    match = ASSIGN.match(raw)
    return match.group(1) if match else None
