"""`fabrikit sites import`, the launcher: the script's torchrun (or `python -m
torch.distributed.run`) line becomes `launcher` (torchrun argv, timeouts, restarts) and
its training script and arguments become `job`. A fixed rendezvous port, `--standalone` or a
plain `python` per task are reported: fabrikit starts one torchrun per node with c10d
rendezvous on a port derived from the job id.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .command_options import Option
from .site_import_state import ImportState


def map_launcher(st: ImportState) -> None:
    d = st.draft
    step = st.step
    if step is None:
        return
    launch = step.launch
    if launch is None:
        st.hazard("no-launcher", "todo", step.line, "no torchrun or python line was found inside the "
                  "container call; the job section keeps fabrikit's default")
        return
    where = f"line {launch.line}"
    if launch.kind == "python":
        st.hazard("no-torchrun", "fixed", launch.line,
                  f"srun starts `{' '.join(launch.launcher)}` once per task ({st.tasks_per_node} per node); "
                  "fabrikit starts one torchrun per node that spawns one process per GPU and sets RANK, "
                  "LOCAL_RANK and WORLD_SIZE: the training script must read those")
        return
    if launch.kind == "other":
        st.hazard("launcher", "todo", launch.line, f"{launch.launcher[0]} is not torchrun; the profile "
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
    if port is None and "MASTER_PORT" in st.env:
        value, line, _ = st.env["MASTER_PORT"]
        if value.resolved and value.text.isdigit() and not st.has_hazard("fixed-port"):
            port = (value.text, Option("MASTER_PORT", value, line, f"MASTER_PORT={value.text}"))
    if port is not None and not st.has_hazard("fixed-port"):
        st.hazard("fixed-port", "fixed", port[1].line,
                  f"{port[1].written}: rendezvous port {port[0]} is fixed, so two jobs on one head node "
                  "collide (errno 98, pytorch #116974); fabrikit derives it from the job id "
                  "(launcher.port_base + id mod port_span)")
    nproc = options.get("nproc_per_node")
    if nproc and nproc.value:
        if "SLURM_GPUS_PER_NODE" in nproc.value.text:
            st.hazard("nproc-gpus-per-node", "fixed", nproc.line,
                      f"{nproc.written}: SLURM_GPUS_PER_NODE is set only with --gpus-per-node and may read "
                      "'a100:4'; fabrikit uses SLURM_GPUS_ON_NODE")
        elif nproc.value.resolved and nproc.value.text.isdigit():
            count = int(nproc.value.text)
            if st.gpus == 0:
                d.set(("launcher", "nproc_per_node"), count, f"{where}: {nproc.written} (no GPUs requested)")
            elif count != st.gpus:
                st.hazard("nproc-mismatch", "note", nproc.line, f"{nproc.written} but {st.gpus} GPUs per "
                          "node requested; fabrikit starts one process per GPU")
    if "standalone" in options:
        st.hazard("standalone", "fixed", options["standalone"].line,
                  "--standalone rendezvous works on one node only; fabrikit uses c10d across nodes")
    conf = options.get("rdzv_conf")
    if conf and conf.value:
        for key, value in re.findall(r"(join_timeout|read_timeout)=(\d+)", conf.value.text):
            d.set(("launcher", f"{key}_s"), int(value), f"line {conf.line}: {conf.written}")
    restarts = options.get("max_restarts")
    if restarts and restarts.value and restarts.value.text.isdigit():
        d.set(("launcher", "max_restarts"), int(restarts.value.text), f"line {restarts.line}: {restarts.written}")



def map_job(st: ImportState) -> None:
    d = st.draft
    step = st.step
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
    cwd = step.cwd if step else st.js.cwd
    path = script.text if script.text.startswith("/") else os.path.normpath(os.path.join(cwd, script.text))
    if script.resolved and all(a.resolved for a in args) and Path(path).is_file() and "{" not in command:
        d.set(("job", "script"), path, f"line {launch.line}")
        d.set(("job", "args"), [a.text for a in args], f"line {launch.line}")
        return
    d.todo(("job", "script"), f"line {launch.line}: the script runs `{command}`; {path} is not a file here"
           + ("" if all(a.resolved for a in args) else " and its arguments need the shell")
           + f". Run it with: run-multinode --profile {st.name}.yaml --nodes N -- {path} ARGS")
