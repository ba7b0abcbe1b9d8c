"""What a Slurm job script does, read statically: its `#SBATCH` options, the variables it
sets and exports, the container it starts (runtime, options, image, binds, environment) and
the launcher line (torchrun, `python -m torch.distributed.run`, plain python).

The reading follows the script in order, as bash would: assignments update the variables
that later words expand to, `export` decides what a container started afterwards inherits,
`bash -c '...'` strings and scripts written by heredocs are read as scripts themselves, and
`srun`, `env`, `exec` wrappers are looked through. Nothing is executed; what only the run
can decide (`$SLURM_JOB_ID`, `$(hostname)`) is kept as written and marked unresolved.

The options of the commands it looks at (sbatch/srun, apptainer exec, torchrun) are read by
`runner.command_options`; `runner.site_import` turns this model into a profile and a hazard
report.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from .command_options import (Option, mount_spec, parse_container_options, parse_slurm_options, parse_torchrun_options,
                              skip_options, split_binds, split_env)
from .shell_script import Command, Expander, Script, Value, assignment_name, parse

SLURM_RUNTIME = ("SLURM_", "SLURMD_", "SBATCH_", "SRUN_", "SALLOC_")


class EnvVar(NamedTuple):
    name: str
    value: Value
    line: int
    how: str  # "export", "--env", "APPTAINERENV_", "srun --export", "prefix", "inside the container", ...


class BindSpec(NamedTuple):
    spec: Value  # src[:dst[:opts]] (or a --mount / --container-mounts entry, normalised)
    line: int
    how: str  # "--bind", "APPTAINER_BIND", "--mount", "--container-mounts"


class ContainerCall(NamedTuple):
    runtime: str  # apptainer | singularity | pyxis | shifter | podman-hpc | enroot | cscs-edf | charliecloud
    options: tuple[Option, ...]
    image: Value | None
    image_line: int
    line: int


class Launch(NamedTuple):
    kind: str  # torchrun | python | other
    launcher: tuple[str, ...]  # e.g. ("torchrun",) or ("python3", "-m", "torch.distributed.run")
    options: tuple[Option, ...]  # launcher options (torchrun's); for python, none
    target: tuple[Value, ...]  # script (or -m module) and its arguments
    line: int


class Step(NamedTuple):
    """One job step that runs the training: srun options, container, launcher, environment."""

    srun: tuple[Option, ...] | None
    container: ContainerCall | None
    launch: Launch | None
    env: tuple[EnvVar, ...]  # what the container/processes receive besides the host exports
    host_env: tuple[EnvVar, ...]  # exported host variables at that point of the script
    binds: tuple[BindSpec, ...]
    line: int
    cwd: str  # the directory the script had changed to (`cd`) when it ran this step


class JobScript(NamedTuple):
    path: Path
    text: str
    sbatch: tuple[Option, ...]
    sbatch_ignored: tuple[tuple[int, str], ...]  # #SBATCH lines after the first command
    steps: tuple[Step, ...]
    modules: tuple[tuple[str, int], ...]  # `module load X` / `ml X`
    sourced: tuple[tuple[str, int], ...]  # `source FILE`
    comments: tuple[tuple[str, int], ...]
    assignments: dict[str, tuple[Value, int]]  # last value of every variable (for reports)
    srun_other: tuple[tuple[Option, ...], ...]  # other sruns' options (e.g. --network)
    cwd: str

    @property
    def step(self) -> Step | None:
        """The step that trains: a launcher inside a container first, then any launcher,
        then the last container call."""
        ranked = sorted(self.steps, key=lambda s: (s.launch is not None and s.launch.kind == "torchrun",
                                                   s.launch is not None, s.container is not None), reverse=True)
        return ranked[0] if ranked else None


def read(path: Path, environment: dict[str, str] | None = None) -> JobScript:
    """Read the job script at `path`. `environment`: variables of the importing shell that
    references may resolve to (e.g. HOME, EBROOT* of loaded modules); job-time ones never."""
    text = path.read_text(encoding="utf-8", errors="replace")
    env = {k: v for k, v in (environment or {}).items() if not k.startswith(SLURM_RUNTIME)
           and k not in ("PWD", "OLDPWD", "SHLVL", "_", "RANDOM")}
    reader = _Reader(path, text, env)
    return reader.run()


class _Reader:
    def __init__(self, path: Path, text: str, environment: dict[str, str]) -> None:
        self.path = path
        self.text = text
        self.expander = Expander(environment=environment)
        self.steps: list[Step] = []
        self.modules: list[tuple[str, int]] = []
        self.sourced: list[tuple[str, int]] = []
        self.srun_other: list[tuple[Option, ...]] = []
        self.assign_lines: dict[str, int] = {}
        self.assignments: dict[str, tuple[Value, int]] = {}
        self.files: dict[str, tuple[str, int]] = {}  # file written by a heredoc -> (body, first line)
        self.cwd = str(path.resolve().parent)
        self.depth = 0

    # -- top level ---------------------------------------------------------------------------
    def run(self) -> JobScript:
        script = parse(self.text)
        sbatch, ignored = self._sbatch(script)
        for option in sbatch:
            if option.name == "chdir" and option.value and option.value.resolved:
                self.cwd = self._abspath(option.value.text)
        start_cwd = self.cwd
        self._walk(script, inside=False)
        comments = tuple((c.text, c.line) for c in script.comments)
        return JobScript(self.path, self.text, tuple(sbatch), tuple(ignored), tuple(self.steps), tuple(self.modules),
                         tuple(self.sourced), comments, self.assignments, tuple(self.srun_other),
                         start_cwd)

    def _sbatch(self, script: Script) -> tuple[list[Option], list[tuple[int, str]]]:
        first_command = min((c.line for c in script.commands), default=10**9)
        options: list[Option] = []
        ignored: list[tuple[int, str]] = []
        for comment in script.comments:
            if not comment.text.startswith("SBATCH"):
                continue
            body = comment.text[len("SBATCH"):]
            if body and not body[0].isspace():
                continue
            if comment.line > first_command:
                ignored.append((comment.line, "#" + comment.text.strip()))
                continue
            body = body.split(" #", 1)[0].split("\t#", 1)[0]
            try:
                words = shlex.split(body)
            except ValueError:
                words = body.split()
            options.extend(parse_slurm_options([(Value(w), comment.line) for w in words], comment.line)[0])
        return options, ignored

    # -- commands ----------------------------------------------------------------------------
    def _walk(self, script: Script, inside: bool) -> None:
        if self.depth > 8:
            return
        self.depth += 1
        try:
            for command in script.commands:
                self._command(command, inside)
        finally:
            self.depth -= 1

    def _command(self, command: Command, inside: bool) -> None:
        words = list(command.words)
        prefix = []
        while words and assignment_name(words[0].raw):
            prefix.append(words.pop(0))
        if not words:
            for word in prefix:
                self._assign(word.raw, word.line, exported=False)
            return
        head = self.expander.one(words[0].raw).text
        name = PurePosixPath(head).name
        if name in ("export", "declare", "typeset", "local", "readonly"):
            flags = "".join(w.raw[1:] for w in words[1:] if w.raw.startswith("-"))
            exported = name == "export" or "x" in flags
            for word in words[1:]:
                if word.raw.startswith("-"):
                    continue
                if assignment_name(word.raw):
                    self._assign(word.raw, word.line, exported=exported and "n" not in flags)
                elif exported:
                    self.expander.exported.add(self.expander.one(word.raw).text)
            return
        if name == "unset":
            for word in words[1:]:
                if not word.raw.startswith("-"):
                    self.expander.unset(word.raw)
            return
        if name in ("module", "ml"):
            args = [self.expander.one(w.raw).text for w in words[1:]]
            if name == "module" or (args and args[0] in ("load", "add", "swap", "use", "purge", "reset", "unload")):
                verb, rest = (args[0], args[1:]) if args else ("", [])
            else:
                verb, rest = "load", args
            if verb in ("load", "add", "swap"):
                self.modules.extend((m, command.line) for m in rest if not m.startswith("-"))
            return
        if name in ("source", "."):
            if len(words) > 1:
                self.sourced.append((self.expander.one(words[1].raw).text, command.line))
            return
        if name == "cd":
            target = self.expander.one(words[1].raw) if len(words) > 1 else Value("~")
            if target.resolved:
                self.cwd = self._abspath(target.text)
            return
        if name in ("cat", "tee") and command.heredocs:
            for op, target in command.redirects:
                if op in (">", ">>", ">|"):
                    value = self.expander.one(target.raw)
                    self.files[PurePosixPath(value.text).name] = (command.heredocs[0].body, command.heredocs[0].line)
            if name == "tee" and len(words) > 1:
                value = self.expander.one(words[-1].raw)
                self.files[PurePosixPath(value.text).name] = (command.heredocs[0].body, command.heredocs[0].line)
            return
        fields: list[tuple[Value, int]] = []
        for word in words:
            fields.extend((v, word.line) for v in self.expander.fields(word.raw))
        self._exec(fields, prefix, command, inside)

    def _assign(self, raw: str, line: int, exported: bool) -> tuple[str, Value] | None:
        result = self.expander.assign(raw, exported=exported)
        if result:
            name, value = result
            self.assign_lines[name] = line
            self.assignments[name] = (value, line)
        return result

    def _host_env(self) -> list[EnvVar]:
        out = []
        for name in sorted(self.expander.exported, key=lambda n: self.assign_lines.get(n, 0)):
            if name in self.expander.vars:
                raw = self.expander.vars[name]
                value = Value(" ".join(raw) if isinstance(raw, list) else raw)
            else:
                unresolved = self.expander.unresolved_value(name)
                if unresolved is None:
                    continue  # `export NAME` of a variable the script never set: from the caller
                value = unresolved
            out.append(EnvVar(name, value, self.assign_lines.get(name, 0), "export"))
        return out

    # -- a command that may start the training -------------------------------------------
    def _exec(self, fields: list[tuple[Value, int]], prefix: list, command: Command, inside: bool) -> None:
        env: list[EnvVar] = []
        binds: list[BindSpec] = []
        for word in prefix:
            result = self.expander.child().assign(word.raw)
            if result:
                env.append(EnvVar(result[0], result[1], word.line, "prefix"))
        srun: tuple[Option, ...] | None = None
        container: ContainerCall | None = None
        i = 0
        while i < len(fields):
            value, line = fields[i]
            name = PurePosixPath(value.text).name
            if name == "srun":
                options, used = parse_slurm_options(fields[i + 1:], line, stop_at_command=True)
                srun = tuple(options)
                i += 1 + used
                continue
            if name in ("mpirun", "mpiexec"):
                i = skip_options(fields, i + 1, {"-np", "-n", "-N", "--map-by", "--bind-to", "-x", "--npernode",
                                                   "-ppn", "--hostfile", "-hostfile", "-H", "--host"})
                continue
            if name in ("exec", "nohup", "time", "stdbuf", "nice", "numactl", "taskset"):
                i = skip_options(fields, i + 1, {"-n", "-o", "-e", "-i", "-C", "-m", "-N", "-c"}
                                  if name in ("nice", "stdbuf", "numactl", "taskset") else set())
                if name == "taskset" and i < len(fields):
                    i += 1
                continue
            if name == "env":
                i += 1
                while i < len(fields) and (fields[i][0].text.startswith("-") or "=" in fields[i][0].text):
                    text = fields[i][0].text
                    if "=" in text and not text.startswith("-"):
                        key, _, rest = text.partition("=")
                        env.append(EnvVar(key, Value(rest, fields[i][0].unresolved), fields[i][1], "env"))
                    i += 1
                continue
            if name in ("apptainer", "singularity") and i + 1 < len(fields) and fields[i + 1][0].text in ("exec", "run"):
                container, i = self._container(name, fields, i + 2, line, env, binds)
                inside = True
                continue
            if name in ("shifter", "podman-hpc", "enroot", "ch-run"):
                container, i = self._foreign(name, fields, i + 1, line)
                inside = True
                continue
            break
        if srun is not None and container is None:
            pyxis = self._pyxis(srun, line=command.line, binds=binds, env=env)
            if pyxis is not None:
                container = pyxis
                inside = True
        if srun is not None:
            for option in srun:
                if option.name == "export" and option.value is not None:
                    for item in option.value.text.split(",")[0 if "=" in option.value.text.split(",")[0] else 1:]:
                        if "=" in item:
                            key, _, rest = item.partition("=")
                            env.append(EnvVar(key, Value(rest, option.value.unresolved), option.line, "srun --export"))
        rest = fields[i:]
        launch = self._launch(rest)
        if launch is None and rest:
            inner_steps, inner_env = self._nested(rest, command, inside)
            launched = [step for step in inner_steps if step.launch is not None]
            if launched:  # `srun apptainer exec IMG bash -c '... torchrun ...'`: one step
                inner = launched[-1]
                launch = inner.launch
                env += [*inner_env, *inner.env]
                binds += inner.binds
                srun = srun if srun is not None else inner.srun
                container = container if container is not None else inner.container
                if container is None and srun is None:
                    self.steps.append(inner._replace(env=tuple(env)))
                    return
        if container is not None or launch is not None:
            self.steps.append(Step(srun, container, launch, tuple(env), tuple(self._host_env()), tuple(binds),
                                   command.line, self.cwd))
        elif srun is not None:
            self.srun_other.append(srun)

    def _launch(self, rest: list[tuple[Value, int]]) -> Launch | None:
        if not rest:
            return None
        first, line = rest[0]
        name = PurePosixPath(first.text).name
        if name in ("torchrun", "torchrun_jsc"):
            return _torchrun((first.text,), rest[1:], line)
        if name.startswith("python"):
            if len(rest) > 2 and rest[1][0].text == "-m" and rest[2][0].text in (
                    "torch.distributed.run", "torch.distributed.launch"):
                return _torchrun((first.text, "-m", rest[2][0].text), rest[3:], line)
            args = [v for v, _ in rest[1:]]
            while args and args[0].text.startswith("-") and args[0].text not in ("-m", "-c"):
                args.pop(0)
            if args and args[0].text == "-c":
                return None
            return Launch("python", (first.text,), (), tuple(args), line)
        if name in ("accelerate", "deepspeed", "lightning", "composer"):
            return Launch("other", (first.text,), (), tuple(v for v, _ in rest[1:]), line)
        return None

    def _nested(self, rest: list[tuple[Value, int]], command: Command, inside: bool
                ) -> tuple[list[Step], list[EnvVar]]:
        """`bash -c 'SCRIPT'`, `bash FILE` (a heredoc written earlier) or a script file that a
        heredoc wrote: read as a script; returns the steps found in it and what it exported."""
        first, line = rest[0]
        name = PurePosixPath(first.text).name
        texts = [v.text for v, _ in rest]
        if name in ("bash", "sh", "zsh") and "-c" in texts[1:]:
            k = texts.index("-c", 1)
            if k + 1 < len(rest):
                return self._subscript(rest[k + 1][0].text, rest[k + 1][1], inside)
            return [], []
        if name in ("bash", "sh") and command.heredocs:
            return self._subscript(command.heredocs[0].body, command.heredocs[0].line, inside)
        target = texts[1] if name in ("bash", "sh") and len(texts) > 1 else texts[0]
        body = self.files.get(PurePosixPath(target).name)
        if body is not None:
            return self._subscript(body[0], body[1], inside)
        return [], []

    def _subscript(self, text: str, first_line: int, inside: bool) -> tuple[list[Step], list[EnvVar]]:
        before = len(self.steps)
        saved = self.expander
        self.expander = saved.child()
        how = "inside the container" if inside else "nested script"
        try:
            self._walk(parse(text, first_line=first_line), inside=inside)
            inner_env = [EnvVar(e.name, e.value, e.line, how) for e in self._host_env()
                         if e.name not in saved.exported or saved.vars.get(e.name) != self.expander.vars.get(e.name)]
        finally:
            self.expander = saved
        steps = self.steps[before:]
        del self.steps[before:]
        return steps, inner_env

    def _container(self, runtime: str, fields: list[tuple[Value, int]], i: int, line: int, env: list,
                   binds: list) -> tuple[ContainerCall, int]:
        options, i = parse_container_options(fields, i)
        for option in options:
            value = option.value
            if value is None:
                continue
            if option.name == "bind":
                binds.extend(BindSpec(part, option.line, "--bind") for part in split_binds(value))
            elif option.name == "mount":
                spec = mount_spec(value)
                if spec is not None:
                    binds.append(BindSpec(spec, option.line, "--mount"))
            elif option.name == "env":
                for item in split_env(value):
                    name, _, text = item.text.partition("=")
                    env.append(EnvVar(name, item._replace(text=text), option.line, "--env"))
            elif option.name == "env-file" and value.resolved:
                env.extend(self._env_file(value.text, option.line))
        image, image_line = (fields[i][0], fields[i][1]) if i < len(fields) else (None, line)
        call = ContainerCall(runtime, tuple(options), image, image_line, line)
        return call, i + 1 if image is not None else i

    def _env_file(self, name: str, line: int) -> list[EnvVar]:
        path = Path(self._abspath(name))
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            return []
        out = []
        expander = Expander()
        for command in parse(text).commands:
            for word in command.words:
                result = expander.assign(word.raw)
                if result:
                    out.append(EnvVar(result[0], result[1], line, f"--env-file {name}"))
        return out

    def _foreign(self, runtime: str, fields: list[tuple[Value, int]], i: int, line: int) -> tuple[ContainerCall, int]:
        options: list[Option] = []
        image = None
        if runtime in ("podman-hpc",) and i < len(fields) and fields[i][0].text == "run":
            i += 1
        while i < len(fields) and fields[i][0].text.startswith("-"):
            text = fields[i][0].text
            key, _, value = text.lstrip("-").partition("=")
            options.append(Option(key, Value(value) if value else None, fields[i][1], text))
            if key == "image" and value:
                image = Value(value)
            i += 1
        if runtime in ("podman-hpc", "enroot", "ch-run") and i < len(fields):
            image = fields[i][0]
            i += 1
        return ContainerCall(runtime, tuple(options), image, line, line), i

    def _pyxis(self, srun: tuple[Option, ...], line: int, binds: list, env: list) -> ContainerCall | None:
        names = {o.name for o in srun}
        if "environment" in names:  # CSCS Container Engine (EDF)
            edf = next(o for o in srun if o.name == "environment")
            return ContainerCall("cscs-edf", srun, edf.value, edf.line, line)
        if "container-image" not in names:
            return None
        image = next(o for o in srun if o.name == "container-image")
        for option in srun:
            if option.name == "container-mounts" and option.value is not None:
                for part in split_binds(option.value):
                    binds.append(BindSpec(part, option.line, "--container-mounts"))
            if option.name == "container-env" and option.value is not None:
                for name in option.value.text.split(","):
                    env.append(EnvVar(name, Value(f"${name}", (name,)), option.line, "--container-env"))
        return ContainerCall("pyxis", srun, image.value, image.line, line)

    def _abspath(self, text: str) -> str:
        if text.startswith("~"):
            text = self.expander.environment.get("HOME", "~") + text[1:]
        return os.path.normpath(os.path.join(self.cwd, text))


def _torchrun(launcher: tuple[str, ...], fields: list[tuple[Value, int]], line: int) -> Launch:
    options, i = parse_torchrun_options(fields)
    return Launch("torchrun", launcher, tuple(options), tuple(v for v, _ in fields[i:]), line)
