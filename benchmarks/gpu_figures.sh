#!/usr/bin/env bash
# The GPU figures of the bundled job, in one go, on a machine with one CUDA GPU, torch and
# fabrikit installed: where the step time goes, train_ddp beside the tutorial loop and the
# ceiling, the default job through local mode (and its report), and local mode with more
# nodes than GPUs.
#
# Usage: benchmarks/gpu_figures.sh [OUTDIR] [SECONDS]
#   OUTDIR   where session.log and runs.tgz go (default ./gpu-figures)
#   SECONDS  deadline for the whole script (default 560): each step gets what is left, so
#            a lease with a hard limit still returns the log of every step that ran.
# Steps to run can be chosen with GPU_FIGURES_STEPS (default: all, in this order):
#   breakdown throughput nodes2 default scaling
# and the breakdown's options with BREAKDOWN_ARGS (e.g. "--rounds 3 --variants=-ddp,step,graph").
set -u
out=${1:-gpu-figures}
deadline=$(( $(date +%s) + ${2:-560} ))
steps=${GPU_FIGURES_STEPS:-breakdown throughput nodes2 default scaling}
mkdir -p "$out"
runs=$(mktemp -d /tmp/gpu-figures-runs.XXXXXX)
log="$out/session.log"
export PYTHONUNBUFFERED=1
: >"$log"

# step NAME COMMAND...: run with what is left of the deadline, log everything, say how it ended.
step() {
    local name=$1 left rc started
    shift
    left=$(( deadline - $(date +%s) ))
    if (( left < 20 )); then
        echo "=== $name skipped: ${left}s left" | tee -a "$log"
        return
    fi
    started=$(date +%s)
    echo "=== $name (at most ${left}s): $*" | tee -a "$log"
    timeout --signal=TERM --kill-after=10 "$left" "$@" >>"$log" 2>&1
    rc=$?
    echo "=== $name rc=$rc in $(( $(date +%s) - started ))s" | tee -a "$log"
}

step versions bash -c 'nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,utilization.gpu --format=csv; python3 -c "import torch; print(\"torch\", torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0), \"nccl\", torch.cuda.nccl.version())"; fabrikit --version'
for s in $steps; do
    case $s in
    breakdown)
        # shellcheck disable=SC2086  # BREAKDOWN_ARGS is a list of options
        step breakdown python3 -m torch.distributed.run --standalone --nproc-per-node 1 \
            benchmarks/train_step_breakdown.py ${BREAKDOWN_ARGS:-} ;;
    throughput)
        step throughput python3 benchmarks/train_throughput.py ;;
    nodes2)
        # One GPU, two simulated nodes: one line, then CPU with gloo (or exit 2), never NCCL's
        # Duplicate GPU traceback.
        step nodes2 run-multinode --site local --nodes 2 --run-dir "$runs/nodes2" ;;
    default)
        step default run-multinode --site local --nodes 1 --run-dir "$runs/default"
        step default-report fabrikit report "$runs/default"
        step default-check-log bash -c "fabrikit check-log $runs/default/node*.log" ;;
    scaling)
        # The report's scaling table and GPU plot from two short runs (one GPU: speed-up ~1).
        for k in 1 2; do
            step "short$k" run-multinode --site local --nodes 1 --run-dir "$runs/short$k" -- train_ddp.py --epochs 4
        done
        step short-report fabrikit report "$runs/short2" --baseline "$runs/short1" ;;
    *)
        echo "=== unknown step $s" | tee -a "$log" ;;
    esac
done
grep -h "images_per_s\|ratio\|GPUs\|gloo\|summary" "$log" | tail -n 40
tar -czf "$out/runs.tgz" --exclude="*.pt" -C "$runs" . 2>/dev/null
