"""Preflight checks for a site: will the binds, libraries and image work together?

Each check returns a `Check` with a status and, on failure, the fix. Run on a login node,
most checks answer for the host you are on; GPU visibility only means something on a
compute node (and is skipped elsewhere).

The library checks exist because one missing dependency breaks a bound libfabric
(LUMI's `libjson-c.so.3`, fabric-facts.md failure 5) and host libraries built against a
newer glibc than the image's fail to load (failure 4) — both only show up at run time,
on every node, after the queue wait.
"""

from __future__ import annotations

import enum
import os
import re
import shutil
import subprocess
from pathlib import Path

import msgspec

from . import elf_deps, fabrics
from .image_labels import LABEL_FLAVOUR, LABEL_GLIBC, LABEL_SITE
from .profile_loader import LoadedProfile
from .request import host_library_binds
from .text_table import table_lines

_ELF_MAGIC = b"\x7fELF"
_SO_NAME = re.compile(r"\.so(\.\d+)*$")


class Status(enum.Enum):
    PASS = "pass"
    FAIL = "FAIL"
    WARN = "warn"
    SKIP = "skip"


class Check(msgspec.Struct, frozen=True):
    name: str
    status: Status
    detail: str
    fix: str = ""
    required: bool = True

    @property
    def failed(self) -> bool:
        return self.status is Status.FAIL and self.required


def _is_elf_library(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == _ELF_MAGIC and bool(_SO_NAME.search(path.name) or ".so" in path.name)
    except OSError:
        return False


def bound_libraries(binds: list) -> dict[str, Path]:
    """soname (file name) -> host file, for every shared library that the binds bring in:
    file binds of libraries, and libraries directly inside bound directories."""
    found: dict[str, Path] = {}
    for bind in binds:
        source = Path(bind.source)
        target = Path(bind.target or bind.source)
        if source.is_file() and _is_elf_library(source):
            found.setdefault(target.name, source)
        elif source.is_dir():
            for entry in sorted(source.iterdir()):
                if entry.is_file() and _is_elf_library(entry):
                    found.setdefault(entry.name, entry)
    return found


def image_libraries(runtime: str | None, image: str | None) -> set[str] | None:
    """Sonames the image's own loader cache knows (None when the image can't be asked)."""
    if not runtime or not image or not Path(image).exists():
        return None
    try:
        result = subprocess.run([runtime, "exec", image, "/sbin/ldconfig", "-p"], capture_output=True,
                                text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode != 0:
        return None
    return {line.split()[0] for line in result.stdout.splitlines()[1:] if line.strip()}


def image_glibc(runtime: str | None, image: str | None, labels: dict[str, str]) -> tuple[int, ...] | None:
    text = labels.get(LABEL_GLIBC)
    if not text and runtime and image and Path(image).exists():
        try:
            result = subprocess.run([runtime, "exec", image, "ldd", "--version"], capture_output=True, text=True,
                                    timeout=120, check=False)
            text = result.stdout.splitlines()[0].split()[-1] if result.returncode == 0 and result.stdout else None
        except (OSError, subprocess.TimeoutExpired, IndexError):
            text = None
    if not text:
        return None
    try:
        return tuple(int(p) for p in text.strip().split("."))
    except ValueError:
        return None


def run_checks(loaded: LoadedProfile, *, image: str | None = None) -> list[Check]:
    profile = loaded.profile
    checks: list[Check] = []
    binds, _library_path = host_library_binds(profile, where=str(loaded.path))

    # 1. bind sources
    for bind in binds:
        exists = Path(bind.source).exists()
        target = bind.target or bind.source
        if exists:
            checks.append(Check(f"bind {bind.source}", Status.PASS, f"-> {target}"))
        else:
            checks.append(Check(f"bind {bind.source}", Status.FAIL if bind.required else Status.WARN,
                                f"source does not exist on {os.uname().nodename}",
                                fix="fix the path in the profile (or mark the bind `required: false`)",
                                required=bind.required))

    # 2. named host libraries and their closure
    hostlibs = profile.host_libraries
    if hostlibs.names:
        closure = elf_deps.closure(hostlibs.names, list(hostlibs.search_path))
        for name, wanted_by in closure.missing.items():
            checks.append(Check(f"host library {name}", Status.FAIL, f"not found in {':'.join(hostlibs.search_path)} "
                                f"(needed by {wanted_by})", fix="add its directory to host_libraries.search_path"))

    # 3. image, runtime, labels
    runtime_path = None
    labels: dict[str, str] = {}
    image = image or profile.container.image
    if profile.container.runtime != "none":
        from . import apptainer

        runtime_path = apptainer.which(profile.container.runtime)
        if runtime_path is None:
            checks.append(Check("container runtime", Status.FAIL, f"{profile.container.runtime} not on PATH",
                                fix=f"load or install {profile.container.runtime} >= 1.2"))
        else:
            try:
                found = apptainer.probe(profile.container.runtime)
                checks.append(Check("container runtime", Status.PASS, found.version_text))
            except Exception as exc:  # noqa: BLE001 - report whatever the probe said, as a failed check
                checks.append(Check("container runtime", Status.FAIL, str(exc)))
        if image and Path(image).exists():
            try:
                labels = apptainer.inspect_labels(runtime_path, image) if runtime_path else {}
                site = labels.get(LABEL_SITE)
                if site and site != loaded.name:
                    checks.append(Check("image labels", Status.WARN, f"{image} was built for site '{site}'",
                                        fix=f"build-image {loaded.name}", required=False))
                elif site:
                    checks.append(Check("image labels", Status.PASS, f"site {site}, flavour "
                                        f"{labels.get(LABEL_FLAVOUR, '?')}"))
                else:
                    checks.append(Check("image labels", Status.WARN, "no fabrikit labels (not built by build-image)",
                                        required=False))
            except Exception as exc:  # noqa: BLE001
                checks.append(Check("image labels", Status.FAIL, str(exc)))
            checks.append(Check("image", Status.PASS, image))
        else:
            checks.append(Check("image", Status.FAIL, f"{image} does not exist",
                                fix=f"build-image {loaded.name} (or set container.image)"))

    # 4. every bound library finds its dependencies in the bound set or in the image
    bound = bound_libraries(list(binds))
    in_image = image_libraries(runtime_path, image)
    newest: tuple[tuple[int, ...], str] | None = None
    for soname, path in sorted(bound.items()):
        try:
            info = elf_deps.read_elf(path)
        except Exception:  # noqa: BLE001 - not a readable ELF: not a library we can judge
            continue
        if info.glibc and (newest is None or info.glibc > newest[0]):
            newest = (info.glibc, soname)
        missing = [dep for dep in info.needed if dep not in bound and not elf_deps.CONTAINER_PROVIDED.match(dep)
                   and (in_image is None or dep not in in_image)]
        if missing:
            where = "the bound set or the image" if in_image is not None else "the bound set (image not inspected)"
            checks.append(Check(f"dependencies of {soname}", Status.FAIL,
                                f"{', '.join(missing)} not in {where}",
                                fix=f"bind {', '.join(missing)} too (or list {soname} in host_libraries.names)"))
        else:
            checks.append(Check(f"dependencies of {soname}", Status.PASS, f"{len(info.needed)} needed, all found"))

    # 5. glibc: the image's must be at least the newest the bound host libraries need
    have = image_glibc(runtime_path, image, labels)
    if newest is not None:
        need_text = elf_deps.glibc_text(newest[0])
        if have is None:
            checks.append(Check("glibc", Status.SKIP, f"bound libraries need GLIBC_{need_text} ({newest[1]}); "
                                "image glibc unknown", required=False))
        elif have[:2] < newest[0][:2]:
            checks.append(Check("glibc", Status.FAIL, f"{newest[1]} needs GLIBC_{need_text}, the image has "
                                f"{elf_deps.glibc_text(have)}", fix="use a newer base image (or older host libraries)"))
        else:
            checks.append(Check("glibc", Status.PASS, f"image {elf_deps.glibc_text(have)} >= needed {need_text}"))

    # 6. a fallback to TCP sockets cannot go unnoticed
    fabric = fabric_check(profile)
    if fabric is not None:
        checks.append(fabric)

    # 7. GPUs visible (compute nodes only)
    want = profile.scheduler.gpus_per_node
    if want > 0:
        checks.append(rocm_gpu_check(want) if profile.container.gpu_flag == "--rocm" else nvidia_gpu_check(want))
    return checks


def fabric_check(profile) -> Check | None:
    """On a fabric whose fast path is a network (runner.fabrics), a fallback to TCP sockets
    (5-40x slower, fabric-facts.md) must show: NCCL told to fail instead, or the transport
    checked at the end of the job. None where any transport is the expected one."""
    kind = fabrics.get(profile.fabric.kind)
    if not kind.needs_network:
        return None
    unset = [(name, value) for name, value in kind.fail_fast_env if name not in profile.env]
    if unset:
        name, value = unset[0]
        return Check("fabric", Status.WARN, f"{kind.title}: {name} is not set, so NCCL falls back to TCP sockets "
                     "instead of failing when its plugin does not load",
                     fix=f"set env {name}: {value!r} (the {kind.preset} preset does)", required=False)
    if not profile.fabric.check_transport:
        return Check("fabric", Status.WARN, f"{kind.title}: the transport is not checked (fabric.check_transport: "
                     "false), so a fallback to TCP sockets would go unnoticed",
                     fix="fabric.check_transport: true", required=False)
    guards = [*(name for name, _ in kind.fail_fast_env), "end-of-job transport check"]
    return Check("fabric", Status.PASS, f"{kind.title}: fast path {kind.fast_text}; a fallback shows ({', '.join(guards)})")


def nvidia_gpu_check(want: int) -> Check:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return Check("GPUs", Status.SKIP, "nvidia-smi not found (not on a GPU node?)", required=False)
    result = subprocess.run([smi, "-L"], capture_output=True, text=True, check=False)
    count = sum(1 for line in result.stdout.splitlines() if line.startswith("GPU "))
    status = Status.PASS if count == want else Status.WARN
    return Check("GPUs", status, f"{count} visible, profile says {want}", required=False)


_ROCM_GPU = re.compile(r"^(?:GPU\[(\d+)\]|card(\d+)\b)")


def count_rocm_gpus(text: str) -> int:
    """Distinct GPUs (GCDs on an MI250X) in `rocm-smi` output: `GPU[N]` lines (the default
    and `--showid` layouts) or `cardN` rows (`--csv`)."""
    found = set()
    for line in text.splitlines():
        match = _ROCM_GPU.match(line.strip())
        if match:
            found.add(match.group(1) or match.group(2))
    return len(found)


def rocm_gpu_check(want: int, dev: Path = Path("/dev")) -> Check:
    """AMD GPUs: no nvidia-smi. The kernel driver exposes /dev/kfd (what `--rocm` binds and
    HIP opens) and one /dev/dri/renderD* per GPU; `rocm-smi` names them when it is on PATH
    (on LUMI it comes with the `rocm` module, not the base system)."""
    if not (dev / "kfd").exists():
        return Check("GPUs", Status.SKIP, f"{dev / 'kfd'} not found (not on an AMD GPU node?)", required=False)
    smi = shutil.which("rocm-smi")
    if smi is not None:
        result = subprocess.run([smi, "--showid"], capture_output=True, text=True, check=False)
        count, how = count_rocm_gpus(result.stdout), "rocm-smi --showid"
    else:
        count = len(list((dev / "dri").glob("renderD*")))
        how = f"{dev / 'dri'}/renderD* (rocm-smi not on PATH)"
    status = Status.PASS if count == want else Status.WARN
    return Check("GPUs", status, f"{count} visible ({how}), profile says {want}", required=False)


def format_table(checks: list[Check]) -> str:
    rows: list[tuple[str, str, str]] = []
    for c in checks:
        rows.append((c.name, c.status.value, c.detail))
        if c.fix and c.status in (Status.FAIL, Status.WARN):
            rows.append(("", "", f"fix: {c.fix}"))
    lines = table_lines(("check", "status", "detail"), rows)
    failed = [c for c in checks if c.failed]
    lines.append(f"doctor: {len(failed)} required check(s) failed" if failed else "doctor: all required checks passed")
    return "\n".join(lines)
