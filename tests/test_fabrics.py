"""One place knows the fabric kinds (runner.fabrics): a new kind is one registry entry.

The first test registers a kind fabrikit does not have (AWS EFA through aws-ofi-nccl) in a
fresh interpreter, before anything else is imported, as if its entry were in `KINDS`, and
runs the real `fabrikit check-log`, `fabrikit job-end`, `fabrikit doctor` and the report's
reader on it: they judge its fast path, infer it from a log, warn with its own hints, with
no other code changed. The second keeps literal kind names out of the modules that handle
the kind, so the registry stays the only place to add one.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import yaml

from tests import nccl_logs as L
from tests.helpers import ROOT

# Registers the kind the way an entry in runner.fabrics.KINDS would (the names derived
# from KINDS included), then drives the real commands in-process.
_CHILD = r'''
import json, sys
from pathlib import Path

from runner import fabrics

fabrics.KINDS["efa"] = fabrics.FabricKind(
    name="efa", title="AWS EFA",
    fast=(fabrics.FastPath("ofi", frozenset({"efa"})),), fast_text="EFA", fast_provider="efa",
    fallback_hint="TEST-HINT: aws-ofi-nccl did not load",
    net_plugin="aws-ofi-nccl", net_plugin_hint="TEST-PLUGIN: EFA needs aws-ofi-nccl",
    fail_fast_env=(("NCCL_NET", "AWS Libfabric"),), providers=("efa",), preset="efa")
fabrics.NAMES = tuple(fabrics.KINDS)
fabrics.CHECKED = tuple(name for name, kind in fabrics.KINDS.items() if kind.checked)

from click.testing import CliRunner

from runner.cli import fabrikit
from runner.run_report import load_run

work = Path(sys.argv[1])


def cli(*args):
    result = CliRunner().invoke(fabrikit, [str(a) for a in args])
    return {"rc": result.exit_code, "out": result.stdout, "err": result.stderr}


transport = load_run(work / "run").transport
print(json.dumps({
    "fast": cli("check-log", "--json", "--fabric", "efa", work / "efa.log"),
    "inferred": cli("check-log", "--json", work / "efa.log"),
    "fallback": cli("check-log", "--json", "--fabric", "efa", work / "socket.log"),
    "no_nccl": cli("check-log", "--fabric", "efa", work / "app.log"),
    "job_end": cli("job-end", "--status", "0", "--fabric", "efa", work / "socket.log"),
    "report": {"verdict": transport.verdict, "line": transport.line},
    "doctor": cli("doctor", "--profile", work / "efa.yaml", "--json"),
}))
'''


def _lines(streams: list[list[str]]) -> str:
    return "".join(line + "\n" for stream in streams for line in stream)


def test_a_new_kind_is_one_registry_entry(tmp_path: Path) -> None:
    sockets = _lines(L.job(L.socket_rank, nodes=2, gpn=2, iface="eth0"))
    train = ("fabrikit-train: start nodes=2 procs_per_node=2 world_size=4 device=cuda backend=nccl start_step=0\n",
             "fabrikit-train: summary nodes=2 procs_per_node=2 world_size=4 epochs=1 global_steps=10 steps_this_run=10 "
             "images=1000 time_s=10.0 images_per_s=100.0 final_loss=1.0 final_acc=0.5\n")
    files = {
        "efa.log": _lines(L.job(L.ofi_efa_rank, nodes=2, gpn=2)),
        "socket.log": sockets,
        "app.log": "training started\nstep 1 loss 2.0\n",  # no NCCL line at all
        "efa.yaml": yaml.safe_dump({"description": "a new kind", "fabric": {"kind": "efa"},
                                    "container": {"runtime": "none"}}),
        # a run directory as `fabrikit report` reads it: a CUDA job on the new kind that used sockets
        "run/launch.json": json.dumps({"site": "aws", "nodes": 2}),
        "run/profile.yaml": "fabric:\n  kind: efa\nscheduler:\n  gpus_per_node: 2\n",
        "run/job-7.log": train[0] + sockets + train[1],
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)

    child = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path)], capture_output=True,
                           text=True, cwd=ROOT, check=False)
    assert child.returncode == 0, child.stderr
    got = json.loads(child.stdout)

    # check-log judges the kind's own fast path (OFI over the efa provider) ...
    assert got["fast"]["rc"] == 0, got["fast"]
    fast = json.loads(got["fast"]["out"])
    assert (fast["fabric"], fast["verdict"], fast["provider"]) == ("efa", "fast", "efa")
    # ... infers the kind from its libfabric provider when not told ...
    inferred = json.loads(got["inferred"]["out"])
    assert (inferred["fabric"], inferred["fabric_inferred_from"]) == ("efa", "libfabric provider efa")
    # ... calls sockets a fallback, with the kind's hints, and no InfiniBand-only warning
    assert got["fallback"]["rc"] == 1, got["fallback"]
    fallback = json.loads(got["fallback"]["out"])
    warnings = {w["code"]: w["message"] for w in fallback["warnings"]}
    assert fallback["verdict"] == "fallback"
    assert warnings["socket-fallback"].endswith("TEST-HINT: aws-ofi-nccl did not load")
    assert warnings["plugin-missing"].endswith("TEST-PLUGIN: EFA needs aws-ofi-nccl")
    assert "ib-no-device" not in warnings  # the log has the line, but EFA has no verbs devices
    # ... and, since the kind needs a network, a log without NCCL lines cannot pass
    assert got["no_nccl"]["rc"] == 1 and "cannot confirm the efa fast path" in got["no_nccl"]["out"]

    # job-end (the line every generated job ends with) and the report say the same
    assert "NCCL fell back to TCP sockets on an efa fabric" in got["job_end"]["out"], got["job_end"]
    assert got["report"]["verdict"] == "fallback" and "efa fabric" in got["report"]["line"]

    # doctor: the kind's fail-fast variable is missing from the profile
    assert got["doctor"]["rc"] in (0, 1), got["doctor"]
    check = next(c for c in json.loads(got["doctor"]["out"])["checks"] if c["name"] == "fabric")
    assert check["status"] == "warn" and check["detail"].startswith("AWS EFA: NCCL_NET is not set")


# Modules that may still spell a kind's name, and why (each is that kind's only recipe, not
# a copy of what runner.fabrics says): `sites init` and `sites import` draft a profile per
# preset (Cray libfabric binds, NCCL_IB_HCA, the script patterns that vote for a kind, the
# hazards of each), and profile.py's build flavours share two of the names.
_MAY_NAME_KINDS = {"fabrics.py", "profile.py", "site_init.py", "site_import.py", "site_import_fabric.py",
                   "site_import_container.py"}


def test_only_the_registry_names_the_kinds() -> None:
    from runner import check_log_cmd, fabrics, nccl_log, site_import_state

    assert tuple(f.value for f in nccl_log.Fabric) == fabrics.CHECKED
    option = next(p for p in check_log_cmd.check_log.params if p.name == "fabric")
    assert tuple(option.type.choices) == fabrics.CHECKED
    assert site_import_state.FABRICS == tuple(k.name for k in fabrics.KINDS.values() if k.preset)

    named = []
    for path in sorted((ROOT / "runner").glob("*.py")):
        if path.name in _MAY_NAME_KINDS:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and node.value in fabrics.KINDS:
                named.append(f"{path.name}:{node.lineno}: {node.value!r}")
    assert not named, "ask runner.fabrics instead of naming a kind:\n" + "\n".join(named)
