#!/usr/bin/env bash
# ci-install.sh - everything fabrikit's CI needs on a FRESH Debian 12 (bookworm, amd64) machine, as root:
#   1. apt packages: the real Slurm test cluster (tests/cluster/slurm-netns.sh), shellcheck, libfabric,
#      busybox-static (tiny test images), debootstrap (image builds)
#   2. Apptainer (tools/install-apptainer.sh: sid's build on a private glibc)
#   3. torch==2.13.0 (pinned; the CPU wheel from $TORCH_WHEEL_DIR) and numpy
#   4. fabrikit itself: pip install -e '.[test]'
# Idempotent, and fast when everything is already there (no apt-get update then). Prints step timings.
#
# Knobs: TORCH_VERSION (2.13.0), TORCH_WHEEL_DIR (/opt/wheels), SKIP_APPTAINER=1, APPTAINER_DEB=...
# (passed on to install-apptainer.sh), APT_UPDATE=1 (force apt-get update).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TORCH_VERSION=${TORCH_VERSION:-2.13.0}
TORCH_WHEEL_DIR=${TORCH_WHEEL_DIR:-/opt/wheels}
APT_PKGS=(
  slurmctld slurmd slurm-client munge   # the test cluster: real slurmctld + one slurmd per node netns
  iproute2 util-linux hostname procps   # ip netns/veth/bridge; unshare, nsenter, setsid; hostname
  iptables                              # FORWARD accept rule on Docker-style hosts (br_netfilter)
  shellcheck
  libfabric1 libfabric-bin              # libfabric.so.1 + fi_info for bindings/doctor tests
  busybox-static                        # tiny busybox SIF for "apptainer in the nodes" tests
  debootstrap                           # Bootstrap: debootstrap image builds
  ca-certificates
)
export DEBIAN_FRONTEND=noninteractive

T_ALL=$(date +%s.%N)
log() { printf '[ci-install %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }
TIMINGS=()
step() { # step NAME CMD... : run and time one step
  local name=$1 t0; shift
  t0=$(date +%s.%N)
  log "== $name"
  "$@"
  TIMINGS+=("$(printf '%-28s %6s s' "$name" "$(since "$t0")")")
  log "== $name: done in $(since "$t0") s"
}

[ "$(id -u)" = 0 ] || die "must run as root (apt, Apptainer, network namespaces)"

# ------------------------------------------------------------------ 1. apt
apt_missing() { # prints the packages of APT_PKGS that are not installed
  local p st
  for p in "${APT_PKGS[@]}"; do
    st=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
    [ "${st:0:2}" = ii ] || echo "$p"
  done
}
apt_step() {
  local missing
  mapfile -t missing < <(apt_missing)
  if [ ${#missing[@]} -eq 0 ] && [ "${APT_UPDATE:-0}" != 1 ]; then
    log "all apt packages already installed"
    return 0
  fi
  log "apt-get update; installing: ${missing[*]:-${APT_PKGS[*]}}"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${APT_PKGS[@]}" >/dev/null
  mapfile -t missing < <(apt_missing)
  [ ${#missing[@]} -eq 0 ] || die "still not installed: ${missing[*]}"
}

# ------------------------------------------------------------------ 2. Apptainer
apptainer_step() {
  if [ "${SKIP_APPTAINER:-0}" = 1 ]; then log "SKIP_APPTAINER=1"; return 0; fi
  "$ROOT/tools/install-apptainer.sh"
}

# ------------------------------------------------------------------ 3./4. Python
PIP_EXTRA=()
PY_READY=0
python_setup() {
  [ "$PY_READY" = 0 ] || return 0
  PY_READY=1
  command -v python3 >/dev/null || die "python3 not found"
  if ! python3 -m pip --version >/dev/null 2>&1; then
    log "installing python3-pip"
    apt-get install -y -qq --no-install-recommends python3-pip >/dev/null ||
      { apt-get update -qq && apt-get install -y -qq --no-install-recommends python3-pip >/dev/null; }
  fi
  # Debian's own python3 is "externally managed" (PEP 668); CI owns this machine, so install anyway
  if python3 -c 'import os, sysconfig, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")))'; then
    PIP_EXTRA+=(--break-system-packages)
  fi
  if [ -d "$TORCH_WHEEL_DIR" ]; then PIP_EXTRA+=(--find-links "$TORCH_WHEEL_DIR"); fi
}

torch_ok() { # installed (package metadata, fast) with the pinned version; IMPORT=1 also imports it
  IMPORT=${IMPORT:-0} python3 - "$TORCH_VERSION" <<'EOF' 2>/dev/null
import os, sys
from importlib.metadata import version
version("numpy")
ok = version("torch").split("+")[0] == sys.argv[1]
if ok and os.environ["IMPORT"] == "1":
    import numpy, torch
sys.exit(0 if ok else 1)
EOF
}
torch_step() {
  python_setup
  if torch_ok; then
    log "torch $TORCH_VERSION and numpy already installed"
    return 0
  fi
  if ! ls "$TORCH_WHEEL_DIR"/torch-"$TORCH_VERSION"+cpu-*.whl >/dev/null 2>&1; then
    log "WARNING: no torch-$TORCH_VERSION+cpu wheel in $TORCH_WHEEL_DIR; pip may pick a (huge) CUDA build"
  fi
  # always pinned: never let pip choose a torch version
  python3 -m pip install -q "${PIP_EXTRA[@]}" "torch==$TORCH_VERSION" numpy
  IMPORT=1 torch_ok || die "torch $TORCH_VERSION + numpy not importable after pip install"
  log "installed torch $(python3 -c 'import torch; print(torch.__version__)')"
}

fabrikit_current() { # fabrikit installed editable from $ROOT, pyproject's deps/scripts satisfied, data mapped
  (cd / && python3 - "$ROOT") <<'EOF' 2>/dev/null  # not from $ROOT: its fabrikit.egg-info would shadow the install
import json, sys, tomllib
from importlib.metadata import distribution, version
from pathlib import Path
from packaging.requirements import Requirement
root = Path(sys.argv[1]).resolve()
dist = distribution("fabrikit")
url = json.loads(dist.read_text("direct_url.json") or "{}")
assert url.get("dir_info", {}).get("editable") and url.get("url") == root.as_uri()
proj = tomllib.loads((root / "pyproject.toml").read_text())["project"]
assert dist.version == proj["version"]
for r in map(Requirement, proj.get("dependencies", []) + proj.get("optional-dependencies", {}).get("test", [])):
    if r.marker is None or r.marker.evaluate():
        assert r.specifier.contains(version(r.name), prereleases=True), r
scripts = {e.name: e.value for e in dist.entry_points if e.group == "console_scripts"}
assert scripts == proj.get("scripts", {}), scripts
# the bundled data (bindings/, containers/, jobs/) reached through the editable mapping, from this checkout
from runner.resources import data_locations
assert all(path.is_relative_to(root) for path in data_locations().values())
EOF
}

fabrikit_step() {
  python_setup
  if fabrikit_current; then
    log "fabrikit already installed (editable from $ROOT) with all of pyproject's [test] dependencies"
    return 0
  fi
  # constrain torch so resolving '.[test]' (torch>=2.1) can never move it off the pinned version
  local cons; cons=$(mktemp)
  echo "torch==$TORCH_VERSION" >"$cons"
  (cd "$ROOT" && python3 -m pip install -q "${PIP_EXTRA[@]}" -c "$cons" -e '.[test]')
  rm -f "$cons"
  (cd / && python3 -c 'import runner') || die "fabrikit (package runner) not importable after pip install -e"
}

step "apt packages" apt_step
step "apptainer" apptainer_step
step "torch==$TORCH_VERSION + numpy" torch_step
step "pip install -e .[test]" fabrikit_step

log "timings:"
printf '  %s\n' "${TIMINGS[@]}" >&2
log "ci-install done in $(since "$T_ALL") s"
