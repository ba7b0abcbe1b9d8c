"""Shared pytest fixtures.

Cluster/Apptainer fixtures (helpers live in tests/cluster/rig.py):

* ``slurm_cluster`` (session): ONE real multi-node Slurm cluster per test session
  (tests/cluster/slurm-netns.sh; 4 nodes node1..node4 = 10.78.0.11-14, partition ``debug``,
  4 CPUs per node, OverSubscribe=FORCE:2). Always torn down, also on failure or Ctrl-C.
* ``apptainer_bin`` (session): path of a working apptainer >= 1.2.
* ``tiny_sif`` (session): a ~1 MB busybox SIF, for "apptainer runs in the nodes" checks.

Where a prerequisite is missing the tests are skipped with the reason, unless
FABRIKIT_REQUIRE_CLUSTER=1 / FABRIKIT_REQUIRE_APPTAINER=1 (CI), which turn the skip into an error;
FABRIKIT_REQUIRE_TOOLS=1 does the same for programs and libraries (console scripts, shellcheck,
libfabric, torch), see tests/helpers.py `require_program`.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from tests.helpers import unavailable

_spec = importlib.util.spec_from_file_location(
    "fabrikit_cluster_rig", Path(__file__).parent / "cluster" / "rig.py")
rig = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = rig
_spec.loader.exec_module(rig)


@pytest.fixture(scope="session", autouse=True)
def _own_cache_dir(tmp_path_factory):
    """check-log keeps hyperscan's compiled database in the user's cache (runner/fast_scan.py):
    the tests, and the programs they start, keep theirs in a directory of their own."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FABRIKIT_CACHE_DIR", str(tmp_path_factory.mktemp("fabrikit-cache")))
        yield


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
        unavailable("FABRIKIT_REQUIRE_CLUSTER", "no test cluster", missing)
    cluster = rig.SlurmCluster(rig.ClusterSettings.from_env())
    try:
        cluster.acquire_lock(timeout=float(os.environ.get("FABRIKIT_CLUSTER_LOCK_TIMEOUT", "600")),
                             on_wait=lambda m: _say(request.config, m))
    except TimeoutError as e:
        unavailable("FABRIKIT_REQUIRE_CLUSTER", "test cluster busy", str(e))
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
        unavailable("FABRIKIT_REQUIRE_APPTAINER", "no apptainer", reason)
    return path


@pytest.fixture(scope="session")
def tiny_sif(apptainer_bin, tmp_path_factory) -> Path:
    sif, reason = rig.build_tiny_sif(apptainer_bin, tmp_path_factory.mktemp("tiny-sif"))
    if sif is None:
        unavailable("FABRIKIT_REQUIRE_APPTAINER", "no tiny test image", reason)
    return sif


# ---- golden files (owned by the rendering tests) ------------------------------------------
def pytest_addoption(parser) -> None:
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/* from the current output instead of comparing")


def pytest_collection_modifyitems(items):
    # a test that uses the cluster/Apptainer fixtures carries the marker even if it forgot it,
    # so `-m "not cluster"` / `-m "not apptainer"` always deselect it
    for item in items:
        names = getattr(item, "fixturenames", ())
        if "slurm_cluster" in names:
            item.add_marker(pytest.mark.cluster)
        if "apptainer_bin" in names or "tiny_sif" in names:
            item.add_marker(pytest.mark.apptainer)


# ---- test_image: the real test-cluster image (owned by tests/test_image_real.py) ----------
@pytest.fixture(scope="session")
def test_image(apptainer_bin, request) -> Path:
    """The test cluster's image, built by the real `build-image --profile
    tests/sites/testcluster.yaml` (debootstrap + the CPU torch wheel from /opt/wheels; a few
    minutes cold), or found up to date by its label hash (well under a second). Path from the
    profile: /var/tmp/fabrikit-test/testcluster.sif. Skips when it cannot be built here, unless
    FABRIKIT_REQUIRE_APPTAINER=1; a build that runs and fails is a test failure."""
    import shutil
    import subprocess
    import time

    from runner.profile_loader import load_profile

    root = Path(__file__).resolve().parent.parent
    profile_path = root / "tests" / "sites" / "testcluster.yaml"
    profile = load_profile(str(profile_path), is_path=True).profile
    wheel = profile.container.build.args.get("TORCH_WHEEL", "")
    missing = []
    if shutil.which("debootstrap") is None:
        missing.append("debootstrap not found (apt-get install debootstrap)")
    if not (Path("/opt/wheels") / str(wheel)).is_file():
        missing.append(f"/opt/wheels/{wheel} not found (the CPU torch wheel the test image installs)")
    if missing:
        unavailable("FABRIKIT_REQUIRE_APPTAINER", "cannot build the test image", missing)
    script = shutil.which("build-image")
    cmd = [script] if script else [sys.executable, "-c", "from runner.cli import build_image_main; build_image_main()"]
    start = time.monotonic()
    result = subprocess.run([*cmd, "--profile", str(profile_path)], capture_output=True, text=True,
                            timeout=1800, cwd=root)
    took = time.monotonic() - start
    if result.returncode != 0:
        pytest.fail(f"build-image --profile {profile_path} failed (exit {result.returncode}) after {took:.0f} s:\n"
                    f"{result.stderr[-4000:]}", pytrace=False)
    capman = request.config.pluginmanager.getplugin("capturemanager")
    message = f"\n[test_image] build-image took {took:.1f} s: {result.stdout.strip()}\n"
    if capman is not None:
        with capman.global_and_fixture_disabled():
            sys.stderr.write(message)
    else:
        sys.stderr.write(message)
    return Path(profile.container.image)
