"""Read a shell script the way bash splits it (runner.shell_lexer: simple commands, words,
heredocs, comments) and expand the words whose values the script itself determines
(runner.shell_expand). This module is the reading's public face; callers import from here.

`fabrikit sites import` reads job scripts copied from site guides. Regular expressions over
lines get them wrong (continuations, quotes, `$(...)` with spaces, heredocs), so the lexer
follows bash's token rules. Two ready-made parsers were measured on 30 constructs common in
job scripts before writing it:

- bashlex 0.18 (PyPI; a port of bash's grammar) parses 25 of them but rejects the whole
  script at arrays `a=(x y)`, `[[ ... ]]`, `$(( ... ))`, `case` and `time` (ParsingError /
  NotImplementedError): one such line anywhere loses every `#SBATCH`, bind and export;
- the stdlib `shlex` splits `$(scontrol show hostnames $X | head -n 1)` into seven words and
  knows no heredocs, `$'...'` or line numbers.

So: a small lexer that never refuses a script, and a static expander that substitutes what
the script assigns and reports what only the run decides (`$SLURM_JOB_ID`, `$(...)`, `$1`)
as unresolved, never guessed.
"""

from __future__ import annotations

from .shell_expand import Expander, Value
from .shell_lexer import Command, Comment, Heredoc, Script, Word, assignment_name, parse

__all__ = ["Command", "Comment", "Expander", "Heredoc", "Script", "Value", "Word", "assignment_name", "parse"]
