"""Host libraries as ELF files: their DT_NEEDED closure and the glibc they were built for.

Used twice: profiles may name host libraries (`host_libraries.names: [libcxi.so.1]`) which
fabrikit binds with their dependency closure, and `fabrikit doctor` checks that every bound
host library finds its dependencies inside the container. We read the ELF dynamic section
with pyelftools instead of running `ldd`, which executes the library's interpreter and
answers for the host's loader, not the container's.

Libraries the container must bring itself (glibc, libstdc++, libgcc_s) are never bound:
binding a host glibc into a container is the classic ABI break (apptainer #945, #2421).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable
from pathlib import Path

import msgspec

# Provided by the container's own C/C++ runtime; binding the host's copies breaks the image.
CONTAINER_PROVIDED = re.compile(
    r"^(ld-linux[^/]*\.so\.\d+|ld64\.so\.\d+|libc\.so\.6|libm\.so\.6|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1"
    r"|libresolv\.so\.2|libutil\.so\.1|libanl\.so\.1|libmvec\.so\.1|libBrokenLocale\.so\.1|libnsl\.so\.1"
    r"|libstdc\+\+\.so\.6|libgcc_s\.so\.1)$"
)
_GLIBC = re.compile(r"^GLIBC_(\d+)\.(\d+)(?:\.(\d+))?$")


class ElfError(Exception):
    """A file that should be a shared library is not a readable ELF shared object."""


class ElfInfo(msgspec.Struct, frozen=True):
    path: str
    soname: str | None
    needed: tuple[str, ...]
    glibc: tuple[int, ...] | None  # newest GLIBC_x.y symbol version required


class Closure(msgspec.Struct, frozen=True):
    """The libraries to bind (soname -> host file) and what could not be found."""

    found: dict[str, str]
    missing: dict[str, str]  # soname -> the library that needs it


def read_elf(path: str | os.PathLike[str]) -> ElfInfo:
    """DT_SONAME, DT_NEEDED and the newest GLIBC version needed (via .gnu.version_r).

    Raises `ElfError` with a one-line reason for a directory, a linker script (libc.so-style
    text that names the real library), a truncated or otherwise unreadable ELF file."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except IsADirectoryError:
        raise ElfError(f"{path} is a directory, not a library") from None
    except OSError as exc:
        raise ElfError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not head.startswith(b"\x7fELF"):
        if re.search(rb"\b(GROUP|INPUT)\s*\(", head):
            raise ElfError(f"{path} is a linker script (text naming the real library), not a shared "
                           "library: list the real library's soname instead")
        raise ElfError(f"{path} is not an ELF shared library")
    try:
        return _read_elf(path)
    except Exception as exc:  # noqa: BLE001 - pyelftools raises ELFError, struct and construct errors alike
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise ElfError(f"{path} is not a readable ELF shared library (truncated or damaged: {reason[:120]})") from None


def _read_elf(path: str | os.PathLike[str]) -> ElfInfo:
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile
    from elftools.elf.gnuversions import GNUVerNeedSection

    needed: list[str] = []
    soname = None
    newest: tuple[int, ...] | None = None
    with open(path, "rb") as fh:
        elf = ELFFile(fh)
        for section in elf.iter_sections():
            if isinstance(section, DynamicSection):
                for tag in section.iter_tags():
                    if tag.entry.d_tag == "DT_NEEDED":
                        needed.append(tag.needed)
                    elif tag.entry.d_tag == "DT_SONAME":
                        soname = tag.soname
            elif isinstance(section, GNUVerNeedSection):
                for _verneed, auxiliaries in section.iter_versions():
                    for aux in auxiliaries:
                        match = _GLIBC.match(aux.name)
                        if match:
                            version = tuple(int(g) for g in match.groups() if g is not None)
                            newest = version if newest is None or version > newest else newest
    return ElfInfo(path=str(path), soname=soname, needed=tuple(needed), glibc=newest)


def find_library(name: str, search_path: Iterable[str]) -> Path | None:
    for directory in search_path:
        candidate = Path(directory) / name
        if candidate.exists():
            return candidate
    return None


def closure(names: Iterable[str], search_path: list[str], *, provided: Iterable[str] = ()) -> Closure:
    """Cached: `doctor` needs the closure both for the binds and for what is missing."""
    cached = _closure(tuple(names), tuple(search_path), tuple(provided))
    return Closure(found=dict(cached.found), missing=dict(cached.missing))  # callers may edit theirs


@functools.lru_cache(maxsize=16)
def _closure(names: tuple[str, ...], search_path: tuple[str, ...], provided: tuple[str, ...]) -> Closure:
    """Breadth-first DT_NEEDED closure of `names` over `search_path`, minus what the
    container provides (its C/C++ runtime, plus `provided` sonames)."""
    also = set(provided)
    found: dict[str, str] = {}
    missing: dict[str, str] = {}
    queue: list[tuple[str, str]] = [(name, "(profile)") for name in names]
    while queue:
        name, wanted_by = queue.pop(0)
        if name in found or name in missing or CONTAINER_PROVIDED.match(name) or name in also:
            continue
        path = find_library(name, search_path)
        if path is None:
            missing[name] = wanted_by
            continue
        found[name] = str(path)
        queue.extend((dep, name) for dep in read_elf(path).needed)
    return Closure(found=found, missing=missing)


def glibc_text(version: tuple[int, ...] | None) -> str:
    return ".".join(str(v) for v in version) if version else "none"
