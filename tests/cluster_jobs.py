"""Submitting fabrikit jobs to the real test cluster, for the end-to-end and fault tests."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import msgspec
import yaml

from tests.helpers import ROOT, cli

TEST_PROFILE = ROOT / "tests" / "sites" / "testcluster.yaml"
# A few seconds of real training: the default model, narrow, on a small synthetic set.
SMALL_TRAIN = ["train_ddp.py", "--synthetic-size", "128", "--batch-size", "16", "--width", "8", "--epochs", "2",
               "--checkpoint-dir", "{run_dir}/checkpoints", "--resume"]


class Job(msgspec.Struct):
    job_id: str
    run_dir: Path
    state: str | None = None

    @property
    def out(self) -> str:
        path = self.run_dir / f"slurm-{self.job_id}.out"
        return path.read_text(errors="replace") if path.exists() else ""

    @property
    def log(self) -> str:
        return "".join(p.read_text(errors="replace") for p in sorted(self.run_dir.glob(f"job-{self.job_id}*.log")))

    def endpoint(self) -> tuple[str, int]:
        match = re.search(r"fabrikit: rendezvous endpoint ([\d.]+):(\d+) \(head node (\S+)\)", self.out)
        assert match, self.out[-3000:]
        return match.group(1), int(match.group(2))


def profile_variant(tmp_path: Path, name: str, **changes: object) -> Path:
    """A copy of the test-cluster profile with top-level sections changed (merged)."""
    data = yaml.safe_load(TEST_PROFILE.read_text())
    for section, values in changes.items():
        if isinstance(values, dict) and isinstance(data.get(section), dict):
            data[section] = {**data[section], **values}
        else:
            data[section] = values
    data["extends"] = data.get("extends", "ethernet")
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    # extends is looked up beside the file, then in the bundled presets
    return path


def submit(cluster, run_dir: Path, nodes: int, job: list[str], *, profile: Path = TEST_PROFILE,
           extra: list[str] | None = None) -> Job:
    result = cli("--profile", str(profile), "--nodes", str(nodes), "--run-dir", str(run_dir), *(extra or []),
                 "--", *job, env=cluster.env)
    assert result.returncode == 0, result.stderr
    match = re.search(r"submitted job (\d+)", result.stdout)
    assert match, result.stdout
    return Job(job_id=match.group(1), run_dir=run_dir)


def finish(cluster, job: Job, timeout: float = 300) -> Job:
    job.state = cluster.wait(job.job_id, timeout=timeout)
    return job


def resubmit(cluster, run_dir: Path) -> Job:
    result = cli("--resume", str(run_dir), env=cluster.env)
    assert result.returncode == 0, result.stderr
    match = re.search(r"submitted job (\d+)", result.stdout)
    assert match, result.stdout
    return Job(job_id=match.group(1), run_dir=run_dir)


def train_lines(text: str, kind: str) -> list[dict[str, str]]:
    """key=value fields of every `fabrikit-train: <kind> ...` line (srun labels stripped)."""
    found = []
    for match in re.finditer(rf"fabrikit-train: {kind}[ =](.*)", text):
        body = match.group(0).split("fabrikit-train: ", 1)[1]
        found.append(dict(re.findall(r"(\w+)=(\S+)", body)))
    return found


def python() -> str:
    return sys.executable


def run(argv: list[str], **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, **kw)
