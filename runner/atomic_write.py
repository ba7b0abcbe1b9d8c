"""Write a file so that readers see the old content or the new, never half of it.

Scripts, definition files, reports and run records are all written this way: to a temporary
name in the same directory, flushed and fsynced, then renamed over the target. An
interrupted fabrikit leaves no half-written file behind. `check_creatable` is the preflight
of every such write: it answers before anything is created.
"""

from __future__ import annotations

import os
from pathlib import Path


def write_atomic(path: Path, data: str | bytes, mode: int = 0o644) -> None:
    """Replace `path` with `data` atomically; OSError propagates to the caller."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def writable_dir(path: Path, what: str) -> Path:
    """Create `path` (and parents) and check it is writable, or raise a one-line UserError."""
    from .errors import UserError

    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create {what} {path}: {exc.strerror or exc}") from None
    if not os.access(path, os.W_OK):
        raise UserError(f"{what} {path} is not writable")
    return path


def existing_ancestor(path: Path) -> Path:
    """`path` itself if it exists, else its nearest ancestor that does."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_creatable(directory: Path, what: str) -> None:
    """`directory` (or the ancestor it would be created in) accepts new files, checked
    without leaving anything behind; else a one-line UserError naming `what`.

    Tested by creating a file, not with os.access: root passes os.access everywhere, yet
    fails on read-only mounts and root-squashed NFS."""
    from .errors import UserError

    base = existing_ancestor(directory)
    if not base.is_dir():
        raise UserError(f"{what} {directory} cannot be created: {base} is not a directory")
    probe = base / f".fabrikit-write-test-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        how = "is not writable" if base == directory else f"cannot be created ({base} is not writable)"
        raise UserError(f"{what} {directory} {how}: {exc.strerror}") from None
    os.close(fd)
    os.unlink(probe)
