"""The build plan: everything `build-image` will do for a profile, computed without side
effects (`plan_build`), printed by `--dry-run` and carried out by `runner.image_build`
or `runner.image_submit` (`--submit`).

What the plan needs from this machine (the environment, its architecture, the home
directory, the process id for the temporary image's name) can be injected, so the plan is a
function you can test; it reads the template and stats bind sources, and writes nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from . import __version__
from .errors import UserError
from .image_definition import (arg_references, bundled_templates, check_header, fill, parse_arguments,
                               resolve_template)
from .image_labels import (LABEL_BUILD_ARGS, LABEL_FLAVOUR, LABEL_HASH, LABEL_SITE, LABEL_TEMPLATE, LABEL_VERSION,
                           labels_block)
from .profile_loader import LoadedProfile
from .shell import assignments, join, quote
from .validate import build_arg_value

# Agents that pull from a registry: they honour --arch and use the cache directory.
REGISTRY_AGENTS = {"docker", "library", "oras", "shub", "oci"}
ARCH_NAMES = {"x86_64": "amd64", "aarch64": "arm64"}
# Options that build-image controls itself.
FORBIDDEN_OPTIONS = {"--sandbox": "build-image builds SIF files", "-s": "build-image builds SIF files",
                     "--force": "use build-image --force", "-F": "use build-image --force",
                     "--arch": "set container.arch in the profile"}


def csv_word(text: str) -> str:
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
        env = assignments(self.env.items())
        return (env + " " if env else "") + join(self.argv)

    def describe(self) -> str:
        """What --dry-run prints on stdout: the rendered definition file."""
        return self.definition

    def summary_lines(self) -> list[str]:
        """What --dry-run prints on stderr, as `#` comments."""
        lines = [
            f"# build-image: site {self.site} ({self.profile_path}), flavour {self.flavour}, template {self.template}",
            f"# definition: {self.definition_path} ({LABEL_HASH} {self.definition_sha256})",
            "# build args: " + (" ".join(f"{k}={v}" for k, v in self.effective_args.items()) or "(none)"),
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
        lines.append(f"# then: mv {quote(str(self.temp_output))} {quote(str(self.output))}; "
                     f"log {self.log_path}")
        return lines


def host_arch(machine: str) -> str:
    """Apptainer's architecture name for what `platform.machine()` says."""
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
        bundled = ", ".join(bundled_templates()) or "none"
        raise UserError(f"container.build.template: {template} not found (bundled templates: {bundled})",
                        where=where) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"container.build.template: cannot read {template}: {exc}", where=where) from None

    # Build arguments: %arguments defaults < profile args < --build-arg.
    given: dict[str, str] = {}
    for key, value in build.args.items():
        given[key] = build_arg_value(value, f"container.build.args.{key}", where=where)
    for key, value in (cli_args or {}).items():
        given[key] = build_arg_value(value, f"--build-arg {key}")
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
    canonical = fill(raw, labels_block(labels), template)
    agent = check_header(canonical, template)
    digest = definition_hash(canonical, effective)
    labels[LABEL_VERSION] = __version__
    labels[LABEL_HASH] = digest
    definition = fill(raw, labels_block(labels), template)

    runtime = container.runtime
    for option in build.options:
        name = option.split("=", 1)[0]
        if name in FORBIDDEN_OPTIONS:
            raise UserError(f"container.build.options: {option} is not allowed ({FORBIDDEN_OPTIONS[name]})",
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
        arg_args += ["--build-arg", csv_word(f"{key}={value}")]
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
        arch=container.arch, host_arch=host_arch(machine or platform.machine()), tmpdir=tmpdir,
        tmpdir_source=tmp_source, cachedir=cachedir, cachedir_source=cache_source,
        min_free_gb=build.min_free_gb, missing_binds=tuple(missing), notes=tuple(notes),
    )
