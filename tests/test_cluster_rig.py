"""The test cluster itself works (tests/cluster/slurm-netns.sh + the `slurm_cluster` fixture)."""
from __future__ import annotations

import re
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/bash\nset -euo pipefail\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return path


def _wait_state(cluster, job_id, states, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        state = cluster.job_state(job_id)
        if state in states:
            return state
        assert time.monotonic() < deadline, f"job {job_id} never reached {states} (now {state})"
        time.sleep(0.1)


def test_srun_two_nodes_have_distinct_names(slurm_cluster):
    r = slurm_cluster.srun("-N2", "--ntasks-per-node=1", "hostname")
    assert r.returncode == 0, r.stderr
    names = r.stdout.split()
    assert len(names) == 2 and len(set(names)) == 2, names
    assert set(names) <= set(slurm_cluster.nodes)


def test_nodes_resolve_to_their_own_ips(slurm_cluster):
    n = len(slurm_cluster.nodes)
    r = slurm_cluster.srun(f"-N{n}", "--ntasks-per-node=1", "sh", "-c",
                           'echo "$(hostname) $(hostname --ip-address)"')
    assert r.returncode == 0, r.stderr
    seen = dict(line.split()[:2] for line in r.stdout.splitlines())
    assert seen == slurm_cluster.node_ips
    # the same identity outside Slurm, through the helper
    for name, ip in slurm_cluster.node_ips.items():
        out = slurm_cluster.run_on_node(name, ["sh", "-c", "hostname; hostname --ip-address"], check=True)
        assert out.stdout.split() == [name, ip]


def test_nodes_have_no_route_off_the_machine(slurm_cluster):
    node, other = slurm_cluster.nodes[:2]
    routes = slurm_cluster.run_on_node(node, ["ip", "route", "show"], check=True).stdout
    assert "default" not in routes, routes
    # ...but a node reaches the other nodes' slurmd and the controller
    for ip, port in ((slurm_cluster.node_ips[other], 6818), (slurm_cluster.ctl_ip, slurm_cluster.settings.ctld_port)):
        r = slurm_cluster.run_on_node(node, ["timeout", "5", "bash", "-c", f"exec 3<>/dev/tcp/{ip}/{port}"])
        assert r.returncode == 0, (ip, port, r.stderr)


def test_sbatch_completes_and_output_is_readable_from_host(slurm_cluster, tmp_path):
    job = _script(tmp_path / "job.sh", """\
        echo "batch host=$(hostname) nodes=$SLURM_JOB_NODELIST tmpdir=$TMPDIR"
        test -d "$TMPDIR"
        srun --ntasks-per-node=1 sh -c 'echo "task host=$(hostname) tmpdir=$TMPDIR"'
        echo "run dir is shared: $(cat "$RUN_DIR/input.txt")"
    """)
    (tmp_path / "input.txt").write_text("hello-from-host\n")
    t0 = time.monotonic()
    job_id = slurm_cluster.sbatch(job, "-N2", f"--output={tmp_path}/%j.out", env={"RUN_DIR": str(tmp_path)})
    state = slurm_cluster.wait(job_id, timeout=60)
    turnaround = time.monotonic() - t0
    out = (tmp_path / f"{job_id}.out").read_text()
    assert state == "COMPLETED", out
    print(f"2-node sbatch turnaround: {turnaround:.2f} s")
    hosts = re.findall(r"task host=(\S+)", out)
    assert len(hosts) == 2 and len(set(hosts)) == 2, out
    assert "run dir is shared: hello-from-host" in out
    # every job gets its own TMPDIR (no /tmp/torchelastic_* pile-up), removed when the job ends
    jobtmp = str(Path(slurm_cluster.base) / "jobtmp" / job_id)
    assert set(re.findall(r"tmpdir=(\S+)", out)) == {jobtmp}, out
    assert not Path(jobtmp).exists()


def test_two_jobs_run_at_the_same_time_on_the_same_nodes(slurm_cluster, tmp_path):
    # Each job announces itself, then waits until the other one has announced itself too: this only
    # completes if both jobs hold node1+node2 at the same time.
    job = _script(tmp_path / "pair.sh", """\
        me=$1 other=$2
        srun --ntasks-per-node=1 sh -c "hostname > $RUN_DIR/\\$(hostname).$me"
        date +%s.%N > "$RUN_DIR/$me.started"
        for _ in $(seq 600); do [ -e "$RUN_DIR/$other.started" ] && break; sleep 0.1; done
        test -e "$RUN_DIR/$other.started"
        sleep 1
        date +%s.%N > "$RUN_DIR/$me.ended"
    """)
    pair = slurm_cluster.nodes[:2]
    common = ("-N2", "--ntasks-per-node=1", f"--nodelist={','.join(pair)}", f"--output={tmp_path}/%j.out")
    env = {"RUN_DIR": str(tmp_path)}
    a = slurm_cluster.sbatch(job, *common, script_args=("a", "b"), env=env)
    b = slurm_cluster.sbatch(job, *common, script_args=("b", "a"), env=env)
    # seen by Slurm: both RUNNING at once
    deadline = time.monotonic() + 60
    while (slurm_cluster.job_state(a), slurm_cluster.job_state(b)) != ("RUNNING", "RUNNING"):
        assert time.monotonic() < deadline, (slurm_cluster.job_state(a), slurm_cluster.job_state(b))
        time.sleep(0.05)
    assert slurm_cluster.wait(a, timeout=90) == "COMPLETED", (tmp_path / f"{a}.out").read_text()
    assert slurm_cluster.wait(b, timeout=90) == "COMPLETED", (tmp_path / f"{b}.out").read_text()
    # seen by the jobs: overlapping intervals on the same two nodes
    ts = {f.name: float(f.read_text()) for f in tmp_path.glob("[ab].*ed")}
    overlap = min(ts["a.ended"], ts["b.ended"]) - max(ts["a.started"], ts["b.started"])
    print(f"jobs {a},{b} on {pair}: both running for {overlap:.2f} s "
          f"(starts {abs(ts['a.started'] - ts['b.started']):.2f} s apart)")
    assert overlap > 0, ts
    for j in ("a", "b"):
        assert {p.name for p in tmp_path.glob(f"*.{j}")} == {f"{n}.{j}" for n in pair}
    for j in (a, b):
        assert slurm_cluster.job_info(j)["NodeList"] == slurm_cluster.job_info(a)["NodeList"]


def test_kill_on_node_hits_only_the_matching_process(slurm_cluster, tmp_path):
    node = slurm_cluster.nodes[-1]
    job = _script(tmp_path / "sleeper.sh", "sleep 4242\n")
    job_id = slurm_cluster.sbatch(job, "-N1", f"--nodelist={node}", f"--output={tmp_path}/%j.out")
    _wait_state(slurm_cluster, job_id, {"RUNNING"})
    deadline = time.monotonic() + 30
    while not (killed := slurm_cluster.kill_on_node(node, r"^sleep 4242$")):
        assert time.monotonic() < deadline, "sleep 4242 never showed up on the node"
        time.sleep(0.1)
    assert len(killed) == 1
    assert slurm_cluster.wait(job_id, timeout=30) == "FAILED"
    assert slurm_cluster.slurmd_pid(node) is not None  # slurmd spared


@pytest.mark.apptainer
def test_apptainer_exec_inside_the_nodes(slurm_cluster, apptainer_bin, tiny_sif):
    r = slurm_cluster.srun("-N2", "--ntasks-per-node=1", apptainer_bin, "exec", str(tiny_sif),
                           "sh", "-c", 'echo "$(hostname) $(hostname -i)"', timeout=180)
    assert r.returncode == 0, r.stderr
    seen = dict(line.split()[:2] for line in r.stdout.splitlines() if line.strip())
    assert len(seen) == 2, r.stdout
    for name, ip in seen.items():
        assert slurm_cluster.node_ips[name] == ip
