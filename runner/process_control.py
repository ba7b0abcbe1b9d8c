"""Stopping the programs fabrikit runs: shared by the local launcher and build-image.

`Interrupts` records SIGINT and SIGTERM while children run, instead of raising wherever the
signal lands, so the caller decides once, with the children stopped, what happened. `stop`
escalates: each step sends a signal to whatever still runs and waits its grace period.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence


class Interrupts:
    """Records SIGINT and SIGTERM (the first one wins) while a `with` block runs.

    SIGINT is handled even when it was inherited *ignored* (a CI runner, `cmd &` in a script):
    a child such as Apptainer's Go runtime un-ignores it and still dies of a Ctrl-C (measured
    with apptainer 1.4.5: exit 1 within a second), so a parent that kept ignoring it would call
    an interrupted run a failed one. Our handler also means a child starts with the default
    action (exec resets caught signals, but keeps ignored ones).
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.signum = 0
        self._previous: dict[int, object] = {}

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is threading.main_thread():  # handlers need the main thread
            self._previous = {sig: signal.signal(sig, self._record) for sig in self.SIGNALS}
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            if handler is not None:  # None: set outside Python (C code), cannot be put back from here
                signal.signal(sig, handler)

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum else ""

    def _record(self, signum: int, _frame: object) -> None:
        self.signum = self.signum or signum


def _send(proc: subprocess.Popen, sig: int) -> None:
    proc.send_signal(sig)


def wait_all(procs: Sequence[subprocess.Popen], timeout: float) -> bool:
    """Wait up to `timeout` seconds in all for every process to exit; True if they did."""
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            return False
    return True


def stop(procs: Sequence[subprocess.Popen], steps: Sequence[tuple[int | None, float]], *,
         send: Callable[[subprocess.Popen, int], None] = _send) -> bool:
    """For each `(signal, grace)`: send `signal` (None: nothing, just wait) to every process
    still running, then wait up to `grace` seconds for all of them. True once none runs."""
    for sig, grace in steps:
        running = [proc for proc in procs if proc.poll() is None]
        if not running:
            return True
        if sig is not None:
            for proc in running:
                try:
                    send(proc, sig)
                except ProcessLookupError:
                    pass
        if wait_all(running, grace):
            return True
    return all(proc.poll() is not None for proc in procs)
