#!/usr/bin/env bash
# The official TypeScript SDK (pinned) against `forkcache serve`: the usage it parses must equal
# what `forkcache replay` computes from the server's trace. Installs the SDK with npm.
set -euo pipefail
source "$(dirname "$0")/common.sh"
VERSION="${ANTHROPIC_TS_VERSION:-1.12.0}"
DIR="$CLIENTS_DIR/typescript-sdk-$VERSION"

npm_install "$DIR" "@anthropic-ai/sdk@$VERSION" "TypeScript SDK check" || exit 0

build_forkcache
RUN="$(mktemp -d)"
trap 'stop_server; rm -rf "$RUN"' EXIT
# --strict: every body the SDK sends must use only fields the API documents.
start_server "$RUN/serve.log" --strict --script "$ROOT/fixtures/scripts/sdk-clients.json" --trace "$RUN/trace.jsonl"
echo "TypeScript SDK $VERSION against $BASE_URL"
# The script imports the SDK from the install directory's node_modules.
cp "$ROOT/scripts/clients/typescript_sdk.mjs" "$DIR/check.mjs"
node "$DIR/check.mjs" "$BASE_URL" "$RUN/client.json"
stop_server
check_via_proxy "$RUN/trace.jsonl" typescript-sdk
"$FORKCACHE_BIN" replay --json "$RUN/trace.jsonl" >"$RUN/replay.json"
python3 "$ROOT/scripts/clients/check_usage.py" "$RUN/client.json" "$RUN/replay.json"
