"""`fabrikit sites import`: turn a site guide's job script into a profile that reproduces it,
and say which of its hazards the profile fixes and which need a person.

The script is read by `runner.job_script` (a static, in-order reading: nothing runs). This
module maps what it found onto the profile schema:

- `#SBATCH` options -> `scheduler` (fabrikit-owned ones such as `--nodes`, `--output` are
  reported, never put in `sbatch_extra`);
- the container call -> `container` (runtime, image, `--nv`/`--rocm`), its `--bind`s,
  `APPTAINER_BIND` and `--mount`s -> `binds`, `--env`, `APPTAINERENV_*`, exports and
  `bash -c 'export ...'` -> `env`, `APPTAINERENV_LD_LIBRARY_PATH` -> `library_path`;
- the torchrun line -> `launcher` and `job`;
- the fabric it talks to -> the preset it `extends` (slingshot, infiniband, ethernet).

Profile values are literal: a value that needs the shell at run time (`$SLURM_JOB_ID`,
`$(hostname)`) is never written as if it were text; it becomes a TODO and a hazard. Facts
behind each hazard are in shared/reference/fabric-facts.md and apptainer-and-peers.md.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple

from . import profile as schema
from .job_script import SLURM_RUNTIME, BindSpec, EnvVar, JobScript, Option, Step, read
from .profile_writer import Draft
from .shell_script import Value

# Directories whose wholesale bind shadows the container's own libraries (fabric-facts.md,
# "Recurring failures" 5).
SYSTEM_LIB_DIRS = {"/usr/lib64", "/lib64", "/usr/lib", "/lib", "/usr/lib/x86_64-linux-gnu",
                   "/usr/lib/aarch64-linux-gnu", "/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/usr",
                   "/usr/local/lib", "/usr/local/lib64"}
# Set by torchrun / fabrikit's rendezvous: a script's own values would fight it.
LAUNCHER_OWNED = {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "NODE_RANK", "GROUP_RANK",
                  "LOCAL_WORLD_SIZE", "NNODES", "NPROC_PER_NODE", "RDZV_ENDPOINT", "RDZV_ID", "RDZV_BACKEND",
                  "TORCHELASTIC_RUN_ID", "LD_LIBRARY_PATH", "PATH", "HOME", "USER", "PWD", "SHELL", "TERM",
                  "LOGNAME", "HOSTNAME", "OLDPWD", "SHLVL", "MODULEPATH", "LOADEDMODULES", "IFS", "run_dir"}
# Variables that tune the job's libraries: carried even when the script also uses them itself.
RUNTIME_KNOBS = ("NCCL_", "RCCL_", "FI_", "UCX_", "GLOO_", "TORCH_", "OMP_", "CUDA_", "HIP_", "ROCR_", "HSA_",
                 "MIOPEN_", "PYTORCH_", "HF_", "MPICH_", "CXI_", "NVIDIA_", "TF_", "KMP_", "MKL_", "PYTHON")
# #SBATCH/srun options fabrikit writes itself (never in sbatch_extra/srun_extra).
OWNED_SBATCH = {"job-name", "nodes", "ntasks-per-node", "ntasks", "partition", "account", "gpus-per-node",
                "cpus-per-task", "mem", "time", "constraint", "output", "error", "signal", "requeue",
                "no-requeue", "open-mode", "chdir", "gpus", "gpus-per-task", "array", "parsable", "wait",
                "export", "gres", "kill-on-bad-exit", "label"}
SRUN_CARRIED = {"network", "cpu-bind", "mpi", "hint", "distribution", "mem-bind", "accel-bind",
                "threads-per-core", "gpu-bind", "cpus-per-task", "overlap", "exact", "unbuffered"}
PLACEHOLDER = re.compile(r"[<>]|^(your|my)[_-]|x{3,}|X{3,}|^project_?number$|^<|^\.\.\.$", re.I)
_LIBNAME = re.compile(r"\blib[A-Za-z0-9_+-]*\.so(?:\.\d+)*")
_SONAME = re.compile(r"^lib[A-Za-z0-9_+.-]*\.so(\.\d+)*$")


class Hazard(NamedTuple):
    code: str
    status: str  # fixed | todo | note
    line: int | None
    message: str


class ImportResult(NamedTuple):
    name: str
    text: str
    preset: str
    hazards: list[Hazard]
    carried: dict[str, int]
    nodes: int | None


class _Evidence:
    """Which fabric, GPU vendor and architecture the script points at, with the lines why."""

    def __init__(self) -> None:
        self.votes: dict[str, list[str]] = {"slingshot": [], "infiniband": [], "ethernet": []}
        self.vendor: tuple[str, str] | None = None
        self.arch: tuple[str, str] | None = None
        self.gh200: str | None = None


def import_script(path: Path, name: str, environment: dict[str, str] | None = None) -> ImportResult:
    """Read `path` and draft the profile for site `name`."""
    js = read(path, environment if environment is not None else dict(os.environ))
    return _Importer(js, name).run()


class _Importer:
    def __init__(self, js: JobScript, name: str) -> None:
        self.js = js
        self.name = name
        self.step: Step | None = js.step
        self.hazards: list[Hazard] = []
        self.env: dict[str, tuple[Value, int, str]] = {}
        self.evidence = _Evidence()
        self.carried = {"slurm settings": 0, "binds": 0, "env": 0}
        self.draft: Draft
        self.nodes: int | None = None
        self.gpus = 0
        self.cpus: int | None = None
        self.tasks_per_node = 1

    def hazard(self, code: str, status: str, line: int | None, message: str) -> None:
        self.hazards.append(Hazard(code, status, line or None, message))

    # -----------------------------------------------------------------------------------------
    def run(self) -> ImportResult:
        js = self.js
        self.draft = Draft([])
        self.draft.set(("extends",), "ethernet")
        self.draft.set(("description",), "")
        for section in ("scheduler", "container", "binds", "host_libraries", "library_path", "env", "launcher", "job"):
            self.draft.root.setdefault(section, {} if section not in ("binds", "library_path") else [])
        self.draft.root["binds"] = []
        self.draft.root["library_path"] = []
        self._scheduler()
        self._collect_env()
        self._fabric_evidence()
        self._container()
        self._binds()
        self._env()
        self._launcher()
        self._job()
        preset = self._preset()
        self._fabric_hazards(preset)
        if not self.draft.root["binds"]:
            del self.draft.root["binds"]
        if not self.draft.root["library_path"]:
            del self.draft.root["library_path"]
        self.draft.header = self._header(preset)
        return ImportResult(self.name, self.draft.render(), preset, self.hazards, self.carried, self.nodes)

    def _header(self, preset: str) -> list[str]:
        digest = hashlib.sha256(self.js.text.encode()).hexdigest()[:12]
        lines = [
            f"Site '{self.name}': imported by `fabrikit sites import` from {self.js.path.name} (sha256 {digest}...).",
            "Every value names the line of that script it came from; `# TODO` marks what could not be",
            "carried over as a literal value. Check it with:",
            f"  fabrikit doctor --profile {self.name}.yaml",
            f"  run-multinode --profile {self.name}.yaml --nodes {self.nodes or 2} --dry-run",
        ]
        if self.hazards:
            lines.append("Hazards found in the script:")
            for h in self.hazards:
                where = f"line {h.line}" if h.line else "script"
                lines.append(f"  {h.status:5} {where}: {h.code}: {h.message}")
        return lines

    # -- Slurm -----------------------------------------------------------------------------
    def _scheduler(self) -> None:
        js, d = self.js, self.draft
        by_name: dict[str, Option] = {}
        for option in js.sbatch:
            by_name[option.name] = option
        for line, text in js.sbatch_ignored:
            self.hazard("sbatch-after-command", "note", line,
                        f"`{text}` comes after the first command, so sbatch ignores it; not carried over")
        tasks = by_name.get("ntasks-per-node")
        if tasks and tasks.value and tasks.value.text.isdigit():
            self.tasks_per_node = int(tasks.value.text)
        nodes = by_name.get("nodes")
        if nodes and nodes.value:
            match = re.match(r"\d+", nodes.value.text)
            self.nodes = int(match.group(0)) if match else None
        for option in js.sbatch:
            self._sbatch_option(option, by_name)
        if self.tasks_per_node > 1:
            self.hazard("tasks-per-node", "fixed", by_name["ntasks-per-node"].line,
                        f"--ntasks-per-node={self.tasks_per_node}: fabrikit runs one task per node (torchrun "
                        "starts one process per GPU), so per-task CPUs are multiplied per node")
        if self.cpus is not None:
            total = self.cpus * max(self.tasks_per_node, 1)
            option = by_name.get("cpus-per-task")
            note = f"line {option.line}: {option.written}" if option else ""
            if self.tasks_per_node > 1:
                note += f" x {self.tasks_per_node} tasks per node (one torchrun per node here)"
            d.set(("scheduler", "cpus_per_task"), total, note)
            self.cpus = total
            self.carried["slurm settings"] += 1

    def _sbatch_option(self, option: Option, by_name: dict[str, Option]) -> None:
        d = self.draft
        value = option.value.text if option.value is not None else None
        where = f"line {option.line}: #SBATCH {option.written}"
        name = option.name
        if option.value is not None and not option.value.resolved:
            self.hazard("runtime-expansion", "todo", option.line,
                        f"#SBATCH {option.written} uses a variable sbatch does not expand; not carried over")
            return
        if name == "partition" and value:
            self._plain(("scheduler", "partition"), value, where, option)
        elif name == "account" and value:
            self._plain(("scheduler", "account"), value, where, option)
        elif name == "constraint" and value:
            self._plain(("scheduler", "constraint"), value, where, option)
        elif name in ("gpus-per-node", "gres", "gpus", "gpus-per-task") and value:
            count = _gpu_count(name, value)
            if count is None:
                if name == "gres":
                    self._extra(option, where)
                return
            if name == "gpus" and self.nodes:
                count = max(count // self.nodes, 1)
            if name == "gpus-per-task":
                count *= self.tasks_per_node
            self.gpus = count
            typed = (re.search(r"gpu:([A-Za-z][\w-]*):", value) if name == "gres"
                     else re.match(r"([A-Za-z][\w-]*):\d", value))
            note = where + (f" (GPU type '{typed.group(1)}' dropped: fabrikit asks --gpus-per-node=N)" if typed else "")
            if typed:
                self._gpu_type_hint(typed.group(1), option.line)
            d.set(("scheduler", "gpus_per_node"), count, note)
            self.carried["slurm settings"] += 1
            rest = [g for g in value.split(",") if not g.startswith("gpu")] if name == "gres" else []
            if rest:
                self._extra(option._replace(value=Value(",".join(rest)), written=f"--gres={','.join(rest)}"), where)
        elif name == "cpus-per-task" and value and value.isdigit():
            self.cpus = int(value)
        elif name == "mem" and value:
            mem = re.fullmatch(r"(\d+)([KMGTkmgt])?[Bb]?", value)
            if mem and int(mem.group(1)) > 0:
                d.set(("scheduler", "mem"), mem.group(1) + (mem.group(2) or "").upper(), where)
                self.carried["slurm settings"] += 1
            else:
                d.todo(("scheduler", "mem"), f"{where}: --mem={value} (0 = all of the node's memory) has no "
                       "scheduler.mem form; give the size, e.g. 440G")
                self.hazard("mem-all", "todo", option.line, f"--mem={value}: set scheduler.mem to a size")
        elif name == "time" and value:
            if re.match(schema.SLURM_TIME, value):
                d.set(("scheduler", "time"), value, where)
                self.carried["slurm settings"] += 1
            else:
                d.todo(("scheduler", "time"), f"{where}: not a time fabrikit understands", value)
        elif name == "requeue":
            d.set(("scheduler", "requeue"), True, where)
            self.carried["slurm settings"] += 1
        elif name == "export" and value and value.upper().startswith("NONE"):
            self.hazard("export-none", "fixed", option.line,
                        "--export=NONE starts the job without the submitting shell's environment (no modules, "
                        "no PATH); fabrikit's script sets what the job needs itself")
        elif name in ("job-name", "output", "error", "open-mode", "chdir", "signal", "nodes", "ntasks-per-node",
                      "ntasks", "no-requeue", "parsable", "wait", "export", "kill-on-bad-exit", "label"):
            return  # fabrikit writes these itself (the report's next steps give --nodes)
        elif name == "array":
            self.hazard("job-array", "todo", option.line, f"{where}: job arrays are not a profile setting; submit "
                        "run-multinode once per task instead")
        else:
            self._extra(option, where)

    def _plain(self, path: tuple[str, ...], value: str, where: str, option: Option) -> None:
        if PLACEHOLDER.search(value) or shlex.quote(value) != value:
            self.draft.todo(path, f"{where}: '{value}' looks like a placeholder or needs quoting; "
                            f"give the real value (or --{option.name} on the command line)")
            self.hazard("placeholder", "todo", option.line, f"{option.written}: '{value}' is a placeholder")
            return
        self.draft.set(path, value, where)
        self.carried["slurm settings"] += 1

    def _extra(self, option: Option, where: str) -> None:
        text = f"--{option.name}" + (f"={option.value.text}" if option.value is not None else "")
        if option.name in OWNED_SBATCH:
            return
        if shlex.quote(text) != text or PLACEHOLDER.search(option.value.text if option.value else ""):
            self.draft.todo(("scheduler", "sbatch_extra"), f"{where}: needs quoting or is a placeholder; "
                            "not carried over")
            return
        extras = self.draft.get(("scheduler", "sbatch_extra")) or []
        if text not in extras:
            notes = [where] if not extras else [self.draft.root["scheduler"]["sbatch_extra"].note, where]
            self.draft.set(("scheduler", "sbatch_extra"), [*extras, text], "; ".join(notes))
            self.carried["slurm settings"] += 1

    def _gpu_type_hint(self, gpu_type: str, line: int) -> None:
        low = gpu_type.lower()
        if low.startswith(("gh", "grace")):
            self.evidence.gh200 = self.evidence.gh200 or f"line {line}: GPU type {gpu_type}"
            self.evidence.arch = self.evidence.arch or ("aarch64", f"line {line}: GPU type {gpu_type}")
        if low.startswith(("mi", "amd")):
            self.evidence.vendor = self.evidence.vendor or ("amd", f"line {line}: GPU type {gpu_type}")
        elif low.startswith(("a1", "h1", "h2", "v1", "l4", "gh", "b2", "rtx", "t4", "p1", "nvidia", "tesla")):
            self.evidence.vendor = self.evidence.vendor or ("nvidia", f"line {line}: GPU type {gpu_type}")

    # -- environment -----------------------------------------------------------------------
    def _collect_env(self) -> None:
        """Everything the training processes would see, latest source winning, then split
        into binds, library path and variables."""
        step = self.step
        if step is None:
            return
        ordered: list[EnvVar] = list(step.host_env) + list(step.env)
        for srun_opts in [step.srun or ()]:
            for option in srun_opts:
                if option.name == "cpus-per-task" and option.value is not None and option.value.text.isdigit():
                    self.cpus = self.cpus or int(option.value.text)
        for var in ordered:
            self.env[var.name] = (var.value, var.line, var.how)

    def _env(self) -> None:
        d = self.draft
        consumed = self._consumed_names()
        library_path: list[tuple[str, int]] = []
        for name, (value, line, how) in list(self.env.items()):
            target = name
            for prefix in ("APPTAINERENV_", "SINGULARITYENV_"):
                if name.startswith(prefix):
                    target = name[len(prefix):]
                    how = f"{prefix}{target}"
            if target in ("APPTAINER_BIND", "SINGULARITY_BIND", "APPTAINER_BINDPATH", "SINGULARITY_BINDPATH"):
                continue  # handled by _binds
            if target == "LD_LIBRARY_PATH" and (how.startswith(("APPTAINERENV_", "SINGULARITYENV_"))
                                                 or how in ("inside the container", "--env")
                                                 or self._runtime() == "none"):
                for entry in value.text.split(":"):
                    if entry.startswith("/") and "$" not in entry and entry not in [p for p, _ in library_path]:
                        library_path.append((entry, line))
                if not value.resolved:
                    self.hazard("runtime-expansion", "todo", line,
                                f"{how} LD_LIBRARY_PATH={value.text}: the parts that need the shell "
                                f"({', '.join(value.unresolved)}) were left out of library_path")
                continue
            if target in ("PREPEND_PATH", "APPEND_PATH") or (target == "PATH" and how != "export"):
                self.hazard("path-in-container", "todo", line,
                            f"{how}={value.text}: fabrikit has no PATH setting; call the program by its full "
                            "path in the job, or put it in the image")
                continue
            if name.startswith(("APPTAINER_", "SINGULARITY_")) and target == name:
                self.hazard("runtime-config", "note", line, f"{name} configures the container runtime on the "
                            "host; not carried (set it in your shell if you need it)")
                continue
            if target in LAUNCHER_OWNED or target.startswith("FABRIKIT_"):
                if target in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "NODE_RANK"):
                    if target == "MASTER_PORT" and value.resolved and value.text.isdigit():
                        self.hazard("fixed-port", "fixed", line,
                                    f"MASTER_PORT={value.text} is a fixed rendezvous port: two jobs on one head "
                                    "node collide (errno 98); fabrikit derives it from the job id "
                                    "(launcher.port_base + id mod port_span)")
                    continue
                if target in ("LD_LIBRARY_PATH", "PATH") and how == "export" and self._runtime() != "none":
                    self.hazard("host-library-path", "note", line,
                                f"export {target}=... on the host does not reach the container (Apptainer "
                                "never imports it); not carried")
                continue
            if target.startswith(SLURM_RUNTIME):
                if target == "SRUN_CPUS_PER_TASK":
                    cpus = self.cpus
                    if cpus:
                        self._srun_extra(f"--cpus-per-task={cpus}", f"line {line}: {name}")
                    continue
                self.hazard("slurm-input-variable", "note", line, f"{name} is a Slurm input variable for the "
                            "batch shell; not carried")
                continue
            if target in consumed and not target.startswith(RUNTIME_KNOBS) and how == "export":
                continue  # a helper variable of the script itself (used in its own command lines)
            self._env_value(target, value, line, how)
        for entry, line in library_path:
            d.append(("library_path",), entry, f"line {line}")

    def _consumed_names(self) -> set[str]:
        text = self.js.text
        return {name for name in self.env if re.search(r"\$\{?" + re.escape(name) + r"\b", text)}

    def _env_value(self, name: str, value: Value, line: int, how: str) -> None:
        d = self.draft
        where = f"line {line}: {how}"
        if not re.fullmatch(schema.ENV_NAME, name):
            return
        if how == "--env" and ("," in value.text or '"' in value.text or "'" in value.text):
            self.hazard("env-comma", "fixed", line,
                        f"--env {name}={value.text}: Apptainer's --env is CSV-parsed, so commas or quotes "
                        "in the value can split or drop it; fabrikit exports APPTAINERENV_" + name + " instead")
        if not value.resolved:
            literal = self._literal_for(value)
            if literal is not None:
                d.set(("env", name), literal, f"{where} ({value.text}, written as the value it has here)", quote=True)
                self.hazard("runtime-expansion", "fixed", line,
                            f"{name}={value.text} needs the shell at run time; profile env values are literal, "
                            f"so it is written as {literal}")
                self.carried["env"] += 1
                return
            d.todo(("env", name), f"{where}: needs the shell at run time ({', '.join(value.unresolved)}); "
                   "profile env values are literal: give the value", value.text)
            self.hazard("runtime-expansion", "todo", line,
                        f"{name}={value.text} needs the shell at run time ({', '.join(value.unresolved)}); "
                        "profile env values are literal, so it was left as a TODO")
            return
        text = value.text
        note = where
        if value.from_environment:
            note += f" (${', $'.join(value.from_environment)} from this shell's environment)"
        if name == "NCCL_DEBUG" and text.upper() not in ("INFO", "TRACE"):
            d.todo(("env", name), f"{where}: {name}={text} hides the lines fabrikit's transport check reads; "
                   "fabrikit sets INFO (INIT,NET)", text)
            self.hazard("nccl-debug-quiet", "fixed", line, f"NCCL_DEBUG={text} hides which transport NCCL used; "
                        "fabrikit sets NCCL_DEBUG=INFO with NCCL_DEBUG_SUBSYS=INIT,NET and checks it at the end")
            return
        if name == "NCCL_DEBUG_SUBSYS" and not ({"INIT", "NET"} <= set(text.upper().split(",")) or "ALL" in text.upper()):
            d.todo(("env", name), f"{where}: lacks INIT,NET, which fabrikit's transport check reads", text)
            self.hazard("nccl-debug-quiet", "fixed", line, f"NCCL_DEBUG_SUBSYS={text} hides the NET lines; "
                        "fabrikit uses INIT,NET")
            return
        if name == "FI_MR_CACHE_MONITOR" and text == "memhooks":
            d.set(("env", name), "userfaultfd", f"{where} set memhooks, which deadlocks; HPE/CSCS use userfaultfd",
                  quote=True)
            self.hazard("mr-cache-memhooks", "fixed", line, "FI_MR_CACHE_MONITOR=memhooks deadlocks at scale "
                        "(Frontier, HPE); written as userfaultfd")
            self.carried["env"] += 1
            return
        d.set(("env", name), text, note, quote=True)
        self.carried["env"] += 1

    def _literal_for(self, value: Value) -> str | None:
        """`$SLURM_CPUS_PER_TASK` / `$SLURM_GPUS_ON_NODE` alone: the profile knows the number."""
        text = value.text.strip('"')
        names = {"SLURM_CPUS_PER_TASK": self.cpus if self.tasks_per_node == 1 else None,
                 "SRUN_CPUS_PER_TASK": self.cpus if self.tasks_per_node == 1 else None,
                 "SLURM_GPUS_ON_NODE": self.gpus or None, "SLURM_GPUS_PER_NODE": self.gpus or None}
        match = re.fullmatch(r"\$\{?([A-Z_]+)(?::-[^}]*)?\}?", text)
        if match and names.get(match.group(1)):
            return str(names[match.group(1)])
        return None

    # -- container ---------------------------------------------------------------------------
    def _runtime(self) -> str:
        call = self.step.container if self.step else None
        if call is None:
            return "none"
        return call.runtime if call.runtime in ("apptainer", "singularity") else "apptainer"

    def _container(self) -> None:
        d = self.draft
        step = self.step
        if step is None:
            d.set(("container", "runtime"), "none", "no srun/apptainer/torchrun line found in the script")
            self.hazard("no-launch", "todo", None, "no line that starts training (torchrun, python, apptainer "
                        "exec) was found; the profile has the Slurm settings only")
            return
        call = step.container
        if call is None:
            d.set(("container", "runtime"), "none", f"line {step.line}: the script runs the launcher on the host")
            if self.js.modules:
                mods = ", ".join(m for m, _ in self.js.modules)
                self.hazard("modules", "todo", self.js.modules[0][1],
                            f"the job uses host modules ({mods}); fabrikit's batch script loads none: "
                            "load them before run-multinode (sbatch passes your environment on) or use an image")
            return
        where = f"line {call.line}: {call.runtime}"
        site_modules = [(m, line) for m, line in self.js.modules
                        if not re.match(r"(apptainer|singularity)(ce)?(/|$)", m, re.I)]
        if site_modules:
            mods = ", ".join(m for m, _ in site_modules)
            self.hazard("modules", "todo", site_modules[0][1],
                        f"the script loads modules ({mods}) whose binds and variables (e.g. SINGULARITY_BIND, "
                        "APPTAINERENV_*) are not visible in it and so not in the profile; load them before "
                        "run-multinode (sbatch passes your environment on) or add what they set")
        if call.runtime not in ("apptainer", "singularity"):
            d.set(("container", "runtime"), "apptainer", f"{where}: fabrikit runs Apptainer images")
            self.hazard("foreign-runtime", "todo", call.line,
                        f"the script uses {call.runtime}"
                        + (f" (image {call.image.text})" if call.image else "")
                        + "; fabrikit runs Apptainer: build or pull a SIF (build-image, or `apptainer pull`) "
                        "and set container.image")
            self._placeholder_image("the script's image is not an Apptainer SIF")
        else:
            d.set(("container", "runtime"), call.runtime, f"{where} exec")
            self._image(call.image, call.image_line)
        names = [o.name for o in call.options]
        foreign = call.runtime not in ("apptainer", "singularity")
        if foreign and self.gpus and (self.evidence.vendor or ("nvidia", ""))[0] == "nvidia":
            d.set(("container", "gpu_flag"), "--nv", f"{where} exposes NVIDIA GPUs itself; Apptainer needs --nv")
        elif foreign:
            d.set(("container", "gpu_flag"), "none", f"{where}: no GPUs requested")
        elif "nv" in names or "nvccli" in names:
            d.set(("container", "gpu_flag"), "--nv", where + " --nv")
            self.evidence.vendor = self.evidence.vendor or ("nvidia", f"line {call.line}: --nv")
        elif "rocm" in names:
            d.set(("container", "gpu_flag"), "--rocm", where + " --rocm")
            self.evidence.vendor = self.evidence.vendor or ("amd", f"line {call.line}: --rocm")
        else:
            d.set(("container", "gpu_flag"), "none", f"{where}: neither --nv nor --rocm")
        for option in call.options if not foreign else ():
            if option.name in ("cleanenv", "containall"):
                self.hazard("cleanenv", "fixed", option.line,
                            f"{option.written} strips the host environment, SLINGSHOT_* (which the cxi provider "
                            "needs) and SLURM_* included; fabrikit passes values as APPTAINERENV_* and never "
                            "uses --cleanenv")
            elif option.name not in ("bind", "mount", "env", "env-file", "nv", "nvccli", "rocm"):
                self.hazard("container-option", "todo", option.line,
                            f"{option.written}: fabrikit's launch line has no place for this {call.runtime} "
                            "option; not carried")
            if option.name == "env-file" and option.value is not None and not any(
                    h.how.startswith("--env-file") for h in step.env):
                self.hazard("env-file", "todo", option.line, f"--env-file {option.value.text}: could not be "
                            "read here; copy its variables into env")

    def _image(self, image: Value | None, line: int) -> None:
        d = self.draft
        if image is None:
            self._placeholder_image("no image on the container line")
            return
        text = image.text
        where = f"line {line}"
        if not image.resolved:
            self.hazard("runtime-expansion", "todo", line,
                        f"the image path {text} needs the shell ({', '.join(image.unresolved)}); set container.image")
            self._placeholder_image(f"{where}: image {text} needs the shell at run time")
            return
        if re.match(r"^[a-z]+://", text):
            self.hazard("image-uri", "todo", line, f"the image {text} is pulled at run time on every node; "
                        f"`apptainer pull` it once and set container.image to the .sif")
            self._placeholder_image(f"{where}: {text} (pull it once: apptainer pull)")
            return
        if not text.startswith("/"):
            resolved = os.path.normpath(os.path.join(self.js.cwd, os.path.expanduser(text)))
            note = f"{where}: {text}, relative in the script: resolved against {self.js.cwd}"
            text = resolved
        else:
            note = where
        if image.from_environment:
            note += f" (${', $'.join(image.from_environment)} from this shell's environment)"
        if re.fullmatch(schema.ABSOLUTE_PATH, text):
            d.set(("container", "image"), text, note)
            self._arch_hint(text, line)
        else:
            self._placeholder_image(f"{where}: {text} contains ',' or ':', which a profile path cannot")

    def _placeholder_image(self, why: str) -> None:
        path = str(Path(self.js.cwd) / f"{self.name}.sif")
        self.draft.set(("container", "image"), path, f"TODO: placeholder; {why}")

    def _arch_hint(self, text: str, line: int) -> None:
        low = text.lower()
        if re.search(r"aarch64|arm64|gh200|grace", low):
            self.evidence.arch = self.evidence.arch or ("aarch64", f"line {line}: {PurePosixPath(text).name}")
        if "gh200" in low:
            self.evidence.gh200 = self.evidence.gh200 or f"line {line}: {PurePosixPath(text).name}"
        if "rocm" in low:
            self.evidence.vendor = self.evidence.vendor or ("amd", f"line {line}: rocm in the image name")

    # -- binds -----------------------------------------------------------------------------------
    def _binds(self) -> None:
        step = self.step
        if step is None or step.container is None:
            return
        specs: list[BindSpec] = []
        for name in ("APPTAINER_BIND", "SINGULARITY_BIND", "APPTAINER_BINDPATH", "SINGULARITY_BINDPATH"):
            if name in self.env:
                value, line, how = self.env[name]
                for part in value.text.split(","):
                    unresolved = value.unresolved if "$" in part else ()
                    if unresolved and re.fullmatch(r"\$\{?(APPTAINER|SINGULARITY)_BIND(PATH)?\}?", part):
                        continue  # `X_BIND="/a,$X_BIND"`: the caller's own list
                    if part.strip():
                        specs.append(BindSpec(Value(part, unresolved, value.from_environment), line, name))
        specs.extend(step.binds)
        hostlibs: dict[str, tuple[list[str], int, str]] = {}
        seen_targets: set[str] = set()
        for spec in specs:
            self._bind(spec, hostlibs, seen_targets)
        for source_dir, (names, line, written) in hostlibs.items():
            self._host_libraries(source_dir, names, line, written)

    def _bind(self, spec: BindSpec, hostlibs: dict, seen_targets: set[str]) -> None:
        d = self.draft
        where = f"line {spec.line}: {spec.how} {spec.spec.text}"
        parts = spec.spec.text.split(":")
        source, target = parts[0], parts[1] if len(parts) > 1 and parts[1] else parts[0]
        options = parts[2] if len(parts) > 2 else ""
        if not spec.spec.resolved:
            d.append_todo(("binds",), f"{where}: needs the shell ({', '.join(spec.spec.unresolved)}); give the "
                          "host path", {"source": source, "target": target})
            self.hazard("runtime-expansion", "todo", spec.line,
                        f"bind {spec.spec.text} needs the shell at run time ({', '.join(spec.spec.unresolved)}); "
                        "left as a TODO")
            return
        notes = [where]
        if spec.spec.from_environment:
            notes.append(f"${', $'.join(spec.spec.from_environment)} from this shell's environment")
        if not source.startswith("/"):
            source = os.path.normpath(os.path.join(self.js.cwd, os.path.expanduser(source)))
            notes.append(f"relative: resolved against {self.js.cwd}")
            if not target.startswith("/"):
                target = source
        source, target = source.rstrip("/") or "/", target.rstrip("/") or "/"
        if not (re.fullmatch(schema.ABSOLUTE_PATH, source) and re.fullmatch(schema.ABSOLUTE_PATH, target)):
            d.append_todo(("binds",), f"{where}: not an absolute path fabrikit can bind")
            return
        if target in SYSTEM_LIB_DIRS:
            if source in SYSTEM_LIB_DIRS:
                names = self._library_hints(spec.line)
                entry = hostlibs.setdefault(source, ([], spec.line, spec.spec.text))
                entry[0].extend(n for n in names if n not in entry[0])
                return
            new_target = "/opt/fabrikit/bind/" + re.sub(r"[^A-Za-z0-9_.-]+", "-", source.strip("/"))
            self.hazard("bind-over-system-dir", "fixed", spec.line,
                        f"--bind {source}:{target} hides the container's own {target}; bound at {new_target} "
                        "and put on the library path instead")
            d.append(("library_path",), new_target, f"line {spec.line}: was bound over {target}")
            notes.append(f"was bound over the container's {target}")
            target = new_target
        if target in seen_targets:
            return
        seen_targets.add(target)
        entry: dict[str, Any] = {"source": source}
        if target != source:
            entry["target"] = target
        entry["readonly"] = "ro" in options.split(",")
        d.append(("binds",), entry, "; ".join(notes))
        self.carried["binds"] += 1

    def _library_hints(self, line: int) -> list[str]:
        """Library names a comment near a whole-directory bind says it is for."""
        names: list[str] = []
        for text, where in self.js.comments:
            if line - 4 <= where <= line + 1:
                names.extend(n for n in _LIBNAME.findall(text) if n not in names)
        return names

    def _host_libraries(self, source_dir: str, names: list[str], line: int, written: str) -> None:
        d = self.draft
        fabric = self._fabric_guess()
        how = "named in a comment beside the bind" if names else ""
        if not names and fabric == "slingshot":
            names, how = ["libcxi.so.1"], "the CXI library Slingshot's libfabric needs (fabric-facts.md)"
        names = [n for n in names if _SONAME.match(n) and not re.search(r"[,:]", n)]
        if not names:
            d.todo(("host_libraries", "names"), f"line {line}: the script bound all of {source_dir}; name the "
                   "libraries the job needs from it (e.g. [libcxi.so.1]); doctor then binds their closure", [])
            self.hazard("whole-dir-bind", "todo", line,
                        f"--bind {written} binds the whole {source_dir} over the container's own libraries "
                        "(glibc/ABI clashes); dropped: name the libraries it was for in host_libraries.names")
            return
        current = d.get(("host_libraries", "names")) or []
        d.set(("host_libraries", "names"), [*current, *[n for n in names if n not in current]],
              f"line {line}: instead of binding all of {source_dir} ({how})")
        paths = d.get(("host_libraries", "search_path")) or []
        if source_dir not in paths:
            d.set(("host_libraries", "search_path"), [*paths, source_dir], f"line {line}")
        self.hazard("whole-dir-bind", "fixed", line,
                    f"--bind {written} binds the whole {source_dir} over the container's own libraries; replaced by "
                    f"host_libraries.names {names} (bound file by file with their dependency closure)")

    # -- launcher and job ----------------------------------------------------------------------
    def _launcher(self) -> None:
        d = self.draft
        step = self.step
        if step is None:
            return
        for option in step.srun or ():
            self._srun_option(option)
        for options in self.js.srun_other:
            for option in options:
                if option.name == "network" and option.value and "disable_rdzv_get" in option.value.text:
                    self._srun_option(option)
        launch = step.launch
        if launch is None:
            self.hazard("no-launcher", "todo", step.line, "no torchrun or python line was found inside the "
                        "container call; the job section keeps fabrikit's default")
            return
        where = f"line {launch.line}"
        if launch.kind == "python":
            self.hazard("no-torchrun", "fixed", launch.line,
                        f"srun starts `{' '.join(launch.launcher)}` once per task ({self.tasks_per_node} per node); "
                        "fabrikit starts one torchrun per node that spawns one process per GPU and sets RANK, "
                        "LOCAL_RANK and WORLD_SIZE: the training script must read those")
            return
        if launch.kind == "other":
            self.hazard("launcher", "todo", launch.line, f"{launch.launcher[0]} is not torchrun; the profile "
                        "uses torchrun with c10d rendezvous")
            return
        if launch.launcher != ("torchrun",):
            d.set(("launcher", "torchrun"), list(launch.launcher), f"{where}: {' '.join(launch.launcher)}")
        options = {o.name: o for o in launch.options}
        port = None
        for key in ("rdzv_endpoint", "master_port"):
            option = options.get(key)
            if option and option.value:
                text = option.value.text
                candidate = text.rsplit(":", 1)[-1] if key == "rdzv_endpoint" else text
                unresolved = [u for u in option.value.unresolved if candidate.find(u) >= 0]
                if candidate.isdigit() and not unresolved:
                    port = (candidate, option)
        if port is None and "MASTER_PORT" in self.env:
            value, line, _ = self.env["MASTER_PORT"]
            if value.resolved and value.text.isdigit() and not any(h.code == "fixed-port" for h in self.hazards):
                port = (value.text, Option("MASTER_PORT", value, line, f"MASTER_PORT={value.text}"))
        if port is not None and not any(h.code == "fixed-port" for h in self.hazards):
            self.hazard("fixed-port", "fixed", port[1].line,
                        f"{port[1].written}: rendezvous port {port[0]} is fixed, so two jobs on one head node "
                        "collide (errno 98, pytorch #116974); fabrikit derives it from the job id "
                        "(launcher.port_base + id mod port_span)")
        nproc = options.get("nproc_per_node")
        if nproc and nproc.value:
            if "SLURM_GPUS_PER_NODE" in nproc.value.text:
                self.hazard("nproc-gpus-per-node", "fixed", nproc.line,
                            f"{nproc.written}: SLURM_GPUS_PER_NODE is set only with --gpus-per-node and may read "
                            "'a100:4'; fabrikit uses SLURM_GPUS_ON_NODE")
            elif nproc.value.resolved and nproc.value.text.isdigit():
                count = int(nproc.value.text)
                if self.gpus == 0:
                    d.set(("launcher", "nproc_per_node"), count, f"{where}: {nproc.written} (no GPUs requested)")
                elif count != self.gpus:
                    self.hazard("nproc-mismatch", "note", nproc.line, f"{nproc.written} but {self.gpus} GPUs per "
                                "node requested; fabrikit starts one process per GPU")
        if "standalone" in options:
            self.hazard("standalone", "fixed", options["standalone"].line,
                        "--standalone rendezvous works on one node only; fabrikit uses c10d across nodes")
        conf = options.get("rdzv_conf")
        if conf and conf.value:
            for key, value in re.findall(r"(join_timeout|read_timeout)=(\d+)", conf.value.text):
                d.set(("launcher", f"{key}_s"), int(value), f"line {conf.line}: {conf.written}")
        restarts = options.get("max_restarts")
        if restarts and restarts.value and restarts.value.text.isdigit():
            d.set(("launcher", "max_restarts"), int(restarts.value.text), f"line {restarts.line}: {restarts.written}")

    def _srun_option(self, option: Option) -> None:
        where = f"line {option.line}: srun {option.written}"
        if option.name not in SRUN_CARRIED:
            if option.name.startswith("container-") or option.name in ("environment", "export"):
                return
            if option.name not in OWNED_SBATCH:
                self.hazard("srun-option", "note", option.line, f"srun {option.written}: not carried (fabrikit's "
                            "srun starts one task per node)")
            return
        value = option.value
        if value is not None and not value.resolved:
            if option.name == "cpus-per-task" and self.cpus:
                self._srun_extra(f"--cpus-per-task={self.cpus}", f"{where} (= cpus_per_task)")
            else:
                self.hazard("runtime-expansion", "todo", option.line, f"srun {option.written} needs the shell; "
                            "not carried")
            return
        if option.name == "cpu-bind" and value is not None and re.match(r"(mask|map)_(cpu|ldom)", value.text):
            self.hazard("cpu-bind-mask", "fixed", option.line,
                        f"srun {option.written[:60]}... pins one CPU mask per task (one task per GPU); fabrikit "
                        "runs one torchrun per node, which would be pinned to the first mask: not carried")
            return
        if option.name == "gpu-bind" and self.tasks_per_node > 1:
            return
        self._srun_extra(f"--{option.name}" + (f"={value.text}" if value is not None else ""), where)

    def _srun_extra(self, text: str, where: str) -> None:
        d = self.draft
        extras = d.get(("scheduler", "srun_extra")) or []
        if text in extras:
            return
        old = self.draft.root["scheduler"].get("srun_extra")
        d.set(("scheduler", "srun_extra"), [*extras, text], "; ".join(x for x in (old.note if old else "", where) if x))
        self.carried["slurm settings"] += 1

    def _job(self) -> None:
        d = self.draft
        step = self.step
        launch = step.launch if step else None
        if launch is None or not launch.target:
            return
        target = launch.target
        if launch.kind == "torchrun" and any(o.name in ("m", "module") for o in launch.options):
            d.todo(("job", "script"), f"line {launch.line}: the script runs the module `-m "
                   f"{' '.join(v.text for v in target)}`; give a script path (or run it with -- PATH ARGS)")
            return
        script, args = target[0], target[1:]
        command = " ".join(v.text for v in target)
        cwd = step.cwd if step else self.js.cwd
        path = script.text if script.text.startswith("/") else os.path.normpath(os.path.join(cwd, script.text))
        if script.resolved and all(a.resolved for a in args) and Path(path).is_file() and "{" not in command:
            d.set(("job", "script"), path, f"line {launch.line}")
            d.set(("job", "args"), [a.text for a in args], f"line {launch.line}")
            return
        d.todo(("job", "script"), f"line {launch.line}: the script runs `{command}`; {path} is not a file here"
               + ("" if all(a.resolved for a in args) else " and its arguments need the shell")
               + f". Run it with: run-multinode --profile {self.name}.yaml --nodes N -- {path} ARGS")

    # -- fabric ------------------------------------------------------------------------------------
    def _fabric_evidence(self) -> None:
        ev = self.evidence
        checks = [
            ("slingshot", r"\bFI_PROVIDER\s*=\s*['\"]?cxi|\bFI_CXI_\w+|/opt/cray/libfabric|libcxi|/run/cxi|"
                          r"SLINGSHOT_|\bhsn\d?\b|NCCL_NET\s*=\s*['\"]?(AWS Libfabric|OFI)|aws-ofi|"
                          r"singularity-(AI-)?bindings|disable_rdzv_get|\bcxi\b"),
            ("infiniband", r"\bNCCL_IB_(HCA|GID_INDEX|TIMEOUT|SL|TC|QPS_PER_CONNECTION|ADAPTIVE_ROUTING)\b|\bmlx5|"
                           r"\bib0\b|/dev/infiniband|libibverbs|UCX_NET_DEVICES|\bInfiniBand\b|\bHDR\b|\bNDR\b"),
            ("ethernet", r"NCCL_IB_DISABLE\s*=\s*['\"]?1|NCCL_SOCKET_IFNAME\s*=\s*['\"]?=?(eth|en)"),
        ]
        for number, line in enumerate(self.js.text.splitlines(), 1):
            for fabric, pattern in checks:
                match = re.search(pattern, line)
                if match and len(ev.votes[fabric]) < 3:
                    ev.votes[fabric].append(f"line {number}: {match.group(0).strip()}")
            low = line.lower()
            if re.search(r"\bgh200\b|grace.hopper", low):
                ev.gh200 = ev.gh200 or f"line {number}: GH200"
                ev.arch = ev.arch or ("aarch64", f"line {number}: GH200")
            if re.search(r"aarch64|arm64", low):
                ev.arch = ev.arch or ("aarch64", f"line {number}: {'aarch64' if 'aarch64' in low else 'arm64'}")
            if re.search(r"\brocm\b|\bmi2\d\d|\bmi300|\brccl\b|HIP_VISIBLE|ROCR_VISIBLE|MIOPEN_", line, re.I):
                ev.vendor = ev.vendor or ("amd", f"line {number}: ROCm/RCCL")

    def _fabric_guess(self) -> str | None:
        votes = self.evidence.votes
        best = max(("slingshot", "infiniband", "ethernet"), key=lambda f: len(votes[f]))
        return best if votes[best] else None

    def _preset(self) -> str:
        d = self.draft
        fabric = self._fabric_guess()
        ev = self.evidence
        if fabric is None:
            d.set(("extends",), "ethernet", "TODO: the script names no fabric (no hsn/cxi/FI_*, no ib0/mlx5/"
                  "NCCL_IB_*): check `fabrikit sites init` on a compute node")
            d.set(("env", "NCCL_SOCKET_IFNAME"), None, "the ethernet preset's eth0 is a guess here: NCCL picks")
            d.set(("env", "GLOO_SOCKET_IFNAME"), None, "the ethernet preset's eth0 is a guess here")
            fabric_text = "fabric unknown"
            self.hazard("fabric-unknown", "todo", None, "the script names no fabric; the profile extends the "
                        "ethernet preset: run `fabrikit sites init` on a compute node to find it")
        else:
            d.set(("extends",), fabric, "; ".join(ev.votes[fabric]))
            fabric_text = {"slingshot": "HPE Slingshot", "infiniband": "InfiniBand", "ethernet": "Ethernet"}[fabric]
        arch = ev.arch[0] if ev.arch else "x86_64"
        if self.step and self.step.container is not None:
            d.set(("container", "arch"), arch, ev.arch[1] if ev.arch else "no aarch64/arm64/GH200 in the script")
        gpus = f"{self.gpus}x GPU per node" if self.gpus else "no GPUs requested"
        d.set(("description",), f"{self.name}: imported from {self.js.path.name} ({gpus}, {fabric_text})")
        return fabric or "ethernet"

    def _fabric_hazards(self, preset: str) -> None:
        d = self.draft
        env = d.root.get("env", {})
        if "NCCL_DEBUG" not in {n.removeprefix("APPTAINERENV_").removeprefix("SINGULARITYENV_") for n in self.env}:
            self.hazard("no-nccl-debug", "fixed", None,
                        "NCCL_DEBUG is not set, so nothing shows which transport NCCL used; fabrikit sets "
                        "NCCL_DEBUG=INFO (INIT,NET) and checks at the end of the job that NCCL used the fabric")
        values = {k: v.value for k, v in env.items() if not k.startswith("#") and hasattr(v, "value")}
        if preset == "slingshot":
            if "NCCL_NET" not in values:
                self.hazard("no-nccl-net", "fixed", None,
                            "NCCL_NET is not set, so NCCL silently falls back to TCP sockets (5-40x slower) when "
                            "the OFI plugin fails; the slingshot preset sets NCCL_NET='AWS Libfabric' (fail "
                            "instead)")
            if "NCCL_NET_PLUGIN" in values and values.get("NCCL_NET", "AWS Libfabric"):
                self.hazard("nccl-net-plugin", "todo", self.env.get("NCCL_NET_PLUGIN", (None, None))[1],
                            "NCCL_NET_PLUGIN together with NCCL_NET gives `network ... not found` with some "
                            "plugin builds (fabric-facts.md failure 3): keep one of them")
            if values.get("FI_CXI_RX_MATCH_MODE") == "hybrid":
                extras = d.get(("scheduler", "srun_extra")) or []
                if not any("disable_rdzv_get" in e for e in extras):
                    self._srun_extra("--network=disable_rdzv_get", "FI_CXI_RX_MATCH_MODE=hybrid needs it (HPE)")
                    self.hazard("hybrid-rdzv-get", "fixed", self.env.get("FI_CXI_RX_MATCH_MODE", (0, None, 0))[1],
                                "FI_CXI_RX_MATCH_MODE=hybrid requires srun --network=disable_rdzv_get (HPE "
                                "shs-ccl-docs); added to srun_extra")
            vendor = self.evidence.vendor[0] if self.evidence.vendor else None
            arch = self.evidence.arch[0] if self.evidence.arch else None
            guarded = "LL128" in str(values.get("NCCL_PROTO", "")) or all(
                str(values.get(k, "")) == "0" for k in ("FI_CXI_RDZV_EAGER_SIZE", "FI_CXI_RDZV_THRESHOLD",
                                                         "FI_CXI_RDZV_GET_MIN"))
            if (self.evidence.gh200 or (arch == "aarch64" and vendor != "amd")) and not guarded:
                why = self.evidence.gh200 or (self.evidence.arch[1] if self.evidence.arch else "")
                d.set(("env", "NCCL_PROTO"), "^LL128", f"GH200 guard added by the import ({why})", quote=True)
                self.hazard("gh200-ll128", "fixed", None,
                            f"GH200 on Slingshot ({why}) without NCCL_PROTO=^LL128 or the FI_CXI_RDZV_*=0 set: "
                            "NCCL >= 2.27 returns wrong all-reduce results at 2-64 MB (NVIDIA/nccl#2001); added "
                            "NCCL_PROTO=^LL128")
        elif preset == "infiniband":
            if "NCCL_NET" not in values:
                self.hazard("no-nccl-net", "fixed", None,
                            "NCCL_NET is not set, so a missing rdma-core makes NCCL fall back to TCP sockets "
                            "(~40x slower) silently; fabrikit's end-of-job check reports the transport each "
                            "rank used")
            if str(values.get("NCCL_IB_DISABLE", "")) == "1":
                self.hazard("ib-disabled", "todo", self.env.get("NCCL_IB_DISABLE", (0, None, 0))[1],
                            "NCCL_IB_DISABLE=1 on an InfiniBand cluster sends all traffic over TCP (IPoIB); "
                            "remove it unless that is intended")


def _gpu_count(option: str, value: str) -> int | None:
    if option == "gres":
        match = re.search(r"(?:^|,)gpu(?::[A-Za-z][\w-]*)?(?::(\d+))?(?:\(|,|$)", value)
        if not match:
            return None
        return int(match.group(1) or 1)
    match = re.fullmatch(r"(?:[A-Za-z][\w-]*:)?(\d+)", value)
    return int(match.group(1)) if match else None
