"""Malformed and hostile input: one line, exit 2, no traceback, nothing written.

Every case runs the real console script WITHOUT --dry-run (a case that wrongly passed would
create a run directory, which the test would see), from an empty working directory, with a
private HOME and `$FABRIKIT_SITES`. After the run the whole temporary tree must be exactly
as before: no run directory, no launch record, no half-written file.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest
import yaml

from tests.helpers import cli, one_line_error

BASE: dict = {
    "description": "malformed-input base",
    "backend": "slurm",
    "fabric": {"kind": "ethernet"},
    "scheduler": {"partition": "debug"},
    "container": {"runtime": "none"},
    "job": {"script": "env_probe.py"},
}
LIBFABRIC = Path("/usr/lib/x86_64-linux-gnu/libfabric.so.1")
ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)) + "description: *i\n"


def with_(**changes: object) -> dict:
    """BASE with top-level sections merged (dicts) or replaced."""
    data = json.loads(json.dumps(BASE))
    for key, value in changes.items():
        data[key] = {**data[key], **value} if isinstance(value, dict) and isinstance(data.get(key), dict) else value
    return data


def dump(data: dict) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


@dataclass
class Case:
    """`files`: path (relative to the input dir) -> text, bytes, or a callable(path) that
    creates it. `argv` may use {in} (the input dir). `expect`: fragments of the error line."""

    argv: list[str]
    expect: list[str]
    files: dict[str, str | bytes | Callable[[Path], None]] = field(default_factory=dict)
    prog: str = "run-multinode"


def profile_case(text: str | bytes, *expect: str, extra: tuple[str, ...] = (), name: str = "site.yaml") -> Case:
    return Case(["--profile", f"{{in}}/{name}", "--nodes", "2", *extra], list(expect), {name: text})


def hostlib(content: Callable[[Path], None], *expect: str) -> Case:
    data = with_(host_libraries={"names": ["libbad.so.1"], "search_path": ["{in}/libs"]})
    return Case(["--profile", "{in}/site.yaml", "--nodes", "2"], list(expect),
                {"site.yaml": dump(data), "libs/libbad.so.1": content})


def resume(launch: str | bytes | None, *expect: str) -> Case:
    files: dict = {"run/profile.yaml": dump(BASE)}
    if launch is not None:
        files["run/launch.json"] = launch
    return Case(["--resume", "{in}/run"], list(expect), files)


def _linker_script(path: Path) -> None:
    path.write_text("/* GNU ld script */\nOUTPUT_FORMAT(elf64-x86-64)\nGROUP ( /lib/libbad.so.1.0 )\n")


def _directory(path: Path) -> None:
    path.mkdir()


def _truncated(size: int) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        path.write_bytes(LIBFABRIC.read_bytes()[:size])
    return write


def _deep_block(levels: int) -> str:
    return "description: x\nfabric:\n" + "".join("  " * (i + 1) + f"k{i}:\n" for i in range(levels)) + \
        "  " * (levels + 1) + "leaf: 1\n"


GOOD_LAUNCH = {"site": None, "profile_file": "/x/site.yaml", "nodes": 2, "job": []}

CASES: dict[str, Case] = {
    # ---- bounded input
    "alias bomb": profile_case(ALIAS_BOMB, "alias"),
    "recursive alias": profile_case(dump(BASE) + "env: &e {X: *e}\n", "recursive alias"),
    "deep flow nesting": profile_case("description: " + "[" * 100_000 + "]" * 100_000 + "\n", "nested deeper"),
    "deep block nesting": profile_case(_deep_block(40), "nested deeper"),
    "huge profile": profile_case("# padding\n" * 200_000 + dump(BASE), "larger than 1024 KiB"),
    "profile is /dev/zero": Case(["--profile", "/dev/zero", "--nodes", "2"], ["/dev/zero", "larger than"]),
    "profile is a directory": Case(["--profile", "{in}", "--nodes", "2"], ["is a directory"]),
    "profile not UTF-8": profile_case(b"description: \xff\xfe\n", "not UTF-8"),
    "complex mapping key": profile_case("? [a, b]\n: 1\n" + dump(BASE), "keys must be strings"),
    "YAML merge key": profile_case(dump({k: v for k, v in BASE.items() if k != "scheduler"})
                                   + "scheduler:\n  <<: {partition: q}\n", ":10:", "merge keys"),
    # ---- env names: identifiers, full string, not reserved
    "env key with trailing newline": profile_case(dump(with_(env={"FOO\n": "x"})), "env.FOO",
                                                  "not a valid environment variable name"),
    "env key IFS": profile_case(dump(with_(env={"IFS": ","})), "env.IFS", "reserved"),
    "env key PATH": profile_case(dump(with_(env={"PATH": "/evil"})), "env.PATH", "reserved"),
    "env key run_dir": profile_case(dump(with_(env={"run_dir": "/"})), "env.run_dir", "batch script uses"),
    "env key status": profile_case(dump(with_(env={"status": "0"})), "env.status", "reserved"),
    "env key BASH_ENV": profile_case(dump(with_(env={"BASH_ENV": "/x"})), "env.BASH_ENV", "reserved"),
    "env key LD_LIBRARY_PATH": profile_case(dump(with_(env={"LD_LIBRARY_PATH": "/x"})), "library_path"),
    "env key APPTAINER_BIND": profile_case(dump(with_(env={"APPTAINER_BIND": "/x"})), "reserved", "Apptainer"),
    "env key FABRIKIT_RUN_DIR": profile_case(dump(with_(env={"FABRIKIT_RUN_DIR": "/x"})), "reserved"),
    "env key SLURM_JOB_ID": profile_case(dump(with_(env={"SLURM_JOB_ID": "1"})), "reserved", "Slurm"),
    "env key RANK": profile_case(dump(with_(env={"RANK": "0"})), "reserved", "torchrun"),
    "env key with dash": profile_case(dump(with_(env={"A-B": "x"})), "env.A-B", "not a valid"),
    "env key starting with digit": profile_case(dump(with_(env={"1BAD": "x"})), "env.1BAD", "not a valid"),
    "env_expand key PS4": profile_case(dump(with_(env_expand={"PS4": "{run_dir}"})), "env_expand.PS4", "reserved"),
    # ---- env values that cannot arrive unchanged
    "env value with NUL": profile_case(dump(with_(env={"X": "a\0b"})), "env.X", "NUL"),
    "env value with CR LF": profile_case(dump(with_(env={"X": "a\r\nb"})), "env.X", "CR LF"),
    "env value is a list": profile_case(dump(with_(env={"X": ["a"]})), "env.X", "expected a string"),
    "env_expand unknown placeholder": profile_case(dump(with_(env_expand={"X": "{run_dir}/{jobid}"})),
                                                   "env_expand.X", "'{jobid}' is not a placeholder"),
    "env_expand without placeholder": profile_case(dump(with_(env_expand={"X": "plain"})), "uses no placeholder"),
    "env and env_expand both": profile_case(dump(with_(env={"X": "a"}, env_expand={"X": "{run_dir}"})),
                                            "env_expand.X", "also set under env"),
    "job argument with NUL": profile_case(dump(with_(job={"script": "env_probe.py", "args": ["a\0b"]})),
                                          "job.args[0]", "NUL"),
    "description with ESC": profile_case(dump(with_(description="a\x1b[2Jb")), "description", "control"),
    # ---- site names: --site, --profile's file name, extends
    "profile file name with newline": profile_case(dump(BASE), "rename the file", name="evil\nname.yaml"),
    "profile file name with capitals": profile_case(dump(BASE), "'Evil'", "rename the file", name="Evil.yaml"),
    "profile file name with $()": profile_case(dump(BASE), "rename the file", name="$(touch x).yaml"),
    "site with newline": Case(["--site", "olivia\n", "--nodes", "2"], ["not a valid site name"]),
    "extends with newline": profile_case("extends: \"ethernet\\n\"\n" + dump(BASE), "extends", "not a valid site"),
    # ---- fields that reach the script
    "soname with comma": profile_case(dump(with_(host_libraries={"names": ["libfoo.so,libbar.so"]})),
                                      "host_libraries.names[0]", "soname"),
    "soname with colon": profile_case(dump(with_(host_libraries={"names": ["libfoo.so:/x"]})), "soname"),
    "soname is a path": profile_case(dump(with_(host_libraries={"names": ["/usr/lib/libfoo.so"]})), "soname"),
    "library_path with semicolon": profile_case(dump(with_(library_path=["/opt/a;/opt/b"])), "library_path[0]",
                                                "';'"),
    "bind source with comma": profile_case(dump(with_(binds=[{"source": "/a,b"}])), "binds[0].source"),
    "head interface with shell text": profile_case(dump(with_(launcher={"head_interface": "eth0; reboot"})),
                                                   "launcher.head_interface", "network interface"),
    "port range past 65535": profile_case(dump(with_(launcher={"port_base": 60000, "port_span": 6000})),
                                          "launcher.port_span", "65536"),
    "sbatch_extra --nodes": profile_case(dump(with_(scheduler={"sbatch_extra": ["--nodes=4"]})),
                                         "sbatch_extra[0]", "--nodes"),
    "sbatch_extra -N": profile_case(dump(with_(scheduler={"sbatch_extra": ["-N4"]})), "-N4", "--nodes"),
    "sbatch_extra --output": profile_case(dump(with_(scheduler={"sbatch_extra": ["--exclusive", "--output=x.log"]})),
                                          "sbatch_extra[1]", "--output"),
    "sbatch_extra --ntasks-per-node": profile_case(dump(with_(scheduler={"sbatch_extra": ["--ntasks-per-node=2"]})),
                                                   "--ntasks-per-node"),
    "sbatch_extra --chdir": profile_case(dump(with_(scheduler={"sbatch_extra": ["--chdir=/tmp"]})), "--chdir"),
    "sbatch_extra -J": profile_case(dump(with_(scheduler={"sbatch_extra": ["-Jname"]})), "--job-name"),
    "sbatch_extra abbreviation": profile_case(dump(with_(scheduler={"sbatch_extra": ["--outp=x"]})), "--output"),
    "sbatch_extra with a space": profile_case(dump(with_(scheduler={"sbatch_extra": ["--exclusive --nodes=9"]})),
                                              "sbatch_extra[0]", "not allowed"),
    "partition empty in profile": profile_case(dump(with_(scheduler={"partition": ""})), "scheduler.partition",
                                               "empty"),
    "build template with newline": Case(
        ["--profile", "{in}/site.yaml", "--dry-run"], ["container.build.template", "one line"],
        {"site.yaml": dump(with_(container={"runtime": "apptainer", "image": "/x.sif",
                                            "build": {"template": "test.def\n%setup\n    touch /pwned",
                                                      "flavour": "test"}}))}, prog="build-image"),
    "build-image profile file name": Case(["--profile", "{in}/Bad Name.yaml", "--dry-run"], ["rename the file"],
                                          {"Bad Name.yaml": dump(BASE)}, prog="build-image"),
    "build arg with newline": Case(
        ["--profile", "{in}/site.yaml", "--dry-run"], ["container.build.args.X", "one line"],
        {"site.yaml": dump(with_(container={"runtime": "apptainer", "image": "/x.sif",
                                            "build": {"template": "test.def", "flavour": "test",
                                                      "args": {"X": "a\nb"}}}))}, prog="build-image"),
    # ---- flags
    "--partition empty": profile_case(dump(BASE), "--partition", "empty", extra=("--partition", "")),
    "--account empty": profile_case(dump(BASE), "--account", "empty", extra=("--account", "")),
    "--job-name empty": profile_case(dump(BASE), "--job-name", extra=("--job-name", "")),
    "--time empty": profile_case(dump(BASE), "--time", extra=("--time", "")),
    "--job-name with newline": profile_case(dump(BASE), "--job-name", extra=("--job-name", "x\n")),
    "job argument not UTF-8": profile_case(dump(BASE), "job argument 1", "UTF-8",
                                           extra=("--", "env_probe.py", "\udcff")),
    # ---- host libraries that are not ELF shared objects
    "host library is a linker script": hostlib(_linker_script, "linker script"),
    "host library is a directory": hostlib(_directory, "is a directory"),
    "host library is a truncated ELF header": hostlib(_truncated(40), "truncated"),
    "host library is a truncated ELF": hostlib(_truncated(4096), "truncated"),
    # ---- --resume on a run directory whose launch.json has the wrong shape
    "launch.json is a list": resume("[1, 2]\n", "launch.json", "not a fabrikit launch record"),
    "launch.json nodes is text": resume(json.dumps({**GOOD_LAUNCH, "nodes": "two"}), "launch.json", "nodes"),
    "launch.json without nodes": resume(json.dumps({"site": "x"}), "launch.json", "nodes"),
    "launch.json nodes zero": resume(json.dumps({**GOOD_LAUNCH, "nodes": 0}), "launch.json", "nodes"),
    "launch.json job not a list": resume(json.dumps({**GOOD_LAUNCH, "job": "train.py"}), "launch.json", "job"),
    "launch.json unknown key": resume(json.dumps({**GOOD_LAUNCH, "nodez": 2}), "launch.json", "nodez"),
    "launch.json not JSON": resume("{nodes: 2", "launch.json", "unreadable"),
    "launch.json huge": resume(b" " * (1 << 21), "launch.json", "larger than"),
    "launch.json missing": resume(None, "not a fabrikit run directory"),
}


def _materialise(case: Case, root: Path) -> list[str]:
    indir = root / "in"
    indir.mkdir()
    for rel, content in case.files.items():
        path = indir / rel.replace("{in}", str(indir))
        path.parent.mkdir(parents=True, exist_ok=True)
        if callable(content):
            content(path)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content.replace("{in}", str(indir)))
    return [arg.replace("{in}", str(indir)) for arg in case.argv]


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(directory) / name
            st = path.lstat()
            out[str(path)] = (st.st_size, st.st_mtime_ns)
    return out


def test_there_are_enough_cases() -> None:
    assert len(CASES) >= 40


@pytest.mark.parametrize("case", list(CASES))
def test_malformed_input_is_one_line_exit_2_nothing_written(case: str, tmp_path: Path) -> None:
    spec = CASES[case]
    argv = _materialise(spec, tmp_path)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (tmp_path / "home").mkdir()
    before = _snapshot(tmp_path)
    env = {"HOME": str(tmp_path / "home"), "FABRIKIT_SITES": str(tmp_path / "in")}
    result = cli(*argv, env=env, cwd=cwd, prog=spec.prog, timeout=120)
    message = one_line_error(result)
    for fragment in spec.expect:
        assert fragment in message, (fragment, message)
    assert _snapshot(tmp_path) == before, "something was written"


def test_a_hostile_file_in_a_shared_sites_directory_does_not_break_listing(tmp_path: Path) -> None:
    (tmp_path / "bomb.yaml").write_text(ALIAS_BOMB)
    (tmp_path / "deep.yaml").write_text("description: " + "[" * 100_000 + "]" * 100_000 + "\n")
    (tmp_path / "fine.yaml").write_text(dump(BASE))
    result = cli("sites", prog="fabrikit", env={"FABRIKIT_SITES": str(tmp_path), "HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    lines = {line.split()[0]: line for line in result.stdout.splitlines() if line.strip()}
    assert "INVALID" in lines["bomb"] and "alias" in lines["bomb"]
    assert "INVALID" in lines["deep"] and "nested deeper" in lines["deep"]
    assert lines["fine"].split(None, 2)[1:] == ["env", "malformed-input base"]
    assert "olivia" in lines, "the bundled sites are still listed"


def test_the_base_profile_is_valid(tmp_path: Path) -> None:
    """The cases fail because of their one change, not because of the base."""
    (tmp_path / "site.yaml").write_text(dump(BASE))
    result = cli("--profile", str(tmp_path / "site.yaml"), "--nodes", "2", "--dry-run")
    assert result.returncode == 0, result.stderr
