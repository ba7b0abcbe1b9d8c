"""Read lines with bounded memory: an over-long line is cut and the rest of it skipped.

Logs and sampler files come from jobs that may have crashed mid-write or printed a binary
blob on one "line"; one of them must not cost gigabytes. `fabrikit report` reads every input
file through here (and `check-log`'s streaming reader keeps the same bound per line).
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Iterator

from .errors import UserError

MAX_LINE_BYTES = 64 * 1024  # a training or sampler line is < 1 KiB; NCCL's own buffer is 1 KiB


def iter_stream_lines(stream: IO[bytes], max_len: int = MAX_LINE_BYTES) -> Iterator[bytes]:
    """Lines of a binary stream, newline kept; a line longer than `max_len` bytes is cut to
    `max_len` and the rest of it dropped."""
    while True:
        chunk = stream.readline(max_len)
        if not chunk:
            return
        if len(chunk) >= max_len and not chunk.endswith(b"\n"):
            while True:  # drop the remainder of this line
                more = stream.readline(max_len)
                if not more or more.endswith(b"\n"):
                    break
        yield chunk


def read_text_lines(path: Path, max_len: int = MAX_LINE_BYTES) -> Iterator[str]:
    """Lines of a file as text (UTF-8, undecodable bytes replaced, line ends removed); a file
    that cannot be read is a one-line UserError naming it."""
    try:
        with open(path, "rb") as fh:
            for chunk in iter_stream_lines(fh, max_len):
                yield chunk.decode("utf-8", "replace").rstrip("\r\n")
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, not a file") from None
    except PermissionError:
        raise UserError(f"{path}: permission denied") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read: {exc.strerror or exc}") from None
