#!/usr/bin/env bash
# Ported from the proven recipe shared/recipes/apptainer/install-apptainer.sh (see its README); adapted
# for fabrikit CI: accepts any apptainer >= 1.2 (fabrikit needs {{ }} build args) instead of one exact
# version, explains clearly what is missing when Debian sid moves on, and verifies the result with
# `apptainer version` plus an `apptainer exec` of a tiny busybox sandbox.
#
# install-apptainer.sh -- install a REAL Apptainer on Debian 12 "bookworm" (amd64),
# using nothing but Debian's own package archive (deb.debian.org).
#
# How it works:
#   * bookworm has no apptainer package; sid has one (1.4.5-2 when this was written), built against
#     glibc >= 2.38.
#   * We download sid's apptainer .deb and sid's libc6 .deb with a *private* apt configuration
#     (the system's sources.list, lists, cache and pins are not touched),
#   * unpack sid's glibc into a private prefix ($PRIVLIBC_PREFIX, default /opt/apptainer-sid) that is
#     NOT in ld.so.conf, so nothing else on the system sees it,
#   * point the ELF interpreter + DT_RPATH of apptainer's executables (/usr/bin/apptainer,
#     .../apptainer/bin/starter) at that private glibc with patchelf,
#   * rebuild offsetpreload.so (LD_PRELOADed into the *host's* fuse2fs) against bookworm's glibc
#     when a C compiler is available,
#   * repack everything as a local .deb (version suffix $LOCAL_SUFFIX, libc6 (>= 2.38) relaxed) and
#     install it with apt, so bookworm's squashfs-tools, uidmap, libseccomp2, ... come in as real
#     dependencies and dpkg owns every file (uninstall: apt-get purge apptainer).
#   * Runtime config (also on re-runs): fakeroot mapping for root; if the capability bounding set is
#     incomplete (sandboxes that strip CAP_SYS_RESOURCE), "root default capabilities = file" with the
#     available caps for root -- otherwise every root `apptainer exec` fails with
#     "Requesting capability set ... while permitted capability set is ...".
#
# Idempotent: when a working apptainer >= 1.2 is already installed, only the runtime config and the
# verification run (< 1 s). FORCE=1 rebuilds and reinstalls from sid.
#
# Environment knobs (all optional):
#   APPTAINER_DEB=/path/apptainer_*+bookworm.privlibc1_amd64.deb
#                               install a .deb this script built earlier (e.g. a CI cache) instead of
#                               downloading from sid. sid only carries its current version, so caching
#                               the built .deb (printed at the end, in $WORKDIR) is how to pin a version.
#   APPTAINER_VERSION=          require this exact sid version (fails once sid moves on); default: any
#   MIN_VERSION=1.2             oldest acceptable upstream apptainer version
#   APPTAINER_SUITE=sid         suite to take apptainer from
#   LIBC_SUITE=$APPTAINER_SUITE suite to take the private glibc from (trixie also worked with 1.4.5)
#   DEBIAN_MIRROR=http://deb.debian.org/debian
#   PRIVLIBC_PREFIX=/opt/apptainer-sid
#   WORKDIR=/tmp/apptainer-sid  downloads, private apt state, staging tree, the built .deb
#   LOCAL_SUFFIX=+bookworm.privlibc1
#   WITH_EXTRAS=1               also install debootstrap, fuse2fs, squashfuse, fuse-overlayfs
#   REBUILD_OFFSETPRELOAD=auto  auto|yes|no (needs cc; fetches apptainer's source package)
#   ADAPT_CAPS=auto             auto|yes|no (see above)
#   SYSTEMD_CGROUPS=keep        keep|no|yes.  keep = Debian's "systemd cgroups = yes".  "no" makes
#                               --memory/instance stats work without systemd, BUT then `instance start`
#                               and limits fail inside `ip netns exec` (the test cluster's nodes).
#   FAKEROOT_ROOT=1             add a subuid/subgid range for root so `build --fakeroot` works as root
#   BUILD_ONLY=0               1: download + repack the .deb into $WORKDIR (e.g. to fill a CI cache), no install
#   FORCE=0
set -euo pipefail

: "${APPTAINER_VERSION:=}"
: "${MIN_VERSION:=1.2}"
: "${APPTAINER_SUITE:=sid}"
: "${LIBC_SUITE:=$APPTAINER_SUITE}"
: "${DEBIAN_MIRROR:=http://deb.debian.org/debian}"
: "${PRIVLIBC_PREFIX:=/opt/apptainer-sid}"
: "${WORKDIR:=/tmp/apptainer-sid}"
: "${LOCAL_SUFFIX:=+bookworm.privlibc1}"
: "${WITH_EXTRAS:=1}"
: "${REBUILD_OFFSETPRELOAD:=auto}"
: "${ADAPT_CAPS:=auto}"
: "${FAKEROOT_ROOT:=1}"
: "${SYSTEMD_CGROUPS:=keep}"
: "${APPTAINER_DEB:=}"
: "${FORCE:=0}"
: "${BUILD_ONLY:=0}"

export DEBIAN_FRONTEND=noninteractive
MULTIARCH=x86_64-linux-gnu
PRIV_LIBDIR="$PRIVLIBC_PREFIX/usr/lib/$MULTIARCH"
PRIV_LD="$PRIV_LIBDIR/ld-linux-x86-64.so.2"
T0=$(date +%s.%N)

log()  { printf '[install-apptainer] %s\n' "$*" >&2; }
die()  { log "ERROR: $*"; exit 1; }
elapsed() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }
PIN_HINT="To pin a known-good build: cache the .deb this script built on a good day
  ($WORKDIR/apptainer_<version>${LOCAL_SUFFIX}_amd64.deb, printed at the end of a successful run)
  and run: APPTAINER_DEB=/path/to/that.deb $0"

# ---------------------------------------------------------------- sanity checks
[ "$(id -u)" = 0 ] || die "must run as root"
if ! command -v dpkg >/dev/null || ! command -v apt-get >/dev/null; then die "needs a Debian system (dpkg, apt-get)"; fi
[ "$(dpkg --print-architecture)" = amd64 ] || die "only amd64 is supported"
# shellcheck source=/dev/null
. /etc/os-release
[ "${VERSION_CODENAME:-}" = bookworm ] || log "WARNING: written for bookworm, this is ${VERSION_CODENAME:-unknown}"

upstream_version() { # "1.4.5-2+bookworm.privlibc1" / "1:1.4.5-2" / "1.4.5" -> "1.4.5"
  sed -E 's/^[0-9]+://; s/-[^-]*$//' <<<"$1"
}
version_ok() { dpkg --compare-versions "$(upstream_version "$1")" ge "$MIN_VERSION"; }

# ---------------------------------------------------------------- runtime configuration (also on re-runs)
CAP_NAMES=(CAP_CHOWN CAP_DAC_OVERRIDE CAP_DAC_READ_SEARCH CAP_FOWNER CAP_FSETID CAP_KILL CAP_SETGID
  CAP_SETUID CAP_SETPCAP CAP_LINUX_IMMUTABLE CAP_NET_BIND_SERVICE CAP_NET_BROADCAST CAP_NET_ADMIN
  CAP_NET_RAW CAP_IPC_LOCK CAP_IPC_OWNER CAP_SYS_MODULE CAP_SYS_RAWIO CAP_SYS_CHROOT CAP_SYS_PTRACE
  CAP_SYS_PACCT CAP_SYS_ADMIN CAP_SYS_BOOT CAP_SYS_NICE CAP_SYS_RESOURCE CAP_SYS_TIME
  CAP_SYS_TTY_CONFIG CAP_MKNOD CAP_LEASE CAP_AUDIT_WRITE CAP_AUDIT_CONTROL CAP_SETFCAP
  CAP_MAC_OVERRIDE CAP_MAC_ADMIN CAP_SYSLOG CAP_WAKE_ALARM CAP_BLOCK_SUSPEND CAP_AUDIT_READ
  CAP_PERFMON CAP_BPF CAP_CHECKPOINT_RESTORE)

configure_runtime() {
  local conf
  conf="$(apptainer buildcfg 2>/dev/null | sed -n 's/^APPTAINER_CONF_FILE=//p')"
  [ -n "$conf" ] || conf=/etc/apptainer/apptainer.conf
  [ -f "$conf" ] || die "apptainer config file $conf not found"
  if [ "$FAKEROOT_ROOT" = 1 ]; then
    # idempotent; writes "0:4294836224:65536" style entries to /etc/subuid and /etc/subgid
    apptainer config fakeroot --add root
  fi
  local sdc="$SYSTEMD_CGROUPS"
  if [ "$sdc" != keep ] && ! grep -q "^systemd cgroups = $sdc\$" "$conf"; then
    log "$conf: 'systemd cgroups = $sdc'"
    sed -i -E "s/^[#[:space:]]*systemd cgroups[[:space:]]*=.*/systemd cgroups = $sdc/" "$conf"
  fi
  [ "$ADAPT_CAPS" = no ] && return 0
  local last bnd prm have i avail=() missing=()
  last="$(cat /proc/sys/kernel/cap_last_cap)"
  bnd="$(awk '/^CapBnd:/{print $2}' /proc/self/status)"
  prm="$(awk '/^CapPrm:/{print $2}' /proc/self/status)"
  have=$(( 0x$bnd & 0x$prm ))
  for ((i = 0; i <= last && i < ${#CAP_NAMES[@]}; i++)); do
    if (( (have >> i) & 1 )); then avail+=("${CAP_NAMES[$i]}"); else missing+=("${CAP_NAMES[$i]}"); fi
  done
  if [ "${#missing[@]}" = 0 ] && [ "$ADAPT_CAPS" != yes ]; then
    log "capability bounding set is complete; keeping 'root default capabilities' as configured"
    return 0
  fi
  log "capabilities missing on this machine: ${missing[*]:-none}"
  log "-> $conf: 'root default capabilities = file', capability.json: root gets the ${#avail[@]} available caps"
  sed -i -E 's/^[#[:space:]]*root default capabilities[[:space:]]*=.*/root default capabilities = file/' "$conf"
  grep -q '^root default capabilities = file' "$conf" || echo 'root default capabilities = file' >> "$conf"
  local IFS=,
  apptainer capability add --user root "${avail[*]}" 2>/dev/null
  [ "${#missing[@]}" = 0 ] || apptainer capability drop --user root "${missing[*]}" 2>/dev/null || true
}

# `apptainer version` + `apptainer exec` of a tiny busybox sandbox (no image download, ~0.2 s)
verify() {
  local out v bb sb
  hash -r
  if ! out="$(apptainer version 2>&1)"; then
    case "$out" in
      *GLIBC_*|*"version \`"*)
        die "apptainer does not run: glibc symbol mismatch:
  $out
  The binaries need a newer glibc than the private one in $PRIVLIBC_PREFIX ($LIBC_SUITE).
  Retry with FORCE=1 LIBC_SUITE=$APPTAINER_SUITE (sid's libc always matches sid's apptainer).
  $PIN_HINT" ;;
      *"error while loading shared libraries"*)
        die "apptainer does not run: a shared library is missing on this system:
  $out
  sid's apptainer now needs a library (or soname) that bookworm does not ship.
  $PIN_HINT" ;;
      *) die "apptainer does not run: $out" ;;
    esac
  fi
  v="$(tail -n1 <<<"$out")"
  version_ok "$v" || die "apptainer $v is older than $MIN_VERSION (fabrikit needs {{ }} build args)"
  bb="$(command -v busybox || true)"
  [ -n "$bb" ] || die "busybox not found for the exec self-check (apt-get install busybox-static)"
  sb="$(mktemp -d /tmp/apptainer-verify.XXXXXX)"
  mkdir -p "$sb/bin" "$sb/etc" "$sb/tmp" "$sb/root"
  cp "$bb" "$sb/bin/busybox"
  ln -s busybox "$sb/bin/sh"
  echo 'root:x:0:0:root:/root:/bin/sh' >"$sb/etc/passwd"
  echo 'root:x:0:' >"$sb/etc/group"
  if ! out="$(apptainer -q exec "$sb" /bin/sh -c 'echo apptainer-exec-ok' 2>&1)" ||
     ! grep -x apptainer-exec-ok >/dev/null <<<"$out"; then
    rm -rf "$sb"
    die "apptainer $v is installed but 'apptainer exec <busybox sandbox>' fails:
  $out
  (capability errors: re-run this script in the environment the tests use; it adapts apptainer.conf)"
  fi
  rm -rf "$sb"
  log "verified: apptainer $v runs and 'apptainer exec' of a busybox sandbox works ($(elapsed) s)"
}

# ---------------------------------------------------------------- already installed?
installed_version() { dpkg-query -W -f='${db:Status-Abbrev} ${Version}\n' apptainer 2>/dev/null | awk '$1=="ii"{print $2}'; }
ensure_busybox() {
  command -v busybox >/dev/null 2>&1 && return 0
  log "installing busybox-static (for the exec self-check)"
  apt-get install -y -qq --no-install-recommends busybox-static >/dev/null 2>&1 ||
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends busybox-static >/dev/null; }
}
if [ "$FORCE" != 1 ] && [ "$BUILD_ONLY" != 1 ] && [ -z "$APPTAINER_DEB" ] && command -v apptainer >/dev/null 2>&1; then
  cur="$(apptainer version 2>/dev/null || true)"
  iv="$(installed_version || true)"
  if [ -n "$cur" ] && version_ok "$cur" &&
     { [ -z "$APPTAINER_VERSION" ] || [ "$iv" = "$APPTAINER_VERSION$LOCAL_SUFFIX" ]; }; then
    log "apptainer $cur already installed (package ${iv:-none}, $(command -v apptainer)); not reinstalling (FORCE=1 to redo)"
    ensure_busybox
    configure_runtime
    verify
    exit 0
  fi
  [ -n "$cur" ] && log "installed apptainer '$cur' (package ${iv:-none}) is not acceptable; reinstalling"
fi

install_local_deb() {   # $1 = .deb built by this script
  local reinstall=() v out
  v="$(dpkg-deb -f "$1" Version)"
  version_ok "$v" || die "$1 has apptainer $v, older than $MIN_VERSION"
  [ "$(installed_version || true)" = "$v" ] && reinstall=(--reinstall)
  log "installing $1 with apt (bookworm resolves the remaining dependencies)"
  if ! out="$(apt-get install -y -q --no-install-recommends "${reinstall[@]}" \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
        "$(realpath "$1")" 2>&1)"; then
    printf '%s\n' "$out" | tail -n 25 >&2
    if grep -E 'unmet dependencies|Depends:|not installable|Unable to correct problems' >/dev/null <<<"$out"; then
      die "apptainer $v: dependencies unsatisfiable on ${PRETTY_NAME:-this system} (see above).
  sid's apptainer now needs newer packages than this release has; they would have to go into the
  private prefix too (way B: build from source), or use an older build.
  $PIN_HINT"
    fi
    die "apt-get install $1 failed (see above)"
  fi
  configure_runtime
  log "installed apptainer $(apptainer version 2>/dev/null || echo '?') (package $(installed_version))"
  log "    interpreter: $(readelf -l "$(command -v apptainer)" 2>/dev/null | sed -n 's/.*interpreter: \(.*\)]/\1/p')"
}

# ---------------------------------------------------------------- host (bookworm) packages
HOST_PKGS=(patchelf binutils ca-certificates debian-archive-keyring squashfs-tools uidmap
           containernetworking-plugins e2fsprogs libseccomp2 libsqlite3-0 busybox-static)
if [ "$WITH_EXTRAS" = 1 ]; then HOST_PKGS+=(debootstrap fuse2fs squashfuse fuse-overlayfs); fi

need_update=0
for p in "${HOST_PKGS[@]}"; do
  # (no grep -q in pipelines: with pipefail, SIGPIPE on the writer would count as failure)
  if ! apt-cache policy "$p" 2>/dev/null | grep 'Candidate: [0-9]' >/dev/null; then need_update=1; break; fi
done
if [ "$need_update" = 1 ]; then
  log "apt-get update (system sources)"
  apt-get update -qq || die "apt-get update failed (no network / broken sources?)"
fi
log "installing host packages: ${HOST_PKGS[*]}"
apt-get install -y -qq --no-install-recommends "${HOST_PKGS[@]}" >/dev/null

if [ -n "$APPTAINER_DEB" ]; then
  [ -f "$APPTAINER_DEB" ] || die "APPTAINER_DEB=$APPTAINER_DEB does not exist"
  install_local_deb "$APPTAINER_DEB"
  verify
  exit 0
fi

# ---------------------------------------------------------------- private apt config for sid
APTDIR="$WORKDIR/apt"
mkdir -p "$APTDIR/etc" "$APTDIR/lists/partial" "$APTDIR/cache/archives/partial"
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
{
  echo "deb [arch=amd64 signed-by=$KEYRING] $DEBIAN_MIRROR $APPTAINER_SUITE main"
  [ "$LIBC_SUITE" != "$APPTAINER_SUITE" ] && echo "deb [arch=amd64 signed-by=$KEYRING] $DEBIAN_MIRROR $LIBC_SUITE main"
  echo "deb-src [signed-by=$KEYRING] $DEBIAN_MIRROR $APPTAINER_SUITE main"
} > "$APTDIR/etc/sources.list.new"
WANT_SRC=0
case "$REBUILD_OFFSETPRELOAD" in
  yes) WANT_SRC=1 ;;
  auto) command -v cc >/dev/null 2>&1 && WANT_SRC=1 ;;
esac
[ "$WANT_SRC" = 1 ] || sed -i '/^deb-src/d' "$APTDIR/etc/sources.list.new"
mv "$APTDIR/etc/sources.list.new" "$APTDIR/etc/sources.list"

APT_OPTS=(
  -o "Dir::Etc::SourceList=$APTDIR/etc/sources.list"
  -o "Dir::Etc::SourceParts=/dev/null"
  -o "Dir::Etc::Preferences=/dev/null"
  -o "Dir::Etc::PreferencesParts=/dev/null"
  -o "Dir::State::Lists=$APTDIR/lists"
  -o "Dir::Cache=$APTDIR/cache"
  -o "Dir::State::status=/dev/null"   # ignore what is installed: candidates = newest in the private suites
  -o "Acquire::Languages=none"
  -o "APT::Sandbox::User=root"
)
log "apt-get update (private sources: $APPTAINER_SUITE + $LIBC_SUITE, state in $APTDIR)"
apt-get "${APT_OPTS[@]}" update -qq --error-on=any ||
  die "cannot fetch the $APPTAINER_SUITE package lists from $DEBIAN_MIRROR (offline? expired/rotated
  archive keys? then update debian-archive-keyring).
  $PIN_HINT"

cand() { apt-cache "${APT_OPTS[@]}" policy "$1" | awk '/Candidate:/{print $2}'; }
APP_VER="$(cand apptainer)"
if [ -z "$APP_VER" ] || [ "$APP_VER" = "(none)" ]; then
  LIBC_CAND="$(cand libc6 || true)"
  if [ -z "$LIBC_CAND" ] || [ "$LIBC_CAND" = "(none)" ]; then
    die "the private $APPTAINER_SUITE package lists in $APTDIR are empty or unreadable (not even libc6 is
  there); check $DEBIAN_MIRROR and the apt-get update output above.
  $PIN_HINT"
  fi
  die "$APPTAINER_SUITE has no apptainer package right now (removed for a release-critical bug?).
  $PIN_HINT"
fi
if [ -n "$APPTAINER_VERSION" ] && [ "$APPTAINER_VERSION" != "$APP_VER" ]; then
  die "APPTAINER_VERSION=$APPTAINER_VERSION requested, but $APPTAINER_SUITE now has $APP_VER (it keeps only its
  current version). Unset APPTAINER_VERSION to take $APP_VER, or:
  $PIN_HINT"
fi
version_ok "$APP_VER" || die "$APPTAINER_SUITE has apptainer $APP_VER, older than $MIN_VERSION"
LIBC_VER="$(cand libc6/"$LIBC_SUITE" 2>/dev/null || true)"
LOCAL_VER="$APP_VER$LOCAL_SUFFIX"
log "apptainer version from $APPTAINER_SUITE: $APP_VER  -> local package version $LOCAL_VER"

# ---------------------------------------------------------------- download (apt verifies hashes against signed indices)
DL="$WORKDIR/debs"
rm -rf "$DL"; mkdir -p "$DL"
( cd "$DL" && apt-get "${APT_OPTS[@]}" download -q "apptainer=$APP_VER" "libc6/$LIBC_SUITE" ) ||
  die "downloading apptainer=$APP_VER and libc6/$LIBC_SUITE ${LIBC_VER:+($LIBC_VER) }from $DEBIAN_MIRROR failed.
  $PIN_HINT"
APP_DEB="$(ls "$DL"/apptainer_*_amd64.deb)"
LIBC_DEB="$(ls "$DL"/libc6_*_amd64.deb)"
log "downloaded: $(basename "$APP_DEB") $(basename "$LIBC_DEB")"

# ---------------------------------------------------------------- staging tree
STAGE="$WORKDIR/pkg"
rm -rf "$STAGE"
dpkg-deb -R "$APP_DEB" "$STAGE"
mkdir -p "$STAGE$PRIVLIBC_PREFIX"
dpkg -x "$LIBC_DEB" "$STAGE$PRIVLIBC_PREFIX"
# the private glibc must never be visible to the system's ld.so.conf; drop docs too
rm -rf "${STAGE:?}${PRIVLIBC_PREFIX:?}/etc/ld.so.conf.d" "${STAGE:?}${PRIVLIBC_PREFIX:?}/usr/share"
[ -x "$STAGE$PRIV_LD" ] || die "private ld.so not found in $(basename "$LIBC_DEB") at $PRIV_LD (libc6 layout changed?)"

host_glibc="$(dpkg-query -W -f='${Version}' libc6 | sed -E 's/^([0-9]+\.[0-9]+).*/\1/')"
priv_glibc="$(dpkg-deb -f "$LIBC_DEB" Version | sed -E 's/^([0-9]+\.[0-9]+).*/\1/')"
# max GLIBC_x.y version an ELF file requires
glibc_need() { objdump -T "$1" 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1; }
ver_gt() { [ "$1" != "$2" ] && [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | tail -1)" = "$1" ]; }

rebuild_offsetpreload() {   # $1 = path of offsetpreload.so in the staging tree
  local so="$1" srcdir="$WORKDIR/src"
  rm -rf "$srcdir"; mkdir -p "$srcdir"
  ( cd "$srcdir" && apt-get "${APT_OPTS[@]}" source --download-only -q "apptainer=$APP_VER" ) || return 1
  local orig; orig="$(find "$srcdir" -maxdepth 1 -name 'apptainer_*.orig.tar.*' | head -1)"
  tar -C "$srcdir" -xf "$orig" --wildcards '*/tools/offsetpreload.c' || return 1
  local c; c="$(find "$srcdir" -name offsetpreload.c | head -1)"
  cc -O2 -fPIC -Wall -shared -o "$so.new" "$c" -ldl || return 1
  mv "$so.new" "$so"; chmod 0644 "$so"
}

while IFS= read -r -d '' f; do
  readelf -h "$f" >/dev/null 2>&1 || continue
  need="$(glibc_need "$f")"
  if readelf -l "$f" 2>/dev/null | grep 'Requesting program interpreter' >/dev/null; then
    if [ -n "$need" ] && ver_gt "$need" "$priv_glibc"; then
      die "glibc symbol mismatch: $(realpath --relative-to="$STAGE" "$f") needs GLIBC_$need, but the private
  libc from $LIBC_SUITE is only $priv_glibc. Use LIBC_SUITE=$APPTAINER_SUITE (or a newer suite).
  $PIN_HINT"
    fi
    log "patching $(realpath --relative-to="$STAGE" "$f") (needs GLIBC_$need): interpreter+RPATH -> $PRIVLIBC_PREFIX"
    # DT_RPATH (not RUNPATH) so that a user's LD_LIBRARY_PATH cannot pull in another libc.so.6
    patchelf --set-interpreter "$PRIV_LD" --force-rpath --set-rpath "$PRIV_LIBDIR" "$f"
  elif [ -n "$need" ] && ver_gt "$need" "$host_glibc"; then
    rel="$(realpath --relative-to="$STAGE" "$f")"
    if [ "$(basename "$f")" = offsetpreload.so ] && [ "$WANT_SRC" = 1 ] && rebuild_offsetpreload "$f"; then
      log "rebuilt $rel against host glibc (now needs GLIBC_$(glibc_need "$f"))"
    else
      log "WARNING: $rel needs GLIBC_$need > host $host_glibc and was left as is"
      log "         (only used for ext3 overlays embedded in SIF files, mounted with fuse2fs as non-root)"
    fi
  fi
done < <(find "$STAGE" \( -path "$STAGE/DEBIAN" -o -path "$STAGE$PRIVLIBC_PREFIX" \) -prune -o -type f -print0)

# ---------------------------------------------------------------- control file
CTRL="$STAGE/DEBIAN/control"
sed -i -E "s/^Version: .*/Version: $LOCAL_VER/" "$CTRL"
sed -i -E 's/libc6 \(>= [^)]*\)/libc6/' "$CTRL"
sed -i -E "s/^Installed-Size: .*/Installed-Size: $(du -sk --exclude=DEBIAN "$STAGE" | cut -f1)/" "$CTRL"
grep -q '^Description:' "$CTRL"
cat >> "$CTRL" <<EOF
 .
 Local rebuild for Debian 12: binaries run on a private glibc from
 $(basename "$LIBC_DEB") installed under $PRIVLIBC_PREFIX.
EOF
( cd "$STAGE" && find . -path ./DEBIAN -prune -o -type f -print0 | sed -z 's|^\./||' | sort -z | xargs -0 md5sum ) > "$STAGE/DEBIAN/md5sums"

OUT_DEB="$WORKDIR/apptainer_${LOCAL_VER//:/%3a}_amd64.deb"
log "building $OUT_DEB"
dpkg-deb --root-owner-group -Zgzip -b "$STAGE" "$OUT_DEB" >/dev/null

# ---------------------------------------------------------------- install + verify
if [ "$BUILD_ONLY" = 1 ]; then
  rm -rf "${STAGE:?}" "${WORKDIR:?}/src"
  log "BUILD_ONLY=1: built $OUT_DEB ($(du -h "$OUT_DEB" | cut -f1)) in $(elapsed) s; install with APPTAINER_DEB=$OUT_DEB $0"
  exit 0
fi
install_local_deb "$OUT_DEB"
rm -rf "${STAGE:?}" "${WORKDIR:?}/src"     # keep only the built .deb, the downloads and the apt lists
verify
log "reusable package: $OUT_DEB ($(du -h "$OUT_DEB" | cut -f1)); cache it and pass APPTAINER_DEB=... to pin"
