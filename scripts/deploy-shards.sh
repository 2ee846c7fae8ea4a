#!/usr/bin/env bash
# Runs the default sweep as 4 shards the way deploy/ runs them on a scheduler, on this machine:
# the Kubernetes Job's shard command (read from the manifest) with JOB_COMPLETION_INDEX 0..3,
# and the Slurm array script with task ids 1..4. Each set goes through `forkcache merge-shards`,
# whose output must equal the single run (reports/sweep.csv, sweep.meta.json) byte for byte;
# then a set with a shard taken away must be refused. The manifest is validated against the
# Kubernetes schema first; a real Slurm runs the sbatch script in scripts/slurm-sweep.sh.
# Usage: scripts/deploy-shards.sh [FORKCACHE_BINARY]   (default: target/release/forkcache)
set -euo pipefail
cd "$(dirname "$0")/.."

bin=$(realpath "${1:-target/release/forkcache}")
sweep=fixtures/sweeps/default.json
work=target/ci-deploy
rm -rf "$work"
mkdir -p "$work"

# The manifest is read with PyYAML and checked against the Kubernetes API schema, offline, by
# kubernetes-validate (it ships the schemas of every Kubernetes release), both pinned in a
# scratch environment.
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet pyyaml==6.0.3 kubernetes-validate==1.37.0
python=$work/venv/bin/python

# --strict refuses any field the Job schema does not have (a misspelt `completions` would
# otherwise be ignored by the cluster, not refused).
"$work/venv/bin/kubernetes-validate" --strict --kubernetes-version 1.37.0 \
    deploy/kubernetes/forkcache-sweep-job.yaml

same_as_single_run() {
    "$bin" merge-shards "$1" > /dev/null
    cmp "$1/sweep.csv" reports/sweep.csv
    cmp "$1/sweep.meta.json" reports/sweep.meta.json
    echo "$2: 4 shards merged, identical to the single run"
}

# Kubernetes: the container's shell command, with the Job's SHARDS, once per completion index.
read -r completions shards < <("$python" - deploy/kubernetes/forkcache-sweep-job.yaml <<'PY'
import sys, yaml
job = yaml.safe_load(open(sys.argv[1]))
container = job["spec"]["template"]["spec"]["containers"][0]
env = {e["name"]: e["value"] for e in container["env"]}
print(job["spec"]["completions"], env["SHARDS"])
PY
)
command=$("$python" -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["spec"]["template"]["spec"]["containers"][0]["args"][0])' deploy/kubernetes/forkcache-sweep-job.yaml)
[[ $completions == 4 && $shards == 4 ]] || { echo "the manifest should cut the sweep in 4 ($completions, $shards)" >&2; exit 1; }
for ((index = 0; index < completions; index++)); do
    JOB_COMPLETION_INDEX=$index SHARDS=$shards SWEEP=$sweep RESULTS=$work/kubernetes/pod-$index \
        PATH="$(dirname "$bin"):$PATH" CI=true sh -c "$command" > /dev/null
done
same_as_single_run "$work/kubernetes" "kubernetes (JOB_COMPLETION_INDEX 0..3)"

# Slurm: the array script, as `sbatch --array=1-4` would start it.
for task in 1 2 3 4; do
    SLURM_ARRAY_TASK_ID=$task SLURM_ARRAY_TASK_COUNT=4 SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_MAX=4 \
        SLURM_CPUS_PER_TASK=2 FORKCACHE=$bin CI=true \
        bash deploy/slurm/forkcache-sweep.sbatch "$sweep" "$work/slurm" > /dev/null
done
same_as_single_run "$work/slurm" "slurm (array tasks 1..4)"

# A missing shard is refused (exit 1), naming it.
rm "$work/slurm/sweep-3-of-4.meta.json"
if "$bin" merge-shards "$work/slurm" 2> "$work/missing.err"; then
    echo "merge-shards accepted a set without shard 3" >&2
    exit 1
fi
grep -q "missing shard 3 of 4" "$work/missing.err"
echo "a missing shard is refused: $(cat "$work/missing.err")"
