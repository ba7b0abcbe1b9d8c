"""The numbers a report derives from training records: images/s over all attempts, with and
without warm-up epochs, per epoch for the plot, and the scaling table against a baseline run.
Pure: records (runner.report_model) in, records out.
"""

from __future__ import annotations

from .errors import UserError
from .report_model import Overall, RunReport, Scaling, ScalingRow, Training


def overall(training: Training) -> Overall | None:
    """Images / time over all attempts: summaries where printed, epoch lines otherwise."""
    images = time_s = 0.0
    estimated = False
    seen = False
    for a in training.attempts:
        if a.summary is not None:
            images += a.summary.images
            time_s += a.summary.time_s
            seen = True
        elif a.epochs:
            images += sum(e.images for e in a.epochs)
            time_s += sum(e.time_s for e in a.epochs)
            estimated = seen = True
    if not seen:
        return None
    last = training.last_summary
    complete = all(a.summary is not None for a in training.attempts)
    epochs = training.epochs
    if len(training.attempts) == 1 and last is not None and last.images_per_s is not None:
        ips = last.images_per_s  # exactly what the job printed
    else:
        ips = round(images / time_s, 1) if time_s > 0 else 0.0
    final_loss = last.final_loss if complete and last else (epochs[-1].loss if epochs else None)
    final_acc = last.final_acc if complete and last else (epochs[-1].acc if epochs else None)
    return Overall(
        images=round(images, 1) if estimated else int(images), time_s=round(time_s, 3),
        images_per_s=ips,
        epochs=last.epochs if complete and last else (max(e.epoch for e in epochs) + 1 if epochs else None),
        global_steps=last.global_steps if complete and last else None,
        final_loss=final_loss, final_acc=final_acc, complete=complete, estimated=estimated,
        steady_images_per_s=steady_throughput(training))


def steady_throughput(training: Training) -> float | None:
    """images/s without each attempt's first epoch, which pays for warm-up (on GPUs cudnn
    autotuning, NCCL set-up, DDP's bucket rebuild); None when no later epoch exists.

    One attempt: what the job printed (`steady_images_per_s`); several: from the epoch
    lines (images estimated from their rounded images/s and time)."""
    if len(training.attempts) == 1 and training.attempts[0].summary is not None:
        printed = training.attempts[0].summary.steady_images_per_s
        if printed is not None:
            return printed
    later = [e for a in training.attempts for e in a.epochs[1:]]
    time_s = sum(e.time_s for e in later)
    return round(sum(e.images for e in later) / time_s, 1) if time_s > 0 else None


def per_epoch_throughput(training: Training) -> list[tuple[int, float]]:
    """(epoch, images/s) for plotting; an epoch split over attempts is merged."""
    acc: dict[int, list[float]] = {}
    for e in training.epochs:
        images_time = acc.setdefault(e.epoch, [0.0, 0.0, 0.0])
        images_time[0] += e.images
        images_time[1] += e.time_s
        images_time[2] += 1
    out = []
    for epoch in sorted(acc):
        images, t, n = acc[epoch]
        if n == 1:
            ips = next(x.images_per_s for x in training.epochs if x.epoch == epoch)
        else:
            ips = images / t if t > 0 else 0.0
        out.append((epoch, ips))
    return out


def scaling(run: RunReport, baseline: RunReport) -> Scaling:
    """The tutorials' scaling table: baseline row, this run's row.

    speed-up = this run's images/s / the baseline's (= baseline time / this time when both
    trained on the same number of images); efficiency = speed-up / (W / W_baseline).
    """
    rows = []
    for role, rep in (("baseline", baseline), ("run", run)):
        if rep.overall is None or rep.overall.time_s <= 0:
            raise UserError(f"{rep.run_dir}: no finished epoch or summary, nothing to compare")
        if not rep.config.world_size:
            raise UserError(f"{rep.run_dir}: world size unknown, cannot compute efficiency")
    b = baseline.overall
    assert b is not None and run.overall is not None
    # GPU runs are compared on images/s without their warm-up epoch: at a few seconds per
    # epoch its cudnn autotuning and NCCL set-up would weigh on the run with more GPUs.
    gpus = run.config.device == "cuda" and baseline.config.device == "cuda"
    steady = gpus and run.overall.steady_images_per_s is not None and b.steady_images_per_s is not None

    def rate(o: Overall) -> float:
        return (o.steady_images_per_s or 0.0) if steady else o.raw_throughput

    for role, rep in (("baseline", baseline), ("run", run)):
        o = rep.overall
        assert o is not None
        speedup = rate(o) / rate(b) if rate(b) > 0 else float("nan")
        ratio = rep.config.world_size / baseline.config.world_size
        rows.append(ScalingRow(role, str(rep.run_dir), rep.config.label, rep.config.world_size,
                               o.images, o.time_s, rate(o) if steady else o.images_per_s,
                               speedup, speedup / ratio))
    same = run.overall.images == b.images and not (run.overall.estimated or b.estimated)
    return Scaling(tuple(rows), "steady" if steady else "time" if same else "throughput", gpus)
