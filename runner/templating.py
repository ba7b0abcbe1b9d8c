"""Fill `@NAME@` placeholders: the script templates under `runner/templates/` and the
Apptainer definition templates under `containers/`.

Generated scripts are bash, full of `$`, `{}` and `%`, and definition files add Apptainer's
own `{{ NAME }}`, so a template language that claims any of those would need escaping
everywhere. `@NAME@` (autoconf's convention) claims nothing either uses, and a small filler
keeps `run-multinode --dry-run` free of Jinja's ~35 ms import. Two ways to fill:

- `fill` / `fill_text` (scripts): placeholders anywhere; every placeholder must be given and
  every given value used (a mismatch is a bug in fabrikit, so ValueError).
- `fill_lines` (definition files, written by users too): a placeholder stands on a line of its
  own and every line of its value is indented like it; a misplaced or unknown placeholder is
  a one-line UserError naming the template.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache

from .errors import UserError
from .resources import templates_dir

_PLACEHOLDER = re.compile(r"@([A-Z][A-Z0-9_]*)@")
# A placeholder alone on its line; compiled on first use (a dry run of a job never needs it).
_LINE = r"(?m)^([ \t]*)@([A-Z][A-Z0-9_]*)@[ \t]*$"


@cache
def load(name: str) -> str:
    return (templates_dir() / name).read_text(encoding="utf-8")


def names(text: str) -> list[str]:
    """The placeholders in `text`, in order."""
    return _PLACEHOLDER.findall(text)


def fill_text(text: str, values: Mapping[str, str], *, source: str) -> str:
    wanted = set(names(text))
    if wanted != set(values):
        raise ValueError(f"template {source}: placeholders {sorted(wanted)} but values for {sorted(values)}")
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], text)


def fill(name: str, values: Mapping[str, str]) -> str:
    """The script template `runner/templates/<name>`, filled."""
    return fill_text(load(name), values, source=name)


def fill_lines(text: str, values: Mapping[str, str], *, source: str) -> str:
    """Replace each whole-line `@NAME@` by `values[NAME]`, every line indented like the
    placeholder (blank lines stay empty). Values the text does not use are fine; the text is
    filled in one pass, so a value that happens to contain `@X@` is left as it is."""
    whole = {match.start(2) - 1 for match in re.finditer(_LINE, text)}
    for match in _PLACEHOLDER.finditer(text):
        if match.start() not in whole:
            line = text.count("\n", 0, match.start()) + 1
            raise UserError(f"{source}:{line}: placeholder {match.group(0)} must stand on a line of its own")

    def replace(match: re.Match[str]) -> str:
        indent, name = match.groups()
        if name not in values:
            known = ", ".join(f"@{key}@" for key in values)
            raise UserError(f"{source}: unknown placeholder @{name}@ (known: {known})")
        return "\n".join(indent + line if line else "" for line in values[name].rstrip("\n").split("\n"))

    return re.sub(_LINE, replace, text)
