"""Read lines with bounded memory: an over-long line is cut and the rest of it skipped, but
for the piece after its last carriage return.

Logs and sampler files come from jobs that may have crashed mid-write or printed a binary
blob on one "line"; one of them must not cost gigabytes. `fabrikit report` reads every input
file through here (and `check-log`'s streaming reader keeps the same bound per line).

A progress bar (tqdm) redraws itself after a CR, with no newline for as long as an epoch
lasts: megabytes of one "line". A line the job prints meanwhile without a newline before it
(NCCL's INFO lines, such as a lazily connected channel's at the first collective; PyTorch's
watchdog error; libfabric's warnings; a training line) lands after the bar's last CR, as the
last piece a terminal shows: that piece is kept, as a line of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Iterator

from .errors import UserError

MAX_LINE_BYTES = 64 * 1024  # a training or sampler line is < 1 KiB; NCCL's own buffer is 1 KiB


def iter_stream_lines(stream: IO[bytes], max_len: int = MAX_LINE_BYTES) -> Iterator[bytes]:
    """Lines of a binary stream, newline kept; a line longer than `max_len` bytes is cut to
    `max_len` and the rest of it dropped, except the piece after a CR in that rest (its last
    CR; a CRLF's is none), which follows, cut to `max_len`, as a line of its own."""
    while True:
        chunk = stream.readline(max_len)
        if not chunk:
            return
        yield chunk
        if len(chunk) < max_len or chunk.endswith(b"\n"):
            continue
        # the rest's piece after its last CR, so far (a CR that ends the part kept starts it)
        tail: bytes | None = b"" if chunk.endswith(b"\r") else None
        while True:  # the remainder of this line
            more = stream.readline(max_len)
            end = len(more) - (2 if more.endswith(b"\r\n") else 1 if more.endswith(b"\n") else 0)
            cr = more.rfind(b"\r", 0, end)
            if cr >= 0:
                tail = more[cr + 1:end]
            elif tail is not None and len(tail) < max_len:
                tail = (tail + more[:end])[:max_len]
            if not more or more.endswith(b"\n"):
                break
        if tail:
            yield tail + b"\n"


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
