#!/usr/bin/env bash
# check-clean.sh - assert that the fabrikit test cluster (tests/cluster/slurm-netns.sh) left nothing
# behind: no slurmctld/slurmd/munged/slurmstepd of ours, no job process still carrying our SLURM_CONF,
# no fknode* namespaces, no fkbr0 bridge or fkv* veths, no tagged /etc/hosts lines, no /etc/netns
# entries, no iptables rule, no state dir. Run after the test session (.ci/run does).
# Uses the same SLURM_NETNS_* settings (and defaults) as slurm-netns.sh and the pytest fixture.
# Exit 0 when clean; 1 (with a list of leftovers) otherwise.
set -euo pipefail

BASE=${SLURM_NETNS_BASE:-/tmp/fabrikit-cluster}
BR=${SLURM_NETNS_BRIDGE:-fkbr0}
NS_PREFIX=${SLURM_NETNS_NS_PREFIX:-fknode}
VETH_PREFIX=${SLURM_NETNS_VETH_PREFIX:-fkv}
TAG="# fabrikit-slurm-netns:$BR"
CONF="$BASE/etc/slurm.conf"
MUNGE_SOCK="$BASE/munge/munge.socket"
WAIT_S=${CHECK_CLEAN_WAIT_S:-5}   # a just-killed process may take a moment to disappear

problems=()
bad() { problems+=("$*"); }

# PIDs of this script and its ancestors (a shell that exported SLURM_CONF must not count)
declare -A mine=()
p=$$
while [ -n "$p" ] && [ "$p" != 0 ]; do
  mine[$p]=1
  p=$(awk '/^PPid:/{print $2}' "/proc/$p/status" 2>/dev/null || true)
done

leftover_processes() { # prints "PID COMM why" for live (non-zombie) processes of ours
  local d pid ppid c st arg why
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    [ -n "${mine[$pid]:-}" ] && continue
    c=""; read -r c 2>/dev/null <"$d/comm" || continue
    st=$(sed 's/.*) //' "$d/stat" 2>/dev/null | cut -d' ' -f1) || continue
    [ "$st" = Z ] && continue   # already dead, only waiting for its parent to reap it
    why=""
    case "$c" in
      slurmd|slurmctld)
        while IFS= read -r -d '' arg; do [ "$arg" = "$CONF" ] && why="runs with -f $CONF"; done 2>/dev/null <"$d/cmdline" || true ;;
      munged)
        while IFS= read -r -d '' arg; do [ "$arg" = "--socket=$MUNGE_SOCK" ] && why="serves $MUNGE_SOCK"; done 2>/dev/null <"$d/cmdline" || true ;;
    esac
    if [ -z "$why" ]; then
      while IFS= read -r -d '' arg; do
        [ "$arg" = "SLURM_CONF=$CONF" ] && why="environment has SLURM_CONF=$CONF (job leftover)"
      done 2>/dev/null <"$d/environ" || true
    fi
    if [ -n "$why" ]; then
      # our own helpers (subshells, sed) inherit the caller's environment: not leftovers
      [ "$pid" = "$BASHPID" ] && continue
      ppid=$(awk '/^PPid:/{print $2}' "$d/status" 2>/dev/null || true)
      [ "$ppid" = "$$" ] || [ "$ppid" = "$BASHPID" ] && continue
      echo "$pid $c $why"
    fi
  done
  return 0
}

deadline=$((SECONDS + WAIT_S))
while :; do
  procs=$(leftover_processes)
  [ -z "$procs" ] || [ "$SECONDS" -ge "$deadline" ] && break
  sleep 0.5
done
while IFS= read -r line; do [ -n "$line" ] && bad "process $line"; done <<<"$procs"

for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${NS_PREFIX}[0-9]+$" || true); do
  bad "network namespace $ns"
done
if ip link show "$BR" >/dev/null 2>&1; then bad "bridge $BR"; fi
for l in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^${VETH_PREFIX}[0-9]+$" || true); do
  bad "veth $l"
done
if grep -n -- "$TAG\$" /etc/hosts >/dev/null 2>&1; then
  bad "/etc/hosts lines tagged '$TAG': $(grep -c -- "$TAG\$" /etc/hosts)"
fi
for d in /etc/netns/"$NS_PREFIX"[0-9]*; do [ -e "$d" ] && bad "$d"; done
if command -v iptables >/dev/null 2>&1 &&
   iptables -S FORWARD 2>/dev/null | grep -- "-i $BR -o $BR" >/dev/null; then
  bad "iptables FORWARD rule for $BR"
fi
[ -e "$BASE" ] && bad "state dir $BASE"

if [ ${#problems[@]} -gt 0 ]; then
  echo "check-clean: the test cluster left things behind:" >&2
  printf '  - %s\n' "${problems[@]}" >&2
  echo "  (clean up with: tests/cluster/slurm-netns.sh down)" >&2
  exit 1
fi
echo "check-clean: OK (no daemons, job processes, namespaces, links, hosts lines or state of the test cluster left)"
