"""`run-multinode --dry-run`: golden scripts per site, shellcheck, determinism, bad flags.

Golden files live in tests/golden/ and change only through `pytest --update-golden`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import cli, one_line_error, require_program

GOLDEN = Path(__file__).resolve().parent / "golden"
SLURM_SITES = ["olivia", "raven", "gilbreth", "ethernet", "lumi", "alps", "leonardo"]


def dry_run(*args: str) -> str:
    result = cli("--dry-run", *args)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("site", SLURM_SITES)
@pytest.mark.parametrize("nodes", [1, 2])
def test_golden_script(site: str, nodes: int, request: pytest.FixtureRequest) -> None:
    script = dry_run("--site", site, "--nodes", str(nodes))
    golden = GOLDEN / f"{site}-{nodes}node.sbatch"
    if request.config.getoption("--update-golden", default=False) or not golden.exists():
        golden.write_text(script)
        if not request.config.getoption("--update-golden", default=False):
            pytest.fail(f"created missing golden file {golden.name}: review it and commit it")
    assert script == golden.read_text(), f"{golden.name} differs: review, then run pytest --update-golden"


@pytest.mark.parametrize("site", SLURM_SITES)
def test_script_passes_shellcheck(site: str, tmp_path: Path) -> None:
    shellcheck = require_program("shellcheck", "apt-get install shellcheck")
    for nodes in ("1", "2", "4"):
        path = tmp_path / f"{site}-{nodes}.sbatch"
        path.write_text(dry_run("--site", site, "--nodes", nodes))
        result = subprocess.run([shellcheck, "-s", "bash", str(path)], capture_output=True, text=True)
        assert result.returncode == 0, result.stdout


def _assert_has(script: str, needles: list[str]) -> None:
    for needle in needles:
        assert needle in script, needle


def _code(script: str) -> list[str]:
    """The script's lines that are not comments."""
    return [line for line in script.splitlines() if not line.lstrip().startswith("#")]


def _no_env_flag_no_whole_lib64(script: str) -> None:
    assert "--bind /usr/lib64:" not in script and "/usr/lib64 /usr/lib64" not in script
    assert not any("--env " in line or "--cleanenv" in line for line in _code(script))


def test_olivia_carries_every_element_of_the_seed_job() -> None:
    script = dry_run("--site", "olivia", "--nodes", "2")
    _assert_has(script, [
        "#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=1", "#SBATCH --partition=accel",
        "#SBATCH --gpus-per-node=4", "#SBATCH --cpus-per-task=72", "#SBATCH --mem=440G",
        "fabrikit_bind /opt/cray/libfabric/1.22.0/lib64 /opt/libfabric/lib ro required",
        "fabrikit_bind /cluster/work/support/nccl /opt/nccl ro required",
        "fabrikit_bind /usr/lib64/libcxi.so.1 /opt/fabrikit/hostlib/libcxi.so.1 ro required",
        "fabrikit_bind /opt/nvidia/hpc_sdk/Linux_aarch64/24.11/compilers/lib /opt/nvidia/hpc_sdk/lib ro required",
        "APPTAINERENV_FABRIKIT_LD_PREPEND=/opt/libfabric/lib:/opt/nccl/lib:",
        'scontrol show hostnames "$SLURM_JOB_NODELIST"',
        'srun --nodes=1 --ntasks=1 -w "$head_node"',
        "--rdzv_backend=c10d", '--rdzv_id="$SLURM_JOB_ID"', '--rdzv_endpoint="$head_addr:$rdzv_port"',
        'nproc=${SLURM_GPUS_ON_NODE:-4}', "apptainer exec --no-eval --nv",
        "export APPTAINERENV_NCCL_PROTO='^LL128'", "export APPTAINERENV_FI_CXI_RDZV_PROTO=alt_read",
        "export APPTAINERENV_NCCL_SOCKET_IFNAME=hsn0,hsn1,hsn2,hsn3",
    ])
    _no_env_flag_no_whole_lib64(script)


def test_site_facts_reach_their_scripts() -> None:
    gilbreth = dry_run("--site", "gilbreth", "--nodes", "2")
    assert "#SBATCH --partition=a100-80gb" in gilbreth
    assert "APPTAINERENV_NCCL_IB_HCA=mlx5_0" in gilbreth and "APPTAINERENV_NCCL_SOCKET_IFNAME=ib0" in gilbreth
    raven = dry_run("--site", "raven", "--nodes", "2")
    assert "#SBATCH --gpus-per-node=4" in raven and "#SBATCH --constraint=gpu-bw" in raven
    ethernet = dry_run("--site", "ethernet", "--nodes", "2")
    assert "APPTAINERENV_NCCL_SOCKET_IFNAME=eth0" in ethernet


def test_lumi_carries_the_lumi_ai_guide_job() -> None:
    """Lumi-supercomputer/LUMI-AI-Guide 05-multi-gpu-and-node/run_ddp_torchrun_4.sh: its #SBATCH
    lines, RCCL interfaces, MIOpen cache, first-host rendezvous with c10d and the job-id port."""
    script = dry_run("--site", "lumi", "--nodes", "4")
    _assert_has(script, [
        "#SBATCH --partition=standard-g", "#SBATCH --nodes=4", "#SBATCH --gpus-per-node=8",
        "#SBATCH --time=01:00:00", "#SBATCH --ntasks-per-node=1", "#SBATCH --cpus-per-task=56",
        "#SBATCH --mem=480G",
        "export SINGULARITYENV_NCCL_SOCKET_IFNAME=hsn0,hsn1,hsn2,hsn3",
        "export SINGULARITYENV_NCCL_NET_GDR_LEVEL=PHB",
        "export SINGULARITYENV_MIOPEN_USER_DB_PATH=/tmp/", "export SINGULARITYENV_MIOPEN_CUSTOM_CACHE_DIR=/tmp/",
        'scontrol show hostnames "$SLURM_JOB_NODELIST"', "rdzv_port=$((10000 + SLURM_JOB_ID % 10000))",
        '--rdzv_id="$SLURM_JOB_ID" --rdzv_backend=c10d', 'nproc=${SLURM_GPUS_ON_NODE:-8}',
        "singularity exec --no-eval --rocm", "fabrikit_bind /opt/cray/libfabric/", "/opt/libfabric/lib ro required",
        "fabrikit_bind /usr/lib64/libcxi.so.1 /opt/fabrikit/hostlib/libcxi.so.1 ro required",
        "fabrikit_bind /var/spool/slurmd /var/spool/slurmd ro optional",
        "SINGULARITYENV_FABRIKIT_LD_PREPEND=/opt/libfabric/lib:",
        # the per-GCD masks of the LUMI guide's CPU_BIND_MASKS, in local-rank order
        "FABRIKIT_CPU_BIND_MASKS=0x00fe000000000000,0xfe00000000000000,0x0000000000fe0000,"
        "0x00000000fe000000,0x00000000000000fe,0x000000000000fe00,0x000000fe00000000,0x0000fe0000000000",
        "rocm-smi", "--fabric slingshot --endpoint",
    ])
    assert "export APPTAINERENV_" not in script  # LUMI runs SingularityCE
    assert not any("nvidia-smi" in line or "exec --nv" in line for line in _code(script))
    _no_env_flag_no_whole_lib64(script)
    # The guide's MASTER_PORT="1${SLURM_JOB_ID:0-4}" is the same port for job ids >= 1000.
    for job_id in (1000, 4242, 987654, 12345678):
        assert 10000 + job_id % 10000 == int("1" + str(job_id)[-4:])


def test_alps_carries_the_cscs_settings() -> None:
    """cscs-docs: Daint's normal partition, 4 GH200 per node, one task per node running
    torchrun (llm-nanotron-training.md), and the NCCL/libfabric env of nccl_env_vars and the
    Container Engine hook defaults (clusters/daint.md)."""
    script = dry_run("--site", "alps", "--nodes", "2")
    _assert_has(script, [
        "#SBATCH --partition=normal", "#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=1",
        "#SBATCH --gpus-per-node=4", 'nproc=${SLURM_GPUS_ON_NODE:-4}', "apptainer exec --no-eval --nv",
        "export APPTAINERENV_NCCL_NET='AWS Libfabric'", "export APPTAINERENV_NCCL_NET_GDR_LEVEL=PHB",
        "export APPTAINERENV_NCCL_PROTO='^LL128'", "export APPTAINERENV_FI_CXI_DEFAULT_CQ_SIZE=131072",
        "export APPTAINERENV_FI_CXI_DISABLE_HOST_REGISTER=1", "export APPTAINERENV_FI_CXI_RX_MATCH_MODE=software",
        "export APPTAINERENV_FI_MR_CACHE_MONITOR=userfaultfd", "export APPTAINERENV_NCCL_CROSS_NIC=0",
        "export APPTAINERENV_FI_CXI_RDZV_EAGER_SIZE=0", "export APPTAINERENV_FI_CXI_RDZV_GET_MIN=0",
        "export APPTAINERENV_FI_CXI_RDZV_THRESHOLD=0", "export APPTAINERENV_NCCL_NCHANNELS_PER_NET_PEER=4",
        "export APPTAINERENV_MPICH_GPU_SUPPORT_ENABLED=0", "export APPTAINERENV_TORCH_NCCL_ASYNC_ERROR_HANDLING=1",
        "export APPTAINERENV_CUDA_CACHE_DISABLE=1", "fabrikit_bind /capstor /capstor rw optional",
        "fabrikit_bind /usr/lib64/libcxi.so.1 /opt/fabrikit/hostlib/libcxi.so.1 ro required",
    ])
    assert "NCCL_NET_PLUGIN" not in script  # never together with NCCL_NET (fabric-facts.md failure 3)
    _no_env_flag_no_whole_lib64(script)


def test_leonardo_is_an_infiniband_site() -> None:
    script = dry_run("--site", "leonardo", "--nodes", "2")
    _assert_has(script, ["#SBATCH --partition=boost_usr_prod", "#SBATCH --gpus-per-node=4", "#SBATCH --cpus-per-task=32",
                         "export SINGULARITYENV_NCCL_IB_HCA=mlx5", "export SINGULARITYENV_NCCL_SOCKET_IFNAME=ib0",
                         "singularity exec --no-eval --nv", "--fabric infiniband"])


def test_single_node_slingshot_drops_nccl_net() -> None:
    assert "APPTAINERENV_NCCL_NET=" in dry_run("--site", "olivia", "--nodes", "2")
    assert "APPTAINERENV_NCCL_NET=" not in dry_run("--site", "olivia", "--nodes", "1")


def test_the_job_step_asks_for_the_jobs_cpus() -> None:
    """Slurm >= 22.05: srun does not inherit sbatch's --cpus-per-task, so the launch step asks
    again, or torchrun and its workers share one CPU. No cpus_per_task: srun's default."""
    step = next(line for line in dry_run("--site", "olivia", "--nodes", "2").splitlines()
                if line.startswith('srun --nodes="$SLURM_JOB_NUM_NODES"'))
    assert "--ntasks-per-node=1 --cpus-per-task=72 " in step
    raven = dry_run("--site", "raven", "--nodes", "2")
    assert "--cpus-per-task" not in raven.replace("#SBATCH --cpus-per-task", "")


def test_flags_override_profile() -> None:
    script = dry_run("--site", "olivia", "--nodes", "8", "--partition", "accel-long", "--account", "nn1234k",
                     "--time", "2-00:00:00", "--job-name", "resnet.run-1", "--gpus-per-node", "2")
    for needle in ["#SBATCH --nodes=8", "#SBATCH --partition=accel-long", "#SBATCH --account=nn1234k",
                   "#SBATCH --time=2-00:00:00", "#SBATCH --job-name=resnet.run-1", "#SBATCH --gpus-per-node=2",
                   "nproc=${SLURM_GPUS_ON_NODE:-2}"]:
        assert needle in script, needle


def test_job_after_double_dash_is_quoted(tmp_path: Path) -> None:
    job = tmp_path / "my train.py"
    job.write_text("print('hi')\n")
    script = dry_run("--site", "ethernet", "--nodes", "2", "--", str(job), "--msg", "a b;$(rm -rf /)", "{run_dir}/out")
    assert f"'{job}' --msg 'a b;$(rm -rf /)' \"$run_dir\"/out" in script
    bundled = dry_run("--site", "ethernet", "--nodes", "2", "--", "allreduce_bench.py", "--iters", "5")
    assert '"$run_dir"/jobs/allreduce_bench.py --iters 5' in bundled


def test_dry_run_is_deterministic() -> None:
    first = cli("--site", "olivia", "--nodes", "2", "--dry-run")
    second = cli("--site", "olivia", "--nodes", "2", "--dry-run")
    assert first.stdout == second.stdout and first.stdout


def test_dry_run_never_imports_torch() -> None:
    code = (
        "import sys; from runner.cli import run_multinode_main; "
        "sys.argv = ['run-multinode', '--site', 'olivia', '--nodes', '2', '--dry-run']\n"
        "try:\n    run_multinode_main()\nexcept SystemExit as e:\n    assert e.code == 0, e.code\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\nprint('no torch', file=sys.stderr)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0 and "no torch" in result.stderr, result.stderr


BAD_FLAGS = {
    "nodes zero": (["--site", "olivia", "--nodes", "0"], "--nodes"),
    "nodes negative": (["--site", "olivia", "--nodes", "-3"], "--nodes"),
    "nodes not a number": (["--site", "olivia", "--nodes", "two"], "'two' is not a valid integer"),
    "nodes missing": (["--site", "olivia"], "--nodes"),
    "gpus negative": (["--site", "olivia", "--nodes", "2", "--gpus-per-node", "-1"], "--gpus-per-node"),
    "bad time": (["--site", "olivia", "--nodes", "2", "--time", "90m"], "--time"),
    "bad job name": (["--site", "olivia", "--nodes", "2", "--job-name", "my job"], "--job-name"),
    "bad partition": (["--site", "olivia", "--nodes", "2", "--partition", "a;b"], "partition"),
    "site and profile": (["--site", "olivia", "--profile", "x.yaml", "--nodes", "2"], "exactly one"),
    "neither site nor profile": (["--nodes", "2"], "exactly one"),
    "unknown option": (["--site", "olivia", "--nodes", "2", "--nodez", "3"], "--nodez"),
    "missing job script": (["--site", "olivia", "--nodes", "2", "--", "nosuch.py"], "nosuch.py"),
    "missing profile file": (["--profile", "/nonexistent/p.yaml", "--nodes", "2"], "/nonexistent/p.yaml"),
    "more ranks than cpu masks": (["--site", "lumi", "--nodes", "2", "--nproc-per-node", "16"],
                                  "launcher.cpu_bind_masks has 8 mask(s) but 16 processes per node"),
}


@pytest.mark.parametrize("case", sorted(BAD_FLAGS))
def test_bad_flags_are_one_line_errors(case: str) -> None:
    args, fragment = BAD_FLAGS[case]
    message = one_line_error(cli("--dry-run", *args))
    assert message.startswith("run-multinode: error:") and fragment in message, message


def test_without_sbatch_nothing_is_written(tmp_path: Path) -> None:
    """A machine without Slurm: one line, exit 2, and no run directory (not even runs/),
    with the default run directory and with --run-dir alike."""
    no_slurm = tmp_path / "bin"
    no_slurm.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    result = cli("--site", "olivia", "--nodes", "2", env={"PATH": str(no_slurm)}, cwd=work)
    assert "sbatch not found" in one_line_error(result)
    named = cli("--site", "olivia", "--nodes", "2", "--run-dir", str(work / "deep" / "run"),
                env={"PATH": str(no_slurm)}, cwd=work)
    assert "sbatch not found" in one_line_error(named)
    assert list(work.iterdir()) == []


def test_a_run_directory_is_not_reused_without_resume(tmp_path: Path) -> None:
    """The run directory's preflight: a directory that holds a run is refused before anything
    is written (sbatch is a double here: it must not even be called)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    double = bin_dir / "sbatch"
    double.write_text("#!/bin/sh\necho called >> \"$0.calls\"\necho 1\n")
    double.chmod(0o755)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "launch.json").write_text('{"site": "olivia", "nodes": 2}')
    before = sorted(p.name for p in run_dir.iterdir())
    result = cli("--site", "olivia", "--nodes", "2", "--run-dir", str(run_dir), env={"PATH": str(bin_dir)})
    assert "already holds a run" in one_line_error(result)
    assert sorted(p.name for p in run_dir.iterdir()) == before and not (bin_dir / "sbatch.calls").exists()


def test_local_dry_run_prints_agent_commands() -> None:
    out = dry_run("--site", "local", "--nodes", "3")
    assert out.count("torch.distributed.run") == 3
    assert "--rdzv_endpoint=127.0.0.1:" in out and "is_host=1" in out and out.count("is_host=0") == 2


def test_resume_uses_the_profile_saved_in_the_run_directory(tmp_path: Path) -> None:
    """A resubmitted run keeps its settings even if the site file changed since."""
    import json

    shown = cli("sites", "show", "olivia", prog="fabrikit")
    assert shown.returncode == 0
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "profile.yaml").write_text(shown.stdout.replace("partition: accel", "partition: accel-saved"))
    (run_dir / "launch.json").write_text(json.dumps({"site": "olivia", "profile_file": None, "nodes": 2, "job": []}))
    script = cli("--resume", str(run_dir), "--dry-run")
    assert script.returncode == 0, script.stderr
    assert "#SBATCH --partition=accel-saved" in script.stdout
    assert "#SBATCH --job-name=fabrikit-olivia" in script.stdout


def test_rocm_gpu_monitor_writes_what_report_reads(tmp_path: Path) -> None:
    """The LUMI script's sampler program, run for real in bash with a `rocm-smi` test double
    (no AMD GPU here) on PATH; `fabrikit report`'s parser reads the CSV it writes."""
    import os
    import shlex
    import sys
    import time

    from runner.run_report import parse_gpu_csv

    script = dry_run("--site", "lumi", "--nodes", "2")
    line = next(ln for ln in script.splitlines() if ln.startswith("srun --overlap"))
    words = shlex.split(line.rstrip(" &"))
    program = words[words.index("-c") + 1]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    double = bin_dir / "rocm-smi"
    double.write_text(f"#!{sys.executable}\nimport sys\nassert sys.argv[1:] == ['--showuse', '--csv'], sys.argv\n"
                      "print('device,GPU use (%)')\nfor i in range(8): print(f'card{i},{10 * i}')\n")
    double.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    proc = subprocess.Popen(["bash", "-c", program, str(tmp_path)], env=env, start_new_session=True)
    try:
        csv = tmp_path / f"gpu-{os.uname().nodename}.csv"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not csv.exists() or csv.read_text().count("\n") < 9):
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, 9)  # the loop and its `sleep`
        proc.wait()
    series = parse_gpu_csv(csv.read_text().splitlines(), "node1")
    assert [s.index for s in series] == list(range(8))
    assert [s.util[0] for s in series] == [10.0 * i for i in range(8)]
