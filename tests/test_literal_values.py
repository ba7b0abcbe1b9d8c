"""Values reach the job exactly as written: the hostile-value battery (tests/hostile_values.py)
through the real programs — `apptainer exec` of the test image, torchrun, the real Slurm test
cluster, `apptainer build` for labels — and what the job received compared byte for byte.

Each test prints `N cases: E executed, A altered`; both must be 0.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests import hostile_values as hv
from tests.cluster_jobs import TEST_PROFILE, finish
from tests.helpers import ROOT, cli

# `{job_id}`/`{run_dir}` amid hostile text: only the placeholders may change.
EXPAND = {"LIT_EXPAND_1": f"$(touch {hv.MARK}/expand)-{{job_id}}-'{{run_dir}}'",
          "LIT_EXPAND_2": "{run_dir}/nccl-{job_id}.%h.log"}


def _expected_expand(marker: Path, run_dir: Path, job_id: str) -> dict[str, str]:
    return {key: value.replace(hv.MARK, str(marker)).replace("{job_id}", job_id).replace("{run_dir}", str(run_dir))
            for key, value in EXPAND.items()}


def _records(run_dir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((run_dir / "literal").glob("rank-*.json"))]


def _env_of(record: dict) -> dict[str, str]:
    return {bytes.fromhex(k).decode(): bytes.fromhex(v).decode("utf-8", "surrogateescape")
            for k, v in record["env"].items()}


def _verdict(battery: hv.Battery, records: list[dict], *, binds: bool, expand: dict[str, str]) -> str:
    """Fail with every case that executed or arrived altered; else the one-line summary."""
    assert records, "the probe wrote no record"
    bad: list[tuple[str, str]] = []
    for record in records:
        bad += battery.check(record, binds=binds)
        env = _env_of(record)
        bad += [(f"env_expand:{k}", repr(env.get(k))) for k, v in expand.items() if env.get(k) != v]
    executed = battery.executed()
    total = len(battery.env_cases) + len(battery.typed) + len(battery.arg_cases) + len(battery.lib_cases) \
        + (len(battery.bind_cases) if binds else 0) + len(expand)
    summary = f"{total} cases x {len(records)} rank(s): {len(executed)} executed, {len(set(bad))} altered"
    print(f"\n[literal] {summary}")
    assert not executed, f"values were EXECUTED: {executed}"
    assert not bad, "values arrived altered:\n" + "\n".join(f"  {case}: got {got}" for case, got in sorted(set(bad)))
    return summary


def _write_profile(path: Path, battery: hv.Battery, base: dict, *, binds: bool) -> Path:
    base = {**base, "env_expand": EXPAND_MARKED(battery)}
    path.write_text(battery.profile_text(base, binds=binds))
    return path


def EXPAND_MARKED(battery: hv.Battery) -> dict[str, str]:  # noqa: N802 - reads like the constant it marks
    return {k: v.replace(hv.MARK, str(battery.marker)) for k, v in EXPAND.items()}


# ---- local backend: real apptainer exec of the test image, and no container -----------------
@pytest.mark.apptainer
@pytest.mark.slow
@pytest.mark.parametrize("runtime", ["apptainer", "singularity"])
def test_hostile_values_reach_the_job_inside_the_image(test_image: Path, tmp_path: Path, runtime: str) -> None:
    """`singularity` is Apptainer's compatibility name here (SINGULARITYENV_* variables);
    SingularityCE itself is not installed on these machines."""
    if shutil.which(runtime) is None:
        pytest.skip(f"{runtime} not on PATH")
    battery = hv.Battery(tmp_path / "battery")
    profile = _write_profile(tmp_path / "hostile.yaml", battery, hv.local_base(str(test_image), runtime), binds=True)
    run_dir = tmp_path / "run"
    result = cli("--profile", str(profile), "--nodes", "1", "--run-dir", str(run_dir), timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    records = _records(run_dir)
    _verdict(battery, records, binds=True, expand=_expected_expand(battery.marker, run_dir, run_dir.name))
    # the library-path prepend still works: the profile's entries first, the image's after them
    ld = _env_of(records[0])["LD_LIBRARY_PATH"]
    assert ld.startswith(":".join(battery.library_path()) + ":"), ld


@pytest.mark.slow
def test_hostile_values_reach_the_job_without_container(tmp_path: Path) -> None:
    """runtime none: the values go straight into the agents' environment and argv; the job
    arguments come from the command line this time (after `--`)."""
    battery = hv.Battery(tmp_path / "battery", bind_cases=[])
    profile = _write_profile(tmp_path / "hostile.yaml", battery, hv.local_base(None), binds=False)
    run_dir = tmp_path / "run"
    result = cli("--profile", str(profile), "--nodes", "1", "--run-dir", str(run_dir), "--", "literal_probe.py",
                 *battery.probe_args(), timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    _verdict(battery, _records(run_dir), binds=False,
             expand=_expected_expand(battery.marker, run_dir, run_dir.name))


# ---- Slurm: the batch script, sbatch, srun, apptainer exec on two nodes -----------------------
@pytest.fixture(scope="module")
def cluster(slurm_cluster, test_image):
    return slurm_cluster


def _cluster_base(runtime: str) -> dict:
    """The test cluster's profile, in the documented schema, one rank per node."""
    base = yaml.safe_load(TEST_PROFILE.read_text())
    base["launcher"] = {**base.get("launcher", {}), "nproc_per_node": 1}
    if runtime == "none":
        base["container"] = {"runtime": "none"}
        base["launcher"]["torchrun"] = [sys.executable, "-m", "torch.distributed.run"]
        base.pop("host_libraries", None)
    return base


@pytest.mark.cluster
@pytest.mark.apptainer
@pytest.mark.slow
@pytest.mark.parametrize("runtime", ["apptainer", "none"])
def test_hostile_profile_through_the_slurm_cluster(cluster, tmp_path: Path, runtime: str) -> None:
    """The acceptance shape: a hostile profile written in the documented schema, submitted with
    run-multinode to a real Slurm cluster; every value verbatim on every node, nothing run."""
    in_image = runtime != "none"
    battery = hv.Battery(tmp_path / "battery", **({} if in_image else {"bind_cases": []}))
    # the file sits beside the presets it extends (bundled lookup) under its own site name
    profile = _write_profile(tmp_path / "hostile-site.yaml", battery, _cluster_base(runtime), binds=in_image)
    run_dir = tmp_path / "run"
    result = cli("--profile", str(profile), "--nodes", "2", "--run-dir", str(run_dir), env=cluster.env)
    assert result.returncode == 0, result.stderr[-3000:]
    job_id = result.stdout.split("submitted job ")[1].split()[0]
    state = cluster.wait(job_id, timeout=300)
    out = (run_dir / f"slurm-{job_id}.out").read_text(errors="replace")
    assert state == "COMPLETED", out[-4000:]
    records = _records(run_dir)
    assert len(records) == 2, f"one record per node expected: {out[-2000:]}"
    _verdict(battery, records, binds=in_image, expand=_expected_expand(battery.marker, run_dir, job_id))


# ---- labels: build-image -> apptainer build -> apptainer inspect ------------------------------
LABEL_ARGS = {  # build argument -> how it is written in the profile (None: quoted by yaml)
    "CMDSUB": (f"$(touch {hv.MARK}/label-arg)", None),
    "QUOTES": ("it's \"quoted\" `id`", None),
    "BACKSLASH": ("back\\slash \\n", None),
    "CSV": ("a,b,\"c\"", None),
    "UNICODE": ("é😀", None),
    "OCTAL": ("010", "010"),
    "FLOAT": ("1.20", "1.20"),
    "LEAD": ("  lead", None),
}


@pytest.mark.apptainer
@pytest.mark.slow
def test_labels_and_build_args_reach_the_image_verbatim(apptainer_bin: str, tiny_sif: Path, tmp_path: Path) -> None:
    marker = tmp_path / "markers"
    marker.mkdir()
    template_dir = tmp_path / f"tpl $(touch {marker}/label-dir) 'q' \"d\" back\\slash `id` $HOME"
    template_dir.mkdir(parents=True)
    template = template_dir / "labels.def"
    uses = " ".join(f"{{{{ {name} }}}}" for name in LABEL_ARGS)
    template.write_text(f"Bootstrap: localimage\nFrom: {tiny_sif}\n\n%labels\n    @LABELS@\n\n%help\n    {uses}\n")
    image = tmp_path / "out" / "labels.sif"
    args = {name: value.replace(hv.MARK, str(marker)) for name, (value, _raw) in LABEL_ARGS.items()}
    data = {"description": "labels", "fabric": {"kind": "ethernet"},
            "container": {"runtime": "apptainer", "image": str(image),
                          "build": {"template": str(template), "flavour": "test", "min_free_gb": 0,
                                    "args": {k: v for k, v in args.items() if LABEL_ARGS[k][1] is None}}}}
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1 << 20)
    typed = "".join(f"      {name}: {raw}\n" for name, (_v, raw) in LABEL_ARGS.items() if raw is not None)
    text = text.replace("    args:\n", "    args:\n" + typed)
    profile = tmp_path / "labels.yaml"
    profile.write_text(text)
    result = cli("--profile", str(profile), prog="build-image", timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    inspect = subprocess.run([apptainer_bin, "inspect", "--json", "--labels", str(image)], capture_output=True,
                             text=True, check=True)
    labels = json.loads(inspect.stdout)["data"]["attributes"]["labels"]
    bad = []
    if labels.get("org.fabrikit.template") != str(template):
        bad.append(("template", labels.get("org.fabrikit.template")))
    got_args = json.loads(labels.get("org.fabrikit.build-args", "{}"))
    bad += [(name, got_args.get(name)) for name, value in args.items() if got_args.get(name) != value]
    executed = sorted(p.name for p in marker.iterdir())
    print(f"\n[literal] {1 + len(args)} label cases: {len(executed)} executed, {len(bad)} altered")
    assert not executed and not bad, (executed, bad)


# ---- the runtime must have --no-eval -----------------------------------------------------------
def test_real_apptainer_has_no_eval_and_the_script_uses_it(apptainer_bin: str) -> None:
    from runner.apptainer import check_no_eval

    check_no_eval("apptainer", required=True)  # 1.4.5 here: passes
    script = cli("--site", "ethernet", "--nodes", "2", "--dry-run").stdout
    assert "apptainer exec --no-eval " in script
    check = _runtime_check_of(script)
    ran = subprocess.run(["bash", "-c", check], capture_output=True, text=True)
    assert ran.returncode == 0 and not ran.stderr, f"the script's check passes on real apptainer: {ran.stderr}"


def _runtime_check_of(script: str) -> str:
    """The runtime check of a batch script, with the script's own shell options."""
    body = script.split("# ---- the runtime must pass values verbatim")[1].split("\nfi\n")[0] + "\nfi\n"
    return "set -euo pipefail\n" + body.split("\n", 2)[2]


def _fake_runtime(tmp_path: Path, version: str) -> dict[str, str]:
    """DOUBLE: an `apptainer` that reports an old version and lacks --no-eval in its help (the
    real 1.4.5 beside it is checked above); only its version answer and help text matter."""
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    fake = bin_dir / "apptainer"
    fake.write_text("#!/bin/sh\n"
                    f'case "$1" in --version|version) echo "{version}";; exec) echo "  --nv   use nvidia";; esac\n')
    fake.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


@pytest.mark.parametrize("version", ["apptainer version 1.0.3", "singularity-ce version 3.9.9",
                                     "singularity version 3.8.7"])
def test_runtime_without_no_eval_is_refused_double(version: str, tmp_path: Path) -> None:
    from tests.helpers import one_line_error

    data = hv.local_base("/nonexistent.sif")
    profile = tmp_path / "old-runtime.yaml"
    profile.write_text(yaml.safe_dump(data))
    env = _fake_runtime(tmp_path, version)
    message = one_line_error(cli("--profile", str(profile), "--nodes", "1", "--run-dir", str(tmp_path / "run"),
                                 env=env))
    assert "no `exec --no-eval`" in message and "Apptainer >= 1.1" in message, message
    assert not (tmp_path / "run").exists(), "nothing written"
    # and the batch script's own check stops a job on such a node
    check = _runtime_check_of(cli("--site", "ethernet", "--nodes", "1", "--dry-run").stdout)
    ran = subprocess.run(["bash", "-c", check], capture_output=True, text=True, env={**os.environ, **env})
    assert ran.returncode == 1 and "has no --no-eval" in ran.stderr and version in ran.stderr, ran.stderr


# ---- the batch script's own variables are all reserved ---------------------------------------
def _assigned_names(script: str) -> set[str]:
    """Variables a bash script assigns (assignments, local, read, mapfile, for), ignoring
    comments and single-quoted text."""
    import re

    code = "\n".join(line.split(" # ")[0] for line in script.splitlines() if not line.lstrip().startswith("#"))
    code = re.sub(r"'[^']*'", "''", code)  # awk programs, literal values
    names = set(re.findall(r"(?:^|[\s;(])(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\+?=", code, re.M))
    for listed in re.findall(r"(?:^|[;(]|then|do)\s*(?:local|read -r|mapfile -t)\s+([a-z_][a-z0-9_= $]*)", code, re.M):
        names |= {word.split("=")[0] for word in listed.split() if not word.startswith("$")}
    names |= set(re.findall(r"\bfor\s+([a-z_][a-z0-9_]*)\s+in\b", code))
    return names


def test_every_variable_the_script_assigns_is_reserved(tmp_path: Path) -> None:
    """With `runtime: none` the profile's env is exported into the batch shell itself, so a
    profile must not be able to name any variable the script uses (templates included)."""
    import re

    from runner.profile_loader import load_profile
    from runner.validate import reserved_reason

    data = yaml.safe_load(TEST_PROFILE.read_text())
    data["container"] = {"runtime": "none"}
    data["scheduler"] = {**data["scheduler"], "gpus_per_node": 1, "requeue": True}
    data.pop("host_libraries", None)
    data["library_path"] = ["/opt/x"]
    profile = tmp_path / "none.yaml"
    profile.write_text(yaml.safe_dump(data))
    scripts = {"none": cli("--profile", str(profile), "--nodes", "2", "--dry-run").stdout,
               "olivia": cli("--site", "olivia", "--nodes", "2", "--dry-run").stdout}
    for name, script in scripts.items():
        assert script.startswith("#!/bin/bash"), name
        env = set(load_profile(str(profile), is_path=True).profile.env) if name == "none" else set()
        names = _assigned_names(script) - env - {"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS"}
        assert {"run_dir", "status", "nodes", "head_addr"} <= names, names  # the parser finds them
        unreserved = sorted(n for n in names if reserved_reason(n) is None)
        assert not unreserved, f"{name}: the script assigns variables a profile could set: {unreserved}"
        used = set(re.findall(r"\$\{?(SLURM_[A-Z_]+)", script))
        assert used and all(reserved_reason(n) for n in used), used
