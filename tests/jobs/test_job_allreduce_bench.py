"""jobs/allreduce_bench.py: nccl-tests-style sweep on 2 CPU ranks, and its correctness check."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import torch

from allreduce_bench import busbw_factor, expected_sum, fill_pattern, pattern_modulus, sizes


@pytest.mark.slow
def test_two_rank_sweep_reports_no_wrong_elements_and_writes_json_and_csv(tmp_path: Path, run_job) -> None:
    run = run_job("allreduce_bench.py", ["--max-bytes", "65536", "--iters", "3", "--warmup", "1",
                                         "--output-dir", str(tmp_path)], cwd=tmp_path)
    assert run.returncode == 0, run.output
    summary = run.one("fabrikit-allreduce: summary ")
    assert summary["world_size"] == "2" and summary["wrong"] == "0" and summary["sizes"] == "14"  # 8 B .. 64 KiB
    assert "#wrong" in run.output and "(GB/s)" in run.output  # nccl-tests' table header

    report = json.loads((tmp_path / "allreduce.json").read_text())
    rows = report["rows"]
    assert [r["size_bytes"] for r in rows] == [2**k for k in range(3, 17)]
    assert report["backend"] == "gloo" and report["wrong"] == 0
    for r in rows:
        assert r["count"] * 4 == r["size_bytes"] and r["dtype"] == "float32" and r["wrong"] == 0
        assert r["time_us"] > 0
        assert r["algbw_gbps"] == pytest.approx(r["size_bytes"] / (r["time_us"] * 1e-6) / 1e9)
        assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * 2 * (2 - 1) / 2)
    assert float(summary["max_busbw_gbps"]) == pytest.approx(max(r["busbw_gbps"] for r in rows), abs=1e-3)

    with (tmp_path / "allreduce.csv").open() as f:
        table = list(csv.DictReader(f))
    assert [int(r["size_bytes"]) for r in table] == [r["size_bytes"] for r in rows]
    assert all(float(t["busbw_gbps"]) == pytest.approx(r["busbw_gbps"]) for t, r in zip(table, rows))
    # Table rows printed by rank 0 match the file.
    printed = [ln.split() for ln in run.output.splitlines() if ln.strip() and ln.split()[0].isdigit()]
    assert [int(p[0]) for p in printed] == [r["size_bytes"] for r in rows]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32])
@pytest.mark.parametrize("world", [2, 7, 64])
def test_pattern_sum_is_exact_and_a_corrupted_element_is_counted(dtype: torch.dtype, world: int) -> None:
    count = 1000
    modulus = pattern_modulus(dtype, world)
    total = torch.zeros(count, dtype=torch.float64)
    for rank in range(world):  # what a correct all-reduce computes, in exact float64
        buf = torch.empty(count, dtype=dtype)
        fill_pattern(buf, rank, modulus)
        total += buf.double()
    expected = expected_sum(count, world, modulus, dtype, torch.device("cpu"))
    assert torch.equal(total.to(dtype), expected) and torch.equal(expected.double(), total)  # exactly representable
    assert modulus > 1  # a pattern that actually varies
    corrupted = expected.clone()
    corrupted[17] += 1
    assert int((corrupted != expected).sum()) == 1


def test_sizes_and_busbw_factor() -> None:
    assert sizes(8, 64, 2, 4) == [8, 16, 32, 64]
    assert sizes(6, 40, 2, 4) == [4, 12, 24]  # rounded down to whole float32 elements
    assert sizes(1, 3, 2, 8) == []  # nothing fits: one float64 is 8 bytes
    assert busbw_factor(2) == 1.0 and busbw_factor(8) == pytest.approx(1.75) and busbw_factor(1) == 0.0
