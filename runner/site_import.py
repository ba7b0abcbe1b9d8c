"""`fabrikit sites import`: turn a site guide's job script into a profile that reproduces it,
and say which of its hazards the profile fixes and which need a person.

The script is read by `runner.job_script` (a static, in-order reading: nothing runs). The
mapping onto the profile schema is done in steps, one module each, sharing an ImportState
(runner.site_import_state):

- runner.site_import_slurm: `#SBATCH` and srun options -> `scheduler` (fabrikit-owned ones
  such as `--nodes`, `--output` are reported, never put in `sbatch_extra`);
- runner.site_import_env: `--env`, `APPTAINERENV_*`, exports and `bash -c 'export ...'` ->
  `env`, `APPTAINERENV_LD_LIBRARY_PATH` -> `library_path`;
- runner.site_import_container: the container call -> `container` (runtime, image,
  `--nv`/`--rocm`), its `--bind`s, `APPTAINER_BIND` and `--mount`s -> `binds`;
- runner.site_import_launcher: the torchrun line -> `launcher` and `job`;
- runner.site_import_fabric: the fabric it talks to -> the preset it `extends` (slingshot,
  infiniband, ethernet), and the fabric's hazard rules.

Profile values are literal: a value that needs the shell at run time (`$SLURM_JOB_ID`,
`$(hostname)`) is never written as if it were text; it becomes a TODO and a hazard. Facts
behind each hazard are in shared/reference/fabric-facts.md and apptainer-and-peers.md.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import NamedTuple

from . import site_import_container as container
from . import site_import_env as env
from . import site_import_fabric as fabric
from . import site_import_launcher as launcher
from . import site_import_slurm as slurm
from .job_script import read
from .site_import_state import Hazard, ImportState

# Sections of the draft in profile order; an empty `binds`/`library_path` is left out.
_SECTIONS = ("scheduler", "container", "binds", "host_libraries", "library_path", "env", "launcher", "job")


class ImportResult(NamedTuple):
    name: str
    text: str
    preset: str
    hazards: list[Hazard]
    carried: dict[str, int]
    nodes: int | None


def import_script(path: Path, name: str, environment: dict[str, str] | None = None) -> ImportResult:
    """Read `path` and draft the profile for site `name`."""
    js = read(path, environment if environment is not None else dict(os.environ))
    st = ImportState(js, name)
    d = st.draft
    d.set(("extends",), "ethernet")
    d.set(("description",), "")
    for section in _SECTIONS:
        d.root[section] = [] if section in ("binds", "library_path") else {}
    # Order matters: later steps read what earlier ones found (GPUs and CPUs per node, the
    # environment, the GPU vendor), and hazards are reported in the order they are found.
    slurm.map_scheduler(st)
    env.collect_env(st)
    fabric.gather_evidence(st)
    container.map_container(st)
    container.map_binds(st)
    env.map_env(st)
    slurm.map_srun(st)
    launcher.map_launcher(st)
    launcher.map_job(st)
    preset = fabric.choose_preset(st)
    fabric.fabric_hazards(st, preset)
    for section in ("binds", "library_path"):
        if not d.root[section]:
            del d.root[section]
    d.header = _header(st, preset)
    return ImportResult(name, d.render(), preset, st.hazards, st.carried, st.nodes)


def _header(st: ImportState, preset: str) -> list[str]:
    digest = hashlib.sha256(st.js.text.encode()).hexdigest()[:12]
    lines = [
        f"Site '{st.name}': imported by `fabrikit sites import` from {st.js.path.name} (sha256 {digest}...).",
        "Every value names the line of that script it came from; `# TODO` marks what could not be",
        "carried over as a literal value. Check it with:",
        f"  fabrikit doctor --profile {st.name}.yaml",
        f"  run-multinode --profile {st.name}.yaml --nodes {st.nodes or 2} --dry-run",
    ]
    if st.hazards:
        lines.append("Hazards found in the script:")
        for h in st.hazards:
            where = f"line {h.line}" if h.line else "script"
            lines.append(f"  {h.status:5} {where}: {h.code}: {h.message}")
    return lines
