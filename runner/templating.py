"""Fill `@NAME@` placeholders in the text templates under `runner/templates/`.

Generated scripts are bash, full of `$`, `{}` and `%`, so a template language that claims
any of those would need escaping everywhere. `@NAME@` (autoconf's convention) claims nothing
bash uses, and a 20-line filler keeps `run-multinode --dry-run` free of Jinja's ~35 ms
import. Every placeholder must be given and every given value must be used.
"""

from __future__ import annotations

import re
from functools import cache

from .resources import templates_dir

_PLACEHOLDER = re.compile(r"@([A-Z][A-Z0-9_]*)@")


@cache
def load(name: str) -> str:
    return (templates_dir() / name).read_text(encoding="utf-8")


def fill(name: str, values: dict[str, str]) -> str:
    text = load(name)
    wanted = set(_PLACEHOLDER.findall(text))
    if wanted != set(values):
        raise ValueError(f"template {name}: placeholders {sorted(wanted)} but values for {sorted(values)}")
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], text)
