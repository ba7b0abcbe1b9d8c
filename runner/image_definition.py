"""Apptainer definition templates: reading them as Apptainer does, and filling them.

The definition files under `containers/` are templates in two layers:

* `@NAME@` on a line of its own is filled here (`runner.templating.fill_lines`), before
  Apptainer sees the file: shared fragments from `containers/common/` and the generated
  `%labels` (`@LABELS@`, appended as a `%labels` section where a template has none);
* `{{ NAME }}` is left for Apptainer's own build arguments (>= 1.2): values come from
  `--build-arg` (the profile's `container.build.args`, then `build-image --build-arg`) or
  from the template's `%arguments` defaults.

We read definition files with a few lines of our own instead of spython's parser: spython
only understands `Bootstrap: docker`, lowercases `From:`, drops `%arguments`/`%setup`/`%help`,
does not know `{{ }}`, and its writer mangles `%labels`, `%files` and `%post` (see
apptainer-and-peers.md). Templates therefore stay text, and Apptainer is the only parser
that builds from them. `arg_references` and `substitute_args` mirror Apptainer's own rules
(`internal/pkg/build/args`): the same `{{\\s*(\\w+)\\s*}}` pattern, and a reference after a
`#` comment character on its line is left alone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from .errors import UserError
from .resources import containers_dir
from .templating import fill_lines, names

# Apptainer's buildArgsRegexp `{{\s*(\w+)\s*}}` with Go's ASCII \s and \w.
_ARG_REF = re.compile(r"\{\{[\t\n\f\r ]*([0-9A-Za-z_]+)[\t\n\f\r ]*\}\}")
# Apptainer's commentLineRegexp, searched in the text between the line start and the `{{`.
_COMMENT = re.compile(r"#[^!]")
_SECTION = re.compile(r"^%([A-Za-z][A-Za-z0-9_-]*)(?:[ \t]+(\S.*))?[ \t]*$")
_HEADER_KEY = re.compile(r"^([A-Za-z][A-Za-z0-9_-]*):[ \t]*(.*?)[ \t]*$")

# Whole-line placeholders a template may use besides @LABELS@, and the fragment each stands for.
FRAGMENTS = {"POST_COMMON": "post-common.sh", "TEST_COMMON": "test-common.sh"}


def sections(text: str) -> list[tuple[str, str]]:
    """[(section name, body)] in file order, e.g. ('post', '    set -eu\\n...')."""
    out: list[tuple[str, list[str]]] = []
    for line in text.splitlines(keepends=True):
        match = _SECTION.match(line.rstrip("\n"))
        if match:
            out.append((match.group(1).lower(), []))
        elif out:
            out[-1][1].append(line)
    return [(name, "".join(body)) for name, body in out]


def header(text: str) -> list[tuple[str, str]]:
    """[(key, value)] of the header: the lines before the first section, minus comments."""
    items: list[tuple[str, str]] = []
    for line in text.splitlines():
        if _SECTION.match(line):
            break
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _HEADER_KEY.match(stripped)
        items.append((match.group(1), match.group(2)) if match else ("", stripped))
    return items


def parse_arguments(text: str) -> dict[str, str]:
    """Defaults from the `%arguments` section(s): `NAME=value` lines (both sides trimmed,
    quotes kept, as Apptainer 1.4.5 does)."""
    defaults: dict[str, str] = {}
    for name, body in sections(text):
        if name != "arguments":
            continue
        for line in body.splitlines():
            stripped = line.strip()
            if not stripped or stripped.startswith("#") or "=" not in stripped:
                continue
            key, value = stripped.split("=", 1)
            defaults[key.strip()] = value.strip()
    return defaults


def _live_references(text: str) -> list[re.Match[str]]:
    """The `{{ NAME }}` matches Apptainer substitutes (it skips those after `#x` on the line)."""
    live: list[re.Match[str]] = []
    consumed = 0
    for match in _ARG_REF.finditer(text):
        newline = text.rfind("\n", consumed, match.start())
        start = newline if newline != -1 else consumed
        if _COMMENT.search(text, start, match.start()):
            continue
        live.append(match)
        consumed = match.end()
    return live


def arg_references(text: str) -> list[str]:
    """Names of the build arguments Apptainer will substitute, first use first."""
    return list(dict.fromkeys(m.group(1) for m in _live_references(text)))


def substitute_args(text: str, values: Mapping[str, str]) -> str:
    """The definition as Apptainer will read it, for checks (shellcheck) and display."""
    out, pos = [], 0
    for match in _live_references(text):
        out.append(text[pos:match.start()])
        out.append(values[match.group(1)])
        pos = match.end()
    out.append(text[pos:])
    return "".join(out)


def resolve_template(template: str, profile_path: Path) -> Path:
    """A bare name is a bundled template (containers/NAME); a relative path with a '/' is
    relative to the profile file; an absolute path is used as is."""
    path = Path(template)
    if path.is_absolute():
        return path
    if "/" in template:
        return (profile_path.parent / path).resolve()
    return containers_dir() / template


def bundled_templates() -> list[str]:
    return sorted(p.name for p in containers_dir().glob("*.def"))


def fill(text: str, labels_block: str, template: Path) -> str:
    """Fill the whole-line placeholders: `@LABELS@` with `labels_block` (a `%labels` section
    is appended where the template has no `@LABELS@`), the others with their fragments."""
    if "LABELS" not in names(text):
        text = text.rstrip("\n") + "\n\n%labels\n    @LABELS@\n"
    values = {"LABELS": labels_block, **{name: _fragment(file) for name, file in FRAGMENTS.items()}}
    return fill_lines(text, values, source=str(template))


def _fragment(name: str) -> str:
    path = containers_dir() / "common" / name
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read definition fragment {path}: {exc.strerror}") from None


def check_header(text: str, template: Path) -> str:
    """The bootstrap agent; a UserError if the header is not a usable Apptainer header."""
    items = header(text)
    if not items or items[0][0].lower() != "bootstrap" or not items[0][1]:
        raise UserError(f"{template}: a definition file must start with a `Bootstrap: AGENT` line")
    agent = items[0][1].strip().lower()
    keys = {key.lower() for key, _ in items}
    bad = [value for key, value in items if not key]
    if bad:
        raise UserError(f"{template}: header line {bad[0]!r} is not `Key: value`")
    needed = {"debootstrap": ["osversion", "mirrorurl"], "yum": ["mirrorurl"], "dnf": ["mirrorurl"],
              "zypper": ["mirrorurl"]}.get(agent)
    if needed is None and agent not in {"scratch", "busybox", "arch"}:
        needed = ["from"]
    missing = [k for k in needed or [] if k not in keys]
    if missing:
        raise UserError(f"{template}: `Bootstrap: {agent}` needs a `{missing[0]}:` header line")
    return agent
