"""Write a draft site profile: YAML with a comment beside every value saying where it came
from, `# TODO` lines for what could not be decided, checked by the real profile loader
before anything is written.

Used by `fabrikit sites init` (values from probing the machine) and `fabrikit sites import`
(values from a site guide's job script). PyYAML's dumper drops comments, so the draft is a
small ordered tree rendered by hand; scalars still go through PyYAML's resolver to decide
quoting, and every environment value and build argument is a quoted string (YAML 1.1 would
read `1.20` as the float 1.2).
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from .errors import UserError

_PLAIN = re.compile(r"[A-Za-z0-9_./@%+^-][A-Za-z0-9_./@%+^=:, -]*")
_FLOW_PLAIN = re.compile(r"[A-Za-z0-9_./@%+^-][A-Za-z0-9_./@%+^=-]*")


class Item(NamedTuple):
    value: Any
    note: str = ""
    quote: bool = False  # always a quoted string (env values, build args)


class Todo(NamedTuple):
    """A key the writer could not decide: rendered commented out, with what to do."""

    key: str | None
    text: str
    example: Any = None


class Draft:
    """An ordered tree of sections, items, list entries and TODOs."""

    def __init__(self, header: list[str]) -> None:
        self.header = header
        self.root: dict[str, Any] = {}

    def _section(self, path: tuple[str, ...]) -> dict[str, Any]:
        node = self.root
        for key in path:
            node = node.setdefault(key, {})
        return node

    def set(self, path: tuple[str, ...], value: Any, note: str = "", *, quote: bool = False) -> None:
        self._section(path[:-1])[path[-1]] = Item(value, note, quote)

    def get(self, path: tuple[str, ...]) -> Any:
        node: Any = self.root
        for key in path:
            if not isinstance(node, dict) or key not in node:
                return None
            node = node[key]
        return node.value if isinstance(node, Item) else node

    def todo(self, path: tuple[str, ...], text: str, example: Any = None) -> None:
        section = self._section(path[:-1])
        section[f"#todo-{len(section)}"] = Todo(path[-1], text, example)

    def append(self, path: tuple[str, ...], entry: dict[str, Any], note: str = "") -> None:
        section = self._section(path[:-1])
        entries = section.setdefault(path[-1], [])
        entries.append((entry, note))

    def append_todo(self, path: tuple[str, ...], text: str, example: dict[str, Any] | None = None) -> None:
        section = self._section(path[:-1])
        entries = section.setdefault(path[-1], [])
        entries.append((Todo(None, text, example), ""))

    def render(self) -> str:
        lines = [f"# {h}".rstrip() for h in self.header]
        _render_map(self.root, 0, lines)
        return "\n".join(lines) + "\n"


def _comment(text: str) -> str:
    return " ".join(str(text).split())


def scalar(value: Any, *, quote: bool = False, flow: bool = False) -> str:
    """YAML text for one scalar that reads back as exactly `value`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)) and not quote:
        return str(value)
    text = str(value)
    pattern = _FLOW_PLAIN if flow else _PLAIN
    if not quote and pattern.fullmatch(text) and not text.endswith(" ") and ": " not in text and " #" not in text:
        try:
            if yaml.safe_load(text) == text:
                return text
        except yaml.YAMLError:
            pass
    return json.dumps(text, ensure_ascii=False)


def _value_text(value: Any, quote: bool) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(scalar(v, quote=quote, flow=True) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {scalar(v, quote=quote, flow=True)}" for k, v in value.items()) + "}"
    return scalar(value, quote=quote)


def _with_note(text: str, note: str) -> str:
    return f"{text}  # {_comment(note)}" if note else text


def _render_map(node: dict[str, Any], indent: int, lines: list[str]) -> None:
    pad = "  " * indent
    for key, value in node.items():
        if isinstance(value, Todo):
            if value.example is not None:
                lines.append(f"{pad}# {value.key}: {_value_text(value.example, False)}  # TODO: {_comment(value.text)}")
            else:
                lines.append(f"{pad}# TODO {value.key}: {_comment(value.text)}")
        elif isinstance(value, Item):
            lines.append(_with_note(f"{pad}{key}: {_value_text(value.value, value.quote)}", value.note))
        elif isinstance(value, list):
            real = [e for e in value if not isinstance(e[0], Todo)]
            lines.append(f"{pad}{key}:" if real else f"{pad}{key}: []")
            for entry, note in value:
                if isinstance(entry, Todo):
                    example = f" {_value_text(entry.example, False)}" if entry.example else ""
                    lines.append(f"{pad}  # -{example}  # TODO: {_comment(entry.text)}")
                    continue
                if note:
                    lines.append(f"{pad}  # {_comment(note)}")
                if isinstance(entry, dict):
                    first = True
                    for k, v in entry.items():
                        lines.append(f"{pad}  {'- ' if first else '  '}{k}: {_value_text(v, False)}")
                        first = False
                else:
                    lines.append(f"{pad}  - {_value_text(entry, False)}")
        elif isinstance(value, dict):
            if not value:
                continue
            only_todos = all(isinstance(v, Todo) for v in value.values())
            lines.append(f"{pad}# {key}:" if only_todos else f"{pad}{key}:")
            _render_map(value, indent + 1, lines)


def check_loads(text: str, name: str) -> None:
    """Load `text` through the strict profile loader, as `--profile FILE` would; a draft
    that does not load is a bug in the writer, reported with the loader's message."""
    from .profile_loader import load_profile

    with tempfile.TemporaryDirectory(prefix="fabrikit-draft-") as tmp:
        path = Path(tmp) / f"{name}.yaml"
        path.write_text(text, encoding="utf-8")
        try:
            load_profile(str(path), is_path=True)
        except UserError as exc:
            raise UserError(f"internal error: the drafted profile does not load ({exc}); "
                            "please report this with the input") from None


def write_profile(text: str, output: str, *, force: bool) -> Path | None:
    """Write `text` to `output` atomically (`-`: standard output). Never replaces an existing
    file without `force`; a missing directory or unwritable place is one UserError line."""
    if output == "-":
        sys.stdout.write(text)
        return None
    from .atomic_write import write_atomic

    path = Path(output).expanduser()
    if path.is_dir():
        raise UserError(f"-o {output}: is a directory (give a file name, e.g. {Path(output) / 'mysite.yaml'})")
    if path.exists() and not force:
        raise UserError(f"-o {output}: file exists (use --force to replace it)")
    if not path.parent.is_dir():
        raise UserError(f"-o {output}: directory {path.parent} does not exist")
    try:
        write_atomic(path, text)
    except OSError as exc:
        raise UserError(f"-o {output}: cannot write: {exc.strerror or exc}") from None
    return path
