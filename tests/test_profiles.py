"""Site profiles: lookup order, `extends`, and strict validation with file:line errors."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from runner.errors import UserError
from runner.profile_loader import list_sites, load_profile
from tests.helpers import cli, one_line_error

BUNDLED = ["olivia", "raven", "gilbreth", "ethernet", "local", "lumi", "alps", "leonardo"]

MINIMAL = """\
description: a test cluster
fabric:
  kind: ethernet
container:
  runtime: apptainer
  image: /images/x.sif
scheduler:
  partition: debug
  gpus_per_node: 2
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


@pytest.mark.parametrize("site", BUNDLED)
def test_bundled_profiles_load(site: str) -> None:
    loaded = load_profile(site)
    assert loaded.profile.description
    assert loaded.name == site


def test_olivia_resolves_preset_and_overrides() -> None:
    p = load_profile("olivia").profile
    assert p.fabric.kind == "slingshot"  # from presets/slingshot.yaml
    assert p.env["NCCL_NET"] == "AWS Libfabric"  # inherited
    assert p.env["NCCL_SOCKET_IFNAME"] == "hsn0,hsn1,hsn2,hsn3"  # overridden by the site
    assert p.env["NCCL_PROTO"] == "^LL128"  # the GH200 guard
    assert p.scheduler.partition == "accel" and p.scheduler.gpus_per_node == 4
    assert p.scheduler.cpus_per_task == 72 and p.scheduler.mem == "440G"
    assert not any(b.source == "/usr/lib64" for b in p.binds), "never bind the whole /usr/lib64"
    assert any(b.source == "/usr/lib64/libcxi.so.1" for b in p.binds)


def test_lumi_is_a_rocm_site_with_per_gcd_cpu_masks() -> None:
    p = load_profile("lumi").profile
    assert p.fabric.kind == "slingshot" and p.container.gpu_flag == "--rocm"
    assert p.container.runtime == "singularity" and p.container.build.flavour == "rocm"
    assert p.scheduler.gpus_per_node == 8 == len(p.launcher.cpu_bind_masks)
    # Eight disjoint masks of 7 cores each (one core per CCD is reserved on LUMI-G).
    cores = [{bit for bit in range(64) if int(mask, 16) >> bit & 1} for mask in p.launcher.cpu_bind_masks]
    assert all(len(c) == 7 for c in cores) and len(set().union(*cores)) == 56
    assert p.env["NCCL_SOCKET_IFNAME"] == "hsn0,hsn1,hsn2,hsn3"
    assert p.library_path[-1] == "/opt/aws-ofi-rccl/lib"  # replaces the preset's CUDA plugin path
    assert not any(b.source in ("/usr/lib64", "/opt/cray") for b in p.binds)


def test_every_site_fact_has_a_source_comment() -> None:
    """Each bundled site file cites sources: a comment on most value lines."""
    root = Path(__file__).resolve().parent.parent / "bindings"
    for path in [*root.glob("*.yaml"), *root.glob("presets/*.yaml")]:
        text = path.read_text()
        assert text.lstrip().startswith("#"), f"{path.name}: no header comment naming its sources"
        assert "#" in text.split("\n", 3)[-1], path.name


def test_lookup_order_env_then_user_then_bundled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    write(first, "olivia.yaml", MINIMAL.replace("a test cluster", "from dir a"))
    write(second, "olivia.yaml", MINIMAL.replace("a test cluster", "from dir b"))
    home = tmp_path / "home"
    write(home / ".config/fabrikit/bindings", "mysite.yaml", MINIMAL.replace("a test cluster", "from home"))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("FABRIKIT_SITES", f"{first}:{second}")
    assert load_profile("olivia").profile.description == "from dir a"
    assert load_profile("mysite").profile.description == "from home"
    assert load_profile("raven").path.parent.name == "bindings"  # bundled last
    assert list_sites()["olivia"] == first / "olivia.yaml"


def test_extends_null_deletes_inherited_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "mine.yaml", """\
        extends: olivia
        description: olivia without NCCL_NET
        env:
          NCCL_NET: null
        scheduler:
          partition: accel-short
        """)
    monkeypatch.setenv("FABRIKIT_SITES", str(tmp_path))
    p = load_profile("mine").profile
    assert "NCCL_NET" not in p.env
    assert p.env["FI_PROVIDER"] == "cxi"
    assert p.scheduler.partition == "accel-short" and p.scheduler.mem == "440G"


# Each case: profile text, expected line number, expected fragments of the message.
BAD = {
    "unknown top-level key": ("description: x\nfabric: {kind: ethernet}\nschedular: {}\n", 3,
                              ["schedular", "unknown key", "did you mean 'scheduler'"]),
    "unknown nested key": (MINIMAL + "  partiton: x\n", 10, ["scheduler.partiton", "did you mean 'partition'"]),
    "wrong type": (MINIMAL.replace("gpus_per_node: 2", "gpus_per_node: four"), 9,
                   ["scheduler.gpus_per_node", "Expected `int`, got `str`"]),
    "negative count": (MINIMAL.replace("gpus_per_node: 2", "gpus_per_node: -1"), 9,
                       ["scheduler.gpus_per_node", ">= 0", "-1"]),
    "malformed memory": (MINIMAL + "  mem: 440 GB\n", 10, ["scheduler.mem", "malformed memory", "440 GB"]),
    "malformed time": (MINIMAL + "  time: 2h\n", 10, ["scheduler.time", "malformed time", "2h"]),
    "relative image path": (MINIMAL.replace("/images/x.sif", "images/x.sif"), 6,
                            ["container.image", "absolute path"]),
    "relative bind source": (MINIMAL + "binds:\n  - source: lib/libcxi.so.1\n", 11,
                             ["binds[0].source", "absolute path"]),
    "missing required field": ("description: x\ncontainer: {runtime: none}\n", 1, ["fabric", "required field is missing"]),
    "missing nested field": ("description: x\nfabric: {check_transport: true}\n", 2, ["fabric.kind", "required"]),
    "bad enum": (MINIMAL.replace("kind: ethernet", "kind: slingshot11"), 3, ["fabric.kind", "slingshot11"]),
    "env mapping": (MINIMAL + "env:\n  NCCL_DEBUG: {a: 1}\n", 11, ["env.NCCL_DEBUG", "expected a string"]),
    "unquoted number in a list": (MINIMAL + "job:\n  args: [--lr, 0.10]\n", 11, ["job.args[1]", "quote it"]),
    "env bad name": (MINIMAL + "env:\n  1BAD: x\n", 11, ["env.1BAD", "environment variable"]),
    "image needed": ("description: x\nfabric: {kind: ethernet}\ncontainer:\n  runtime: apptainer\n", 3,
                     ["container", "needs `image`"]),
    "invalid yaml": ("description: x\nfabric: [unclosed\n", 3, ["invalid YAML"]),
    "duplicate key": (MINIMAL + "description: again\n", 10, ["description", "duplicate key"]),
    "not a mapping": ("- a\n- b\n", 1, ["must be a mapping"]),
    "unknown preset": ("extends: nosuchpreset\n" + MINIMAL, 1, ["extends", "nosuchpreset"]),
    "bad bind list item": (MINIMAL + "binds:\n  - /usr/lib64\n", 11, ["binds[0]", "Expected `object`"]),
    "bad cpu mask": (MINIMAL + "launcher:\n  cpu_bind_masks: [\"0xfe\", \"fe00\"]\n", 11,
                     ["launcher.cpu_bind_masks[1]", "hexadecimal CPU mask", "fe00"]),
    "bad flavour": (MINIMAL.replace("  image: /images/x.sif\n", "  image: /images/x.sif\n  build:\n"
                                    "    template: rocm.def\n    flavour: cuda\n"), 9,
                    ["container.build.flavour", "cuda"]),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_profile_is_one_line_with_file_line_field(case: str, tmp_path: Path) -> None:
    text, line, fragments = BAD[case]
    path = write(tmp_path, "bad.yaml", text)
    with pytest.raises(UserError) as info:
        load_profile(str(path), is_path=True)
    message = str(info.value)
    assert message.startswith(f"{path}:{line}:"), message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    assert "\n" not in message


def test_env_and_build_args_keep_the_text_as_written(tmp_path: Path) -> None:
    """YAML 1.1 would retype these (010 -> 8, 1:30 -> 90, 1.10 -> 1.1, yes -> True)."""
    path = write(tmp_path, "typed.yaml", """\
        description: typed values
        fabric: {kind: ethernet}
        env:
          OCTAL: 010
          SEXAGESIMAL: 1:30
          FLOAT: 1.10
          BOOL: yes
          DATE: 2024-01-01
          QUOTED: '1.10'
          DROPPED: ~
        container:
          runtime: apptainer
          image: /images/x.sif
          build: {template: test.def, flavour: test, args: {LIBFABRIC_VERSION: 1.20}}
        """)
    p = load_profile(str(path), is_path=True).profile
    assert p.env == {"OCTAL": "010", "SEXAGESIMAL": "1:30", "FLOAT": "1.10", "BOOL": "yes", "DATE": "2024-01-01",
                     "QUOTED": "1.10"}
    assert p.container.build.args == {"LIBFABRIC_VERSION": "1.20"}


def test_extends_cycle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "a.yaml", "extends: b\n" + MINIMAL)
    write(tmp_path, "b.yaml", "extends: a\n" + MINIMAL)
    monkeypatch.setenv("FABRIKIT_SITES", str(tmp_path))
    with pytest.raises(UserError, match="cycle"):
        load_profile("a")


@pytest.mark.parametrize("case", ["unknown nested key", "malformed memory", "relative image path", "invalid yaml"])
def test_bad_profile_through_the_real_cli(case: str, tmp_path: Path) -> None:
    text, line, fragments = BAD[case]
    path = write(tmp_path, "bad.yaml", text)
    message = one_line_error(cli("--profile", str(path), "--nodes", "2", "--dry-run"))
    assert f"{path}:{line}:" in message and fragments[0] in message


@pytest.mark.parametrize("name", ["../etc/passwd", "Olivia", "-x", "a b", ""])
def test_bad_site_names_refused(name: str) -> None:
    message = one_line_error(cli("--site", name, "--nodes", "2", "--dry-run"))
    assert "not a valid site name" in message


def test_unknown_site_suggests() -> None:
    message = one_line_error(cli("--site", "olivai", "--nodes", "2", "--dry-run"))
    assert "unknown site 'olivai'" in message and "did you mean 'olivia'" in message


def test_sites_lists_and_shows() -> None:
    listing = cli("sites", prog="fabrikit")
    assert listing.returncode == 0, listing.stderr
    for site in BUNDLED:
        assert any(line.startswith(site + " ") for line in listing.stdout.splitlines()), listing.stdout
    assert "slingshot" not in [line.split()[0] for line in listing.stdout.splitlines() if line.strip()], \
        "presets are not sites"
    shown = cli("sites", "show", "olivia", prog="fabrikit")
    assert shown.returncode == 0, shown.stderr
    import yaml

    data = yaml.safe_load(shown.stdout)
    assert data["fabric"]["kind"] == "slingshot" and data["env"]["NCCL_PROTO"] == "^LL128"
    assert "presets/slingshot.yaml" in shown.stdout.splitlines()[0]
