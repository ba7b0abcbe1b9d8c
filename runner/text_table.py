"""Plain-text tables for terminal output (`fabrikit report`, `doctor`, `check-log`).

Columns are left-aligned, two spaces apart and as wide as their widest cell; trailing
blanks are dropped so that a table pastes cleanly into an issue or a log.
"""

from __future__ import annotations

from typing import Sequence


def table_lines(header: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "") -> list[str]:
    """The header and the rows as aligned lines, each prefixed with `indent`."""
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(header)]
    return [indent + "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
            for row in (header, *rows)]
