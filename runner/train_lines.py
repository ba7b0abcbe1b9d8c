"""Training records from what jobs/train_ddp.py writes: its `fabrikit-train:` log lines and
rank 0's `metrics.jsonl`. Pure: lines in, frozen records (runner.report_model) out.

Lines may carry launcher prefixes (`[node1] `, srun `--label`'s `0: `), so the prefix is
found wherever it starts. A record that lacks a field it needs (a cut last line) is dropped;
a requeued or resumed job's records are split into attempts at each `start`.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Iterable, Sequence

from .report_model import Attempt, EpochRecord, StartRecord, SummaryRecord

TRAIN_PREFIX = "fabrikit-train:"
Record = tuple[str, dict[str, Any]]  # (event, fields)

_KV = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(\S*)")
# Fields each record must carry to be used (a truncated last line lacks some).
_REQUIRED = {
    "start": ("world_size",),
    "epoch": ("epoch", "time_s", "images_per_s"),
    "summary": ("world_size", "images", "time_s"),
    "stopped": (),
}


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


def parse_train_line(line: str) -> Record | None:
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


def train_record(line: str) -> Record | None:
    """The complete training record on a log line, or None (no record, or a cut one)."""
    if TRAIN_PREFIX not in line:  # most log lines: skip the parse
        return None
    rec = parse_train_line(line)
    return rec if rec is not None and _complete(*rec) else None


def records_from_lines(lines: Iterable[str]) -> list[Record]:
    """Training records from log lines, in order; incomplete (cut) records are dropped."""
    return [rec for line in lines if (rec := train_record(line)) is not None]


def records_from_metrics(lines: Iterable[str]) -> tuple[list[Record], int]:
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


# Loose coercion of record fields (and of profile.yaml values): the wrong type reads as unknown.
def int_or_none(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else (
        int(v) if isinstance(v, float) and v.is_integer() else None)


def float_or_none(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) else None


def str_or_none(v: Any) -> str | None:
    return None if v is None else str(v)


def group_attempts(records: Sequence[Record]) -> tuple[Attempt, ...]:
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
            cur = open_(StartRecord(int_or_none(f.get("nodes")), int_or_none(f.get("procs_per_node")),
                                    int(f["world_size"]), str_or_none(f.get("device")),
                                    str_or_none(f.get("backend")), int_or_none(f.get("start_step"))))
            continue
        if cur is None or cur["summary"] is not None:
            cur = open_(None)
        if event == "epoch":
            cur["epochs"].append(EpochRecord(
                attempt=len(attempts) + 1, epoch=int(f["epoch"]), steps=str_or_none(f.get("steps")),
                time_s=float(f["time_s"]), images_per_s=float(f["images_per_s"]),
                loss=float_or_none(f.get("loss")), acc=float_or_none(f.get("acc"))))
        elif event == "stopped":
            cur["stopped"] = str_or_none(f.get("signal")) or "signal"
        elif event == "summary":
            cur["summary"] = SummaryRecord(
                int_or_none(f.get("nodes")), int_or_none(f.get("procs_per_node")), int(f["world_size"]),
                int_or_none(f.get("epochs")), int_or_none(f.get("global_steps")),
                int_or_none(f.get("steps_this_run")), int(f["images"]), float(f["time_s"]),
                float_or_none(f.get("images_per_s")), float_or_none(f.get("final_loss")),
                float_or_none(f.get("final_acc")), float_or_none(f.get("steady_images_per_s")))
    close()
    return tuple(attempts)
