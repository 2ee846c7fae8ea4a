#!/usr/bin/env bash
# The official OpenAI Python SDK (pinned) against `forkcache serve`'s OpenAI routes: Responses and
# Chat Completions, streamed and not; cached_tokens must grow on a repeated long prefix, and the
# usage the SDK parsed must add up to the server's `openai` stats row. Installs the SDK in a
# virtualenv. This proves the plumbing (the shapes a real client parses), not fidelity: the
# numbers are the simulator's own.
set -euo pipefail
source "$(dirname "$0")/common.sh"
VERSION="${OPENAI_PY_VERSION:-3.57.0}"
VENV="$CLIENTS_DIR/openai-sdk-$VERSION"

if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c "import openai" 2>/dev/null; then
  python3 -m venv "$VENV"
  if ! "$VENV/bin/pip" install --quiet --disable-pip-version-check "openai==$VERSION"; then
    if pypi_reachable "$VENV/bin/python"; then
      echo "pip could not install openai==$VERSION" >&2
      exit 1
    fi
    skipped "OpenAI SDK check" "PyPI is unreachable, openai==$VERSION could not be installed"
    exit 0
  fi
fi

build_forkcache
RUN="$(mktemp -d)"
trap 'stop_server; rm -rf "$RUN"' EXIT
start_serve "$RUN/serve.log"
echo "openai SDK $VERSION against $BASE_URL"
"$VENV/bin/python" "$ROOT/scripts/clients/openai_sdk.py" "$BASE_URL"
