"""Compressed logs for `fabrikit check-log`: gzip, bzip2 and xz are read as their text.

Why: clusters compress old job output (`logrotate`, `gzip slurm-*.out`, archived runs), and
users pass those files as they are. Read as bytes, a compressed log holds no NCCL line, so
check-log would say "no network selection seen" and exit 0: a wrong "fine" on the very
job one wanted to check. The format is told by its magic bytes (not the file name: stdin
has none, and `.log` files are compressed in place), and the text is decompressed as a
stream, so memory stays bounded as for a plain log. The decompressors are Python's own
(gzip, bz2, lzma); zstd is read where this Python has `compression.zstd` (3.14+), and
named in the error otherwise, with the pipe that reads it.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import stat
import zlib
from collections.abc import Iterator, Sequence
from typing import IO, Callable

from runner.errors import UserError

# magic bytes -> (format's name, the command that decompresses it to stdout); bzip2's
# `BZh` is text, so its block size digit (1-9) is part of it
_FORMATS: tuple[tuple[tuple[bytes, ...], str, str], ...] = (
    ((b"\x1f\x8b",), "gzip", "gzip -dc"),
    (tuple(b"BZh%d" % n for n in range(1, 10)), "bzip2", "bzip2 -dc"),
    ((b"\xfd7zXZ\x00",), "xz", "xz -dc"),
    ((b"\x28\xb5\x2f\xfd",), "zstd", "zstd -dc"),
)
_SNIFF_BYTES = 6  # the longest magic above
_PIECE_BYTES = 1 << 18  # decompressed bytes asked for at a time


try:
    from compression import zstd as _zstd  # type: ignore[import-not-found]  # Python >= 3.14
except ImportError:
    _zstd = None

# what a decompressor raises on corrupt data (a cut one raises EOFError)
_DATA_ERRORS: tuple[type[BaseException], ...] = (OSError, zlib.error, lzma.LZMAError,
                                                 ValueError) + ((_zstd.ZstdError,) if _zstd else ())


def _opener(name: str) -> Callable[[IO[bytes]], IO[bytes]] | None:
    if name == "gzip":
        return lambda raw: gzip.GzipFile(fileobj=raw, mode="rb")
    if name == "bzip2":
        return lambda raw: bz2.BZ2File(raw, mode="rb")
    if name == "xz":
        return lambda raw: lzma.LZMAFile(raw, mode="rb")
    if _zstd is not None:
        return lambda raw: _zstd.ZstdFile(raw, mode="rb")
    return None


def sniff(head: bytes) -> tuple[str, str] | None:
    """(format, decompress command) of a stream that starts with `head`, or None."""
    for magic, name, command in _FORMATS:
        if head.startswith(magic):
            return name, command
    return None


def open_log(raw: IO[bytes], where: str) -> tuple[IO[bytes], str | None]:
    """The text stream of `raw` (a buffered binary stream: a file, or stdin's buffer) and
    the compression it was read through (None for plain text). `raw` is only peeked at,
    never read, before the choice. Raises UserError for a format this Python cannot
    read; see read_error() for data that ended early."""
    peek = getattr(raw, "peek", None)
    head = peek(_SNIFF_BYTES)[:_SNIFF_BYTES] if peek else b""
    found = sniff(head)
    if found is None:
        return raw, None
    name, command = found
    opener = _opener(name)
    if opener is None:
        shown = "FILE" if where == "<stdin>" else where
        raise UserError(f"{name}-compressed, and this Python cannot read {name}: run "
                        f"`{command} {shown} | fabrikit check-log -`", where=where)
    return _Checked(opener(raw), name, where), name


class _Checked:
    """A decompressing stream whose corrupt or cut data ends the text instead of raising
    (the decompressors raise EOFError, OSError, zlib.error or lzma.LZMAError, each its own
    way): `error` then says why, and check-log reads the text that came before, as it
    would a plain log that is still being written."""

    def __init__(self, stream: IO[bytes], name: str, where: str) -> None:
        self._stream, self._name, self._where = stream, name, where
        self.error: str | None = None

    def read(self, n: int = -1) -> bytes:
        """Up to `n` bytes of text (all with -1). Taken a decompressed piece at a time
        (read1), so that the text before a cut or corrupt spot is returned, not lost with
        the exception that a whole read() would raise."""
        parts: list[bytes] = []
        want = n if n >= 0 else 1 << 62
        while want > 0 and self.error is None:
            try:
                piece = self._stream.read1(min(want, _PIECE_BYTES))
            except EOFError:
                self.error = f"its {self._name} data ends early (cut while written or copied)"
                break
            except _DATA_ERRORS as exc:
                self.error = f"corrupt {self._name} data ({exc})"
                break
            if not piece:
                break
            parts.append(piece)
            want -= len(piece)
        return b"".join(parts)


def read_error(stream: IO[bytes]) -> str | None:
    """Why a stream from open_log() ended before its data did, or None."""
    return getattr(stream, "error", None) if isinstance(stream, _Checked) else None


def blocks_again(paths: Sequence[str | os.PathLike[str]],
                 block_bytes: int = 1 << 20) -> Callable[[], Iterator[bytes]]:
    """A way to read the logs' text once more, from their start (decompressed as above): for
    the rare judgment that needs lines the first pass never kept (nccl_log.LogAnalyser's
    `reread`). Regular files only: a pipe (`<(zcat ...)`, /dev/stdin) gives its data once,
    and opening it again would wait for a writer. A file that cannot be read again gives
    what it gave before its error."""

    def blocks() -> Iterator[bytes]:
        for path in paths:
            try:
                if not stat.S_ISREG(os.stat(path).st_mode):
                    continue
                with open(path, "rb") as raw:
                    stream, _ = open_log(raw, str(path))
                    while block := stream.read(block_bytes):
                        yield block
            except (OSError, UserError):
                continue

    return blocks
