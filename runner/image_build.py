"""`build-image`: site profile -> `BuildPlan` (pure) -> dry run | cache check -> checks -> build.

The definition files under `containers/` are templates in two layers:

* `@NAME@` on a line of its own is filled here, before Apptainer sees the file: shared
  fragments from `containers/common/` and the generated `%labels` (`@LABELS@`);
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

`plan_build` is pure (it reads templates and stats bind sources, writes nothing);
`check_cache`, `preflight`, `execute` and `submit` run programs and touch files.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import queue
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from . import __version__
from .apptainer import Runtime, inspect_labels
from .atomic_write import write_atomic
from .errors import RuntimeFailure, UserError
from .profile import env_text
from .profile_loader import LoadedProfile
from .resources import containers_dir

# ---------------------------------------------------------------------------------------
# Labels (all under org.fabrikit.; `fabrikit doctor` reads glibc, `build-image` the hash)

LABEL_VERSION = "org.fabrikit.version"
LABEL_SITE = "org.fabrikit.site"
LABEL_FLAVOUR = "org.fabrikit.flavour"
LABEL_TEMPLATE = "org.fabrikit.template"
LABEL_BUILD_ARGS = "org.fabrikit.build-args"  # JSON object of every {{ }} value used
LABEL_HASH = "org.fabrikit.definition-sha256"
LABEL_GLIBC = "org.fabrikit.glibc"  # written by %post (containers/common/post-common.sh)

# ---------------------------------------------------------------------------------------
# Definition-file text helpers (no spython: see the module docstring)

# Apptainer's buildArgsRegexp `{{\s*(\w+)\s*}}` with Go's ASCII \s and \w.
_ARG_REF = re.compile(r"\{\{[\t\n\f\r ]*([0-9A-Za-z_]+)[\t\n\f\r ]*\}\}")
# Apptainer's commentLineRegexp, searched in the text between the line start and the `{{`.
_COMMENT = re.compile(r"#[^!]")
_SECTION = re.compile(r"^%([A-Za-z][A-Za-z0-9_-]*)(?:[ \t]+(\S.*))?[ \t]*$")
_HEADER_KEY = re.compile(r"^([A-Za-z][A-Za-z0-9_-]*):[ \t]*(.*?)[ \t]*$")
_FRAGMENT_LINE = re.compile(r"^([ \t]*)@([A-Z][A-Z0-9_]*)@[ \t]*$", re.M)
_ANY_PLACEHOLDER = re.compile(r"@([A-Z][A-Z0-9_]*)@")

FRAGMENTS = {"POST_COMMON": "post-common.sh", "TEST_COMMON": "test-common.sh"}
_LABELS_SENTINEL = "\0fabrikit-labels\0"
_FRAGMENT_LINE_SENTINEL = re.compile(r"^([ \t]*)\0fabrikit-labels\0$", re.M)
# Agents that pull from a registry: they honour --arch and use the cache directory.
REGISTRY_AGENTS = {"docker", "library", "oras", "shub", "oci"}
ARCH_NAMES = {"x86_64": "amd64", "aarch64": "arm64"}
# Options that build-image controls itself.
_FORBIDDEN_OPTIONS = {"--sandbox": "build-image builds SIF files", "-s": "build-image builds SIF files",
                      "--force": "use build-image --force", "-F": "use build-image --force",
                      "--arch": "set container.arch in the profile"}


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


# ---------------------------------------------------------------------------------------
# Rendering


def resolve_template(template: str, profile_path: Path) -> Path:
    """A bare name is a bundled template (containers/NAME); a relative path with a '/' is
    relative to the profile file; an absolute path is used as is."""
    path = Path(template)
    if path.is_absolute():
        return path
    if "/" in template:
        return (profile_path.parent / path).resolve()
    return containers_dir() / template


def _bundled_templates() -> list[str]:
    return sorted(p.name for p in containers_dir().glob("*.def"))


def _fill(text: str, labels_block: str, template: Path) -> str:
    """Fill whole-line `@NAME@` placeholders; append %labels if the template has no @LABELS@."""
    has_labels = False

    def replace(match: re.Match[str]) -> str:
        nonlocal has_labels
        indent, name = match.group(1), match.group(2)
        if name == "LABELS":
            has_labels = True
            return indent + _LABELS_SENTINEL  # filled after the stray-placeholder check
        if name in FRAGMENTS:
            body = _fragment(FRAGMENTS[name])
        else:
            known = ", ".join(f"@{n}@" for n in ["LABELS", *FRAGMENTS])
            raise UserError(f"{template}: unknown placeholder @{name}@ (known: {known})")
        return "\n".join(indent + line if line else "" for line in body.rstrip("\n").split("\n"))

    filled = _FRAGMENT_LINE.sub(replace, text)
    stray = _ANY_PLACEHOLDER.search(filled)
    if stray:
        line = filled.count("\n", 0, stray.start()) + 1
        raise UserError(f"{template}:{line}: placeholder {stray.group(0)} must stand on a line of its own")
    if not has_labels:
        filled = filled.rstrip("\n") + "\n\n%labels\n    " + _LABELS_SENTINEL + "\n"
    return _FRAGMENT_LINE_SENTINEL.sub(
        lambda m: "\n".join(m.group(1) + line for line in labels_block.split("\n")), filled)


def _fragment(name: str) -> str:
    path = containers_dir() / "common" / name
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read definition fragment {path}: {exc.strerror}") from None


def _labels_block(labels: Mapping[str, str]) -> str:
    return "\n".join(f"{key} {value}" for key, value in labels.items())


def _check_header(text: str, template: Path) -> str:
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


def _check_value(name: str, value: str, origin: str) -> str:
    if any(c in value for c in "\n\r\0") or "{{" in value or "}}" in value:
        raise UserError(f"{origin}: build argument {name}={value!r} must be one line without '{{{{' or '}}}}'")
    return value


def _csv_word(text: str) -> str:
    """Apptainer parses --build-arg as CSV (pflag StringSlice): quote values with , or "."""
    if any(c in text for c in ',"') or text != text.strip():
        return '"' + text.replace('"', '""') + '"'
    return text


def definition_hash(canonical: str, args: Mapping[str, str]) -> str:
    """sha256 of the rendered definition (with the version and hash labels as fixed tokens,
    so upgrading fabrikit alone does not invalidate images) plus every build-argument value."""
    digest = hashlib.sha256(canonical.encode("utf-8"))
    digest.update(b"\0")
    digest.update(json.dumps(dict(sorted(args.items())), separators=(",", ":")).encode("utf-8"))
    return digest.hexdigest()


# ---------------------------------------------------------------------------------------
# The plan


@dataclass(frozen=True)
class BuildPlan:
    """Everything `build-image` will do, computed without side effects."""

    site: str
    profile_path: Path
    runtime: str  # apptainer | singularity (argv[0])
    flavour: str
    template: Path
    agent: str  # the Bootstrap agent of the definition
    definition: str  # the rendered definition, as written to definition_path
    definition_path: Path  # <image>.def
    output: Path  # the image
    temp_output: Path  # <image>.tmp-<pid>: built here, renamed on success
    log_path: Path  # <image>.build.log
    build_args: dict[str, str]  # passed with --build-arg (profile, then command line)
    effective_args: dict[str, str]  # every {{ }} value used, defaults included
    labels: dict[str, str]  # the org.fabrikit.* labels in %labels
    definition_sha256: str
    argv: tuple[str, ...]  # the build command (argv[0] resolved on PATH when run)
    env: dict[str, str]  # added to the environment (profile tmpdir/cachedir)
    arch: str  # container.arch (x86_64 | aarch64)
    host_arch: str  # this machine
    tmpdir: Path
    tmpdir_source: str
    cachedir: Path | None  # None when the agent does not use the cache
    cachedir_source: str
    min_free_gb: float
    missing_binds: tuple[str, ...] = ()  # required build-bind sources that do not exist
    notes: tuple[str, ...] = ()

    @property
    def arch_matches(self) -> bool:
        return self.arch == self.host_arch

    def command_line(self) -> str:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        return (env + " " if env else "") + " ".join(shlex.quote(a) for a in self.argv)

    def describe(self) -> str:
        """What --dry-run prints on stdout: the rendered definition file."""
        return self.definition

    def summary_lines(self) -> list[str]:
        """What --dry-run prints on stderr, as `#` comments."""
        lines = [
            f"# build-image: site {self.site} ({self.profile_path}), flavour {self.flavour}, template {self.template}",
            f"# definition: {self.definition_path} ({LABEL_HASH} {self.definition_sha256})",
            f"# build args: " + (" ".join(f"{k}={v}" for k, v in self.effective_args.items()) or "(none)"),
            f"# tmpdir: {self.tmpdir} ({self.tmpdir_source}); needs {self.min_free_gb:g} GB free",
        ]
        if self.cachedir is not None:
            lines.append(f"# cachedir: {self.cachedir} ({self.cachedir_source})")
        if not self.arch_matches:
            lines.append(f"# note: the image is for {self.arch} but this machine is {self.host_arch}: "
                         "build on such a node or use --submit")
        for bind in self.missing_binds:
            lines.append(f"# problem: build bind source {bind} does not exist")
        lines.extend(f"# note: {note}" for note in self.notes)
        lines.append(f"# dry run: would run {self.command_line()}")
        lines.append(f"# then: mv {shlex.quote(str(self.temp_output))} {shlex.quote(str(self.output))}; "
                     f"log {self.log_path}")
        return lines


def _host_arch(machine: str) -> str:
    return {"arm64": "aarch64", "amd64": "x86_64"}.get(machine, machine)


def plan_build(loaded: LoadedProfile, *, cli_args: Mapping[str, str] | None = None, output: Path | None = None,
               pid: int | None = None, environ: Mapping[str, str] | None = None, machine: str | None = None,
               home: Path | None = None) -> BuildPlan:
    """The build plan for a loaded profile. Reads the template, writes nothing."""
    profile = loaded.profile
    where = str(loaded.path)
    container = profile.container
    if container.runtime == "none":
        raise UserError(f"site {loaded.name} runs without a container (container.runtime: none): nothing to build",
                        where=where)
    build = container.build
    if build is None:
        raise UserError(f"site {loaded.name} has no container.build section: nothing to build", where=where)
    environ = os.environ if environ is None else environ
    pid = os.getpid() if pid is None else pid

    image_text = str(output) if output is not None else container.image
    if not image_text:
        raise UserError(f"site {loaded.name}: container.image is not set and no --output was given", where=where)
    if any(c in image_text for c in "\n\r\0"):
        raise UserError(f"output path {image_text!r} contains a line break")
    image = Path(os.path.abspath(image_text))
    if image.is_dir():
        raise UserError(f"output {image} is a directory; give the image file's path (e.g. {image}/image.sif)")

    template = resolve_template(build.template, loaded.path)
    try:
        raw = template.read_text(encoding="utf-8")
    except FileNotFoundError:
        bundled = ", ".join(_bundled_templates()) or "none"
        raise UserError(f"container.build.template: {template} not found (bundled templates: {bundled})",
                        where=where) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"container.build.template: cannot read {template}: {exc}", where=where) from None

    # Build arguments: %arguments defaults < profile args < --build-arg.
    given: dict[str, str] = {}
    for key, value in build.args.items():
        given[key] = _check_value(key, env_text(value), f"{where}: container.build.args")
    for key, value in (cli_args or {}).items():
        given[key] = _check_value(key, value, "--build-arg")
    defaults = parse_arguments(raw)
    references = arg_references(raw)
    unbound = [name for name in references if name not in given and name not in defaults]
    if unbound:
        name = unbound[0]
        raise UserError(
            f"{template.name} uses {{{{ {name} }}}} but gives it no value: set container.build.args.{name} "
            f"in the profile, pass --build-arg {name}=VALUE, or add a default to the template's %arguments")
    unused = sorted(set(given) - set(references))
    if unused:
        uses = ", ".join(references) or "none"
        raise UserError(f"build argument {unused[0]} is not used by {template.name} (it uses: {uses})")
    effective = {name: given.get(name, defaults.get(name, "")) for name in references}

    # Labels and hash: render once with fixed tokens for the hash, once for real.
    labels = {
        LABEL_VERSION: "@@version@@",
        LABEL_SITE: loaded.name,
        LABEL_FLAVOUR: build.flavour,
        LABEL_TEMPLATE: build.template,
        LABEL_BUILD_ARGS: json.dumps(effective, separators=(",", ":")),
        LABEL_HASH: "@@sha256@@",
    }
    canonical = _fill(raw, _labels_block(labels), template)
    agent = _check_header(canonical, template)
    digest = definition_hash(canonical, effective)
    labels[LABEL_VERSION] = __version__
    labels[LABEL_HASH] = digest
    definition = _fill(raw, _labels_block(labels), template)

    runtime = container.runtime
    for option in build.options:
        name = option.split("=", 1)[0]
        if name in _FORBIDDEN_OPTIONS:
            raise UserError(f"container.build.options: {option} is not allowed ({_FORBIDDEN_OPTIONS[name]})",
                            where=where)

    bind_args: list[str] = []
    missing: list[str] = []
    notes: list[str] = []
    for bind in build.binds:
        target = bind.target or bind.source
        if not os.path.exists(bind.source):
            if bind.required:
                missing.append(bind.source)
            else:
                notes.append(f"optional build bind {bind.source} does not exist: left out")
                continue
        bind_args += ["--bind", f"{bind.source}:{target}" + (":ro" if bind.readonly else "")]

    arg_args: list[str] = []
    for key, value in given.items():
        arg_args += ["--build-arg", _csv_word(f"{key}={value}")]
    arch_args = ["--arch", ARCH_NAMES[container.arch]] if agent in REGISTRY_AGENTS else []

    prefix = "APPTAINER" if runtime == "apptainer" else "SINGULARITY"
    env: dict[str, str] = {}
    if build.tmpdir:
        tmpdir, tmp_source = Path(build.tmpdir), "container.build.tmpdir"
        env[f"{prefix}_TMPDIR"] = build.tmpdir
    elif environ.get(f"{prefix}_TMPDIR"):
        tmpdir, tmp_source = Path(environ[f"{prefix}_TMPDIR"]), f"${prefix}_TMPDIR"
    elif environ.get("TMPDIR"):
        tmpdir, tmp_source = Path(environ["TMPDIR"]), "$TMPDIR"
    else:
        tmpdir, tmp_source = Path("/tmp"), "default"
    cachedir: Path | None = None
    cache_source = ""
    if build.cachedir:
        env[f"{prefix}_CACHEDIR"] = build.cachedir
    if agent in REGISTRY_AGENTS:
        if build.cachedir:
            cachedir, cache_source = Path(build.cachedir), "container.build.cachedir"
        elif environ.get(f"{prefix}_CACHEDIR"):
            cachedir, cache_source = Path(environ[f"{prefix}_CACHEDIR"]), f"${prefix}_CACHEDIR"
        else:
            base = home if home is not None else Path(environ.get("HOME") or Path.home())
            cachedir, cache_source = base / f".{runtime}" / "cache", "default"

    temp_output = image.with_name(f"{image.name}.tmp-{pid}")
    definition_path = image.with_name(f"{image.name}.def")
    argv = (runtime, "build", *build.options, *bind_args, *arg_args, *arch_args,
            str(temp_output), str(definition_path))
    return BuildPlan(
        site=loaded.name, profile_path=loaded.path, runtime=runtime, flavour=build.flavour, template=template,
        agent=agent, definition=definition, definition_path=definition_path, output=image,
        temp_output=temp_output, log_path=image.with_name(f"{image.name}.build.log"), build_args=given,
        effective_args=effective, labels=labels, definition_sha256=digest, argv=argv, env=env,
        arch=container.arch, host_arch=_host_arch(machine or platform.machine()), tmpdir=tmpdir,
        tmpdir_source=tmp_source, cachedir=cachedir, cachedir_source=cache_source,
        min_free_gb=build.min_free_gb, missing_binds=tuple(missing), notes=tuple(notes),
    )


# ---------------------------------------------------------------------------------------
# Cache check


@dataclass(frozen=True)
class CacheState:
    status: Literal["missing", "current", "stale", "foreign", "unknown"]
    detail: str
    image_hash: str | None = None
    seconds: float = 0.0


def check_cache(plan: BuildPlan, runtime_path: str | None) -> CacheState:
    """Compare the image's `org.fabrikit.definition-sha256` label with the plan's hash.

    `apptainer inspect --labels` reads the SIF's JSON descriptor without mounting anything:
    0.02-0.05 s here, so it is the authority on every run and no sidecar file is needed."""
    start = time.monotonic()
    if not plan.output.exists():
        return CacheState("missing", f"no image at {plan.output}")
    if runtime_path is None:
        return CacheState("unknown", f"cannot read the labels of {plan.output}: {plan.runtime} not found")
    try:
        labels = inspect_labels(runtime_path, str(plan.output))
    except RuntimeFailure as exc:
        return CacheState("foreign", str(exc), seconds=time.monotonic() - start)
    seconds = time.monotonic() - start
    have = labels.get(LABEL_HASH)
    if have is None:
        return CacheState("foreign", f"{plan.output} has no {LABEL_HASH} label (not built by build-image)",
                          seconds=seconds)
    if have == plan.definition_sha256:
        return CacheState("current", f"{plan.output} matches ({LABEL_HASH} {have[:12]})", have, seconds)
    return CacheState("stale", f"{plan.output} has {LABEL_HASH} {have[:12]}, the definition now hashes to "
                               f"{plan.definition_sha256[:12]}", have, seconds)


# ---------------------------------------------------------------------------------------
# Checks before building


def _existing_ancestor(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def free_gb(path: Path) -> float:
    st = os.statvfs(_existing_ancestor(path))
    return st.f_bavail * st.f_frsize / 1e9


def filesystem_type(path: Path) -> str:
    """The type of the filesystem holding `path` (longest mount point in /proc/mounts)."""
    target = str(_existing_ancestor(path).resolve())
    best, kind = "", "unknown"
    try:
        with open("/proc/mounts", encoding="utf-8") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) < 3:
                    continue
                mount = parts[1].replace("\\040", " ")
                inside = target == mount or target.startswith(mount.rstrip("/") + "/")
                if inside and len(mount) >= len(best):
                    best, kind = mount, parts[2]
    except OSError:
        pass
    return kind


def check_output_dir(directory: Path) -> None:
    """The output directory (or the ancestor it would be created in) accepts new files.

    Tested by creating a file, not with os.access: root passes os.access everywhere, yet
    fails on read-only mounts and root-squashed NFS."""
    base = _existing_ancestor(directory)
    if not base.is_dir():
        raise UserError(f"output directory {directory} cannot be created: {base} is not a directory")
    probe = base / f".fabrikit-write-test-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        what = "is not writable" if base == directory else f"cannot be created ({base} is not writable)"
        raise UserError(f"output directory {directory} {what}: {exc.strerror}") from None
    os.close(fd)
    os.unlink(probe)


def _space_problem(label: str, directory: Path, source: str, need: float) -> str | None:
    have = free_gb(directory)
    if have >= need:
        return None
    kind = filesystem_type(directory)
    hint = (f"; {directory} is a tmpfs (memory), the classic failure for image builds" if kind == "tmpfs"
            else "; /tmp on tmpfs is a classic failure" if str(directory).startswith("/tmp") else "")
    return (f"{label} {directory} ({source}) has {have:.1f} GB free, the build needs at least {need:g} GB "
            f"(container.build.min_free_gb){hint}: point container.build.{label.split('_')[-1].lower()} "
            f"(or ${label}) at a larger filesystem")


def preflight(plan: BuildPlan, *, submit: bool = False) -> None:
    """Every check that can fail before anything is written; one UserError per problem."""
    if not plan.arch_matches and not submit:
        raise UserError(f"site {plan.site} builds an {plan.arch} image (container.arch) but this machine is "
                        f"{plan.host_arch}: run build-image on an {plan.arch} node, or add --submit to build "
                        "there through sbatch")
    if plan.missing_binds and not submit:
        raise UserError(f"build bind source {plan.missing_binds[0]} does not exist "
                        "(container.build.binds; mark it `required: false` if the build can do without)")
    check_output_dir(plan.output.parent)
    if submit:
        return
    prefix = "APPTAINER" if plan.runtime == "apptainer" else "SINGULARITY"
    problem = _space_problem(f"{prefix}_TMPDIR", plan.tmpdir, plan.tmpdir_source, plan.min_free_gb)
    if problem is None and plan.cachedir is not None:
        problem = _space_problem(f"{prefix}_CACHEDIR", plan.cachedir, plan.cachedir_source, plan.min_free_gb)
    if problem:
        raise UserError(problem)


# ---------------------------------------------------------------------------------------
# Building


_SECTION_MARKERS: tuple[tuple[str, str], ...] = (
    ("running setup scriptlet", "%setup"),
    ("copying files", "%files"),
    ("running post scriptlet", "%post"),
    ("running testscript", "%test"),
    ("adding ", "metadata"),
    ("creating sif file", "sif"),
    ("build complete", "done"),
    ("fetching oci image", "pull"),
    ("fetching image", "pull"),
    ("extracting oci image", "unpack"),
    ("starting build", "start"),
)


class Progress:
    """Turns Apptainer's output into `[ 42s %post] line` (TTY) or a few status lines (not a TTY)."""

    def __init__(self, out: IO[str], *, tty: bool, heartbeat_s: float = 30.0, agent: str = "") -> None:
        self.out = out
        # What runs after "Starting build" until the next INFO line (debootstrap is silent
        # for a minute or more, then prints everything at once).
        self.bootstrap = "pull" if agent in REGISTRY_AGENTS else "bootstrap"
        self.tty = tty
        self.heartbeat_s = heartbeat_s
        self.start = time.monotonic()
        self.last_print = self.start
        self.section = "start"
        self.step = ""
        self.fatal = ""
        self.last_line = ""

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def _emit(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()
        self.last_print = time.monotonic()

    def feed(self, line: str) -> None:
        shown = line.rsplit("\r", 1)[-1].rstrip()
        before = self.section
        lowered = shown.lower()
        if lowered.startswith("info:"):
            for marker, section in _SECTION_MARKERS:
                if marker in lowered:
                    self.section = self.bootstrap if section == "start" else section
                    self.step = ""
                    break
        elif shown.startswith("I: ") and self.section == "start":
            self.section = "bootstrap"
        elif "copying blob" in lowered or "copying config" in lowered:
            self.section = "pull"
        elif shown.startswith("+ ") and self.section.startswith("%"):
            self.step = shown[2:].strip()
        if lowered.startswith("fatal:"):
            self.fatal = shown.strip()
        if shown.strip():
            self.last_line = shown.strip()
        if self.tty:
            self._emit(f"[{self.elapsed():4.0f}s {self.section:<9}] {shown}")
        elif self.section != before:
            self._emit(f"[{self.elapsed():4.0f}s] {self.section}")

    def tick(self) -> None:
        """Called while no output arrives: a heartbeat line when not on a TTY."""
        if not self.tty and time.monotonic() - self.last_print >= self.heartbeat_s:
            step = f": {_short(self.step)}" if self.step else ""
            self._emit(f"[{self.elapsed():4.0f}s] still in {self.section}{step}")

    def failure(self, rc: int, log: Path) -> str:
        where = f"in {self.section}" + (f" at `{_short(self.step)}`" if self.step else "")
        reason = self.fatal or self.last_line or "(no output)"
        return f"build failed {where} (exit {rc}): {_short(reason, 200)}; full log: {log}"


def _short(text: str, limit: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class BuildResult:
    image: Path
    seconds: float
    size_bytes: int
    log_path: Path
    labels_ok: bool


class _Interrupts:
    """Records SIGINT and SIGTERM while a build runs, instead of raising where they land.

    The verdict (interrupted, failed, built) is then made in one place once Apptainer has
    exited, whichever of the two processes saw the signal first: with Ctrl-C on a terminal
    both get SIGINT, and Apptainer may exit (status 1) before or after Python would have
    raised KeyboardInterrupt in the middle of the failure path.

    SIGINT is handled even when it was inherited *ignored* (a CI runner, ``build-image &`` in a
    script): Apptainer's Go runtime un-ignores it and still dies of a Ctrl-C (measured with
    apptainer 1.4.5: exit 1 within a second), so a parent that kept ignoring it would call an
    interrupted build a failed one. Our handler also means the child starts with the default
    action (exec resets caught signals, but keeps ignored ones).
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.signum = 0
        self._previous: dict[int, object] = {}

    def __enter__(self) -> _Interrupts:
        if threading.current_thread() is threading.main_thread():  # handlers need the main thread
            self._previous = {sig: signal.signal(sig, self._record) for sig in self.SIGNALS}
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]

    def _record(self, signum: int, _frame: object) -> None:
        self.signum = self.signum or signum


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def _stop(proc: subprocess.Popen, first: int, *, grace: float = 0.0) -> None:
    """Let Apptainer clean up its build directory, then insist. With Ctrl-C on a terminal the
    child got SIGINT too: give it `grace` seconds before signalling it again."""
    if grace:
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            pass
    for sig, wait in ((first, 30.0), (signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
        if proc.poll() is not None:
            return
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _died_of_sigint(rc: int) -> bool:
    """Exit statuses that mean "stopped by Ctrl-C" even if our own handler did not see it."""
    return rc in (-signal.SIGINT, 128 + signal.SIGINT)


def execute(plan: BuildPlan, runtime: Runtime, *, out: IO[str] | None = None, tty: bool | None = None) -> BuildResult:
    """Run the build: definition next to the image, output to a temporary name, rename on
    success; the temporary image is removed on failure, Ctrl-C or SIGTERM (then
    KeyboardInterrupt is raised: "interrupted", exit 130)."""
    out = out if out is not None else sys.stderr
    tty = out.isatty() if tty is None else tty
    try:
        plan.output.parent.mkdir(parents=True, exist_ok=True)
        plan.tmpdir.mkdir(parents=True, exist_ok=True)  # Apptainer refuses a missing TMPDIR
        if plan.cachedir is not None and plan.cachedir_source == "container.build.cachedir":
            plan.cachedir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create {exc.filename}: {exc.strerror}") from None
    write_atomic(plan.definition_path, plan.definition)
    _remove(plan.temp_output)
    argv = [runtime.path, *plan.argv[1:]]
    env = {**os.environ, **plan.env}
    progress = Progress(out, tty=tty, agent=plan.agent)
    lines: queue.Queue[str | None] = queue.Queue()

    with open(plan.log_path, "w", encoding="utf-8", errors="replace") as log, _Interrupts() as interrupts:
        log.write(f"# fabrikit {__version__} build-image {plan.site}: {time.strftime('%Y-%m-%d %H:%M:%S %z')}\n")
        log.write(f"# {runtime.version_text} ({runtime.path}) on {platform.node()} ({plan.host_arch})\n")
        log.write(f"# command: {plan.command_line()}\n")
        log.flush()
        out.write(f"building {plan.output} (site {plan.site}, flavour {plan.flavour}); log {plan.log_path}\n")
        out.flush()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env)

        def reader() -> None:
            assert proc.stdout is not None
            for raw in proc.stdout:
                lines.put(raw.decode("utf-8", errors="replace").rstrip("\n"))
            lines.put(None)

        try:
            threading.Thread(target=reader, daemon=True).start()
            while not interrupts.signum:
                try:
                    line = lines.get(timeout=0.2)
                except queue.Empty:
                    progress.tick()
                    continue
                if line is None:
                    break
                log.write(line + "\n")
                log.flush()
                progress.feed(line)
            if interrupts.signum:
                # Ctrl-C on a terminal reached Apptainer too: let it clean up first. A SIGTERM
                # (kill, scancel) was sent to us alone, so it is passed on at once.
                sigint = interrupts.signum == signal.SIGINT
                _stop(proc, interrupts.signum, grace=5.0 if sigint else 0.0)
            rc = proc.wait()
        finally:
            if proc.poll() is None:  # pragma: no cover - only on unexpected exceptions
                _stop(proc, signal.SIGTERM)
                _remove(plan.temp_output)
        seconds = progress.elapsed()
        if interrupts.signum or _died_of_sigint(rc):
            _remove(plan.temp_output)
            log.write(f"# interrupted after {seconds:.0f} s in {progress.section}; {plan.temp_output} removed\n")
            raise KeyboardInterrupt
        if rc != 0 or not plan.temp_output.is_file():
            _remove(plan.temp_output)
            if rc == 0:
                raise RuntimeFailure(f"{plan.runtime} exited 0 but wrote no image; full log: {plan.log_path}")
            if not tty:  # the output was not shown: show its end
                tail = _tail(plan.log_path, 15)
                out.write("".join(f"  | {line}\n" for line in tail))
            log.write(f"# build failed (exit {rc}) after {seconds:.0f} s\n")
            raise RuntimeFailure(progress.failure(rc, plan.log_path))
        os.replace(plan.temp_output, plan.output)
        log.write(f"# built {plan.output} in {seconds:.0f} s\n")
    try:
        labels = inspect_labels(runtime.path, str(plan.output))
        labels_ok = labels.get(LABEL_HASH) == plan.definition_sha256
    except RuntimeFailure:
        labels_ok = False
    return BuildResult(plan.output, seconds, plan.output.stat().st_size, plan.log_path, labels_ok)


def _tail(path: Path, n: int) -> list[str]:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    return [line for line in lines if not line.startswith("# ")][-n:]


# ---------------------------------------------------------------------------------------
# Building on a compute node (--submit)

BUILD_TIME_LIMIT = "02:00:00"


@dataclass(frozen=True)
class SubmittedBuild:
    job_id: str
    script_path: Path
    log_path: Path


def submit_paths(plan: BuildPlan) -> tuple[Path, str]:
    """(batch script, sbatch --output pattern) next to the image."""
    return (plan.output.with_name(f"{plan.output.name}.build.sbatch"),
            str(plan.output.with_name(f"{plan.output.name}.build-%j.log")))


def submit_script(plan: BuildPlan, loaded: LoadedProfile) -> str:
    """A batch script that runs the same build command on a compute node of the right arch."""
    from .shell import plain

    sched = loaded.profile.scheduler
    opts = [f"--job-name=fabrikit-build-{plain(plan.site, 'site')}", "--nodes=1", "--ntasks=1",
            f"--cpus-per-task={sched.cpus_per_task or 8}", f"--time={BUILD_TIME_LIMIT}"]
    if sched.partition:
        opts.append(f"--partition={plain(sched.partition, 'partition')}")
    if sched.account:
        opts.append(f"--account={plain(sched.account, 'account')}")
    if sched.constraint:
        opts.append(f"--constraint={plain(sched.constraint, 'constraint')}")
    if sched.gpus_per_node > 0:
        # GPU partitions usually refuse jobs without a GPU; one also lets %test see a device.
        opts.append("--gpus-per-node=1")
    q = shlex.quote
    build_words = " ".join(q(a) for a in plan.argv[:-2])
    env_lines = "".join(f"export {k}={q(v)}\n" for k, v in plan.env.items())
    mkdirs = " ".join(q(v) for v in plan.env.values())
    image, definition = q(str(plan.output)), q(str(plan.definition_path))
    return (
        "#!/bin/bash\n"
        + "".join(f"#SBATCH {o}\n" for o in opts)
        + f"# fabrikit {__version__}: build-image {plan.site} --submit (definition {plan.definition_path})\n"
        "set -euo pipefail\n"
        f'if [ "$(uname -m)" != {q(plan.arch)} ]; then\n'
        f'    echo "build-image: this node is $(uname -m), the image is for {plan.arch}" >&2\n'
        "    exit 1\n"
        "fi\n"
        + env_lines
        + (f"mkdir -p {mkdirs}\n" if mkdirs else "")
        + f"tmp={image}.tmp-slurm-\"$SLURM_JOB_ID\"\n"
        "trap 'rm -f \"$tmp\"' EXIT\n"
        "trap 'exit 143' TERM INT\n"
        f'echo "building {plan.output} on $(hostname) ($(uname -m)), job $SLURM_JOB_ID"\n'
        f"{build_words} \"$tmp\" {definition}\n"
        f'mv -f "$tmp" {image}\n'
        f'echo "built {plan.output}"\n'
    )


def submit(plan: BuildPlan, loaded: LoadedProfile) -> SubmittedBuild:
    import shutil

    if loaded.profile.backend != "slurm":
        raise UserError(f"--submit needs a Slurm site; {plan.site} has backend {loaded.profile.backend}")
    if shutil.which("sbatch") is None:
        raise UserError("--submit: sbatch not found: run build-image on a Slurm login node")
    script_path, log_pattern = submit_paths(plan)
    script = submit_script(plan, loaded)
    try:
        plan.output.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create {plan.output.parent}: {exc.strerror}") from None
    write_atomic(plan.definition_path, plan.definition)
    write_atomic(script_path, script, mode=0o755)
    argv = ["sbatch", "--parsable", f"--output={log_pattern}", f"--chdir={plan.output.parent}", str(script_path)]
    try:
        result = subprocess.run(argv, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise RuntimeFailure(f"could not run sbatch: {exc}") from None
    if result.returncode != 0:
        reason = (result.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise RuntimeFailure(f"sbatch refused the build job: {reason} (script kept in {script_path})")
    job_id = result.stdout.strip().split(";", 1)[0]
    if not job_id.isdigit():
        raise RuntimeFailure(f"sbatch printed no job id: {result.stdout.strip()!r}")
    return SubmittedBuild(job_id, script_path, Path(log_pattern.replace("%j", job_id)))
