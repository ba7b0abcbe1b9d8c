"""YAML loading that remembers where every value came from.

PyYAML's constructors throw line numbers away. Profile errors must name the file and line
of the offending field, so we compose the node graph ourselves and record, for every key
path, the `(file, line)` of the key (or of the item, for list entries). Duplicate keys,
which PyYAML silently resolves to the last one, are an error here.

Records are msgspec Structs rather than dataclasses: msgspec is loaded anyway for the
profile schema, and its classes cost a fraction of a dataclass to define at start-up.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import yaml

from .errors import UserError

try:  # the C loader is several times faster; fall back where libyaml is missing
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on how PyYAML was built
    _Loader = yaml.SafeLoader

KeyPath = tuple[str | int, ...]


class Where(msgspec.Struct, frozen=True):
    """A position in a source file (1-based line)."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


class Located(msgspec.Struct):
    """Plain data plus the position of every key path in it."""

    data: Any
    where: dict[KeyPath, Where]
    file: str

    def locate(self, path: KeyPath) -> Where:
        """Position of `path`, or of its nearest located ancestor."""
        for cut in range(len(path), -1, -1):
            hit = self.where.get(path[:cut])
            if hit is not None:
                return hit
        return Where(self.file, 1)


def load_located(path: Path, display: str | None = None) -> Located:
    """Read one YAML file into plain data with positions; bad YAML is a `UserError`."""
    name = display or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError("no such file", where=name) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read: {exc}", where=name) from None
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        where: dict[KeyPath, Where] = {(): Where(name, 1)}
        data = _convert(loader, node, (), where, name) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        problem = exc.problem or exc.context or "invalid YAML"
        raise UserError(f"invalid YAML: {problem}", where=f"{name}:{line}") from None
    except yaml.YAMLError as exc:
        raise UserError(f"invalid YAML: {exc}", where=name) from None
    finally:
        loader.dispose()
    return Located(data=data, where=where, file=name)


def _convert(loader: Any, node: yaml.Node, path: KeyPath, where: dict[KeyPath, Where], name: str) -> Any:
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if not isinstance(key, str):
                raise UserError(f"keys must be strings, got {key!r}", where=f"{name}:{line}")
            if key in out:
                dotted = ".".join(str(p) for p in (*path, key))
                raise UserError(f"{dotted}: duplicate key", where=f"{name}:{line}")
            where[(*path, key)] = Where(name, line)
            out[key] = _convert(loader, value_node, (*path, key), where, name)
        return out
    if isinstance(node, yaml.SequenceNode):
        items = []
        for index, item in enumerate(node.value):
            where[(*path, index)] = Where(name, item.start_mark.line + 1)
            items.append(_convert(loader, item, (*path, index), where, name))
        return items
    return loader.construct_object(node, deep=True)
