#!/usr/bin/env bash
# A one-host Slurm (munged + slurmctld + slurmd) on this machine, to try graphstore.sbatch for real.
#
#   apt-get install slurm-wlm munge        # Debian / Ubuntu packages
#   sudo deploy/slurm/local-cluster.sh     # as root; no systemd needed: the daemons run in the background
#   sbatch deploy/slurm/graphstore.sbatch  # then squeue, scancel ...
#   sudo deploy/slurm/local-cluster.sh stop
#
# It writes /etc/slurm/slurm.conf when there is none (one node: this host with all its CPUs, one
# partition `local`) and starts whatever daemon is not running. Idempotent. A real cluster has its own
# slurm.conf: this script is only for a single machine.
set -euo pipefail

CONF=/etc/slurm/slurm.conf
STATE=${SLURM_STATE_DIR:-/var/spool/slurm-local}
say() { printf '[local-slurm] %s\n' "$*" >&2; }

stop() {
  for daemon in slurmd slurmctld; do
    if [ -f "$STATE/$daemon.pid" ] && kill -0 "$(cat "$STATE/$daemon.pid")" 2>/dev/null; then
      say "stopping $daemon (pid $(cat "$STATE/$daemon.pid"))"
      kill "$(cat "$STATE/$daemon.pid")"
    fi
  done
  # munged only when this script started it (a host may run munge for other uses).
  if [ -f "$STATE/munged.started" ]; then
    pid=$(cat /run/munge/munged.pid 2>/dev/null || true)
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      say "stopping munged (pid $pid)"
      kill "$pid"
    fi
    rm -f "$STATE/munged.started"
  fi
}

if [ "${1:-start}" = stop ]; then
  stop
  exit 0
fi

command -v slurmctld >/dev/null || { say "slurmctld not found: apt-get install slurm-wlm munge"; exit 1; }
mkdir -p "$STATE/ctld" "$STATE/d" /run/munge
chown munge:munge /run/munge

if ! munge -n >/dev/null 2>&1; then
  say "starting munged"
  [ -f /etc/munge/munge.key ] || { mungekey --create 2>/dev/null || create-munge-key; }
  runuser -u munge -- /usr/sbin/munged
  touch "$STATE/munged.started"
fi

if [ ! -f "$CONF" ]; then
  host=$(hostname -s)
  cpus=$(nproc)
  memory_mb=$(awk '/MemTotal/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)
  say "writing $CONF (node $host: $cpus CPUs, $memory_mb MB)"
  cat >"$CONF" <<CONF
ClusterName=local
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
# Tasks are tracked by their process tree: no cgroup set-up needed on a single machine.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
KillWait=10
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmdSpoolDir=$STATE/d
StateSaveLocation=$STATE/ctld
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd.log
NodeName=$host CPUs=$cpus RealMemory=$memory_mb State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
fi

if ! scontrol ping 2>/dev/null | grep -q UP; then
  say "starting slurmctld (log $STATE/slurmctld.log)"
  slurmctld
fi
if ! { [ -f "$STATE/slurmd.pid" ] && kill -0 "$(cat "$STATE/slurmd.pid")" 2>/dev/null; }; then
  say "starting slurmd (log $STATE/slurmd.log)"
  slurmd
fi
for _ in $(seq 1 30); do
  if sinfo -h -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
    sinfo
    exit 0
  fi
  sleep 1
done
say "the node did not become idle in 30 s:"
sinfo -N -l || true
exit 1
