"""YAML loading that remembers where every value came from, keeps literal text literal, and
stops hostile input early.

PyYAML's constructors throw line numbers away. Profile errors must name the file and line
of the offending field, so we compose the node graph ourselves and record, for every key
path, the `(file, line)` of the key (or of the item, for list entries). Duplicate keys,
which PyYAML silently resolves to the last one, are an error here.

Literal mappings (`literal=` paths such as `env`): a scalar directly under one keeps the text
the user wrote, as a string. YAML 1.1 would otherwise retype unquoted values (`010` -> 8,
`1:30` -> 90, `1.10` -> 1.1, `yes` -> True); an env value or a build argument is text for a
shell or a definition file, so `1.20` must stay "1.20". Only a plain `null`/`~`/empty value
keeps its meaning (delete an inherited key).

Bounds, because one hostile file in a shared `$FABRIKIT_SITES` directory must not take down
`fabrikit sites` for everyone: at most `MAX_BYTES` are read (so `--profile /dev/zero` fails at
once), nesting deeper than `MAX_DEPTH` is refused while libyaml is still parsing (its
composer recurses in C: 100 000 nested `[` crash the interpreter), and aliases may expand to at
most `MAX_NODES` values (a "billion laughs" alias bomb otherwise takes gigabytes; a recursive
alias never ends).

Records are msgspec Structs rather than dataclasses: msgspec is loaded anyway for the
profile schema, and its classes cost a fraction of a dataclass to define at start-up.
"""

from __future__ import annotations

from collections.abc import Iterable
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

MAX_BYTES = 1 << 20  # a site profile is a few KB; 1 MiB leaves room for long comments
MAX_DEPTH = 32  # profiles nest 4 levels
MAX_NODES = 100_000  # values after alias expansion
_NULL_TAG = "tag:yaml.org,2002:null"
_MERGE_TAG = "tag:yaml.org,2002:merge"


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


def read_bounded(path: Path, name: str, limit: int = MAX_BYTES) -> bytes:
    """At most `limit` bytes of `path`, or a UserError (reads limit+1 bytes, never more)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except FileNotFoundError:
        raise UserError("no such file", where=name) from None
    except IsADirectoryError:
        raise UserError("is a directory, not a file", where=name) from None
    except OSError as exc:
        raise UserError(f"cannot read: {exc.strerror or exc}", where=name) from None
    if len(data) > limit:
        raise UserError(f"larger than {limit // 1024} KiB: not a profile (or a runaway file)", where=name)
    return data


def load_located(path: Path, display: str | None = None, *, literal: Iterable[KeyPath] = ()) -> Located:
    """Read one YAML file into plain data with positions; bad YAML is a `UserError`.

    Scalars directly under a mapping at a `literal` path are kept as the text written."""
    name = display or str(path)
    raw = read_bounded(path, name)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"not UTF-8 text (byte {exc.start}: {raw[exc.start:exc.start + 1]!r})", where=name) from None
    try:
        _check_shape(text, name)
        loader = _Loader(text)
        try:
            node = loader.get_single_node()
            where: dict[KeyPath, Where] = {(): Where(name, 1)}
            walk = _Walk(loader, name, where, frozenset(literal))
            data = walk.convert(node, (), 0) if node is not None else None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        problem = exc.problem or exc.context or "invalid YAML"
        raise UserError(f"invalid YAML: {problem}", where=f"{name}:{line}") from None
    except yaml.YAMLError as exc:
        raise UserError(f"invalid YAML: {' '.join(str(exc).split())}", where=name) from None
    return Located(data=data, where=where, file=name)


def _check_shape(text: str, name: str) -> None:
    """Refuse deep nesting from libyaml's event stream, before its recursive composer sees it."""
    depth = 0
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                line = event.start_mark.line + 1 if event.start_mark else 1
                raise UserError(f"nested deeper than {MAX_DEPTH} levels: not a profile", where=f"{name}:{line}")
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1


class _Walk:
    """Node graph -> plain data, counting what aliases expand to."""

    def __init__(self, loader: Any, name: str, where: dict[KeyPath, Where], literal: frozenset[KeyPath]) -> None:
        self.loader, self.name, self.where, self.literal = loader, name, where, literal
        self.count = 0

    def _bounded(self, node: yaml.Node, depth: int) -> None:
        self.count += 1
        if self.count > MAX_NODES:
            raise UserError(f"more than {MAX_NODES} values once aliases are expanded (an alias bomb?)",
                            where=f"{self.name}:{node.start_mark.line + 1}")
        if depth > MAX_DEPTH:
            raise UserError(f"nested deeper than {MAX_DEPTH} levels once aliases are expanded (a recursive alias?)",
                            where=f"{self.name}:{node.start_mark.line + 1}")

    def convert(self, node: yaml.Node, path: KeyPath, depth: int, literal: bool = False) -> Any:
        self._bounded(node, depth)
        if isinstance(node, yaml.MappingNode):
            out: dict[Any, Any] = {}
            keep_text = path in self.literal
            for key_node, value_node in node.value:
                line = key_node.start_mark.line + 1
                if key_node.tag == _MERGE_TAG:
                    raise UserError("YAML merge keys (<<) are not supported: write the keys out, or use "
                                    "`extends:` to inherit from another profile", where=f"{self.name}:{line}")
                key = self.loader.construct_object(key_node) if isinstance(key_node, yaml.ScalarNode) else None
                if not isinstance(key, str):
                    shown = repr(key) if key is not None else "a mapping or list"
                    raise UserError(f"keys must be strings, got {shown}", where=f"{self.name}:{line}")
                if key in out:
                    dotted = ".".join(str(p) for p in (*path, key))
                    raise UserError(f"{dotted}: duplicate key", where=f"{self.name}:{line}")
                self.where[(*path, key)] = Where(self.name, line)
                out[key] = self.convert(value_node, (*path, key), depth + 1, keep_text)
            return out
        if isinstance(node, yaml.SequenceNode):
            items = []
            for index, item in enumerate(node.value):
                self.where[(*path, index)] = Where(self.name, item.start_mark.line + 1)
                items.append(self.convert(item, (*path, index), depth + 1))
            return items
        if literal and isinstance(node, yaml.ScalarNode):
            return None if node.tag == _NULL_TAG else node.value
        return self.loader.construct_object(node, deep=True)
