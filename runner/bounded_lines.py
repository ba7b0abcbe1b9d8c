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
from typing import IO, AnyStr, Iterator

from .errors import UserError

MAX_LINE_BYTES = 64 * 1024  # a training or sampler line is < 1 KiB; NCCL's own buffer is 1 KiB


def last_piece(line: AnyStr, cut: int) -> AnyStr:
    """The piece after the last CR of a whole line (its newline, if any, taken off), where
    that CR lies past the first `cut` characters (a CRLF's is none), cut to `cut` in turn;
    empty if there is none."""
    cr_, nl = ("\r", "\n") if isinstance(line, str) else (b"\r", b"\n")
    end = len(line) - 1 if line.endswith(nl) else len(line)
    if line.endswith(cr_, 0, end):
        end -= 1
    cr = line.rfind(cr_, cut - 1, end)
    return line[cr + 1:end][:cut] if cr >= 0 else line[:0]


def follow_last_piece(tail: bytes | None, more: bytes, max_len: int) -> bytes | None:
    """The same piece for a line read in parts past its cut: `tail` is the piece so far
    (None: no CR seen yet), `more` the line's next bytes (its newline or CRLF taken off).
    A CR in `more` starts the piece afresh; else it grows, up to `max_len`."""
    cr = more.rfind(b"\r")
    if cr >= 0:
        return more[cr + 1:][:max_len]
    if tail is not None and len(tail) < max_len:
        return (tail + more)[:max_len]
    return tail


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
        tail = follow_last_piece(None, chunk[-1:], max_len)  # (a CR ending the part kept)
        held_cr = False  # a read ended in a CR: a CRLF's, if the next read is its LF
        while True:  # the remainder of this line
            more = stream.readline(max_len)
            end = len(more) - (2 if more.endswith(b"\r\n") else 1 if more.endswith(b"\n") else 0)
            part = more[:end]
            if held_cr and more != b"\n":  # (b"\n": the CRLF ends the line, no piece after it)
                part = b"\r" + part
            held_cr = more.endswith(b"\r")
            tail = follow_last_piece(tail, part[:-1] if held_cr else part, max_len)
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
