"""`fabrikit sites import`, the Slurm side: a script's `#SBATCH` options and the options of
its `srun` become the profile's `scheduler` section. Options fabrikit writes itself
(`--nodes`, `--output`, ...) are never put in `sbatch_extra`/`srun_extra`; a per-GPU CPU
mask list becomes `launcher.cpu_bind_masks` when it has one mask per local rank.
"""

from __future__ import annotations

import re
import shlex

from . import profile as schema
from .command_options import Option
from .shell_script import Value
from .site_import_state import ImportState

# #SBATCH/srun options fabrikit writes itself (never in sbatch_extra/srun_extra).
OWNED_SBATCH = {"job-name", "nodes", "ntasks-per-node", "ntasks", "partition", "account", "gpus-per-node",
                "cpus-per-task", "mem", "time", "constraint", "output", "error", "signal", "requeue",
                "no-requeue", "open-mode", "chdir", "gpus", "gpus-per-task", "array", "parsable", "wait",
                "export", "gres", "kill-on-bad-exit", "label"}
SRUN_CARRIED = {"network", "cpu-bind", "mpi", "hint", "distribution", "mem-bind", "accel-bind",
                "threads-per-core", "gpu-bind", "cpus-per-task", "overlap", "exact", "unbuffered"}
PLACEHOLDER = re.compile(r"[<>]|^(your|my)[_-]|x{3,}|X{3,}|^project_?number$|^<|^\.\.\.$", re.I)
# `srun --cpu-bind=[quiet|verbose,]mask_cpu:M0,M1,...` (also map_cpu, mask_ldom, map_ldom): one
# entry per task on a node. Masks are hexadecimal with an optional 0x (srun(1)).
_PER_TASK_BIND = re.compile(r"(?:(?:quiet|verbose),)?(mask|map)_(cpu|ldom):")
_HEX_MASK = re.compile(r"(?:0[xX])?([0-9A-Fa-f]{1,256})")


def map_scheduler(st: ImportState) -> None:
    js, d = st.js, st.draft
    by_name: dict[str, Option] = {}
    for option in js.sbatch:
        by_name[option.name] = option
    for line, text in js.sbatch_ignored:
        st.hazard("sbatch-after-command", "note", line,
                  f"`{text}` comes after the first command, so sbatch ignores it; not carried over")
    tasks = by_name.get("ntasks-per-node")
    if tasks and tasks.value and tasks.value.text.isdigit():
        st.tasks_per_node = int(tasks.value.text)
    nodes = by_name.get("nodes")
    if nodes and nodes.value:
        match = re.match(r"\d+", nodes.value.text)
        st.nodes = int(match.group(0)) if match else None
    for option in js.sbatch:
        _sbatch_option(st, option, by_name)
    if st.tasks_per_node > 1:
        st.hazard("tasks-per-node", "fixed", by_name["ntasks-per-node"].line,
                  f"--ntasks-per-node={st.tasks_per_node}: fabrikit runs one task per node (torchrun "
                  "starts one process per GPU), so per-task CPUs are multiplied per node")
    if st.cpus is not None:
        total = st.cpus * max(st.tasks_per_node, 1)
        option = by_name.get("cpus-per-task")
        note = f"line {option.line}: {option.written}" if option else ""
        if st.tasks_per_node > 1:
            note += f" x {st.tasks_per_node} tasks per node (one torchrun per node here)"
        d.set(("scheduler", "cpus_per_task"), total, note)
        st.cpus = total
        st.carried["slurm settings"] += 1


def _sbatch_option(st: ImportState, option: Option, by_name: dict[str, Option]) -> None:
    d = st.draft
    value = option.value.text if option.value is not None else None
    where = f"line {option.line}: #SBATCH {option.written}"
    name = option.name
    if option.value is not None and not option.value.resolved:
        st.hazard("runtime-expansion", "todo", option.line,
                  f"#SBATCH {option.written} uses a variable sbatch does not expand; not carried over")
        return
    if name == "partition" and value:
        _plain(st, ("scheduler", "partition"), value, where, option)
    elif name == "account" and value:
        _plain(st, ("scheduler", "account"), value, where, option)
    elif name == "constraint" and value:
        _plain(st, ("scheduler", "constraint"), value, where, option)
    elif name in ("gpus-per-node", "gres", "gpus", "gpus-per-task") and value:
        count = _gpu_count(name, value)
        if count is None:
            if name == "gres":
                _extra(st, option, where)
            return
        if name == "gpus" and st.nodes:
            count = max(count // st.nodes, 1)
        if name == "gpus-per-task":
            count *= st.tasks_per_node
        st.gpus = count
        typed = (re.search(r"gpu:([A-Za-z][\w-]*):", value) if name == "gres"
                 else re.match(r"([A-Za-z][\w-]*):\d", value))
        note = where + (f" (GPU type '{typed.group(1)}' dropped: fabrikit asks --gpus-per-node=N)" if typed else "")
        if typed:
            _gpu_type_hint(st, typed.group(1), option.line)
        d.set(("scheduler", "gpus_per_node"), count, note)
        st.carried["slurm settings"] += 1
        rest = [g for g in value.split(",") if not g.startswith("gpu")] if name == "gres" else []
        if rest:
            _extra(st, option._replace(value=Value(",".join(rest)), written=f"--gres={','.join(rest)}"), where)
    elif name == "cpus-per-task" and value and value.isdigit():
        st.cpus = int(value)
    elif name == "mem" and value:
        mem = re.fullmatch(r"(\d+)([KMGTkmgt])?[Bb]?", value)
        if mem and int(mem.group(1)) > 0:
            d.set(("scheduler", "mem"), mem.group(1) + (mem.group(2) or "").upper(), where)
            st.carried["slurm settings"] += 1
        else:
            d.todo(("scheduler", "mem"), f"{where}: --mem={value} (0 = all of the node's memory) has no "
                   "scheduler.mem form; give the size, e.g. 440G")
            st.hazard("mem-all", "todo", option.line, f"--mem={value}: set scheduler.mem to a size")
    elif name == "time" and value:
        if re.match(schema.SLURM_TIME, value):
            d.set(("scheduler", "time"), value, where)
            st.carried["slurm settings"] += 1
        else:
            d.todo(("scheduler", "time"), f"{where}: not a time fabrikit understands", value)
    elif name == "requeue":
        d.set(("scheduler", "requeue"), True, where)
        st.carried["slurm settings"] += 1
    elif name == "export" and value and value.upper().startswith("NONE"):
        st.hazard("export-none", "fixed", option.line,
                  "--export=NONE starts the job without the submitting shell's environment (no modules, "
                  "no PATH); fabrikit's script sets what the job needs itself")
    elif name in ("job-name", "output", "error", "open-mode", "chdir", "signal", "nodes", "ntasks-per-node",
                  "ntasks", "no-requeue", "parsable", "wait", "export", "kill-on-bad-exit", "label"):
        return  # fabrikit writes these itself (the report's next steps give --nodes)
    elif name == "array":
        st.hazard("job-array", "todo", option.line, f"{where}: job arrays are not a profile setting; submit "
                  "run-multinode once per task instead")
    else:
        _extra(st, option, where)


def _plain(st: ImportState, path: tuple[str, ...], value: str, where: str, option: Option) -> None:
    if PLACEHOLDER.search(value) or shlex.quote(value) != value:
        st.draft.todo(path, f"{where}: '{value}' looks like a placeholder or needs quoting; "
                      f"give the real value (or --{option.name} on the command line)")
        st.hazard("placeholder", "todo", option.line, f"{option.written}: '{value}' is a placeholder")
        return
    st.draft.set(path, value, where)
    st.carried["slurm settings"] += 1


def _extra(st: ImportState, option: Option, where: str) -> None:
    text = f"--{option.name}" + (f"={option.value.text}" if option.value is not None else "")
    if option.name in OWNED_SBATCH:
        return
    if shlex.quote(text) != text or PLACEHOLDER.search(option.value.text if option.value else ""):
        st.draft.todo(("scheduler", "sbatch_extra"), f"{where}: needs quoting or is a placeholder; "
                      "not carried over")
        return
    extras = st.draft.get(("scheduler", "sbatch_extra")) or []
    if text not in extras:
        notes = [where] if not extras else [st.draft.root["scheduler"]["sbatch_extra"].note, where]
        st.draft.set(("scheduler", "sbatch_extra"), [*extras, text], "; ".join(notes))
        st.carried["slurm settings"] += 1


def _gpu_type_hint(st: ImportState, gpu_type: str, line: int) -> None:
    low = gpu_type.lower()
    if low.startswith(("gh", "grace")):
        st.evidence.gh200 = st.evidence.gh200 or f"line {line}: GPU type {gpu_type}"
        st.evidence.arch = st.evidence.arch or ("aarch64", f"line {line}: GPU type {gpu_type}")
    if low.startswith(("mi", "amd")):
        st.evidence.vendor = st.evidence.vendor or ("amd", f"line {line}: GPU type {gpu_type}")
    elif low.startswith(("a1", "h1", "h2", "v1", "l4", "gh", "b2", "rtx", "t4", "p1", "nvidia", "tesla")):
        st.evidence.vendor = st.evidence.vendor or ("nvidia", f"line {line}: GPU type {gpu_type}")


def map_srun(st: ImportState) -> None:
    """The training step's srun options, and `--network=disable_rdzv_get` from any srun."""
    step = st.step
    if step is None:
        return
    for option in step.srun or ():
        _srun_option(st, option)
    for options in st.js.srun_other:
        for option in options:
            if option.name == "network" and option.value and "disable_rdzv_get" in option.value.text:
                _srun_option(st, option)


def _srun_option(st: ImportState, option: Option) -> None:
    where = f"line {option.line}: srun {option.written}"
    if option.name not in SRUN_CARRIED:
        if option.name.startswith("container-") or option.name in ("environment", "export"):
            return
        if option.name not in OWNED_SBATCH:
            st.hazard("srun-option", "note", option.line, f"srun {option.written}: not carried (fabrikit's "
                      "srun starts one task per node)")
        return
    value = option.value
    if value is not None and not value.resolved:
        if option.name == "cpus-per-task" and st.cpus:
            srun_extra(st, f"--cpus-per-task={st.cpus}", f"{where} (= cpus_per_task)")
        else:
            st.hazard("runtime-expansion", "todo", option.line, f"srun {option.written} needs the shell; "
                      "not carried")
        return
    if option.name == "cpu-bind" and value is not None and _PER_TASK_BIND.match(value.text):
        _cpu_bind_masks(st, option, value.text)
        return
    if option.name == "gpu-bind" and st.tasks_per_node > 1:
        return
    srun_extra(st, f"--{option.name}" + (f"={value.text}" if value is not None else ""), where)


def _cpu_bind_masks(st: ImportState, option: Option, text: str) -> None:
    """A per-task binding pins the one torchrun of a node to the first entry. A `mask_cpu`
    list with one mask per local rank (GPU) becomes `launcher.cpu_bind_masks`, which each
    worker applies to itself (jobs/jobenv.py); anything else is reported, not carried."""
    bind = _PER_TASK_BIND.match(text)
    assert bind is not None
    kind = f"{bind.group(1)}_{bind.group(2)}"
    masks = [_HEX_MASK.fullmatch(entry) for entry in text[bind.end():].split(",")]
    ranks = st.gpus or (st.tasks_per_node if st.tasks_per_node > 1 else 0)
    shown = f"srun {option.written[:60]}..."
    if kind == "mask_cpu" and all(masks) and len(masks) == ranks:
        values = ["0x" + m.group(1) for m in masks if m]
        st.draft.set(("launcher", "cpu_bind_masks"), values, f"line {option.line}: {option.written}")
        st.hazard("cpu-bind-mask", "fixed", option.line,
                  f"{shown} pins one CPU mask per task (one task per GPU); fabrikit runs one torchrun per node, "
                  f"so the {len(values)} masks went to launcher.cpu_bind_masks: each worker applies the mask of "
                  "its local rank")
        return
    why = (f" ({len(masks)} masks for {ranks} GPUs per node)" if kind == "mask_cpu" and all(masks) and ranks
           else "")
    st.hazard("cpu-bind-mask", "fixed", option.line,
              f"{shown} pins one CPU mask per task (one task per GPU); fabrikit runs one torchrun per node, which "
              f"would be pinned to the first mask: not carried{why}")


def srun_extra(st: ImportState, text: str, where: str) -> None:
    d = st.draft
    extras = d.get(("scheduler", "srun_extra")) or []
    if text in extras:
        return
    old = st.draft.root["scheduler"].get("srun_extra")
    d.set(("scheduler", "srun_extra"), [*extras, text], "; ".join(x for x in (old.note if old else "", where) if x))
    st.carried["slurm settings"] += 1


def _gpu_count(option: str, value: str) -> int | None:
    if option == "gres":
        match = re.search(r"(?:^|,)gpu(?::[A-Za-z][\w-]*)?(?::(\d+))?(?:\(|,|$)", value)
        if not match:
            return None
        return int(match.group(1) or 1)
    match = re.fullmatch(r"(?:[A-Za-z][\w-]*:)?(\d+)", value)
    return int(match.group(1)) if match else None
