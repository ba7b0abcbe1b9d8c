"""`fabrikit sites import`: site-guide-style job scripts (tests/data/jobscripts/, written for
these tests in the style of the Olivia, LUMI, MPCDF/Purdue, older singularity and pyxis
guides; none is a copy) -> a profile that loads, renders a batch script that
`run-multinode --dry-run` accepts and shellcheck passes, carries the script's settings, and a
hazard report naming what each script gets wrong. Everything runs the real console scripts.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from runner.profile_loader import load_profile
from tests.helpers import cli, one_line_error

SCRIPTS = Path(__file__).resolve().parent / "data" / "jobscripts"
ENV = {"HOME": "/home/someone", "USER": "someone"}

# script -> (preset, hazard codes that must be reported, facts the profile must carry)
CASES = {
    "olivia_like": ("slingshot", {"placeholder", "whole-dir-bind", "env-comma", "fixed-port", "no-nccl-debug",
                                  "no-nccl-net", "gh200-ll128", "hybrid-rdzv-get"}),
    "lumi_like": ("slingshot", {"modules", "runtime-expansion", "nccl-debug-quiet", "cpu-bind-mask",
                                "no-nccl-net"}),
    "infiniband_like": ("infiniband", {"cleanenv", "nccl-debug-quiet", "fixed-port", "nproc-gpus-per-node",
                                       "no-nccl-net"}),
    "singularity_like": ("slingshot", {"sbatch-after-command", "mem-all", "tasks-per-node", "whole-dir-bind",
                                       "mr-cache-memhooks", "fixed-port", "no-torchrun", "no-nccl-debug"}),
    "pyxis_like": ("slingshot", {"foreign-runtime", "fixed-port", "gh200-ll128"}),
}


def do_import(tmp_path: Path, script: str, *extra: str) -> tuple[Path, dict]:
    out = tmp_path / f"{script}.yaml"
    result = cli("sites", "import", str(SCRIPTS / f"{script}.sh"), "-o", str(out), "--json", *extra,
                 prog="fabrikit", env=ENV, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return out, json.loads(result.stdout)


def dry_run(profile: Path, tmp_path: Path, nodes: str = "2") -> str:
    result = cli("--profile", str(profile), "--nodes", nodes, "--dry-run", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("script", sorted(CASES))
def test_import_loads_renders_and_passes_shellcheck(script: str, tmp_path: Path) -> None:
    profile, report = do_import(tmp_path, script)
    preset, hazards = CASES[script]
    loaded = load_profile(str(profile), is_path=True)
    assert loaded.chain[0].name == f"{preset}.yaml", loaded.chain
    assert report["preset"] == preset
    found = {h["code"] for h in report["hazards"]}
    assert hazards <= found, f"missing hazards {hazards - found}; got {found}"
    text = profile.read_text()
    assert "TODO" not in text or "# TODO" in text  # TODOs are comments, never values
    batch = dry_run(profile, tmp_path)
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck not installed (apt-get install shellcheck)")
    path = tmp_path / "job.sbatch"
    path.write_text(batch)
    check = subprocess.run(["shellcheck", "-s", "bash", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout


def test_olivia_like_carries_binds_env_and_slurm_settings(tmp_path: Path) -> None:
    profile, report = do_import(tmp_path, "olivia_like")
    p = load_profile(str(profile), is_path=True).profile
    assert (p.scheduler.partition, p.scheduler.gpus_per_node, p.scheduler.cpus_per_task, p.scheduler.mem,
            p.scheduler.time) == ("accel", 4, 72, "440G", "02:00:00")
    assert p.scheduler.account is None  # '<project_number>' is a placeholder: a TODO, not a value
    binds = {b.source: b.target for b in p.binds}
    assert binds["/opt/cray/libfabric/1.22.0/lib64"] == "/opt/libfabric/lib"  # ${LIBFABRIC} expanded
    assert binds["/cluster/work/support/nccl"] == "/opt/nccl"
    assert binds["/cluster/work/projects/nn9999k/ddp"] == "/workspace"
    assert "/usr/lib64" not in binds, "the whole /usr/lib64 is never bound"
    assert p.host_libraries.names == ["libcxi.so.1"] and p.host_libraries.search_path == ["/usr/lib64"]
    assert p.env["NCCL_SOCKET_IFNAME"] == "hsn0,hsn1,hsn2,hsn3" and p.env["FI_PROVIDER"] == "cxi"
    assert p.env["NCCL_PROTO"] == "^LL128" and p.env["NCCL_NET"] == "AWS Libfabric"
    assert p.library_path[:2] == ["/opt/libfabric/lib", "/opt/nccl/lib"]  # from --env LD_LIBRARY_PATH
    assert p.container.image == "/cluster/work/support/container/pytorch_nvidia_25.06_arm64.sif"
    assert (p.container.gpu_flag, p.container.arch) == ("--nv", "aarch64")
    assert "--network=disable_rdzv_get" in p.scheduler.srun_extra
    assert report["nodes"] == 2
    batch = dry_run(profile, tmp_path)
    for needle in ["#SBATCH --partition=accel", "#SBATCH --gpus-per-node=4", "#SBATCH --mem=440G",
                   "fabrikit_bind /cluster/work/support/nccl /opt/nccl rw required",
                   "fabrikit_bind /usr/lib64/libcxi.so.1 /opt/fabrikit/hostlib/libcxi.so.1 ro required",
                   "export APPTAINERENV_NCCL_SOCKET_IFNAME=hsn0,hsn1,hsn2,hsn3",
                   "export APPTAINERENV_NCCL_PROTO='^LL128'", "--network=disable_rdzv_get"]:
        assert needle in batch, needle
    code = [line for line in batch.splitlines() if not line.lstrip().startswith("#")]
    assert not [line for line in code if ":29500" in line or " --env " in line]


def test_lumi_like_reads_exports_and_bash_c(tmp_path: Path) -> None:
    profile, report = do_import(tmp_path, "lumi_like")
    p = load_profile(str(profile), is_path=True).profile
    assert p.container.runtime == "singularity" and p.container.gpu_flag == "none"
    assert {b.source for b in p.binds} >= {"/pfs", "/scratch", "/run/cxi", "/var/spool/slurmd"}
    assert p.library_path == ["/lib64", "/opt/cray/libfabric/1.15.2.0/lib64", "/opt/rocm/lib"]
    assert p.env["OMP_NUM_THREADS"] == "56"  # $SLURM_CPUS_PER_TASK written as the number it is
    assert "MIOPEN_USER_DB_PATH" not in p.env  # $(whoami) and $SLURM_NODEID: a TODO, not a literal
    assert "MIOPEN_USER_DB_PATH" in profile.read_text()
    assert "MASTER_PORT" not in p.env and "MASTER_ADDR" not in p.env
    assert "NCCL_DEBUG" not in p.env  # WARN would hide the transport lines
    assert p.launcher.torchrun == ["python", "-m", "torch.distributed.run"]
    assert "--exclusive" in p.scheduler.sbatch_extra
    assert not any(h["code"] == "fixed-port" for h in report["hazards"])  # port derived from the job id
    todo = [h for h in report["hazards"] if h["code"] == "runtime-expansion" and h["status"] == "todo"]
    assert todo and "MIOPEN_USER_DB_PATH" in todo[0]["message"]
    batch = dry_run(profile, tmp_path, "4")
    assert "export SINGULARITYENV_NCCL_SOCKET_IFNAME=hsn0,hsn1,hsn2,hsn3" in batch
    assert "singularity exec" in batch and "mask_cpu" not in batch


def test_infiniband_like_reads_heredoc_wrapper_and_cleanenv(tmp_path: Path) -> None:
    profile, report = do_import(tmp_path, "infiniband_like")
    p = load_profile(str(profile), is_path=True).profile
    assert p.scheduler.gpus_per_node == 4 and p.scheduler.constraint == "gpu"  # --gres=gpu:a100:4
    assert p.env["NCCL_IB_HCA"] == "mlx5" and p.env["NCCL_NET_GDR_LEVEL"] == "5"  # from the heredoc script
    assert p.env["OMP_NUM_THREADS"] == "18"
    assert p.launcher.max_restarts == 1
    binds = {b.source: (b.target, b.readonly) for b in p.binds}
    assert binds["/ptmp/proj/data"] == ("/data", True)  # APPTAINER_BIND ...:ro
    assert "--cpu-bind=none" in p.scheduler.srun_extra
    port = next(h for h in report["hazards"] if h["code"] == "fixed-port")
    assert "29400" in port["message"] and port["line"] == 31


def test_singularity_like_one_task_per_gpu(tmp_path: Path) -> None:
    profile, report = do_import(tmp_path, "singularity_like")
    p = load_profile(str(profile), is_path=True).profile
    assert p.container.runtime == "singularity"
    assert p.container.image == "/home/someone/images/torch.sif"  # $HOME of the importing shell
    assert p.scheduler.gpus_per_node == 4  # --gpus-per-task=1 x --ntasks-per-node=4
    assert p.scheduler.cpus_per_task == 64  # 16 per task x 4 tasks, one torchrun per node
    assert p.scheduler.time == "01:00:00"  # the #SBATCH --time after `set -e` is ignored by sbatch
    assert p.env["FI_MR_CACHE_MONITOR"] == "userfaultfd" and p.env["NCCL_NET_GDR_LEVEL"] == "PHB"
    assert {b.source: b.target for b in p.binds}["/opt/cray/libfabric/1.20.1/lib64"] == "/opt/libfabric"
    assert p.scheduler.sbatch_extra == ["--qos=normal"]
    assert "libcxi.so.1" in p.host_libraries.names


def test_owned_options_never_reach_sbatch_extra(tmp_path: Path) -> None:
    owned = ("--nodes", "--output", "--ntasks-per-node", "--job-name", "--error", "--time", "--partition")
    for script in CASES:
        profile, _ = do_import(tmp_path, script, "--force")
        extra = load_profile(str(profile), is_path=True).profile.scheduler.sbatch_extra
        assert not [e for e in extra if e.startswith(owned)], (script, extra)


def test_existing_file_is_kept_without_force(tmp_path: Path) -> None:
    out = tmp_path / "site.yaml"
    out.write_text("keep me\n")
    result = cli("sites", "import", str(SCRIPTS / "olivia_like.sh"), "-o", str(out), prog="fabrikit", env=ENV)
    assert "file exists" in one_line_error(result) and "--force" in result.stderr
    assert out.read_text() == "keep me\n"
    result = cli("sites", "import", str(SCRIPTS / "olivia_like.sh"), "-o", str(out), "--force", prog="fabrikit",
                 env=ENV)
    assert result.returncode == 0, result.stderr
    assert load_profile(str(out), is_path=True).profile.scheduler.partition == "accel"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "no temporary file left behind"


@pytest.mark.parametrize("args, message", [
    (["/nonexistent/job.sh"], "no such file"),
    ([str(SCRIPTS / "olivia_like.sh"), "--name", "Bad Name"], "not a valid site name"),
    ([str(SCRIPTS / "olivia_like.sh"), "-o", "/nonexistent/dir/x.yaml"], "does not exist"),
])
def test_bad_input_is_one_line_exit_2(args: list[str], message: str, tmp_path: Path) -> None:
    result = cli("sites", "import", *args, prog="fabrikit", env=ENV, cwd=tmp_path)
    assert message in one_line_error(result)
    assert not list(tmp_path.iterdir())


def test_stdout_output_and_default_name(tmp_path: Path) -> None:
    result = cli("sites", "import", str(SCRIPTS / "lumi_like.sh"), "-o", "-", prog="fabrikit", env=ENV, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("# Site 'lumi_like'") and "hazards:" in result.stderr
    assert not list(tmp_path.iterdir())
    result = cli("sites", "import", str(SCRIPTS / "lumi_like.sh"), prog="fabrikit", env=ENV, cwd=tmp_path)
    assert result.returncode == 0 and (tmp_path / "lumi_like.yaml").is_file()
    assert "fabrikit doctor --profile lumi_like.yaml" in result.stdout


def test_doctor_reads_the_imported_profile(tmp_path: Path) -> None:
    profile, _ = do_import(tmp_path, "olivia_like")
    result = cli("doctor", "--profile", str(profile), "--json", prog="fabrikit")
    assert result.returncode == 1, result.stderr  # this machine has no Olivia paths: doctor says which
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert checks["bind /cluster/work/support/nccl"]["status"] == "FAIL"
    assert checks["image"]["status"] == "FAIL"


def test_import_stays_out_of_the_dry_run_path() -> None:
    code = ("import atexit, sys\n"
            "atexit.register(lambda: print(' '.join(sorted(m for m in sys.modules if m.startswith('runner.')))))\n"
            "sys.argv = ['run-multinode', '--site', 'olivia', '--nodes', '2', '--dry-run']\n"
            "from runner.entry import run_multinode_main\nrun_multinode_main()\n")
    result = subprocess.run([shutil.which("python3") or "python3", "-c", code], capture_output=True, text=True)
    loaded = result.stdout.split()[-1:] and result.stdout.strip().splitlines()[-1].split()
    assert "runner.run_cmd" in loaded
    assert not {"runner.site_import", "runner.job_script", "runner.shell_script", "runner.site_probe",
                "runner.profile_writer", "runner.sites_cmd"} & set(loaded), loaded


def test_untyped_gres_env_file_and_apptainer_run(tmp_path: Path) -> None:
    (tmp_path / "env.txt").write_text("A=1\nB='x y'\n")
    script = tmp_path / "small.sh"
    script.write_text("#!/bin/bash\n#SBATCH --gres=gpu:4\n#SBATCH -N 3\n#SBATCH --mem 12GB\n#SBATCH -t 30\n"
                      "srun -N 3 --mpi=pmix apptainer run --nv --env-file env.txt /x/y.sif\n")
    out = tmp_path / "small.yaml"
    result = cli("sites", "import", str(script), "-o", str(out), "--json", prog="fabrikit", env=ENV, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    p = load_profile(str(out), is_path=True).profile
    assert (p.scheduler.gpus_per_node, p.scheduler.mem, p.scheduler.time) == (4, "12G", "30")
    assert "type" not in out.read_text().split("gpus_per_node", 1)[1].splitlines()[0]  # gpu:4 has no type
    assert p.env["A"] == "1" and p.env["B"] == "x y" and p.scheduler.srun_extra == ["--mpi=pmix"]
    assert json.loads(result.stdout)["nodes"] == 3
    dry_run(out, tmp_path)


def test_per_gpu_cpu_masks_become_launcher_cpu_bind_masks(tmp_path: Path) -> None:
    """LUMI-G guide style: one task per GPU, `srun --cpu-bind=mask_cpu:` with one mask per GPU.
    fabrikit runs one torchrun per node, so the masks go to launcher.cpu_bind_masks (each worker
    applies its own); a list that is not one mask per GPU stays a hazard (lumi_like above)."""
    masks = ["fe000000000000", "0xfe00000000000000", "fe0000", "fe000000"]
    script = tmp_path / "masks.sh"
    script.write_text("#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --gpus-per-node=4\n#SBATCH --ntasks-per-node=4\n"
                      f"CPU_BIND=\"verbose,mask_cpu:{','.join(masks)}\"\n"
                      "srun --cpu-bind=${CPU_BIND} singularity exec --rocm /x/rocm.sif python train.py\n")
    out = tmp_path / "masks.yaml"
    result = cli("sites", "import", str(script), "-o", str(out), "--json", prog="fabrikit", env=ENV, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    p = load_profile(str(out), is_path=True).profile
    assert p.launcher.cpu_bind_masks == ["0xfe000000000000", "0xfe00000000000000", "0xfe0000", "0xfe000000"]
    assert not [e for e in p.scheduler.srun_extra if "cpu-bind" in e]
    hazard = next(h for h in json.loads(result.stdout)["hazards"] if h["code"] == "cpu-bind-mask")
    assert hazard["status"] == "fixed" and hazard["line"] == 6 and "launcher.cpu_bind_masks" in hazard["message"]
    batch = dry_run(out, tmp_path)
    assert "export SINGULARITYENV_FABRIKIT_CPU_BIND_MASKS=0xfe000000000000,0xfe00000000000000,0xfe0000," \
           "0xfe000000" in batch
    assert "mask_cpu" not in batch

    # three masks for four GPUs: not one per local rank, so nothing is carried
    script.write_text(script.read_text().replace(",fe000000\"", "\""))
    result = cli("sites", "import", str(script), "-o", str(out), "--force", "--json", prog="fabrikit", env=ENV,
                 cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert load_profile(str(out), is_path=True).profile.launcher.cpu_bind_masks == []
    hazard = next(h for h in json.loads(result.stdout)["hazards"] if h["code"] == "cpu-bind-mask")
    assert "not carried (3 masks for 4 GPUs per node)" in hazard["message"]


def test_short_option_with_attached_value_keeps_where_it_came_from() -> None:
    # `-B$LIBS` and `--bind=$LIBS` are the same bind: both keep what the script could not
    # resolve and which names came from the importing shell's environment
    from runner.command_options import parse_container_options
    from runner.shell_expand import Value

    word = Value("${LIBS}", ("LIBS",), ("LIBS",))
    for fields in ([(word._replace(text="-B" + word.text), 3), (Value("img.sif"), 3)],
                   [(word._replace(text="--bind=" + word.text), 3), (Value("img.sif"), 3)]):
        options, image_at = parse_container_options(fields, 0)
        assert image_at == 1 and [o.name for o in options] == ["bind"]
        assert options[0].value == word
