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


class PieceAfterCR:
    """The piece after the last CR of an over-long line, from the parts of it read past its
    cut (what `last_piece` gives for a whole line): each of the two readers that skip such
    a line (iter_stream_lines, LogAnalyser.feed_stream) feeds it what it reads. A CR that
    ends a part may be the CR of the line's CRLF, whose LF the next read brings: it is held
    until the next part, or the line's end, says which."""

    __slots__ = ("max_len", "piece", "held_cr")

    def __init__(self, kept: bytes, max_len: int) -> None:
        """`kept`: the part of the line kept (its last byte may be a CR that starts it)."""
        self.max_len = max_len
        self.piece: bytes | None = None  # (None: no CR seen yet)
        self.held_cr = False
        self.add(kept[-1:])

    def add(self, part: bytes) -> None:
        """The line's next bytes (not its LF). A CR starts the piece afresh; else it grows,
        up to `max_len`."""
        if self.held_cr:
            part = b"\r" + part
        self.held_cr = part.endswith(b"\r")
        if self.held_cr:
            part = part[:-1]
        cr = part.rfind(b"\r")
        if cr >= 0:
            self.piece = part[cr + 1:][:self.max_len]
        elif self.piece is not None and len(self.piece) < self.max_len:
            self.piece = (self.piece + part)[:self.max_len]

    def end(self, newline: bool) -> bytes | None:
        """The piece, once the line ended: at its LF (a CR held was its CRLF's), or at the
        end of the stream (a CR held ends it, with nothing after it)."""
        if self.held_cr and not newline:
            self.piece, self.held_cr = b"", False
        return self.piece


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
        rest = PieceAfterCR(chunk, max_len)
        while True:  # the remainder of this line
            more = stream.readline(max_len)
            newline = more.endswith(b"\n")
            rest.add(more[:-1] if newline else more)
            if not more or newline:
                break
        piece = rest.end(newline)
        if piece:
            yield piece + b"\n"


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
