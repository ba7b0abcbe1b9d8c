"""Find, merge (`extends:`) and validate site profiles.

Lookup order for a site name: `--profile FILE` (handled by the caller), then every directory
in `$FABRIKIT_SITES` (colon-separated), then `~/.config/fabrikit/bindings/`, then the bundled
`bindings/`. A profile may `extends:` a preset (`presets/NAME.yaml` in any of those
directories) or another site; mappings merge key by key, lists and scalars replace, and a
`null` value deletes the inherited key (e.g. an env var a site must not set).

Every error is a `UserError` whose text starts with `file:line: field:` so the CLI can print
it as one line.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import msgspec

from . import profile as schema
from . import validate
from .errors import UserError
from .resources import bundled_bindings_dir
from .shell import placeholders_problem
from .yaml_lines import KeyPath, Located, Where, load_located

# Mappings whose values are literal text (kept as written, never retyped by YAML).
LITERAL_MAPS: tuple[KeyPath, ...] = (("env",), ("env_expand",), ("container", "build", "args"))
# Error-path patterns: compiled by `re` on first use, not at start-up.
_MSGSPEC_PATH = r" - at `(?P<path>[^`]*)`(?: in `(?P<parent>[^`]*)`)?$"
_PATH_PART = r"\.([A-Za-z0-9_]+)|\[(\d+)\]|\[\.\.\.\]"


class LoadedProfile(msgspec.Struct, frozen=True):
    """A validated profile, the file it came from and the chain of files merged into it."""

    name: str
    profile: schema.Profile
    path: Path
    chain: tuple[Path, ...]


def site_dirs() -> list[tuple[str, Path]]:
    """(origin, directory) searched for sites, in priority order; origin is `env`
    ($FABRIKIT_SITES), `user` (~/.config/fabrikit/bindings) or `bundled`."""
    dirs = [("env", Path(entry).expanduser()) for entry in os.environ.get("FABRIKIT_SITES", "").split(":") if entry]
    dirs.append(("user", Path.home() / ".config" / "fabrikit" / "bindings"))
    dirs.append(("bundled", bundled_bindings_dir()))
    return dirs


def search_dirs() -> list[Path]:
    """Directories searched for sites, in priority order."""
    return [directory for _, directory in site_dirs()]


def check_site_name(name: str, field: str = "site name") -> str:
    return validate.check(validate.SITE_NAME, name, field)


def site_name_of(path: Path) -> str:
    """The site name a profile file stands for: its file name without `.yaml`, which must be a
    valid site name (it goes into job names, batch-script comments and image labels)."""
    name = path.name[:-5] if path.name.endswith(".yaml") else path.stem
    if not validate.matches(validate.SITE_NAME, name):
        raise UserError(f"--profile: the file name {path.name!r} gives the site name {name!r}, which "
                        f"{validate.HINTS[validate.SITE_NAME]}; rename the file (e.g. mysite.yaml)")
    return name


def find_site(name: str) -> Path:
    """The file defining site `name`, following the lookup order."""
    check_site_name(name)
    for directory in search_dirs():
        candidate = directory / f"{name}.yaml"
        if candidate.is_file():
            return candidate
    import difflib  # error path only: keeps start-up lean

    known = sorted(list_sites())
    hint = difflib.get_close_matches(name, known, n=1)
    extra = f" (did you mean '{hint[0]}'?)" if hint else f" (known sites: {', '.join(known)})"
    raise UserError(f"unknown site '{name}'{extra}")


def site_files() -> dict[str, list[tuple[str, Path]]]:
    """Every site name and each (origin, file) defining it in lookup order: the first wins,
    the others are shadowed. A file reached twice (a directory listed twice) counts once."""
    found: dict[str, list[tuple[str, Path]]] = {}
    seen: set[Path] = set()
    for origin, directory in site_dirs():
        if not directory.is_dir():
            continue
        for path in sorted(directory.glob("*.yaml")):
            if validate.matches(validate.SITE_NAME, path.stem) and path.resolve() not in seen:
                seen.add(path.resolve())
                found.setdefault(path.stem, []).append((origin, path))
    return found


def list_sites() -> dict[str, Path]:
    """Every visible site name and the file that wins for it."""
    return {name: files[0][1] for name, files in site_files().items()}


def _find_parent(name: str, child: Path) -> Path:
    check_site_name(name, "extends")
    dirs = [child.parent, *search_dirs()]
    for directory in dirs:
        for candidate in (directory / "presets" / f"{name}.yaml", directory / f"{name}.yaml"):
            if candidate.is_file() and candidate.resolve() != child.resolve():
                return candidate
    raise UserError(f"extends: no preset or site named '{name}'")


def _display(path: Path) -> str:
    """Paths inside the bundled tree are shown relative to the project, others as given."""
    try:
        return str(path.resolve().relative_to(bundled_bindings_dir().parent))
    except ValueError:
        return str(path)


def load_profile(name_or_path: str, *, is_path: bool = False) -> LoadedProfile:
    """Load a site by name (lookup order) or a profile file by path, merged and validated."""
    path = Path(name_or_path) if is_path else find_site(name_or_path)
    name = site_name_of(path) if is_path else name_or_path
    merged, chain = _load_merged(path, seen=())
    _drop_nulls(merged.data)
    _precheck_maps(merged)
    try:
        profile = msgspec.convert(merged.data, schema.Profile, strict=True)
    except msgspec.ValidationError as exc:
        raise _explain(exc, merged) from None
    _check_values(profile, merged)
    return LoadedProfile(name=name, profile=profile, path=path, chain=chain)


def profile_yaml(loaded: LoadedProfile) -> str:
    """The fully resolved profile (after `extends`) as YAML, with where it came from: what
    `fabrikit sites show` prints and a run directory keeps (`profile.yaml`, read back by
    --resume). libyaml's emitter where present: the same text as PyYAML's, ten times faster,
    which a dry run, whose plan holds this text, notices."""
    import yaml

    chain = " <- ".join(str(p) for p in reversed(loaded.chain))
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    body = yaml.dump(schema.to_builtins(loaded.profile), Dumper=dumper, sort_keys=False,
                     default_flow_style=False, width=100)
    return f"# site {loaded.name}: resolved from {chain}\n" + body


def _load_merged(path: Path, seen: tuple[Path, ...]) -> tuple[Located, tuple[Path, ...]]:
    resolved = path.resolve()
    if resolved in seen:
        cycle = " -> ".join(_display(p) for p in (*seen, resolved))
        raise UserError(f"extends: cycle {cycle}", where=_display(path))
    own = load_located(path, _display(path), literal=LITERAL_MAPS)
    if own.data is None:
        own.data = {}
    if not isinstance(own.data, dict):
        raise UserError("a profile must be a mapping of keys to values", where=f"{own.file}:1")
    parent_name = own.data.pop("extends", None)
    if parent_name is None:
        return own, (path,)
    if not isinstance(parent_name, str):
        raise UserError("extends: must be the name of a preset or site", where=str(own.locate(("extends",))))
    try:
        parent_path = _find_parent(parent_name, path)
    except UserError as exc:
        raise UserError(str(exc), where=str(own.locate(("extends",)))) from None
    base, chain = _load_merged(parent_path, (*seen, resolved))
    return _merge(base, own), (*chain, path)


def _merge(base: Located, over: Located) -> Located:
    """Deep-merge `over` onto `base`, keeping the position of whichever side won."""
    replaced: list[KeyPath] = []  # subtrees of `base` that `over` replaced wholesale

    def merge(a: Any, b: Any, path: KeyPath) -> Any:
        if isinstance(a, dict) and isinstance(b, dict):
            out = dict(a)
            for key, value in b.items():
                out[key] = merge(a[key], value, (*path, key)) if key in a else value
            return out
        replaced.append(path)
        return b

    data = merge(base.data, over.data, ())
    where = {
        key: value
        for key, value in base.where.items()
        if not any(key[: len(cut)] == cut and len(key) > len(cut) for cut in replaced)
    }
    where.update(over.where)
    return Located(data=data, where=where, file=over.file)


def _drop_nulls(data: Any) -> None:
    """`key: null` in a child deletes what a parent set; schema defaults apply instead."""
    if isinstance(data, dict):
        for key in [k for k, v in data.items() if v is None]:
            del data[key]
        for value in data.values():
            _drop_nulls(value)
    elif isinstance(data, list):
        for value in data:
            _drop_nulls(value)


def _precheck_maps(merged: Located) -> None:
    """Check free-form maps key by key: msgspec reports them only as `$.env[...]`."""
    data = merged.data

    def check(path: KeyPath, value: Any, name_check: Any) -> None:
        if not isinstance(value, dict):
            return
        for key, item in value.items():
            where = str(merged.locate((*path, key)))
            dotted = ".".join(str(p) for p in (*path, key))
            name_check(key, dotted, where=where)
            if not isinstance(item, str):  # literal maps keep every scalar as text
                kind = "a mapping" if isinstance(item, dict) else "a list" if isinstance(item, list) else type(item).__name__
                raise UserError(f"{dotted}: expected a string, got {kind}", where=where)

    def build_arg(key: str, dotted: str, *, where: str) -> None:
        validate.check(validate.BUILD_ARG_NAME, key, dotted, where=where)

    if isinstance(data, dict):
        check(("env",), data.get("env"), validate.env_name)
        check(("env_expand",), data.get("env_expand"), validate.env_name)
        container = data.get("container")
        if isinstance(container, dict) and isinstance(container.get("build"), dict):
            check(("container", "build", "args"), container["build"].get("args"), build_arg)


def _check_values(profile: schema.Profile, merged: Located) -> None:
    """Rules the schema's types cannot express, each reported at the line it came from."""

    def at(*path: str | int) -> str:
        return str(merged.locate(path))

    validate.text(profile.description, "description", where=at("description"))
    for name, value in profile.env.items():
        validate.env_value(value, f"env.{name}", where=at("env", name))
    for name, value in profile.env_expand.items():
        where = at("env_expand", name)
        validate.env_value(value, f"env_expand.{name}", where=where)
        if name in profile.env:
            raise UserError(f"env_expand.{name}: also set under env: (one or the other)", where=where)
        problem = placeholders_problem(value)
        if problem:
            raise UserError(f"env_expand.{name}: {problem}", where=where)
    sched = profile.scheduler
    for index, option in enumerate(sched.sbatch_extra):
        validate.sbatch_extra(option, f"scheduler.sbatch_extra[{index}]", where=at("scheduler", "sbatch_extra", index))
    for key in ("partition", "account", "constraint"):
        value = getattr(sched, key)
        if value is not None:
            validate.sbatch_word(value, f"scheduler.{key}", where=at("scheduler", key))
    for section, key, words in (("scheduler", "srun_extra", sched.srun_extra),
                                ("launcher", "torchrun", profile.launcher.torchrun),
                                ("job", "args", profile.job.args)):
        for index, word in enumerate(words):
            validate.literal(word, f"{section}.{key}[{index}]", where=at(section, key, index))
    launcher = profile.launcher
    validate.port_range(launcher.port_base, launcher.port_span, "launcher.port_span", where=at("launcher", "port_span"))
    build = profile.container.build
    if build is not None:
        validate.label_value(build.template, "container.build.template", where=at("container", "build", "template"))
        for name, value in build.args.items():
            validate.build_arg_value(value, f"container.build.args.{name}", where=at("container", "build", "args", name))
    for index, bind in enumerate(profile.binds):
        if bind.note is not None:
            validate.text(bind.note, f"binds[{index}].note", where=at("binds", index, "note"))


def _parse_path(text: str) -> KeyPath:
    parts: list[str | int] = []
    for match in re.finditer(_PATH_PART, text):
        if match.group(1) is not None:
            parts.append(match.group(1))
        elif match.group(2) is not None:
            parts.append(int(match.group(2)))
    return tuple(parts)


def _explain(exc: msgspec.ValidationError, merged: Located) -> UserError:
    """Turn msgspec's message into `file:line: field: what is wrong`."""
    message = str(exc)
    match = re.search(_MSGSPEC_PATH, message)
    path = _parse_path(match.group("path")) if match else ()
    text = message[: match.start()] if match else message
    unknown = re.match(r"Object contains unknown field `([^`]+)`", text)
    missing = re.match(r"Object missing required field `([^`]+)`", text)
    if unknown:
        key = unknown.group(1)
        path = (*path, key)
        import difflib  # error path only

        valid = _field_names(path[:-1])
        hint = difflib.get_close_matches(key, valid, n=1)
        text = f"unknown key" + (f" (did you mean '{hint[0]}'?)" if hint else f" (valid keys: {', '.join(valid)})")
    elif missing:
        path = (*path, missing.group(1))
        text = "required field is missing"
        where = merged.locate(path[:-1])
        return UserError(f"{_dotted(path)}: {text}", where=str(where))
    else:
        for pattern, hint in validate.HINTS.items():
            if repr(pattern) in text:  # msgspec shows the pattern as its repr
                text = hint
                break
        else:
            if re.match(r"Expected `str`, got `(int|float|bool)`", text):
                text += " (quote it: YAML reads unquoted 010, 1.10, 1:30 or yes as numbers or booleans)"
        value = _value_at(merged.data, path)
        if value is not None and not isinstance(value, (dict, list)):
            text = f"{text} (got {value!r})"
    return UserError(f"{_dotted(path)}: {text}", where=str(merged.locate(path)))


def _dotted(path: KeyPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out or "(top level)"


def _value_at(data: Any, path: KeyPath) -> Any:
    for part in path:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def _field_names(path: KeyPath) -> list[str]:
    """Valid keys of the struct at `path` (for did-you-mean)."""
    struct: Any = schema.Profile
    for part in path:
        if isinstance(part, int):
            continue
        info = {f.name: f.type for f in msgspec.structs.fields(struct)}
        struct = _struct_in(info.get(part))
        if struct is None:
            return []
    return sorted(f.name for f in msgspec.structs.fields(struct)) + (["extends"] if not path else [])


def _struct_in(tp: Any) -> Any:
    """The Struct class inside `T`, `T | None` or `list[T]`."""
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return tp
    for arg in getattr(tp, "__args__", ()) or ():
        found = _struct_in(arg)
        if found is not None:
            return found
    return None
