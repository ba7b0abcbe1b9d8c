#!/usr/bin/env python3
"""Training throughput of ``jobs/train_ddp.py`` beside a tutorial-style DDP loop and the
"ceiling": the bare train step, all three measured in one run.

Usage: ``python benchmarks/train_throughput.py [--nproc N] [--rounds 2] [--epochs 3] ...``

All sides train the same model (``CifarResNet`` from ``jobs/train_ddp.py``) at the same
per-rank batch size, under ``torchrun --standalone`` with ``--nproc`` workers:

- ceiling (``--ceiling-worker``): the train step alone, as fast as eager PyTorch runs it:
  one fixed input batch already on the device in the model's input format (bf16
  channels_last on CUDA), the model in channels_last with bf16 autocast, the same SGD as
  train_ddp; no data pipeline, no DDP, no metrics. Each rank trains on its own, so with
  several workers it is the perfect-scaling ceiling.
- baseline (``--baseline-worker``): the loop as the seed tutorials write it: a ``Dataset``
  whose ``__getitem__`` returns one normalised float image, a default ``DataLoader`` +
  ``DistributedSampler``, fp32, ``loss.item()`` every step.
- fabrikit: ``jobs/train_ddp.py`` itself with its defaults for the device (on CUDA: data
  set held on the GPU, crop+flip augmentation, bf16 channels_last, launch-lean DDP, none
  in a world of one).

Throughput is the images/s of the epochs after the first (the first pays for allocator
warm-up and, on CUDA, cudnn autotuning), from each side's own per-epoch timing; the sides
alternate for ``--rounds`` rounds and the best round of each is reported, which damps noise
from other load on the machine.

Defaults: on a machine with CUDA, the guides' workload on one GPU (``--nproc 1``, ResNet-18
width 64, 50,000 synthetic images, 256 images per step); the issue's acceptance is
``fabrikit/ceiling >= 0.80`` there. On CPU, small shapes so that it runs in 1-3 minutes on
the 2-core dev machine (2 workers, width 16, 768 images, batch 32); there all sides are
compute-bound and the ratios say little about the GPU case. Output::

  train_throughput: config device=<cpu|cuda> nproc=<n> ...
  train_throughput: ceiling images_per_s=<c> rounds=<...>
  train_throughput: baseline images_per_s=<b> rounds=<...>
  train_throughput: fabrikit images_per_s=<f> rounds=<...>
  train_throughput: ratio fabrikit/ceiling=<f/c> baseline/ceiling=<b/c> fabrikit/baseline=<f/b>
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JOBS = ROOT / "jobs"
PREFIX = "train_throughput:"
# Defaults per device: (nproc, synthetic_size, batch_size, width).
DEFAULTS = {"cuda": (1, 50_000, 256, 64), "cpu": (2, 768, 32, 16)}


def _worker_args(args: argparse.Namespace) -> list[str]:
    return ["--synthetic-size", str(args.synthetic_size), "--batch-size", str(args.batch_size),
            "--width", str(args.width), "--epochs", str(args.epochs)]


def ceiling_worker(args: argparse.Namespace) -> None:
    """The bare train step on a fixed device-resident batch, timed per "epoch" of the same
    number of steps the other sides take."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    sys.path.insert(0, str(JOBS))
    from jobenv import JobEnvironment
    from train_ddp import CifarResNet, InputFormat, make_optimizer

    job = JobEnvironment.from_env()
    device = job.choose_device("auto")
    on_cuda = device.type == "cuda"
    job.configure_threads(0)  # train_ddp's thread policy
    groups = job.init_process_group(device)
    barrier_group = groups.control  # gloo beside NCCL, None = the default (gloo) group
    fmt = InputFormat.for_device(device)
    torch.manual_seed(0)
    model = CifarResNet(width=args.width).to(device)
    if on_cuda:
        model = model.to(memory_format=torch.channels_last)
        torch.backends.cudnn.benchmark = True
    optimizer = make_optimizer(model, argparse.Namespace(lr=0.1, weight_decay=5e-4))
    x = torch.randn(args.batch_size, 3, 32, 32, device=device).to(dtype=fmt.dtype, memory_format=fmt.memory_format)
    y = torch.randint(0, 10, (args.batch_size,), device=device)
    steps = args.synthetic_size // (args.batch_size * job.world_size)

    def sync() -> None:
        if on_cuda:
            torch.cuda.synchronize(device)
        dist.barrier(group=barrier_group)

    for epoch in range(args.epochs):
        sync()
        start = time.perf_counter()
        for _ in range(steps):
            with fmt.autocast(device):
                loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        sync()
        elapsed = time.perf_counter() - start
        if job.is_main:
            total = steps * args.batch_size * job.world_size
            print(f"ceiling: epoch={epoch} time_s={elapsed:.3f} images_per_s={total / elapsed:.1f}", flush=True)
    groups.destroy()


def baseline_worker(args: argparse.Namespace) -> None:
    """The tutorial loop, run by each torchrun worker (imports torch only here)."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, Dataset, DistributedSampler

    sys.path.insert(0, str(JOBS))
    from train_ddp import CIFAR_MEAN, CIFAR_STD, CifarResNet, synthetic_cifar

    class SyntheticImages(Dataset):
        """Per-sample access and ToTensor+Normalize-style conversion, as in the tutorials."""

        def __init__(self, size: int) -> None:
            data = synthetic_cifar(size, seed=0)
            self.images, self.labels = data.images, data.labels
            self.mean = torch.tensor(CIFAR_MEAN).view(3, 1, 1)
            self.std = torch.tensor(CIFAR_STD).view(3, 1, 1)

        def __len__(self) -> int:
            return len(self.labels)

        def __getitem__(self, i: int):
            return (self.images[i].float() / 255 - self.mean) / self.std, self.labels[i]

    local_rank = int(os.environ["LOCAL_RANK"])
    use_cuda = torch.cuda.is_available()
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if use_cuda else "gloo")
    dataset = SyntheticImages(args.synthetic_size)
    sampler = DistributedSampler(dataset, seed=0)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    torch.manual_seed(0)
    model = DDP(CifarResNet(width=args.width).to(device), device_ids=[local_rank] if use_cuda else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        running_loss, seen = 0.0, 0
        start = time.perf_counter()
        for images, labels in loader:
            images, labels = images.to(device), labels.to(device)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(images), labels)
            loss.backward()
            optimizer.step()
            running_loss += loss.item()
            seen += images.shape[0]
        if use_cuda:
            torch.cuda.synchronize()
        dist.barrier()
        elapsed = time.perf_counter() - start
        if dist.get_rank() == 0:
            total = seen * dist.get_world_size()
            print(f"baseline: epoch={epoch} time_s={elapsed:.3f} images_per_s={total / elapsed:.1f}", flush=True)
    dist.destroy_process_group()


def _run(cmd: list[str], pattern: str) -> list[float]:
    """Run one side; images/s of each epoch line, in order."""
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")  # what torchrun would set anyway, without its warning
    out = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    rates = [float(m) for m in re.findall(pattern, out.stdout, re.M)]
    if out.returncode != 0 or not rates:
        sys.exit(f"{PREFIX} {' '.join(cmd)} failed (exit {out.returncode}):\n{out.stdout}")
    return rates


def _steady(rates: list[float]) -> float:
    """Mean images/s without the first epoch (when there is more than one)."""
    rest = rates[1:] or rates
    return sum(rest) / len(rest)


def _device() -> str:
    """What the workers will train on (the orchestrator itself only asks)."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nproc", type=int, default=None, help="workers (default: 1 on CUDA, 2 on CPU)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--synthetic-size", type=int, default=None, help="images per epoch (default: 50000 on CUDA, 768 on CPU)")
    p.add_argument("--batch-size", type=int, default=None, help="per worker (default: 256 on CUDA, 32 on CPU)")
    p.add_argument("--width", type=int, default=None, help="ResNet width (default: 64 on CUDA, 16 on CPU)")
    p.add_argument("--ceiling-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--baseline-worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.ceiling_worker:
        ceiling_worker(args)
        return 0
    if args.baseline_worker:
        baseline_worker(args)
        return 0

    device = _device()
    for name, value in zip(("nproc", "synthetic_size", "batch_size", "width"), DEFAULTS[device]):
        if getattr(args, name) is None:
            setattr(args, name, value)
    scratch = tempfile.mkdtemp(prefix="train-throughput-")  # train_ddp's metrics.jsonl
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={args.nproc}"]
    epoch_line = r"^{}: epoch=\d+ (?:steps=\S+ )?time_s=\S+ images_per_s=(\S+)"
    sides = {
        "ceiling": (torchrun + [__file__, "--ceiling-worker", *_worker_args(args)], epoch_line.format("ceiling")),
        "baseline": (torchrun + [__file__, "--baseline-worker", *_worker_args(args)], epoch_line.format("baseline")),
        "fabrikit": (torchrun + [str(JOBS / "train_ddp.py"), *_worker_args(args), "--output-dir", scratch],
                     epoch_line.format("fabrikit-train")),
    }
    print(f"{PREFIX} config device={device} nproc={args.nproc} epochs={args.epochs} synthetic_size={args.synthetic_size} "
          f"batch_size={args.batch_size} width={args.width} rounds={args.rounds}", flush=True)
    results: dict[str, list[float]] = {name: [] for name in sides}
    try:
        for _ in range(args.rounds):
            for name, (cmd, pattern) in sides.items():
                results[name].append(_steady(_run(cmd, pattern)))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    best = {name: max(values) for name, values in results.items()}
    for name, values in results.items():
        print(f"{PREFIX} {name} images_per_s={best[name]:.1f} rounds={','.join(f'{v:.1f}' for v in values)}")
    print(f"{PREFIX} ratio fabrikit/ceiling={best['fabrikit'] / best['ceiling']:.2f} "
          f"baseline/ceiling={best['baseline'] / best['ceiling']:.2f} "
          f"fabrikit/baseline={best['fabrikit'] / best['baseline']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
