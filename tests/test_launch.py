"""One launch description, rendered twice: the Slurm script and the local agents come from the
same `runner.launch.LaunchSpec`, and the local plan is pure (everything it needs from this
machine is handed in). Fast: no torch, no Slurm, nothing started."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from runner import launch, local_launch
from runner.container_env import LD_WRAPPER
from runner.errors import UserError
from runner.profile_loader import load_profile
from runner.request import build_request
from runner.shell import Expansion, Slot, Splice, argv, shell_word, shell_words, template
from runner.slurm_script import render

VALUES = {"PLAIN": "a b", "DOLLAR": "$(touch /tmp/x) `id` $HOME", "COMMA": "hsn0,hsn1"}


def _profile(tmp_path: Path, **container: object) -> Path:
    data = {
        "description": "launch test", "backend": "local", "fabric": {"kind": "loopback", "check_transport": False},
        "container": {"runtime": "apptainer", "image": "/images/box.sif", "gpu_flag": "--nv", **container},
        "env": VALUES, "env_expand": {"OUT": "{run_dir}/out-{job_id}"}, "library_path": ["/opt/lib"],
        "binds": [{"source": "/etc/hostname", "target": "/host/hostname"},
                  {"source": "/nonexistent/optional", "required": False}],
        "launcher": {"nproc_per_node": 2, "join_timeout_s": 77},
    }
    path = tmp_path / "box.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _launch_words(script: str) -> list[str]:
    """The words of the batch script's launch command (srun ... job), as bash reads them."""
    lines = script.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('srun --nodes="$SLURM_JOB_NUM_NODES"'))
    end = next(i for i in range(start, len(lines)) if not lines[i].endswith("\\"))
    command = " ".join(line.rstrip("\\") for line in lines[start:end + 1]).split(" 2>&1 | tee")[0]
    return shlex.split(command)


def test_both_backends_render_one_launch(tmp_path: Path) -> None:
    request = build_request(load_profile(str(_profile(tmp_path)), is_path=True), nodes=2)
    run_dir = tmp_path / "run"
    local = local_launch.plan(request, run_dir, port=20001, absent=frozenset({"/nonexistent/optional"}))
    script = render(request)
    agent_argv = list(local.agents[0].argv)
    agent_env = dict(local.agents[0].env)

    # The container prefix and the LD wrapper: the same words, the binds in their slot.
    slurm = _launch_words(script)
    slurm = slurm[slurm.index("apptainer"):]
    assert slurm[:4] == agent_argv[:4] == ["apptainer", "exec", "--no-eval", "--nv"]
    assert slurm[4] == "${binds[@]}" and agent_argv[4:8] == ["--bind", str(run_dir), "--bind",
                                                           "/etc/hostname:/host/hostname:ro"]
    assert slurm[5:10] == agent_argv[8:13] == ["/images/box.sif", "/bin/sh", "-c", LD_WRAPPER, "fabrikit-ld"]
    # torchrun: the same options, each backend's values in the slots.
    assert "--rdzv_conf=join_timeout=77,read_timeout=60" in slurm
    assert "--rdzv_conf=join_timeout=77,read_timeout=60,is_host=1" in agent_argv
    assert "--nnodes=$SLURM_JOB_NUM_NODES" in slurm and "--nnodes=2" in agent_argv
    assert "--rdzv_id=$SLURM_JOB_ID" in slurm and "--rdzv_id=run" in agent_argv
    # The environment: the same names and the same literal values on both sides.
    for name, value in VALUES.items():
        assert agent_env[f"APPTAINERENV_{name}"] == value
        assert f"export APPTAINERENV_{name}={shlex.quote(value)}\n" in script
    assert agent_env["APPTAINERENV_OUT"] == f"{run_dir}/out-run"
    assert 'export APPTAINERENV_OUT="$run_dir"/out-"$SLURM_JOB_ID"\n' in script
    assert agent_env["APPTAINERENV_FABRIKIT_LD_PREPEND"] == "/opt/lib"
    assert "export APPTAINERENV_FABRIKIT_LD_PREPEND=/opt/lib\n" in script
    # The working directory: the run directory on both sides (sbatch --chdir; the agents' cwd).
    assert all(agent.cwd == str(run_dir) for agent in local.agents)
    from runner import slurm_submit
    assert f"--chdir={run_dir}" in slurm_submit.plan(request, run_dir).sbatch_argv
    assert "run_dir=$PWD" in script


def test_without_a_container_the_library_path_extends_the_callers(tmp_path: Path) -> None:
    request = build_request(load_profile(str(_profile(tmp_path, runtime="none")), is_path=True), nodes=1)
    spec = launch.describe(request)
    assert not spec.container and not spec.wrapper and not spec.binds
    plain = local_launch.plan(request, tmp_path / "run", port=20001, python="/venv/bin/python3")
    inherited = local_launch.plan(request, tmp_path / "run", port=20001, environ={"LD_LIBRARY_PATH": "/usr/x"})
    assert dict(plain.agents[0].env)["LD_LIBRARY_PATH"] == "/opt/lib"
    assert dict(inherited.agents[0].env)["LD_LIBRARY_PATH"] == "/opt/lib:/usr/x"
    assert plain.agents[0].argv[:3] == ("/venv/bin/python3", "-m", "torch.distributed.run")
    assert 'export LD_LIBRARY_PATH=/opt/lib"${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"' in render(request)


def test_the_local_plan_is_pure(tmp_path: Path) -> None:
    """Same inputs, same plan; nothing on disk; the host's facts are what was handed in."""
    request = build_request(load_profile(str(_profile(tmp_path)), is_path=True), nodes=2)
    run_dir = tmp_path / "not" / "yet"
    facts = {"port": 20002, "environ": {}, "cpu_count": 8, "absent": frozenset({"/nonexistent/optional"})}
    first, second = local_launch.plan(request, run_dir, **facts), local_launch.plan(request, run_dir, **facts)
    assert first == second and not (tmp_path / "not").exists()
    assert dict(first.agents[1].env)["APPTAINERENV_OMP_NUM_THREADS"] == "2"  # 8 CPUs / (2 nodes x 2 ranks)
    assert "/nonexistent/optional" not in " ".join(first.agents[0].argv)  # optional and absent: left out
    with pytest.raises(UserError, match="bind source /etc/hostname does not exist"):
        local_launch.plan(request, run_dir, port=20002, absent=frozenset({"/etc/hostname"}))


def test_slots_render_as_shell_or_as_values() -> None:
    word = ("--rdzv_conf=a=1", Slot.IS_HOST)
    assert shell_word(word, {Slot.IS_HOST: ""}) == "--rdzv_conf=a=1"  # one word, no stray ''
    assert shell_word(template("{run_dir}/x y"), {Slot.RUN_DIR: Expansion('"$run_dir"')}) == "\"$run_dir\"'/x y'"
    assert shell_word(template(""), {}) == "''"
    args = (("a",), Splice(Slot.BINDS), ("b",))
    assert shell_words(args, {Slot.BINDS: Expansion('"${binds[@]}"')}) == 'a "${binds[@]}" b'
    assert shell_words(args, {Slot.BINDS: ()}) == "a b"
    assert argv(args, {Slot.BINDS: ("--bind", "/x y")}) == ["a", "--bind", "/x y", "b"]
    assert template("{jobid}{job_id}") == ("{jobid}", Slot.JOB_ID)  # only the documented placeholders
