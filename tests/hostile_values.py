"""The hostile-value battery: values that a shell, a container runtime or YAML would run,
expand or retype, and a check of what really reached the job.

One battery, four channels a profile or a command line feeds into a job:

- ``ENV``: ``env:`` values (most written through ``yaml.safe_dump``, i.e. quoted; the
  ``YAML_TYPED`` ones written unquoted by hand, to catch YAML 1.1 retyping);
- ``ARGS``: job arguments;
- ``BINDS``: directory names used as bind source and target paths;
- ``LIBRARY_PATH``: ``library_path:`` entries (they reach ``LD_LIBRARY_PATH``);
- ``LABELS`` (in tests/test_literal_values.py): definition-file labels, through build-image.

Values that try to run something ``touch`` a file in a marker directory (``@MARKER@``): any
file there afterwards means a value was executed. The job is ``jobs/literal_probe.py``, which
records argv, environment and the files under the bind root as exact bytes.

Run as a script to measure another fabrikit (e.g. an older checkout) with the same battery:

    python3 tests/hostile_values.py --run-multinode OTHER/.venv/bin/run-multinode --image SIF

It prints how many cases executed and how many arrived altered.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

MARK = "@MARKER@"
BIND_ROOT_IN_CONTAINER = "/mnt/literal"


@dataclass(frozen=True)
class Case:
    """One hostile value. `value` is what must arrive; `yaml_text`, when set, is how the
    value is written in the profile (unquoted), instead of letting yaml.safe_dump quote it."""

    id: str
    value: str
    yaml_text: str | None = None


ENV = [
    Case("cmdsub", f"$(touch {MARK}/env-cmdsub)"),
    Case("backticks", f"`touch {MARK}/env-backticks`"),
    Case("braced-var", "/tmp/nccl.${SLURM_JOB_ID}.log"),
    Case("plain-var", "$HOME/x"),
    Case("default-var", "${UNSET_X:-fallback}"),
    Case("pid", "pid $$"),
    Case("positional", "$0 $1 $@ $# $?"),
    Case("double-backslash", "a\\\\b"),
    Case("backslash", "a\\b"),
    Case("backslash-n", "a\\nb"),
    Case("trailing-backslash", "end\\"),
    Case("single-quote", "it's"),
    Case("quoted-cmdsub", f"'$(touch {MARK}/env-quoted)'"),
    Case("double-quoted-cmdsub", f'say "$(touch {MARK}/env-dquoted)"'),
    Case("break-out", f"'; touch {MARK}/env-breakout; echo '"),
    Case("arithmetic", "$((6*7))"),
    Case("ansi-c", "$'\\x41'"),
    Case("tilde", "~/x ~root"),
    Case("glob", "* ? [a-z]"),
    Case("brace-expansion", "{a,b}{1..3}"),
    Case("semicolon", f"a; touch {MARK}/env-semicolon"),
    Case("and", f"x && touch {MARK}/env-and"),
    Case("pipe", f"a | tee {MARK}/env-pipe"),
    Case("redirect", f"> {MARK}/env-redirect"),
    Case("process-substitution", f"<(touch {MARK}/env-procsub)"),
    Case("newline-command", f"x\ntouch {MARK}/env-newline"),
    Case("line-breaks", "line1\nline2\n"),
    Case("tab", "a\tb"),
    Case("carriage-return", "a\rb"),
    Case("padded", "  padded  "),
    Case("empty", ""),
    Case("comma-list", "hsn0,hsn1,hsn2"),
    Case("csv-like", "--x=1,--y=2"),
    Case("hash", "a #not a comment"),
    Case("percent", "%h %j %%"),
    Case("history", "!! !$ !-1"),
    Case("unicode", "é€😀"),
    Case("escape-sequence", "\x1b[31mred\x1b[0m"),
    Case("bell-del", "\x07\x7f"),
    Case("placeholder-literal", "{run_dir}/{job_id}"),
    Case("dashes", "--help -e"),
    Case("equals", "a=b=c"),
    Case("long", "x" * 4000 + "$(touch " + MARK + "/env-long)"),
]

YAML_TYPED = [
    Case("yaml-octal", "010", "010"),
    Case("yaml-sexagesimal", "1:30", "1:30"),
    Case("yaml-float", "1.10", "1.10"),
    Case("yaml-hex", "0x1F", "0x1F"),
    Case("yaml-underscore", "1_000", "1_000"),
    Case("yaml-bool", "yes", "yes"),
    Case("yaml-off", "off", "off"),
    Case("yaml-date", "2024-01-01", "2024-01-01"),
    Case("yaml-exp", "1e3", "1e3"),
    Case("yaml-inf", ".inf", ".inf"),
]

ARGS = [
    Case("cmdsub", f"$(touch {MARK}/arg-cmdsub)"),
    Case("backticks", f"`touch {MARK}/arg-backticks`"),
    Case("var", "${SLURM_JOB_ID}$HOME"),
    Case("single-quote", "it's"),
    Case("break-out", f"'; touch {MARK}/arg-breakout; '"),
    Case("spaces", "a  b"),
    Case("empty", ""),
    Case("glob", "*"),
    Case("tilde", "~"),
    Case("option", "--help"),
    Case("dash-e", "-e"),
    Case("newline", f"x\ntouch {MARK}/arg-newline"),
    Case("crlf", "a\r\nb"),
    Case("backslash", "\\"),
    Case("double-quote", '"'),
    Case("not-a-placeholder", "{not_a_placeholder} {RUN_DIR}"),
    Case("percent", "%j%h"),
    Case("unicode", "é😀"),
    Case("semicolon", f";touch {MARK}/arg-semicolon"),
    Case("equals", "--x=$(id)"),
]

BINDS = [
    Case("space", "sp ace"),
    Case("dollar", "dollar$HOME"),
    Case("cmdsub", f"sub$(touch {MARK}/bind-cmdsub)"),
    Case("single-quote", "quo'te"),
    Case("double-quote", 'dq"uote'),
    Case("backslash", "back\\slash"),
    Case("glob", "star*"),
    Case("backticks", f"tick`touch {MARK}/bind-tick`"),
    Case("unicode", "ünï😀"),
    Case("leading-space", " lead"),
    Case("semicolon", "semi;colon"),
    Case("hash", "hash#x"),
    Case("tilde", "~tilde"),
    Case("dash", "-dash"),
    Case("newline", "new\nline"),
]

LIBRARY_PATH = [
    Case("dollar-lib", "/opt/$LIB/x"),
    Case("cmdsub", f"/opt/$(touch {MARK}/lib-cmdsub)/x"),
    Case("space", "/opt/sp ace"),
    Case("single-quote", "/opt/quo'te"),
    Case("backslash", "/opt/back\\slash"),
    Case("braced-var", "/opt/${HOME}"),
    Case("backticks", f"/opt/`touch {MARK}/lib-tick`"),
]


def count() -> int:
    return len(ENV) + len(YAML_TYPED) + len(ARGS) + len(BINDS) + len(LIBRARY_PATH)


def env_key(case: Case) -> str:
    """A stable variable name per case, whatever subset of the battery runs."""
    if case in ENV:
        return f"LIT_{ENV.index(case):03d}"
    return f"LIT_{100 + YAML_TYPED.index(case):03d}"


def _mark(value: str, marker: Path) -> str:
    return value.replace(MARK, str(marker))


@dataclass
class Battery:
    """The battery (or a subset of it) materialised for one run: a marker directory and the
    host directories used as bind sources."""

    root: Path
    env_cases: list[Case] = field(default_factory=lambda: list(ENV))
    typed: list[Case] = field(default_factory=lambda: list(YAML_TYPED))
    arg_cases: list[Case] = field(default_factory=lambda: list(ARGS))
    bind_cases: list[Case] = field(default_factory=lambda: list(BINDS))
    lib_cases: list[Case] = field(default_factory=lambda: list(LIBRARY_PATH))

    def __post_init__(self) -> None:
        self.marker = self.root / "markers"
        self.bind_root = self.root / "binds"
        self.marker.mkdir(parents=True, exist_ok=True)
        for case in self.bind_cases:
            source = self.bind_root / _mark(case.value, self.marker)
            source.mkdir(parents=True, exist_ok=True)
            (source / "case").write_text(case.id)

    def subset(self, **cases: list[Case]) -> "Battery":
        empty = {"env_cases": [], "typed": [], "arg_cases": [], "bind_cases": [], "lib_cases": []}
        return Battery(self.root, **{**empty, **cases})

    def env(self) -> dict[str, str]:
        return {env_key(c): _mark(c.value, self.marker) for c in self.env_cases}

    def typed_env(self) -> dict[str, str]:
        return {env_key(c): c.value for c in self.typed}

    def args(self) -> list[str]:
        return [_mark(c.value, self.marker) for c in self.arg_cases]

    def binds(self) -> list[dict[str, object]]:
        return [{"source": str(self.bind_root / _mark(c.value, self.marker)),
                 "target": f"{BIND_ROOT_IN_CONTAINER}/{_mark(c.value, self.marker)}"} for c in self.bind_cases]

    def library_path(self) -> list[str]:
        return [_mark(c.value, self.marker) for c in self.lib_cases]

    def probe_args(self) -> list[str]:
        return ["{run_dir}/literal", BIND_ROOT_IN_CONTAINER, *self.args()]

    def profile_data(self, base: dict, *, binds: bool) -> dict:
        """A profile in the documented schema: `base` plus the battery (without the typed env
        values, which `profile_text` writes by hand)."""
        data = dict(base)
        data["env"] = {**dict(base.get("env") or {}), **self.env(), "LIT_END": "end"}
        if self.lib_cases:
            data["library_path"] = self.library_path()
        if binds and self.bind_cases:
            data["binds"] = [*(base.get("binds") or []), *self.binds()]
        data["job"] = {"script": "literal_probe.py", "args": self.probe_args()}
        return data

    def profile_text(self, base: dict, *, binds: bool) -> str:
        """The profile as YAML text. The YAML-typed values are written unquoted, by hand,
        exactly as a user would type them."""
        text = yaml.safe_dump(self.profile_data(base, binds=binds), sort_keys=False, allow_unicode=True,
                              width=1 << 20)
        typed = "".join(f"  {env_key(case)}: {case.yaml_text}\n" for case in self.typed)
        head, sep, tail = text.partition("\nenv:\n")
        assert sep, "the profile must have a top-level env: block"
        return head + sep + typed + tail

    def executed(self) -> list[str]:
        return sorted(p.name for p in self.marker.iterdir())

    def check(self, record: dict | None, *, binds: bool) -> list[tuple[str, str]]:
        """(case, what arrived instead) for every case that did not arrive verbatim."""
        bad: list[tuple[str, str]] = []
        record = record or {"argv": [], "env": {}, "files": {}}

        def text(hexed: str) -> str:
            return bytes.fromhex(hexed).decode("utf-8", "surrogateescape")

        env = {text(k): text(v) for k, v in record["env"].items()}
        for case in self.env_cases + self.typed:
            want = _mark(case.value, self.marker)
            if env.get(env_key(case)) != want:
                bad.append((f"env:{case.id}", repr(env.get(env_key(case)))[:80]))
        got_args = [text(a) for a in record["argv"]][2:]
        for index, (case, value) in enumerate(zip(self.arg_cases, self.args())):
            got = got_args[index] if index < len(got_args) else None
            if got != value:
                bad.append((f"arg:{case.id}", repr(got)[:80]))
        if self.lib_cases:
            entries = env.get("LD_LIBRARY_PATH", "").split(":")
            wanted = self.library_path()
            start = entries.index(wanted[0]) if wanted[0] in entries else 0
            for index, (case, value) in enumerate(zip(self.lib_cases, wanted)):
                got = entries[start + index] if start + index < len(entries) else None
                if got != value:
                    bad.append((f"library_path:{case.id}", repr(got)[:80]))
        if binds:
            files = {text(k): text(v) for k, v in record["files"].items()}
            for case in self.bind_cases:
                path = f"{BIND_ROOT_IN_CONTAINER}/{_mark(case.value, self.marker)}/case"
                if files.get(path) != case.id:
                    bad.append((f"bind:{case.id}", repr(files.get(path))[:80]))
        return bad


def read_record(run_dir: Path) -> dict | None:
    path = run_dir / "literal" / "rank-0.json"
    return json.loads(path.read_text()) if path.exists() else None


def local_base(image: str | None, runtime: str = "apptainer") -> dict:
    """The bundled local site as a profile of its own, optionally inside an image."""
    root = Path(__file__).resolve().parent.parent
    base = yaml.safe_load((root / "bindings" / "local.yaml").read_text())
    base.pop("extends", None)
    if image:
        base["container"] = {"runtime": runtime, "image": image, "gpu_flag": "none"}
    base["launcher"] = {**(base.get("launcher") or {}), "nproc_per_node": 1}
    return base


# ---- measuring another fabrikit ------------------------------------------------------------
class _Measure:
    """Runs (subsets of) the battery through a given run-multinode and collects outcomes.

    A runtime that evaluates values can lose the WHOLE environment on one value it cannot
    parse (Apptainer without --no-eval: "reached EOF without closing quote"); then each env
    value is measured again in smaller groups, so that every case gets its own verdict."""

    def __init__(self, exe: str, image: str | None, work: Path) -> None:
        self.exe, self.image, self.work = exe, image, work
        self.runs = 0
        self.altered: dict[str, str] = {}
        self.refused: dict[str, str] = {}

    def run(self, battery: Battery) -> tuple[dict | None, subprocess.CompletedProcess[str]]:
        self.runs += 1
        profile = self.work / f"hostile-{self.runs}.yaml"
        profile.write_text(battery.profile_text(local_base(self.image), binds=bool(self.image)))
        run_dir = self.work / f"run-{self.runs}"
        (run_dir / "literal").mkdir(parents=True)
        result = subprocess.run([self.exe, "--profile", str(profile), "--nodes", "1", "--run-dir", str(run_dir)],
                                capture_output=True, text=True, timeout=900, cwd=self.work)
        return read_record(run_dir), result

    def measure(self, battery: Battery, *, split_env: bool = True) -> None:
        import re

        record, result = self.run(battery)
        if result.returncode == 2:  # refused at load: note the case, measure the others
            match = re.search(r"env\.(LIT_\d+)", result.stderr)
            case = next((c for c in battery.env_cases + battery.typed if match and env_key(c) == match.group(1)), None)
            if case is None:
                raise SystemExit(f"refused for another reason: {result.stderr.strip()}")
            self.refused[f"env:{case.id}"] = result.stderr.strip()[-160:]
            rest = battery.subset(env_cases=[c for c in battery.env_cases if c is not case],
                                  typed=[c for c in battery.typed if c is not case], arg_cases=battery.arg_cases,
                                  bind_cases=battery.bind_cases, lib_cases=battery.lib_cases)
            return self.measure(rest, split_env=split_env)
        env_lost = record is not None and not any(bytes.fromhex(k) == b"LIT_END" for k in record["env"])
        bad = dict(battery.check(record, binds=bool(self.image)))
        cases = battery.env_cases + battery.typed
        if env_lost and split_env and len(cases) + bool(battery.lib_cases) > 1:
            # keep the verdicts that do not depend on the environment, re-measure the rest
            for key, got in bad.items():
                if key.split(":")[0] in ("arg", "bind"):
                    self.altered[key] = got
            groups = [battery.subset(lib_cases=battery.lib_cases)] if battery.lib_cases else []
            half = max(1, len(cases) // 2)
            for part in (cases[:half], cases[half:]):
                if part:
                    groups.append(battery.subset(env_cases=[c for c in part if c in ENV],
                                                 typed=[c for c in part if c in YAML_TYPED]))
            for group in groups:
                self.measure(group)
            return
        self.altered.update(bad)


def main() -> int:
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-multinode", required=True, help="the run-multinode executable to measure")
    parser.add_argument("--image", default=None, help="run inside this SIF (local backend, runtime apptainer)")
    parser.add_argument("--workdir", default=None)
    opts = parser.parse_args()
    work = Path(opts.workdir or tempfile.mkdtemp(prefix="hostile-"))
    battery = Battery(work)
    measure = _Measure(opts.run_multinode, opts.image, work)
    measure.measure(battery)
    executed = battery.executed()
    total = count() if opts.image else count() - len(BINDS)
    print(f"{total} cases in {measure.runs} run(s): {len(executed)} executed ({', '.join(executed) or '-'}), "
          f"{len(measure.altered)} altered, {len(measure.refused)} refused at load "
          f"({', '.join(measure.refused) or '-'})")
    for case, got in sorted(measure.altered.items()):
        print(f"  altered {case}: got {got}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main())
