"""Expand the words of a shell script statically, in the order the script runs: variables
it assigned are substituted, `${VAR:-default}`-style operators, arrays and quoting applied;
anything decided at run time (`$SLURM_JOB_ID`, `$(...)`, `$1`) is kept as written and named
as unresolved, never guessed. Words come from runner.shell_lexer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import NamedTuple

from .shell_lexer import ASSIGN, NAME, parse, skip_ansi, skip_backtick, skip_balanced, skip_double


class Value(NamedTuple):
    """A word after expansion. `text` has what the script determines substituted; what only
    the run decides stays as written and is named in `unresolved`."""

    text: str
    unresolved: tuple[str, ...] = ()
    from_environment: tuple[str, ...] = ()  # names taken from the importing shell

    @property
    def resolved(self) -> bool:
        return not self.unresolved


class _Seg(NamedTuple):
    text: str
    split: bool  # unquoted expansion result: subject to field splitting
    unresolved: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    fields: tuple[str, ...] | None = None  # "${array[@]}": one field per element




class Expander:
    """Expands words against the variables a script assigned so far (in order)."""

    def __init__(self, variables: Mapping[str, str | list[str]] | None = None,
                 environment: Mapping[str, str] | None = None) -> None:
        self.vars: dict[str, str | list[str]] = dict(variables or {})
        self.exported: set[str] = set()
        self.environment = dict(environment or {})
        self._unresolved_vars: dict[str, Value] = {}  # assigned, but only the run knows the value

    def child(self) -> Expander:
        copy = Expander(self.vars, self.environment)
        copy.exported = set(self.exported)
        copy._unresolved_vars = dict(self._unresolved_vars)
        return copy

    # -- public ------------------------------------------------------------------------------
    def one(self, raw: str) -> Value:
        """The word as one string (assignment values, option values): no field splitting."""
        segs = self._segments(raw)
        return Value("".join(s.text if s.fields is None else " ".join(s.fields) for s in segs),
                     tuple(dict.fromkeys(u for s in segs for u in s.unresolved)),
                     tuple(dict.fromkeys(e for s in segs for e in s.env)))

    def fields(self, raw: str) -> list[Value]:
        """The word after field splitting: zero or more values (`$OPTS` may hold several)."""
        segs = self._segments(raw)
        if len(segs) == 1 and segs[0].fields is not None:
            return [Value(f, (), segs[0].env) for f in segs[0].fields]
        out: list[list] = [["", [], []]]
        started = False
        for s in segs:
            if s.split and not s.unresolved:
                parts = re.split(r"[ \t\n]+", s.text)
                for k, part in enumerate(parts):
                    if k > 0 and (started or out[-1][0]):
                        out.append(["", [], []])
                    out[-1][0] += part
                    out[-1][2].extend(s.env)
                    started = started or bool(part)
            else:
                out[-1][0] += s.text if s.fields is None else " ".join(s.fields)
                out[-1][1].extend(s.unresolved)
                out[-1][2].extend(s.env)
                started = True
        values = [Value(t, tuple(dict.fromkeys(u)), tuple(dict.fromkeys(e))) for t, u, e in out]
        return [v for v in values if v.text or v.unresolved] if not started else values

    def assign(self, raw_word: str, exported: bool = False) -> tuple[str, Value] | None:
        """Apply `NAME=value` / `NAME+=value` / `NAME=(a b)`; returns (name, value) or None."""
        match = ASSIGN.match(raw_word)
        if not match:
            return None
        name, index, op = match.group(1), match.group(2), match.group(3)
        rest = raw_word[match.end():]
        if rest.startswith("(") and rest.endswith(")") and not index:
            items: list[str] = []
            unresolved: list[str] = []
            inner = parse(rest[1:-1])
            for command in inner.commands:
                for word in command.words:
                    for v in self.fields(word.raw):
                        items.append(v.text)
                        unresolved.extend(v.unresolved)
            previous = self.vars.get(name) if op == "+=" else None
            value_list = (list(previous) if isinstance(previous, list) else []) + items
            value = Value(" ".join(value_list), tuple(dict.fromkeys(unresolved)))
            if unresolved:
                self.vars.pop(name, None)
                self._unresolved_vars[name] = value
            else:
                self.vars[name] = value_list
        else:
            value = self.one(rest)
            if index:
                self.vars.pop(name, None)
                return name, Value(value.text, value.unresolved or ("array element",))
            if op == "+=":
                old = self.vars.get(name)
                if isinstance(old, str):
                    value = value._replace(text=old + value.text)
                elif name not in self.vars:
                    value = Value(f"${{{name}}}" + value.text, (name, *value.unresolved), value.from_environment)
            if value.unresolved:
                self.vars.pop(name, None)
                self._unresolved_vars[name] = value
            else:
                self.vars[name] = value.text
                self._unresolved_vars.pop(name, None)
        if exported:
            self.exported.add(name)
        return name, value

    def unresolved_value(self, name: str) -> Value | None:
        """The last value assigned to `name` if it could not be resolved (for reports)."""
        return self._unresolved_vars.get(name)

    def unset(self, name: str) -> None:
        self.vars.pop(name, None)
        self.exported.discard(name)
        self._unresolved_vars.pop(name, None)

    # -- internals ---------------------------------------------------------------------------
    def _lookup(self, name: str) -> tuple[str | list[str] | None, tuple[str, ...]]:
        if name in self.vars:
            return self.vars[name], ()
        if name in self._unresolved_vars:
            return None, ()
        if name in self.environment:
            return self.environment[name], (name,)
        return None, ()

    def _segments(self, raw: str) -> list[_Seg]:
        segs: list[_Seg] = []
        i, n = 0, len(raw)
        lit: list[str] = []

        def flush() -> None:
            if lit:
                segs.append(_Seg("".join(lit), False))
                lit.clear()

        if raw.startswith("~") and (n == 1 or raw[1] == "/"):
            value, env = self._lookup("HOME")
            flush()
            segs.append(_Seg(value if isinstance(value, str) else "~", False, () if isinstance(value, str) else ("HOME",), env))
            i = 1
        while i < n:
            c = raw[i]
            if c == "\\":
                lit.append(raw[i + 1 : i + 2])
                i += 2
            elif c == "'":
                end = raw.find("'", i + 1)
                end = n if end < 0 else end
                lit.append(raw[i + 1 : end])
                i = end + 1
            elif raw.startswith("$'", i):
                end = skip_ansi(raw, i + 2)
                lit.append(_ansi_c(raw[i + 2 : end - 1]))
                i = end
            elif c == '"':
                end = skip_double(raw, i + 1)
                flush()
                segs.extend(self._double(raw[i + 1 : end - 1]))
                i = end
            elif c == "$" or c == "`":
                seg, i = self._dollar(raw, i, quoted=False)
                if seg is None:
                    lit.append(c)
                    i += 1
                else:
                    flush()
                    segs.append(seg)
            else:
                lit.append(c)
                i += 1
        flush()
        return segs

    def _double(self, inner: str) -> list[_Seg]:
        segs: list[_Seg] = []
        lit: list[str] = []
        i, n = 0, len(inner)
        while i < n:
            c = inner[i]
            if c == "\\" and i + 1 < n and inner[i + 1] in '$`"\\\n':
                lit.append("" if inner[i + 1] == "\n" else inner[i + 1])
                i += 2
            elif c in "$`":
                seg, i2 = self._dollar(inner, i, quoted=True)
                if seg is None:
                    lit.append(c)
                    i += 1
                else:
                    if lit:
                        segs.append(_Seg("".join(lit), False))
                        lit.clear()
                    segs.append(seg)
                    i = i2
            else:
                lit.append(c)
                i += 1
        if lit or not segs:
            segs.append(_Seg("".join(lit), False))
        return segs

    def _dollar(self, raw: str, i: int, quoted: bool) -> tuple[_Seg | None, int]:
        split = not quoted
        if raw[i] == "`":
            end = skip_backtick(raw, i + 1)
            return _Seg(raw[i:end], False, ("`...`",)), end
        if raw.startswith("$((", i):
            end = skip_balanced(raw, i + 1, "(", ")")
            return _Seg(raw[i:end], False, ("$((...))",)), end
        if raw.startswith("$(", i):
            end = skip_balanced(raw, i + 1, "(", ")")
            return _Seg(raw[i:end], False, ("$(...)",)), end
        if raw.startswith("${", i):
            end = skip_balanced(raw, i + 1, "{", "}")
            return self._braced(raw[i + 2 : end - 1], raw[i:end], split), end
        match = NAME.match(raw, i + 1)
        if match:
            name = match.group(0)
            return self._var(name, raw[i : match.end()], split), match.end()
        if i + 1 < len(raw) and raw[i + 1] in "0123456789@*#?$!-":
            return _Seg(raw[i : i + 2], False, (raw[i : i + 2],)), i + 2
        return None, i

    def _var(self, name: str, written: str, split: bool) -> _Seg:
        value, env = self._lookup(name)
        if value is None:
            partial = self._unresolved_vars.get(name)
            if partial is not None:  # assigned from something only the run knows: keep its text
                return _Seg(partial.text, False, partial.unresolved or (name,), partial.from_environment)
            return _Seg(written, False, (name,))
        if isinstance(value, list):
            return _Seg(value[0] if value else "", split, (), env)
        return _Seg(value, split, (), env)

    def _braced(self, inner: str, written: str, split: bool) -> _Seg:
        if inner.startswith("#") and NAME.fullmatch(inner[1:]):
            value, env = self._lookup(inner[1:])
            if value is None:
                return _Seg(written, False, (inner[1:],))
            return _Seg(str(len(value)), False, (), env)
        match = NAME.match(inner)
        if not match:
            return _Seg(written, False, (written,))
        name, rest = match.group(0), inner[match.end():]
        value, env = self._lookup(name)
        if rest == "":
            return self._var(name, written, split)
        array = re.fullmatch(r"\[([@*]|\d+)\]", rest)
        if array:
            if isinstance(value, list):
                if array.group(1) in "@*":
                    return _Seg(" ".join(value), split, (), env, tuple(value) if array.group(1) == "@" else None)
                k = int(array.group(1))
                return _Seg(value[k] if k < len(value) else "", split, (), env)
            if isinstance(value, str) and array.group(1) in ("0", "@", "*"):
                return _Seg(value, split, (), env)
            return _Seg(written, False, (name,))
        op = re.match(r"(:?[-=+?])", rest)
        if op:
            word = rest[op.end():]
            is_set = value is not None and (value != "" or ":" not in op.group(1))
            if value is None and name not in self.vars and self._lookup_is_runtime(name):
                return _Seg(written, False, (name,))
            kind = op.group(1).lstrip(":")
            if kind in "-=":
                if is_set:
                    return self._var(name, written, split)
                inner_value = self.one(word)
                return _Seg(inner_value.text, split, inner_value.unresolved, inner_value.from_environment)
            if kind == "+":
                if not is_set:
                    return _Seg("", False)
                inner_value = self.one(word)
                return _Seg(inner_value.text, split, inner_value.unresolved, inner_value.from_environment)
            return self._var(name, written, split) if is_set else _Seg(written, False, (name,))
        return _Seg(written, False, (name,))

    def _lookup_is_runtime(self, name: str) -> bool:
        """A variable only the job knows: `${SLURM_X:-4}` is not simply 4."""
        return name.startswith(("SLURM_", "SLURMD_", "SBATCH_", "SRUN_")) or name in self._unresolved_vars


def _ansi_c(body: str) -> str:
    table = {"n": "\n", "t": "\t", "\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b", "e": "\x1b",
             "f": "\f", "r": "\r", "v": "\v"}
    return re.sub(r"\\(.)", lambda m: table.get(m.group(1), "\\" + m.group(1)), body)
