"""Which GPUs this machine shows, and how local mode shares them between simulated nodes.

Local mode starts one torchrun agent per "node" on one machine. Left alone, every agent's
rank 0 takes device 0, and NCCL stops the job with `Duplicate GPU detected` buried in two
torchrun tracebacks. So each agent gets its own GPUs through the runtime's visibility
variable (`CUDA_VISIBLE_DEVICES` on NVIDIA, `ROCR_VISIBLE_DEVICES` on AMD, the level ROCm
recommends masking at), and when there are fewer GPUs than ranks the GPUs are hidden (the
variable set empty, which both runtimes document as "no device") and the job trains on
CPU with gloo, after one line that says so.

Detection (`detect`) reads `nvidia-smi -L` or the AMD KFD topology in sysfs, never torch:
this is the host CLI. It is kept apart from the pure `split`, which the local plan calls
with whatever was detected (tests inject GPU lists).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

CUDA_VARIABLE = "CUDA_VISIBLE_DEVICES"
# The columns local mode's GPU sampler writes, the same as the Slurm monitor's
# (templates/slurm_gpu_monitor.sh.in, kept literal there: the Slurm render does not import
# this module): `fabrikit report` plots them (runner.gpu_samples reads them by their header).
NVIDIA_QUERY = "timestamp,index,utilization.gpu,memory.used"
LOCAL_SAMPLE_MS = 1000  # local runs are minutes long: one sample a second, not Slurm's 5 s
ROCM_VARIABLE = "ROCR_VISIBLE_DEVICES"
KFD_NODES = Path("/sys/class/kfd/kfd/topology/nodes")
_GPU_LINE = re.compile(r"^GPU (\d+):")
_MIG_LINE = re.compile(r"^\s+MIG .*\(UUID: (MIG-[^)\s]+)\)")


@dataclass(frozen=True)
class VisibleGpus:
    """The GPUs a local run may hand out, as the visibility variable names them."""

    ids: tuple[str, ...]  # indices ("0") or UUIDs ("GPU-...", "MIG-...")
    variable: str  # CUDA_VISIBLE_DEVICES or ROCR_VISIBLE_DEVICES
    source: str  # where the list came from, for messages


@dataclass(frozen=True)
class GpuSplit:
    """What each simulated node sees: ``per_node[k]`` is node k+1's value of ``variable``."""

    variable: str
    per_node: tuple[str, ...]  # "" hides every GPU
    note: str | None = None  # the one line to print when the GPUs cannot be used

    @property
    def hidden(self) -> bool:
        return all(value == "" for value in self.per_node)

    def sampler(self, interval_ms: int = LOCAL_SAMPLE_MS) -> tuple[str, ...] | None:
        """The `nvidia-smi` command that samples the nodes' GPUs; None where they are hidden
        or are AMD's. MIG devices report no utilisation of their own and `-i` takes no MIG
        UUID, so with any MIG device every GPU of the machine is sampled."""
        if self.hidden or self.variable != CUDA_VARIABLE:
            return None
        ids = [i for value in self.per_node for i in value.split(",") if i]
        select = () if any(i.startswith("MIG-") for i in ids) else ("-i", ",".join(ids))
        return ("nvidia-smi", f"--query-gpu={NVIDIA_QUERY}", "--format=csv", "-lms", str(interval_ms), *select)

    def summary(self) -> str | None:
        """``GPUs node1=0,1 node2=2,3``; None when the GPUs are hidden."""
        if self.hidden:
            return None
        return "GPUs " + " ".join(f"node{k}={ids}" for k, ids in enumerate(self.per_node, start=1))


def parse_nvidia_smi_list(text: str) -> list[str]:
    """Device ids from `nvidia-smi -L`: the GPU index, or the UUIDs of its MIG devices when
    the GPU is partitioned (CUDA then addresses the MIG devices, not the GPU)."""
    ids: list[str] = []
    migs: list[str] = []
    current: str | None = None

    def flush() -> None:
        if current is not None:
            ids.extend(migs or [current])

    for line in text.splitlines():
        if m := _GPU_LINE.match(line):
            flush()
            current, migs = m.group(1), []
        elif (m := _MIG_LINE.match(line)) and current is not None:
            migs.append(m.group(1))
    flush()
    return ids


def _listed(value: str) -> tuple[str, ...]:
    """The entries of a visibility variable (`0,1`, `GPU-...`); empty means none."""
    return tuple(item.strip() for item in value.split(",") if item.strip())


def _nvidia_smi_list() -> str | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def _kfd_gpu_count(nodes: Path) -> int:
    """GPU agents in the AMD KFD topology (CPU nodes have `simd_count 0`)."""
    count = 0
    try:
        entries = list(nodes.iterdir())
    except OSError:
        return 0
    for node in entries:
        try:
            props = (node / "properties").read_text()
        except OSError:
            continue
        m = re.search(r"^simd_count (\d+)$", props, re.M)
        count += bool(m and int(m.group(1)) > 0)
    return count


def detect(environ: Mapping[str, str], nvidia_smi: Callable[[], str | None] = _nvidia_smi_list,
           kfd_nodes: Path = KFD_NODES) -> VisibleGpus | None:
    """The GPUs this process may use, or None when it has none.

    A visibility variable already set by the caller (a Slurm allocation, the user) narrows
    the list to its entries and is what gets split; otherwise every GPU the driver lists.
    """
    listed = nvidia_smi()
    count = len(parse_nvidia_smi_list(listed)) if listed else 0
    if count:
        if CUDA_VARIABLE in environ:
            return VisibleGpus(_listed(environ[CUDA_VARIABLE]), CUDA_VARIABLE, CUDA_VARIABLE)
        return VisibleGpus(tuple(parse_nvidia_smi_list(listed or "")), CUDA_VARIABLE, "nvidia-smi -L")
    amd = _kfd_gpu_count(kfd_nodes)
    if amd:
        if ROCM_VARIABLE in environ:
            return VisibleGpus(_listed(environ[ROCM_VARIABLE]), ROCM_VARIABLE, ROCM_VARIABLE)
        return VisibleGpus(tuple(str(i) for i in range(amd)), ROCM_VARIABLE, "KFD topology")
    return None


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else ('es' if word.endswith('s') else 's')}"


def split(gpus: VisibleGpus | None, nodes: int, nproc_per_node: int) -> GpuSplit | None:
    """Give node k the GPUs ``[k * nproc, (k + 1) * nproc)``; with fewer GPUs than ranks,
    hide them all (CPU with gloo) and say so. None: no GPUs, nothing to set."""
    if gpus is None or not gpus.ids:
        return None
    ranks = nodes * nproc_per_node
    have = len(gpus.ids)
    if ranks > have:
        fits = have // nproc_per_node
        hint = (f"--nodes {fits} trains on the GPUs" if fits >= 1
                else f"--nproc-per-node {have} trains on the GPUs")
        note = (f"{_plural(nodes, 'node')} x {_plural(nproc_per_node, 'process')} need {ranks} GPUs but "
                f"{_plural(have, 'GPU')} {'is' if have == 1 else 'are'} visible ({gpus.source}): "
                f"training on CPU with gloo, GPUs hidden; {hint}")
        return GpuSplit(gpus.variable, ("",) * nodes, note)
    per_node = tuple(",".join(gpus.ids[k * nproc_per_node:(k + 1) * nproc_per_node]) for k in range(nodes))
    return GpuSplit(gpus.variable, per_node)
