#!/usr/bin/env bash
# The live page of `forkcache proxy` (GET /forkcache/) in headless Chromium during a proxied
# Claude Code run. `forkcache proxy --require-key` stands in front of `forkcache serve` (the
# Claude Code fork script); Chromium (Debian `chromium` and `chromium-driver`, driven over
# WebDriver by scripts/live_page.py) opens the page, which asks for a key; Claude Code's key is
# typed in. Then another tenant sends requests through the proxy with its own key, Claude Code
# (pinned 2.1.197) forks two sub-agents through it, and the other tenant sends more. The page
# must fill in without a reload, show that key's exchanges alone, and its rows must equal the
# proxy's feed and add up to `GET /forkcache/stats` for the key (tokens recorded and predicted,
# the cost in dollars); the console stays quiet.
#
# Usage: scripts/live-page-check.sh [DIR] [--update-docs]
#   DIR: where the run's files go (target/ci-live); --update-docs copies the screenshot to
#   docs/live-page.png. FORKCACHE_BIN: a forkcache binary to use instead of the release build.
# Under CI=true a Claude Code that cannot be installed fails the run.
set -euo pipefail
source "$(dirname "$0")/clients/common.sh"
cd "$ROOT"
DIR=target/ci-live
UPDATE_DOCS=0
for arg in "$@"; do
  case "$arg" in
    --update-docs) UPDATE_DOCS=1 ;;
    *) DIR="$arg" ;;
  esac
done
VERSION="${CLAUDE_CODE_VERSION:-2.1.197}"
KEY=forkcache-live-page
OTHER_KEY=forkcache-other-tenant

if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  sudo_if_needed=""
  [[ $(id -u) -ne 0 ]] && sudo_if_needed="sudo"
  $sudo_if_needed apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_if_needed apt-get install -y -qq --no-install-recommends chromium chromium-driver
fi
CLAUDE_DIR="$CLIENTS_DIR/claude-code-$VERSION"
CLAUDE_BIN="$CLAUDE_DIR/node_modules/.bin/claude"
npm_install "$CLAUDE_DIR" "@anthropic-ai/claude-code@$VERSION" "live page check (Claude Code)" || exit 0
build_forkcache

rm -rf "$DIR"
mkdir -p "$DIR/home" "$DIR/project"
DIR="$(realpath "$DIR")"
cleanup() {
  stop_server
  if [[ -n "${DRIVER_PID:-}" ]]; then kill "$DRIVER_PID" 2>/dev/null || true; fi
}
trap cleanup EXIT
FORKCACHE_VIA_PROXY=1 FORKCACHE_PROXY_ARGS=--require-key \
  start_server "$DIR/serve.log" --script "$ROOT/fixtures/scripts/claude-code-forks.json" --trace "$DIR/serve.jsonl"

driver_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
chromedriver --port="$driver_port" >"$DIR/chromedriver.log" 2>&1 &
DRIVER_PID=$!
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$driver_port/status" >/dev/null && break
  sleep 0.1
done

# The client: the other tenant, Claude Code, the other tenant again.
cat >"$DIR/client.sh" <<CLIENT
set -euo pipefail
other() {
  curl -sf -o /dev/null -H "x-api-key: $OTHER_KEY" -H 'content-type: application/json' \
    -d "{\"model\":\"claude-sonnet-4-6\",\"max_tokens\":64,\"messages\":[{\"role\":\"user\",\"content\":\"the other tenant, turn \$1\"}]}" \
    "$BASE_URL/v1/messages"
}
other 1
other 2
cd "$DIR/project"
env ANTHROPIC_BASE_URL="$BASE_URL" ANTHROPIC_API_KEY="$KEY" \
  DISABLE_TELEMETRY=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 \
  CLAUDE_CODE_FORK_SUBAGENT=1 HOME="$DIR/home" \
  timeout 180 "$CLAUDE_BIN" -p "FORKCACHE_SPAWN_TWO_FORKS: fork two sub-agents, one per part, then report." \
  --output-format json </dev/null >"$DIR/claude.json" 2>"$DIR/claude.err"
other 3
CLIENT

echo "Claude Code $("$CLAUDE_BIN" --version 2>/dev/null | head -n 1) through forkcache proxy --require-key at $BASE_URL"
python3 "$ROOT/scripts/live_page.py" "http://127.0.0.1:$driver_port" "$BASE_URL" "$KEY" "$OTHER_KEY" \
  "$DIR/live-page.png" -- bash "$DIR/client.sh"
stop_server
if grep -q -e "$KEY" -e "$OTHER_KEY" "$DIR/proxy.log" "$DIR/proxy.jsonl" "$DIR/serve.log" "$DIR/serve.jsonl"; then
  echo "live page check failed: a key reached a log or a trace" >&2
  exit 1
fi
if [[ "$UPDATE_DOCS" == 1 ]]; then
  cp "$DIR/live-page.png" "$ROOT/docs/live-page.png"
  echo "docs/live-page.png updated"
fi
