"""Error types that the CLI turns into one clear line and exit code 2.

Every user-facing failure (bad profile, bad flag, missing file) is raised as `UserError`
so that the CLI can print it without a traceback; anything else is a bug and keeps its
traceback.
"""

from __future__ import annotations

# A message is one line even when the bad input itself holds line breaks or other control
# characters (a file name, a key): they are shown escaped, as Python would write them.
_ONE_LINE = {c: repr(chr(c))[1:-1] for c in (*range(0x20), 0x7F)}


def one_line(text: str) -> str:
    return text.translate(_ONE_LINE)


class UserError(Exception):
    """Bad input from the user: printed as one line, exit code 2."""

    exit_code = 2

    def __init__(self, message: str, *, where: str | None = None) -> None:
        self.where = where
        super().__init__(one_line(f"{where}: {message}" if where else message))


class RuntimeFailure(Exception):
    """A step that ran and failed (sbatch refused, build failed): one line, exit code 1."""

    exit_code = 1
