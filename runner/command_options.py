"""The command-line options of the commands a job script runs: `#SBATCH`/srun options,
`apptainer exec`/`singularity exec` options and torchrun's, read from expanded words
(runner.shell_script.Value with their line numbers) into `Option`s, plus the value formats
inside them (`--bind` lists, `--env` lists, `--mount` specs). Pure; runner.job_script uses
them while it walks the script.
"""

from __future__ import annotations

from typing import NamedTuple

from .shell_script import Value

# sbatch/srun short options -> long names; options that take no argument.
SHORT_WITH_ARG = {
    "A": "account", "a": "array", "b": "begin", "C": "constraint", "c": "cpus-per-task", "D": "chdir",
    "d": "dependency", "e": "error", "G": "gpus", "i": "input", "J": "job-name", "L": "licenses",
    "M": "clusters", "m": "distribution", "N": "nodes", "n": "ntasks", "o": "output", "p": "partition",
    "q": "qos", "S": "core-spec", "t": "time", "w": "nodelist", "x": "exclude", "F": "nodefile", "W": "wait",
}
SHORT_FLAGS = {"H": "hold", "h": "help", "I": "immediate", "k": "no-kill", "O": "overcommit", "Q": "quiet",
               "s": "oversubscribe", "V": "version", "v": "verbose", "l": "label", "u": "unbuffered",
               "K": "kill-on-bad-exit", "E": "preserve-env", "X": "disable-status", "Z": "no-allocate"}
LONG_FLAGS = {
    "exclusive", "requeue", "no-requeue", "hold", "overcommit", "oversubscribe", "contiguous", "spread-job",
    "use-min-nodes", "parsable", "test-only", "verbose", "quiet", "no-kill", "nvmps", "ignore-pbs", "reboot",
    "label", "unbuffered", "kill-on-bad-exit", "overlap", "pty", "preserve-env", "disable-status", "immediate",
    "help", "usage", "version", "wait-all-nodes", "get-user-env", "whole", "multi-prog", "no-allocate", "x11",
}
ALIASES = {"tasks-per-node": "ntasks-per-node", "cpus_per_task": "cpus-per-task", "mem_per_cpu": "mem-per-cpu",
           "gpus_per_node": "gpus-per-node", "ntasks_per_node": "ntasks-per-node", "cpu_bind": "cpu-bind"}

# apptainer/singularity exec options that take an argument (long names; short aliases).
CONTAINER_SHORT = {"B": "bind", "H": "home", "W": "workdir", "o": "overlay", "S": "scratch", "e": "cleanenv",
                   "C": "containall", "c": "contain", "w": "writable", "f": "fakeroot", "u": "userns",
                   "i": "ipc", "p": "pid", "n": "network"}
CONTAINER_WITH_ARG = {"bind", "mount", "env", "env-file", "home", "workdir", "overlay", "scratch", "pwd",
                      "security", "app", "network", "network-args", "dns", "hostname", "apply-cgroups", "cpus",
                      "memory", "memory-reservation", "memory-swap", "cpu-shares", "cpuset-cpus", "cpuset-mems",
                      "blkio-weight", "blkio-weight-device", "fusemount", "no-mount", "oci", "add-caps",
                      "drop-caps", "sif-fuse", "pid-file", "config", "passphrase", "pem-path", "device",
                      "authfile", "docker-login", "cdi-dirs"}


class Option(NamedTuple):
    name: str  # long name without dashes
    value: Value | None
    line: int
    written: str  # as it appeared, for reports


def parse_slurm_options(fields: list[tuple[Value, int]], line: int, stop_at_command: bool = False
                        ) -> tuple[list[Option], int]:
    """sbatch/srun options from `fields`; returns them and the index of the first non-option."""
    options: list[Option] = []
    i = 0
    while i < len(fields):
        value, where = fields[i]
        text = value.text
        if text == "--":
            i += 1
            break
        if not text.startswith("-") or text == "-":
            if stop_at_command:
                break
            i += 1
            continue
        if text.startswith("--"):
            key, has_value, rest = text[2:].partition("=")
            key = ALIASES.get(key, key)
            if has_value:
                options.append(Option(key, value._replace(text=rest), where, text))
                i += 1
            elif key in LONG_FLAGS or i + 1 >= len(fields) or (fields[i + 1][0].text.startswith("-")
                                                               and not fields[i + 1][0].text[1:2].isdigit()):
                options.append(Option(key, None, where, text))
                i += 1
            else:
                options.append(Option(key, fields[i + 1][0], where, f"{text} {fields[i + 1][0].text}"))
                i += 2
            continue
        letter = text[1:2]
        if letter in SHORT_WITH_ARG:
            key = SHORT_WITH_ARG[letter]
            if len(text) > 2:
                rest = text[2:].lstrip("=")
                options.append(Option(key, value._replace(text=rest), where, text))
                i += 1
            elif i + 1 < len(fields):
                options.append(Option(key, fields[i + 1][0], where, f"{text} {fields[i + 1][0].text}"))
                i += 2
            else:
                options.append(Option(key, None, where, text))
                i += 1
            continue
        for flag in text[1:]:
            options.append(Option(SHORT_FLAGS.get(flag, flag), None, where, "-" + flag))
        i += 1
    return options, i


def skip_options(fields: list[tuple[Value, int]], i: int, with_arg: set[str]) -> int:
    while i < len(fields) and fields[i][0].text.startswith("-"):
        i += 2 if fields[i][0].text in with_arg else 1
    return i


def split_binds(value: Value) -> list[Value]:
    """`a:b,c:d:ro` -> one value per bind (Apptainer splits the list on commas)."""
    return [Value(part, value.unresolved if "$" in part else (), value.from_environment)
            for part in value.text.split(",") if part.strip()]


def split_env(value: Value) -> list[Value]:
    """`--env A=1,B=2` -> [A=1, B=2]; a comma not followed by NAME= stays inside the value
    (which Apptainer's CSV parsing may still split: reported as a hazard)."""
    parts: list[str] = []
    for piece in value.text.split(","):
        name = piece.split("=", 1)[0]
        if parts and ("=" not in piece or not name.replace("_", "a").isalnum()):
            parts[-1] += "," + piece
        else:
            parts.append(piece)
    return [Value(p, value.unresolved if "$" in p else (), value.from_environment) for p in parts if "=" in p]


def mount_spec(value: Value) -> Value | None:
    """`type=bind,src=A,dst=B[,ro]` -> `A:B[:ro]`."""
    fields = dict(item.partition("=")[::2] for item in value.text.split(","))
    source = fields.get("src") or fields.get("source")
    target = fields.get("dst") or fields.get("destination") or fields.get("target") or source
    if fields.get("type", "bind") != "bind" or not source:
        return None
    mode = ":ro" if "ro" in fields or fields.get("readonly") in ("", "true") else ""
    return value._replace(text=f"{source}:{target}{mode}")


def parse_container_options(fields: list[tuple[Value, int]], i: int) -> tuple[list[Option], int]:
    """`apptainer exec`/`singularity exec` options from `fields[i:]`; returns them and the index
    of the image (the first non-option)."""
    options: list[Option] = []
    while i < len(fields):
        text = fields[i][0].text
        if text == "--":
            i += 1
            break
        if not text.startswith("-") or text == "-":
            break
        if text.startswith("--"):
            key, has_value, value_text = text[2:].partition("=")
            if has_value:
                value = fields[i][0]._replace(text=value_text)
                i += 1
            elif key in CONTAINER_WITH_ARG and i + 1 < len(fields):
                value = fields[i + 1][0]
                i += 2
            else:
                value = None
                i += 1
        else:
            letters = text[1:]
            key = CONTAINER_SHORT.get(letters[0], letters[0])
            if key in CONTAINER_WITH_ARG:
                if len(letters) > 1:
                    value = fields[i][0]._replace(text=letters[1:])
                    i += 1
                elif i + 1 < len(fields):
                    value = fields[i + 1][0]
                    i += 2
                else:
                    value, i = None, i + 1
            else:
                for letter in letters[1:]:
                    options.append(Option(CONTAINER_SHORT.get(letter, letter), None, fields[i][1], "-" + letter))
                value = None
                i += 1
        options.append(Option(key, value, fields[i - 1][1], text))
    return options, i


def parse_torchrun_options(fields: list[tuple[Value, int]]) -> tuple[list[Option], int]:
    """torchrun's options from `fields` (`--key=value`, `--key value`, flags; `-m` ends them);
    returns them (names with `_`, as torchrun accepts both) and the index of the script."""
    options: list[Option] = []
    flags = {"standalone", "no_python", "no-python", "module", "m", "run_path", "run-path", "tee_all"}
    i = 0
    while i < len(fields):
        value, where = fields[i]
        text = value.text
        if text == "--":
            i += 1
            break
        if not text.startswith("-"):
            break
        key, has_value, rest = text.lstrip("-").partition("=")
        if has_value:
            options.append(Option(key.replace("-", "_"), value._replace(text=rest), where, text))
            i += 1
        elif key in flags or i + 1 >= len(fields):
            options.append(Option(key.replace("-", "_"), None, where, text))
            i += 1
            if key in ("m", "module"):
                break
        else:
            options.append(Option(key.replace("-", "_"), fields[i + 1][0], where, f"{text} {fields[i + 1][0].text}"))
            i += 2
    return options, i
