"""`fabrikit report` on real local training runs (runner.run_report, runner.report_cmd).

Two real runs of jobs/train_ddp.py through `run-multinode --site local` (2 nodes, and 1 node
as the scaling baseline) are made once per module, at the smallest size the job allows, and
started side by side. The report's numbers are checked against the runs' own metrics.jsonl,
the PNGs are opened and checked for content, GPU utilisation is fed from synthetic
nvidia-smi CSVs (there is no GPU here), and bad input must fail as one line with exit 2.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import ROOT, cli, one_line_error

pytestmark = pytest.mark.slow

JOB = ["train_ddp.py", "--epochs", "2", "--synthetic-size", "128", "--batch-size", "16",
       "--width", "8", "--blocks", "1,1", "--threads", "1"]
RUN_TIMEOUT_S = 900
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
TAB_BLUE = (0x1F / 255, 0x77 / 255, 0xB4 / 255)
TAB_GRAY = (0x7F / 255, 0x7F / 255, 0x7F / 255)


def _launch(nodes: int, run_dir: Path, log: Path) -> subprocess.Popen:
    exe = shutil.which("run-multinode")
    argv = ([exe] if exe else [sys.executable, "-c",
                              "import sys; from runner.cli import run_multinode_main; "
                              "sys.argv[0] = 'run-multinode'; run_multinode_main()"])
    argv += ["--site", "local", "--nodes", str(nodes), "--run-dir", str(run_dir), "--", *JOB]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen(argv, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env,
                            cwd=run_dir.parent, start_new_session=True)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """{"run": 2-node run dir, "base": 1-node run dir}: real runs, made once, side by side."""
    top = tmp_path_factory.mktemp("report-runs")
    procs = {name: _launch(nodes, top / name, top / f"{name}.out")
             for name, nodes in (("run", 2), ("base", 1))}
    deadline = time.monotonic() + RUN_TIMEOUT_S
    try:
        for name, proc in procs.items():
            rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            out = (top / f"{name}.out").read_text(errors="replace")
            assert rc == 0, f"run-multinode for {name} exited {rc}:\n{out[-4000:]}"
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, 15)
                proc.wait(timeout=30)
    return {name: top / name for name in procs}


def _summary(run_dir: Path) -> dict:
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line]
    summaries = [r for r in records if r["event"] == "summary"]
    assert len(summaries) == 1, records
    return summaries[0]


def _report(*args: str) -> subprocess.CompletedProcess[str]:
    return cli("report", *map(str, args), prog="fabrikit", timeout=300)


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def _pixels(path: Path):
    import matplotlib.image as mpimg
    import numpy as np

    img = mpimg.imread(str(path))
    assert img.ndim == 3 and img.shape[2] in (3, 4)
    return np.asarray(img[..., :3], dtype=float)


def _assert_not_blank(path: Path, colour: tuple[float, float, float] | None = None,
                      min_share: float = 0.02, min_colour_px: int = 200) -> None:
    import numpy as np

    rgb = _pixels(path)
    background = rgb[0, 0]  # the figure's corner: the background colour
    differs = np.any(np.abs(rgb - background) > 0.05, axis=2).mean()
    assert differs >= min_share, f"{path}: only {differs:.1%} of pixels differ from the background"
    if colour is not None:
        near = np.all(np.abs(rgb - np.array(colour)) < 0.08, axis=2).sum()
        assert near >= min_colour_px, f"{path}: the data series ({colour}) is not drawn ({near} px)"


# --------------------------------------------------------------------------------------------
# One run


def test_report_prints_configuration_and_epoch_table(runs):
    run = runs["run"]
    summary = _summary(run)
    res = _report(run)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "world size         2" in out
    assert "nodes              2" in out
    assert "processes per node 1" in out
    assert "device             cpu (gloo)" in out
    lines = out.splitlines()
    head = next(i for i, l in enumerate(lines) if l.split()[:2] == ["EPOCH", "STEPS"])
    rows = []
    for line in lines[head + 1:]:
        if not line.startswith("  ") or not line.split()[0].isdigit():
            break
        rows.append(line.split())
    assert [r[0] for r in rows] == ["0", "1"], out  # epochs=2
    assert summary["epochs"] == 2 and summary["world_size"] == 2
    assert (f"overall: {summary['images']} images in {summary['time_s']:.3f} s = "
            f"{summary['images_per_s']:.1f} images/s (2 epochs, {summary['global_steps']} steps)") in out
    assert "transport: no NCCL (gloo/CPU)" in out
    report_dir = run / "report"
    for name in ("throughput.png", "report.json"):
        assert f"  {report_dir / name}" in out
    assert not (report_dir / "gpu_utilisation.png").exists()  # no gpu-*.csv in this run
    assert not [p for p in report_dir.iterdir() if ".tmp-" in p.name]  # atomic writes

    data = json.loads((report_dir / "report.json").read_text())
    assert data["config"]["world_size"] == 2 and data["config"]["label"] == "2 nodes x 1 process"
    assert len(data["epochs"]) == 2 and data["source"] == "metrics.jsonl"
    assert data["overall"]["images"] == summary["images"]
    assert data["overall"]["time_s"] == summary["time_s"]
    assert data["scaling"] is None and data["gpu"]["gpus"] == []
    assert data["files"]["gpu_utilisation"] is None


def test_report_json_flag_matches_report_json(runs, tmp_path):
    res = _report(runs["run"], "--output", tmp_path / "out", "--json")
    assert res.returncode == 0, res.stderr
    printed = json.loads(res.stdout)
    assert printed == json.loads((tmp_path / "out" / "report.json").read_text())
    assert printed["files"]["throughput"] == str(tmp_path / "out" / "throughput.png")


def test_throughput_png_is_a_drawn_image(runs, tmp_path):
    out = tmp_path / "out"
    res = _report(runs["run"], "--output", out)
    assert res.returncode == 0, res.stderr
    png = out / "throughput.png"
    assert _png_size(png) == (800, 450)
    _assert_not_blank(png, TAB_BLUE)


def test_throughput_line_of_epochs_of_equal_speed_is_not_hidden(runs, tmp_path):
    # two epochs within 0.05 % of each other: autoscaling padded by their own range put the
    # line on the top spine, which hid it (a CI run's epochs happened to be that close)
    copy = tmp_path / "run"
    shutil.copytree(runs["run"], copy, ignore=shutil.ignore_patterns("report", "checkpoints"))
    records = [json.loads(x) for x in (copy / "metrics.jsonl").read_text().splitlines() if x]
    speeds = iter((1200.0, 1200.5))
    for r in records:
        if r["event"] == "epoch":
            r["images_per_s"] = next(speeds)
        elif r["event"] == "summary":  # overall: between them, as it is
            r["images_per_s"], r["time_s"] = 1200.2, r["images"] / 1200.2
    (copy / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    res = _report(copy, "--output", tmp_path / "out")
    assert res.returncode == 0, res.stderr
    _assert_not_blank(tmp_path / "out" / "throughput.png", TAB_BLUE, min_colour_px=1000)


def test_report_falls_back_to_log_lines(runs, tmp_path):
    """Without metrics.jsonl the same numbers come from the `fabrikit-train:` log lines."""
    copy = tmp_path / "run"
    shutil.copytree(runs["run"], copy, ignore=shutil.ignore_patterns("report", "checkpoints"))
    (copy / "metrics.jsonl").unlink()
    res = _report(copy, "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    summary = _summary(runs["run"])
    assert data["source"].startswith("node1.log")
    assert data["config"]["world_size"] == 2 and len(data["epochs"]) == 2
    assert data["overall"]["images"] == summary["images"]
    assert data["overall"]["time_s"] == summary["time_s"]


# --------------------------------------------------------------------------------------------
# GPU utilisation


def _gpu_csv(path: Path, start_s: int, utils: dict[int, list[int]]) -> None:
    lines = ["timestamp, index, utilization.gpu [%], memory.used [MiB]"]
    n = len(next(iter(utils.values())))
    for k in range(n):
        t = time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(start_s + 5 * k))
        for index, values in utils.items():
            lines.append(f"{t}.{123 + index:03d}, {index}, {values[k]} %, {40000 + index} MiB")
    path.write_text("\n".join(lines) + "\n")


def test_gpu_utilisation_png_from_gpu_csvs(runs, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(runs["run"], copy, ignore=shutil.ignore_patterns("report", "checkpoints"))
    start = 1_795_000_000
    node1 = {0: [10, 95, 97, 96, 98, 97, 20], 1: [12, 90, 91, 92, 93, 94, 15]}
    node2 = {0: [5, 60, 65, 70, 72, 71, 10], 1: [8, 85, 86, 87, 88, 89, 12]}
    _gpu_csv(copy / "gpu-node1.csv", start, node1)
    _gpu_csv(copy / "gpu-node2.csv", start + 1, node2)
    res = _report(copy)
    assert res.returncode == 0, res.stderr
    png = copy / "report" / "gpu_utilisation.png"
    assert f"  {png}" in res.stdout
    assert "GPU utilisation (gpu-node1.csv, gpu-node2.csv)" in res.stdout
    assert _png_size(png)[0] > 0
    _assert_not_blank(png, TAB_BLUE)  # first series is drawn in matplotlib's first colour

    data = json.loads((copy / "report" / "report.json").read_text())
    gpus = {(g["host"], g["index"]): g for g in data["gpu"]["gpus"]}
    assert set(gpus) == {("node1", 0), ("node1", 1), ("node2", 0), ("node2", 1)}
    for host, utils in (("node1", node1), ("node2", node2)):
        for index, values in utils.items():
            g = gpus[(host, index)]
            assert g["samples"] == len(values)
            assert g["mean_util"] == pytest.approx(sum(values) / len(values), abs=0.05)
            assert g["max_util"] == max(values) and g["max_memory_mib"] == 40000 + index
    hosts = {h["host"]: h for h in data["gpu"]["hosts"]}
    allv = [v for vals in node2.values() for v in vals]
    assert hosts["node2"]["mean_util"] == pytest.approx(sum(allv) / len(allv), abs=0.05)
    assert hosts["node2"]["lowest_gpu"] == 0


# --------------------------------------------------------------------------------------------
# Scaling against a baseline


def test_baseline_scaling_table(runs, tmp_path):
    run, base = runs["run"], runs["base"]
    s, b = _summary(run), _summary(base)
    out = tmp_path / "out"
    res = _report(run, "--baseline", base, "--output", out)
    assert res.returncode == 0, res.stderr

    expected_speedup = (s["images"] / s["time_s"]) / (b["images"] / b["time_s"])
    if s["images"] == b["images"]:  # same work: the tutorials' baseline time / time
        assert expected_speedup == pytest.approx(b["time_s"] / s["time_s"])
    expected_eff = expected_speedup / (s["world_size"] / b["world_size"])

    data = json.loads((out / "report.json").read_text())
    rows = {r["role"]: r for r in data["scaling"]["rows"]}
    assert rows["baseline"]["configuration"] == "1 node x 1 process"
    assert rows["baseline"]["world_size"] == 1 and rows["run"]["world_size"] == 2
    assert rows["baseline"]["speedup"] == pytest.approx(1.0)
    assert rows["baseline"]["efficiency"] == pytest.approx(1.0)
    assert rows["run"]["speedup"] == pytest.approx(expected_speedup, rel=1e-9)
    assert rows["run"]["efficiency"] == pytest.approx(expected_eff, rel=1e-9)
    assert rows["run"]["time_s"] == s["time_s"] and rows["baseline"]["time_s"] == b["time_s"]
    assert data["baseline"]["overall"]["images"] == b["images"]

    text = res.stdout.splitlines()
    table = [l.split() for l in text if l.startswith("  1 node x 1 process") or l.startswith("  2 nodes x 1 process")]
    assert len(table) == 2, res.stdout
    base_row, run_row = table
    assert base_row[-4:] == [f"{b['time_s']:.3f}", f"{b['images_per_s']:.1f}", "1.00", "1.00"]
    assert run_row[-4:] == [f"{s['time_s']:.3f}", f"{s['images_per_s']:.1f}",
                            f"{expected_speedup:.2f}", f"{expected_eff:.2f}"]

    png = out / "throughput.png"
    _assert_not_blank(png, TAB_BLUE)
    _assert_not_blank(png, TAB_GRAY, min_colour_px=100)  # the baseline series


# --------------------------------------------------------------------------------------------
# Bad input


def test_bad_input_is_one_line_exit_2(runs, tmp_path):
    assert "no such run directory" in one_line_error(_report(tmp_path / "missing"))
    (tmp_path / "plain").mkdir()
    assert "not a fabrikit run directory" in one_line_error(_report(tmp_path / "plain"))
    a_file = tmp_path / "file.txt"
    a_file.write_text("x\n")
    assert "not a directory" in one_line_error(_report(a_file))

    # a run directory without a single training line
    empty = tmp_path / "empty"
    empty.mkdir()
    shutil.copy(runs["run"] / "launch.json", empty)
    (empty / "node1.log").write_text("some agent output\n")
    assert "no training lines" in one_line_error(_report(empty))

    # unreadable files
    broken = tmp_path / "broken"
    shutil.copytree(runs["run"], broken, ignore=shutil.ignore_patterns("report", "checkpoints"))
    (broken / "metrics.jsonl").unlink()
    (broken / "metrics.jsonl").mkdir()
    assert "metrics.jsonl" in one_line_error(_report(broken))
    bad_launch = tmp_path / "bad-launch"
    shutil.copytree(runs["run"], bad_launch, ignore=shutil.ignore_patterns("report", "checkpoints"))
    (bad_launch / "launch.json").write_text("{not json")
    assert "launch.json" in one_line_error(_report(bad_launch))

    # a bad baseline fails the same way
    assert "not a fabrikit run directory" in one_line_error(
        _report(runs["run"], "--baseline", tmp_path / "plain"))


def test_runner_imports_neither_torch_nor_matplotlib():
    code = ("import sys, runner.report_cmd, runner.run_report, runner.cli; "
            "bad = [m for m in ('torch', 'matplotlib', 'numpy') if m in sys.modules]; "
            "assert not bad, bad")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


# --------------------------------------------------------------------------------------------
# Pure parsing: Slurm logs (srun --label, requeued attempts), nvidia-smi CSV quirks


def test_slurm_logs_with_requeued_attempts(tmp_path):
    from runner import run_report as rr

    d = tmp_path / "slurm-run"
    d.mkdir()
    (d / "launch.json").write_text(json.dumps({"site": "olivia", "nodes": 2}))
    (d / "profile.yaml").write_text("fabric:\n  kind: slingshot\nscheduler:\n  gpus_per_node: 4\n")
    (d / "job-77.log").write_text(
        "0: fabrikit-train: start nodes=2 procs_per_node=4 world_size=8 device=cuda backend=nccl start_step=0\n"
        "0: fabrikit-train: epoch=0 steps=1-10 time_s=10.0 images_per_s=100.0 loss=2.0 acc=0.1\n"
        "0: fabrikit-train: epoch=1 steps=11-15 time_s=5.0 images_per_s=100.0 loss=nan acc=0.2\n"
        "0: fabrikit-train: stopping on signal SIGUSR1 at step 15, checkpoint saved\n"
        "0: fabrikit-train: summary nodes=2 procs_per_node=4 world_size=8 epochs=1 global_steps=15 "
        "steps_this_run=15 images=1500 time_s=15.0 images_per_s=100.0 final_loss=nan final_acc=0.2\n")
    (d / "job-77.r1.log").write_text(
        "0: fabrikit-train: start nodes=2 procs_per_node=4 world_size=8 device=cuda backend=nccl start_step=15\n"
        "0: fabrikit-train: epoch=1 steps=16-20 time_s=2.5 images_per_s=200.0 loss=1.0 acc=0.5\n"
        "0: fabrikit-train: summary nodes=2 procs_per_node=4 world_size=8 epochs=2 global_steps=20 "
        "steps_this_run=5 images=500 time_s=2.5 images_per_s=200.0 final_loss=1.0 final_acc=0.5\n"
        "0: fabrikit-train: epoch=2 steps=21-2")  # cut last line: dropped
    (d / "slurm-77.out").write_text("same lines again, ignored while job logs exist\n")
    rep = rr.load_run(d)
    assert rep.config.scheduler == "slurm" and rep.config.label == "2 nodes x 4 GPUs"
    assert rep.config.gpus_per_node == 4 and rep.config.fabric == "slingshot"
    assert [a.stopped for a in rep.training.attempts] == ["SIGUSR1", None]
    assert [(e.attempt, e.epoch) for e in rep.training.epochs] == [(1, 0), (1, 1), (2, 1)]
    assert rep.training.epochs[1].loss is None
    assert rep.overall.images == 2000 and rep.overall.time_s == 17.5
    assert rep.overall.images_per_s == pytest.approx(114.3) and rep.overall.complete
    assert rr.per_epoch_throughput(rep.training) == [(0, 100.0), (1, pytest.approx(1000 / 7.5))]
    assert rep.transport.sources == ("job-77.log", "job-77.r1.log")
    # a CUDA job: the verdict's own summary (expected fabric from profile.yaml)
    assert "gloo" not in rep.transport.line and "slingshot" in rep.transport.line
    assert rep.transport.verdict == "none"


@pytest.mark.parametrize("guarded", [True, False])
def test_report_knows_the_ll128_guard_of_the_profile(tmp_path, guarded):
    # An Olivia run: NCCL 2.27 over OFI/cxi, no `NCCL_PROTO set by environment` line (the
    # scripts' NCCL_DEBUG_SUBSYS=INIT,NET hides it); the saved profile sets NCCL_PROTO.
    from runner import run_report as rr
    from runner.profile_loader import load_profile
    from runner.sites_cmd import profile_yaml
    from tests import nccl_logs

    d = tmp_path / "olivia-run"
    d.mkdir()
    (d / "launch.json").write_text(json.dumps({"site": "olivia", "nodes": 2}))
    text = profile_yaml(load_profile("olivia"))
    assert "  NCCL_PROTO: ^LL128\n" in text
    if not guarded:  # neither guard: NCCL_PROTO nor FI_CXI_RDZV_*=0
        from runner.nccl_log import GUARD_ENV

        text = "".join(x for x in text.splitlines(keepends=True)
                       if not x.strip().startswith(tuple(k + ":" for k in GUARD_ENV)))
    (d / "profile.yaml").write_text(text)
    streams = nccl_logs.job(nccl_logs.ofi_cxi_rank, nccl="2.27.3")
    train = [
        "0: fabrikit-train: start nodes=2 procs_per_node=4 world_size=8 device=cuda backend=nccl start_step=0",
        "0: fabrikit-train: epoch=0 steps=1-10 time_s=10.0 images_per_s=100.0 loss=2.0 acc=0.1",
        "0: fabrikit-train: summary nodes=2 procs_per_node=4 world_size=8 epochs=1 global_steps=10 "
        "steps_this_run=10 images=1000 time_s=10.0 images_per_s=100.0 final_loss=2.0 final_acc=0.1"]
    (d / "job-31.log").write_text("\n".join(
        [x for r, s in enumerate(streams) for x in nccl_logs.outer_prefix(s, "srun", rank=r)]
        + train) + "\n")
    rep = rr.load_run(d)
    assert rep.transport.verdict == "fast", rep.transport.line
    assert ("without NCCL_PROTO=^LL128" in rep.transport.line) is not guarded, rep.transport.line


def test_parse_gpu_csv_quirks():
    from runner.run_report import parse_gpu_csv

    lines = [
        "timestamp, index, utilization.gpu [%], memory.used [MiB]",
        "2026/11/22 10:15:00.123, 0, 97 %, 40123 MiB",
        "2026/11/22 10:15:00.124, 1, [N/A], 40000 MiB",
        "timestamp, index, utilization.gpu [%], memory.used [MiB]",  # sampler restarted
        "2026/11/22 10:15:05.123, 0, 50 %, 40124 MiB",
        "2026/11/22 10:15:05.124, 1, 80 %, 40001 MiB",
        "2026/11/22 10:15:1",  # cut last line
    ]
    series = parse_gpu_csv(lines, "nid001")
    assert [(s.host, s.index, s.util) for s in series] == [("nid001", 0, (97.0, 50.0)),
                                                            ("nid001", 1, (80.0,))]
    assert series[0].times[1] - series[0].times[0] == pytest.approx(5.0)
    assert series[0].memory_mib == (40123.0, 40124.0)
    # noheader,nounits
    plain = parse_gpu_csv(["2026/11/22 10:15:00.123, 3, 42, 100"], "h")
    assert plain[0].index == 3 and plain[0].util == (42.0,)


# --------------------------------------------------------------------------------------------
# GPU runs: the guides' scaling table and the utilisation plot. There is no GPU here, so the
# two run directories are FIXTURES standing in for Slurm GPU runs of the default job; their
# records carry the keys a real run writes (checked against the real CPU runs above).

EPOCH_IMAGES_PER_GPU = 50_000  # the CUDA default job: 50,000 images, 256 per GPU


def _kv(fields: dict) -> str:
    return " ".join(f"{k}={'nan' if v is None else (f'{v:.4f}' if isinstance(v, float) and k in ('loss', 'acc', 'final_loss', 'final_acc') else v)}"
                    for k, v in fields.items())


def _gpu_run(path: Path, *, nodes: int, gpn: int, rates: list[float], start_s: int, job_id: int,
             utils: dict[int, list[int]]) -> dict:
    """A run directory as `run-multinode --site raven` leaves it after the default CUDA job:
    launch.json, profile.yaml, job-<id>.log (srun-labelled lines, NCCL over IB), metrics.jsonl
    as train_ddp's Reporter writes it on CUDA, and one gpu-<host>.csv per node. Returns the
    summary record."""
    from runner.profile_loader import load_profile
    from runner.sites_cmd import profile_yaml
    from tests import nccl_logs

    world = nodes * gpn
    steps = -(-EPOCH_IMAGES_PER_GPU // world) // 256
    images = steps * 256 * world
    path.mkdir()
    (path / "launch.json").write_text(json.dumps(
        {"site": "raven", "profile_file": None, "nodes": nodes, "gpus_per_node": None, "nproc_per_node": None,
         "partition": None, "account": None, "time": None, "job_name": None, "requeue": None, "job": []},
        indent=2, sort_keys=True) + "\n")
    (path / "profile.yaml").write_text(profile_yaml(load_profile("raven")))
    now = float(start_s)
    records = [{"event": "start", "time": now, "nodes": nodes, "procs_per_node": gpn, "world_size": world,
                "device": "cuda", "backend": "nccl", "start_step": 0}]
    times = []
    for epoch, rate in enumerate(rates):
        time_s = round(images / rate, 3)
        times.append(time_s)
        now += time_s
        if (epoch + 1) % 5 == 0 or epoch + 1 == len(rates):
            records.append({"event": "checkpoint", "time": now, "step": (epoch + 1) * steps,
                            "path": f"{path}/checkpoints/ckpt-{(epoch + 1) * steps:08d}.pt"})
        records.append({"event": "epoch", "time": now, "epoch": epoch, "steps": f"{epoch * steps + 1}-{(epoch + 1) * steps}",
                        "time_s": time_s, "images_per_s": round(images / time_s, 1), "loss": 2.0 / (epoch + 1),
                        "acc": 0.2 + 0.1 * epoch})
    total = images * len(rates)
    records.append({"event": "summary", "time": now, "nodes": nodes, "procs_per_node": gpn, "world_size": world,
                    "epochs": len(rates), "global_steps": steps * len(rates), "steps_this_run": steps * len(rates),
                    "images": total, "time_s": round(sum(times), 3), "images_per_s": round(total / sum(times), 1),
                    "final_loss": 2.0 / len(rates), "final_acc": 0.2 + 0.1 * (len(rates) - 1),
                    "steady_images_per_s": round(images * (len(rates) - 1) / sum(times[1:]), 1), "checkpoint_s": 0.812})
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    streams = nccl_logs.job(nccl_logs.ib_rank, nodes=nodes, gpn=gpn)
    log = [line for rank, lines in enumerate(streams)
           for line in nccl_logs.outer_prefix(lines, "srun", rank=rank, gpn=gpn)]
    log += [f"0: fabrikit-train: {_kv({k: v for k, v in r.items() if k not in ('event', 'time')})}"
            if r["event"] == "epoch" else
            f"0: fabrikit-train: {r['event']} {_kv({k: v for k, v in r.items() if k not in ('event', 'time')})}"
            for r in records]
    (path / f"job-{job_id}.log").write_text("\n".join(log) + "\n")
    for node in range(nodes):
        _gpu_csv(path / f"gpu-{nccl_logs.rank_host(node * gpn, gpn)}.csv", start_s + node,  # GPU i: 3*i% lower
                 {i: [max(0, u - 3 * i) for u in utils[node]] for i in range(gpn)})
    return records[-1]


@pytest.fixture
def gpu_runs(tmp_path) -> dict[str, tuple[Path, dict]]:
    """{"base": 1 node x 1 GPU, "run": 2 nodes x 4 GPUs}: (run directory, summary record)."""
    start = 1_795_000_000
    base = _gpu_run(tmp_path / "gpu-1", nodes=1, gpn=1, rates=[14_000, 24_800, 25_000, 25_100], start_s=start,
                    job_id=501, utils={0: [0, 97, 98, 98, 97, 98, 97, 98, 97, 20]})
    run = _gpu_run(tmp_path / "gpu-8", nodes=2, gpn=4, rates=[60_000, 157_000, 158_500, 157_900],
                   start_s=start + 900, job_id=502, utils={0: [0, 91, 92, 90, 10], 1: [0, 78, 80, 79, 8]})  # per node
    return {"base": (tmp_path / "gpu-1", base), "run": (tmp_path / "gpu-8", run)}


def test_gpu_run_fixture_has_the_records_of_a_real_run(runs, gpu_runs):
    """The GPU fixtures are only worth something if train_ddp really writes records like them."""
    def keys(path: Path) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for line in (path / "metrics.jsonl").read_text().splitlines():
            record = json.loads(line)
            out.setdefault(record["event"], set()).update(record)
        return out

    real, fixture = keys(runs["run"]), keys(gpu_runs["run"][0])
    for event in ("start", "epoch", "summary"):
        assert fixture[event] == real[event], event


def test_gpu_runs_give_the_guides_scaling_table_and_utilisation_plot(gpu_runs, tmp_path):
    (run, s), (base, b) = gpu_runs["run"], gpu_runs["base"]
    out = tmp_path / "out"
    res = _report(run, "--baseline", base, "--output", out)
    assert res.returncode == 0, res.stderr
    speedup = s["steady_images_per_s"] / b["steady_images_per_s"]
    efficiency = speedup / 8
    assert 6.0 < speedup < 6.5 and 0.75 < efficiency < 0.8  # seed 000's figures: 6.34x, 79%

    text = res.stdout.splitlines()
    head = next(i for i, line in enumerate(text) if line.split() == ["CONFIGURATION", "GPUS", "IMAGES/S",
                                                                    "SPEED-UP", "EFFICIENCY"])
    assert "images/s without each run's warm-up epoch" in text[head - 1]
    assert text[head + 1].split() == ["1", "node", "x", "1", "GPU", "(baseline)", "1",
                                      f"{b['steady_images_per_s']:.1f}", "1.00x", "100%"]
    assert text[head + 2].split() == ["2", "nodes", "x", "4", "GPUs", "8", f"{s['steady_images_per_s']:.1f}",
                                      f"{speedup:.2f}x", f"{efficiency * 100:.0f}%"]
    assert f"  without the warm-up epoch: {s['steady_images_per_s']:.1f} images/s" in text
    assert "device             cuda (nccl)" in res.stdout
    assert "GPU utilisation (gpu-nid001000.csv, gpu-nid001001.csv)" in res.stdout
    node2 = [max(0, u - 3 * i) for i in range(4) for u in (0, 78, 80, 79, 8)]  # see gpu_runs and _gpu_run
    assert (f"nid001001: 4 GPU(s), 20 samples, mean {round(sum(node2) / len(node2), 1):.0f}%, "  # means kept at 0.1
            f"lowest GPU3 {round(sum(node2[15:]) / 5, 1):.0f}%") in res.stdout

    data = json.loads((out / "report.json").read_text())
    assert data["scaling"]["basis"] == "steady" and data["scaling"]["gpus"] is True
    rows = {r["role"]: r for r in data["scaling"]["rows"]}
    assert rows["run"]["speedup"] == pytest.approx(speedup) and rows["run"]["efficiency"] == pytest.approx(efficiency)
    assert rows["run"]["images_per_s"] == s["steady_images_per_s"]
    assert data["overall"]["steady_images_per_s"] == s["steady_images_per_s"]
    assert data["transport"]["transport"] == "ib"
    png = out / "gpu_utilisation.png"
    assert data["files"]["gpu_utilisation"] == str(png)
    _assert_not_blank(png, TAB_BLUE)
    _assert_not_blank(out / "throughput.png", TAB_GRAY, min_colour_px=100)


def test_report_cmd_runs_as_a_module(tmp_path):
    res = subprocess.run([sys.executable, "-m", "runner.report_cmd", str(tmp_path / "missing")], cwd=ROOT,
                         capture_output=True, text=True)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.strip() == f"fabrikit report: error: {tmp_path / 'missing'}: no such run directory"
