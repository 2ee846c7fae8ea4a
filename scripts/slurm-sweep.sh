#!/usr/bin/env bash
# Runs deploy/slurm/forkcache-sweep.sbatch on a real Slurm: a one-node cluster started here from
# Debian's slurm-wlm and munge packages (slurmctld, slurmd, munged, a slurm.conf generated for this
# machine). The default sweep goes in as a 4-task array with the merge as a dependent job; the
# merged files must equal the single run (reports/sweep.csv, sweep.meta.json) byte for byte. Then
# one task is made to fail on purpose: the merge must not run, the task is requeued with
# `scontrol requeue`, and a second merge must again equal the single run.
#
# Waiting uses squeue and scontrol only: sacct would need the accounting database daemon.
# Usage: scripts/slurm-sweep.sh [FORKCACHE_BINARY]   (default: target/release/forkcache)
set -euo pipefail
cd "$(dirname "$0")/.."

bin=$(realpath "${1:-target/release/forkcache}")
sweep=$(realpath fixtures/sweeps/default.json)
work=$(realpath -m target/ci-slurm)
timeout_s=${SLURM_WAIT_SECONDS:-600}

sudo_if_needed=""
[[ $(id -u) -ne 0 ]] && sudo_if_needed="sudo"

install_slurm() {
    command -v slurmctld > /dev/null && command -v munged > /dev/null && return
    $sudo_if_needed apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_if_needed apt-get install -y -qq --no-install-recommends \
        slurm-wlm munge > /dev/null
}

# munged signs every message between the commands and the daemons; one key, one daemon.
start_munge() {
    $sudo_if_needed mkdir -p /run/munge /etc/munge
    if [[ ! -s /etc/munge/munge.key ]]; then
        $sudo_if_needed mungekey --create --keyfile=/etc/munge/munge.key
    fi
    if ! munge -n > /dev/null 2>&1; then
        $sudo_if_needed chown -R munge:munge /etc/munge /run/munge 2> /dev/null || true
        $sudo_if_needed munged --force
    fi
    munge -n | unmunge > /dev/null
}

# The node line is what slurmd itself measures (`slurmd -C`), so the node never drains for a
# hardware mismatch on whatever machine CI runs on.
write_conf() {
    local host node
    host=$(hostname -s)
    node=$(slurmd -C | head -n 1)
    mkdir -p "$work/state" "$work/spool" "$work/logs"
    cat > "$work/slurm.conf" << EOF
ClusterName=forkcache-ci
SlurmctldHost=$host(127.0.0.1)
SlurmUser=$(id -un)
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
SlurmctldPort=${SLURMCTLD_PORT:-16817}
SlurmdPort=${SLURMD_PORT:-16818}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
# Finished jobs stay visible to scontrol for the whole run: that is how their states are read.
MinJobAge=3600
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=ci Nodes=$host Default=YES MaxTime=30 State=UP
EOF
}

stop_cluster() {
    for pidfile in "$work/slurmd.pid" "$work/slurmctld.pid"; do
        [[ -s $pidfile ]] && $sudo_if_needed kill "$(cat "$pidfile")" 2> /dev/null || true
    done
}

start_cluster() {
    export SLURM_CONF=$work/slurm.conf
    $sudo_if_needed env SLURM_CONF="$SLURM_CONF" slurmctld -i
    $sudo_if_needed env SLURM_CONF="$SLURM_CONF" slurmd
    trap stop_cluster EXIT
    local waited=0
    until sinfo --noheader --states=idle --format=%N 2> /dev/null | grep -q .; do
        ((waited++ < 60)) || { cat "$work/slurmctld.log" "$work/slurmd.log" >&2; fail "the node never became idle"; }
        sleep 1
    done
}

fail() {
    echo "slurm: $*" >&2
    exit 1
}

# Waits until squeue shows none of the given jobs, or until only jobs held by a dependency that
# can never be met are left (they would wait forever).
wait_for() {
    local waited=0
    while squeue --noheader --states=PD,R,CG,CF,S --jobs="$1" --format='%i %r' 2> /dev/null | grep -qv DependencyNeverSatisfied; do
        ((waited++ < timeout_s)) || fail "jobs $1 still queued after ${timeout_s}s: $(squeue --jobs="$1")"
        sleep 1
    done
}

job_states() {
    scontrol --oneliner show job "$1" | grep -o 'JobState=[A-Z_]*' | sort | uniq -c | tr -s ' '
}

task_state() {
    scontrol --oneliner show job "$1" | grep -o 'JobState=[A-Z_]*' | head -n 1 | cut -d= -f2
}

# The array task runs with FORKCACHE set to this wrapper; it fails the task whose id is in
# FAIL_TASK once (leaving a mark), and runs forkcache otherwise.
write_failing_wrapper() {
    cat > "$work/fail-once.sh" << EOF
#!/usr/bin/env bash
if [[ \${SLURM_ARRAY_TASK_ID:-} == "\${FAIL_TASK:-}" && ! -e $work/failed-once ]]; then
    touch $work/failed-once
    echo "task \$SLURM_ARRAY_TASK_ID fails on purpose" >&2
    exit 1
fi
exec "$bin" "\$@"
EOF
    chmod +x "$work/fail-once.sh"
}

submit_array() { # RESULTS FORKCACHE [FAIL_TASK]
    sbatch --parsable --array=1-4 --chdir="$work/logs" \
        --export=ALL,FORKCACHE="$2",FAIL_TASK="${3:-}",CI=true \
        deploy/slurm/forkcache-sweep.sbatch "$sweep" "$1"
}

submit_merge() { # DEPENDENCY RESULTS
    sbatch --parsable --dependency="afterok:$1" --chdir="$work/logs" --job-name=forkcache-merge \
        --wrap "$bin merge-shards $2"
}

# An array's failure outlives a requeue: `afterok:ARRAY` stays unsatisfiable ("afterok:6_*(failed)")
# even once every task has completed. A merge submitted after a requeue waits on the tasks.
each_task() { # ARRAY_JOB
    echo "${1}_1:${1}_2:${1}_3:${1}_4"
}

same_as_single_run() {
    cmp "$1/sweep.csv" reports/sweep.csv
    cmp "$1/sweep.meta.json" reports/sweep.meta.json
}

install_slurm
stop_cluster 2> /dev/null || true
rm -rf "$work"
mkdir -p "$work"
start_munge
write_conf
start_cluster
write_failing_wrapper

# A clean run: 4 array tasks, then the merge once all succeeded.
array=$(submit_array "$work/run-1" "$bin")
merge=$(submit_merge "$array" "$work/run-1")
wait_for "$array,$merge"
[[ $(job_states "$array") == " 4 JobState=COMPLETED" ]] || fail "array tasks: $(job_states "$array")"
[[ $(task_state "$merge") == COMPLETED ]] || fail "the merge job ended $(task_state "$merge")"
same_as_single_run "$work/run-1"
echo "slurm: array job $array, 4 tasks completed, merge job $merge: identical to the single run"

# Task 3 fails once: the merge is held for good, then the task is requeued and runs again.
array=$(submit_array "$work/run-2" "$work/fail-once.sh" 3)
merge=$(submit_merge "$array" "$work/run-2")
wait_for "$array,$merge"
[[ $(task_state "${array}_3") == FAILED ]] || fail "task 3 should have failed: $(task_state "${array}_3")"
squeue --noheader --jobs="$merge" --format=%r | grep -q DependencyNeverSatisfied ||
    fail "the merge was not held after a failed task: $(scontrol --oneliner show job "$merge")"
[[ ! -e $work/run-2/sweep.csv ]] || fail "a merge ran over a failed task"
echo "slurm: task ${array}_3 failed on purpose; merge job $merge held (DependencyNeverSatisfied)"
scancel "$merge"
scontrol requeue "${array}_3"
wait_for "$array"
[[ $(job_states "$array") == " 4 JobState=COMPLETED" ]] || fail "after the requeue: $(job_states "$array")"
merge=$(submit_merge "$(each_task "$array")" "$work/run-2")
wait_for "$merge"
[[ $(task_state "$merge") == COMPLETED ]] || fail "the second merge job ended $(task_state "$merge")"
same_as_single_run "$work/run-2"
echo "slurm: 4 of 4 array tasks completed; merged output identical to the single run"
