"""The text `fabrikit report` prints: configuration, throughput per epoch and overall, the
scaling table, GPU utilisation per node, the transport verdict and warnings. Pure: records
(runner.report_model) in, text out.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

from .gpu_samples import gpu_by_host
from .report_model import MAX_LEGEND, REPORT_JSON, RunReport, Scaling
from .text_table import table_lines


def _fmt(v: Any, spec: str = "", none: str = "-") -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return none
    return format(v, spec)


def _row_label(configuration: str, role: str) -> str:
    return configuration + (" (baseline)" if role == "baseline" else "")


def _scaling_lines(scale: Scaling) -> list[str]:
    """World sizes, time and images/s; on GPUs the site guides' table: GPUs, images/s,
    speed-up (6.34x), efficiency (79%)."""
    if scale.gpus:
        which = ("images/s without each run's warm-up epoch" if scale.basis == "steady"
                 else "overall images/s (a run has no epoch after its first)")
        lines = [f"scaling (baseline {scale.rows[0].run_dir}; {which}; "
                 "efficiency = speed-up / (GPUs / baseline GPUs))"]
        rows = [[_row_label(r.configuration, r.role), str(r.world_size), f"{r.images_per_s:.1f}",
                 _fmt(r.speedup, ".2f") + ("x" if math.isfinite(r.speedup) else ""),
                 _fmt(r.efficiency * 100, ".0f") + ("%" if math.isfinite(r.efficiency) else "")]
                for r in scale.rows]
        return lines + table_lines(["CONFIGURATION", "GPUS", "IMAGES/S", "SPEED-UP", "EFFICIENCY"], rows, "  ")
    lines = [f"scaling (baseline {scale.rows[0].run_dir}; speed-up = "
             + ("baseline time / time" if scale.basis == "time" else "images/s ratio")
             + ", efficiency = speed-up / (world size / baseline world size))"]
    rows = [[_row_label(r.configuration, r.role), str(r.world_size), f"{r.time_s:.3f}",
             f"{r.images_per_s:.1f}", _fmt(r.speedup, ".2f"), _fmt(r.efficiency, ".2f")] for r in scale.rows]
    return lines + table_lines(["CONFIGURATION", "WORLD SIZE", "TIME (S)", "IMAGES/S", "SPEED-UP", "EFFICIENCY"],
                               rows, "  ")


def format_report(rep: RunReport, scale: Scaling | None = None,
                  files: Sequence[Path] = ()) -> str:
    c = rep.config
    out = [f"fabrikit report: {rep.run_dir}", "configuration"]
    site = f"{c.site or '?'} ({c.scheduler})"
    dev = f"{c.device or '?'}" + (f" ({c.backend})" if c.backend else "")
    items = [("site", site), ("nodes", _fmt(c.nodes, "", "?")),
             ("processes per node", _fmt(c.procs_per_node, "", "?")),
             ("world size", _fmt(c.world_size, "", "?")), ("device", dev)]
    if c.gpus_per_node:
        items.append(("GPUs per node", str(c.gpus_per_node)))
    if c.fabric:
        items.append(("fabric", c.fabric))
    out += [f"  {k:<19}{v}" for k, v in items]

    t = rep.training
    out.append(f"throughput per epoch (from {t.source})")
    multi = len(t.attempts) > 1
    header = (["ATTEMPT"] if multi else []) + ["EPOCH", "STEPS", "TIME (S)", "IMAGES/S", "LOSS", "ACC"]
    rows = [([str(e.attempt)] if multi else []) +
            [str(e.epoch), e.steps or "-", f"{e.time_s:.3f}", f"{e.images_per_s:.1f}",
             _fmt(e.loss, ".4f"), _fmt(e.acc, ".4f")] for e in t.epochs]
    if rows:
        out += table_lines(header, rows, "  ")
    else:
        out.append("  no epoch finished")
    o = rep.overall
    if o is not None:
        images = f"{o.images:.0f}" if isinstance(o.images, float) else str(o.images)
        tail = []
        if o.epochs is not None:
            tail.append(f"{o.epochs} epoch{'s' if o.epochs != 1 else ''}")
        if o.global_steps is not None:
            tail.append(f"{o.global_steps} steps")
        if o.estimated:
            tail.append("estimated")
        out.append(f"  overall: {images} images in {o.time_s:.3f} s = {o.images_per_s:.1f} images/s"
                   + (f" ({', '.join(tail)})" if tail else ""))
        if o.steady_images_per_s is not None:
            out.append(f"  without the warm-up epoch: {o.steady_images_per_s:.1f} images/s")

    if scale is not None:
        out += _scaling_lines(scale)

    if rep.gpus:
        out.append(f"GPU utilisation ({', '.join(rep.gpu_files)})")
        hosts = gpu_by_host(rep.gpus)
        for h in hosts[:MAX_LEGEND]:
            low = (f", lowest GPU{h['lowest_gpu']} {h['lowest_mean_util']:.0f}%"
                   if h["gpus"] > 1 and h["lowest_gpu"] is not None else "")
            out.append(f"  {h['host']}: {h['gpus']} GPU(s), {h['samples']} samples, "
                       f"mean {h['mean_util']:.0f}%{low}")
        if len(hosts) > MAX_LEGEND:
            out.append(f"  ... {len(hosts) - MAX_LEGEND} more nodes (see {REPORT_JSON})")
    out.append(f"transport: {rep.transport.line}")
    out += [f"warning: {w}" for w in rep.warnings]
    if files:
        out.append("files:")
        out += [f"  {p}" for p in files]
    return "\n".join(out)
