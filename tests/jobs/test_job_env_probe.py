"""jobs/env_probe.py: one JSON line per rank, library resolution, working all-reduce."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from env_probe import PREFIX, probe_library

DEBIAN_LIBFABRIC = Path("/usr/lib/x86_64-linux-gnu/libfabric.so.1")


@pytest.mark.slow
def test_two_ranks_print_one_json_line_each(tmp_path: Path, run_job) -> None:
    run = run_job("env_probe.py", ["--libs", "libfabric.so.1,libnccl-net.so,libc.so.6"], cwd=tmp_path,
                  NCCL_DEBUG="WARN", FI_PROVIDER="tcp", SLINGSHOT_VNIS="1234", NCCL_NET_PLUGIN="none")
    assert run.returncode == 0, run.output
    lines = [json.loads(line[len(PREFIX):]) for line in run.lines(PREFIX)]
    assert sorted(d["rank"] for d in lines) == [0, 1]
    for d in lines:
        assert d["world_size"] == 2 and d["local_world_size"] == 2 and d["nnodes"] == 1
        assert d["allreduce_ok"] is True and d["allreduce_sum"] == 1 and d["backend"] == "gloo"
        assert d["device"] == "cpu" and d["torch"] and d["host"] and d["ip"]
        assert d["env"]["NCCL_DEBUG"] == "WARN" and d["env"]["FI_PROVIDER"] == "tcp"
        assert d["env"]["SLINGSHOT_VNIS"] == "1234" and d["env"]["NCCL_NET_PLUGIN"] == "none"
        assert not any(k.startswith(("PATH", "HOME")) for k in d["env"])
        assert d["ld_library_path"] == os.environ.get("LD_LIBRARY_PATH")
        missing = d["libs"]["libnccl-net.so"]
        assert missing["loaded"] is False and "libnccl-net.so" in missing["error"]
        libc = d["libs"]["libc.so.6"]
        assert libc["loaded"] and os.path.basename(libc["realpath"]).startswith("libc")
        if DEBIAN_LIBFABRIC.exists():
            fabric = d["libs"]["libfabric.so.1"]
            assert fabric["loaded"] is True
            assert fabric["realpath"] == os.path.realpath(DEBIAN_LIBFABRIC)
            assert re.fullmatch(r"1\.\d+", fabric["fi_version"])


def test_probe_library_reports_the_loader_error_and_resolved_path() -> None:
    missing = probe_library("libdoes-not-exist-fabrikit.so.9")
    assert missing == {"loaded": False, "error": missing["error"]} and "cannot open" in missing["error"]
    libm = probe_library("libm.so.6")
    assert libm["loaded"] and Path(libm["path"]).name == "libm.so.6" and Path(libm["realpath"]).exists()
    assert "fi_version" not in libm


@pytest.mark.slow
def test_cpu_bind_masks_pin_each_torchrun_worker(tmp_path: Path, run_job) -> None:
    """The batch script's FABRIKIT_CPU_BIND_MASKS (one mask per local rank, LUMI-G style) pins
    each worker that torchrun starts, which `srun --cpu-bind` cannot do for one task per node."""
    cpus = sorted(os.sched_getaffinity(0))
    first, last = cpus[0], cpus[-1]
    run = run_job("env_probe.py", ["--libs", "libc.so.6", "--output-dir", str(tmp_path)], cwd=tmp_path,
                  FABRIKIT_CPU_BIND_MASKS=f"{1 << first:#x},{1 << last:#x}")
    assert run.returncode == 0, run.output
    by_rank = {d["local_rank"]: d for d in (json.loads((tmp_path / "probe" / f"rank-{r}.json").read_text())
                                            for r in (0, 1))}
    assert by_rank[0]["cpu_bind"] == [first] and by_rank[0]["cpu_affinity"] == [first]
    assert by_rank[1]["cpu_bind"] == [last] and by_rank[1]["cpu_affinity"] == [last]
    assert by_rank[0]["env"]["FABRIKIT_CPU_BIND_MASKS"] == f"{1 << first:#x},{1 << last:#x}"
