"""Read a run directory and say how the training went: configuration, throughput, scaling,
GPU utilisation and the NCCL transport (`fabrikit report`, see runner.report_cmd).

Inputs (all optional except `launch.json` and some training output):

- `launch.json` / `profile.yaml`: site, nodes, processes per node, GPUs per node, fabric.
- `metrics.jsonl` (written by rank 0 of jobs/train_ddp.py, one JSON object per record,
  appended across requeued attempts); preferred when it holds training records.
- the job logs: `nodeK.log` (local runs), `job-<id>[.rN].log` (Slurm; `slurm-<id>.out` only
  when there is no job log, since it carries the same lines). Lines may carry launcher
  prefixes (`[node1] `, srun `--label`'s `0: `); the `fabrikit-train:` lines are found
  wherever they start. The logs also feed the NCCL transport analysis (runner.nccl_log).
- `gpu-<host>.csv`: `nvidia-smi --query-gpu=timestamp,index,utilization.gpu,memory.used
  --format=csv -l 5` output, one file per node.

Parsing is pure (lines in, frozen records out); `load_run` does the file reading and turns
every unreadable or unusable input into a one-line `UserError`. Plotting imports matplotlib
lazily (Agg canvas, no pyplot) so that nothing here costs more than the standard library,
yaml and runner.nccl_log until plots are drawn. Every file is written to a temporary name
and renamed.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from .atomic_write import writable_dir, write_atomic
from .errors import UserError

TRAIN_PREFIX = "fabrikit-train:"
METRICS_FILE = "metrics.jsonl"
LAUNCH_FILE = "launch.json"
PROFILE_FILE = "profile.yaml"
REPORT_JSON = "report.json"
THROUGHPUT_PNG = "throughput.png"
GPU_PNG = "gpu_utilisation.png"
JSON_FORMAT = 1
MAX_LINE_BYTES = 64 * 1024
MAX_LEGEND = 16

_NODE_LOG = re.compile(r"^node(\d+)\.log$")
_JOB_LOG = re.compile(r"^job-(\d+)(?:\.r(\d+))?\.log$")
_SLURM_OUT = re.compile(r"^slurm-(\d+)\.out$")
_GPU_CSV = re.compile(r"^gpu-(.+)\.csv$")
_KV = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(\S*)")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_GPU_TIME_FORMATS = ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S", "%Y-%m-%d %H:%M:%S.%f",
                     "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S")

# Fields each record must carry to be used (a truncated last line lacks some).
_REQUIRED = {
    "start": ("world_size",),
    "epoch": ("epoch", "time_s", "images_per_s"),
    "summary": ("world_size", "images", "time_s"),
    "stopped": (),
}


# --------------------------------------------------------------------------------------------
# Records


@dataclass(frozen=True)
class StartRecord:
    nodes: int | None
    procs_per_node: int | None
    world_size: int
    device: str | None
    backend: str | None
    start_step: int | None


@dataclass(frozen=True)
class EpochRecord:
    epoch: int
    steps: str | None  # "first-last" (global, 1-based optimizer steps)
    time_s: float
    images_per_s: float
    loss: float | None
    acc: float | None
    attempt: int = 1

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


@dataclass(frozen=True)
class Overall:
    """Images and training-loop time over all attempts."""

    images: float
    time_s: float
    images_per_s: float
    epochs: int | None
    global_steps: int | None
    final_loss: float | None
    final_acc: float | None
    complete: bool  # every attempt printed its summary
    estimated: bool  # some images were estimated from epoch lines (no summary)
    steady_images_per_s: float | None = None  # without each attempt's warm-up epoch

    @property
    def raw_throughput(self) -> float:
        return self.images / self.time_s if self.time_s > 0 else 0.0


@dataclass(frozen=True)
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

    def stats(self) -> dict[str, Any]:
        n = len(self.util)
        mem = [m for m in self.memory_mib if m is not None]
        return {
            "host": self.host, "index": self.index, "samples": n,
            "mean_util": round(sum(self.util) / n, 1) if n else None,
            "min_util": min(self.util) if n else None,
            "max_util": max(self.util) if n else None,
            "max_memory_mib": max(mem) if mem else None,
            "duration_s": round(self.times[-1] - self.times[0], 3) if n else None,
        }


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


# --------------------------------------------------------------------------------------------
# Pure parsing


def _value(text: str) -> Any:
    if text.lower() == "nan":
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        v = float(text)
    except ValueError:
        return text
    return v if math.isfinite(v) else None


def parse_train_line(line: str) -> tuple[str, dict[str, Any]] | None:
    """`(event, fields)` for a `fabrikit-train:` line (any launcher prefix), else None.

    Events: `start`, `epoch`, `summary`, `stopped`; other lines (`config`, `checkpoint`,
    `step=`) return None. Two writers merged on one line: the last record wins.
    """
    at = line.rfind(TRAIN_PREFIX)
    if at < 0:
        return None
    text = line[at + len(TRAIN_PREFIX):].strip()
    if text.startswith("epoch="):
        event, rest = "epoch", text
    elif text.startswith("stopping on signal "):
        parts = text.split()
        fields: dict[str, Any] = {"signal": parts[3] if len(parts) > 3 else None}
        if len(parts) > 6 and parts[4] == "at" and parts[5] == "step":
            fields["step"] = _value(parts[6].rstrip(","))
        return "stopped", fields
    else:
        event, _, rest = text.partition(" ")
        if event not in ("start", "summary"):
            return None
    return event, {k: _value(v) for k, v in _KV.findall(rest)}


def _complete(event: str, fields: dict[str, Any]) -> bool:
    need = _REQUIRED.get(event)
    if need is None:
        return False
    return all(isinstance(fields.get(k), (int, float)) and not isinstance(fields.get(k), bool)
               for k in need)


def records_from_lines(lines: Iterable[str]) -> list[tuple[str, dict[str, Any]]]:
    """Training records from log lines, in order; incomplete (cut) records are dropped."""
    out = []
    for line in lines:
        rec = parse_train_line(line)
        if rec is not None and _complete(*rec):
            out.append(rec)
    return out


def records_from_metrics(lines: Iterable[str]) -> tuple[list[tuple[str, dict[str, Any]]], int]:
    """Training records from metrics.jsonl lines and the number of malformed lines."""
    out, bad = [], 0
    for line in lines:
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("event"), str):
            bad += 1
            continue
        event = obj["event"]
        fields = {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                  for k, v in obj.items() if k not in ("event",)}
        if event in _REQUIRED:
            if _complete(event, fields):
                out.append((event, fields))
            else:
                bad += 1
    return out, bad


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else (
        int(v) if isinstance(v, float) and v.is_integer() else None)


def _float(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) else None


def _str(v: Any) -> str | None:
    return None if v is None else str(v)


def group_attempts(records: Sequence[tuple[str, dict[str, Any]]]) -> tuple[Attempt, ...]:
    """Split records into attempts: each `start` opens one, a `summary` closes it."""
    attempts: list[Attempt] = []
    cur: dict[str, Any] | None = None

    def close() -> None:
        nonlocal cur
        if cur is not None:
            attempts.append(Attempt(len(attempts) + 1, cur["start"], tuple(cur["epochs"]),
                                    cur["summary"], cur["stopped"]))
        cur = None

    def open_(start: StartRecord | None) -> dict[str, Any]:
        close()
        return {"start": start, "epochs": [], "summary": None, "stopped": None}

    for event, f in records:
        if event == "start":
            cur = open_(StartRecord(_int(f.get("nodes")), _int(f.get("procs_per_node")),
                                    int(f["world_size"]), _str(f.get("device")),
                                    _str(f.get("backend")), _int(f.get("start_step"))))
            continue
        if cur is None or cur["summary"] is not None:
            cur = open_(None)
        if event == "epoch":
            n = len(attempts) + 1
            cur["epochs"].append(EpochRecord(int(f["epoch"]), _str(f.get("steps")),
                                             float(f["time_s"]), float(f["images_per_s"]),
                                             _float(f.get("loss")), _float(f.get("acc")), n))
        elif event == "stopped":
            cur["stopped"] = _str(f.get("signal")) or "signal"
        elif event == "summary":
            cur["summary"] = SummaryRecord(
                _int(f.get("nodes")), _int(f.get("procs_per_node")), int(f["world_size"]),
                _int(f.get("epochs")), _int(f.get("global_steps")), _int(f.get("steps_this_run")),
                int(f["images"]), float(f["time_s"]), _float(f.get("images_per_s")),
                _float(f.get("final_loss")), _float(f.get("final_acc")), _float(f.get("steady_images_per_s")))
    close()
    return tuple(attempts)


def overall(training: Training) -> Overall | None:
    """Images / time over all attempts: summaries where printed, epoch lines otherwise."""
    images = time_s = 0.0
    estimated = False
    seen = False
    for a in training.attempts:
        if a.summary is not None:
            images += a.summary.images
            time_s += a.summary.time_s
            seen = True
        elif a.epochs:
            images += sum(e.images for e in a.epochs)
            time_s += sum(e.time_s for e in a.epochs)
            estimated = seen = True
    if not seen:
        return None
    last = training.last_summary
    complete = all(a.summary is not None for a in training.attempts)
    epochs = training.epochs
    if len(training.attempts) == 1 and last is not None and last.images_per_s is not None:
        ips = last.images_per_s  # exactly what the job printed
    else:
        ips = round(images / time_s, 1) if time_s > 0 else 0.0
    final_loss = last.final_loss if complete and last else (epochs[-1].loss if epochs else None)
    final_acc = last.final_acc if complete and last else (epochs[-1].acc if epochs else None)
    return Overall(
        images=round(images, 1) if estimated else int(images), time_s=round(time_s, 3),
        images_per_s=ips,
        epochs=last.epochs if complete and last else (max(e.epoch for e in epochs) + 1 if epochs else None),
        global_steps=last.global_steps if complete and last else None,
        final_loss=final_loss, final_acc=final_acc, complete=complete, estimated=estimated,
        steady_images_per_s=steady_throughput(training))


def steady_throughput(training: Training) -> float | None:
    """images/s without each attempt's first epoch, which pays for warm-up (on GPUs cudnn
    autotuning, NCCL set-up, DDP's bucket rebuild); None when no later epoch exists.

    One attempt: what the job printed (`steady_images_per_s`); several: from the epoch
    lines (images estimated from their rounded images/s and time)."""
    if len(training.attempts) == 1 and training.attempts[0].summary is not None:
        printed = training.attempts[0].summary.steady_images_per_s
        if printed is not None:
            return printed
    later = [e for a in training.attempts for e in a.epochs[1:]]
    time_s = sum(e.time_s for e in later)
    return round(sum(e.images for e in later) / time_s, 1) if time_s > 0 else None


def per_epoch_throughput(training: Training) -> list[tuple[int, float]]:
    """(epoch, images/s) for plotting; an epoch split over attempts is merged."""
    acc: dict[int, list[float]] = {}
    for e in training.epochs:
        images_time = acc.setdefault(e.epoch, [0.0, 0.0, 0.0])
        images_time[0] += e.images
        images_time[1] += e.time_s
        images_time[2] += 1
    out = []
    for epoch in sorted(acc):
        images, t, n = acc[epoch]
        if n == 1:
            ips = next(x.images_per_s for x in training.epochs if x.epoch == epoch)
        else:
            ips = images / t if t > 0 else 0.0
        out.append((epoch, ips))
    return out


def _gpu_time(text: str) -> float | None:
    text = text.strip()
    for fmt in _GPU_TIME_FORMATS:
        try:
            return datetime.strptime(text, fmt).timestamp()
        except ValueError:
            continue
    return None


def _gpu_number(text: str) -> float | None:
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
            t = _gpu_time(cells[cols["timestamp"]])
            util = _gpu_number(cells[cols["util"]])
            index = int(cells[cols["index"]]) if cols.get("index") is not None else 0
            mem = _gpu_number(cells[cols["memory"]]) if cols.get("memory") is not None else None
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


def scaling(run: RunReport, baseline: RunReport) -> Scaling:
    """The tutorials' scaling table: baseline row, this run's row.

    speed-up = this run's images/s / the baseline's (= baseline time / this time when both
    trained on the same number of images); efficiency = speed-up / (W / W_baseline).
    """
    rows = []
    for role, rep in (("baseline", baseline), ("run", run)):
        if rep.overall is None or rep.overall.time_s <= 0:
            raise UserError(f"{rep.run_dir}: no finished epoch or summary, nothing to compare")
        if not rep.config.world_size:
            raise UserError(f"{rep.run_dir}: world size unknown, cannot compute efficiency")
    b = baseline.overall
    assert b is not None and run.overall is not None
    # GPU runs are compared on images/s without their warm-up epoch: at a few seconds per
    # epoch its cudnn autotuning and NCCL set-up would weigh on the run with more GPUs.
    gpus = run.config.device == "cuda" and baseline.config.device == "cuda"
    steady = gpus and run.overall.steady_images_per_s is not None and b.steady_images_per_s is not None

    def rate(o: Overall) -> float:
        return (o.steady_images_per_s or 0.0) if steady else o.raw_throughput

    for role, rep in (("baseline", baseline), ("run", run)):
        o = rep.overall
        assert o is not None
        speedup = rate(o) / rate(b) if rate(b) > 0 else float("nan")
        ratio = rep.config.world_size / baseline.config.world_size
        rows.append(ScalingRow(role, str(rep.run_dir), rep.config.label, rep.config.world_size,
                               o.images, o.time_s, rate(o) if steady else o.images_per_s,
                               speedup, speedup / ratio))
    same = run.overall.images == b.images and not (run.overall.estimated or b.estimated)
    return Scaling(tuple(rows), "steady" if steady else "time" if same else "throughput", gpus)


# --------------------------------------------------------------------------------------------
# Reading a run directory


def _read_text_lines(path: Path) -> Iterator[str]:
    """Lines of a file with bounded memory (over-long lines cut); OSError -> UserError."""
    try:
        with open(path, "rb") as fh:
            while True:
                chunk = fh.readline(MAX_LINE_BYTES)
                if not chunk:
                    return
                if len(chunk) >= MAX_LINE_BYTES and not chunk.endswith(b"\n"):
                    while True:  # skip the rest of an over-long line
                        more = fh.readline(MAX_LINE_BYTES)
                        if not more or more.endswith(b"\n"):
                            break
                yield chunk.decode("utf-8", "replace").rstrip("\r\n")
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, not a file") from None
    except PermissionError:
        raise UserError(f"{path}: permission denied") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _load_profile(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except PermissionError:
        raise UserError(f"{path}: permission denied") from None
    except (OSError, yaml.YAMLError, UnicodeDecodeError) as exc:
        msg = getattr(exc, "strerror", None) or str(exc).splitlines()[0]
        raise UserError(f"{path}: unreadable: {msg}") from None
    return data if isinstance(data, dict) else {}


def job_logs(run_dir: Path) -> tuple[str, list[Path]]:
    """(scheduler, log files in order): node logs, Slurm job logs, or slurm-*.out."""
    names = [p.name for p in run_dir.iterdir()]
    nodes = sorted((int(m.group(1)), n) for n in names if (m := _NODE_LOG.match(n)))
    jobs = sorted((int(m.group(1)), int(m.group(2) or 0), n) for n in names if (m := _JOB_LOG.match(n)))
    outs = sorted((int(m.group(1)), n) for n in names if (m := _SLURM_OUT.match(n)))
    if jobs:
        return "slurm", [run_dir / j[-1] for j in jobs]
    if outs:
        return "slurm", [run_dir / o[-1] for o in outs]
    if nodes:
        return "local", [run_dir / n[-1] for n in nodes]
    scheduler = "slurm" if (run_dir / "job.sbatch").exists() else "local"
    return scheduler, []


def _dig(data: dict[str, Any], *keys: str) -> Any:
    for k in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(k)
    return data


def load_run(run_dir: Path | str) -> RunReport:
    """Read everything the report needs from a run directory (UserError on bad input)."""
    from .nccl_log import LogAnalyser

    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise UserError(f"{run_dir}: no such run directory")
    if not run_dir.is_dir():
        raise UserError(f"{run_dir}: not a directory")
    if not (run_dir / LAUNCH_FILE).is_file():
        raise UserError(f"{run_dir} is not a fabrikit run directory (no {LAUNCH_FILE})")
    try:
        os.listdir(run_dir)
    except OSError as exc:
        raise UserError(f"{run_dir}: cannot list: {exc.strerror or exc}") from None
    from .run_dir import load_launch

    launch = load_launch(run_dir)
    profile = _load_profile(run_dir / PROFILE_FILE)
    warnings: list[str] = []

    fabric = _dig(profile, "fabric", "kind")
    expected = fabric if fabric in ("slingshot", "infiniband", "ethernet") else None
    scheduler, logs = job_logs(run_dir)

    # One pass over the logs: training lines and NCCL lines.
    analyser = LogAnalyser(source=logs[0].name if logs else "<no log>", expected_fabric=expected)
    log_records: list[tuple[str, dict[str, Any]]] = []
    for path in logs:
        for line in _read_text_lines(path):
            analyser.feed(line, path.name)
            if TRAIN_PREFIX in line:
                rec = parse_train_line(line)
                if rec is not None and _complete(*rec):
                    log_records.append(rec)

    records, source, skipped = log_records, ", ".join(p.name for p in logs), 0
    metrics = run_dir / METRICS_FILE
    if metrics.exists():
        m_records, skipped = records_from_metrics(_read_text_lines(metrics))
        if m_records:
            records, source = m_records, METRICS_FILE
        if skipped:
            warnings.append(f"{METRICS_FILE}: skipped {skipped} malformed line(s)")
    if not records:
        looked = ", ".join([METRICS_FILE] * metrics.exists() + [p.name for p in logs]) or "no log files"
        raise UserError(f"{run_dir}: no training lines ({TRAIN_PREFIX} ...) found (looked at: {looked})")
    training = Training(group_attempts(records), source, skipped)
    start, summary = training.last_start, training.last_summary
    ws = (start.world_size if start else None) or (summary.world_size if summary else None)
    config = RunConfig(
        site=launch.site or _str(_dig(profile, "site")),
        scheduler=scheduler,
        nodes=(start.nodes if start else None) or (summary.nodes if summary else None)
        or launch.nodes,
        procs_per_node=(start.procs_per_node if start else None)
        or (summary.procs_per_node if summary else None)
        or launch.nproc_per_node or _int(_dig(profile, "launcher", "nproc_per_node")),
        world_size=ws,
        device=start.device if start else None,
        backend=start.backend if start else None,
        gpus_per_node=launch.gpus_per_node if launch.gpus_per_node is not None
        else _int(_dig(profile, "scheduler", "gpus_per_node")),
        fabric=_str(fabric),
    )
    if len(training.attempts) > 1:
        warnings.append(f"{len(training.attempts)} attempts (requeued or resumed); totals add them up")
    if any(a.summary is None for a in training.attempts):
        warnings.append("no summary line for every attempt (still running, or killed): "
                        "totals estimated from epoch lines")

    gpus: list[GpuSeries] = []
    gpu_files: list[str] = []
    for path in sorted(run_dir.iterdir()):
        m = _GPU_CSV.match(path.name)
        if not m or not path.is_file():
            continue
        gpu_files.append(path.name)
        series = parse_gpu_csv(_read_text_lines(path), m.group(1))
        if not series:
            warnings.append(f"{path.name}: no GPU samples")
        gpus.extend(series)

    verdict = analyser.result()
    if not logs:
        line = "no job logs in the run directory"
    elif verdict.nccl_lines == 0 and (config.backend == "gloo" or config.device == "cpu"):
        line = "no NCCL (gloo/CPU)"
    else:
        line = verdict.summary.removeprefix("fabrikit: ")
    transport = TransportInfo(line, verdict.summary if logs else None,
                              verdict.transport.value if logs else None,
                              verdict.verdict.value if logs else None,
                              verdict.nccl_lines, tuple(p.name for p in logs))
    return RunReport(run_dir, config, training, overall(training), tuple(gpus),
                     tuple(gpu_files), transport, tuple(warnings))


# --------------------------------------------------------------------------------------------
# Output: text, JSON, plots


def _fmt(v: Any, spec: str = "", none: str = "-") -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return none
    return format(v, spec)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    return [indent + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()
            for row in (header, *rows)]


def gpu_by_host(gpus: Sequence[GpuSeries]) -> list[dict[str, Any]]:
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


def _gpu_scaling_table(scale: Scaling) -> list[str]:
    """The site guides' table: GPUs, images/s, speed-up (6.34x), efficiency (79%)."""
    which = ("images/s without each run's warm-up epoch" if scale.basis == "steady"
             else "overall images/s (a run has no epoch after its first)")
    lines = [f"scaling (baseline {scale.rows[0].run_dir}; {which}; "
             "efficiency = speed-up / (GPUs / baseline GPUs))"]
    rows = [[r.configuration + (" (baseline)" if r.role == "baseline" else ""), str(r.world_size),
             f"{r.images_per_s:.1f}", _fmt(r.speedup, ".2f") + ("x" if math.isfinite(r.speedup) else ""),
             _fmt(r.efficiency * 100, ".0f") + ("%" if math.isfinite(r.efficiency) else "")] for r in scale.rows]
    return lines + _table(["CONFIGURATION", "GPUS", "IMAGES/S", "SPEED-UP", "EFFICIENCY"], rows)


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
        out += _table(header, rows)
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

    if scale is not None and scale.gpus:
        out += _gpu_scaling_table(scale)
    elif scale is not None:
        base = scale.rows[0]
        out.append(f"scaling (baseline {base.run_dir}; speed-up = "
                   + ("baseline time / time" if scale.basis == "time" else "images/s ratio")
                   + ", efficiency = speed-up / (world size / baseline world size))")
        rows = [[r.configuration + (" (baseline)" if r.role == "baseline" else ""), str(r.world_size),
                 f"{r.time_s:.3f}", f"{r.images_per_s:.1f}", _fmt(r.speedup, ".2f"),
                 _fmt(r.efficiency, ".2f")] for r in scale.rows]
        out += _table(["CONFIGURATION", "WORLD SIZE", "TIME (S)", "IMAGES/S", "SPEED-UP", "EFFICIENCY"], rows)

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


def _config_dict(c: RunConfig) -> dict[str, Any]:
    return {"site": c.site, "scheduler": c.scheduler, "nodes": c.nodes,
            "procs_per_node": c.procs_per_node, "world_size": c.world_size, "device": c.device,
            "backend": c.backend, "gpus_per_node": c.gpus_per_node, "fabric": c.fabric,
            "label": c.label}


def _overall_dict(o: Overall | None) -> dict[str, Any] | None:
    if o is None:
        return None
    return {"images": o.images, "time_s": o.time_s, "images_per_s": o.images_per_s,
            "steady_images_per_s": o.steady_images_per_s,
            "epochs": o.epochs, "global_steps": o.global_steps, "final_loss": o.final_loss,
            "final_acc": o.final_acc, "complete": o.complete, "estimated": o.estimated}


def _num(v: float) -> float | None:
    return v if math.isfinite(v) else None


def report_dict(rep: RunReport, baseline: RunReport | None = None, scale: Scaling | None = None,
                files: dict[str, str | None] | None = None) -> dict[str, Any]:
    """The machine-readable report (`report.json`, `--json`)."""
    return {
        "format": JSON_FORMAT,
        "run_dir": str(rep.run_dir),
        "config": _config_dict(rep.config),
        "source": rep.training.source,
        "attempts": [{"number": a.number, "start_step": a.start.start_step if a.start else None,
                      "epochs": len(a.epochs), "summary": a.summary is not None,
                      "stopped": a.stopped} for a in rep.training.attempts],
        "epochs": [{"attempt": e.attempt, "epoch": e.epoch, "steps": e.steps, "time_s": e.time_s,
                    "images_per_s": e.images_per_s, "loss": e.loss, "acc": e.acc}
                   for e in rep.training.epochs],
        "overall": _overall_dict(rep.overall),
        "baseline": None if baseline is None else {
            "run_dir": str(baseline.run_dir), "config": _config_dict(baseline.config),
            "overall": _overall_dict(baseline.overall)},
        "scaling": None if scale is None else {
            "basis": scale.basis, "gpus": scale.gpus,
            "rows": [{"role": r.role, "run_dir": r.run_dir, "configuration": r.configuration,
                      "world_size": r.world_size, "images": r.images, "time_s": r.time_s,
                      "images_per_s": r.images_per_s, "speedup": _num(r.speedup),
                      "efficiency": _num(r.efficiency)} for r in scale.rows]},
        "gpu": {"files": list(rep.gpu_files), "gpus": [s.stats() for s in rep.gpus],
                "hosts": gpu_by_host(rep.gpus)},
        "transport": {"line": rep.transport.line, "summary": rep.transport.summary,
                      "transport": rep.transport.transport, "verdict": rep.transport.verdict,
                      "nccl_lines": rep.transport.nccl_lines, "sources": list(rep.transport.sources)},
        "warnings": list(rep.warnings),
        "files": dict(files or {}),
    }


def write_atomic_bytes(path: Path, data: bytes) -> None:
    try:
        write_atomic(path, data)
    except OSError as exc:
        raise UserError(f"{path}: cannot write: {exc.strerror or exc}") from None


def _save_figure(fig: Any, path: Path) -> None:
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    write_atomic_bytes(path, buf.getvalue())


def have_matplotlib() -> bool:
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def _figure(width: float = 8.0, height: float = 4.5) -> Any:
    """A matplotlib Figure on the Agg canvas (no pyplot, no global backend state)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise UserError("plots need matplotlib: pip install 'fabrikit[report]'") from None
    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    return fig


def plot_throughput(rep: RunReport, path: Path, baseline: RunReport | None = None) -> Path:
    """images/s per epoch (both runs with a baseline); dashed lines: overall images/s."""
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    runs = ([("baseline", baseline)] if baseline is not None else []) + [("run", rep)]
    colours = {"baseline": "tab:gray", "run": "tab:blue"}
    epochs_all: set[int] = set()
    for role, r in runs:
        points = per_epoch_throughput(r.training)
        label = f"{'baseline: ' if role == 'baseline' else ''}{r.config.label}"
        if points:
            xs, ys = zip(*points)
            epochs_all.update(xs)
            ax.plot(xs, ys, marker="o", linewidth=2, markersize=7, color=colours[role], label=label)
        if r.overall is not None:
            ax.axhline(r.overall.images_per_s, linestyle="--", linewidth=1, color=colours[role],
                       label=f"{label} overall {r.overall.images_per_s:.1f}/s")
    ax.set_xlabel("epoch")
    ax.set_ylabel("images/s")
    ax.set_ylim(bottom=0)
    if epochs_all:
        ax.set_xticks(sorted(epochs_all))
    ax.set_title(f"Training throughput: {rep.run_dir.resolve().name}")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    _save_figure(fig, path)
    return path


def plot_gpu_utilisation(rep: RunReport, path: Path) -> Path:
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
    _save_figure(fig, path)
    return path


def write_report(rep: RunReport, out_dir: Path, baseline: RunReport | None = None,
                 scale: Scaling | None = None) -> tuple[dict[str, Any], list[Path]]:
    """Write the plots and report.json into out_dir; return the JSON object and the paths.

    Without matplotlib (an optional extra) the plots are skipped with a warning in the JSON
    object; the text report and report.json are still written."""
    writable_dir(out_dir, "output directory")
    paths: list[Path] = []
    throughput_png = gpu_png = None
    skipped = None
    if have_matplotlib():
        throughput_png = plot_throughput(rep, out_dir / THROUGHPUT_PNG, baseline)
        paths.append(throughput_png)
        if rep.gpus:
            gpu_png = plot_gpu_utilisation(rep, out_dir / GPU_PNG)
            paths.append(gpu_png)
    else:
        skipped = "plots skipped: matplotlib is not installed (pip install 'fabrikit[report]')"
    json_path = out_dir / REPORT_JSON
    files = {"throughput": str(throughput_png) if throughput_png else None,
             "gpu_utilisation": str(gpu_png) if gpu_png else None, "report": str(json_path)}
    data = report_dict(rep, baseline, scale, files)
    if skipped:
        data["warnings"].append(skipped)
    write_atomic_bytes(json_path, (json.dumps(data, indent=2) + "\n").encode())
    paths.append(json_path)
    return data, paths
