#!/usr/bin/env python3
"""fabrikit's default job: DDP image classification with a CIFAR-style ResNet.

Run it as ``torchrun [--nnodes N --nproc-per-node P ...] jobs/train_ddp.py [options]``; plain
``python jobs/train_ddp.py`` trains as a world of one. One process per GPU with NCCL, bf16
autocast and channels_last when CUDA is visible; CPU ranks with gloo otherwise.

Defaults depend on the device (``--help`` lists all; site profiles override them in
``job.args``):

- CUDA: the site guides' benchmark. ResNet-18 (``--blocks 2,2,2,2 --width 64``) on 50,000
  synthetic 32x32 images (CIFAR-10's training-set size) or real CIFAR-10 with ``--data-dir``
  (``cifar-10-batches-py``: ``data_batch_1..5``; with ``test_batch`` the trained model's
  test-set accuracy is reported), 256 images per GPU, 30 epochs, random crop + flip.
- CPU: 2 epochs over 512 synthetic images, batch 32 per rank, ``--width 16`` (about 0.7 M
  parameters, 1/16 of ResNet-18's compute), no augmentation: a 2-node x 1-process run on a
  2-core machine is done in seconds.

Synthetic images are deterministic per ``--seed``, with a class-dependent pattern so the loss
falls.

Input pipeline: the whole uint8 data set is held on the compute device (CIFAR-10: 150 MiB).
Each epoch's order is DistributedSampler's (same partition and order), the augmentation is
a pure function of (seed, epoch, image), and batches are gathered, cropped/flipped,
normalised and laid out (bf16 channels_last on CUDA) on the device a chunk at a time. A
training step copies nothing from the host and waits for nothing on it: no loader
processes, no pinned-memory thread, no per-step host sync (the loss is read only with
``--log-every-step``). DDP is set up to launch few kernels (see :func:`wrap_ddp`), and a
world of one is not wrapped at all (see :func:`distributed_model`).

Checkpoints (``--checkpoint-dir``): every ``--checkpoint-every`` optimizer steps, at the end
of every ``--checkpoint-epochs``-th epoch, after the last step and when stopping, rank 0
writes ``ckpt-<step:08d>.pt`` atomically (temporary name, fsync, rename, fsync of the
directory) and then a completion marker ``ckpt-<step:08d>.done`` holding the checkpoint's
size and sha256. ``--resume`` loads the newest checkpoint whose marker exists and matches the
file, and continues at the exact next batch of the same epoch order (already-done batches
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
  fabrikit-train: eval images=<n> loss=<l> acc=<a> time_s=<t>   (test set, when --data-dir has test_batch)
  fabrikit-train: summary nodes=<n> procs_per_node=<p> world_size=<W> epochs=<E> global_steps=<g> steps_this_run=<k> images=<i> time_s=<t> images_per_s=<x> final_loss=<l> final_acc=<a> steady_images_per_s=<y> checkpoint_s=<c>

plus, with ``--resume``, ``fabrikit-train: resuming from ckpt-<step>.pt (step <N>)[; skipped
<file>: <reason>]...`` or ``fabrikit-train: no usable checkpoint in <dir>, starting fresh``.
Step numbers are global, 1-based optimizer steps; an epoch cut short by a signal or
``--max-steps`` still gets its ``epoch=`` line. Epoch loss/acc are training-batch averages
over all ranks; ``epochs`` in the summary counts completed epochs; ``time_s`` counts the
training loop (start-up, torch import, checkpoint writes and the evaluation not; the writes
are ``checkpoint_s``); ``steady_images_per_s`` leaves out this run's first epoch, which pays
for warm-up (cudnn autotuning, allocator growth, DDP's bucket rebuild), ``nan`` with fewer
than two epochs. The same records go to ``<output-dir>/metrics.jsonl`` (appended across
runs, one JSON object per line).
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
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

from jobenv import Device, JobEnvironment, ProcessGroups, default_output_dir

PREFIX = "fabrikit-train:"
NUM_CLASSES = 10
CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)
AUGMENT_PAD = 4  # RandomCrop(32, padding=4), as the CIFAR tutorials augment
_AUGMENT_STREAM = 0x5EED_A06  # keeps the augmentation's random stream apart from the epoch order's
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


def synthetic_cifar(size: int, seed: int, chunk: int = 8192) -> ImageSet:
    """CIFAR-shaped data that is the same on every rank for a given ``seed``.

    Each class has a smooth random colour pattern (8x8 upsampled); an image is its class
    pattern (30%) plus per-pixel noise (70%), so the task is learnable but not trivial and the
    loss visibly falls within a few hundred images.
    """
    gen = torch.Generator().manual_seed(seed)
    patterns = F.interpolate(torch.rand(NUM_CLASSES, 3, 8, 8, generator=gen), size=32, mode="bilinear", align_corners=False)
    labels = torch.randint(0, NUM_CLASSES, (size,), generator=gen)
    images = torch.empty(size, 3, 32, 32, dtype=torch.uint8)
    for first in range(0, size, chunk):  # float temporaries of one chunk, not of 50,000 images
        last = min(size, first + chunk)
        noise = torch.rand(last - first, 3, 32, 32, generator=gen)
        images[first:last] = (0.3 * patterns[labels[first:last]] + 0.7 * noise).mul(255).round().to(torch.uint8)
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


def epoch_order(size: int, world_size: int, rank: int, epoch: int, seed: int) -> torch.Tensor:
    """This rank's image indices for ``epoch``, in training order (int64, on the CPU).

    Exactly what ``DistributedSampler(shuffle=True, drop_last=False)`` yields: a permutation
    seeded with ``seed + epoch``, padded by wrapping around to a multiple of ``world_size``,
    then every ``world_size``-th index from ``rank``. Having the whole epoch as one tensor
    lets the device gather its images without a loader; keeping the sampler's order keeps
    the partition (every image once per epoch over all ranks) and makes ``--resume``'s
    "continue at batch k" mean the same batches as before.
    """
    gen = torch.Generator()
    gen.manual_seed(seed + epoch)
    order = torch.randperm(size, generator=gen)
    total = math.ceil(size / world_size) * world_size
    if total > size:
        order = torch.cat([order, order.repeat(math.ceil((total - size) / size))[: total - size]])
    return order[rank:total:world_size]


def augment_params(size: int, epoch: int, seed: int, pad: int = AUGMENT_PAD) -> tuple[torch.Tensor, torch.Tensor]:
    """Crop offsets ``(size, 2)`` in ``[0, 2 * pad]`` and flip flags ``(size,)`` for every
    image of the data set in ``epoch`` (on the CPU).

    A pure function of (seed, epoch, image): a resumed epoch augments each image exactly as
    the uninterrupted run does, on any world size, with no random state to checkpoint.
    """
    gen = torch.Generator()
    gen.manual_seed((seed + epoch) ^ _AUGMENT_STREAM)
    offsets = torch.randint(0, 2 * pad + 1, (size, 2), generator=gen)
    flips = torch.rand(size, generator=gen) < 0.5
    return offsets, flips


def crop_flip(images: torch.Tensor, offsets: torch.Tensor, flips: torch.Tensor, pad: int = AUGMENT_PAD) -> torch.Tensor:
    """The CIFAR augmentation (``RandomCrop(32, padding=pad)`` + ``RandomHorizontalFlip``)
    for a whole batch in one gather, on whatever device ``images`` is on.

    ``images``: uint8 ``(B, C, H, W)``; image ``b`` is cut from the zero-padded image at row
    ``offsets[b, 0]``, column ``offsets[b, 1]``, mirrored when ``flips[b]``. The result is
    ``(B, C, H, W)`` laid out channels_last (the gather produces NHWC order), as the model
    wants it on CUDA.
    """
    b, _, h, w = images.shape
    padded = F.pad(images, (pad, pad, pad, pad))
    rows = offsets[:, :1] + torch.arange(h, device=images.device)  # (B, H)
    cols = torch.arange(w, device=images.device).expand(b, w)
    cols = torch.where(flips[:, None], w - 1 - cols, cols) + offsets[:, 1:]  # (B, W)
    batch = torch.arange(b, device=images.device)[:, None, None]
    # Advanced indices around a slice: the indexed dims come first, so this is (B, H, W, C).
    return padded[batch, :, rows[:, :, None], cols[:, None, :]].permute(0, 3, 1, 2)


@dataclass(frozen=True)
class InputFormat:
    """dtype and memory layout of the model's input batches."""

    dtype: torch.dtype
    memory_format: torch.memory_format

    @classmethod
    def for_device(cls, device: torch.device) -> InputFormat:
        """CUDA: bf16 (autocast casts the first convolution's input to it anyway) and
        channels_last like the model; CPU: float32 in the default layout, as the model."""
        if device.type == Device.CUDA.value:
            return cls(torch.bfloat16, torch.channels_last)
        return cls(torch.float32, torch.contiguous_format)

    def autocast(self, device: torch.device) -> torch.autocast:
        """bf16 autocast around the forward pass when the input is bf16, else a no-op."""
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=self.dtype == torch.bfloat16)


class Normaliser:
    """uint8 images -> ``(x / 255 - mean) / std`` in the model's :class:`InputFormat`.

    The constants are put on the device once: creating them per batch would copy from
    pageable host memory each time.
    """

    def __init__(self, device: torch.device, fmt: InputFormat) -> None:
        self.fmt = fmt
        self.shift = torch.tensor(CIFAR_MEAN, device=device).view(1, 3, 1, 1) * 255
        self.scale = 1.0 / (torch.tensor(CIFAR_STD, device=device).view(1, 3, 1, 1) * 255)

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        x = (images.float() - self.shift) * self.scale
        return x.to(dtype=self.fmt.dtype, memory_format=self.fmt.memory_format)


class DeviceBatches:
    """The training set held on the compute device, and this rank's batches of an epoch.

    The whole uint8 set lives where the model runs (CIFAR-10: 150 MiB): per epoch the rank's
    order (and augmentation) goes to the device once; after that a step copies nothing
    between host and device, waits for no loader process and makes no host sync. Images are
    gathered, augmented, normalised and laid out channels_last ``chunk_images`` at a time,
    and each step takes a slice (a view) of the prepared chunk, so the input costs a few
    kernel launches per chunk instead of per step.
    """

    def __init__(self, data: ImageSet, device: torch.device, *, world_size: int, rank: int, batch_size: int,
                 seed: int, augment: bool, fmt: InputFormat, chunk_images: int = 8192) -> None:
        self.images = data.images.to(device)
        self.labels = data.labels.to(device)
        self.size = int(data.labels.shape[0])
        self.world_size, self.rank, self.batch_size, self.seed = world_size, rank, batch_size, seed
        self.augment = augment
        self.normalise = Normaliser(device, fmt)
        self.batches_per_chunk = max(1, chunk_images // batch_size)
        self.steps_per_epoch = math.ceil(self.size / world_size) // batch_size

    def epoch(self, epoch: int, start_batch: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """``(images, labels)`` of batches ``start_batch..steps_per_epoch-1`` of ``epoch``."""
        b, steps = self.batch_size, self.steps_per_epoch
        order = epoch_order(self.size, self.world_size, self.rank, epoch, self.seed)[: steps * b]
        if self.augment:
            offsets, flips = augment_params(self.size, epoch, self.seed)
            offsets, flips = offsets[order].to(self.images.device), flips[order].to(self.images.device)
        order = order.to(self.images.device)
        for first in range(start_batch, steps, self.batches_per_chunk):
            last = min(steps, first + self.batches_per_chunk)
            idx = order[first * b:last * b]
            images = self.images.index_select(0, idx)
            if self.augment:
                images = crop_flip(images, offsets[first * b:last * b], flips[first * b:last * b])
            x, y = self.normalise(images), self.labels.index_select(0, idx)
            for k in range(last - first):
                yield x[k * b:(k + 1) * b], y[k * b:(k + 1) * b]


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


_ROUNDED = frozenset({"time_s", "images_per_s", "steady_images_per_s", "checkpoint_s"})  # rounded where computed


def _text(value: Any) -> str:
    """How a field appears in a ``key=value`` line: floats with 4 decimals, ``nan`` if unknown."""
    if isinstance(value, float):
        return f"{value:.4f}" if math.isfinite(value) else "nan"
    return str(value)


def key_values(fields: dict[str, Any]) -> str:
    """``k=v k=v`` with floats at 4 decimals, except the already-rounded time/throughput."""
    return " ".join(f"{k}={v if k in _ROUNDED else _text(v)}" for k, v in fields.items())


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


@dataclass(frozen=True)
class Workload:
    """The defaults that depend on the device the job runs on.

    CPU: sized so that a 2-node x 1-process run on a 2-core CI machine is done in seconds.

    CUDA: the site guides' benchmark, ResNet-18 (width 64) on CIFAR-10-sized data (50,000
    32x32 images) at 256 images per GPU with the usual crop+flip augmentation, so that
    ``fabrikit report`` reproduces their images/s, speed-up and efficiency tables. 30 epochs:
    the short warm-up + cosine schedule on which a CIFAR ResNet-18 reaches a meaningful test
    accuracy, and 29 epochs after the warm-up one to average over, in minutes, not hours:
    1.5 M images are about a minute of training on one H100 at the eager ceiling measured
    for issue 13 (29,600 images/s), about 5 min at the 5,100 images/s seed 002 reports for
    one GH200, and under 30 s on 8 GPUs at its 63,000 images/s. A checkpoint every 5 epochs
    (and after the last step, and on a stop signal): an epoch is seconds long on GPUs, and a
    checkpoint (~90 MB with the momentum, fsync'd and hashed) each time would cost wall time
    out of proportion to the work it protects.
    """

    epochs: int
    batch_size: int
    synthetic_size: int
    width: int
    augment: bool
    checkpoint_epochs: int


WORKLOADS = {
    "cpu": Workload(epochs=2, batch_size=32, synthetic_size=512, width=16, augment=False, checkpoint_epochs=1),
    "cuda": Workload(epochs=30, batch_size=256, synthetic_size=50_000, width=64, augment=True, checkpoint_epochs=5),
}


def _per_device(field_name: str) -> str:
    """``--help`` text for a device-dependent default: ``2 on CPU, 30 on CUDA``."""
    return ", ".join(f"{getattr(w, field_name)} on {name.upper()}" for name, w in WORKLOADS.items())


def apply_workload(args: argparse.Namespace, device_type: str) -> argparse.Namespace:
    """Fill the options left unset with the device's :data:`WORKLOADS` defaults."""
    workload = WORKLOADS[device_type]
    for name in ("epochs", "batch_size", "synthetic_size", "width", "augment", "checkpoint_epochs"):
        if getattr(args, name) is None:
            setattr(args, name, getattr(workload, name))
    return args


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows defaults, except the device-dependent ones (None here), whose help says them."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        return action.help if action.default is None else super()._get_help_string(action)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=_HelpFormatter)
    p.add_argument("--epochs", type=int, default=None, help=f"default: {_per_device('epochs')}")
    p.add_argument("--batch-size", type=int, default=None, help=f"per rank (default: {_per_device('batch_size')})")
    p.add_argument("--lr", type=float, default=0.1, help="peak learning rate (SGD, Nesterov momentum 0.9)")
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--synthetic-size", type=int, default=None,
                   help=f"images in the synthetic data set (default: {_per_device('synthetic_size')})")
    p.add_argument("--data-dir", default=None, help="CIFAR-10 python-format directory (cifar-10-batches-py) instead of synthetic data; "
                   "with its test_batch the trained model's test-set accuracy is reported")
    p.add_argument("--width", type=int, default=None,
                   help=f"channels of the first stage, 64 = ResNet-18 (default: {_per_device('width')})")
    p.add_argument("--blocks", default="2,2,2,2", help="basic blocks per stage")
    p.add_argument("--augment", action=argparse.BooleanOptionalAction, default=None,
                   help=f"random crop (padding {AUGMENT_PAD}) and horizontal flip, on the device "
                        f"(default: {_per_device('augment').replace('True', 'on').replace('False', 'off')})")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=None, help=argparse.SUPPRESS)  # accepted, unused: no loader processes
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = a launcher's OMP_NUM_THREADS, else cpus // local_world_size; see jobenv)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--max-steps", type=int, default=0, help="stop after this many global steps in total (0 = no limit)")
    p.add_argument("--checkpoint-dir", default=None, help="write checkpoints here (default: none)")
    p.add_argument("--checkpoint-every", type=int, default=0, help="also checkpoint every N optimizer steps (0 = epoch ends only)")
    p.add_argument("--checkpoint-epochs", type=int, default=None,
                   help=f"checkpoint at the end of every N-th epoch; always after the last step and on a stop signal "
                        f"(default: {_per_device('checkpoint_epochs')})")
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
    at_least = {"batch_size": 1, "width": 1, "epochs": 0, "synthetic_size": 1, "checkpoint_epochs": 1}
    for name, low in at_least.items():
        value = getattr(args, name)
        if value is not None and value < low:
            p.error(f"--{name.replace('_', '-')} must be >= {low}, got {value}")
    if not args.blocks:
        p.error("--blocks must not be empty")
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


def make_optimizer(model: nn.Module, args: argparse.Namespace) -> torch.optim.Optimizer:
    """SGD with Nesterov momentum, in torch's default (foreach) implementation.

    Not ``fused=True``: it saves a few launches per step, but the fused kernel walks
    parameter, gradient and momentum as flat memory, and torch 2.13's CPU kernel silently
    computes wrong updates when their layouts differ (a channels_last parameter with a
    contiguous momentum buffer from a CPU-written checkpoint, say); foreach handles any
    layout."""
    return torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, nesterov=True, weight_decay=args.weight_decay)


def wrap_ddp(model: nn.Module, device: torch.device) -> DDP:
    """DDP without the per-step work this model does not need.

    - ``gradient_as_bucket_view``: gradients live in the all-reduce buckets, no copy back;
    - ``batched_grad_copy`` (torch >= 2.13): the copies into the buckets are one foreach
      copy per bucket instead of one kernel per parameter;
    - no buffer broadcast before every forward (``forward_sync_buffers=False``, before 2.13
      ``broadcast_buffers=False``): BatchNorm trains on batch statistics, so the running
      statistics only matter for evaluation, which uses rank 0's (they are checkpointed).
    """
    available = inspect.signature(DDP.__init__).parameters
    options: dict[str, Any] = {"gradient_as_bucket_view": True}
    if "batched_grad_copy" in available:
        options["batched_grad_copy"] = True
    options["forward_sync_buffers" if "forward_sync_buffers" in available else "broadcast_buffers"] = False
    return DDP(model, device_ids=[device.index] if device.type == Device.CUDA.value else None, **options)


def distributed_model(model: nn.Module, device: torch.device, world_size: int) -> nn.Module:
    """The module the training loop calls: DDP over ``model`` when there are gradients to
    average, ``model`` itself in a world of one.

    One rank has nothing to average, yet DDP would still run its autograd hooks and an NCCL
    call per bucket every step, and keep the host from running ahead of the GPU: on one H100
    (torch 2.11, ResNet-18 width 64, 256 images) the step took 13.0 ms with DDP and 9.8 ms
    without, the bare train step's time (``benchmarks/train_step_breakdown.py``, variants
    ``full`` and ``-ddp``, median of 3). Checkpoints hold ``model``'s state either way, so a
    run can resume at another world size."""
    return wrap_ddp(model, device) if world_size > 1 else model


def _synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA runs ahead of the host)."""
    if device.type == Device.CUDA.value:
        torch.cuda.synchronize(device)


def evaluate(model: nn.Module, data: ImageSet, device: torch.device, batch_size: int, fmt: InputFormat) -> dict[str, Any]:
    """Test-set loss and accuracy of ``model`` (rank 0's weights and BatchNorm statistics,
    i.e. what the last checkpoint holds), in eval mode."""
    started = time.perf_counter()
    normalise = Normaliser(device, fmt)
    images, labels = data.images.to(device), data.labels.to(device)
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    correct = torch.zeros((), dtype=torch.int64, device=device)
    model.eval()
    with torch.no_grad(), fmt.autocast(device):
        for first in range(0, len(labels), batch_size):
            y = labels[first:first + batch_size]
            logits = model(normalise(images[first:first + batch_size]))
            loss_sum += F.cross_entropy(logits.float(), y, reduction="sum")
            correct += (logits.argmax(1) == y).sum()
    model.train()
    count = len(labels)
    return {"images": count, "loss": loss_sum.item() / count, "acc": correct.item() / count,
            "time_s": round(time.perf_counter() - started, 3)}


def _test_set(args: argparse.Namespace) -> ImageSet | None:
    """CIFAR-10's ``test_batch`` when ``--data-dir`` has one (the synthetic set has no test set)."""
    if not args.data_dir:
        return None
    try:
        return load_cifar10(args.data_dir, train=False)
    except FileNotFoundError:
        return None


def train(args: argparse.Namespace) -> int:
    """Run the job; returns the process exit status (see module docstring)."""
    stop = StopRequest()
    job = JobEnvironment.from_env()
    job.bind_cpus()  # before any thread starts: the profile's per-GPU CPU mask, if any
    device = job.choose_device(args.device)
    on_cuda = device.type == Device.CUDA.value
    args = apply_workload(args, device.type)
    threads = job.configure_threads(args.threads)
    groups = job.init_process_group(device)
    output_dir = default_output_dir(args.output_dir) if job.is_main else None
    report = Reporter(job.is_main, output_dir)
    ckpt_dir = Path(args.checkpoint_dir) if args.checkpoint_dir else None
    if ckpt_dir is not None and job.is_main:
        ckpt_dir.mkdir(parents=True, exist_ok=True)

    data = load_cifar10(args.data_dir) if args.data_dir else synthetic_cifar(args.synthetic_size, args.seed)
    test_data = _test_set(args) if job.is_main else None
    fmt = InputFormat.for_device(device)
    batches = DeviceBatches(data, device, world_size=job.world_size, rank=job.rank, batch_size=args.batch_size,
                            seed=args.seed, augment=args.augment, fmt=fmt)
    steps_per_epoch = batches.steps_per_epoch
    if steps_per_epoch == 0:
        raise SystemExit(f"{PREFIX} data set of {len(data.labels)} images gives no full batch of {args.batch_size} per rank on {job.world_size} ranks")
    total_steps = args.epochs * steps_per_epoch  # the LR schedule's length, independent of --max-steps
    end_step = min(total_steps, args.max_steps) if args.max_steps > 0 else total_steps

    torch.manual_seed(args.seed)  # same initial weights everywhere (DDP also broadcasts rank 0's)
    model = CifarResNet(args.blocks, args.width).to(device)
    if on_cuda:
        model = model.to(memory_format=torch.channels_last)  # NHWC: what tensor cores want for convs
        torch.backends.cudnn.benchmark = True
    optimizer = make_optimizer(model, args)
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
    ddp = distributed_model(model, device, job.world_size)

    start_step = pos.global_step
    report.record(
        "start",
        {"nodes": job.nnodes, "procs_per_node": job.local_world_size, "world_size": job.world_size,
         "device": device.type, "backend": groups.backend.value, "start_step": start_step},
    )
    report.line(
        f"config data={'cifar10:' + args.data_dir if args.data_dir else f'synthetic:{args.synthetic_size}'} "
        f"blocks={','.join(map(str, args.blocks))} width={args.width} batch_size={args.batch_size} lr={args.lr} "
        f"epochs={args.epochs} steps_per_epoch={steps_per_epoch} threads={threads} "
        f"augment={'crop+flip' if args.augment else 'none'} test_set={'test_batch' if test_data is not None else 'none'}"
    )

    def checkpoint() -> float:
        """Collective: every rank contributes its RNG state, rank 0 writes. Returns the
        seconds it took, measured after the device finished the steps before it, so that
        the caller can leave checkpoint writes out of the training throughput."""
        _synchronize(device)
        started = time.perf_counter()
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
        return time.perf_counter() - started

    run_images = 0
    final_loss = final_acc = float("nan")
    run_time = checkpoint_time = 0.0
    timed_epochs, steady_images, steady_time = 0, 0, 0.0  # steady: after this run's first (warm-up) epoch
    stopped_by = 0
    pending_stop = None  # the stop-flag reduction started after the previous step
    while pos.epoch < args.epochs and pos.global_step < end_step and not stopped_by:
        epoch = pos.epoch
        ddp.train()
        first_step = pos.global_step + 1
        # Loss and correct count stay on the device: adding to them queues a kernel, reading
        # them would wait for the device. The image count is known on the host.
        sums = torch.zeros(2, dtype=torch.float64, device=device)
        steps = 0
        epoch_ckpt_time = 0.0
        t0 = time.perf_counter()
        for x, labels in batches.epoch(epoch, pos.batch):
            for group in optimizer.param_groups:
                group["lr"] = lr_at(pos.global_step, args.lr, total_steps)  # a host float: no sync
            with fmt.autocast(device):
                logits = ddp(x)
                loss = F.cross_entropy(logits, labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            pos.batch += 1
            pos.global_step += 1
            steps += 1
            with torch.no_grad():
                sums[0] += loss.detach()
                sums[1] += (logits.argmax(1) == labels).sum()
            if args.log_every_step:
                report.line(f"step={pos.global_step} loss={loss.item():.6f}")
            if args.step_sleep > 0:
                time.sleep(args.step_sleep)
            # Ranks agree on stop requests one step late: the reduction started here runs
            # while the next step computes, so no step waits for it (a blocking one per step
            # cost ~10% of CPU throughput). Each rank starts exactly one per step and waits
            # for it at the next, so the collectives stay in the same order on every rank.
            # It is a host-side flag on the gloo control group: no device sync either.
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
            epoch_due = epoch_end and (epoch + 1) % args.checkpoint_epochs == 0
            if ckpt_dir is not None and (due or epoch_due or finished or stopped_by):
                epoch_ckpt_time += checkpoint()
            if epoch_end or finished or stopped_by:
                break
        # The reduction doubles as the epoch's sync point (and CUDA sync) for the timing.
        dist.all_reduce(sums)
        loss_sum, correct = sums.tolist()
        elapsed = time.perf_counter() - t0 - epoch_ckpt_time  # checkpoint writes are not training
        images = steps * args.batch_size * job.world_size
        run_time += elapsed
        checkpoint_time += epoch_ckpt_time
        run_images += images
        if images > 0:
            final_loss, final_acc = loss_sum * args.batch_size / images, correct / images
            fields = {"epoch": epoch, "steps": f"{first_step}-{pos.global_step}", "time_s": round(elapsed, 3),
                      "images_per_s": round(images / elapsed, 1), "loss": final_loss, "acc": final_acc}
            report.record("epoch", fields, text=key_values(fields))
            if timed_epochs > 0:
                steady_images, steady_time = steady_images + images, steady_time + elapsed
            timed_epochs += 1

    stop.result(pending_stop)  # every rank has one outstanding after a stop: finish it alike
    if stopped_by:
        name = signal.Signals(stopped_by).name
        saved = "checkpoint saved" if ckpt_dir is not None else "no checkpoint (no --checkpoint-dir)"
        report.record("stopped", {"signal": name, "step": pos.global_step, "checkpoint": ckpt_dir is not None},
                      text=f"stopping on signal {name} at step {pos.global_step}, {saved}")
    elif test_data is not None:
        report.record("eval", evaluate(model, test_data, device, args.batch_size, fmt))
    report.record(
        "summary",
        {"nodes": job.nnodes, "procs_per_node": job.local_world_size, "world_size": job.world_size,
         "epochs": pos.epoch, "global_steps": pos.global_step, "steps_this_run": pos.global_step - start_step,
         "images": run_images, "time_s": round(run_time, 3),
         "images_per_s": round(run_images / run_time, 1) if run_time > 0 else 0.0,
         "final_loss": final_loss, "final_acc": final_acc,
         "steady_images_per_s": round(steady_images / steady_time, 1) if steady_time > 0 else float("nan"),
         "checkpoint_s": round(checkpoint_time, 3)},
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
