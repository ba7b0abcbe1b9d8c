#!/usr/bin/env bash
# Ported from the proven recipe shared/recipes/slurm-netns/slurm-netns.sh (its README lists every pitfall;
# the points that matter are repeated in comments here). Adapted for fabrikit's tests: fabrikit names and
# addresses by default, an oversubscribable partition, a per-job TMPDIR, MinJobAge=3600, and `down`
# also finds our daemons by their exact config/socket path when the state dir is gone.
#
# slurm-netns.sh - a REAL Slurm cluster on ONE Linux host: one network namespace
# + one UTS namespace (own hostname, own IP) per compute node.  Used by the
# fabrikit test suite (tests/conftest.py, fixture `slurm_cluster`).
#
#   tests/cluster/slurm-netns.sh up [N]  start a cluster with N nodes (default 2); no-op if
#                                        one with the same N and settings is already healthy,
#                                        otherwise tears down whatever is there and starts clean
#   tests/cluster/slurm-netns.sh down    stop every process this script started (by PID),
#                                        delete netns/veth/bridge, /etc/hosts lines, state dir
#   tests/cluster/slurm-netns.sh status  daemons, namespaces, sinfo
#   tests/cluster/slurm-netns.sh env     print "export SLURM_CONF=..." (eval "$(... env)")
#   tests/cluster/slurm-netns.sh test    srun + sbatch smoke test (no torch needed)
#
# Topology (every value overridable through the environment, see below):
#   root netns : bridge fkbr0 = 10.78.0.1/24; munged (private key + socket);
#                slurmctld in its own UTS ns with hostname "fkctl", port 6917
#   node I     : netns fknodeI, veth fkvI <-> eth0 = 10.78.0.(10+I)/24, hostname nodeI,
#                NO default route (nothing can leave the machine from a node);
#                slurmd -D -N nodeI started via `ip netns exec fknodeI unshare --uts`
#   names      : a block of lines tagged "# fabrikit-slurm-netns:fkbr0" in /etc/hosts
#                (SLURM_NETNS_HOSTS_MODE=netns: per-namespace /etc/netns/fknodeI/hosts instead)
#   state      : /tmp/fabrikit-cluster (slurm.conf, cgroup.conf, munge, spool, logs, pids, jobtmp);
#                logs of the last torn-down cluster are kept in /tmp/fabrikit-cluster.last-logs
#   jobs       : every job gets TMPDIR=$BASE/jobtmp/<jobid> (TaskProlog), removed by the Epilog,
#                so torchrun's /tmp/torchelastic_* dirs do not pile up in the shared /tmp.
#                Nodes share the host filesystem: jobs can read/write run dirs under /tmp.
#   sharing    : partition OverSubscribe=FORCE:2 and CR_Core, so two jobs can run on the same nodes
#                at the same time (advertise SLURM_NETNS_CPUS >= the CPUs two jobs ask for together).
#
# Needs root (CAP_NET_ADMIN + CAP_SYS_ADMIN) and Debian/Ubuntu packages
#   slurmctld slurmd slurm-client munge iproute2 util-linux
# Tested with Debian bookworm slurm-wlm 22.05.8.
set -euo pipefail

BASE=${SLURM_NETNS_BASE:-/tmp/fabrikit-cluster}
NET=${SLURM_NETNS_NET:-10.78.0}               # first three octets of a private /24
BR=${SLURM_NETNS_BRIDGE:-fkbr0}
NS_PREFIX=${SLURM_NETNS_NS_PREFIX:-fknode}
VETH_PREFIX=${SLURM_NETNS_VETH_PREFIX:-fkv}
NODE_PREFIX=${SLURM_NETNS_NODE_PREFIX:-node}
CTL_NAME=${SLURM_NETNS_CTL_NAME:-fkctl}
CTLD_PORT=${SLURM_NETNS_CTLD_PORT:-6917}      # not 6817: stay clear of a system slurmctld
SLURMD_PORT=${SLURM_NETNS_SLURMD_PORT:-6818}  # one per netns, so no clash between nodes
CPUS=${SLURM_NETNS_CPUS:-2}                   # CPUs advertised per node (may exceed real cores)
MEM=${SLURM_NETNS_MEM_MB:-1024}               # RealMemory advertised per node (not a consumable)
PARTITION=${SLURM_NETNS_PARTITION:-debug}
OVERSUBSCRIBE=${SLURM_NETNS_OVERSUBSCRIBE:-FORCE:2}  # partition OverSubscribe= (NO to disable sharing)
MIN_JOB_AGE=${SLURM_NETNS_MIN_JOB_AGE:-3600}  # finished jobs stay visible to `scontrol show job`
HOSTS_MODE=${SLURM_NETNS_HOSTS_MODE:-global}  # global (/etc/hosts) | netns (/etc/netns/*/hosts)
ENTER=${SLURM_NETNS_ENTER:-ipnetns}           # ipnetns (`ip netns exec`) | nsenter (`nsenter --net=`,
                                              # for containers where /sys cannot be remounted)
UP_TIMEOUT=${SLURM_NETNS_UP_TIMEOUT:-60}
TAG="# fabrikit-slurm-netns:$BR"              # per-instance tag on /etc/hosts lines
CTL_IP="$NET.1"
CONF="$BASE/etc/slurm.conf"
MUNGE_SOCK="$BASE/munge/munge.socket"
export SLURM_CONF="$CONF"
# settings that change the generated cluster: `up` restarts if any differs
spec() { echo "nodes=$1 cpus=$CPUS mem=$MEM part=$PARTITION oversub=$OVERSUBSCRIBE minjobage=$MIN_JOB_AGE net=$NET hosts=$HOSTS_MODE enter=$ENTER ctld=$CTLD_PORT"; }

log() { printf '[slurm-netns %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
node_name() { echo "${NODE_PREFIX}$1"; }
node_ip() { echo "$NET.$((10 + $1))"; }
need_root() { [ "$(id -u)" = 0 ] || die "must run as root"; }
pid_alive() { # running and not a zombie (PID 1 of a container may reap late; README pitfall 5)
  [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null &&
    [ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)" != Z ]
}
pidfile_pid() { if [ -s "$1" ]; then cat "$1"; fi; }
ours() { # ours PID COMM : guard against PID reuse (e.g. a stale state dir after a reboot)
  [ -n "${1:-}" ] && [ "$(cat "/proc/$1/comm" 2>/dev/null)" = "$2" ]
}
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }
our_namespaces() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${NS_PREFIX}[0-9]+$" || true; }

check_tools() {
  local t missing=()
  for t in ip unshare setsid slurmctld slurmd scontrol sinfo srun sbatch munged munge unmunge; do
    command -v "$t" >/dev/null 2>&1 || missing+=("$t")
  done
  [ ${#missing[@]} -eq 0 ] ||
    die "missing: ${missing[*]} (apt-get install -y slurmctld slurmd slurm-client munge iproute2 util-linux)"
  case "$ENTER:$HOSTS_MODE" in
    ipnetns:global|ipnetns:netns|nsenter:global) ;;
    nsenter:netns) die "SLURM_NETNS_HOSTS_MODE=netns needs SLURM_NETNS_ENTER=ipnetns" ;;
    *) die "bad SLURM_NETNS_ENTER=$ENTER / SLURM_NETNS_HOSTS_MODE=$HOSTS_MODE" ;;
  esac
}

# ------------------------------------------------------------------ down
stop_pids() { # stop_pids LABEL GRACE_S PID... : TERM all, wait up to GRACE_S for all, KILL survivors
  local label=$1 grace=$2; shift 2
  local p live=() still=() i
  for p in "$@"; do pid_alive "$p" && { kill -TERM "$p" 2>/dev/null || true; live+=("$p"); }; done
  [ ${#live[@]} -gt 0 ] || return 0
  for ((i = 0; i < grace * 5; i++)); do
    still=()
    for p in "${live[@]}"; do pid_alive "$p" && still+=("$p"); done
    [ ${#still[@]} -eq 0 ] && { log "stopped $label (pids ${live[*]})"; return 0; }
    sleep 0.2
  done
  for p in "${live[@]}"; do if pid_alive "$p"; then kill -KILL "$p" 2>/dev/null || true; fi; done
  log "stopped $label (pids ${live[*]}; SIGKILL for ${still[*]})"
}

# Daemons of THIS instance that no pid file points at (state dir deleted under a live cluster, or a
# crash between start and writing the pid file). A process counts as ours only if its comm is
# slurmd/slurmctld/munged AND one of its argv entries is exactly our slurm.conf / munge socket path.
stray_daemons() { # prints PIDs
  local d c arg want
  for d in /proc/[0-9]*; do
    c=""; read -r c 2>/dev/null <"$d/comm" || continue
    case "$c" in
      slurmd|slurmctld) want="$CONF" ;;
      munged) want="--socket=$MUNGE_SOCK" ;;
      *) continue ;;
    esac
    while IFS= read -r -d '' arg; do
      if [ "$arg" = "$want" ]; then echo "${d#/proc/}"; break; fi
    done 2>/dev/null <"$d/cmdline" || true
  done
}

hosts_remove() {
  if grep -q "$TAG\$" /etc/hosts 2>/dev/null; then
    local tmp; tmp=$(mktemp)
    grep -v "$TAG\$" /etc/hosts >"$tmp" || true
    cat "$tmp" >/etc/hosts   # rewrite in place: /etc/hosts may be a bind mount (docker)
    rm -f "$tmp"
  fi
}

do_down() {
  need_root
  local f pids=() ns p
  # 1. slurmd daemons + slurmctld (PIDs recorded at start; slurmscriptd exits with slurmctld)
  for f in "$BASE"/pids/slurmd-*.pid; do
    [ -e "$f" ] && ours "$(pidfile_pid "$f")" slurmd && pids+=("$(pidfile_pid "$f")")
  done
  f="$BASE/pids/slurmctld.pid"
  [ -e "$f" ] && ours "$(pidfile_pid "$f")" slurmctld && pids+=("$(pidfile_pid "$f")")
  [ ${#pids[@]} -gt 0 ] && stop_pids "slurmd/slurmctld" 10 "${pids[@]}"
  # 2. anything still alive inside OUR namespaces (orphaned slurmstepd + job tasks), by PID.
  #    slurmstepd ignores SIGTERM, hence the short grace period before SIGKILL.
  pids=()
  for ns in $(our_namespaces); do
    for p in $(ip netns pids "$ns" 2>/dev/null); do pids+=("$p"); done
  done
  [ ${#pids[@]} -gt 0 ] && stop_pids "job leftovers in node namespaces" 2 "${pids[@]}"
  for ns in $(our_namespaces); do
    ip netns del "$ns" 2>/dev/null && log "deleted netns $ns"
    if [ -d "/etc/netns/$ns" ]; then rm -rf "/etc/netns/$ns"; fi
  done
  if [ -e "$BASE/created-etc-netns" ]; then rmdir /etc/netns 2>/dev/null || true; fi
  # 3. munged
  f="$BASE/pids/munged.pid"
  [ -e "$f" ] && ours "$(pidfile_pid "$f")" munged && stop_pids munged 10 "$(pidfile_pid "$f")"
  # 3b. our daemons that no pid file knew about (matched by exact conf/socket path, never by name)
  pids=()
  for p in $(stray_daemons); do pids+=("$p"); done
  [ ${#pids[@]} -gt 0 ] && stop_pids "stray daemons of this instance" 3 "${pids[@]}"
  # 4. network, firewall rule, names
  if command -v iptables >/dev/null 2>&1; then
    while iptables -D FORWARD -i "$BR" -o "$BR" -m comment --comment slurm-netns -j ACCEPT 2>/dev/null; do :; done
  fi
  for p in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^${VETH_PREFIX}[0-9]+$" || true); do
    ip link del "$p" 2>/dev/null || true
  done
  if ip link show "$BR" >/dev/null 2>&1; then ip link del "$BR" && log "deleted bridge $BR"; fi
  # /run/netns is created (and bind-mounted on itself) by the first `ip netns add`;
  # undo that if we created it and no other namespace is left
  if [ -e "$BASE/created-run-netns" ] && [ -z "$(ip netns list 2>/dev/null)" ]; then
    umount /run/netns 2>/dev/null || true; rmdir /run/netns 2>/dev/null || true
  fi
  hosts_remove
  if [ -d "$BASE/log" ]; then rm -rf "$BASE.last-logs"; cp -a "$BASE/log" "$BASE.last-logs"; fi
  rm -rf "$BASE"
  log "down complete (logs kept in $BASE.last-logs)"
}

# -------------------------------------------------------------------- up
live_daemon() { local p; p=$(pidfile_pid "$1"); pid_alive "$p" && ours "$p" "$2"; }
is_up_with() { # 0 if a healthy cluster with exactly N nodes and the same settings is running
  local n=$1 i
  [ -s "$BASE/spec" ] && [ "$(cat "$BASE/spec")" = "$(spec "$n")" ] || return 1
  live_daemon "$BASE/pids/munged.pid" munged || return 1
  live_daemon "$BASE/pids/slurmctld.pid" slurmctld || return 1
  for i in $(seq 1 "$n"); do live_daemon "$BASE/pids/slurmd-$(node_name "$i").pid" slurmd || return 1; done
  [ "$(sinfo -h -N -o '%N %T' 2>/dev/null | awk '$2=="idle"||$2=="allocated"||$2=="mixed"' | wc -l)" -eq "$n" ]
}

setup_munge() {
  mkdir -p "$BASE/munge"
  chmod 0755 "$BASE" "$BASE/munge"  # munged: socket dir needs o+x and must not be g/o-writable (pitfall 3)
  if command -v mungekey >/dev/null 2>&1; then
    mungekey --create --keyfile="$BASE/munge/munge.key" --force
  else
    dd if=/dev/urandom of="$BASE/munge/munge.key" bs=1024 count=1 status=none
  fi
  chmod 0600 "$BASE/munge/munge.key"
  # private munged as root with its own key + socket: does not touch a system munged
  munged --socket="$MUNGE_SOCK" --key-file="$BASE/munge/munge.key" \
         --pid-file="$BASE/pids/munged.pid" --seed-file="$BASE/munge/munged.seed" \
         --log-file="$BASE/log/munged.log" --num-threads=4
  local i; for i in $(seq 1 50); do [ -S "$MUNGE_SOCK" ] && break; sleep 0.1; done
  munge -S "$MUNGE_SOCK" -n | unmunge -S "$MUNGE_SOCK" >/dev/null ||
    die "munge self-test failed (see $BASE/log/munged.log)"
}

setup_network() {
  local n=$1 i ns ip
  [ -d /run/netns ] || touch "$BASE/created-run-netns"
  ip link add "$BR" type bridge
  ip addr add "$CTL_IP/24" dev "$BR"
  ip link set "$BR" up
  # Docker-style hosts (br_netfilter + FORWARD policy DROP) would drop node<->node frames (pitfall 11)
  if command -v iptables >/dev/null 2>&1 && iptables -S FORWARD >/dev/null 2>&1; then
    iptables -I FORWARD -i "$BR" -o "$BR" -m comment --comment slurm-netns -j ACCEPT ||
      log "warning: could not add iptables FORWARD accept rule for $BR"
  fi
  for i in $(seq 1 "$n"); do
    ns="${NS_PREFIX}$i"; ip=$(node_ip "$i")
    ip netns add "$ns"
    ip link add "${VETH_PREFIX}$i" type veth peer name eth0 netns "$ns"
    ip link set "${VETH_PREFIX}$i" master "$BR" up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$ip/24" dev eth0
    ip -n "$ns" link set eth0 up
    # deliberately NO default route: a node can only reach $NET.0/24
  done
}

hosts_lines() { # the name table for this cluster
  local n=$1 i
  printf '%s %s %s\n' "$CTL_IP" "$CTL_NAME" "$TAG"
  for i in $(seq 1 "$n"); do printf '%s %s %s\n' "$(node_ip "$i")" "$(node_name "$i")" "$TAG"; done
}

setup_hosts() {
  local n=$1 i tmp
  hosts_remove
  if [ "$HOSTS_MODE" = netns ]; then
    # `ip netns exec NS` bind-mounts /etc/netns/NS/* over /etc/* for what it starts
    [ -d /etc/netns ] || touch "$BASE/created-etc-netns"
    for i in $(seq 1 "$n"); do
      mkdir -p "/etc/netns/${NS_PREFIX}$i"
      { printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n'; hosts_lines "$n"; } \
        >"/etc/netns/${NS_PREFIX}$i/hosts"
    done
  else
    tmp=$(mktemp)
    { cat /etc/hosts; hosts_lines "$n"; } >"$tmp"
    cat "$tmp" >/etc/hosts
    rm -f "$tmp"
  fi
}

write_conf() {
  local n=$1 i
  mkdir -p "$BASE/etc" "$BASE/jobtmp"
  chmod 1777 "$BASE/jobtmp"
  : >"$BASE/etc/plugstack.conf"   # ignore /etc/slurm/plugstack.conf.d/*
  # Per-job TMPDIR (README pitfall 9: torchrun leaves /tmp/torchelastic_* per agent per job, and
  # the nodes share /tmp). TaskProlog runs before every task (batch script and srun tasks) with the
  # task's environment; a TMPDIR the job set itself (anything but /tmp) is kept.
  cat >"$BASE/etc/task_prolog.sh" <<EOF
#!/bin/sh
d="$BASE/jobtmp/\${SLURM_JOB_ID:?}"
mkdir -p "\$d" 2>/dev/null || exit 0
case "\${TMPDIR:-/tmp}" in
  /tmp|/tmp/) echo "export TMPDIR=\$d" ;;
esac
exit 0
EOF
  # Epilog (root, on every node of the job, after it ended): drop the job's TMPDIR.
  # It must always exit 0, or slurmctld drains the node.
  cat >"$BASE/etc/epilog.sh" <<EOF
#!/bin/sh
rm -rf "$BASE/jobtmp/\${SLURM_JOB_ID:?}" 2>/dev/null
exit 0
EOF
  chmod 0755 "$BASE/etc/task_prolog.sh" "$BASE/etc/epilog.sh"
  cat >"$CONF" <<EOF
# generated by tests/cluster/slurm-netns.sh
ClusterName=fabrikit
SlurmctldHost=$CTL_NAME($CTL_IP)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCK
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
StateSaveLocation=$BASE/ctld
SlurmdSpoolDir=$BASE/spool/%n
SlurmctldPidFile=$BASE/run/slurmctld.pid
SlurmdPidFile=$BASE/run/slurmd-%n.pid
SlurmctldLogFile=$BASE/log/slurmctld.log
SlurmdLogFile=$BASE/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$BASE/etc/plugstack.conf
MailProg=/bin/true
TaskProlog=$BASE/etc/task_prolog.sh
Epilog=$BASE/etc/epilog.sh
# no cgroups anywhere (sandbox / CI container)
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
# start batch jobs at submit time (default batch_sched_delay=3 leaves them PENDING ~2.5 s)
SchedulerParameters=batch_sched_delay=0
SlurmdParameters=config_overrides
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
MinJobAge=$MIN_JOB_AGE
KillWait=5
Waittime=0
NodeName=DEFAULT CPUs=$CPUS Sockets=1 CoresPerSocket=$CPUS ThreadsPerCore=1 RealMemory=$MEM State=UNKNOWN
EOF
  for i in $(seq 1 "$n"); do
    echo "NodeName=$(node_name "$i") NodeHostname=$(node_name "$i") NodeAddr=$(node_ip "$i")" >>"$CONF"
  done
  echo "PartitionName=$PARTITION Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=$OVERSUBSCRIBE" >>"$CONF"
  # Slurm 22.05 slurmd ALWAYS calls cgroup_g_init(). "autodetect" fails inside
  # `ip netns exec` (it mounts a fresh /sys without cgroup mounts) and cgroup/v2
  # wants dbus/systemd. Pinning cgroup/v1 makes that init a no-op; nothing else
  # uses cgroups with the plugins chosen above. (Slurm >= 24.05: CgroupPlugin=disabled.)
  cat >"$BASE/etc/cgroup.conf" <<EOF
CgroupPlugin=cgroup/v1
CgroupAutomount=no
EOF
}

start_daemons() {
  local n=$1 i name
  # slurmctld refuses to run unless its hostname matches SlurmctldHost -> own UTS ns.
  # setsid/unshare/ip netns exec/sh all exec() in place, so $! is the daemon's own PID.
  setsid unshare --uts -- sh -c "hostname $CTL_NAME && exec slurmctld -D -c -f '$CONF'" \
    >"$BASE/log/slurmctld.stdout" 2>&1 </dev/null &
  echo $! >"$BASE/pids/slurmctld.pid"
  local enter
  for i in $(seq 1 "$n"); do
    name=$(node_name "$i")
    if [ "$ENTER" = nsenter ]; then enter=(nsenter "--net=/run/netns/${NS_PREFIX}$i")
    else enter=(ip netns exec "${NS_PREFIX}$i"); fi
    setsid "${enter[@]}" unshare --uts -- \
      sh -c "hostname $name && exec slurmd -D -N $name -f '$CONF'" \
      >"$BASE/log/slurmd-$name.stdout" 2>&1 </dev/null &
    echo $! >"$BASE/pids/slurmd-$name.pid"
  done
}

wait_idle() {
  local n=$1 t0=$2 idle
  while :; do
    idle=$(sinfo -h -N -o '%N %T' 2>/dev/null | awk '$2=="idle"' | wc -l)
    [ "$idle" -ge "$n" ] && return 0
    if [ "$(elapsed "$t0" | cut -d. -f1)" -ge "$UP_TIMEOUT" ]; then
      sinfo -N -l >&2 || true
      tail -n 20 "$BASE"/log/*.log "$BASE"/log/*.stdout >&2 || true
      die "cluster not idle after ${UP_TIMEOUT}s (run '$0 down' to clean up)"
    fi
    pid_alive "$(pidfile_pid "$BASE/pids/slurmctld.pid")" ||
      { tail -n 20 "$BASE/log/slurmctld.stdout" "$BASE/log/slurmctld.log" >&2 || true; die "slurmctld died"; }
    sleep 0.2
  done
}

do_up() {
  need_root; check_tools
  local n=${1:-2} t0 i
  if ! [[ "$n" =~ ^[0-9]+$ ]] || [ "$n" -lt 1 ] || [ "$n" -gt 200 ]; then die "bad node count: $n"; fi
  if is_up_with "$n"; then log "already up with $n nodes"; sinfo; echo "export SLURM_CONF=$CONF"; return 0; fi
  t0=$(date +%s.%N)
  do_down >/dev/null 2>&1 || true        # stale / partial / different cluster: start clean
  mkdir -p "$BASE"/{pids,log,ctld,run,etc,spool}
  for i in $(seq 1 "$n"); do mkdir -p "$BASE/spool/$(node_name "$i")"; done
  chmod 0755 "$BASE" "$BASE/spool" "$BASE"/spool/*
  echo "$n" >"$BASE/nodes"
  setup_munge
  setup_network "$n"
  setup_hosts "$n"
  write_conf "$n"
  start_daemons "$n"
  wait_idle "$n" "$t0"
  spec "$n" >"$BASE/spec"
  log "cluster up: $n nodes idle after $(elapsed "$t0") s"
  sinfo
  echo "export SLURM_CONF=$CONF"
}

do_status() {
  local f p
  echo "SLURM_CONF=$CONF"
  for f in "$BASE"/pids/*.pid; do
    [ -e "$f" ] || continue
    p=$(pidfile_pid "$f")
    printf '%-14s pid %-8s %s\n' "$(basename "$f" .pid)" "$p" "$(pid_alive "$p" && echo alive || echo DEAD)"
  done
  echo "namespaces: $(our_namespaces | tr '\n' ' ')"
  ip -br addr show "$BR" 2>/dev/null || echo "bridge $BR: absent"
  sinfo -N -l 2>/dev/null || echo "sinfo: controller not reachable"
}

do_test() { # quick self-check without torch (the pytest suite does the real checks)
  local n out jid state t0
  n=$(cat "$BASE/nodes" 2>/dev/null || echo 0)
  [ "$n" -ge 2 ] || die "cluster not up with >= 2 nodes"
  set -x
  sinfo
  srun -N"$n" --ntasks-per-node=1 hostname
  srun -N"$n" --ntasks-per-node=1 hostname --ip-address
  { set +x; } 2>/dev/null
  [ "$(srun -N"$n" --ntasks-per-node=1 hostname --ip-address | sort -u | wc -l)" -eq "$n" ] ||
    die "nodes do not have distinct addresses"
  out=$(mktemp -d /tmp/fabrikit-cluster-test.XXXXXX)
  cat >"$out/job.sh" <<'EOF'
#!/bin/sh
srun --ntasks-per-node=1 sh -c 'echo "$(hostname) $(hostname --ip-address) TMPDIR=$TMPDIR"'
EOF
  t0=$(date +%s.%N)
  jid=$(sbatch --parsable -N2 --output="$out/%j.out" "$out/job.sh")
  while :; do
    state=$(scontrol show job -o "$jid" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
    case "$state" in
      COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED) break ;;
    esac
    sleep 0.2
  done
  cat "$out/$jid.out"
  log "job $jid $state in $(elapsed "$t0") s (sbatch -> terminal state)"
  rm -rf "$out"
  [ "$state" = COMPLETED ]
}

case "${1:-}" in
  up) do_up "${2:-2}" ;;
  down) do_down ;;
  status) do_status ;;
  env) echo "export SLURM_CONF=$CONF" ;;
  test) do_test ;;
  *) echo "usage: $0 up [N] | down | status | env | test" >&2; exit 2 ;;
esac
