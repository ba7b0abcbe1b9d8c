"""GPU utilisation samples from the sampler a job runs beside training: `nvidia-smi
--query-gpu=timestamp,index,utilization.gpu,memory.used --format=csv -l 5` output, one
`gpu-<host>.csv` per node. Pure: lines in, frozen per-GPU series (runner.report_model) out,
plus the per-GPU and per-node summaries the report prints.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Iterable, Sequence

from .report_model import GpuSeries

_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_TIME_FORMATS = ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S", "%Y-%m-%d %H:%M:%S.%f",
                 "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S")


def _time(text: str) -> float | None:
    text = text.strip()
    for fmt in _TIME_FORMATS:
        try:
            return datetime.strptime(text, fmt).timestamp()
        except ValueError:
            continue
    return None


def _number(text: str) -> float | None:
    m = _NUMBER.search(text)
    if not m or "N/A" in text or "Not Supported" in text:
        return None
    return float(m.group(0))


def parse_gpu_csv(lines: Iterable[str], host: str) -> tuple[GpuSeries, ...]:
    """Per-GPU series from `nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`.

    Columns are found by the header (repeated headers, e.g. from a restarted sampler, are
    skipped); without a header the order `timestamp, index, utilization.gpu, memory.used` is
    assumed. Rows that do not parse (a cut last line, `[N/A]`) are skipped.
    """
    cols = {"timestamp": 0, "index": 1, "util": 2, "memory": 3}
    samples: dict[int, list[tuple[float, float, float | None]]] = {}
    for line in lines:
        cells = [c.strip() for c in line.strip().split(",")]
        if len(cells) < 3:
            continue
        low = [c.lower() for c in cells]
        if any(c.startswith("timestamp") for c in low):
            found = {}
            for i, c in enumerate(low):
                if c.startswith("timestamp"):
                    found["timestamp"] = i
                elif c == "index" or c.startswith("index "):
                    found["index"] = i
                elif c.startswith("utilization.gpu"):
                    found["util"] = i
                elif c.startswith("memory.used"):
                    found["memory"] = i
            if {"timestamp", "util"} <= found.keys():
                cols = {"index": None, "memory": None, **found}
            continue
        try:
            t = _time(cells[cols["timestamp"]])
            util = _number(cells[cols["util"]])
            index = int(cells[cols["index"]]) if cols.get("index") is not None else 0
            mem = _number(cells[cols["memory"]]) if cols.get("memory") is not None else None
        except (IndexError, ValueError):
            continue
        if t is None or util is None:
            continue
        samples.setdefault(index, []).append((t, util, mem))
    out = []
    for index in sorted(samples):
        rows = sorted(samples[index], key=lambda r: r[0])
        out.append(GpuSeries(host, index, tuple(r[0] for r in rows), tuple(r[1] for r in rows),
                             tuple(r[2] for r in rows)))
    return tuple(out)


def gpu_stats(s: GpuSeries) -> dict[str, Any]:
    """One GPU's samples summarised: mean/min/max utilisation, peak memory, time covered."""
    n = len(s.util)
    mem = [m for m in s.memory_mib if m is not None]
    return {
        "host": s.host, "index": s.index, "samples": n,
        "mean_util": round(sum(s.util) / n, 1) if n else None,
        "min_util": min(s.util) if n else None,
        "max_util": max(s.util) if n else None,
        "max_memory_mib": max(mem) if mem else None,
        "duration_s": round(s.times[-1] - s.times[0], 3) if n else None,
    }


def gpu_by_host(gpus: Sequence[GpuSeries]) -> list[dict[str, Any]]:
    """One summary per node: its GPUs, samples, mean utilisation and its least busy GPU."""
    hosts: dict[str, list[GpuSeries]] = {}
    for s in gpus:
        hosts.setdefault(s.host, []).append(s)
    out = []
    for host, series in hosts.items():
        util = [u for s in series for u in s.util]
        means = [(sum(s.util) / len(s.util), s.index) for s in series if s.util]
        low = min(means) if means else None
        out.append({"host": host, "gpus": len(series), "samples": len(util),
                    "mean_util": round(sum(util) / len(util), 1) if util else None,
                    "lowest_gpu": low[1] if low else None,
                    "lowest_mean_util": round(low[0], 1) if low else None})
    return out
