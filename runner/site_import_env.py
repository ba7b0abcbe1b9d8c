"""`fabrikit sites import`, the environment: every variable the training processes would see
(host exports, `--env`, `APPTAINERENV_*`/`SINGULARITYENV_*`, `bash -c 'export ...'` inside
the container), latest source winning, becomes `env` or `library_path` in the profile, or a
hazard when it cannot be carried: launcher-owned names, a PATH the container never sees,
values that need the shell at run time (profile values are literal).
"""

from __future__ import annotations

import re

from . import profile as schema
from .job_script import EnvVar, SLURM_RUNTIME
from .shell_script import Value
from .site_import_slurm import srun_extra
from .site_import_state import ImportState

# Set by torchrun / fabrikit's rendezvous: a script's own values would fight it.
LAUNCHER_OWNED = {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "NODE_RANK", "GROUP_RANK",
                  "LOCAL_WORLD_SIZE", "NNODES", "NPROC_PER_NODE", "RDZV_ENDPOINT", "RDZV_ID", "RDZV_BACKEND",
                  "TORCHELASTIC_RUN_ID", "LD_LIBRARY_PATH", "PATH", "HOME", "USER", "PWD", "SHELL", "TERM",
                  "LOGNAME", "HOSTNAME", "OLDPWD", "SHLVL", "MODULEPATH", "LOADEDMODULES", "IFS", "run_dir"}
# Variables that tune the job's libraries: carried even when the script also uses them itself.
RUNTIME_KNOBS = ("NCCL_", "RCCL_", "FI_", "UCX_", "GLOO_", "TORCH_", "OMP_", "CUDA_", "HIP_", "ROCR_", "HSA_",
                 "MIOPEN_", "PYTORCH_", "HF_", "MPICH_", "CXI_", "NVIDIA_", "TF_", "KMP_", "MKL_", "PYTHON")
# Variables that configure the container runtime's binds (read by site_import_container).
BIND_VARIABLES = ("APPTAINER_BIND", "SINGULARITY_BIND", "APPTAINER_BINDPATH", "SINGULARITY_BINDPATH")


def collect_env(st: ImportState) -> None:
    """Everything the training processes would see, latest source winning, then split
    into binds, library path and variables."""
    step = st.step
    if step is None:
        return
    ordered: list[EnvVar] = list(step.host_env) + list(step.env)
    for srun_opts in [step.srun or ()]:
        for option in srun_opts:
            if option.name == "cpus-per-task" and option.value is not None and option.value.text.isdigit():
                st.cpus = st.cpus or int(option.value.text)
    for var in ordered:
        st.env[var.name] = (var.value, var.line, var.how)


def map_env(st: ImportState) -> None:
    d = st.draft
    consumed = _consumed_names(st)
    library_path: list[tuple[str, int]] = []
    for name, (value, line, how) in list(st.env.items()):
        target = name
        for prefix in ("APPTAINERENV_", "SINGULARITYENV_"):
            if name.startswith(prefix):
                target = name[len(prefix):]
                how = f"{prefix}{target}"
        if target in BIND_VARIABLES:
            continue  # handled by site_import_container.map_binds
        if target == "LD_LIBRARY_PATH" and (how.startswith(("APPTAINERENV_", "SINGULARITYENV_"))
                                             or how in ("inside the container", "--env")
                                             or st.runtime() == "none"):
            for entry in value.text.split(":"):
                if entry.startswith("/") and "$" not in entry and entry not in [p for p, _ in library_path]:
                    library_path.append((entry, line))
            if not value.resolved:
                st.hazard("runtime-expansion", "todo", line,
                          f"{how} LD_LIBRARY_PATH={value.text}: the parts that need the shell "
                          f"({', '.join(value.unresolved)}) were left out of library_path")
            continue
        if target in ("PREPEND_PATH", "APPEND_PATH") or (target == "PATH" and how != "export"):
            st.hazard("path-in-container", "todo", line,
                      f"{how}={value.text}: fabrikit has no PATH setting; call the program by its full "
                      "path in the job, or put it in the image")
            continue
        if name.startswith(("APPTAINER_", "SINGULARITY_")) and target == name:
            st.hazard("runtime-config", "note", line, f"{name} configures the container runtime on the "
                      "host; not carried (set it in your shell if you need it)")
            continue
        if target in LAUNCHER_OWNED or target.startswith("FABRIKIT_"):
            if target in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "NODE_RANK"):
                if target == "MASTER_PORT" and value.resolved and value.text.isdigit():
                    st.hazard("fixed-port", "fixed", line,
                              f"MASTER_PORT={value.text} is a fixed rendezvous port: two jobs on one head "
                              "node collide (errno 98); fabrikit derives it from the job id "
                              "(launcher.port_base + id mod port_span)")
                continue
            if target in ("LD_LIBRARY_PATH", "PATH") and how == "export" and st.runtime() != "none":
                st.hazard("host-library-path", "note", line,
                          f"export {target}=... on the host does not reach the container (Apptainer "
                          "never imports it); not carried")
            continue
        if target.startswith(SLURM_RUNTIME):
            if target == "SRUN_CPUS_PER_TASK":
                cpus = st.cpus
                if cpus:
                    srun_extra(st, f"--cpus-per-task={cpus}", f"line {line}: {name}")
                continue
            st.hazard("slurm-input-variable", "note", line, f"{name} is a Slurm input variable for the "
                      "batch shell; not carried")
            continue
        if target in consumed and not target.startswith(RUNTIME_KNOBS) and how == "export":
            continue  # a helper variable of the script itself (used in its own command lines)
        _env_value(st, target, value, line, how)
    for entry, line in library_path:
        d.append(("library_path",), entry, f"line {line}")


def _consumed_names(st: ImportState) -> set[str]:
    text = st.js.text
    return {name for name in st.env if re.search(r"\$\{?" + re.escape(name) + r"\b", text)}


def _env_value(st: ImportState, name: str, value: Value, line: int, how: str) -> None:
    d = st.draft
    where = f"line {line}: {how}"
    if not re.fullmatch(schema.ENV_NAME, name):
        return
    if how == "--env" and ("," in value.text or '"' in value.text or "'" in value.text):
        st.hazard("env-comma", "fixed", line,
                  f"--env {name}={value.text}: Apptainer's --env is CSV-parsed, so commas or quotes "
                  "in the value can split or drop it; fabrikit exports APPTAINERENV_" + name + " instead")
    if not value.resolved:
        literal = _literal_for(st, value)
        if literal is not None:
            d.set(("env", name), literal, f"{where} ({value.text}, written as the value it has here)", quote=True)
            st.hazard("runtime-expansion", "fixed", line,
                      f"{name}={value.text} needs the shell at run time; profile env values are literal, "
                      f"so it is written as {literal}")
            st.carried["env"] += 1
            return
        d.todo(("env", name), f"{where}: needs the shell at run time ({', '.join(value.unresolved)}); "
               "profile env values are literal: give the value", value.text)
        st.hazard("runtime-expansion", "todo", line,
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
        st.hazard("nccl-debug-quiet", "fixed", line, f"NCCL_DEBUG={text} hides which transport NCCL used; "
                  "fabrikit sets NCCL_DEBUG=INFO with NCCL_DEBUG_SUBSYS=INIT,NET and checks it at the end")
        return
    if name == "NCCL_DEBUG_SUBSYS" and not ({"INIT", "NET"} <= set(text.upper().split(",")) or "ALL" in text.upper()):
        d.todo(("env", name), f"{where}: lacks INIT,NET, which fabrikit's transport check reads", text)
        st.hazard("nccl-debug-quiet", "fixed", line, f"NCCL_DEBUG_SUBSYS={text} hides the NET lines; "
                  "fabrikit uses INIT,NET")
        return
    if name == "FI_MR_CACHE_MONITOR" and text == "memhooks":
        d.set(("env", name), "userfaultfd", f"{where} set memhooks, which deadlocks; HPE/CSCS use userfaultfd",
              quote=True)
        st.hazard("mr-cache-memhooks", "fixed", line, "FI_MR_CACHE_MONITOR=memhooks deadlocks at scale "
                  "(Frontier, HPE); written as userfaultfd")
        st.carried["env"] += 1
        return
    d.set(("env", name), text, note, quote=True)
    st.carried["env"] += 1


def _literal_for(st: ImportState, value: Value) -> str | None:
    """`$SLURM_CPUS_PER_TASK` / `$SLURM_GPUS_ON_NODE` alone: the profile knows the number."""
    text = value.text.strip('"')
    names = {"SLURM_CPUS_PER_TASK": st.cpus if st.tasks_per_node == 1 else None,
             "SRUN_CPUS_PER_TASK": st.cpus if st.tasks_per_node == 1 else None,
             "SLURM_GPUS_ON_NODE": st.gpus or None, "SLURM_GPUS_PER_NODE": st.gpus or None}
    match = re.fullmatch(r"\$\{?([A-Z_]+)(?::-[^}]*)?\}?", text)
    if match and names.get(match.group(1)):
        return str(names[match.group(1)])
    return None
