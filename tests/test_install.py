"""fabrikit as users install it: the bundled data found through the package, `fabrikit sites`
origins and shadowing, `--version`, and (slow) the built wheel run outside the checkout.

The wheel test builds an sdist and a wheel from it with pypa/build (no isolation: no network
in the test), installs the wheel into a fresh virtual environment created the way the README
creates one on Debian's own python3 (`--without-pip --system-site-packages`, the system pip),
and runs the console scripts from a directory outside the checkout, with the checkout on no
path. Asserting on the module and data paths makes sure the code that ran was the wheel's.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from runner import resources
from runner.profile_loader import load_profile
from tests.helpers import ROOT, cli

BUNDLED_SITES = sorted(p.stem for p in (ROOT / "bindings").glob("*.yaml"))
# Checkout folder -> its place in the installed package (pyproject.toml, package-dir).
PACKAGE_PLACES = {"bindings": "runner/bundled/bindings", "containers": "runner/bundled/containers",
                  "jobs": "runner/bundled/jobs", "runner/templates": "runner/templates"}
SMALL_TRAINING = ["--synthetic-size", "128", "--batch-size", "16", "--width", "8", "--epochs", "2"]


def test_bundled_data_is_this_checkout_in_an_editable_install() -> None:
    """Tests run this checkout's code; its data must come from the same checkout (through
    setuptools' editable mapping), not from another install or worktree."""
    places = resources.data_locations()
    assert places == {"bindings": ROOT / "bindings", "containers": ROOT / "containers", "jobs": ROOT / "jobs",
                      "templates": ROOT / "runner" / "templates"}, (
        f"bundled data found at {places}: reinstall this checkout with `pip install -e .`")


@pytest.mark.parametrize("prog", ["fabrikit", "run-multinode", "build-image"])
def test_version_names_the_install_and_every_data_folder(prog: str) -> None:
    # every console script answers --version the same way (and does nothing else)
    result = cli("--version", prog=prog)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    from runner import __version__

    first, *rest = result.stdout.splitlines()
    assert first.startswith(f"fabrikit {__version__} ("), first
    listed = dict(line.split(None, 1) for line in rest)
    for name, path in resources.data_locations().items():
        assert listed[name] == str(path), result.stdout
    assert listed["code"] == str(ROOT / "runner")
    from runner import fast_scan  # is the optional hyperscan there? (fabrikit[fast])

    assert listed["check-log"].startswith("hyperscan " if fast_scan.available() else "Python's"), \
        result.stdout


def test_a_checkout_on_pythonpath_without_install_says_so(tmp_path: Path) -> None:
    """No install, no data: one line naming the fix, not an empty site list. `-S` keeps the
    site-packages' .pth files (an editable install's finder) from running; the dependencies
    come through PYTHONPATH."""
    import site

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *site.getsitepackages()])}
    entry = "import sys; from runner.cli import main; sys.argv[0] = 'fabrikit'; main()"
    for args in (["sites"], ["run-multinode", "--site", "olivia", "--nodes", "2", "--dry-run"]):
        result = subprocess.run([sys.executable, "-S", "-c", entry, *args], capture_output=True, text=True,
                                env=env, cwd=tmp_path, timeout=60)
        assert result.returncode == 1 and result.stdout == "", (args, result.stdout, result.stderr)
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
        assert "fabrikit: error: fabrikit's bundled data is missing" in result.stderr
        assert "pip install" in result.stderr
    version = subprocess.run([sys.executable, "-S", "-c", entry, "--version"], capture_output=True, text=True,
                             env=env, cwd=tmp_path, timeout=60)
    assert version.returncode == 0, version.stderr
    assert "bindings    MISSING: fabrikit's bundled data is missing" in version.stdout, version.stdout


def _write_site(directory: Path, name: str, description: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.yaml"
    path.write_text(f'extends: local\ndescription: "{description}"\n')
    return path


def test_sites_shows_origin_and_what_shadows_what(tmp_path: Path) -> None:
    home, env_a, env_b = tmp_path / "home", tmp_path / "a", tmp_path / "b"
    user_dir = home / ".config" / "fabrikit" / "bindings"
    user_olivia = _write_site(user_dir, "olivia", "olivia, user copy")
    _write_site(user_dir, "mine", "my own cluster")
    env_olivia = _write_site(env_b, "olivia", "olivia, env copy")
    env_raven = _write_site(env_a, "raven", "raven, env copy")
    result = cli("sites", prog="fabrikit",
                 env={"HOME": str(home), "FABRIKIT_SITES": f"{env_a}:{env_b}:{tmp_path / 'missing'}"})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    bundled = resources.bundled_bindings_dir()

    def block(site: str) -> list[str]:
        """The site's row and the indented lines under it, whitespace squeezed."""
        start = next(i for i, line in enumerate(lines) if line.split()[:1] == [site])
        end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith(" "))
        return [" ".join(line.split()) for line in lines[start:end]]

    assert block("olivia") == ["olivia env olivia, env copy", f"file: {env_olivia}",
                               f"shadows: user {user_olivia}", f"shadows: bundled {bundled / 'olivia.yaml'}"]
    assert block("raven") == ["raven env raven, env copy", f"file: {env_raven}",
                              f"shadows: bundled {bundled / 'raven.yaml'}"]
    assert block("mine") == ["mine user my own cluster", f"file: {user_dir / 'mine.yaml'}"]
    assert block("gilbreth")[0].startswith("gilbreth bundled Purdue Gilbreth") and len(block("gilbreth")) == 1
    order = lines[lines.index("searched in this order (first match wins):") + 1:]
    assert [" ".join(line.split()) for line in order] == [
        f"env {env_a}", f"env {env_b}", f"env {tmp_path / 'missing'} (does not exist)", f"user {user_dir}",
        f"bundled {bundled}"]
    # the listing and the lookup agree: the env copy is what --site olivia loads
    shown = cli("sites", "show", "olivia", prog="fabrikit", env={"HOME": str(home), "FABRIKIT_SITES": f"{env_a}:{env_b}"})
    assert shown.returncode == 0 and str(env_olivia) in shown.stdout.splitlines()[0], shown.stdout[:300]


# ---------------------------------------------------------------------------------------------
# The wheel, installed outside the checkout


def _source_files(folder: str) -> list[str]:
    """Files of a checkout folder that must ship: git's list where there is a repository."""
    git = shutil.which("git")
    if git and (ROOT / ".git").exists():
        out = subprocess.run([git, "ls-files", "--", folder], cwd=ROOT, capture_output=True, text=True, check=True)
        return sorted(line for line in out.stdout.splitlines() if line)
    return sorted(str(p.relative_to(ROOT)) for p in (ROOT / folder).rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts)


def _copy_source_tree(target: Path) -> Path:
    """The checkout without build outputs and environments: building in a copy keeps
    build/ and fabrikit.egg-info out of the checkout (an egg-info there is a second
    `fabrikit` distribution for anything run from the checkout)."""
    skip = shutil.ignore_patterns(".git", ".venv", "venv", "build", "dist", "runs", "*.egg-info", "__pycache__",
                                  ".pytest_cache", "*.sif")
    shutil.copytree(ROOT, target, ignore=skip, symlinks=True)
    return target


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Build sdist + wheel, make a fresh venv outside the checkout, install the wheel."""
    build = pytest.importorskip("build", reason="the wheel test needs pypa/build: pip install -e '.[test]'")
    base = tmp_path_factory.mktemp("wheel")
    source = _copy_source_tree(base / "src")
    unmet = build.ProjectBuilder(source).check_dependencies("wheel")
    if unmet:  # --no-isolation builds with what is installed: the backend must be there
        pytest.skip(f"build requirements not installed ({unmet}): pip install -e '.[test]'")
    dist = base / "dist"
    built = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(source)],
                           capture_output=True, text=True, cwd=base, timeout=600)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    wheels, sdists = sorted(dist.glob("fabrikit-*.whl")), sorted(dist.glob("fabrikit-*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, list(dist.iterdir())

    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
                   check=True, timeout=300)
    python = venv / "bin" / "python"
    # torch and the dependencies come from the environment running the tests: the base
    # interpreter's site-packages (--system-site-packages) and, when that environment is a venv
    # itself (README command 1 makes one), its site-packages too, after the new venv's own.
    # A directory named in a .pth file is not scanned for .pth files: an editable fabrikit
    # there stays switched off.
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    import site

    Path(purelib, "_fabrikit_test_outer_env.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    # --ignore-installed: a fabrikit in the system site-packages (CI's editable install) is
    # neither uninstalled nor taken as "already satisfied"; --no-deps --no-index: no network,
    # the dependencies come from the system site-packages.
    installed = subprocess.run([str(python), "-m", "pip", "install", "--no-index", "--no-deps", "--ignore-installed",
                                str(wheels[0])], capture_output=True, text=True, cwd=base, timeout=600)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    elsewhere = base / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "FABRIKIT_SITES", "VIRTUAL_ENV"}}
    env.update(HOME=str(base / "home"), PATH=f"{venv / 'bin'}:{env.get('PATH', '')}", OMP_NUM_THREADS="1")
    return {"venv": venv.resolve(), "wheel": wheels[0], "sdist": sdists[0], "env": env, "cwd": elsewhere}


def _run(wheel_env: dict[str, object], *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    venv = wheel_env["venv"]
    assert isinstance(venv, Path)
    return subprocess.run([str(venv / "bin" / argv[0]), *argv[1:]], capture_output=True, text=True,
                          env=wheel_env["env"], cwd=wheel_env["cwd"], timeout=timeout)


@pytest.mark.slow
def test_sdist_and_wheel_carry_every_bundled_file(wheel_env: dict[str, object]) -> None:
    with zipfile.ZipFile(wheel_env["wheel"]) as whl:
        in_wheel = set(whl.namelist())
    with tarfile.open(wheel_env["sdist"]) as sdist:
        in_sdist = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    missing_wheel, missing_sdist = [], []
    for folder, place in PACKAGE_PLACES.items():
        for path in _source_files(folder):
            if place + path[len(folder):] not in in_wheel:
                missing_wheel.append(path)
            if path not in in_sdist:
                missing_sdist.append(path)
    assert not missing_wheel, f"not in the wheel: {missing_wheel}"
    assert not missing_sdist, f"not in the sdist: {missing_sdist}"
    assert not [n for n in in_wheel if n.startswith(("bindings/", "containers/", "jobs/", "tests/"))], \
        "the wheel must not install top-level data folders into site-packages"


@pytest.mark.slow
def test_installed_wheel_runs_outside_the_checkout(wheel_env: dict[str, object], tmp_path: Path) -> None:
    venv = wheel_env["venv"]
    assert isinstance(venv, Path)

    # The code and every data folder come from the venv, not from the checkout.
    version = _run(wheel_env, "fabrikit", "--version")
    assert version.returncode == 0, version.stderr
    first, *rest = version.stdout.splitlines()
    assert first.startswith("fabrikit ") and "installed from file://" in first and first.endswith(".whl)"), first
    places = dict(line.split(None, 1) for line in rest)
    for name in ("code", *resources.DATA_PACKAGES):
        path = Path(places[name])
        assert path.is_relative_to(venv) and not path.is_relative_to(ROOT), (name, path)
    imported = _run(wheel_env, "python", "-c", "import json, runner, sys; print(json.dumps([runner.__file__, sys.path]))")
    assert imported.returncode == 0, imported.stderr
    module, sys_path = json.loads(imported.stdout)
    assert Path(module).is_relative_to(venv), module
    assert not [p for p in sys_path if Path(wheel_env["cwd"], p).resolve() == ROOT], \
        f"the checkout is on the installed program's sys.path: {sys_path}"

    # fabrikit sites: every bundled site, from the bundled folder inside the venv
    listing = _run(wheel_env, "fabrikit", "sites")
    assert listing.returncode == 0, listing.stderr
    rows = {line.split()[0]: line.split()[1] for line in listing.stdout.splitlines() if line[:1].strip()}
    for site in BUNDLED_SITES:
        assert rows.get(site) == "bundled", listing.stdout
    assert f"bundled  {places['bindings']}" in listing.stdout

    # The dry run of every bundled site; Slurm sites print exactly the golden script.
    for site in BUNDLED_SITES:
        dry = _run(wheel_env, "run-multinode", "--site", site, "--nodes", "2", "--dry-run")
        assert dry.returncode == 0, (site, dry.stderr)
        golden = ROOT / "tests" / "golden" / f"{site}-2node.sbatch"
        if golden.exists():
            assert dry.stdout == golden.read_text(), f"{site}: the installed wheel renders a different script"
        else:
            assert "/jobs/train_ddp.py" in dry.stdout and dry.stdout.count("torch.distributed.run") == 2, dry.stdout

    # build-image --dry-run of every site with a build section: the same definition and hash
    # as the checkout renders.
    build_sites = [s for s in BUNDLED_SITES if load_profile(s).profile.container.build is not None
                   and load_profile(s).profile.container.runtime != "none"]
    assert build_sites, "no bundled site has a build section"
    for site in build_sites:
        installed = _run(wheel_env, "build-image", site, "--dry-run")
        assert installed.returncode == 0, (site, installed.stderr)
        here = cli(site, "--dry-run", prog="build-image", cwd=wheel_env["cwd"])
        assert here.returncode == 0, (site, here.stderr)
        assert installed.stdout == here.stdout, f"{site}: the wheel renders another definition file"
        digest = re.compile(r"definition-sha256 ([0-9a-f]{64})")
        assert digest.findall(installed.stderr) == digest.findall(here.stderr) != [], installed.stderr

    # A real local 2-node training run (torch from the system site-packages).
    pytest.importorskip("torch")
    run_dir = tmp_path / "run"
    trained = _run(wheel_env, "run-multinode", "--site", "local", "--nodes", "2", "--run-dir", str(run_dir),
                   "--", "train_ddp.py", *SMALL_TRAINING, timeout=600)
    assert trained.returncode == 0, trained.stdout[-2000:] + trained.stderr[-2000:]
    summary = [line for line in trained.stdout.splitlines() if "fabrikit-train: summary" in line]
    assert summary and "nodes=2 procs_per_node=1 world_size=2" in summary[0], trained.stdout[-2000:]
    copied = sorted(p.name for p in (run_dir / "jobs").glob("*.py"))  # (the run adds __pycache__)
    assert copied == sorted(p.name for p in (ROOT / "jobs").glob("*.py") if p.name != "__init__.py"), copied
    assert (run_dir / "jobs" / "train_ddp.py").read_bytes() == (ROOT / "jobs" / "train_ddp.py").read_bytes()
