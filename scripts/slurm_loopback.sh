#!/usr/bin/env bash
# One-host Slurm cluster (Debian 12, Slurm 22.05 + munge) bound to loopback, for tests.
#   slurm_loopback.sh start DIR   # create config/state under DIR, start munged+slurmctld+slurmd
#   slurm_loopback.sh stop DIR    # kill what start launched (pid files), wait, leave nothing running
#   slurm_loopback.sh env DIR     # print the export line callers must eval for sinfo/srun/sbatch
# Exit codes: 0 ok, 2 usage, 3 packages missing (tests should skip loudly), 1 other failure.
# No systemd/cgroups needed: every daemon runs as a plain root process with all files in DIR.
set -euo pipefail

usage() { echo "usage: $0 {start|stop|env} DIR" >&2; exit 2; }
[[ $# -eq 2 ]] || usage
cmd=$1
mkdir -p "$2"
D=$(cd "$2" && pwd)          # absolute: paths end up in slurm.conf and daemon args
export SLURM_CONF=$D/slurm.conf
HOST=$(hostname -s)

alive() { [[ -s $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

ours() {  # ours PIDFILE NAME: print the pid if it is alive and still runs NAME (stale pid files)
  local pid
  [[ -s $1 ]] || return 0
  pid=$(cat "$1")
  if kill -0 "$pid" 2>/dev/null && grep -qa "$2" "/proc/$pid/cmdline" 2>/dev/null; then echo "$pid"; fi
}

tree() {  # tree PID: PID and all its descendants (collected before killing anything)
  local c; echo "$1"
  for c in $(pgrep -P "$1" 2>/dev/null || true); do tree "$c"; done
}

do_stop() {
  # slurmd's SIGTERM handler leaves slurmstepds and job tasks running (by design, so slurmd
  # can restart under jobs): SIGKILL every slurmstepd of this cluster, with its job tasks,
  # first. Ours are recognised by SLURM_CONF=$D/... which they inherit from slurmd.
  local p pids=""
  for p in $(pgrep -x slurmstepd 2>/dev/null || true); do
    if tr '\0' '\n' 2>/dev/null < "/proc/$p/environ" | grep -qx "SLURM_CONF=$SLURM_CONF"; then
      pids+=" $(tree "$p" | tr '\n' ' ')"
    fi
  done
  [[ -z $pids ]] || kill -KILL $pids 2>/dev/null || true
  # Each daemon needs 1-2 s after SIGTERM; signal all at once, SIGKILL whatever is left at 10 s.
  local daemons i
  daemons="$(ours "$D/slurmd.pid" slurmd) $(ours "$D/slurmctld.pid" slurmctld) $(ours "$D/munged.pid" munged)"
  if [[ -n ${daemons// /} ]]; then
    kill -TERM $daemons 2>/dev/null || true
    for i in $(seq 100); do kill -0 $daemons 2>/dev/null || break; sleep 0.1; done
    kill -KILL $daemons 2>/dev/null || true
    for i in $(seq 20); do kill -0 $daemons 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$D/slurmd.pid" "$D/slurmctld.pid" "$D/munged.pid"
}

free_port() {  # random unused TCP port (checked with ss when available)
  local p
  while :; do
    p=$((20000 + RANDOM % 30000))
    if ! command -v ss >/dev/null || [[ -z $(ss -Htan "sport = :$p" 2>/dev/null) ]]; then
      echo "$p"; return
    fi
  done
}

fail() {
  echo "slurm_loopback: $*" >&2
  local f
  for f in munged.log slurmctld.log slurmd.log; do
    [[ -f $D/$f ]] && { echo "---- tail $D/$f" >&2; tail -n 25 "$D/$f" >&2; }
  done
  do_stop   # never leave half a cluster behind
  exit 1
}

do_start() {
  local b
  for b in munged slurmctld slurmd sinfo srun sbatch scontrol; do
    command -v "$b" >/dev/null || { echo "slurm_loopback: '$b' missing; apt-get install slurmctld slurmd slurm-client munge" >&2; exit 3; }
  done
  if alive "$D/munged.pid" && alive "$D/slurmctld.pid" && alive "$D/slurmd.pid"; then
    echo "slurm_loopback: already running in $D"; return 0
  fi
  do_stop   # clear any partial previous start
  mkdir -p "$D/state" "$D/spool"
  # munged wants the socket dir world-searchable and key/log/pid dirs not group/other-writable.
  chmod 0711 "$D"

  # munge: private key + socket in DIR, so the host's /etc/munge and /run/munge are untouched.
  # The key must belong to munged's user (root here), mode 0400. --force turns munged's
  # permission checks on DIR's parents (e.g. a sticky /tmp) into warnings instead of exits.
  if [[ ! -s $D/munge.key ]]; then
    dd if=/dev/urandom of="$D/munge.key" bs=1024 count=1 status=none
  fi
  chmod 0400 "$D/munge.key"
  munged --force --socket="$D/munge.socket" --key-file="$D/munge.key" \
    --log-file="$D/munged.log" --pid-file="$D/munged.pid" --seed-file="$D/munged.seed" \
    || fail "munged failed to start"

  # Reuse ports on restart of the same DIR, else pick fresh ones (avoid colliding with 6817/6818).
  local cport sport
  if [[ -s $D/ports ]]; then read -r cport sport < "$D/ports"
  else cport=$(free_port); sport=$(free_port); [[ $sport != "$cport" ]] || sport=$((cport + 1))
       echo "$cport $sport" > "$D/ports"; fi

  # NoInAddrAny binds every listening socket (daemons, srun, slurmstepd) to the address the
  # hostname resolves to, so it only means "loopback only" if that address is 127.x.
  local comm="CommunicationParameters=NoInAddrAny,NoCtldInAddrAny"
  if ! getent ahostsv4 "$HOST" | awk '{print $1; exit}' | grep -q '^127\.'; then
    echo "slurm_loopback: warning: $HOST does not resolve to 127.x, so sockets listen on all" \
         "addresses (traffic still uses 127.0.0.1); add '127.0.0.1 $HOST' to /etc/hosts" >&2
    comm="#$comm (off: $HOST does not resolve to 127.x)"
  fi

  cat > "$SLURM_CONF" <<EOF
# Generated by scripts/slurm_loopback.sh: single node, loopback only, no cgroups/systemd.
ClusterName=loopback
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$cport
SlurmdPort=$sport
# Bind listening sockets to the hostname's address (127.0.0.1) instead of 0.0.0.0.
$comm
# AuthInfo socket= is honoured by auth/munge and cred/munge in 22.05.
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$D/munge.socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/slurmctld.log
SlurmdLogFile=$D/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
MailProg=/bin/true
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# KillWait: seconds between SIGTERM and SIGKILL when a job is cancelled or hits its time limit.
KillWait=5
# ReturnToService=2: a DOWN node becomes usable again as soon as its slurmd registers.
ReturnToService=2
# Trust this file, not the hardware probe, so CPUs=2 also works on a 1-CPU host.
SlurmdParameters=config_overrides
NodeName=$HOST NodeAddr=127.0.0.1 NodeHostname=$HOST CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF

  # Both daemons fork into the background and write their pid files.
  # -c: start with empty job state; jobs never survive our stop anyway.
  slurmctld -c -f "$SLURM_CONF" || fail "slurmctld failed to start"
  slurmd -f "$SLURM_CONF" || fail "slurmd failed to start"

  local i st=""
  for i in $(seq 60); do   # bounded wait (30 s) for the node to register as idle
    st=$(sinfo -h -N -n "$HOST" -o %T 2>/dev/null || true)
    [[ $st == idle ]] && { echo "slurm_loopback: up in $D (ctld port $cport, slurmd port $sport)"; return 0; }
    # pid files appear just after the daemons fork; give them 2 s before judging.
    (( i < 4 )) || alive "$D/slurmctld.pid" || fail "slurmctld died"
    (( i < 4 )) || alive "$D/slurmd.pid" || fail "slurmd died"
    sleep 0.5
  done
  fail "node $HOST not idle after 30 s (state: '${st:-none}')"
}

case $cmd in
  start) do_start ;;
  stop)  do_stop ;;
  env)   echo "export SLURM_CONF=$SLURM_CONF" ;;
  *)     usage ;;
esac
