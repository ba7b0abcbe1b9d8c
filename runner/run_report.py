"""`fabrikit report`'s entry point: read a run directory into a RunReport and write the
report's files. The only report module that touches the disk; the pieces it calls are pure:

- runner.report_model: the records (and the names of the files read and written);
- runner.train_lines: `fabrikit-train:` log lines and `metrics.jsonl` -> training records;
- runner.gpu_samples: `gpu-<host>.csv` (nvidia-smi CSV) -> per-GPU series;
- runner.throughput: overall and steady images/s, per-epoch throughput, the scaling table;
- runner.report_text, runner.report_json, runner.report_plots: text, JSON, PNG bytes.

Inputs (all optional except `launch.json` and some training output):

- `launch.json` (runner.run_dir.load_launch) / `profile.yaml`: site, nodes, processes per
  node, GPUs per node, fabric.
- `metrics.jsonl` (written by rank 0 of jobs/train_ddp.py, appended across requeued
  attempts); preferred when it holds training records.
- the job logs: `nodeK.log` (local runs), `job-<id>[.rN].log` (Slurm; `slurm-<id>.out` only
  when there is no job log, since it carries the same lines). They also feed the NCCL
  transport analysis (runner.nccl_log), in the same pass.
- `gpu-<host>.csv`, one file per node.

Every input is read with bounded memory (runner.bounded_lines); every unreadable or unusable
input is a one-line UserError. Every file is written to a temporary name and renamed.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from . import compressed_logs, fabrics
from .atomic_write import writable_dir, write_atomic
from .bounded_lines import read_text_lines
from .errors import UserError
from .gpu_samples import parse_gpu_csv
from .report_json import report_dict
from .report_model import (GPU_PNG, METRICS_FILE, PROFILE_FILE, REPORT_JSON, THROUGHPUT_PNG, GpuSeries,
                           RunConfig, RunReport, Scaling, Training, TransportInfo)
from .report_text import format_report
from .run_dir import LAUNCH_FILE, SCRIPT_FILE, LaunchRecord, load_launch
from .throughput import overall, per_epoch_throughput, scaling
from .train_lines import (TRAIN_PREFIX, Record, group_attempts, int_or_none, records_from_metrics, str_or_none,
                          train_record)

# The report's API for runner.report_cmd and tests: reading and writing here, the rest pure.
__all__ = ["load_run", "write_report", "job_logs", "format_report", "report_dict", "scaling",
           "per_epoch_throughput", "parse_gpu_csv"]

_NODE_LOG = re.compile(r"^node(\d+)\.log$")
_JOB_LOG = re.compile(r"^job-(\d+)(?:\.r(\d+))?\.log$")
_SLURM_OUT = re.compile(r"^slurm-(\d+)\.out$")
_GPU_CSV = re.compile(r"^gpu-(.+)\.csv$")


# --------------------------------------------------------------------------------------------
# Reading a run directory


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
    scheduler = "slurm" if (run_dir / SCRIPT_FILE).exists() else "local"
    return scheduler, []


def _load_profile(path: Path) -> dict[str, Any]:
    """The resolved profile as saved with the run, as plain data ({} when absent): the
    report reads a few values and must not fail on a profile an older fabrikit wrote."""
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


def _dig(data: dict[str, Any], *keys: str) -> Any:
    for k in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(k)
    return data


def _check_run_dir(run_dir: Path) -> None:
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


def _training(run_dir: Path, logs: list[Path], log_records: list[Record], warnings: list[str]) -> Training:
    """Records from metrics.jsonl when it holds any, else from the logs."""
    records, source, skipped = log_records, ", ".join(p.name for p in logs), 0
    metrics = run_dir / METRICS_FILE
    if metrics.exists():
        m_records, skipped = records_from_metrics(read_text_lines(metrics))
        if m_records:
            records, source = m_records, METRICS_FILE
        if skipped:
            warnings.append(f"{METRICS_FILE}: skipped {skipped} malformed line(s)")
    if not records:
        looked = ", ".join([METRICS_FILE] * metrics.exists() + [p.name for p in logs]) or "no log files"
        raise UserError(f"{run_dir}: no training lines ({TRAIN_PREFIX} ...) found (looked at: {looked})")
    return Training(group_attempts(records), source, skipped)


def run_config(launch: LaunchRecord, profile: dict[str, Any], training: Training, scheduler: str) -> RunConfig:
    """What ran, from the training's own records first, then the launch and the profile."""
    start, summary = training.last_start, training.last_summary
    return RunConfig(
        site=launch.site or str_or_none(_dig(profile, "site")),
        scheduler=scheduler,
        nodes=(start.nodes if start else None) or (summary.nodes if summary else None) or launch.nodes,
        procs_per_node=(start.procs_per_node if start else None)
        or (summary.procs_per_node if summary else None)
        or launch.nproc_per_node or int_or_none(_dig(profile, "launcher", "nproc_per_node")),
        world_size=(start.world_size if start else None) or (summary.world_size if summary else None),
        device=start.device if start else None,
        backend=start.backend if start else None,
        gpus_per_node=launch.gpus_per_node if launch.gpus_per_node is not None
        else int_or_none(_dig(profile, "scheduler", "gpus_per_node")),
        fabric=str_or_none(_dig(profile, "fabric", "kind")),
    )


def _gpu_series(run_dir: Path, warnings: list[str]) -> tuple[list[GpuSeries], list[str]]:
    gpus: list[GpuSeries] = []
    gpu_files: list[str] = []
    for path in sorted(run_dir.iterdir()):
        m = _GPU_CSV.match(path.name)
        if not m or not path.is_file():
            continue
        gpu_files.append(path.name)
        series = parse_gpu_csv(read_text_lines(path), m.group(1))
        if not series:
            warnings.append(f"{path.name}: no GPU samples")
        gpus.extend(series)
    return gpus, gpu_files


def load_run(run_dir: Path | str) -> RunReport:
    """Read everything the report needs from a run directory (UserError on bad input)."""
    from .nccl_log import LogAnalyser, job_guard_env

    run_dir = Path(run_dir)
    _check_run_dir(run_dir)
    launch = load_launch(run_dir)
    profile = _load_profile(run_dir / PROFILE_FILE)
    warnings: list[str] = []

    fabric = _dig(profile, "fabric", "kind")
    scheduler, logs = job_logs(run_dir)
    # One pass over the logs: training lines and NCCL lines.
    # A kind the transport check does not judge (loopback), or an unknown one: none expected.
    # The LL128 guard the profile set for the job (NCCL prints it only under SUBSYS=ENV).
    profile_env = _dig(profile, "env")
    guard = job_guard_env(profile_env) if isinstance(profile_env, dict) else {}
    analyser = LogAnalyser(source=logs[0].name if logs else "<no log>",
                           expected_fabric=fabrics.checked(fabric), env=guard,
                           reread=compressed_logs.blocks_again(logs))
    log_records: list[Record] = []
    for path in logs:
        for line in read_text_lines(path):
            analyser.feed(line, path.name)
            rec = train_record(line)
            if rec is not None:
                log_records.append(rec)

    training = _training(run_dir, logs, log_records, warnings)
    config = run_config(launch, profile, training, scheduler)
    if len(training.attempts) > 1:
        warnings.append(f"{len(training.attempts)} attempts (requeued or resumed); totals add them up")
    if any(a.summary is None for a in training.attempts):
        warnings.append("no summary line for every attempt (still running, or killed): "
                        "totals estimated from epoch lines")
    gpus, gpu_files = _gpu_series(run_dir, warnings)

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
# Writing the report's files


def _write(path: Path, data: bytes) -> None:
    try:
        write_atomic(path, data)
    except OSError as exc:
        raise UserError(f"{path}: cannot write: {exc.strerror or exc}") from None


def write_report(rep: RunReport, out_dir: Path, baseline: RunReport | None = None,
                 scale: Scaling | None = None) -> tuple[dict[str, Any], list[Path]]:
    """Write the plots and report.json into out_dir; return the JSON object and the paths.

    Without matplotlib (an optional extra) the plots are skipped with a warning in the JSON
    object; the text report and report.json are still written."""
    from . import report_plots

    writable_dir(out_dir, "output directory")
    paths: list[Path] = []
    throughput_png = gpu_png = None
    skipped = None
    if report_plots.have_matplotlib():
        throughput_png = out_dir / THROUGHPUT_PNG
        _write(throughput_png, report_plots.throughput_png(rep, baseline))
        paths.append(throughput_png)
        if rep.gpus:
            gpu_png = out_dir / GPU_PNG
            _write(gpu_png, report_plots.gpu_utilisation_png(rep))
            paths.append(gpu_png)
    else:
        skipped = "plots skipped: matplotlib is not installed (pip install 'fabrikit[report]')"
    json_path = out_dir / REPORT_JSON
    files = {"throughput": str(throughput_png) if throughput_png else None,
             "gpu_utilisation": str(gpu_png) if gpu_png else None, "report": str(json_path)}
    data = report_dict(rep, baseline, scale, files)
    if skipped:
        data["warnings"].append(skipped)
    _write(json_path, (json.dumps(data, indent=2) + "\n").encode())
    paths.append(json_path)
    return data, paths
