#!/usr/bin/env bash
# The Codex CLI (pinned, from npm) against `forkcache serve`'s Responses route, headless: two turns
# of one thread (`codex exec`, then `codex exec resume --last`), with CODEX_HOME in a scratch
# directory whose config.toml points a custom model provider at the server (wire_api =
# "responses", a dummy key in an env var: no ChatGPT login). Then `forkcache import codex` reads
# the rollout file Codex wrote, and its totals (requests, input, cached, output, cost) must equal
# the server's `openai` stats row: what serve returned is what Codex recorded is what import reads.
# This proves the plumbing, not fidelity: the usage is the simulator's own, not OpenAI's.
set -euo pipefail
source "$(dirname "$0")/common.sh"
VERSION="${CODEX_VERSION:-0.171.0}"
DIR="$CLIENTS_DIR/codex-cli-$VERSION"
npm_install "$DIR" "@openai/codex@$VERSION" "Codex CLI check" || exit 0
CODEX="$DIR/node_modules/.bin/codex"

build_forkcache
# Not under /tmp: Codex declines to set up its helper binaries in a temporary directory.
mkdir -p "$ROOT/target"
RUN="$(mktemp -d "$ROOT/target/codex-run.XXXXXX")"
trap 'stop_server; rm -rf "$RUN"' EXIT
start_serve "$RUN/serve.log"
echo "Codex CLI $VERSION against $BASE_URL"

export CODEX_HOME="$RUN/codex-home"
mkdir -p "$CODEX_HOME" "$RUN/work"
cat >"$CODEX_HOME/config.toml" <<TOML
model = "gpt-5.5"
model_provider = "forkcache"

[model_providers.forkcache]
name = "forkcache"
base_url = "$BASE_URL/v1"
env_key = "FORKCACHE_CODEX_KEY"
wire_api = "responses"
TOML
export FORKCACHE_CODEX_KEY="sk-forkcache-dummy"
(cd "$RUN/work" && "$CODEX" exec --skip-git-repo-check "Say hello." </dev/null >"$RUN/turn1.txt" 2>&1) ||
  { cat "$RUN/turn1.txt" >&2; echo "codex exec failed" >&2; exit 1; }
(cd "$RUN/work" && "$CODEX" exec --skip-git-repo-check resume --last "Say it again." </dev/null >"$RUN/turn2.txt" 2>&1) ||
  { cat "$RUN/turn2.txt" >&2; echo "codex exec resume failed" >&2; exit 1; }
tail -n 3 "$RUN/turn2.txt"

curl -sf "$BASE_URL/forkcache/stats" >"$RUN/stats.json"
stop_server
mapfile -t ROLLOUTS < <(find "$CODEX_HOME/sessions" -name 'rollout-*.jsonl')
if [[ "${#ROLLOUTS[@]}" -ne 1 ]]; then
  echo "expected one rollout file, found ${#ROLLOUTS[@]}" >&2
  exit 1
fi
# The provider is named forkcache in config.toml; import prices only `openai` unless told.
"$FORKCACHE_BIN" import codex --json --price-provider forkcache "${ROLLOUTS[0]}" >"$RUN/import.json"
python3 "$ROOT/scripts/clients/check_codex.py" "$RUN/import.json" "$RUN/stats.json"
