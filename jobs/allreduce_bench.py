#!/usr/bin/env python3
"""All-reduce bandwidth sweep in the style of nccl-tests' ``all_reduce_perf``, via torch.distributed.

Run: ``torchrun --nnodes N --nproc-per-node P jobs/allreduce_bench.py [options]``.

Why a torch version when nccl-tests exists: it runs in any PyTorch image without building
nccl-tests against the image's CUDA/NCCL, it goes through exactly the NCCL (and net plugin)
that training uses, and it also runs on CPU with gloo so the job path can be tested anywhere.

For each message size (``--min-bytes`` to ``--max-bytes``, times ``--factor``): ``--warmup``
untimed then ``--iters`` timed in-place SUM all-reduces; the time per op is the slowest rank's
average. ``algbw = bytes / time``, ``busbw = algbw * 2(n-1)/n`` (nccl-tests' bus bandwidth:
comparable with the link speed whatever the rank count). Defaults: 8 B to 256 MB on CUDA,
8 B to 4 MB on CPU (gloo over TCP would need minutes for the large sizes; pass
``--max-bytes`` to go further).

Correctness (nccl-tests' ``#wrong``): after timing, each rank fills the buffer with a
rank-dependent pattern of small integers, does one more all-reduce and compares every element
with the expected sum. The values are chosen so that every partial sum is exactly
representable in the dtype, so any difference is a real error (the silent corruption that
``NCCL_PROTO=^LL128`` avoids on GH200 + Slingshot shows up here), never rounding. The count is
summed over ranks.

Output (rank 0): the table on stdout, then
``fabrikit-allreduce: summary world_size=<W> max_busbw_gbps=<x> wrong=<total> sizes=<n>``,
and ``allreduce.json`` + ``allreduce.csv`` in ``--output-dir`` (default ``$FABRIKIT_RUN_DIR``,
else cwd). Exit status 1 if any element was wrong.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch
import torch.distributed as dist

from jobenv import JobEnvironment, ProcessGroups, default_output_dir

PREFIX = "fabrikit-allreduce:"
DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int32": torch.int32,
    "int64": torch.int64,
}
# Largest integer up to which every integer is representable (2 ** (mantissa bits + 1)).
_EXACT_LIMIT = {
    torch.float32: 2**24,
    torch.float64: 2**53,
    torch.float16: 2**11,
    torch.bfloat16: 2**8,
    torch.int32: 2**31 - 1,
    torch.int64: 2**63 - 1,
}
MAX_PATTERN = 64
CUDA_MAX_BYTES = 256 * 2**20
CPU_MAX_BYTES = 4 * 2**20


@dataclass(frozen=True)
class Row:
    """One size's result, as in one line of all_reduce_perf's output."""

    size_bytes: int
    count: int
    dtype: str
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int


def sizes(min_bytes: int, max_bytes: int, factor: int, elem_size: int) -> list[int]:
    """Message sizes in bytes, rounded down to whole elements (at least one), no repeats."""
    out: list[int] = []
    size = max(min_bytes, elem_size)
    while size <= max_bytes:
        rounded = max(elem_size, size // elem_size * elem_size)
        if not out or rounded != out[-1]:
            out.append(rounded)
        size *= factor
    return out


def pattern_modulus(dtype: torch.dtype, world_size: int) -> int:
    """Values run over 0..K-1 with K chosen so that a sum over all ranks stays exact."""
    return max(1, min(MAX_PATTERN, _EXACT_LIMIT[dtype] // max(1, world_size) + 1))


def fill_pattern(buf: torch.Tensor, rank: int, modulus: int) -> None:
    """Rank ``r``'s element ``i`` is ``(3 i + r) mod K``: neighbouring elements and ranks
    differ, so misplaced chunks are caught as well as wrong arithmetic."""
    idx = torch.arange(buf.numel(), device=buf.device, dtype=torch.int64)
    buf.copy_((idx * 3 + rank) % modulus)


def expected_sum(count: int, world_size: int, modulus: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Sum over ranks of :func:`fill_pattern`. The sum depends only on ``3 i mod K``, so a
    table of K entries (built on the host) replaces W passes over the buffer."""
    table = torch.tensor(
        [sum((a + r) % modulus for r in range(world_size)) for a in range(modulus)], dtype=torch.int64, device=device
    )
    idx = torch.arange(count, device=device, dtype=torch.int64)
    return table[(idx * 3) % modulus].to(dtype)


def busbw_factor(world_size: int) -> float:
    """nccl-tests' all-reduce bus-bandwidth factor 2(n-1)/n: each rank sends and receives
    that many times the buffer in a ring all-reduce."""
    return 2.0 * (world_size - 1) / world_size


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(size_bytes: int, dtype: torch.dtype, iters: int, warmup: int, job: JobEnvironment, groups: ProcessGroups) -> Row:
    """Time one size and check it; collective over all ranks."""
    device = groups.device
    count = size_bytes // torch.tensor([], dtype=dtype).element_size()
    # Timing buffer content does not change transport speed; zeros also never overflow
    # across repeated in-place sums. Correctness is checked on a separate op below.
    buf = torch.zeros(count, dtype=dtype, device=device)
    for _ in range(warmup):
        dist.all_reduce(buf)
    _sync(device)
    dist.barrier(group=groups.control)
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(buf)
    _sync(device)
    elapsed = torch.tensor([(time.perf_counter() - start) / max(1, iters)], dtype=torch.float64)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX, group=groups.control)
    seconds = elapsed.item()

    modulus = pattern_modulus(dtype, job.world_size)
    fill_pattern(buf, job.rank, modulus)
    dist.all_reduce(buf)
    wrong = torch.tensor([int((buf != expected_sum(count, job.world_size, modulus, dtype, device)).sum().item())], dtype=torch.int64)
    dist.all_reduce(wrong, group=groups.control)

    algbw = size_bytes / seconds / 1e9 if seconds > 0 else 0.0
    return Row(
        size_bytes=size_bytes,
        count=count,
        dtype=str(dtype).removeprefix("torch."),
        time_us=seconds * 1e6,
        algbw_gbps=algbw,
        busbw_gbps=algbw * busbw_factor(job.world_size),
        wrong=int(wrong.item()),
    )


HEADER = (
    f"#{'size':>12} {'count':>12} {'type':>9} {'redop':>6} {'time':>10} {'algbw':>8} {'busbw':>8} {'#wrong':>7}\n"
    f"#{'(B)':>12} {'(elements)':>12} {'':>9} {'':>6} {'(us)':>10} {'(GB/s)':>8} {'(GB/s)':>8} {'':>7}"
)


def format_row(row: Row) -> str:
    return (
        f" {row.size_bytes:>12} {row.count:>12} {row.dtype:>9} {'sum':>6} {row.time_us:>10.2f} "
        f"{row.algbw_gbps:>8.3f} {row.busbw_gbps:>8.3f} {row.wrong:>7}"
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--min-bytes", type=int, default=8)
    p.add_argument("--max-bytes", type=int, default=None, help=f"default {CUDA_MAX_BYTES} on CUDA, {CPU_MAX_BYTES} on CPU")
    p.add_argument("--factor", type=int, default=2, help="size multiplier between steps")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--output-dir", default=None, help="allreduce.json/.csv go here (default $FABRIKIT_RUN_DIR, else cwd)")
    args = p.parse_args(argv)
    if args.factor < 2 or args.min_bytes < 1 or args.iters < 1 or args.warmup < 0:
        p.error("--factor must be >= 2, --min-bytes and --iters >= 1, --warmup >= 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    job = JobEnvironment.from_env()
    job.bind_cpus()  # before any thread starts: the profile's per-GPU CPU mask, if any
    device = job.choose_device(args.device)
    job.configure_threads()
    groups = job.init_process_group(device)
    dtype = DTYPES[args.dtype]
    max_bytes = args.max_bytes if args.max_bytes is not None else (CUDA_MAX_BYTES if device.type == "cuda" else CPU_MAX_BYTES)
    plan = sizes(args.min_bytes, max_bytes, args.factor, torch.tensor([], dtype=dtype).element_size())
    if job.is_main:
        print(
            f"{PREFIX} start world_size={job.world_size} nodes={job.nnodes} device={device.type} "
            f"backend={groups.backend.value} dtype={args.dtype} iters={args.iters} warmup={args.warmup}",
            flush=True,
        )
        print(HEADER, flush=True)
    rows: list[Row] = []
    for size in plan:
        row = measure(size, dtype, args.iters, args.warmup, job, groups)
        rows.append(row)
        if job.is_main:
            print(format_row(row), flush=True)
    total_wrong = sum(r.wrong for r in rows)
    max_busbw = max((r.busbw_gbps for r in rows), default=0.0)
    if job.is_main:
        out = default_output_dir(args.output_dir)
        summary = {"world_size": job.world_size, "max_busbw_gbps": round(max_busbw, 3), "wrong": total_wrong, "sizes": len(rows)}
        meta = {"nodes": job.nnodes, "procs_per_node": job.local_world_size, "device": device.type,
                "backend": groups.backend.value, "dtype": args.dtype, "iters": args.iters, "warmup": args.warmup,
                "busbw_factor": busbw_factor(job.world_size)}
        (out / "allreduce.json").write_text(json.dumps({**summary, **meta, "rows": [asdict(r) for r in rows]}, indent=2) + "\n")
        with (out / "allreduce.csv").open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(Row.__dataclass_fields__))
            writer.writeheader()
            writer.writerows(asdict(r) for r in rows)
        print(f"# Out of bounds values : {total_wrong} {'FAILED' if total_wrong else 'OK'}", flush=True)
        print(f"{PREFIX} summary " + " ".join(f"{k}={v}" for k, v in summary.items()), flush=True)
    dist.barrier(group=groups.control)
    groups.destroy()
    return 1 if total_wrong else 0


if __name__ == "__main__":
    sys.exit(main())
