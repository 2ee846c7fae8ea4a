# Shared by the real-client checks: where things live, starting and stopping `forkcache serve`,
# and the loud SKIPPED line when a package registry cannot be reached (a failure under CI=true).
# Source it; it expects `set -euo pipefail` in the caller.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# Installed clients are kept here between runs (a clean clone installs them afresh).
CLIENTS_DIR="${FORKCACHE_CLIENTS_DIR:-$ROOT/target/clients}"
FORKCACHE_BIN="${FORKCACHE_BIN:-$ROOT/target/release/forkcache}"

# build_forkcache: the release binary, unless FORKCACHE_BIN points at one already.
build_forkcache() {
  if [[ -z "${FORKCACHE_BIN_PREBUILT:-}" ]]; then
    (cd "$ROOT" && cargo build --release --quiet)
  fi
}

# start_serve LOG ARGS...: runs `forkcache serve --addr 127.0.0.1:0 ARGS...` in the background,
# logging to LOG; sets SERVER_PID and BASE_URL once it listens.
start_serve() {
  local log="$1"
  shift
  "$FORKCACHE_BIN" serve --addr 127.0.0.1:0 "$@" >"$log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 100); do
    if grep -q "listening on" "$log" 2>/dev/null; then
      BASE_URL="$(sed -n 's/^forkcache serve listening on //p' "$log" | head -n 1)"
      return 0
    fi
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      cat "$log" >&2
      echo "forkcache serve exited before listening" >&2
      return 1
    fi
    sleep 0.1
  done
  echo "forkcache serve did not start listening" >&2
  return 1
}

# start_server LOG ARGS...: start_serve; SERVE_URL is the server's URL. With
# FORKCACHE_VIA_PROXY=1 (scripts/clients/via-proxy.sh) it also puts `forkcache proxy` in front of
# the server, recording to proxy.jsonl (log proxy.log) beside LOG; BASE_URL is then the proxy's.
# With FORKCACHE_SERVE_COMPRESS=1 the server compresses its responses (`serve --compress`).
start_server() {
  if [[ "${FORKCACHE_SERVE_COMPRESS:-}" == 1 ]]; then
    start_serve "$@" --compress
  else
    start_serve "$@"
  fi
  SERVE_URL="$BASE_URL"
  export FORKCACHE_STATS_URL="$SERVE_URL"
  if [[ "${FORKCACHE_VIA_PROXY:-}" != 1 ]]; then
    return 0
  fi
  PROXY_DIR="$(dirname "$1")"
  local log="$PROXY_DIR/proxy.log"
  # FORKCACHE_PROXY_ARGS: more proxy flags (scripts/live-page-check.sh: --require-key).
  # shellcheck disable=SC2086
  "$FORKCACHE_BIN" proxy --addr 127.0.0.1:0 --upstream "$SERVE_URL" --trace "$PROXY_DIR/proxy.jsonl" \
    ${FORKCACHE_PROXY_ARGS:-} >"$log" 2>&1 &
  PROXY_PID=$!
  for _ in $(seq 1 100); do
    if grep -q "listening on" "$log" 2>/dev/null; then
      BASE_URL="$(sed -n 's/^forkcache proxy listening on \([^ ]*\).*/\1/p' "$log" | head -n 1)"
      echo "through forkcache proxy at $BASE_URL"
      return 0
    fi
    sleep 0.1
  done
  cat "$log" >&2
  echo "forkcache proxy did not start listening" >&2
  return 1
}

# check_via_proxy SERVE_TRACE KEY: after stop_server, when a proxy stood in front, checks that
# its trace equals the server's body for body, replays with 100% agreement (the upstream is the
# same simulator: this proves plumbing, not fidelity), and that no file it wrote holds KEY.
check_via_proxy() {
  if [[ "${FORKCACHE_VIA_PROXY:-}" != 1 ]]; then
    return 0
  fi
  "$FORKCACHE_BIN" replay --json "$PROXY_DIR/proxy.jsonl" >"$PROXY_DIR/proxy-replay.json"
  FORKCACHE_EXPECT_COMPRESSED="${FORKCACHE_SERVE_COMPRESS:-}" \
    python3 "$ROOT/scripts/clients/check_proxy.py" "$1" "$PROXY_DIR/proxy.jsonl" "$PROXY_DIR/proxy-replay.json" "$2" \
    "$PROXY_DIR/proxy.jsonl" "$PROXY_DIR/proxy.log"
}

# stop_server: SIGTERM to the proxy (if any) and the server (each prints its summary), then wait.
stop_server() {
  if [[ -n "${PROXY_PID:-}" ]] && kill -0 "$PROXY_PID" 2>/dev/null; then
    kill -TERM "$PROXY_PID"
    wait "$PROXY_PID" || true
  fi
  PROXY_PID=""
  if [[ -n "${SERVER_PID:-}" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID"
    wait "$SERVER_PID" || true
  fi
  SERVER_PID=""
}

# skipped WHAT WHY: the loud line shown when a client could not be installed offline. Under
# CI=true a client that cannot be installed fails the run instead: CI must never pass a check
# it did not run.
skipped() {
  echo
  echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
  echo "!!! SKIPPED: $1 -- $2"
  echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
  echo
  if [[ "${CI:-}" == "true" ]]; then
    echo "FAIL: CI=true and $1 could not run" >&2
    exit 1
  fi
}

# npm_reachable: whether the npm registry answers.
npm_reachable() {
  timeout 30 npm ping >/dev/null 2>&1
}

# pypi_reachable: whether pip can reach its index.
pypi_reachable() {
  timeout 60 "$1" -m pip download --no-deps --dest "$(mktemp -d)" --quiet pip >/dev/null 2>&1
}

# npm_install DIR PACKAGE@VERSION WHAT: installs the package into DIR unless it is there already.
# Returns 1 after a loud SKIPPED line when the registry is unreachable; exits on other failures.
npm_install() {
  local dir="$1" package="$2" what="$3"
  if [[ -d "$dir/node_modules/${package%@*}" ]]; then
    return 0
  fi
  mkdir -p "$dir"
  if (cd "$dir" && npm init -y >/dev/null && npm install --silent --no-audit --no-fund "$package"); then
    return 0
  fi
  if npm_reachable; then
    echo "npm could not install $package" >&2
    exit 1
  fi
  skipped "$what" "the npm registry is unreachable, $package could not be installed"
  return 1
}
