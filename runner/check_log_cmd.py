"""`fabrikit check-log FILE... [--json] [--fabric slingshot|infiniband|ethernet]`.

Reads NCCL_DEBUG=INFO output (a job's combined log, or one file per rank; `-` is stdin) and
says which network NCCL (or RCCL) used between nodes on each rank: `ofi` (with its libfabric
provider), `ib`, `socket`, `failed` (with the transport it was trying) or `none` (no traffic
crossed nodes). runner.nccl_log does the parsing, in one pass with bounded memory.

Exit codes:
  0  the fast path of the fabric was used on every rank that moved data between nodes
     (OFI/cxi on slingshot, IB on infiniband, anything on ethernet or with no --fabric), or
     the job ran on a single node so the network carried no traffic;
  1  a fallback (TCP sockets, libfabric's tcp provider) or a failed network init on some rank;
     also no network selection at all when --fabric names a fabric that needs one
     (slingshot, infiniband): such a job cannot be confirmed fast;
  2  bad input: a missing, unreadable or empty file, a directory, binary data (`/dev/zero`),
     compressed data that is corrupt from its start, zstd where this Python cannot read it,
     a bad --env.

Warnings (LL128 hazard, missing plugin, ...) are printed but only the verdict sets the exit
code. Standalone: `python3 -m runner.check_log_cmd FILE...`.
"""

from __future__ import annotations

import os
import stat
import sys
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

import click

from runner import fabrics
from runner.errors import UserError
from runner.text_table import table_lines

if TYPE_CHECKING:  # keep import time small: the parser is loaded when the command runs
    from runner.nccl_log import LogAnalyser, LogVerdict

MAX_TABLE_ROWS = 64


def _feed_stream(analyser: "LogAnalyser", raw, name: str) -> bool:
    """Feed one binary stream (gzip, bzip2 or xz: its text); return whether it held
    anything but whitespace. Raises UserError for a stream of binary data (`/dev/zero`, a
    core file) and for compressed data that is corrupt from its start."""
    from runner import compressed_logs  # (with the parser: gzip, bz2, lzma only when read)

    stream, compression = compressed_logs.open_log(raw, name)
    stats = analyser.feed_stream(stream, name)
    error = compressed_logs.read_error(stream)
    if error and not stats.bytes_read:
        raise UserError(error, where=name)
    if error:  # what came before is a log like any other: judge it, and say where it ends
        analyser.input_cut(name, error)
    if stats.binary and not stats.text:
        inside = f" inside its {compression} compression" if compression else ""
        raise UserError(f"binary data{inside}, not a text log (stopped after "
                        f"{stats.bytes_read >> 20} MiB)", where=name)
    return stats.text


def _file_size(path: str) -> int:
    """A regular file's size, else 0 (a pipe, a device, a missing file: reading says why)."""
    try:
        st = os.stat(path)
    except OSError:
        return 0
    return st.st_size if stat.S_ISREG(st.st_mode) else 0


def check_files(paths: Sequence[str], fabric: str | None = None,
                env: Mapping[str, str] | None = None, scan_engine: str = "auto") -> "LogVerdict":
    """Analyse the given files (`-` = stdin) as one job. Raises UserError for bad input.
    `scan_engine`: see LogAnalyser (the benchmark compares them; the answer is the same)."""
    from runner import compressed_logs
    from runner.nccl_log import LogAnalyser

    if not paths:
        raise UserError("no log file given")
    names = ["<stdin>" if p == "-" else p for p in paths]
    # (stdin cannot be read twice: its log is judged without what a second read would give)
    analyser = LogAnalyser(source=names[0], expected_fabric=fabric, env=env, scan_engine=scan_engine,
                           reread=None if "-" in paths else compressed_logs.blocks_again(paths))
    analyser.expect_bytes(sum(_file_size(p) for p in paths if p != "-"))
    stdin_used = False
    for path, name in zip(paths, names):
        if path == "-":
            if stdin_used:
                raise UserError("stdin ('-') given more than once")
            stdin_used = True
            if not _feed_stream(analyser, sys.stdin.buffer, name):
                raise UserError("empty input (no log lines)", where=name)
            continue
        if os.path.isdir(path):
            raise UserError("is a directory, not a log file", where=path)
        try:
            with open(path, "rb") as stream:
                if not _feed_stream(analyser, stream, name):
                    raise UserError("empty log file", where=path)
        except FileNotFoundError:
            raise UserError("no such file", where=path) from None
        except PermissionError:
            raise UserError("permission denied", where=path) from None
        except IsADirectoryError:
            raise UserError("is a directory, not a log file", where=path) from None
        except OSError as exc:
            raise UserError(f"cannot read: {exc.strerror or exc}", where=path) from None
    return analyser.result()


def _parse_env(items: Iterable[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or not key.replace("_", "").isalnum():
            raise UserError(f"--env wants KEY=VALUE, got {item!r}")
        env[key] = value
    return env


def format_table(verdict: "LogVerdict", max_rows: int = MAX_TABLE_ROWS) -> str:
    """One row per rank: rank, host:pid, transport, provider/devices, NCCL, plugin."""
    from runner.nccl_log import ofi_plugin_name  # (loaded already: the verdict is its)

    header = ("RANK", "HOST:PID", "TRANSPORT", "PROVIDER/DEVICES", "NCCL", "PLUGIN")
    rows = []
    for r in verdict.ranks[:max_rows]:
        if r.transport.value == "ofi":
            where = r.provider or "?"
            extra = [x for x in (f"fabric {r.ofi_fabric}" if r.ofi_fabric else None,
                                 f"{r.nics} nics" if r.nics is not None else None) if x]
            if extra:
                where += f" ({', '.join(extra)})"
        elif r.transport.value == "ib":
            where = ",".join(r.ib_devices) or "-"
        elif r.transport.value == "socket":
            where = ",".join(r.socket_ifaces) or "-"
        elif r.transport.value == "failed":
            tried = f"trying {r.attempted.value}: " if r.attempted else ""
            where = f"{tried}{r.failure or '-'}"
        elif r.selected.value != "none":  # chose a network, but sent nothing across nodes
            where = f"selected {r.selected_label}, no inter-node traffic"
        else:
            where = "-"
        version = (f"{ofi_plugin_name(r.library or verdict.library)} {r.plugin_version}"
                   if r.plugin_version else None)
        plugin = " ".join(x for x in (r.plugin, f"({r.plugin_api})" if r.plugin_api else None,
                                      version) if x) or ("internal" if r.plugin_missing else "-")
        nccl = r.nccl_version or verdict.nccl_version or "-"
        rows.append((str(r.rank) if r.rank is not None else "?", r.who, r.transport.value,
                     where, nccl, plugin))
    lines = table_lines(header, rows)
    if len(verdict.ranks) > max_rows:
        lines.append(f"... {len(verdict.ranks) - max_rows} more ranks (use --json for all)")
    return "\n".join(lines)


def format_human(verdict: "LogVerdict") -> str:
    parts = []
    if verdict.ranks:
        parts.append(format_table(verdict))
    for w in verdict.warnings:
        parts.append(f"warning [{w.code}]: {w.message}")
    parts.append(verdict.summary)
    return "\n".join(parts)


@click.command("check-log")
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option("--fabric", type=click.Choice(fabrics.CHECKED), default=None,
              help="The job's fabric; without it sockets count as expected unless the log "
                   "shows the fabric they stood in for: sockets on hsn*/ib* interfaces, the "
                   "cxi provider, or an IB device NCCL could not open.")
@click.option("--env", "env_items", multiple=True, metavar="KEY=VALUE",
              help="The job's environment, e.g. --env NCCL_PROTO=^LL128 (for the GH200 LL128 "
                   "check when the log does not echo it). Repeatable.")
@click.option("--inherit-env", is_flag=True,
              help="Take NCCL_PROTO and FI_CXI_RDZV_* from this process's environment "
                   "(APPTAINERENV_X / SINGULARITYENV_X first, as the container saw them).")
@click.pass_context
def check_log(ctx: click.Context, files: tuple[str, ...], as_json: bool, fabric: str | None,
              env_items: tuple[str, ...], inherit_env: bool) -> None:
    """Say which network NCCL or RCCL used between nodes, from NCCL_DEBUG=INFO logs (FILE
    may be - for stdin; several FILEs are one job, e.g. one file per rank).

    Verdicts per rank and for the job: ofi (with its libfabric provider: cxi, efa, ...), ib,
    socket, failed (with the transport it was trying) or none (no inter-node traffic: one
    host, or nNodes 1; also an init that died within a node, in shared memory, P2P or
    NCCL's topology code: a warning says which). A link that broke after it was up keeps
    its transport, and a warning says how it broke. A job whose ranks differ is reported
    per rank and flagged mixed. In --json: transport, provider, attempted, mixed, and a
    ranks list with the same per rank.

    Exit 0 fast path (or single node), 1 fallback/failed (or no network seen with a --fabric
    that needs one), 2 bad input (including binary data).

    Lines are read as NCCL wrote them or as launchers, exports and pastes wrapped them:
    srun -l, Open MPI's --tag-output (and --timestamp-output), torchrun's and Ray's tags,
    kubectl's --timestamps and --prefix, CloudWatch (console or CSV), Docker's JSON log, a
    notebook's output, a markdown quote or code block, a web page's escapes; and with
    NCCL's own prefix or the level stripped.

    Logs compressed with gzip, bzip2 or xz (told by their first bytes, also on stdin) are
    read as their text; one cut short (compressed while the job wrote it) is judged on the
    text before the cut, with a warning.

    Logs of any size are read in one pass, in bounded memory. On logs over 16 MiB, hyperscan
    (a dependency on Linux x86_64; elsewhere pip install 'fabrikit[fast]') finds the lines
    that matter up to ~5x faster than Python's regex engine; the answer is the same
    without it (fabrikit --version says which runs). Its compiled database is kept in
    $FABRIKIT_CACHE_DIR, else $XDG_CACHE_HOME/fabrikit or ~/.cache/fabrikit (110 KB), so
    only the first big log pays the 0.1 s compile.
    """
    try:
        from runner.nccl_log import job_guard_env

        env = job_guard_env(os.environ) if inherit_env else {}
        env.update(_parse_env(env_items))
        verdict = check_files(files, fabric, env)
    except UserError as exc:
        click.echo(f"fabrikit check-log: error: {exc}", err=True)
        ctx.exit(2)
        return
    click.echo(verdict.to_json() if as_json else format_human(verdict))
    ctx.exit(verdict.exit_code)


def main(argv: Sequence[str] | None = None) -> None:
    check_log.main(args=list(argv) if argv is not None else None,
                   prog_name="fabrikit check-log")


if __name__ == "__main__":
    main()
