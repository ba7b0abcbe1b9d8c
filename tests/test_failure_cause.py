"""One line naming the cause of a failed job, from logs in the formats srun, slurmstepd,
torchrun and fabrikit print (written here from those formats, not pasted from real jobs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.failure_cause import diagnose
from tests.helpers import cli

TORCHRUN_ROOT_CAUSE = """\
0: torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
0: ============================================================
0: Root Cause (first observed failure):
0: [0]:
0:   time      : 2026-11-22_03:40:01
0:   host      : node2
0:   rank      : 3 (local_rank: 1)
0:   exitcode  : 1 (pid: 4242)
"""

CASES = {
    "task-failed": (["0: fabrikit-train: epoch=0", "srun: error: node2: task 1: Exited with exit code 1",
                     "srun: error: node1: task 0: Killed"], 1, ["task 1 on node node2 failed first"]),
    "signal-kill-wins": (["1: Root Cause (first observed failure):", "1:   host      : node1", "1:   rank      : 0",
                          "1:   exitcode  : 1 (pid: 1)", "srun: error: node1: task 0: Exited with exit code 1",
                          "0: Root Cause (first observed failure):", "0:   host      : node2", "0:   rank      : 2",
                          "0:   exitcode  : -9 (pid: 2)", "srun: error: node2: task 1: Exited with exit code 1"], 1,
                         ["rank 2 on node node2 was killed by SIGKILL"]),
    "killed-only": (["srun: error: node3: task 2: Killed"], 137, ["task 2 on node node3 was killed"]),
    "killed-first-then-exited": (["srun: error: node2: task 1: Killed",
                                  "0: [rank0]: RuntimeError: Connection closed by peer [10.78.0.12]:45762",
                                  "srun: error: node1: task 0: Exited with exit code 1"], 1,
                                 ["task 1 on node node2 was killed (Killed)"]),
    "root-cause-block": (TORCHRUN_ROOT_CAUSE.splitlines(), 1, ["rank 3 on node2 failed first", "exit code 1"]),
    "time-limit": (["slurmstepd: error: *** JOB 17 ON node1 CANCELLED AT 2026-11-22T03:40:00 DUE TO TIME LIMIT ***",
                    "0: fabrikit-train: stopping on signal SIGTERM at step 12, checkpoint saved"], 143,
                   ["time limit reached on node1", "step 12"]),
    "signal-stop": (["0: fabrikit-train: stopping on signal SIGTERM at step 7, checkpoint saved"], 1,
                    ["stopped on SIGTERM at step 7"]),
    "port": (["1: [E socket.cpp] The server socket has failed to listen on any local network address. "
              "port: 29500, useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use"], 1,
             ["rendezvous port already in use (10.0.0.1:29500)"]),
    "rdzv-timeout": (["0: torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError"], 1,
                     ["rendezvous timed out", "10.0.0.1:29500"]),
    "rdzv-unreachable": (["1: torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: "
                          "The connection to the C10d store has failed."], 1,
                         ["could not reach the rendezvous store at 10.0.0.1:29500"]),
    "net-not-found": (["0: node1:77:77 [0] NCCL INFO NCCL WARN Error: network AWS Libfabric not found."], 1,
                      ["NCCL network 'AWS Libfabric' not found"]),
    "bind-missing": (["fabrikit: FAILED: bind source missing on node1: /usr/lib64/libcxi.so.1"], 1,
                     ["bind source missing on node1: /usr/lib64/libcxi.so.1"]),
    "unknown": (["0: something odd"], 3, ["exited with status 3"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_cause(case: str) -> None:
    lines, status, fragments = CASES[case]
    cause = diagnose(lines, status=status, endpoint="10.0.0.1:29500")
    assert cause is not None
    for fragment in fragments:
        assert fragment in cause.message, (fragment, cause)


def test_success_has_no_cause_even_with_noisy_logs() -> None:
    noisy = ["1: torch.distributed.DistNetworkError: Connection reset by peer",
             "1: RendezvousConnectionError: The connection to the C10d store has failed"]
    assert diagnose(noisy, status=0) is None


def test_job_end_command_prints_the_cause_last(tmp_path: Path) -> None:
    log = tmp_path / "job-9.log"
    log.write_text("0: hello\nsrun: error: node2: task 1: Exited with exit code 1\n")
    result = cli("job-end", "--status", "1", "--fabric", "ethernet", "--no-check-transport", str(log), prog="fabrikit")
    assert result.returncode == 1
    assert result.stdout.strip().splitlines()[-1].startswith("fabrikit: FAILED: task 1 on node node2 failed first")
