"""Shared pytest fixtures.

Cluster/Apptainer fixtures (helpers live in tests/cluster/rig.py):

* ``slurm_cluster`` (session): ONE real multi-node Slurm cluster per test session
  (tests/cluster/slurm-netns.sh; 4 nodes node1..node4 = 10.78.0.11-14, partition ``debug``,
  4 CPUs per node, OverSubscribe=FORCE:2). Always torn down, also on failure or Ctrl-C.
* ``apptainer_bin`` (session): path of a working apptainer >= 1.2.
* ``tiny_sif`` (session): a ~1 MB busybox SIF, for "apptainer runs in the nodes" checks.

Where a prerequisite is missing the tests are skipped with the reason, unless
FABRIKIT_REQUIRE_CLUSTER=1 / FABRIKIT_REQUIRE_APPTAINER=1 (CI), which turn the skip into an error.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "fabrikit_cluster_rig", Path(__file__).parent / "cluster" / "rig.py")
rig = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = rig
_spec.loader.exec_module(rig)


def _unavailable(require_var: str, what: str, reasons) -> None:
    reason = f"{what}: " + "; ".join([reasons] if isinstance(reasons, str) else reasons)
    if os.environ.get(require_var) == "1":
        pytest.fail(f"{reason} [{require_var}=1: this is an error, not a skip]", pytrace=False)
    pytest.skip(reason)


def _say(config, msg: str) -> None:
    capman = config.pluginmanager.getplugin("capturemanager")
    if capman is not None:
        with capman.global_and_fixture_disabled():
            sys.stderr.write(f"\n[slurm_cluster] {msg}\n")
    else:
        sys.stderr.write(f"\n[slurm_cluster] {msg}\n")


@pytest.fixture(scope="session")
def slurm_cluster(request):
    missing = rig.missing_prerequisites()
    if missing:
        _unavailable("FABRIKIT_REQUIRE_CLUSTER", "no test cluster", missing)
    cluster = rig.SlurmCluster(rig.ClusterSettings.from_env())
    try:
        cluster.acquire_lock(timeout=float(os.environ.get("FABRIKIT_CLUSTER_LOCK_TIMEOUT", "600")),
                             on_wait=lambda m: _say(request.config, m))
    except TimeoutError as e:
        _unavailable("FABRIKIT_REQUIRE_CLUSTER", "test cluster busy", str(e))
    cluster.install_emergency_teardown()
    try:
        cluster.up()
        yield cluster
    finally:
        cluster.teardown()


@pytest.fixture(scope="session")
def apptainer_bin() -> str:
    path, reason = rig.find_apptainer()
    if path is None:
        _unavailable("FABRIKIT_REQUIRE_APPTAINER", "no apptainer", reason)
    return path


@pytest.fixture(scope="session")
def tiny_sif(apptainer_bin, tmp_path_factory) -> Path:
    sif, reason = rig.build_tiny_sif(apptainer_bin, tmp_path_factory.mktemp("tiny-sif"))
    if sif is None:
        _unavailable("FABRIKIT_REQUIRE_APPTAINER", "no tiny test image", reason)
    return sif


# ---- golden files (owned by the rendering tests) ------------------------------------------
def pytest_addoption(parser) -> None:
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/* from the current output instead of comparing")
