"""The report's plots as PNG bytes: training throughput per epoch and GPU utilisation over
time. matplotlib is an optional extra (`fabrikit[report]`) and is imported only here, only
when a plot is drawn, on the Agg canvas (no pyplot, no global backend state), so that the
rest of the report costs nothing but the standard library. Writing the bytes is the caller's
(runner.run_report).
"""

from __future__ import annotations

from typing import Any

from .errors import UserError
from .report_model import MAX_LEGEND, RunReport
from .throughput import per_epoch_throughput

def have_matplotlib() -> bool:
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def _figure(width: float = 8.0, height: float = 4.5) -> Any:
    """A matplotlib Figure on the Agg canvas."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise UserError("plots need matplotlib: pip install 'fabrikit[report]'") from None
    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    return fig


def _png(fig: Any) -> bytes:
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def throughput_png(rep: RunReport, baseline: RunReport | None = None) -> bytes:
    """images/s per epoch (both runs with a baseline); dashed lines: overall images/s."""
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    runs = ([("baseline", baseline)] if baseline is not None else []) + [("run", rep)]
    colours = {"baseline": "tab:gray", "run": "tab:blue"}
    epochs_all: set[int] = set()
    top = 0.0  # the highest value drawn
    for role, r in runs:
        points = per_epoch_throughput(r.training)
        label = f"{'baseline: ' if role == 'baseline' else ''}{r.config.label}"
        if points:
            xs, ys = zip(*points)
            epochs_all.update(xs)
            top = max(top, *ys)
            ax.plot(xs, ys, marker="o", linewidth=2, markersize=7, color=colours[role], label=label)
        if r.overall is not None:
            top = max(top, r.overall.images_per_s)
            ax.axhline(r.overall.images_per_s, linestyle="--", linewidth=1, color=colours[role],
                       label=f"{label} overall {r.overall.images_per_s:.1f}/s")
    ax.set_xlabel("epoch")
    ax.set_ylabel("images/s")
    # Headroom above the highest value: autoscaling pads by the data's own range, so epochs
    # of nearly equal speed (1200.0 and 1200.5 images/s) drew their line on the top spine,
    # hidden by it.
    ax.set_ylim(0, top * 1.15 if 0 < top < float("inf") else None)
    if epochs_all:
        ax.set_xticks(sorted(epochs_all))
    ax.set_title(f"Training throughput: {rep.run_dir.resolve().name}")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    return _png(fig)


def gpu_utilisation_png(rep: RunReport) -> bytes:
    """Utilisation % over time, one line per node/GPU."""
    fig = _figure(9.0, 4.5)
    ax = fig.add_subplot(1, 1, 1)
    t0 = min(s.times[0] for s in rep.gpus if s.times)
    span = max(s.times[-1] for s in rep.gpus if s.times) - t0
    minutes = span > 600
    for s in rep.gpus:
        xs = [(t - t0) / (60.0 if minutes else 1.0) for t in s.times]
        ax.plot(xs, s.util, marker="." if len(xs) < 50 else None, linewidth=1.5, label=s.label)
    ax.set_xlabel(f"time since first sample ({'min' if minutes else 's'})")
    ax.set_ylabel("GPU utilisation (%)")
    ax.set_ylim(0, 105)
    ax.set_title(f"GPU utilisation: {rep.run_dir.resolve().name}")
    ax.grid(True, alpha=0.3)
    if len(rep.gpus) <= MAX_LEGEND:
        ax.legend(loc="lower right", fontsize="small", ncol=2 if len(rep.gpus) > 8 else 1)
    fig.tight_layout()
    return _png(fig)
