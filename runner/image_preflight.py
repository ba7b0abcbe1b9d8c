"""The checks `build-image` runs before anything is written: architecture, build binds, the
output directory, free space where Apptainer unpacks and caches (a tmpfs /tmp is the
classic failure). One UserError per problem, naming the fix.
"""

from __future__ import annotations

import os
from pathlib import Path

from .atomic_write import check_creatable, existing_ancestor
from .errors import UserError
from .image_plan import BuildPlan


def free_gb(path: Path) -> float:
    st = os.statvfs(existing_ancestor(path))
    return st.f_bavail * st.f_frsize / 1e9


def filesystem_type(path: Path) -> str:
    """The type of the filesystem holding `path` (longest mount point in /proc/mounts)."""
    target = str(existing_ancestor(path).resolve())
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
    check_creatable(plan.output.parent, "output directory")
    if submit:
        return
    prefix = "APPTAINER" if plan.runtime == "apptainer" else "SINGULARITY"
    problem = _space_problem(f"{prefix}_TMPDIR", plan.tmpdir, plan.tmpdir_source, plan.min_free_gb)
    if problem is None and plan.cachedir is not None:
        problem = _space_problem(f"{prefix}_CACHEDIR", plan.cachedir, plan.cachedir_source, plan.min_free_gb)
    if problem:
        raise UserError(problem)
