"""What `fabrikit report` knows about a run: frozen records, built by the pure parsers
(runner.train_lines, runner.gpu_samples), derived by runner.throughput, read from a run
directory by runner.run_report and shown by runner.report_text, report_json and report_plots.

Field order is the order of `report.json`'s keys (runner.report_json converts the records
with msgspec.to_builtins), so a new field goes where it should appear there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .run_dir import PROFILE_FILE  # noqa: F401 (the run directory's own name for it)

# Files a report reads beside launch.json and profile.yaml (runner.run_dir) and the files it writes.
METRICS_FILE = "metrics.jsonl"
REPORT_JSON = "report.json"
THROUGHPUT_PNG = "throughput.png"
GPU_PNG = "gpu_utilisation.png"
# Nodes the text names one by one and GPUs a plot's legend lists (the JSON has them all).
MAX_LEGEND = 16


@dataclass(frozen=True)
class StartRecord:
    nodes: int | None
    procs_per_node: int | None
    world_size: int
    device: str | None
    backend: str | None
    start_step: int | None


@dataclass(frozen=True, kw_only=True)
class EpochRecord:
    attempt: int = 1
    epoch: int
    steps: str | None  # "first-last" (global, 1-based optimizer steps)
    time_s: float
    images_per_s: float
    loss: float | None
    acc: float | None

    @property
    def images(self) -> float:
        """Images in the epoch, from the (rounded) throughput: an estimate."""
        return self.images_per_s * self.time_s


@dataclass(frozen=True)
class SummaryRecord:
    nodes: int | None
    procs_per_node: int | None
    world_size: int
    epochs: int | None
    global_steps: int | None
    steps_this_run: int | None
    images: int
    time_s: float
    images_per_s: float | None
    final_loss: float | None
    final_acc: float | None
    steady_images_per_s: float | None = None  # without the attempt's first (warm-up) epoch


@dataclass(frozen=True)
class Attempt:
    """One launch of the training script (a requeued or resumed job has several)."""

    number: int
    start: StartRecord | None
    epochs: tuple[EpochRecord, ...]
    summary: SummaryRecord | None
    stopped: str | None = None  # signal name when the attempt stopped on a signal


@dataclass(frozen=True)
class Training:
    attempts: tuple[Attempt, ...]
    source: str  # "metrics.jsonl" or the log files' names
    skipped_lines: int = 0  # malformed metrics.jsonl lines

    @property
    def epochs(self) -> tuple[EpochRecord, ...]:
        return tuple(e for a in self.attempts for e in a.epochs)

    @property
    def last_start(self) -> StartRecord | None:
        for a in reversed(self.attempts):
            if a.start is not None:
                return a.start
        return None

    @property
    def last_summary(self) -> SummaryRecord | None:
        for a in reversed(self.attempts):
            if a.summary is not None:
                return a.summary
        return None


@dataclass(frozen=True, kw_only=True)
class Overall:
    """Images and training-loop time over all attempts."""

    images: float
    time_s: float
    images_per_s: float
    steady_images_per_s: float | None = None  # without each attempt's warm-up epoch
    epochs: int | None
    global_steps: int | None
    final_loss: float | None
    final_acc: float | None
    complete: bool  # every attempt printed its summary
    estimated: bool  # some images were estimated from epoch lines (no summary)

    @property
    def raw_throughput(self) -> float:
        return self.images / self.time_s if self.time_s > 0 else 0.0


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    site: str | None
    scheduler: str  # "local" or "slurm"
    nodes: int | None
    procs_per_node: int | None
    world_size: int | None
    device: str | None
    backend: str | None
    gpus_per_node: int | None
    fabric: str | None

    @property
    def label(self) -> str:
        """`2 nodes x 4 GPUs`, `1 node x 2 processes`."""
        n, p = self.nodes, self.procs_per_node
        nodes = "? nodes" if n is None else f"{n} node{'s' if n != 1 else ''}"
        unit = "GPU" if self.device == "cuda" else "process"
        if p is None:
            return nodes
        plural = ("s" if unit == "GPU" else "es") if p != 1 else ""
        return f"{nodes} x {p} {unit}{plural}"


@dataclass(frozen=True)
class GpuSeries:
    """Samples of one GPU: seconds since the epoch, utilisation %, memory MiB."""

    host: str
    index: int
    times: tuple[float, ...]
    util: tuple[float, ...]
    memory_mib: tuple[float | None, ...]

    @property
    def label(self) -> str:
        return f"{self.host} GPU{self.index}"


@dataclass(frozen=True)
class TransportInfo:
    line: str  # what the report prints
    summary: str | None
    transport: str | None
    verdict: str | None
    nccl_lines: int
    sources: tuple[str, ...]


@dataclass(frozen=True)
class RunReport:
    run_dir: Path
    config: RunConfig
    training: Training
    overall: Overall | None  # None when no epoch finished and no summary was printed
    gpus: tuple[GpuSeries, ...]
    gpu_files: tuple[str, ...]
    transport: TransportInfo
    warnings: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class ScalingRow:
    role: str  # "baseline" or "run"
    run_dir: str
    configuration: str
    world_size: int
    images: float
    time_s: float
    images_per_s: float
    speedup: float
    efficiency: float


@dataclass(frozen=True)
class Scaling:
    rows: tuple[ScalingRow, ...]
    # "time" (same images in both runs: baseline time / time), "throughput" (overall images/s)
    # or "steady" (GPU runs: images/s without each run's warm-up epoch)
    basis: str
    gpus: bool = False  # both runs on CUDA: the guides' GPUs / images/s / speed-up / efficiency table
