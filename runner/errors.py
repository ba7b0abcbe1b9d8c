"""Error types that the CLI turns into one clear line and exit code 2.

Every user-facing failure (bad profile, bad flag, missing file) is raised as `UserError`
so that the CLI can print it without a traceback; anything else is a bug and keeps its
traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user: printed as one line, exit code 2."""

    exit_code = 2

    def __init__(self, message: str, *, where: str | None = None) -> None:
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)


class RuntimeFailure(Exception):
    """A step that ran and failed (sbatch refused, build failed): one line, exit code 1."""

    exit_code = 1
