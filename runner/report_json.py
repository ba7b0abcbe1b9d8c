"""The machine-readable report (`report.json`, `fabrikit report --json`). Pure: records
(runner.report_model) in, a JSON-ready dict out; the records become JSON through
msgspec.to_builtins, so their field order is the key order here.

JSON_FORMAT changes only when a key is removed or changes meaning; new keys keep it.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec

from .gpu_samples import gpu_by_host, gpu_stats
from .report_model import Overall, RunConfig, RunReport, Scaling

JSON_FORMAT = 1


def _config(c: RunConfig) -> dict[str, Any]:
    return {**msgspec.to_builtins(c), "label": c.label}


def _overall(o: Overall | None) -> dict[str, Any] | None:
    return None if o is None else msgspec.to_builtins(o)


def _scaling(scale: Scaling) -> dict[str, Any]:
    rows = [msgspec.to_builtins(r) for r in scale.rows]
    for row in rows:  # no baseline throughput: NaN ratios, which JSON cannot hold
        for key in ("speedup", "efficiency"):
            row[key] = row[key] if math.isfinite(row[key]) else None
    return {"basis": scale.basis, "gpus": scale.gpus, "rows": rows}


def report_dict(rep: RunReport, baseline: RunReport | None = None, scale: Scaling | None = None,
                files: dict[str, str | None] | None = None) -> dict[str, Any]:
    """The report as JSON-ready data; `files`: what was written where (None: skipped)."""
    return {
        "format": JSON_FORMAT,
        "run_dir": str(rep.run_dir),
        "config": _config(rep.config),
        "source": rep.training.source,
        "attempts": [{"number": a.number, "start_step": a.start.start_step if a.start else None,
                      "epochs": len(a.epochs), "summary": a.summary is not None,
                      "stopped": a.stopped} for a in rep.training.attempts],
        "epochs": [msgspec.to_builtins(e) for e in rep.training.epochs],
        "overall": _overall(rep.overall),
        "baseline": None if baseline is None else {
            "run_dir": str(baseline.run_dir), "config": _config(baseline.config),
            "overall": _overall(baseline.overall)},
        "scaling": None if scale is None else _scaling(scale),
        "gpu": {"files": list(rep.gpu_files), "gpus": [gpu_stats(s) for s in rep.gpus],
                "hosts": gpu_by_host(rep.gpus)},
        "transport": msgspec.to_builtins(rep.transport),
        "warnings": list(rep.warnings),
        "files": dict(files or {}),
    }
