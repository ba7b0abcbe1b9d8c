"""Is the image up to date? Its definition-hash label against the plan's hash.

`apptainer inspect --labels` reads the SIF's JSON descriptor without mounting anything, so
the image itself is the authority on every run and no sidecar file is needed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from .apptainer import inspect_labels
from .errors import RuntimeFailure
from .image_labels import LABEL_HASH
from .image_plan import BuildPlan


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
