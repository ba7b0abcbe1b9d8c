"""build-image without building: rendering, hashing, bad input, and the build/cache/submit
logic against a fake `apptainer` (a Python script on PATH). Fast; no real Apptainer needed.

The real build is in tests/test_image_real.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from runner import entry
from runner import image_build, image_labels, image_plan
from runner import image_definition as deffile
from runner.build_cmd import build_image
from runner.profile_loader import load_profile
from runner.resources import bundled_bindings_dir, containers_dir
from tests.helpers import ROOT, require_program, wait_for

TESTCLUSTER = ROOT / "tests" / "sites" / "testcluster.yaml"
SHELL_SECTIONS = ("setup", "post", "test", "environment", "runscript")
INSTALL_HINT = "the package is not installed (pip install -e .)"


def _bundled_build_sites() -> list[str]:
    sites = []
    for path in sorted(bundled_bindings_dir().glob("*.yaml")):
        loaded = load_profile(str(path), is_path=True)
        if loaded.profile.container.runtime != "none" and loaded.profile.container.build is not None:
            sites.append(path.stem)
    return sites


BUILD_SITES = _bundled_build_sites()
ALL_TARGETS = [*BUILD_SITES, str(TESTCLUSTER)]


class _Entry:
    """Lets CliRunner drive `entry.run_command` (one-line errors, exit codes) like the console script."""

    name = "build-image"

    def main(self, args, prog_name=None, **_):
        entry.run_command(build_image, "build-image", list(args))


def run_cli(args: list[str], env: dict[str, str] | None = None):
    return CliRunner().invoke(_Entry(), args, env=env)


def _target_args(target: str) -> list[str]:
    return ["--profile", target] if target.endswith(".yaml") else [target]


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line, got: {stderr!r}"
    assert lines[0].startswith("build-image: error: "), lines[0]
    return lines[0]


# --- a fake apptainer ---------------------------------------------------------------------

FAKE_APPTAINER = r'''#!{python}
import json, os, signal, sys, time
args = sys.argv[1:]
if args[:1] in (["--version"], ["version"]):
    print("apptainer version " + os.environ.get("FAKE_APPTAINER_VERSION", "1.4.5"))
    sys.exit(0)
if args[:1] == ["inspect"]:
    try:
        with open(args[-1]) as fh:
            labels = json.load(fh)
    except Exception:
        print("FATAL:   could not open image " + args[-1], file=sys.stderr)
        sys.exit(255)
    print(json.dumps({{"data": {{"attributes": {{"labels": labels}}}}, "type": "container"}}))
    sys.exit(0)
if args[:1] == ["build"]:
    if os.environ.get("FAKE_ARGV_LOG"):
        with open(os.environ["FAKE_ARGV_LOG"], "a") as fh:
            fh.write(json.dumps(args) + "\n")
    out, deffile = args[-2], args[-1]
    mode = os.environ.get("FAKE_BUILD", "ok")
    say = lambda s: print(s, flush=True)
    say("INFO:    Starting build...")
    say("INFO:    Running post scriptlet")
    say("+ apt-get update")
    if mode == "fail":
        say("+ python3 -m pip install nope")
        say("ERROR: No matching distribution found for nope")
        say("FATAL:   While performing build: while running engine: exit status 1")
        sys.exit(255)
    if mode == "hang":
        # like apptainer 1.4.5: a SIGINT ends the build at once with status 1 (Go un-ignores it)
        signal.signal(signal.SIGINT, lambda *_: os._exit(1))
        with open(out, "w") as fh:
            fh.write("half")
        say("+ sleep 60")
        time.sleep(60)
        sys.exit(1)
    labels, in_labels = {{}}, False
    for line in open(deffile):
        if line.startswith("%"):
            in_labels = line.strip() == "%labels"
        elif in_labels and line.strip():
            key, _, value = line.strip().partition(" ")
            labels[key] = value.strip()
    if mode == "nolabel":
        labels = {{}}
    say("INFO:    Creating SIF file...")
    with open(out, "w") as fh:
        json.dump(labels, fh)
    say("INFO:    Build complete: " + out)
    sys.exit(0)
print("fake apptainer: unexpected " + " ".join(args), file=sys.stderr)
sys.exit(3)
'''


@pytest.fixture
def fake_bin(tmp_path: Path) -> Path:
    """A directory with a fake `apptainer` (and `sbatch`), to put first on PATH."""
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    fake = bin_dir / "apptainer"
    fake.write_text(FAKE_APPTAINER.format(python=sys.executable))
    fake.chmod(0o755)
    sbatch = bin_dir / "sbatch"
    sbatch.write_text(f"#!{sys.executable}\nimport sys\nopen(sys.argv[-1] + '.argv', 'w').write(' '.join(sys.argv))\n"
                      "print('4242')\n")
    sbatch.chmod(0o755)
    return bin_dir


@pytest.fixture
def fake_path(fake_bin: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PATH", f"{fake_bin}{os.pathsep}{os.environ.get('PATH', '')}")
    return fake_bin


def _profile(tmp_path: Path, *, template: str = "test.def", args: str = "", extra_build: str = "",
             arch: str = "x86_64", name: str = "mini") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(textwrap.dedent(f"""\
        description: "build-image test profile"
        fabric:
          kind: ethernet
        container:
          runtime: apptainer
          image: {tmp_path}/out/mini.sif
          arch: {arch}
          build:
            template: {template}
            flavour: test
            min_free_gb: 0.001
        """) + (f"    args:\n{textwrap.indent(args, '      ')}" if args else "")
        + (textwrap.indent(extra_build, "    ") if extra_build else ""))
    return path


def _listing(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


# --- dry run of every site ----------------------------------------------------------------


def test_every_bundled_site_with_an_image_is_covered():
    assert {"olivia", "raven", "gilbreth", "ethernet", "lumi", "alps", "leonardo"} <= set(BUILD_SITES)


@pytest.mark.parametrize("target", ALL_TARGETS, ids=lambda t: Path(t).stem)
def test_dry_run_renders_a_complete_definition(target: str, tmp_path: Path):
    out = tmp_path / "out"
    result = run_cli([*_target_args(target), "--dry-run", "--output", str(out / "image.sif")])
    assert result.exit_code == 0, result.output
    text = result.stdout
    lines = text.splitlines()
    # Header: Bootstrap first, then what the agent needs.
    assert lines[0].startswith("Bootstrap: ")
    agent = lines[0].split(":", 1)[1].strip()
    keys = {k.lower() for k, _ in deffile.header(text)}
    if agent == "docker":
        assert "from" in keys
        assert "--arch" in result.stderr
    elif agent == "debootstrap":
        assert {"osversion", "mirrorurl"} <= keys
    # Every {{ }} is bound by %arguments or by a --build-arg in the command.
    defaults = deffile.parse_arguments(text)
    command = next(line for line in result.stderr.splitlines() if line.startswith("# dry run: would run"))
    passed = {word.split("=", 1)[0] for word in command.split() if "=" in word and not word.startswith("-")}
    for name in deffile.arg_references(text):
        assert name in defaults or name in passed, name
    # No fabrikit placeholder is left.
    assert "@LABELS@" not in text and "@POST_COMMON@" not in text and "@TEST_COMMON@" not in text
    # Labels.
    labels = dict(line.strip().split(" ", 1) for name, body in deffile.sections(text) if name == "labels"
                  for line in body.splitlines() if line.strip())
    for key in (image_labels.LABEL_VERSION, image_labels.LABEL_SITE, image_labels.LABEL_FLAVOUR, image_labels.LABEL_BUILD_ARGS, image_labels.LABEL_HASH):
        assert key in labels, key
    assert len(labels[image_labels.LABEL_HASH]) == 64
    assert json.loads(labels[image_labels.LABEL_BUILD_ARGS])
    assert 'echo "org.fabrikit.glibc $fabrikit_glibc" >> "${APPTAINER_LABELS' in text
    # %test exists and checks torch; the command builds to a temporary name next to the image.
    assert any(name == "test" and "import torch" in body for name, body in deffile.sections(text))
    assert str(out / "image.sif.def") in command and ".tmp-" in command
    assert _listing(out) == []  # a dry run writes nothing


@pytest.mark.parametrize("target", ALL_TARGETS, ids=lambda t: Path(t).stem)
def test_shell_sections_pass_shellcheck(target: str, tmp_path: Path):
    shellcheck = require_program("shellcheck", "apt-get install shellcheck")
    loaded = load_profile(target, is_path=target.endswith(".yaml"))
    plan = image_plan.plan_build(loaded, output=tmp_path / "x.sif")
    text = deffile.substitute_args(plan.definition, plan.effective_args)
    checked = 0
    for index, (name, body) in enumerate(deffile.sections(text)):
        if name not in SHELL_SECTIONS:
            continue
        script = tmp_path / f"{index:02d}-{name}.sh"
        script.write_text("#!/bin/sh\n" + body)
        result = subprocess.run([shellcheck, "-s", "sh", str(script)], capture_output=True, text=True)
        assert result.returncode == 0, f"%{name} of {target}:\n{result.stdout}"
        checked += 1
    assert checked >= 2  # at least %post and %test


def test_flavour_specifics():
    olivia = image_plan.plan_build(load_profile("olivia"), output=Path("/nonexistent/o.sif"), machine="aarch64")
    d = olivia.definition
    assert "From: nvcr.io/nvidia/pytorch:{{ NGC_TAG }}" in d
    assert "--with-libfabric=/opt/fabrikit/libfabric-build --with-cuda=/usr/local/cuda" in d
    assert "--prefix=/opt/aws-ofi-nccl" in d and "rm -rf /opt/amazon/aws-ofi-nccl" in d
    assert "libfabric-{{ LIBFABRIC_VERSION }}.tar.bz2" in d
    assert "unset NCCL_NET_PLUGIN" in d and "export NCCL_NET_PLUGIN" not in d
    for dest in ("/opt/libfabric/lib", "/opt/nccl", "/opt/fabrikit/hostlib", "/opt/nvidia/hpc_sdk/lib"):
        assert dest in d
    assert olivia.argv[olivia.argv.index("--arch") + 1] == "arm64"
    assert olivia.effective_args == {"NGC_TAG": "25.06-py3", "LIBFABRIC_VERSION": "1.22.0",
                                     "AWS_OFI_NCCL_VERSION": "1.14.2"}
    raven = image_plan.plan_build(load_profile("raven"), output=Path("/nonexistent/r.sif")).definition
    assert "libibverbs1 ibverbs-providers librdmacm1 ibverbs-utils" in raven and "aws-ofi-nccl" not in raven
    test = image_plan.plan_build(load_profile(str(TESTCLUSTER), is_path=True), output=Path("/nonexistent/t.sif"))
    assert "iproute2" in test.definition and "procps" in test.definition
    assert "--arch" not in test.argv  # debootstrap: no registry architecture to pick
    assert "/opt/wheels:/mnt/wheels:ro" in test.argv


def _environment(site: str, prelude: str, tmp_path: Path) -> str:
    """Run the %environment section of SITE's rendered definition in sh after PRELUDE."""
    plan = image_plan.plan_build(load_profile(site), output=tmp_path / f"{site}.sif")
    body = next(b for n, b in deffile.sections(plan.definition) if n == "environment")
    script = f"{prelude}\n{body}\n" 'echo "$LD_LIBRARY_PATH|${NCCL_NET_PLUGIN-unset}"\n'
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.parametrize("site, prelude, expected", [
    # slingshot.def: host libfabric first, NGC's EFA builds in /opt/amazon leave the path
    ("olivia", "LD_LIBRARY_PATH=/usr/local/cuda/lib64:/opt/amazon/efa/lib:/opt/hpcx/lib\nNCCL_NET_PLUGIN=spcx",
     "/opt/libfabric/lib:/opt/fabrikit/hostlib:/opt/aws-ofi-nccl/lib:/usr/local/cuda/lib64:/opt/hpcx/lib|unset"),
    ("olivia", "unset LD_LIBRARY_PATH", "/opt/libfabric/lib:/opt/fabrikit/hostlib:/opt/aws-ofi-nccl/lib|unset"),
    # rocm.def: host libfabric, then the RCCL plugin, then the image's ROCm
    ("lumi", "LD_LIBRARY_PATH=/opt/rocm/lib:/opt/aws-ofi-rccl/lib:/opt/libfabric/lib\nNCCL_NET_PLUGIN=x",
     "/opt/libfabric/lib:/opt/fabrikit/hostlib:/opt/aws-ofi-rccl/lib:/opt/rocm/lib|unset"),
])
def test_environment_puts_host_libfabric_and_the_plugin_first(site: str, prelude: str, expected: str,
                                                               tmp_path: Path):
    assert _environment(site, prelude, tmp_path) == expected


def test_rocm_flavour_specifics():
    lumi = image_plan.plan_build(load_profile("lumi"), output=Path("/nonexistent/l.sif"))
    d = lumi.definition
    assert "From: rocm/pytorch:{{ ROCM_PYTORCH_TAG }}" in d and "nvcr.io" not in d
    assert "--with-libfabric=/opt/fabrikit/libfabric-build --with-rocm=/opt/rocm" in d
    assert "--prefix=/opt/aws-ofi-rccl" in d and "--with-cuda" not in d
    assert "test -e /opt/aws-ofi-rccl/lib/librccl-net.so" in d and "torch.version.hip" in d
    assert lumi.labels[image_labels.LABEL_FLAVOUR] == "rocm" and lumi.flavour == "rocm"
    assert lumi.argv[0] == "singularity"  # LUMI provides SingularityCE (bindings/lumi.yaml)
    assert lumi.argv[lumi.argv.index("--arch") + 1] == "amd64"
    assert lumi.effective_args == {"ROCM_PYTORCH_TAG": "rocm6.4.1_ubuntu24.04_py3.12_pytorch_release_2.7.1",
                                   "LIBFABRIC_VERSION": "1.22.0", "AWS_OFI_NCCL_VERSION": "1.20.0"}
    # The template's own defaults are complete: a profile that names no arguments builds too.
    defaults = deffile.parse_arguments((containers_dir() / "rocm.def").read_text())
    assert set(deffile.arg_references((containers_dir() / "rocm.def").read_text())) == set(defaults)


@pytest.mark.parametrize("installed, expect", [
    (["librccl-net-ofi.so"], "librccl-net-ofi.so"),    # the name LUMI's images carry
    (["libnccl-net-ofi.so"], "libnccl-net-ofi.so"),
    (["librccl-net-ofi.so", "librccl-net.so"], None),   # already there: left alone
    ([], "error"),
])
def test_rocm_post_gives_rccl_its_plugin_name(installed: list[str], expect: str | None, tmp_path: Path):
    """The %post step that makes librccl-net.so exist, run for real in sh on a scratch dir."""
    plan = image_plan.plan_build(load_profile("lumi"), output=tmp_path / "l.sif")
    post = next(b for n, b in deffile.sections(plan.definition) if n == "post")
    start = post.index("    cd /opt/aws-ofi-rccl/lib")
    step = post[start:post.index("    # The build-only libfabric", start)]
    lib = tmp_path / "lib"
    lib.mkdir()
    for name in installed:
        (lib / name).write_text(name)
    result = subprocess.run(["sh", "-c", "set -eu\n" + step.replace("/opt/aws-ofi-rccl/lib", str(lib))],
                            capture_output=True, text=True)
    if expect == "error":
        assert result.returncode == 1 and "installed no RCCL plugin library" in result.stderr
        return
    assert result.returncode == 0, result.stderr
    link = lib / "librccl-net.so"
    if expect is None:
        assert not link.is_symlink() and link.read_text() == "librccl-net.so"
    else:
        assert link.is_symlink() and os.readlink(link) == expect


# --- hashing --------------------------------------------------------------------------------


def test_hash_is_stable_and_follows_build_args(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    loaded = load_profile(str(TESTCLUSTER), is_path=True)
    a = image_plan.plan_build(loaded, output=tmp_path / "t.sif", pid=1)
    b = image_plan.plan_build(loaded, output=tmp_path / "t.sif", pid=2)
    assert a.definition_sha256 == b.definition_sha256 and a.definition == b.definition
    c = image_plan.plan_build(loaded, output=tmp_path / "t.sif", cli_args={"TORCH_WHEEL": "torch-other.whl"})
    assert c.definition_sha256 != a.definition_sha256
    assert c.labels[image_labels.LABEL_HASH] == c.definition_sha256 and c.definition_sha256 in c.definition
    assert "--build-arg" in c.argv and "TORCH_WHEEL=torch-other.whl" in c.argv
    # A default overridden with its own value is the same image.
    d = image_plan.plan_build(loaded, output=tmp_path / "t.sif", cli_args={"DEBIAN_SUITE": "bookworm"})
    assert d.definition_sha256 == a.definition_sha256
    e = image_plan.plan_build(loaded, output=tmp_path / "t.sif", cli_args={"DEBIAN_SUITE": "trixie"})
    assert e.definition_sha256 != a.definition_sha256
    # A new fabrikit version alone does not invalidate images (it is a label, not an input).
    monkeypatch.setattr(image_plan, "__version__", "99.0")
    f = image_plan.plan_build(loaded, output=tmp_path / "t.sif")
    assert f.definition_sha256 == a.definition_sha256 and "org.fabrikit.version 99.0" in f.definition


def test_build_arg_values_with_commas_are_csv_quoted(tmp_path: Path):
    loaded = load_profile(str(TESTCLUSTER), is_path=True)
    plan = image_plan.plan_build(loaded, output=tmp_path / "t.sif", cli_args={"DEBIAN_MIRROR": "http://x/a,b"})
    assert '"DEBIAN_MIRROR=http://x/a,b"' in plan.argv


def test_apptainer_reference_rules():
    text = "a {{ X }} b {{Y}}\n    # skipped {{ Z }}\necho \"#!{{ W }}\"\n"
    assert deffile.arg_references(text) == ["X", "Y", "W"]
    assert deffile.substitute_args(text, {"X": "1", "Y": "2", "W": "3"}) == "a 1 b 2\n    # skipped {{ Z }}\necho \"#!3\"\n"
    assert deffile.parse_arguments("%arguments\n    A=1\n    B = two words\n    # C=3\n%post\n  D=4\n") == \
        {"A": "1", "B": "two words"}


# --- bad input: one line, exit 2, nothing written -----------------------------------------


def test_unknown_site():
    result = run_cli(["nosuchsite", "--dry-run"])
    assert result.exit_code == 2
    assert "unknown site 'nosuchsite'" in _one_error_line(result.stderr)


def test_site_and_profile_are_exclusive():
    result = run_cli([])
    assert result.exit_code == 2
    assert "exactly one of SITE or --profile" in _one_error_line(result.stderr)


def test_missing_template(tmp_path: Path, fake_path: Path):
    result = run_cli(["--profile", str(_profile(tmp_path, template="nosuch.def"))])
    assert result.exit_code == 2
    line = _one_error_line(result.stderr)
    assert "container.build.template" in line and "nosuch.def not found" in line and "test.def" in line
    assert _listing(tmp_path / "out") == []


def test_unbound_build_argument(tmp_path: Path, fake_path: Path):
    template = tmp_path / "mine.def"
    template.write_text("Bootstrap: docker\nFrom: debian:{{ TAG }}\n\n%post\n    echo {{ FLAVOR }}\n"
                        "\n%arguments\n    FLAVOR=plain\n")
    result = run_cli(["--profile", str(_profile(tmp_path, template=str(template)))])
    assert result.exit_code == 2
    line = _one_error_line(result.stderr)
    assert "{{ TAG }}" in line and "--build-arg TAG=VALUE" in line
    assert _listing(tmp_path / "out") == []
    ok = run_cli(["--profile", str(_profile(tmp_path, template=str(template))), "--build-arg", "TAG=12",
                  "--dry-run"])
    assert ok.exit_code == 0, ok.output
    assert "%labels\n    org.fabrikit.version" in ok.stdout  # appended: the template has no @LABELS@


def test_unknown_placeholder_in_a_template(tmp_path: Path):
    template = tmp_path / "mine.def"
    template.write_text("Bootstrap: docker\nFrom: debian:12\n\n%post\n    @NOPE@\n")
    result = run_cli(["--profile", str(_profile(tmp_path, template=str(template))), "--dry-run"])
    assert result.exit_code == 2
    assert "unknown placeholder @NOPE@" in _one_error_line(result.stderr)


def test_unused_build_argument(tmp_path: Path, fake_path: Path):
    result = run_cli(["--profile", str(_profile(tmp_path)), "--build-arg", "NOPE=1"])
    assert result.exit_code == 2
    assert "build argument NOPE is not used by test.def" in _one_error_line(result.stderr)
    assert _listing(tmp_path / "out") == []


def test_malformed_build_argument(tmp_path: Path):
    result = run_cli(["--profile", str(_profile(tmp_path)), "--build-arg", "no-equals"])
    assert result.exit_code == 2
    assert "KEY=VALUE" in _one_error_line(result.stderr)


def test_missing_apptainer_through_the_console_script(tmp_path: Path):
    script = require_program("build-image", INSTALL_HINT)
    empty = tmp_path / "emptybin"
    empty.mkdir()
    env = {**os.environ, "PATH": str(empty)}
    result = subprocess.run([script, "--profile", str(_profile(tmp_path))], capture_output=True, text=True,
                            env=env, timeout=60)
    assert result.returncode == 2, result.stderr
    line = _one_error_line(result.stderr)
    assert "apptainer not found on PATH" in line
    assert result.stdout == ""
    assert _listing(tmp_path / "out") == []


def test_too_old_apptainer(tmp_path: Path, fake_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("FAKE_APPTAINER_VERSION", "1.1.9")
    result = run_cli(["--profile", str(_profile(tmp_path))])
    assert result.exit_code == 2
    assert "needs apptainer >= 1.2" in _one_error_line(result.stderr)
    assert _listing(tmp_path / "out") == []


def test_unwritable_output_directory(tmp_path: Path, fake_path: Path):
    if os.geteuid() == 0:
        target = Path("/proc/fabrikit-build-test/image.sif")  # root can write anywhere else
    else:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o555)
        target = locked / "image.sif"
    result = run_cli(["--profile", str(_profile(tmp_path)), "--output", str(target)])
    assert result.exit_code == 2
    line = _one_error_line(result.stderr)
    assert "output directory" in line and str(target.parent) in line
    assert not target.parent.exists() or _listing(target.parent) == []


def test_architecture_mismatch_offers_submit(tmp_path: Path, fake_path: Path):
    other = "aarch64" if image_plan.host_arch(os.uname().machine) == "x86_64" else "x86_64"
    result = run_cli(["--profile", str(_profile(tmp_path, arch=other))])
    assert result.exit_code == 2
    line = _one_error_line(result.stderr)
    assert f"builds an {other} image" in line and "--submit" in line
    assert _listing(tmp_path / "out") == []


def test_not_enough_space_names_the_directory(tmp_path: Path, fake_path: Path):
    scratch = tmp_path / "scratch"
    profile = _profile(tmp_path, extra_build=f"tmpdir: {scratch}\n")
    profile.write_text(profile.read_text().replace("min_free_gb: 0.001", "min_free_gb: 1000000"))
    result = run_cli(["--profile", str(profile)])
    assert result.exit_code == 2
    line = _one_error_line(result.stderr)
    assert f"APPTAINER_TMPDIR {scratch}" in line and "GB free" in line and "1e+06 GB" in line
    assert _listing(tmp_path / "out") == [] and not scratch.exists()


def test_profile_without_container(tmp_path: Path):
    result = run_cli(["local", "--dry-run"])
    assert result.exit_code == 2
    assert "nothing to build" in _one_error_line(result.stderr)


# --- build, cache, failure, interruption against the fake apptainer -----------------------


def test_build_then_cache_hit_then_changed_arg(tmp_path: Path, fake_path: Path, monkeypatch: pytest.MonkeyPatch):
    argv_log = tmp_path / "argv.jsonl"
    monkeypatch.setenv("FAKE_ARGV_LOG", str(argv_log))
    profile = str(_profile(tmp_path))
    out = tmp_path / "out"
    first = run_cli(["--profile", profile])
    assert first.exit_code == 0, first.output
    assert "built " in first.stdout
    assert _listing(out) == ["mini.sif", "mini.sif.build.log", "mini.sif.def"]
    labels = json.loads((out / "mini.sif").read_text())
    assert labels[image_labels.LABEL_SITE] == "mini" and len(labels[image_labels.LABEL_HASH]) == 64
    log = (out / "mini.sif.build.log").read_text()
    assert "# command: apptainer build" in log and "INFO:    Build complete" in log
    # Progress (not a TTY here): section lines on stderr, not every line.
    assert "%post" in first.stderr and "+ apt-get update" not in first.stderr

    second = run_cli(["--profile", profile])
    assert second.exit_code == 0
    assert second.stdout.startswith("up to date: ") and "--force rebuilds" in second.stdout
    assert len(argv_log.read_text().splitlines()) == 1  # no second build

    dry = run_cli(["--profile", profile, "--dry-run"])
    assert "# image: up to date, would do nothing" in dry.stderr
    changed = run_cli(["--profile", profile, "--dry-run", "--build-arg", "TORCH_WHEEL=torch-9.whl"])
    assert "# image: would rebuild (" in changed.stderr
    forced = run_cli(["--profile", profile, "--force"])
    assert forced.exit_code == 0 and "built " in forced.stdout
    assert len(argv_log.read_text().splitlines()) == 2


def test_failed_build_leaves_no_image_and_says_where(tmp_path: Path, fake_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("FAKE_BUILD", "fail")
    result = run_cli(["--profile", str(_profile(tmp_path))])
    assert result.exit_code == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("build-image: error: build failed in %post at `python3 -m pip install nope`")
    assert "exit status 1" in last and "mini.sif.build.log" in last
    out = tmp_path / "out"
    assert _listing(out) == ["mini.sif.build.log", "mini.sif.def"]  # no image, no temp


def test_existing_image_keeps_serving_when_rebuild_fails(tmp_path: Path, fake_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch):
    profile = str(_profile(tmp_path))
    assert run_cli(["--profile", profile]).exit_code == 0
    before = (tmp_path / "out" / "mini.sif").read_text()
    monkeypatch.setenv("FAKE_BUILD", "fail")
    assert run_cli(["--profile", profile, "--force"]).exit_code == 1
    assert (tmp_path / "out" / "mini.sif").read_text() == before


def test_foreign_image_needs_force(tmp_path: Path, fake_path: Path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "mini.sif").write_text(json.dumps({"org.example": "someone else's"}))
    result = run_cli(["--profile", str(_profile(tmp_path))])
    assert result.exit_code == 2
    assert "not built by build-image" in _one_error_line(result.stderr) and "--force" in result.stderr
    assert run_cli(["--profile", str(_profile(tmp_path)), "--force"]).exit_code == 0


def test_sigterm_removes_the_temporary_image(tmp_path: Path, fake_bin: Path):
    script = require_program("build-image", INSTALL_HINT)
    env = {**os.environ, "PATH": f"{fake_bin}{os.pathsep}{os.environ['PATH']}", "FAKE_BUILD": "hang"}
    proc = subprocess.Popen([script, "--profile", str(_profile(tmp_path))], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    out = tmp_path / "out"
    wait_for(lambda: any(name.startswith("mini.sif.tmp-") for name in _listing(out)), 120, "the fake build")
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == "build-image: interrupted"
    assert _listing(out) == ["mini.sif.build.log", "mini.sif.def"]
    assert "# interrupted after" in (out / "mini.sif.build.log").read_text()


def _ignore_sigint() -> None:
    """What a CI runner or `cmd &` in a script does to its children: SIGINT inherited ignored."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize("inherited", ["default", "ignored"])
@pytest.mark.parametrize("target", ["group", "parent"])
def test_ctrl_c_removes_the_temporary_image(tmp_path: Path, fake_bin: Path, inherited: str, target: str):
    """Ctrl-C on a terminal is SIGINT to the whole foreground process group (`group`): the fake
    Apptainer, like the real one, then exits 1 at once, maybe before build-image has looked.
    `kill -INT` reaches build-image alone (`parent`): it has to stop Apptainer itself. Either
    way, also when SIGINT was inherited ignored (as under a CI runner), the answer is
    "interrupted", exit 130, and no temporary image."""
    script = require_program("build-image", INSTALL_HINT)
    env = {**os.environ, "PATH": f"{fake_bin}{os.pathsep}{os.environ['PATH']}", "FAKE_BUILD": "hang"}
    proc = subprocess.Popen([script, "--profile", str(_profile(tmp_path))], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True,
                            preexec_fn=_ignore_sigint if inherited == "ignored" else None)
    out = tmp_path / "out"
    log = out / "mini.sif.build.log"
    wait_for(lambda: "+ sleep 60" in (log.read_text() if log.exists() else ""), 60, "the fake build's sleep")
    if target == "group":
        os.killpg(proc.pid, signal.SIGINT)
    else:
        os.kill(proc.pid, signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == "build-image: interrupted"
    assert _listing(out) == ["mini.sif.build.log", "mini.sif.def"]
    assert "# interrupted after" in log.read_text()


def test_submit_writes_a_batch_script(tmp_path: Path, fake_path: Path):
    other = "aarch64" if image_plan.host_arch(os.uname().machine) == "x86_64" else "x86_64"
    profile = _profile(tmp_path, arch=other)
    profile.write_text(profile.read_text() + "scheduler:\n  partition: debug\n  cpus_per_task: 16\n")
    result = run_cli(["--profile", str(profile), "--submit"])
    assert result.exit_code == 0, result.output
    out = tmp_path / "out"
    assert "submitted build job 4242" in result.stdout
    assert f"log: {out}/mini.sif.build-4242.log" in result.stdout
    script = (out / "mini.sif.build.sbatch").read_text()
    assert "#SBATCH --partition=debug" in script and "#SBATCH --cpus-per-task=16" in script
    assert f'!= {other} ]' in script
    assert "apptainer build" in script and str(out / "mini.sif.def") in script and 'mv -f "$tmp"' in script
    subprocess.run(["bash", "-n", str(out / "mini.sif.build.sbatch")], check=True)
    check = subprocess.run([require_program("shellcheck", "apt-get install shellcheck"),
                            str(out / "mini.sif.build.sbatch")], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout
    argv = (out / "mini.sif.build.sbatch.argv").read_text()
    assert "--parsable" in argv and f"--output={out}/mini.sif.build-%j.log" in argv
    assert (out / "mini.sif.def").is_file() and not (out / "mini.sif").exists()


# --- progress -------------------------------------------------------------------------------


def test_progress_sections_and_steps():
    import io

    buf = io.StringIO()
    p = image_build.Progress(buf, tty=True, agent="debootstrap")
    for line in ["INFO:    Starting build...", "I: Retrieving InRelease", "INFO:    Running post scriptlet",
                 "+ apt-get update", "++ nested", "Get:1 http://deb.debian.org bookworm InRelease",
                 "FATAL:   While performing build: exit status 100"]:
        p.feed(line)
    text = buf.getvalue()
    assert "bootstrap] I: Retrieving InRelease" in text and "%post    ] Get:1" in text
    assert p.failure(255, Path("/x.log")) == ("build failed in %post at `apt-get update` (exit 255): "
                                              "FATAL: While performing build: exit status 100; full log: /x.log")
