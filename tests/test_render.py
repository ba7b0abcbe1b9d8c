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
SLURM_SITES = ["olivia", "raven", "gilbreth", "ethernet"]


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
    for nodes in ("1", "4"):
        path = tmp_path / f"{site}-{nodes}.sbatch"
        path.write_text(dry_run("--site", site, "--nodes", nodes))
        result = subprocess.run([shellcheck, "-s", "bash", str(path)], capture_output=True, text=True)
        assert result.returncode == 0, result.stdout


def test_olivia_carries_every_element_of_the_seed_job() -> None:
    script = dry_run("--site", "olivia", "--nodes", "2")
    for needle in [
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
        'nproc=${SLURM_GPUS_ON_NODE:-4}', "apptainer exec --nv",
        "export APPTAINERENV_NCCL_PROTO='^LL128'", "export APPTAINERENV_FI_CXI_RDZV_PROTO=alt_read",
        "export APPTAINERENV_NCCL_SOCKET_IFNAME=hsn0,hsn1,hsn2,hsn3",
    ]:
        assert needle in script, needle
    assert "--bind /usr/lib64:" not in script and "/usr/lib64 /usr/lib64" not in script
    code = [line for line in script.splitlines() if not line.lstrip().startswith("#")]
    assert not any("--env " in line or "--cleanenv" in line for line in code)


def test_site_facts_reach_their_scripts() -> None:
    gilbreth = dry_run("--site", "gilbreth", "--nodes", "2")
    assert "#SBATCH --partition=a100-80gb" in gilbreth
    assert "APPTAINERENV_NCCL_IB_HCA=mlx5_0" in gilbreth and "APPTAINERENV_NCCL_SOCKET_IFNAME=ib0" in gilbreth
    raven = dry_run("--site", "raven", "--nodes", "2")
    assert "#SBATCH --gpus-per-node=4" in raven and "#SBATCH --constraint=gpu-bw" in raven
    ethernet = dry_run("--site", "ethernet", "--nodes", "2")
    assert "APPTAINERENV_NCCL_SOCKET_IFNAME=eth0" in ethernet


def test_single_node_slingshot_drops_nccl_net() -> None:
    assert "APPTAINERENV_NCCL_NET=" in dry_run("--site", "olivia", "--nodes", "2")
    assert "APPTAINERENV_NCCL_NET=" not in dry_run("--site", "olivia", "--nodes", "1")


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
}


@pytest.mark.parametrize("case", sorted(BAD_FLAGS))
def test_bad_flags_are_one_line_errors(case: str) -> None:
    args, fragment = BAD_FLAGS[case]
    message = one_line_error(cli("--dry-run", *args))
    assert message.startswith("run-multinode: error:") and fragment in message, message


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
