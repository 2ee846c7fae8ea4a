#!/usr/bin/env bash
# Runs the Claude Code CLI headless against `forkcache serve` and shows, request by request,
# which of its bytes hit the prompt cache. The shipped script makes the parent fork two
# sub-agents (CLAUDE_CODE_FORK_SUBAGENT=1, Agent tool, subagent_type "fork"); the run passes
# when Claude Code exits 0, the trace holds the parent and two fork children, both children
# read the parent's cached prefix, every model is in the price table, and forkcache's total
# cost is within 0.5% of the `total_cost_usd` Claude Code computed for the same usage.
#
#   scripts/claude-code-harness.sh                      # the pinned version, installed from npm
#   CLAUDE_CODE_VERSION=2.1.330 scripts/claude-code-harness.sh   # any published version
#   CLAUDE_BIN=$(command -v claude) scripts/claude-code-harness.sh   # your own installation
#   KEEP=/tmp/run scripts/claude-code-harness.sh        # keep the trace, replay and output there
#   PRICES=my-prices.json scripts/claude-code-harness.sh          # price with another table
#   FORK_ENV=0 CLAUDE_CODE_VERSION=2.1.330 scripts/claude-code-harness.sh   # forks without the variable
#
# Claude Code talks only to the loopback server: the quiet variables below turn off telemetry,
# updates and side traffic. Extra arguments are passed to `forkcache serve` (e.g. --policy).
# Under CI=true a version that cannot be installed fails the run.
set -euo pipefail
source "$(dirname "$0")/clients/common.sh"
VERSION="${CLAUDE_CODE_VERSION:-2.1.197}"
PROMPT="FORKCACHE_SPAWN_TWO_FORKS: fork two sub-agents, one per part, then report."

if [[ -z "${CLAUDE_BIN:-}" ]]; then
  DIR="$CLIENTS_DIR/claude-code-$VERSION"
  CLAUDE_BIN="$DIR/node_modules/.bin/claude"
  npm_install "$DIR" "@anthropic-ai/claude-code@$VERSION" "Claude Code harness" || exit 0
fi

FORK_VARS=(CLAUDE_CODE_FORK_SUBAGENT=1)
if [[ "${FORK_ENV:-1}" == "0" ]]; then
  FORK_VARS=()
fi
PRICE_ARGS=()
if [[ -n "${PRICES:-}" ]]; then
  PRICE_ARGS=(--prices "$PRICES")
fi

build_forkcache
RUN="${KEEP:-$(mktemp -d)}"
mkdir -p "$RUN"
rm -rf "$RUN/home" "$RUN/project" "$RUN/trace.jsonl"
mkdir -p "$RUN/home" "$RUN/project"
cleanup() {
  stop_server
  if [[ -z "${KEEP:-}" ]]; then rm -rf "$RUN"; fi
}
trap cleanup EXIT
start_server "$RUN/serve.log" --script "$ROOT/fixtures/scripts/claude-code-forks.json" --trace "$RUN/trace.jsonl" \
  ${PRICE_ARGS[@]+"${PRICE_ARGS[@]}"} "$@"
echo "Claude Code $("$CLAUDE_BIN" --version 2>/dev/null | head -n 1) against $BASE_URL"

status=0
(
  cd "$RUN/project"
  env ANTHROPIC_BASE_URL="$BASE_URL" ANTHROPIC_API_KEY=forkcache-harness \
    DISABLE_TELEMETRY=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 \
    ${FORK_VARS[@]+"${FORK_VARS[@]}"} HOME="$RUN/home" \
    timeout 180 "$CLAUDE_BIN" -p "$PROMPT" --output-format json \
    --session-id 11111111-2222-4333-8444-555555555555 </dev/null >"$RUN/claude.json" 2>"$RUN/claude.err"
) || status=$?
stop_server
if [[ $status -ne 0 ]]; then
  echo "FAIL: claude exited with status $status" >&2
  cat "$RUN/claude.err" >&2
  exit 1
fi
check_via_proxy "$RUN/trace.jsonl" forkcache-harness
"$FORKCACHE_BIN" replay --json ${PRICE_ARGS[@]+"${PRICE_ARGS[@]}"} "$RUN/trace.jsonl" >"$RUN/replay.json"
python3 "$ROOT/scripts/clients/check_forks.py" "$RUN/trace.jsonl" "$RUN/replay.json" "$RUN/claude.json"
echo "claude-code harness: passed"
if [[ -n "${KEEP:-}" ]]; then
  echo "kept in $KEEP: trace.jsonl (forkcache replay it), replay.json, claude.json, serve.log"
fi
