#!/usr/bin/env bash
# The official Python SDK (pinned) against `forkcache serve`: the usage it parses must equal what
# `forkcache replay` computes from the server's trace. Installs the SDK in a virtualenv.
set -euo pipefail
source "$(dirname "$0")/common.sh"
VERSION="${ANTHROPIC_PY_VERSION:-2.12.0}"
# FORKCACHE_PY_DECODERS=1: a separate virtualenv that also holds `brotli` and `backports.zstd`,
# with which the SDK's HTTP client (httpx2) decodes br and zstd and asks for them
# (scripts/clients/via-proxy.sh uses it). On Python 3.13 and below httpx2 reads zstd through
# `backports.zstd`, not `zstandard`.
if [[ "${FORKCACHE_PY_DECODERS:-}" == 1 ]]; then
  PACKAGES=("anthropic==$VERSION" "brotli==1.2.1" "backports.zstd==1.8.0")
  VENV="$CLIENTS_DIR/python-sdk-$VERSION-decoders"
  IMPORTS="import anthropic, brotli, backports.zstd"
else
  PACKAGES=("anthropic==$VERSION")
  VENV="$CLIENTS_DIR/python-sdk-$VERSION"
  IMPORTS="import anthropic"
fi

if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c "$IMPORTS" 2>/dev/null; then
  python3 -m venv "$VENV"
  if ! "$VENV/bin/pip" install --quiet --disable-pip-version-check "${PACKAGES[@]}"; then
    if pypi_reachable "$VENV/bin/python"; then
      echo "pip could not install ${PACKAGES[*]}" >&2
      exit 1
    fi
    skipped "Python SDK check" "PyPI is unreachable, anthropic==$VERSION could not be installed"
    exit 0
  fi
fi

build_forkcache
RUN="$(mktemp -d)"
trap 'stop_server; rm -rf "$RUN"' EXIT
# --strict: every body the SDK sends must use only fields the API documents.
start_server "$RUN/serve.log" --strict --script "$ROOT/fixtures/scripts/sdk-clients.json" --trace "$RUN/trace.jsonl"
echo "python SDK $VERSION against $BASE_URL"
"$VENV/bin/python" "$ROOT/scripts/clients/python_sdk.py" "$BASE_URL" "$RUN/client.json"
stop_server
check_via_proxy "$RUN/trace.jsonl" python-sdk
"$FORKCACHE_BIN" replay --json "$RUN/trace.jsonl" >"$RUN/replay.json"
python3 "$ROOT/scripts/clients/check_usage.py" "$RUN/client.json" "$RUN/replay.json"
