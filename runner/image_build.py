"""Running the build: `apptainer build` of the plan's definition, with progress.

The definition is written next to the image, the image is built under a temporary name and
renamed on success, so a failed, interrupted or killed build never leaves a half-written
image where the old one was. Apptainer's output goes to `<image>.build.log` and, condensed,
to the terminal (`Progress`: the section it is in, the `%post` step, a heartbeat when not on
a TTY). Ctrl-C or SIGTERM is "interrupted" (KeyboardInterrupt, exit 130) whichever process
sees it first, and the temporary image is removed (`runner.process_control`).
"""

from __future__ import annotations

import os
import platform
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from . import __version__
from .apptainer import Runtime, inspect_labels
from .atomic_write import write_atomic
from .errors import RuntimeFailure, UserError
from .image_labels import LABEL_HASH
from .image_plan import REGISTRY_AGENTS, BuildPlan
from .process_control import Interrupts, stop

_SECTION_MARKERS: tuple[tuple[str, str], ...] = (
    ("running setup scriptlet", "%setup"),
    ("copying files", "%files"),
    ("running post scriptlet", "%post"),
    ("running testscript", "%test"),
    ("adding ", "metadata"),
    ("creating sif file", "sif"),
    ("build complete", "done"),
    ("fetching oci image", "pull"),
    ("fetching image", "pull"),
    ("extracting oci image", "unpack"),
    ("starting build", "start"),
)


class Progress:
    """Turns Apptainer's output into `[ 42s %post] line` (TTY) or a few status lines (not a TTY)."""

    def __init__(self, out: IO[str], *, tty: bool, heartbeat_s: float = 30.0, agent: str = "") -> None:
        self.out = out
        # What runs after "Starting build" until the next INFO line (debootstrap is silent
        # for a minute or more, then prints everything at once).
        self.bootstrap = "pull" if agent in REGISTRY_AGENTS else "bootstrap"
        self.tty = tty
        self.heartbeat_s = heartbeat_s
        self.start = time.monotonic()
        self.last_print = self.start
        self.section = "start"
        self.step = ""
        self.fatal = ""
        self.last_line = ""

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def _emit(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()
        self.last_print = time.monotonic()

    def feed(self, line: str) -> None:
        shown = line.rsplit("\r", 1)[-1].rstrip()
        before = self.section
        lowered = shown.lower()
        if lowered.startswith("info:"):
            for marker, section in _SECTION_MARKERS:
                if marker in lowered:
                    self.section = self.bootstrap if section == "start" else section
                    self.step = ""
                    break
        elif shown.startswith("I: ") and self.section == "start":
            self.section = "bootstrap"
        elif "copying blob" in lowered or "copying config" in lowered:
            self.section = "pull"
        elif shown.startswith("+ ") and self.section.startswith("%"):
            self.step = shown[2:].strip()
        if lowered.startswith("fatal:"):
            self.fatal = shown.strip()
        if shown.strip():
            self.last_line = shown.strip()
        if self.tty:
            self._emit(f"[{self.elapsed():4.0f}s {self.section:<9}] {shown}")
        elif self.section != before:
            self._emit(f"[{self.elapsed():4.0f}s] {self.section}")

    def tick(self) -> None:
        """Called while no output arrives: a heartbeat line when not on a TTY."""
        if not self.tty and time.monotonic() - self.last_print >= self.heartbeat_s:
            step = f": {_short(self.step)}" if self.step else ""
            self._emit(f"[{self.elapsed():4.0f}s] still in {self.section}{step}")

    def failure(self, rc: int, log: Path) -> str:
        where = f"in {self.section}" + (f" at `{_short(self.step)}`" if self.step else "")
        reason = self.fatal or self.last_line or "(no output)"
        return f"build failed {where} (exit {rc}): {_short(reason, 200)}; full log: {log}"


def _short(text: str, limit: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class BuildResult:
    image: Path
    seconds: float
    size_bytes: int
    log_path: Path
    labels_ok: bool


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def _stop(proc: subprocess.Popen, first: int, *, grace: float = 0.0) -> None:
    """Let Apptainer clean up its build directory, then insist. With Ctrl-C on a terminal the
    child got SIGINT too: give it `grace` seconds before signalling it again."""
    stop([proc], [(None, grace), (first, 30.0), (signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)])


def _died_of_sigint(rc: int) -> bool:
    """Exit statuses that mean "stopped by Ctrl-C" even if our own handler did not see it."""
    return rc in (-signal.SIGINT, 128 + signal.SIGINT)


def execute(plan: BuildPlan, runtime: Runtime, *, out: IO[str] | None = None, tty: bool | None = None) -> BuildResult:
    """Run the build: definition next to the image, output to a temporary name, rename on
    success; the temporary image is removed on failure, Ctrl-C or SIGTERM (then
    KeyboardInterrupt is raised: "interrupted", exit 130)."""
    out = out if out is not None else sys.stderr
    tty = out.isatty() if tty is None else tty
    try:
        plan.output.parent.mkdir(parents=True, exist_ok=True)
        plan.tmpdir.mkdir(parents=True, exist_ok=True)  # Apptainer refuses a missing TMPDIR
        if plan.cachedir is not None and plan.cachedir_source == "container.build.cachedir":
            plan.cachedir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create {exc.filename}: {exc.strerror}") from None
    write_atomic(plan.definition_path, plan.definition)
    _remove(plan.temp_output)
    argv = [runtime.path, *plan.argv[1:]]
    env = {**os.environ, **plan.env}
    progress = Progress(out, tty=tty, agent=plan.agent)
    lines: queue.Queue[str | None] = queue.Queue()

    with open(plan.log_path, "w", encoding="utf-8", errors="replace") as log, Interrupts() as interrupts:
        log.write(f"# fabrikit {__version__} build-image {plan.site}: {time.strftime('%Y-%m-%d %H:%M:%S %z')}\n")
        log.write(f"# {runtime.version_text} ({runtime.path}) on {platform.node()} ({plan.host_arch})\n")
        log.write(f"# command: {plan.command_line()}\n")
        log.flush()
        out.write(f"building {plan.output} (site {plan.site}, flavour {plan.flavour}); log {plan.log_path}\n")
        out.flush()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env)

        def reader() -> None:
            assert proc.stdout is not None
            for raw in proc.stdout:
                lines.put(raw.decode("utf-8", errors="replace").rstrip("\n"))
            lines.put(None)

        try:
            threading.Thread(target=reader, daemon=True).start()
            while not interrupts.signum:
                try:
                    line = lines.get(timeout=0.2)
                except queue.Empty:
                    progress.tick()
                    continue
                if line is None:
                    break
                log.write(line + "\n")
                log.flush()
                progress.feed(line)
            if interrupts.signum:
                # Ctrl-C on a terminal reached Apptainer too: let it clean up first. A SIGTERM
                # (kill, scancel) was sent to us alone, so it is passed on at once.
                sigint = interrupts.signum == signal.SIGINT
                _stop(proc, interrupts.signum, grace=5.0 if sigint else 0.0)
            rc = proc.wait()
        finally:
            if proc.poll() is None:  # pragma: no cover - only on unexpected exceptions
                _stop(proc, signal.SIGTERM)
                _remove(plan.temp_output)
        seconds = progress.elapsed()
        if interrupts.signum or _died_of_sigint(rc):
            _remove(plan.temp_output)
            log.write(f"# interrupted after {seconds:.0f} s in {progress.section}; {plan.temp_output} removed\n")
            raise KeyboardInterrupt
        if rc != 0 or not plan.temp_output.is_file():
            _remove(plan.temp_output)
            if rc == 0:
                raise RuntimeFailure(f"{plan.runtime} exited 0 but wrote no image; full log: {plan.log_path}")
            if not tty:  # the output was not shown: show its end
                tail = _tail(plan.log_path, 15)
                out.write("".join(f"  | {line}\n" for line in tail))
            log.write(f"# build failed (exit {rc}) after {seconds:.0f} s\n")
            raise RuntimeFailure(progress.failure(rc, plan.log_path))
        os.replace(plan.temp_output, plan.output)
        log.write(f"# built {plan.output} in {seconds:.0f} s\n")
    try:
        labels = inspect_labels(runtime.path, str(plan.output))
        labels_ok = labels.get(LABEL_HASH) == plan.definition_sha256
    except RuntimeFailure:
        labels_ok = False
    return BuildResult(plan.output, seconds, plan.output.stat().st_size, plan.log_path, labels_ok)


def _tail(path: Path, n: int) -> list[str]:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    return [line for line in lines if not line.startswith("# ")][-n:]
