#!/usr/bin/env bash
# forkcache and its closest open-source analogue side by side on one trace: penguin-harness's
# TypeScript `PromptCacheSim` test helper (packages/core/test/helpers/prompt-cache-sim.ts, not
# published on npm). Its source is not vendored here: pass a checkout of penguin-harness.
#
#   benches/peers/run.sh PATH_TO_PENGUIN_HARNESS [TRACE.jsonl]
#
# The trace defaults to the engine bench's (`cargo run --release --example synth_trace`).
# Prints both throughputs (file read to last answer) and both cache answers (token totals).
set -euo pipefail
cd "$(dirname "$0")/../.."

penguin=${1:?usage: benches/peers/run.sh PATH_TO_PENGUIN_HARNESS [TRACE.jsonl]}
source=$penguin/packages/core/test/helpers/prompt-cache-sim.ts
work=target/peers
mkdir -p "$work"

# TypeScript to JavaScript with esbuild: types stripped, nothing else changed.
if [[ ! -x $work/node_modules/.bin/esbuild ]]; then
    (cd "$work" && npm install --silent --no-save --no-package-lock esbuild@0.28.2)
fi
"$work/node_modules/.bin/esbuild" "$source" --format=esm --platform=node --log-level=warning \
    --outfile="$work/prompt-cache-sim.mjs"
# The helper imports the harness's miss diagnosis for its reports (explainMiss,
# formatCacheReport); the simulation never calls it, so two inert exports stand in.
printf '%s\n' 'export const diagnoseCacheMiss = () => ({ type: "none" });' \
    'export const describeMissReason = () => "";' > "$work/prefix-cache.js"

cargo build --release --quiet
trace=${2:-$work/trace.jsonl}
if [[ -z ${2:-} ]]; then
    cargo run --release --quiet --example synth_trace > "$trace"
fi

start=$EPOCHREALTIME
target/release/forkcache replay "$trace" --json > "$work/forkcache.json"
end=$EPOCHREALTIME
seconds=$(awk "BEGIN { print $end - $start }")

node benches/peers/prompt_cache_sim.mjs "$work/prompt-cache-sim.mjs" "$trace" "$work/forkcache.json" "$seconds"
