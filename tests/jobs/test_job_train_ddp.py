"""jobs/train_ddp.py: output lines, exact resume after a signal, checkpoint selection, CIFAR loader."""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import signal
from pathlib import Path

import pytest
import torch

import train_ddp
from train_ddp import (
    checkpoint_name,
    find_checkpoint,
    load_cifar10,
    marker_name,
    prune_checkpoints,
    save_checkpoint,
)

# 256 images / (2 ranks x 16) = 8 steps per epoch, 16 steps in all.
SMALL = ["--synthetic-size", "256", "--batch-size", "16", "--epochs", "2", "--log-every-step"]
STEPS_PER_EPOCH, TOTAL_STEPS = 8, 16
STEP_RE = re.compile(r"^fabrikit-train: step=(\d+) loss=(\S+)$", re.M)


def step_losses(run) -> dict[int, str]:
    """Step number -> loss text of every ``step=`` line; fails on a repeated step."""
    found = [(int(s), loss) for s, loss in STEP_RE.findall(run.output)]
    steps = [s for s, _ in found]
    assert len(steps) == len(set(steps)), f"step logged twice: {steps}"
    return dict(found)


def final_model(ckpt_dir: Path) -> dict[str, torch.Tensor]:
    choice = find_checkpoint(ckpt_dir)
    assert choice.state is not None, choice.skipped
    return choice.state["model"]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory, run_job):
    """An uninterrupted 2-process run of the SMALL config (with a final checkpoint)."""
    work = tmp_path_factory.mktemp("reference")
    run = run_job("train_ddp.py", [*SMALL, "--checkpoint-dir", str(work / "ckpt"), "--output-dir", str(work)], cwd=work)
    assert run.returncode == 0, run.output
    return run, work


@pytest.mark.slow
def test_two_process_run_reports_start_epochs_and_summary(reference) -> None:
    run, work = reference
    start = run.one("fabrikit-train: start ")
    assert start == {"nodes": "1", "procs_per_node": "2", "world_size": "2", "device": "cpu", "backend": "gloo",
                     "start_step": "0"}
    epochs = run.all("fabrikit-train: epoch=")
    assert [(e["epoch"], e["steps"]) for e in epochs] == [("0", "1-8"), ("1", "9-16")]
    for e in epochs:
        assert float(e["time_s"]) > 0 and float(e["images_per_s"]) > 0
        assert 0.0 <= float(e["acc"]) <= 1.0 and float(e["loss"]) > 0
    summary = run.one("fabrikit-train: summary ")
    assert summary["world_size"] == "2" and summary["procs_per_node"] == "2" and summary["nodes"] == "1"
    assert (summary["epochs"], summary["global_steps"], summary["steps_this_run"]) == ("2", "16", "16")
    assert summary["images"] == str(TOTAL_STEPS * 2 * 16)
    assert summary["final_loss"] == epochs[-1]["loss"] and summary["final_acc"] == epochs[-1]["acc"]
    assert sorted(step_losses(run)) == list(range(1, TOTAL_STEPS + 1))
    # Epoch-end checkpoints, each with its completion marker.
    assert [c["step"] for c in run.all("fabrikit-train: checkpoint ")] == ["8", "16"]
    assert (work / "ckpt" / marker_name(16)).is_file()
    records = [json.loads(line) for line in (work / "metrics.jsonl").read_text().splitlines()]
    assert [r["event"] for r in records] == ["start", "checkpoint", "epoch", "checkpoint", "epoch", "summary"]
    assert records[-1]["global_steps"] == 16 and records[-1]["images"] == 512


@pytest.mark.slow
def test_sigterm_to_torchrun_then_resume_continues_exactly(reference, tmp_path: Path, run_job, start_job) -> None:
    ref_run, ref_dir = reference
    ckpt = tmp_path / "ckpt"
    args = [*SMALL, "--checkpoint-dir", str(ckpt), "--checkpoint-every", "1", "--output-dir", str(tmp_path)]
    job = start_job("train_ddp.py", [*args, "--step-sleep", "0.3"], tmp_path)
    job.wait_for(r"fabrikit-train: step=3 ")
    job.proc.send_signal(signal.SIGTERM)  # to the torchrun agent, which forwards it to both workers
    first = job.finish()

    stop = re.search(r"^fabrikit-train: stopping on signal SIGTERM at step (\d+), checkpoint saved$", first.output, re.M)
    assert stop, first.output
    stopped_at = int(stop.group(1))
    assert 3 <= stopped_at < TOTAL_STEPS
    # Workers stopped on their own (exit 75, see the next test); torchrun, being signalled
    # itself, exits 1. It never had to SIGKILL a worker.
    assert first.returncode == 1
    assert "forcefully exiting" not in first.output
    assert (ckpt / checkpoint_name(stopped_at)).is_file() and (ckpt / marker_name(stopped_at)).is_file()
    assert first.one("fabrikit-train: summary ")["global_steps"] == str(stopped_at)

    second = run_job("train_ddp.py", [*args, "--resume"], cwd=tmp_path)
    assert second.returncode == 0, second.output
    assert f"fabrikit-train: resuming from {checkpoint_name(stopped_at)} (step {stopped_at})" in second.output
    assert second.one("fabrikit-train: start ")["start_step"] == str(stopped_at)

    before, after = step_losses(first), step_losses(second)
    assert sorted(before) == list(range(1, stopped_at + 1))
    assert sorted(after) == list(range(stopped_at + 1, TOTAL_STEPS + 1))
    summary = second.one("fabrikit-train: summary ")
    assert summary["global_steps"] == ref_run.one("fabrikit-train: summary ")["global_steps"] == str(TOTAL_STEPS)
    assert summary["steps_this_run"] == str(TOTAL_STEPS - stopped_at)
    # Exactly the same computation as without the interruption: same loss at every step,
    # bit-identical final weights (CPU, one thread, two-rank sums are deterministic).
    assert {**before, **after} == step_losses(ref_run)
    ref_model, model = final_model(ref_dir / "ckpt"), final_model(ckpt)
    assert ref_model.keys() == model.keys()
    assert all(torch.equal(ref_model[k], model[k]) for k in ref_model)
    stopped = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()
               if '"stopped"' in line]
    assert stopped == [{**stopped[0], "event": "stopped", "signal": "SIGTERM", "step": stopped_at, "checkpoint": True}]


@pytest.mark.slow
def test_sigusr1_to_one_rank_stops_every_rank_with_exit_75(tmp_path: Path, start_job, fake_cifar10) -> None:
    """Slurm's --signal may reach only some ranks; all must agree and stop together.

    Also the end-to-end run on CIFAR-10-format data (--data-dir).
    """
    data = fake_cifar10(tmp_path / "data", per_batch=32)  # 160 train images: 5 steps per epoch
    ckpt = tmp_path / "ckpt"
    job = start_job("train_ddp.py", ["--data-dir", str(data), "--batch-size", "16", "--epochs", "3", "--log-every-step",
                                     "--step-sleep", "0.3", "--checkpoint-dir", str(ckpt), "--output-dir", str(tmp_path)],
                    tmp_path)
    job.wait_for(r"fabrikit-train: config data=cifar10:")
    job.wait_for(r"fabrikit-train: step=2 ")
    os.kill(job.worker_pid(rank=1), signal.SIGUSR1)
    run = job.finish()
    stop = re.search(r"^fabrikit-train: stopping on signal SIGUSR1 at step (\d+), checkpoint saved$", run.output, re.M)
    assert stop, run.output
    # torchrun's failure summary lists each worker's own exit status: the documented 75.
    codes = re.findall(r"exitcode\s*:\s*(-?\d+)", run.output)
    assert codes and set(codes) == {"75"}, run.output
    assert (ckpt / marker_name(int(stop.group(1)))).is_file()
    assert run.one("fabrikit-train: start ")["world_size"] == "2"


@pytest.mark.slow
def test_cifar10_run_with_augmentation_reports_test_set_accuracy(tmp_path: Path, run_job, fake_cifar10) -> None:
    """--data-dir with a test_batch: the trained model is evaluated on it after the last epoch."""
    data = fake_cifar10(tmp_path / "data", per_batch=32)  # 160 train images, 32 test images
    run = run_job("train_ddp.py", ["--data-dir", str(data), "--batch-size", "16", "--epochs", "2", "--augment",
                                   "--output-dir", str(tmp_path)], cwd=tmp_path)
    assert run.returncode == 0, run.output
    assert "augment=crop+flip test_set=test_batch" in run.output
    evaluation = run.one("fabrikit-train: eval ")
    assert evaluation["images"] == "32" and 0.0 <= float(evaluation["acc"]) <= 1.0 and float(evaluation["loss"]) > 0
    summary = run.one("fabrikit-train: summary ")
    epochs = run.all("fabrikit-train: epoch=")
    assert summary["steady_images_per_s"] == epochs[1]["images_per_s"]  # the epoch after the warm-up one
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["event"] for r in records] == ["start", "epoch", "epoch", "eval", "summary"]
    assert records[3]["images"] == 32 and records[-1]["checkpoint_s"] == 0.0


@pytest.mark.slow
def test_resume_skips_truncated_and_unmarked_checkpoints(reference, tmp_path: Path, run_job) -> None:
    ref_run, ref_dir = reference
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    good = ref_dir / "ckpt" / checkpoint_name(STEPS_PER_EPOCH)
    shutil.copy(good, ckpt / good.name)
    shutil.copy(ref_dir / "ckpt" / marker_name(STEPS_PER_EPOCH), ckpt / marker_name(STEPS_PER_EPOCH))
    # Step 12: complete marker, but the file was truncated afterwards.
    data = good.read_bytes()
    save_marker_for(ckpt, 12, data)
    (ckpt / checkpoint_name(12)).write_bytes(data[: len(data) // 2])
    # Step 14: the writer died between rename and marker.
    (ckpt / checkpoint_name(14)).write_bytes(data)

    run = run_job("train_ddp.py", [*SMALL, "--checkpoint-dir", str(ckpt), "--resume", "--output-dir", str(tmp_path)],
                  cwd=tmp_path)
    assert run.returncode == 0, run.output
    line = next(ln for ln in run.output.splitlines() if ln.startswith("fabrikit-train: resuming"))
    assert line == (f"fabrikit-train: resuming from ckpt-00000008.pt (step 8); "
                    f"skipped ckpt-00000014.pt: no completion marker; "
                    f"skipped ckpt-00000012.pt: size {len(data) // 2} != {len(data)} in completion marker (truncated)")
    assert sorted(step_losses(run)) == list(range(STEPS_PER_EPOCH + 1, TOTAL_STEPS + 1))
    assert run.one("fabrikit-train: summary ")["global_steps"] == str(TOTAL_STEPS)


def test_resume_without_checkpoints_starts_fresh(tmp_path: Path) -> None:
    choice = find_checkpoint(tmp_path / "nothing-here")
    assert choice.path is None and choice.skipped == []


# ------------------------------------------------------------------ checkpoint unit tests


def save_marker_for(directory: Path, step: int, data: bytes) -> None:
    """A completion marker as save_checkpoint writes it, for ``data``."""
    import hashlib

    marker = {"checkpoint": checkpoint_name(step), "step": step, "size": len(data),
              "sha256": hashlib.sha256(data).hexdigest()}
    (directory / marker_name(step)).write_text(json.dumps(marker))


def tiny_state(step: int) -> dict:
    return {"format": train_ddp.CHECKPOINT_FORMAT, "global_step": step, "model": {"w": torch.full((4,), float(step))}}


def test_find_checkpoint_picks_newest_valid_and_says_why_others_were_skipped(tmp_path: Path) -> None:
    for step in (10, 20, 30, 40, 50):
        save_checkpoint(tmp_path, step, tiny_state(step), keep=0)
    (tmp_path / marker_name(50)).unlink()  # half-written: no marker
    p40 = tmp_path / checkpoint_name(40)
    p40.write_bytes(p40.read_bytes()[:-100])  # truncated after completion
    p30 = tmp_path / checkpoint_name(30)
    raw = bytearray(p30.read_bytes())
    raw[len(raw) // 2] ^= 0xFF  # same size, one flipped byte
    p30.write_bytes(bytes(raw))
    (tmp_path / checkpoint_name(60)).write_bytes(b"junk")  # marker-less junk is never read
    (tmp_path / marker_name(70)).write_text("{}")  # marker without its file
    (tmp_path / ".ckpt-00000080.pt.tmp-123").write_bytes(b"partial")  # writer in progress

    choice = find_checkpoint(tmp_path)
    assert choice.path == tmp_path / checkpoint_name(20)
    assert choice.state is not None and choice.state["global_step"] == 20
    assert torch.equal(choice.state["model"]["w"], torch.full((4,), 20.0))
    reasons = dict(choice.skipped)
    assert [name for name, _ in choice.skipped] == [checkpoint_name(s) for s in (70, 60, 50, 40, 30)]
    assert reasons[checkpoint_name(70)] == "completion marker but no checkpoint file"
    assert reasons[checkpoint_name(60)] == reasons[checkpoint_name(50)] == "no completion marker"
    assert "(truncated)" in reasons[checkpoint_name(40)]
    assert "sha256 does not match" in reasons[checkpoint_name(30)]


def test_find_checkpoint_skips_a_verified_file_that_does_not_load(tmp_path: Path) -> None:
    save_checkpoint(tmp_path, 1, tiny_state(1), keep=0)
    bad = b"PK\x03\x04 not really a zip archive" * 10
    (tmp_path / checkpoint_name(2)).write_bytes(bad)
    save_marker_for(tmp_path, 2, bad)  # marker matches, content is not a checkpoint
    choice = find_checkpoint(tmp_path)
    assert choice.path == tmp_path / checkpoint_name(1)
    assert choice.skipped[0][0] == checkpoint_name(2) and choice.skipped[0][1].startswith("does not load")


def test_save_checkpoint_is_atomic_and_keeps_the_last_k(tmp_path: Path) -> None:
    (tmp_path / checkpoint_name(1)).write_bytes(b"leftover of a killed writer")
    for step in range(2, 8):
        save_checkpoint(tmp_path, step, tiny_state(step), keep=3)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted(f(s) for s in (5, 6, 7) for f in (checkpoint_name, marker_name))
    marker = json.loads((tmp_path / marker_name(7)).read_text())
    assert marker["step"] == 7 and marker["size"] == (tmp_path / checkpoint_name(7)).stat().st_size
    # An unmarked checkpoint newer than every complete one is left alone (it may be resumed
    # from once its marker exists); keep=0 keeps everything.
    (tmp_path / checkpoint_name(9)).write_bytes(b"x")
    prune_checkpoints(tmp_path, keep=0)
    assert (tmp_path / checkpoint_name(9)).exists() and (tmp_path / checkpoint_name(5)).exists()


@pytest.mark.parametrize("size,world", [(100, 1), (100, 2), (101, 4), (3, 8), (10, 3)])
def test_epoch_order_is_distributed_samplers(size: int, world: int) -> None:
    """Same partition and order as DistributedSampler (padding by wrap-around included), so
    checkpoints keep meaning the same batches."""
    for rank in range(world):
        for epoch, seed in ((0, 0), (4, 3), (7, 11)):
            sampler = torch.utils.data.DistributedSampler(range(size), num_replicas=world, rank=rank, shuffle=True,
                                                          seed=seed)
            sampler.set_epoch(epoch)
            assert train_ddp.epoch_order(size, world, rank, epoch, seed).tolist() == list(sampler)


def _batches(data, *, rank: int = 0, world: int = 2, augment: bool = False, chunk: int = 8192, epoch: int = 4,
             start: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    cpu = torch.device("cpu")
    batches = train_ddp.DeviceBatches(data, cpu, world_size=world, rank=rank, batch_size=8, seed=3, augment=augment,
                                      fmt=train_ddp.InputFormat.for_device(cpu), chunk_images=chunk)
    return list(batches.epoch(epoch, start))


@pytest.mark.parametrize("augment", [False, True])
def test_device_batches_continue_the_epoch_at_the_next_batch(augment: bool) -> None:
    data = train_ddp.synthetic_cifar(100, seed=1)
    full = _batches(data, augment=augment)
    assert len(full) == 6  # ceil(100 / 2) // 8
    for x, y in full:
        assert x.shape == (8, 3, 32, 32) and x.dtype == torch.float32 and x.is_contiguous() and y.shape == (8,)
    # Resuming at batch 3 gives exactly the rest, however the epoch is cut into chunks.
    for resumed in (_batches(data, augment=augment, start=3), _batches(data, augment=augment, start=3, chunk=16)):
        assert len(resumed) == 3
        assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(full[3:], resumed))
    other = _batches(data, augment=augment, epoch=5)
    assert not torch.equal(torch.cat([x for x, _ in full]), torch.cat([x for x, _ in other]))


def test_device_batches_cover_the_data_set_once_per_epoch_over_all_ranks() -> None:
    images = train_ddp.synthetic_cifar(48, seed=2).images
    data = train_ddp.ImageSet(images, torch.arange(48))  # label = image number
    normalise = train_ddp.Normaliser(torch.device("cpu"), train_ddp.InputFormat.for_device(torch.device("cpu")))
    batches = [b for rank in range(3) for b in _batches(data, rank=rank, world=3)]
    numbers = torch.cat([y for _, y in batches])
    assert sorted(numbers.tolist()) == list(range(48))
    assert torch.equal(torch.cat([x for x, _ in batches]), normalise(images[numbers]))


CUDA_LAYOUT_ON_CPU = """
import argparse, sys, warnings
import torch, torch.distributed as dist, torch.nn.functional as F
import train_ddp as t
warnings.simplefilter("error")  # DDP's 'Grad strides do not match bucket view strides' included
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
cpu = torch.device("cpu")
torch.manual_seed(0)
model = t.CifarResNet(width=8).to(memory_format=torch.channels_last)
ddp = t.wrap_ddp(model, cpu)
optimizer = t.make_optimizer(model, argparse.Namespace(lr=0.1, weight_decay=5e-4))
fmt = t.InputFormat(torch.bfloat16, torch.channels_last)  # what InputFormat.for_device gives on CUDA
batches = t.DeviceBatches(t.synthetic_cifar(32, 0), cpu, world_size=1, rank=0, batch_size=8, seed=0,
                          augment=True, fmt=fmt, chunk_images=16)
losses = []
for x, y in batches.epoch(0):
    assert x.dtype == torch.bfloat16 and x.is_contiguous(memory_format=torch.channels_last), (x.dtype, x.stride())
    with fmt.autocast(cpu):
        loss = F.cross_entropy(ddp(x), y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
bad = [n for n, p in model.named_parameters() if p.grad.stride() != p.stride()]
assert not bad, bad
result = t.evaluate(model, t.synthetic_cifar(20, 1), cpu, 8, fmt)
assert result["images"] == 20 and 0 <= result["acc"] <= 1, result
# A world of one trains the model itself (nothing to average); more ranks train through DDP.
assert t.distributed_model(model, cpu, 1) is model
assert isinstance(t.distributed_model(model, cpu, 2), torch.nn.parallel.DistributedDataParallel)
dist.destroy_process_group()
print("steps", len(losses), "finite", all(l == l for l in losses))
"""


@pytest.mark.slow
def test_cuda_layout_runs_on_cpu_tensors(tmp_path: Path) -> None:
    """The CUDA configuration (bf16 channels_last input, channels_last model under autocast,
    launch-lean DDP, evaluation) driven on CPU tensors, as far as it can be without a GPU."""
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-c", CUDA_LAYOUT_ON_CPU], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(Path(train_ddp.__file__).parent), "OMP_NUM_THREADS": "1"},
                         timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.split() == ["steps", "4", "finite", "True"]  # 32 images / 8, prepared in 2 chunks


def test_crop_flip_is_padded_random_crop_and_mirror() -> None:
    gen = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (6, 3, 32, 32), generator=gen, dtype=torch.uint8)
    offsets = torch.tensor([[0, 0], [8, 8], [4, 4], [0, 8], [3, 5], [8, 0]])
    flips = torch.tensor([False, False, True, True, False, True])
    out = train_ddp.crop_flip(images, offsets, flips)
    assert out.shape == (6, 3, 32, 32) and out.dtype == torch.uint8
    assert out.is_contiguous(memory_format=torch.channels_last)
    padded = torch.nn.functional.pad(images, (4, 4, 4, 4))
    for b in range(6):
        dy, dx = offsets[b].tolist()
        ref = padded[b, :, dy:dy + 32, dx:dx + 32]
        assert torch.equal(out[b], ref.flip(-1) if flips[b] else ref), b
    assert torch.equal(out[2], images[2].flip(-1))  # centred crop + flip: the mirror image


def test_augmentation_is_a_function_of_seed_epoch_and_image() -> None:
    a, b = train_ddp.augment_params(50, epoch=2, seed=1), train_ddp.augment_params(50, epoch=2, seed=1)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert a[0].min() >= 0 and a[0].max() <= 2 * train_ddp.AUGMENT_PAD
    assert not torch.equal(a[0], train_ddp.augment_params(50, epoch=3, seed=1)[0])


def test_workload_defaults_depend_on_the_device() -> None:
    cpu = train_ddp.apply_workload(train_ddp.parse_args([]), "cpu")
    assert (cpu.epochs, cpu.batch_size, cpu.synthetic_size, cpu.width, cpu.augment, cpu.checkpoint_epochs) == (
        2, 32, 512, 16, False, 1)  # what CI's local CPU runs have always used
    cuda = train_ddp.apply_workload(train_ddp.parse_args([]), "cuda")
    assert (cuda.epochs, cuda.batch_size, cuda.synthetic_size, cuda.width, cuda.augment, cuda.blocks) == (
        30, 256, 50_000, 64, True, (2, 2, 2, 2))  # ResNet-18 on CIFAR-10-sized data, the guides' table
    given = train_ddp.apply_workload(train_ddp.parse_args(["--epochs", "3", "--width", "8", "--no-augment"]), "cuda")
    assert (given.epochs, given.width, given.augment, given.batch_size) == (3, 8, False, 256)


def test_bad_numbers_are_usage_errors(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        train_ddp.parse_args(["--batch-size", "0"])
    assert exc.value.code == 2 and "--batch-size must be >= 1, got 0" in capsys.readouterr().err


def test_lr_schedule_is_a_function_of_the_step() -> None:
    lrs = [train_ddp.lr_at(s, 0.1, 100) for s in range(100)]
    assert lrs[0] < lrs[4] == pytest.approx(0.1)  # 5 warm-up steps
    assert all(a >= b for a, b in zip(lrs[4:], lrs[5:])) and lrs[-1] < 0.001


# ------------------------------------------------------------------------- data loading


def test_load_cifar10_reads_the_python_pickle_format(tmp_path: Path, fake_cifar10) -> None:
    import numpy as np

    root = fake_cifar10(tmp_path, per_batch=7)
    train = load_cifar10(root)
    assert train.images.shape == (35, 3, 32, 32) and train.images.dtype == torch.uint8
    assert train.labels.shape == (35,) and train.labels.dtype == torch.int64
    # Files in order data_batch_1..5, planes R, G, B, rows of 32.
    assert train.images[:, 0, 0, 0].tolist() == [b for b in range(5) for _ in range(7)]
    assert train.images[:, 1, 0, 0].tolist() == list(range(7)) * 5
    with (root / "data_batch_3").open("rb") as f:
        raw = pickle.load(f, encoding="bytes")
    first = np.asarray(raw[b"data"][0]).reshape(3, 32, 32)
    assert torch.equal(train.images[14], torch.from_numpy(first))
    assert train.labels[14:21].tolist() == raw[b"labels"]

    test = load_cifar10(tmp_path, train=False)  # parent of cifar-10-batches-py works too
    assert test.images.shape == (7, 3, 32, 32) and test.images[:, 0, 0, 0].tolist() == [5] * 7


def test_load_cifar10_errors(tmp_path: Path, fake_cifar10) -> None:
    root = fake_cifar10(tmp_path)
    (root / "data_batch_4").unlink()
    with pytest.raises(FileNotFoundError, match="data_batch_4"):
        load_cifar10(root)
    # A batch file that would run code when unpickled is refused.
    (root / "data_batch_4").write_bytes(pickle.dumps({b"data": Path("/etc/passwd")}))
    with pytest.raises(pickle.UnpicklingError, match="refusing"):
        load_cifar10(root)


def test_synthetic_data_is_deterministic_and_learnable_shape() -> None:
    a, b = train_ddp.synthetic_cifar(64, seed=1), train_ddp.synthetic_cifar(64, seed=1)
    assert torch.equal(a.images, b.images) and torch.equal(a.labels, b.labels)
    assert not torch.equal(a.images, train_ddp.synthetic_cifar(64, seed=2).images)
    model = train_ddp.CifarResNet(width=4)
    assert model(a.images[:2].float()).shape == (2, 10)
