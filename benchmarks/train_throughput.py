#!/usr/bin/env python3
"""Training throughput of ``jobs/train_ddp.py`` next to a plain tutorial-style DDP loop.

Usage: ``python benchmarks/train_throughput.py [--nproc 2] [--rounds 2] [--epochs 3] ...``

Both sides train the same model (``CifarResNet`` from ``jobs/train_ddp.py``) on the same
synthetic images with the same batch size, under ``torchrun --standalone`` with ``--nproc``
workers. The baseline (``--baseline-worker``, in this file) is written the way the seed
tutorials write it: a ``Dataset`` whose ``__getitem__`` returns one normalised float image,
a default ``DataLoader`` + ``DistributedSampler``, fp32, ``loss.item()`` every step, nothing
else. train_ddp.py adds batched uint8 loading, normalisation on the device, per-process
thread sizing, and on CUDA bf16 autocast and channels_last.

Throughput is the images/s of the epochs after the first (the first pays for allocator
warm-up and, on CUDA, cudnn autotuning), from each side's own per-epoch timing; the sides
alternate for ``--rounds`` rounds and the best round of each is reported, which damps noise
from other load on the machine. On the 2-core CPU dev machine the defaults take 1-2
minutes (4 torchrun launches). On CPU both sides are compute-bound and come out about even;
the differences that matter are on CUDA (bf16, channels_last, uint8 host-to-device copies). Output::

  train_throughput: baseline images_per_s=<x> rounds=<...>
  train_throughput: fabrikit images_per_s=<y> rounds=<...>
  train_throughput: ratio fabrikit/baseline=<y/x>
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


def _worker_args(args: argparse.Namespace) -> list[str]:
    return ["--synthetic-size", str(args.synthetic_size), "--batch-size", str(args.batch_size),
            "--width", str(args.width), "--epochs", str(args.epochs)]


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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--synthetic-size", type=int, default=768)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--width", type=int, default=16)
    p.add_argument("--baseline-worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.baseline_worker:
        baseline_worker(args)
        return 0

    scratch = tempfile.mkdtemp(prefix="train-throughput-")  # train_ddp's metrics.jsonl
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={args.nproc}"]
    sides = {
        "baseline": (torchrun + [__file__, "--baseline-worker", *_worker_args(args)],
                     r"^baseline: epoch=\d+ time_s=\S+ images_per_s=(\S+)$"),
        "fabrikit": (torchrun + [str(JOBS / "train_ddp.py"), *_worker_args(args), "--output-dir", scratch],
                     r"^fabrikit-train: epoch=\d+ steps=\S+ time_s=\S+ images_per_s=(\S+) "),
    }
    print(f"{PREFIX} config nproc={args.nproc} epochs={args.epochs} synthetic_size={args.synthetic_size} "
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
    print(f"{PREFIX} ratio fabrikit/baseline={best['fabrikit'] / best['baseline']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
