#!/usr/bin/env python3
"""Report what each rank sees inside the container: one JSON line per rank.

Run: ``torchrun ... jobs/env_probe.py [--libs a.so,b.so]``. Each rank prints one line
``fabrikit-probe: {json}`` (one ``write`` call, so ``grep '^fabrikit-probe: '`` can pull them
out of interleaved output) with:

- where it runs: host, ip (the address this host uses towards MASTER_ADDR, best effort),
  rank, local_rank, world_size, node_rank, nnodes;
- device (and the CUDA device name), torch, CUDA (or HIP) and NCCL (or RCCL) versions, and
  which ``libnccl``/``librccl`` file the process mapped (host bind or the wheel's own);
- the CPUs this rank is pinned to (``cpu_bind`` when ``FABRIKIT_CPU_BIND_MASKS`` applied);
- ``LD_LIBRARY_PATH`` and, for each library in ``--libs`` (default: the NCCL net plugins,
  libfabric, libcxi, libibverbs), whether ``dlopen`` finds it, the file it resolved to
  (the link map's name and its real path) or the loader's error, and libfabric's
  ``fi_version()``; this is what tells whether host binds reached the container;
- every ``NCCL_*``, ``FI_*``, ``SLURM_*``, ``SLINGSHOT_*`` variable;
- ``allreduce_ok``: an all_reduce of the ranks gives ``W(W-1)/2``, proving the group works.

Exit status 1 if the all-reduce was wrong or failed (the line is still printed).
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import hashlib
import json
import os
import socket
import sys
import traceback
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from jobenv import JobEnvironment, default_output_dir

PREFIX = "fabrikit-probe: "
# The NCCL net plugins, then RCCL's (ROCm images: RCCL dlopens librccl-net.so), then the fabric.
DEFAULT_LIBS = ("libnccl-net.so", "libnccl-net-ofi.so", "librccl-net.so", "libfabric.so.1", "libcxi.so.1",
                "libibverbs.so.1")
ENV_PREFIXES = ("NCCL_", "RCCL_", "FI_", "SLURM_", "SLINGSHOT_", "FABRIKIT_")
RTLD_DI_LINKMAP = 2  # <dlfcn.h>


class _LinkMap(ctypes.Structure):
    """Head of glibc's ``struct link_map`` (``l_name`` is the path the loader opened)."""

    _fields_ = [("l_addr", ctypes.c_void_p), ("l_name", ctypes.c_char_p)]


def _dlinfo() -> Any | None:
    """glibc's ``dlinfo`` (in libc since 2.34, in libdl before), or None if unavailable."""
    for name in (None, ctypes.util.find_library("dl")):
        try:
            fn = ctypes.CDLL(name).dlinfo
        except (OSError, AttributeError, TypeError):
            continue
        fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
        fn.restype = ctypes.c_int
        return fn
    return None


def _mapped_path(basename: str) -> str | None:
    """First file mapped into this process whose name starts with ``basename``."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(maxsplit=5)
                if len(parts) == 6 and os.path.basename(parts[5].strip()).startswith(basename):
                    return parts[5].strip()
    except OSError:
        pass
    return None


def probe_library(name: str) -> dict[str, Any]:
    """dlopen ``name`` the way NCCL would (default search: LD_LIBRARY_PATH, ld.so.cache) and
    report the file it resolved to, or the loader's error text (which names the missing
    dependency, e.g. ``libjson-c.so.3``, when a host bind is incomplete)."""
    result: dict[str, Any] = {"loaded": False}
    try:
        lib = ctypes.CDLL(name)
    except OSError as exc:
        result["error"] = str(exc)
        return result
    result["loaded"] = True
    path: str | None = None
    dlinfo = _dlinfo()
    if dlinfo is not None:
        lmap = ctypes.POINTER(_LinkMap)()
        if dlinfo(lib._handle, RTLD_DI_LINKMAP, ctypes.byref(lmap)) == 0 and lmap and lmap.contents.l_name:
            path = lmap.contents.l_name.decode(errors="replace")
    if not path:
        path = _mapped_path(os.path.basename(name).split(".so")[0] + ".so")
    result["path"] = path
    result["realpath"] = os.path.realpath(path) if path else None
    if result["realpath"]:
        # Which file it really is: a test compares this with the host's copy, to prove the
        # container loaded the bound host library and not one of its own.
        try:
            with open(result["realpath"], "rb") as fh:
                result["sha256"] = hashlib.sha256(fh.read()).hexdigest()
        except OSError:
            pass
    if hasattr(lib, "fi_version"):
        lib.fi_version.restype = ctypes.c_uint32
        version = lib.fi_version()
        result["fi_version"] = f"{version >> 16}.{version & 0xFFFF}"
    return result


def local_ip(master_addr: str | None) -> str | None:
    """The source address the kernel picks towards ``MASTER_ADDR`` (a UDP connect sends
    nothing), which is the interface rendezvous traffic uses; else the hostname's address."""
    if master_addr:
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.connect((master_addr, 9))
                return str(s.getsockname()[0])
        except OSError:
            pass
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return None


def nccl_version() -> str | None:
    """NCCL version torch was built with / loaded, when torch has CUDA."""
    try:
        v = torch.cuda.nccl.version()
    except Exception:  # noqa: BLE001 - CPU builds raise various errors here
        return None
    return ".".join(map(str, v)) if isinstance(v, tuple) else str(v)


def collect(job: JobEnvironment, device: torch.device, libs: Sequence[str]) -> dict[str, Any]:
    """Everything except the all-reduce; needs no process group, so it is reported even
    when the group cannot form."""
    info: dict[str, Any] = {
        "host": job.hostname,
        "ip": local_ip(job.master_addr),
        "rank": job.rank,
        "local_rank": job.local_rank,
        "world_size": job.world_size,
        "local_world_size": job.local_world_size,
        "node_rank": job.node_rank,
        "nnodes": job.nnodes,
        "pid": os.getpid(),
        "device": str(device),
        "cuda_device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "cuda_device_count": torch.cuda.device_count() if torch.cuda.is_available() else 0,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "hip": getattr(torch.version, "hip", None),  # ROCm builds: torch.cuda is HIP, NCCL is RCCL
        "nccl": nccl_version(),
        "python": sys.version.split()[0],
        "ld_library_path": os.environ.get("LD_LIBRARY_PATH"),
        "libs": {name: probe_library(name) for name in libs},
    }
    info["nccl_library"] = _mapped_path("libnccl.so") or _mapped_path("librccl.so")
    info["env"] = {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES)}
    return info


def check_allreduce(job: JobEnvironment, device: torch.device, timeout_s: float) -> dict[str, Any]:
    """Sum of all ranks must be W(W-1)/2; a wrong value means the transport corrupts data."""
    groups = job.init_process_group(device, timeout=timedelta(seconds=timeout_s))
    try:
        value = torch.tensor([job.rank], dtype=torch.int64, device=device)
        dist.all_reduce(value)
        got, want = int(value.item()), job.world_size * (job.world_size - 1) // 2
        return {"backend": groups.backend.value, "allreduce_sum": got, "allreduce_expected": want, "allreduce_ok": got == want}
    finally:
        groups.destroy()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--libs", default=",".join(DEFAULT_LIBS), help="comma-separated libraries to dlopen")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds for the process group to form")
    p.add_argument("--output-dir", default=None,
                   help="also write probe/rank-N.json here (default $FABRIKIT_RUN_DIR, else cwd)")
    args = p.parse_args(argv)
    job = JobEnvironment.from_env()
    cpus = job.bind_cpus()
    device = job.choose_device(args.device)
    info = collect(job, device, [n for n in args.libs.split(",") if n])
    info["cpu_bind"] = sorted(cpus) if cpus is not None else None
    info["cpu_affinity"] = sorted(os.sched_getaffinity(0))
    try:
        info.update(check_allreduce(job, device, args.timeout))
    except Exception as exc:  # noqa: BLE001 - report the failure in the line, then exit 1
        info.update({"allreduce_ok": False, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()})
    os.write(sys.stdout.fileno(), (PREFIX + json.dumps(info, sort_keys=True) + "\n").encode())
    # srun --label cuts lines at 1 KiB, so the whole record also goes to a file per rank.
    out = default_output_dir(args.output_dir) / "probe"
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"rank-{job.rank}.json"
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(info, sort_keys=True, indent=1) + "\n")
    os.replace(tmp, target)
    return 0 if info["allreduce_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
