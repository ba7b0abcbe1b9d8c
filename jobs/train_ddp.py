#!/usr/bin/env python3
"""fabrikit's default job: DDP image classification with a CIFAR-style ResNet.

Run it as ``torchrun [--nnodes N --nproc-per-node P ...] jobs/train_ddp.py [options]``; plain
``python jobs/train_ddp.py`` trains as a world of one. One process per GPU with NCCL, bf16
autocast and channels_last when CUDA is visible; CPU ranks with gloo otherwise.

Defaults (``--help`` lists all): 2 epochs over 512 synthetic 32x32 images (deterministic per
``--seed``, with a class-dependent pattern so the loss falls), batch 32 per rank, ResNet-18
layout (``--blocks 2,2,2,2``) at ``--width 16`` (stage widths 16/32/64/128, about 0.7 M
parameters, 1/16 of ResNet-18's compute). They are sized so that a 2-node x 1-process CPU run
on a 2-core machine is done in seconds; real runs raise ``--width 64``, ``--epochs`` and use
``--data-dir`` with CIFAR-10 (``cifar-10-batches-py``: ``data_batch_1..5``, ``test_batch``).

Checkpoints (``--checkpoint-dir``): every ``--checkpoint-every`` optimizer steps, at the end
of each epoch and when stopping, rank 0 writes ``ckpt-<step:08d>.pt`` atomically (temporary
name, fsync, rename, fsync of the directory) and then a completion marker
``ckpt-<step:08d>.done`` holding the checkpoint's size and sha256. ``--resume`` loads the
newest checkpoint whose marker exists and matches the file, and continues at the exact next
batch of the same epoch order (DistributedSampler with ``set_epoch``; already-done batches
are skipped), so no step is done twice or left out. The learning rate is a function of the
global step, so it needs no scheduler state. The last ``--keep-checkpoints`` are kept.

Signals: SIGTERM (torchrun's agent forwards it to workers; Slurm sends it at time limit or
``scancel``) or SIGUSR1 (``sbatch --signal=USR1@120``) on *any* rank make every rank finish its
current step; a per-step all_reduce of a stop flag makes them agree on the step, rank 0 saves
a checkpoint and prints ``fabrikit-train: stopping on signal SIGTERM at step N, checkpoint
saved``. torchrun's agent itself dies on SIGUSR1 unless ``TORCHELASTIC_SIGNALS_TO_HANDLE``
lists it, so send SIGUSR1 to the workers only (or add it there; the agent forwards it). The
handler is installed before torch is imported, so a signal during the (slow) start-up is kept
and stops the run at its first agreed step.

Exit status:
  0   training completed (all epochs, or ``--max-steps`` reached)
  75  stopped early on a signal (``--signal-exit-code``, EX_TEMPFAIL: "try again"); with
      ``--checkpoint-dir`` the state was saved and ``--resume`` continues it. Requeue logic
      should requeue on 75 and treat other non-zero codes as failures. torchrun shows the
      workers' code in its failure summary (``exitcode : 75``); torchrun itself exits 1
      whenever a worker exits non-zero or it was signalled, so wrappers should also look for
      the ``stopping on signal`` line (or the ``stopped`` record in metrics.jsonl).

Machine-readable lines (rank 0, stdout; key=value separated by spaces)::

  fabrikit-train: start nodes=<n> procs_per_node=<p> world_size=<W> device=<cpu|cuda> backend=<gloo|nccl> start_step=<s>
  fabrikit-train: step=<N> loss=<l>                  (only with --log-every-step)
  fabrikit-train: checkpoint step=<N> path=<file>
  fabrikit-train: epoch=<e> steps=<first>-<last> time_s=<t> images_per_s=<x> loss=<l> acc=<a>
  fabrikit-train: stopping on signal <SIGTERM|SIGUSR1> at step <N>, checkpoint saved
  fabrikit-train: summary nodes=<n> procs_per_node=<p> world_size=<W> epochs=<E> global_steps=<g> steps_this_run=<k> images=<i> time_s=<t> images_per_s=<x> final_loss=<l> final_acc=<a>

plus, with ``--resume``, ``fabrikit-train: resuming from ckpt-<step>.pt (step <N>)[; skipped
<file>: <reason>]...`` or ``fabrikit-train: no usable checkpoint in <dir>, starting fresh``.
Step numbers are global, 1-based optimizer steps; an epoch cut short by a signal or
``--max-steps`` still gets its ``epoch=`` line. Epoch loss/acc are training-batch averages
over all ranks; ``epochs`` in the summary counts completed epochs; ``time_s`` counts the
training loop (checkpoint writes included; start-up and torch import not). The same records
go to ``<output-dir>/metrics.jsonl`` (appended across runs, one JSON object per line).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import math
import os
import pickle
import random
import re
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)
_early_stop: list[int] = []


def _record_early_stop(signum: int, _frame: object) -> None:
    """Stop signal that came while torch was still being imported; `StopRequest` takes it over."""
    if not _early_stop:
        _early_stop.append(signum)


if __name__ == "__main__":
    # Before torch: importing it takes seconds (far longer on a busy node or a cold shared
    # file system), and a SIGTERM/SIGUSR1 meanwhile would kill the process with the default
    # action instead of stopping it cleanly.
    for _sig in STOP_SIGNALS:
        signal.signal(_sig, _record_early_stop)

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler, Sampler

from jobenv import Device, JobEnvironment, ProcessGroups, default_output_dir

PREFIX = "fabrikit-train:"
NUM_CLASSES = 10
CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)
CHECKPOINT_FORMAT = 1
_CKPT_RE = re.compile(r"^ckpt-(\d{8})\.pt$")
_MARKER_RE = re.compile(r"^ckpt-(\d{8})\.done$")


# --------------------------------------------------------------------------------------- model


class BasicBlock(nn.Module):
    """ResNet basic block (two 3x3 convs); a 1x1 projection when the shape changes."""

    def __init__(self, in_ch: int, out_ch: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_ch)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_ch)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_ch != out_ch:
            self.shortcut = nn.Sequential(nn.Conv2d(in_ch, out_ch, 1, stride, bias=False), nn.BatchNorm2d(out_ch))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class CifarResNet(nn.Module):
    """ResNet for 32x32 inputs: 3x3 stem without max-pool (ImageNet's stem would shrink a
    32x32 image to 8x8 at once), then four stages of ``blocks[i]`` basic blocks at widths
    ``width * (1, 2, 4, 8)``. ``blocks=(2, 2, 2, 2), width=64`` is the usual CIFAR ResNet-18.
    """

    def __init__(self, blocks: Sequence[int] = (2, 2, 2, 2), width: int = 16, num_classes: int = NUM_CLASSES) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True))
        layers: list[nn.Module] = []
        in_ch = width
        for stage, count in enumerate(blocks):
            out_ch = width * 2**stage
            for i in range(count):
                layers.append(BasicBlock(in_ch, out_ch, stride=2 if stage > 0 and i == 0 else 1))
                in_ch = out_ch
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(in_ch, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


# ---------------------------------------------------------------------------------------- data


@dataclass(frozen=True)
class ImageSet:
    """Images as uint8 ``(N, 3, 32, 32)`` and labels as int64 ``(N,)``, held in memory.

    uint8 is 4x smaller than float32 to keep and to copy to the GPU; normalisation happens
    on the device, per batch.
    """

    images: torch.Tensor
    labels: torch.Tensor

    def __post_init__(self) -> None:
        if self.images.dtype != torch.uint8 or self.images.shape[1:] != (3, 32, 32):
            raise ValueError(f"images must be uint8 (N, 3, 32, 32), got {self.images.dtype} {tuple(self.images.shape)}")
        if self.labels.shape != (self.images.shape[0],):
            raise ValueError("one label per image expected")


def synthetic_cifar(size: int, seed: int) -> ImageSet:
    """CIFAR-shaped data that is the same on every rank for a given ``seed``.

    Each class has a smooth random colour pattern (8x8 upsampled); an image is its class
    pattern (30%) plus per-pixel noise (70%), so the task is learnable but not trivial and the
    loss visibly falls within a few hundred images.
    """
    gen = torch.Generator().manual_seed(seed)
    patterns = F.interpolate(torch.rand(NUM_CLASSES, 3, 8, 8, generator=gen), size=32, mode="bilinear", align_corners=False)
    labels = torch.randint(0, NUM_CLASSES, (size,), generator=gen)
    noise = torch.rand(size, 3, 32, 32, generator=gen)
    images = (0.3 * patterns[labels] + 0.7 * noise).mul(255).round().to(torch.uint8)
    return ImageSet(images, labels)


class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Unpickler that builds numpy arrays and nothing else.

    CIFAR-10's python version is a set of pickles; unpickling runs arbitrary code unless
    the allowed globals are restricted, and a data directory on a shared file system is not
    something to trust blindly.
    """

    _ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("_codecs", "encode"),
    }

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a CIFAR batch file")


def _read_cifar_batch(path: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """One CIFAR-10 python batch: dict with ``data`` (N x 3072 uint8, R then G then B planes,
    each 32x32 row-major) and ``labels`` (N ints). Keys are bytes (written by Python 2)."""
    try:
        import numpy as np
    except ImportError as exc:  # the pickles contain numpy arrays
        raise RuntimeError("reading CIFAR-10 from --data-dir needs numpy in the image") from exc
    with path.open("rb") as f:
        raw = _NumpyOnlyUnpickler(f, encoding="bytes").load()
    batch = {(k.decode() if isinstance(k, bytes) else k): v for k, v in raw.items()}
    data = np.asarray(batch["data"], dtype=np.uint8)
    if data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
        raise ValueError(f"{path}: 'data' has shape {data.shape}, expected (N, 3072)")
    labels = torch.as_tensor(list(batch["labels"]), dtype=torch.int64)
    if labels.shape[0] != data.shape[0]:
        raise ValueError(f"{path}: {data.shape[0]} images but {labels.shape[0]} labels")
    return torch.from_numpy(data.copy()).view(-1, 3, 32, 32), labels


def load_cifar10(data_dir: str | os.PathLike[str], train: bool = True) -> ImageSet:
    """Load CIFAR-10's python format: ``data_batch_1..5`` (train) or ``test_batch``.

    ``data_dir`` may be the ``cifar-10-batches-py`` directory itself or its parent.
    """
    root = Path(data_dir)
    if not (root / "test_batch").exists() and (root / "cifar-10-batches-py").is_dir():
        root = root / "cifar-10-batches-py"
    names = [f"data_batch_{i}" for i in range(1, 6)] if train else ["test_batch"]
    missing = [n for n in names if not (root / n).is_file()]
    if missing:
        raise FileNotFoundError(f"{root}: missing CIFAR-10 file(s) {', '.join(missing)}")
    parts = [_read_cifar_batch(root / n) for n in names]
    return ImageSet(torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts]))


class InMemoryImages(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Dataset over an :class:`ImageSet` that hands out whole batches.

    DataLoader calls ``__getitems__`` with a batch's indices, so one tensor index replaces
    the per-sample ``__getitem__`` + ``default_collate`` stacking the tutorials use (which
    costs as much as the model on small CPU runs).
    """

    def __init__(self, data: ImageSet) -> None:
        self.data = data

    def __len__(self) -> int:
        return self.data.images.shape[0]

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.data.images[index], self.data.labels[index]

    def __getitems__(self, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.as_tensor(indices, dtype=torch.int64)
        return self.data.images[idx], self.data.labels[idx]


def _batch_collate(batch: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """``__getitems__`` already returns a batch; module level so worker processes can pickle it."""
    return batch


def _ignore_stop_signals(_worker_id: int) -> None:
    """DataLoader worker init: ignore SIGTERM/SIGUSR1.

    torchrun signals each worker's whole process group, loader workers included; if they
    died, the main process would fail fetching the next batch instead of stopping cleanly.
    They exit on their own when the main process drops the loader.
    """
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


class SkipSampler(Sampler[int]):
    """Wraps a DistributedSampler and drops the first ``skip`` indices of the epoch.

    Resuming mid-epoch: ``set_epoch`` reproduces the epoch's order, and skipping the
    indices of the batches already done continues at exactly the next batch.
    """

    def __init__(self, inner: DistributedSampler[Any]) -> None:
        self.inner = inner
        self.skip = 0

    def set_epoch(self, epoch: int, skip: int = 0) -> None:
        self.inner.set_epoch(epoch)
        self.skip = skip

    def __iter__(self) -> Iterator[int]:
        it = iter(self.inner)
        for _ in range(self.skip):
            next(it, None)
        return it

    def __len__(self) -> int:
        return max(0, len(self.inner) - self.skip)


def make_loader(
    data: ImageSet, job: JobEnvironment, batch_size: int, seed: int, workers: int, pin_memory: bool
) -> tuple[DataLoader[Any], SkipSampler]:
    """DataLoader over this rank's shard; the sampler is returned to set epoch and skip."""
    dataset = InMemoryImages(data)
    sampler = SkipSampler(DistributedSampler(dataset, num_replicas=job.world_size, rank=job.rank, shuffle=True, seed=seed))
    loader = DataLoader(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        drop_last=True,  # equal step counts on every rank, or the last all_reduce would hang
        num_workers=workers,
        collate_fn=_batch_collate,
        pin_memory=pin_memory,
        persistent_workers=workers > 0,
        worker_init_fn=_ignore_stop_signals if workers > 0 else None,
    )
    return loader, sampler


# --------------------------------------------------------------------------------- checkpoints


def checkpoint_name(step: int) -> str:
    return f"ckpt-{step:08d}.pt"


def marker_name(step: int) -> str:
    return f"ckpt-{step:08d}.done"


def _fsync_dir(directory: Path) -> None:
    """A rename is durable only once the directory entry is on disk, hence the directory fsync."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` so that ``path`` either does not exist or is complete.

    The temporary file lives in the same directory because rename is only atomic within
    one file system; readers never see a partial ``path`` even if the job is killed.
    """
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with tmp.open("wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def save_checkpoint(directory: Path, step: int, state: dict[str, Any], keep: int) -> Path:
    """Write checkpoint + completion marker for ``step``, then prune to the last ``keep``.

    The marker is written last and records size and sha256: a checkpoint that is complete
    on disk but later truncated (quota, a copy that stopped) is still detected on resume.
    """
    buf = io.BytesIO()
    torch.save(state, buf)
    data = buf.getvalue()
    path = directory / checkpoint_name(step)
    atomic_write(path, data)
    marker = {"checkpoint": path.name, "step": step, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    atomic_write(directory / marker_name(step), (json.dumps(marker) + "\n").encode())
    prune_checkpoints(directory, keep)
    return path


def _steps_on_disk(directory: Path) -> tuple[dict[int, Path], dict[int, Path]]:
    """Checkpoint files and markers in ``directory`` by step (temporary files are ignored)."""
    ckpts: dict[int, Path] = {}
    markers: dict[int, Path] = {}
    for entry in directory.iterdir():
        if m := _CKPT_RE.match(entry.name):
            ckpts[int(m.group(1))] = entry
        elif m := _MARKER_RE.match(entry.name):
            markers[int(m.group(1))] = entry
    return ckpts, markers


def prune_checkpoints(directory: Path, keep: int) -> None:
    """Keep the newest ``keep`` complete checkpoints (0 = all); remove older ones and
    unmarked leftovers older than the newest complete one (debris of killed writers).

    Markers go first, so an interrupted prune never leaves a marker without its file.
    """
    ckpts, markers = _steps_on_disk(directory)
    complete = sorted(s for s in ckpts if s in markers)
    if not complete:
        return
    doomed = set(complete[:-keep] if keep > 0 else [])
    doomed |= {s for s in ckpts if s not in markers and s < complete[-1]}
    for step in sorted(doomed):
        if step in markers:
            markers[step].unlink(missing_ok=True)
        ckpts[step].unlink(missing_ok=True)


@dataclass(frozen=True)
class CheckpointChoice:
    """Result of looking for a checkpoint to resume from."""

    path: Path | None
    state: dict[str, Any] | None
    skipped: list[tuple[str, str]]
    """(file name, reason) for each newer candidate that was not used, newest first."""


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def load_checkpoint_file(path: Path) -> dict[str, Any]:
    """``torch.load`` with ``weights_only``: a checkpoint holds only tensors and plain data,
    so nothing in it needs (or is allowed) to run code."""
    state = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"not a fabrikit-train checkpoint (format {CHECKPOINT_FORMAT})")
    return state


def _verify_against_marker(path: Path, marker_path: Path) -> str | None:
    """Why ``path`` does not match its marker, or None when size and sha256 both match."""
    try:
        marker = json.loads(marker_path.read_text())
        size, digest = int(marker["size"]), str(marker["sha256"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"unreadable completion marker ({exc})"
    actual = path.stat().st_size
    if actual != size:
        return f"size {actual} != {size} in completion marker (truncated)"
    if _sha256_file(path) != digest:
        return "sha256 does not match completion marker (corrupt)"
    return None


def find_checkpoint(directory: Path) -> CheckpointChoice:
    """Newest checkpoint in ``directory`` that has a marker, matches it, and loads.

    Newer candidates that fail are listed with the reason, so the resume line says why a
    run restarted from an older step than expected.
    """
    if not directory.is_dir():
        return CheckpointChoice(None, None, [])
    ckpts, markers = _steps_on_disk(directory)
    skipped: list[tuple[str, str]] = []
    for step in sorted(set(ckpts) | set(markers), reverse=True):
        if step not in ckpts:
            skipped.append((checkpoint_name(step), "completion marker but no checkpoint file"))
            continue
        path = ckpts[step]
        if step not in markers:
            skipped.append((path.name, "no completion marker"))
            continue
        if reason := _verify_against_marker(path, markers[step]):
            skipped.append((path.name, reason))
            continue
        try:
            state = load_checkpoint_file(path)
        except Exception as exc:  # noqa: BLE001 - any load failure means: try an older one
            skipped.append((path.name, f"does not load ({type(exc).__name__}: {exc})"))
            continue
        return CheckpointChoice(path, state, skipped)
    return CheckpointChoice(None, None, skipped)


# ------------------------------------------------------------------------------------ training


@dataclass
class Position:
    """Where training stands: next batch ``batch`` of epoch ``epoch``; ``global_step`` done."""

    epoch: int = 0
    batch: int = 0
    global_step: int = 0


class StopRequest:
    """Remembers the first stop signal; ranks agree on it once per step.

    The handler only sets a flag: stopping inside a collective or an optimizer step would
    leave ranks out of step and the checkpoint inconsistent.
    """

    def __init__(self, signals: Sequence[signal.Signals] = STOP_SIGNALS) -> None:
        self.signum = 0
        self.signals = tuple(signals)
        for sig in signals:
            signal.signal(sig, self._handle)
        # Taken over after our handler is in place, so no signal falls between the two.
        self.signum = self.signum or next(iter(_early_stop), 0)

    def _handle(self, signum: int, _frame: object) -> None:
        if not self.signum:
            self.signum = signum

    def ignore_from_now(self) -> None:
        """Ignore further stop signals during teardown.

        When the first rank exits non-zero, torchrun SIGTERMs the others; a rank still tearing
        down would die of it (Python restores the default action while finalising), and its
        exit status would read -15 instead of the documented code.
        """
        for sig in self.signals:
            signal.signal(sig, signal.SIG_IGN)

    def agreed(self, group: dist.ProcessGroup | None) -> int:
        """Signal number any rank received (max over ranks), 0 when none did."""
        return self.result(self.start(group))

    def start(self, group: dist.ProcessGroup | None) -> tuple[Any, torch.Tensor]:
        """Begin agreeing on the stop flag without waiting for the other ranks."""
        flag = torch.tensor([self.signum], dtype=torch.int32)
        return dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=group, async_op=True), flag

    @staticmethod
    def result(pending: tuple[Any, torch.Tensor] | None) -> int:
        """The agreed signal number of a `start()`ed reduction (0 for none pending)."""
        if pending is None:
            return 0
        work, flag = pending
        work.wait()
        return int(flag.item())


def lr_at(step: int, base_lr: float, total_steps: int) -> float:
    """Learning rate for 0-based optimizer step ``step``: linear warm-up over 5% of the steps,
    then cosine decay. A pure function of the step, so resuming needs no scheduler state."""
    warmup = max(1, total_steps // 20)
    if step < warmup:
        return base_lr * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total_steps - warmup))
    return base_lr * 0.5 * (1.0 + math.cos(math.pi * progress))


def _rng_state(device: torch.device) -> dict[str, Any]:
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
        "python": random.getstate(),
    }


def _set_rng_state(state: dict[str, Any], device: torch.device) -> None:
    torch.set_rng_state(state["torch"])
    if device.type == "cuda" and state.get("cuda") is not None:
        torch.cuda.set_rng_state(state["cuda"], device)
    random.setstate(state["python"])


def _text(value: Any) -> str:
    """How a field appears in a ``key=value`` line: floats with 4 decimals, ``nan`` if unknown."""
    if isinstance(value, float):
        return f"{value:.4f}" if math.isfinite(value) else "nan"
    return str(value)


def key_values(fields: dict[str, Any]) -> str:
    """``k=v k=v`` with floats at 4 decimals, except the already-rounded time/throughput."""
    return " ".join(f"{k}={v if k in ('time_s', 'images_per_s') else _text(v)}" for k, v in fields.items())


class Reporter:
    """Rank 0's output: the ``fabrikit-train:`` lines and the same records in metrics.jsonl."""

    def __init__(self, enabled: bool, output_dir: Path | None) -> None:
        self.enabled = enabled
        self.metrics = output_dir / "metrics.jsonl" if (enabled and output_dir) else None

    def line(self, text: str) -> None:
        if self.enabled:
            print(f"{PREFIX} {text}", flush=True)

    def record(self, event: str, fields: dict[str, Any], text: str | None = None) -> None:
        """Print ``event k=v ...`` (or ``text``) and append the record to metrics.jsonl."""
        if not self.enabled:
            return
        self.line(text if text is not None else f"{event} {key_values(fields)}")
        if self.metrics:
            clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in fields.items()}
            with self.metrics.open("a") as f:
                f.write(json.dumps({"event": event, "time": round(time.time(), 3), **clean}) + "\n")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=32, help="per rank")
    p.add_argument("--lr", type=float, default=0.1, help="peak learning rate (SGD, Nesterov momentum 0.9)")
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--synthetic-size", type=int, default=512, help="images in the synthetic data set")
    p.add_argument("--data-dir", default=None, help="CIFAR-10 python-format directory (cifar-10-batches-py) instead of synthetic data")
    p.add_argument("--width", type=int, default=16, help="channels of the first stage (64 = ResNet-18)")
    p.add_argument("--blocks", default="2,2,2,2", help="basic blocks per stage")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=None, help="DataLoader workers (default 0 on CPU, 2 on CUDA)")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = a launcher's OMP_NUM_THREADS, else cpus // local_world_size; see jobenv)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--max-steps", type=int, default=0, help="stop after this many global steps in total (0 = no limit)")
    p.add_argument("--checkpoint-dir", default=None, help="write checkpoints here (default: none)")
    p.add_argument("--checkpoint-every", type=int, default=0, help="also checkpoint every N optimizer steps (0 = epoch ends only)")
    p.add_argument("--keep-checkpoints", type=int, default=3, help="complete checkpoints to keep (0 = all)")
    p.add_argument("--resume", action="store_true", help="continue from the newest valid checkpoint in --checkpoint-dir")
    p.add_argument("--output-dir", default=None, help="metrics.jsonl goes here (default $FABRIKIT_RUN_DIR, else cwd)")
    p.add_argument("--log-every-step", action="store_true", help="print 'step=N loss=L' for every optimizer step")
    p.add_argument("--signal-exit-code", type=int, default=75, help="exit status after stopping on a signal")
    p.add_argument("--step-sleep", type=float, default=0.0, help="test aid: sleep this long after each step so signals land mid-run")
    args = p.parse_args(argv)
    try:
        args.blocks = tuple(int(b) for b in args.blocks.split(","))
    except ValueError:
        p.error(f"--blocks must be comma-separated integers, got {args.blocks!r}")
    if args.resume and not args.checkpoint_dir:
        p.error("--resume needs --checkpoint-dir")
    if args.batch_size < 1 or args.epochs < 0 or args.width < 1 or not args.blocks:
        p.error("--batch-size and --width must be >= 1, --epochs >= 0, --blocks non-empty")
    return args


def _resume(
    args: argparse.Namespace,
    job: JobEnvironment,
    groups: ProcessGroups,
    report: Reporter,
    steps_per_epoch: int,
) -> tuple[dict[str, Any] | None, Position]:
    """Pick the checkpoint on rank 0, share its name, load it on every rank.

    Only rank 0 verifies sha256 (one full read); the others load the chosen file, which must
    therefore be on a file system all nodes see (it has to be anyway for a requeued job).
    """
    choice: CheckpointChoice | None = None
    if job.is_main:
        choice = find_checkpoint(Path(args.checkpoint_dir))
        why = "".join(f"; skipped {name}: {reason}" for name, reason in choice.skipped)
        if choice.path is not None and choice.state is not None:
            report.line(f"resuming from {choice.path.name} (step {choice.state['global_step']}){why}")
        else:
            report.line(f"no usable checkpoint in {args.checkpoint_dir}, starting fresh{why}")
    shared = [str(choice.path) if choice and choice.path else None]
    dist.broadcast_object_list(shared, src=0, group=groups.control)
    if shared[0] is None:
        return None, Position()
    state = choice.state if choice is not None and choice.state is not None else load_checkpoint_file(Path(shared[0]))
    global_batch = args.batch_size * job.world_size
    if (state["batch_size"], state["world_size"]) == (args.batch_size, job.world_size):
        batch = state["batch"]
    else:
        # Another world size orders the epoch differently, so exact continuation is impossible;
        # skip as many batches as cover the samples already seen in this epoch.
        batch = math.ceil(state["samples_in_epoch"] / global_batch)
        report.line(
            f"warning: checkpoint was written with world_size={state['world_size']} batch_size={state['batch_size']}; "
            f"continuing epoch {state['epoch']} at batch {batch} (sample order differs)"
        )
    position = Position(epoch=state["epoch"], batch=batch, global_step=state["global_step"])
    if position.batch >= steps_per_epoch:
        position = Position(epoch=position.epoch + 1, batch=0, global_step=position.global_step)
    return state, position


def train(args: argparse.Namespace) -> int:
    """Run the job; returns the process exit status (see module docstring)."""
    stop = StopRequest()
    job = JobEnvironment.from_env()
    device = job.choose_device(args.device)
    on_cuda = device.type == Device.CUDA.value
    threads = job.configure_threads(args.threads)
    groups = job.init_process_group(device)
    output_dir = default_output_dir(args.output_dir) if job.is_main else None
    report = Reporter(job.is_main, output_dir)
    ckpt_dir = Path(args.checkpoint_dir) if args.checkpoint_dir else None
    if ckpt_dir is not None and job.is_main:
        ckpt_dir.mkdir(parents=True, exist_ok=True)

    data = load_cifar10(args.data_dir) if args.data_dir else synthetic_cifar(args.synthetic_size, args.seed)
    workers = args.workers if args.workers is not None else (2 if on_cuda else 0)
    loader, sampler = make_loader(data, job, args.batch_size, args.seed, workers, pin_memory=on_cuda)
    steps_per_epoch = len(sampler.inner) // args.batch_size
    if steps_per_epoch == 0:
        raise SystemExit(f"{PREFIX} data set of {len(data.labels)} images gives no full batch of {args.batch_size} per rank on {job.world_size} ranks")
    total_steps = args.epochs * steps_per_epoch  # the LR schedule's length, independent of --max-steps
    end_step = min(total_steps, args.max_steps) if args.max_steps > 0 else total_steps

    torch.manual_seed(args.seed)  # same initial weights everywhere (DDP also broadcasts rank 0's)
    model = CifarResNet(args.blocks, args.width).to(device)
    if on_cuda:
        model = model.to(memory_format=torch.channels_last)  # NHWC: what tensor cores want for convs
        torch.backends.cudnn.benchmark = True
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, nesterov=True, weight_decay=args.weight_decay)
    # Per-rank random streams, so anything stochastic is not identical on all ranks; a
    # checkpoint written by the same world size restores each rank's own stream instead.
    torch.manual_seed(args.seed + job.rank)
    random.seed(args.seed + job.rank)

    state, pos = _resume(args, job, groups, report, steps_per_epoch) if args.resume else (None, Position())
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        if len(state["rng"]) == job.world_size:
            _set_rng_state(state["rng"][job.rank], device)
    ddp = DDP(model, device_ids=[device.index] if on_cuda else None)

    scale = 1.0 / (torch.tensor(CIFAR_STD, device=device).view(1, 3, 1, 1) * 255)
    shift = torch.tensor(CIFAR_MEAN, device=device).view(1, 3, 1, 1) * 255
    start_step = pos.global_step
    report.record(
        "start",
        {"nodes": job.nnodes, "procs_per_node": job.local_world_size, "world_size": job.world_size,
         "device": device.type, "backend": groups.backend.value, "start_step": start_step},
    )
    report.line(
        f"config data={'cifar10:' + args.data_dir if args.data_dir else f'synthetic:{args.synthetic_size}'} "
        f"blocks={','.join(map(str, args.blocks))} width={args.width} batch_size={args.batch_size} lr={args.lr} "
        f"epochs={args.epochs} steps_per_epoch={steps_per_epoch} threads={threads} workers={workers}"
    )

    def checkpoint() -> None:
        """Collective: every rank contributes its RNG state, rank 0 writes."""
        rng_states: list[Any] = [None] * job.world_size
        dist.all_gather_object(rng_states, _rng_state(device), group=groups.control)
        if job.is_main and ckpt_dir is not None:
            ckpt = {
                "format": CHECKPOINT_FORMAT,
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "epoch": pos.epoch,
                "batch": pos.batch,
                "global_step": pos.global_step,
                "samples_in_epoch": pos.batch * args.batch_size * job.world_size,
                "batch_size": args.batch_size,
                "world_size": job.world_size,
                "rng": rng_states,
                "config": {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(args).items()},
            }
            path = save_checkpoint(ckpt_dir, pos.global_step, ckpt, args.keep_checkpoints)
            report.record("checkpoint", {"step": pos.global_step, "path": str(path)})

    run_sums = torch.zeros(3, dtype=torch.float64)  # loss sum, correct, images over this run
    final_loss = final_acc = float("nan")
    run_time = 0.0
    stopped_by = 0
    pending_stop = None  # the stop-flag reduction started after the previous step
    while pos.epoch < args.epochs and pos.global_step < end_step and not stopped_by:
        epoch = pos.epoch
        sampler.set_epoch(epoch, skip=pos.batch * args.batch_size)
        ddp.train()
        first_step = pos.global_step + 1
        sums = torch.zeros(3, dtype=torch.float64, device=device)  # stays on the device: no per-step sync
        t0 = time.perf_counter()
        for images, labels in loader:
            for group in optimizer.param_groups:
                group["lr"] = lr_at(pos.global_step, args.lr, total_steps)
            x = (images.to(device, non_blocking=True).float() - shift) * scale
            labels = labels.to(device, non_blocking=True)
            if on_cuda:
                x = x.contiguous(memory_format=torch.channels_last)
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=on_cuda):
                logits = ddp(x)
                loss = F.cross_entropy(logits, labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            pos.batch += 1
            pos.global_step += 1
            with torch.no_grad():
                sums[0] += loss.detach() * labels.shape[0]
                sums[1] += (logits.argmax(1) == labels).sum()
                sums[2] += labels.shape[0]
            if args.log_every_step:
                report.line(f"step={pos.global_step} loss={loss.item():.6f}")
            if args.step_sleep > 0:
                time.sleep(args.step_sleep)
            # Ranks agree on stop requests one step late: the reduction started here runs
            # while the next step computes, so no step waits for it (a blocking one per step
            # cost ~10% of CPU throughput). Each rank starts exactly one per step and waits
            # for it at the next, so the collectives stay in the same order on every rank.
            previous, pending_stop = pending_stop, stop.start(groups.control)
            stopped_by = stop.result(previous)
            if pos.global_step >= end_step or (pos.batch >= steps_per_epoch and pos.epoch + 1 >= args.epochs):
                # The last step: nothing follows to hide the reduction behind. The run is
                # complete, so a signal that arrived during it leaves nothing to resume.
                stop.result(pending_stop)
                pending_stop, stopped_by = None, 0
            epoch_end = pos.batch >= steps_per_epoch
            if epoch_end:
                pos.epoch, pos.batch = epoch + 1, 0
            finished = pos.global_step >= end_step
            due = args.checkpoint_every > 0 and pos.global_step % args.checkpoint_every == 0
            if ckpt_dir is not None and (due or epoch_end or finished or stopped_by):
                checkpoint()
            if epoch_end or finished or stopped_by:
                break
        # The reduction doubles as the epoch's sync point (and CUDA sync) for the timing.
        dist.all_reduce(sums)
        elapsed = time.perf_counter() - t0
        run_time += elapsed
        sums = sums.cpu()
        run_sums += sums
        loss_sum, correct, count = sums.tolist()
        if count > 0:
            final_loss, final_acc = loss_sum / count, correct / count
            fields = {"epoch": epoch, "steps": f"{first_step}-{pos.global_step}", "time_s": round(elapsed, 3),
                      "images_per_s": round(count / elapsed, 1), "loss": final_loss, "acc": final_acc}
            report.record("epoch", fields, text=key_values(fields))

    stop.result(pending_stop)  # every rank has one outstanding after a stop: finish it alike
    if stopped_by:
        name = signal.Signals(stopped_by).name
        saved = "checkpoint saved" if ckpt_dir is not None else "no checkpoint (no --checkpoint-dir)"
        report.record("stopped", {"signal": name, "step": pos.global_step, "checkpoint": ckpt_dir is not None},
                      text=f"stopping on signal {name} at step {pos.global_step}, {saved}")
    images = int(run_sums[2].item())
    report.record(
        "summary",
        {"nodes": job.nnodes, "procs_per_node": job.local_world_size, "world_size": job.world_size,
         "epochs": pos.epoch, "global_steps": pos.global_step, "steps_this_run": pos.global_step - start_step,
         "images": images, "time_s": round(run_time, 3),
         "images_per_s": round(images / run_time, 1) if run_time > 0 else 0.0,
         "final_loss": final_loss, "final_acc": final_acc},
    )
    # Nobody exits before rank 0 has written: torchrun tears down all workers as soon as one
    # exits non-zero, which would kill rank 0 in the middle of the checkpoint.
    dist.barrier(group=groups.control)
    stop.ignore_from_now()
    # The groups must really be gone, their threads joined, before the interpreter exits (see
    # ProcessGroups.destroy): drop what still holds them first.
    del ddp
    pending_stop = None
    groups.destroy()
    return args.signal_exit_code if stopped_by else 0


def main(argv: Sequence[str] | None = None) -> int:
    return train(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
