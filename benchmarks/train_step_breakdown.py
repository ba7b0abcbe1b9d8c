#!/usr/bin/env python3
"""Where train_ddp's step time goes: its training loop timed with one piece taken out at a
time, beside the bare train step, all in one process and interleaved over rounds.

Usage: ``torchrun --standalone --nproc-per-node 1 benchmarks/train_step_breakdown.py
[--rounds 3] [--epochs 2] [--variants=-ddp,step,...]`` (plain ``python`` works too: a world
of one).

``benchmarks/train_throughput.py`` says how far train_ddp is from the ceiling; this says why.
The pieces of ``jobs/train_ddp.py``'s loop:

  data     batches from ``DeviceBatches`` (gather, crop+flip, normalise on the device);
           without it, one fixed device-resident batch
  ddp      the model wrapped by ``wrap_ddp`` (gradient all-reduce hooks); train_ddp wraps only
           when there are several ranks, so on one GPU it runs ``-ddp``
  metrics  the loss and correct-count sums kept on the device
  stop     the per-step stop-flag reduction on the gloo control group
  lr       the learning rate set per step

Variants: ``full`` (all pieces: train_ddp's loop), ``-PIECE`` (all but that one), ``step``
(none: the ceiling of benchmarks/train_throughput.py), plus ``full+fused`` (fused SGD),
``full+bucket100`` (DDP buckets of 100 MB) and, on CUDA, ``graph``: train_ddp's loop in a
world of one (``-ddp``) with the whole train step (forward, backward, fused SGD with a
tensor learning rate, metrics) captured once as a CUDA graph and replayed per batch, which
shows how much of the step is the host issuing kernels. Each variant runs one warm-up epoch (cudnn
autotuning, allocator growth, DDP's bucket rebuild), then ``--epochs`` timed epochs; the
device is synchronised before each clock reading. Variants alternate within a round, and the
median over rounds is printed with the range, which shows the noise::

  train_step_breakdown: <variant> images_per_s=<median> ms_per_step=<m> range=<lo>-<hi> host_busy=<f> vs_full=<r>

``host_busy`` is the main thread's CPU time over wall time: near 1 means the step is bound
by the host issuing kernels (launch-bound), not by the GPU.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "jobs"))
from jobenv import JobEnvironment  # noqa: E402
from train_ddp import (  # noqa: E402
    CifarResNet, DeviceBatches, InputFormat, StopRequest, lr_at, make_optimizer, synthetic_cifar, wrap_ddp,
)

PREFIX = "train_step_breakdown:"
LR = 0.1
PIECES = ("data", "ddp", "metrics", "stop", "lr")
EXTRAS = ("fused", "bucket100")
DEFAULT_VARIANTS = ["full", *(f"-{p}" for p in PIECES), "step", "full+fused", "full+bucket100"]
GRAPH = "graph"


def optimizer_of(model: torch.nn.Module, lr: float | torch.Tensor = LR, fused: bool = False) -> torch.optim.Optimizer:
    """train_ddp's SGD (its make_optimizer); ``fused``: the same settings as one fused kernel."""
    optimizer = make_optimizer(model, argparse.Namespace(lr=LR, weight_decay=5e-4))
    if not fused:
        return optimizer
    return torch.optim.SGD(model.parameters(), **{**optimizer.defaults, "lr": lr, "fused": True})


def features(variant: str) -> set[str]:
    if variant == "step":
        return set()
    if variant == GRAPH:
        return {GRAPH, "data", "stop"}  # metrics and lr are part of the captured step
    if variant.startswith("-"):
        return set(PIECES) - {variant[1:]}
    base, *extra = variant.split("+")
    if base != "full" or not set(extra) <= set(EXTRAS):
        raise SystemExit(f"unknown variant {variant!r}")
    return set(PIECES) | set(extra)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=2, help="timed epochs per variant (after one warm-up epoch)")
    p.add_argument("--variants", default=",".join(DEFAULT_VARIANTS))
    p.add_argument("--synthetic-size", type=int, default=50_000)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--width", type=int, default=64)
    args = p.parse_args()
    variants = args.variants.split(",")
    wanted = {v: features(v) for v in variants}

    job = JobEnvironment.from_env()
    device = job.choose_device("auto")
    job.configure_threads(0)
    groups = job.init_process_group(device)
    fmt = InputFormat.for_device(device)
    on_cuda = device.type == "cuda"
    data = synthetic_cifar(args.synthetic_size, seed=0)
    batches = DeviceBatches(data, device, world_size=job.world_size, rank=job.rank, batch_size=args.batch_size,
                            seed=0, augment=True, fmt=fmt)
    steps = batches.steps_per_epoch
    fixed_x, fixed_y = (t.clone() for t in next(iter(batches.epoch(0))))
    stop = StopRequest()

    def sync() -> None:
        if on_cuda:
            torch.cuda.synchronize(device)

    total = (args.epochs + 1) * steps

    def time_epochs(body: Callable[[torch.Tensor, torch.Tensor, int], None], sums: torch.Tensor,
                    have: set[str]) -> tuple[float, float]:
        """One warm-up and ``--epochs`` timed epochs of ``body(x, y, global_step)``; the
        stop-flag reduction follows each step when ``stop`` is among the pieces. Returns
        images/s and the host-busy fraction of the timed epochs."""
        global_step, pending = 0, None
        wall = busy = 0.0
        for epoch in range(args.epochs + 1):
            sums.zero_()
            source: Any = batches.epoch(epoch) if "data" in have else ((fixed_x, fixed_y) for _ in range(steps))
            sync()
            t0, c0 = time.perf_counter(), time.thread_time()
            for x, y in source:
                body(x, y, global_step)
                global_step += 1
                if "stop" in have:
                    previous, pending = pending, stop.start(groups.control)
                    stop.result(previous)
            c1 = time.thread_time()
            sync()
            if epoch > 0:
                wall += time.perf_counter() - t0
                busy += c1 - c0
        stop.result(pending)
        assert torch.isfinite(sums).all(), sums
        return args.epochs * steps * args.batch_size * job.world_size / wall, busy / wall

    def run_graph(have: set[str]) -> tuple[float, float]:
        """The ``graph`` variant: capture the train step once, replay it per batch."""
        torch.manual_seed(0)
        model = CifarResNet(width=args.width).to(device).to(memory_format=torch.channels_last)
        torch.backends.cudnn.benchmark = True
        lr = torch.tensor(LR, device=device)
        optimizer = optimizer_of(model, lr, fused=True)
        static_x, static_y = fixed_x.clone(), fixed_y.clone()
        sums = torch.zeros(2, dtype=torch.float64, device=device)

        def step() -> None:
            with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
                logits = model(static_x)
                loss = F.cross_entropy(logits, static_y)
            loss.backward()
            optimizer.step()
            with torch.no_grad():
                sums[0] += loss.detach()
                sums[1] += (logits.argmax(1) == static_y).sum()

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up off the capture stream, as torch's docs do it
            for _ in range(3):
                optimizer.zero_grad(set_to_none=True)
                step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        optimizer.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            step()

        def replay(x: torch.Tensor, y: torch.Tensor, global_step: int) -> None:
            lr.fill_(lr_at(global_step, LR, total))
            static_x.copy_(x)
            static_y.copy_(y)
            graph.replay()

        return time_epochs(replay, sums, have)

    def run(have: set[str]) -> tuple[float, float]:
        """images/s and host-busy fraction of one variant's timed epochs."""
        if GRAPH in have:
            return run_graph(have)
        torch.manual_seed(0)
        model = CifarResNet(width=args.width).to(device)
        if on_cuda:
            model = model.to(memory_format=torch.channels_last)
            torch.backends.cudnn.benchmark = True
        optimizer = optimizer_of(model, fused="fused" in have)
        net: torch.nn.Module = model
        if "bucket100" in have:
            net = DDP(model, device_ids=[device.index] if on_cuda else None, gradient_as_bucket_view=True,
                      broadcast_buffers=False, bucket_cap_mb=100)
        elif "ddp" in have:
            net = wrap_ddp(model, device)
        sums = torch.zeros(2, dtype=torch.float64, device=device)

        def eager(x: torch.Tensor, y: torch.Tensor, global_step: int) -> None:
            if "lr" in have:
                for group in optimizer.param_groups:
                    group["lr"] = lr_at(global_step, LR, total)
            with fmt.autocast(device):
                logits = net(x)
                loss = F.cross_entropy(logits, y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if "metrics" in have:
                with torch.no_grad():
                    sums[0] += loss.detach()
                    sums[1] += (logits.argmax(1) == y).sum()

        return time_epochs(eager, sums, have)

    if job.is_main:
        print(f"{PREFIX} config device={device.type} world_size={job.world_size} steps_per_epoch={steps} "
              f"batch_size={args.batch_size} width={args.width} epochs={args.epochs} rounds={args.rounds} "
              f"torch={torch.__version__}", flush=True)
    rates: dict[str, list[float]] = {v: [] for v in variants}
    busy: dict[str, list[float]] = {v: [] for v in variants}
    failed: set[str] = set()
    for _ in range(args.rounds):
        for v in variants:
            if v in failed:
                continue
            try:
                rate, frac = run(wanted[v])
            except Exception as exc:  # one variant's failure (a capture refused, say) is a result too
                failed.add(v)
                print(f"{PREFIX} {v} failed: {exc!r}"[:2000], flush=True)
                continue
            rates[v].append(rate)
            busy[v].append(frac)
    if job.is_main:
        ref = statistics.median(rates[variants[0]]) if rates[variants[0]] else float("nan")
        for v in variants:
            if not rates[v]:
                continue
            med = statistics.median(rates[v])
            print(f"{PREFIX} {v} images_per_s={med:.1f} ms_per_step={1000 * args.batch_size * job.world_size / med:.3f} "
                  f"range={min(rates[v]):.0f}-{max(rates[v]):.0f} host_busy={statistics.median(busy[v]):.2f} "
                  f"vs_{variants[0]}={med / ref:.3f}", flush=True)
    groups.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
