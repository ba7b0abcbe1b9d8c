"""What `fabrikit sites import` carries from one mapping step to the next: the script as
read (runner.job_script), the profile draft being written, the hazards found so far and the
facts later steps depend on (nodes, GPUs and CPUs per node, tasks per node, the environment
the training would see, which fabric and GPU vendor the script points at).

The steps live in runner.site_import_slurm, _env, _container, _launcher and _fabric; the
order they run in is runner.site_import's.
"""

from __future__ import annotations

from typing import NamedTuple

from . import fabrics
from .job_script import JobScript, Step
from .profile_writer import Draft
from .shell_script import Value

# The kinds an imported profile can extend: those with a preset (runner.fabrics), in its order.
FABRICS = tuple(name for name, kind in fabrics.KINDS.items() if kind.preset is not None)


class Hazard(NamedTuple):
    code: str
    status: str  # fixed | todo | note
    line: int | None
    message: str


class Evidence:
    """Which fabric, GPU vendor and architecture the script points at, with the lines why."""

    def __init__(self) -> None:
        self.votes: dict[str, list[str]] = {fabric: [] for fabric in FABRICS}
        self.vendor: tuple[str, str] | None = None
        self.arch: tuple[str, str] | None = None
        self.gh200: str | None = None

    def fabric_guess(self) -> str | None:
        """The fabric with the most votes (the first of FABRICS on a tie), None without any."""
        best = max(FABRICS, key=lambda f: len(self.votes[f]))
        return best if self.votes[best] else None


class ImportState:
    def __init__(self, js: JobScript, name: str) -> None:
        self.js = js
        self.name = name
        self.step: Step | None = js.step
        self.draft = Draft([])
        self.hazards: list[Hazard] = []
        self.env: dict[str, tuple[Value, int, str]] = {}  # name -> (value, line, how it was set)
        self.evidence = Evidence()
        self.carried = {"slurm settings": 0, "binds": 0, "env": 0}
        self.nodes: int | None = None
        self.gpus = 0  # per node
        self.cpus: int | None = None  # per node (one task per node)
        self.tasks_per_node = 1

    def hazard(self, code: str, status: str, line: int | None, message: str) -> None:
        self.hazards.append(Hazard(code, status, line or None, message))

    def env_line(self, name: str) -> int | None:
        """The script line that set variable `name`, for a hazard to point at; None when unset."""
        found = self.env.get(name)
        return found[1] if found else None

    def has_hazard(self, code: str) -> bool:
        return any(h.code == code for h in self.hazards)

    def runtime(self) -> str:
        """The container runtime the profile will use: `none` without a container call."""
        call = self.step.container if self.step else None
        if call is None:
            return "none"
        return call.runtime if call.runtime in ("apptainer", "singularity") else "apptainer"
