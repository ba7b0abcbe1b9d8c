"""Local mode inside the image: a copy of the local profile with `runtime: apptainer`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.helpers import ROOT, cli

pytestmark = [pytest.mark.apptainer, pytest.mark.slow]


def test_local_nodes_run_the_job_inside_the_test_image(test_image: Path, tmp_path: Path) -> None:
    data = yaml.safe_load((ROOT / "bindings" / "local.yaml").read_text())
    data["container"] = {"runtime": "apptainer", "image": str(test_image), "gpu_flag": "none"}
    data["host_libraries"] = {"names": ["libfabric.so.1"],
                              "search_path": ["/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu"]}
    profile = tmp_path / "local-apptainer.yaml"
    profile.write_text(yaml.safe_dump(data))
    dry = cli("--profile", str(profile), "--nodes", "2", "--dry-run")
    assert dry.returncode == 0 and dry.stdout.count("apptainer exec") == 2, dry.stdout
    run_dir = tmp_path / "run"
    result = cli("--profile", str(profile), "--nodes", "2", "--run-dir", str(run_dir), "--", "env_probe.py",
                 timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    records = [json.loads(p.read_text()) for p in sorted((run_dir / "probe").glob("rank-*.json"))]
    assert len(records) == 2 and all(r["allreduce_ok"] for r in records)
    for record in records:
        # python3 of the image (Debian's), not this machine's interpreter
        assert record["libs"]["libfabric.so.1"]["path"] == "/opt/fabrikit/hostlib/libfabric.so.1"
        assert record["ld_library_path"].startswith("/opt/fabrikit/hostlib")
