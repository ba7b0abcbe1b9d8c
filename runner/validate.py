"""The one place that decides which names and texts may reach a script or a definition file.

Everything a profile, a flag or a file name puts into a generated batch script, an Apptainer
definition file or a container's environment is checked here, once, by full-string matching:
the patterns are anchored with `\\A` and `\\Z` (never `^`/`$`: `$` also matches before a final
newline, so `"FOO\\n"` used to pass as a variable name). The schema (`runner.profile`) uses
the same patterns for msgspec's `Meta(pattern=...)` (which searches, hence the anchors), the
profile loader and the command-line flags call the functions below, and the renderers call
them again as a last guard. Error texts are one line and say how to fix the value.

What is checked here is *names* (variables, sites, build arguments, Slurm words) and the
characters a value may carry. Values themselves are never rewritten: env values, job
arguments, bind paths and library paths reach the job byte for byte (see README, "Values
are literal"), or are refused here when no runtime can deliver them unchanged.
"""

from __future__ import annotations

import re

from .errors import UserError

# ---- patterns (full-string; shared with the msgspec schema) ------------------------------
ENV_NAME = r"\A[A-Za-z_][A-Za-z0-9_]*\Z"
SITE_NAME = r"\A[a-z0-9][a-z0-9_-]*\Z"
BUILD_ARG_NAME = r"\A[A-Za-z_][A-Za-z0-9_]{0,63}\Z"
JOB_NAME = r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z"
# Absolute, without ',' (Apptainer's --bind list separator), ':' (src:dst:mode) or NUL.
ABSOLUTE_PATH = r"\A/[^,:\x00]*\Z"
# A library directory for LD_LIBRARY_PATH: the dynamic loader also splits on ';'.
LIBRARY_DIR = r"\A/[^,:;\x00]*\Z"
# A soname such as libcxi.so.1 or libstdc++.so.6: a file name, no path, no list separators.
SONAME = r"\A[A-Za-z0-9_+][A-Za-z0-9_.+-]*\.so(?:\.[A-Za-z0-9_]+)*\Z"
# A Slurm-style hexadecimal CPU mask (`srun --cpu-bind=mask_cpu:` accepts the same text).
CPU_MASK = r"\A0x[0-9A-Fa-f]{1,256}\Z"
# A network interface (Linux IFNAMSIZ: at most 15 characters, no '/' or blanks).
INTERFACE = r"\A[A-Za-z0-9_.:@-]{1,15}\Z"
MEMORY = r"\A[1-9][0-9]*[KMGT]?\Z"
SLURM_TIME = r"\A(?:[0-9]+-[0-9]{1,2}(?::[0-9]{2}(?::[0-9]{2})?)?|[0-9]+(?::[0-9]{2}(?::[0-9]{2})?)?)\Z"
# A word sbatch reads on an `#SBATCH` line (its own parser, not a shell's): no quoting needed.
SBATCH_WORD = r"\A[A-Za-z0-9._/=:,@+%-]+\Z"

HINTS: dict[str, str] = {
    ENV_NAME: "is not a valid environment variable name (letters, digits and '_', not starting with a digit)",
    SITE_NAME: "is not a valid site name (lower-case letters, digits, '_' and '-', starting with a letter or digit)",
    BUILD_ARG_NAME: "is not a valid build argument name (letters, digits and '_', at most 64)",
    JOB_NAME: "is not a valid job name (letters, digits, '.', '_' or '-', at most 128)",
    ABSOLUTE_PATH: "must be an absolute path (starting with /) without ',' or ':'",
    LIBRARY_DIR: "must be an absolute directory (starting with /) without ',', ':' or ';' "
                 "(the dynamic loader splits LD_LIBRARY_PATH on ':' and ';')",
    SONAME: "must be a library's soname such as libcxi.so.1 (a file name: no '/', ',' or ':')",
    CPU_MASK: "is not a hexadecimal CPU mask (expected 0x followed by hex digits, e.g. 0x00fe000000000000)",
    INTERFACE: "must be a network interface name (at most 15 letters, digits, '_', '.', ':', '@' or '-'), e.g. hsn0",
    MEMORY: "malformed memory size (expected a positive integer with optional unit K, M, G or T, e.g. 440G)",
    SLURM_TIME: "malformed time limit (expected minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS)",
    SBATCH_WORD: "contains characters that are not allowed here (use letters, digits and . _ - / = : , @ + %)",
}

_COMPILED: dict[str, re.Pattern[str]] = {}


def matches(pattern: str, value: str) -> bool:
    compiled = _COMPILED.get(pattern)
    if compiled is None:
        compiled = _COMPILED[pattern] = re.compile(pattern)
    return compiled.fullmatch(value) is not None


def check(pattern: str, value: str, field: str, *, where: str | None = None) -> str:
    """`value` if it matches `pattern` as a whole, else a one-line UserError naming `field`."""
    if not matches(pattern, value):
        raise UserError(f"{field}: {value!r} {HINTS[pattern]}", where=where)
    return value


# ---- environment variable names -------------------------------------------------------------
# Variables the generated batch script assigns itself: with `container.runtime: none` the
# profile's env is exported into that very shell (tests/test_literal_values.py checks that
# this list covers every variable the templates assign).
SCRIPT_VARIABLES = frozenset({
    "run_dir", "job_log", "binds", "missing", "nodes", "head_node", "rdzv_port", "probe", "head_addr",
    "nproc", "status", "gpu_monitor", "iface", "port", "addr", "p", "runtime_help",
})
# Slurm variables the batch script and the jobs read: a profile value would replace Slurm's.
SLURM_READ = frozenset({"SLURM_JOB_ID", "SLURM_JOB_NUM_NODES", "SLURM_JOB_NODELIST", "SLURM_RESTART_COUNT",
                        "SLURM_GPUS_ON_NODE", "SLURM_PROCID", "SLURM_NODEID", "SLURM_LOCALID", "SLURM_NTASKS"})
# Shell variables that change how bash itself parses or runs the script.
SHELL_SPECIAL = frozenset({
    "IFS", "PATH", "ENV", "CDPATH", "GLOBIGNORE", "SHELLOPTS", "POSIXLY_CORRECT", "PS1", "PS2", "PS3", "PS4",
    "PROMPT_COMMAND", "HOME", "PWD", "OLDPWD", "SHELL", "OPTIND", "OPTARG", "OPTERR", "FUNCNEST", "TMOUT",
    "HISTFILE", "MAIL", "MAILPATH", "MAILCHECK", "LINENO", "RANDOM", "SRANDOM", "SECONDS", "EPOCHREALTIME",
    "EPOCHSECONDS", "UID", "EUID", "PPID", "GROUPS", "HOSTNAME", "HOSTTYPE", "MACHTYPE", "OSTYPE", "PIPESTATUS",
    "FUNCNAME", "DIRSTACK", "COLUMNS", "LINES", "INPUTRC", "TIMEFORMAT", "EXECIGNORE", "CHILD_MAX",
})
# Set by torchrun for every worker: a profile value is overwritten or breaks the rendezvous.
TORCHRUN_SET = frozenset({"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                          "ROLE_RANK", "ROLE_NAME", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"})
RESERVED_PREFIXES: tuple[tuple[str, str], ...] = (
    ("BASH", "a bash variable"),
    ("APPTAINER", "Apptainer reads APPTAINER* variables itself"),
    ("SINGULARITY", "Singularity reads SINGULARITY* variables itself"),
    ("FABRIKIT_", "fabrikit sets FABRIKIT_* variables itself"),
    ("TORCHELASTIC_", "set by torchrun for every worker"),
)


def reserved_reason(name: str) -> str | None:
    """Why `name` may not be set through a profile, or None if it may."""
    if name == "LD_LIBRARY_PATH":
        return "fabrikit builds it: list directories under `library_path:` (prepended inside the container)"
    if name in SCRIPT_VARIABLES:
        return "the batch script uses this variable itself"
    if name in SLURM_READ:
        return "Slurm sets it and the batch script reads it"
    if name in SHELL_SPECIAL:
        return "it changes how the batch shell itself behaves"
    if name in TORCHRUN_SET:
        return "torchrun sets it for every worker"
    for prefix, reason in RESERVED_PREFIXES:
        if name.startswith(prefix):
            return reason
    return None


def env_name(name: str, field: str, *, where: str | None = None) -> str:
    """A variable name a profile may set: an identifier, and not one fabrikit, the shell,
    Slurm, the runtime or torchrun owns."""
    check(ENV_NAME, name, field, where=where)
    reason = reserved_reason(name)
    if reason:
        raise UserError(f"{field}: {name} is reserved ({reason})", where=where)
    return name


# ---- characters a value may carry -----------------------------------------------------------
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def literal(value: str, field: str, *, where: str | None = None) -> str:
    """A value passed on byte for byte (env values, job arguments): anything goes except
    what no runtime can deliver unchanged."""
    if "\x00" in value:
        raise UserError(f"{field}: contains a NUL character, which no environment variable or "
                        "argument can carry", where=where)
    if _SURROGATE.search(value):
        raise UserError(f"{field}: {value!r} is not valid UTF-8 (Apptainer replaces such bytes with "
                        "U+FFFD, so it could not reach the job unchanged)", where=where)
    return value


def env_value(value: str, field: str, *, where: str | None = None) -> str:
    """An env value: literal, and without CR LF, which Apptainer's environment injection
    turns into a bare LF (measured with Apptainer 1.4.5 --no-eval)."""
    literal(value, field, where=where)
    if "\r\n" in value:
        raise UserError(f"{field}: contains CR LF (\\r\\n), which Apptainer turns into LF inside the "
                        "container; use LF line breaks", where=where)
    return value


def text_line(value: str, field: str, *, where: str | None = None) -> str:
    """One line of text without control characters (`#` comments, labels)."""
    if _CONTROL.search(value) or "\n" in value or "\r" in value:
        raise UserError(f"{field}: {value!r} must be one line without control characters", where=where)
    return literal(value, field, where=where)


def text(value: str, field: str, *, where: str | None = None) -> str:
    """Free text (descriptions, notes): line breaks and tabs are fine, other control
    characters are not (a NUL or ESC in a script comment is never intended)."""
    if _CONTROL.search(value.replace("\r", "")):
        raise UserError(f"{field}: {value!r} contains control characters", where=where)
    return literal(value, field, where=where)


def label_value(value: str, field: str, *, where: str | None = None) -> str:
    """A `%labels` value: Apptainer reads `NAME VALUE` lines, trims the value and substitutes
    `{{ NAME }}` build arguments everywhere in the file, so none of those may be in it."""
    text_line(value, field, where=where)
    if value != value.strip():
        raise UserError(f"{field}: {value!r} has leading or trailing white space, which a "
                        "%labels line loses", where=where)
    if "{{" in value or "}}" in value:
        raise UserError(f"{field}: {value!r} contains '{{{{' or '}}}}', which Apptainer reads as a "
                        "build argument", where=where)
    return value


def build_arg_value(value: str, field: str, *, where: str | None = None) -> str:
    """A build argument's value: Apptainer substitutes it into the definition text and
    `--build-arg` is one line, so no line break, NUL or `{{`/`}}`."""
    literal(value, field, where=where)
    if any(c in value for c in "\n\r") or "{{" in value or "}}" in value:
        raise UserError(f"{field}: {value!r} must be one line without '{{{{' or '}}}}'", where=where)
    return value


# ---- Slurm ------------------------------------------------------------------------------------
def sbatch_word(value: str, field: str, *, where: str | None = None) -> str:
    """A value on an `#SBATCH` line (sbatch parses those lines itself, not a shell)."""
    if value == "":
        raise UserError(f"{field}: must not be empty", where=where)
    return check(SBATCH_WORD, value, field, where=where)


# Options fabrikit writes itself (or that have their own profile key / flag). getopt_long
# accepts any unambiguous prefix of a long option, so a prefix of one of these is refused too.
OWNED_SBATCH: dict[str, str] = {
    "--job-name": "use --job-name", "--nodes": "use --nodes", "--ntasks-per-node": "fabrikit runs one task per node",
    "--ntasks": "fabrikit runs one task per node", "--output": "fabrikit writes slurm-%j.out in the run directory",
    "--error": "fabrikit keeps one batch log, slurm-%j.out", "--chdir": "the run directory is the working directory",
    "--partition": "use scheduler.partition or --partition", "--account": "use scheduler.account or --account",
    "--time": "use scheduler.time or --time", "--gpus-per-node": "use scheduler.gpus_per_node",
    "--gpus": "use scheduler.gpus_per_node", "--cpus-per-task": "use scheduler.cpus_per_task",
    "--mem": "use scheduler.mem", "--constraint": "use scheduler.constraint",
    "--signal": "use scheduler.signal_lead_s", "--requeue": "use scheduler.requeue or --requeue",
    "--no-requeue": "use scheduler.requeue or --no-requeue", "--open-mode": "set by --requeue",
    "--parsable": "run-multinode reads sbatch's answer itself", "--wrap": "fabrikit writes the batch script",
    "--array": "one fabrikit run is one job",
}
OWNED_SBATCH_SHORT: dict[str, str] = {
    "-J": "--job-name", "-N": "--nodes", "-n": "--ntasks", "-o": "--output", "-e": "--error", "-D": "--chdir",
    "-p": "--partition", "-A": "--account", "-t": "--time", "-G": "--gpus", "-c": "--cpus-per-task",
    "-C": "--constraint", "-a": "--array",
}


def sbatch_extra(option: str, field: str, *, where: str | None = None) -> str:
    """One `scheduler.sbatch_extra` entry: a plain word that does not set an owned option."""
    if not matches(SBATCH_WORD, option):
        raise UserError(f"{field}: {option!r} {HINTS[SBATCH_WORD]}; write one option as --name=value",
                        where=where)
    if not option.startswith("-") or option in ("-", "--"):
        raise UserError(f"{field}: {option!r} is not an sbatch option (write it as --name=value)", where=where)
    if option.startswith("--"):
        name = option.split("=", 1)[0]
        owned = [long for long in OWNED_SBATCH if long.startswith(name)]
        if owned:
            exact = name if name in OWNED_SBATCH else owned[0]
            raise UserError(f"{field}: {option} would override {exact}, which fabrikit sets "
                            f"({OWNED_SBATCH[exact]})", where=where)
    else:
        long = OWNED_SBATCH_SHORT.get(option[:2])
        if long:
            raise UserError(f"{field}: {option} is {long}, which fabrikit sets ({OWNED_SBATCH[long]})",
                            where=where)
    return option


# ---- ports --------------------------------------------------------------------------------------
MAX_PORT = 65535


def port_range(base: int, span: int, field: str, *, where: str | None = None) -> None:
    """The rendezvous port is base + (job id mod span): the highest must be a TCP port."""
    if base + span - 1 > MAX_PORT:
        raise UserError(f"{field}: port_base + port_span = {base + span} exceeds 65536 (the highest rendezvous "
                        f"port would be {base + span - 1}); lower port_base or port_span", where=where)
