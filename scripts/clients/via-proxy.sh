#!/usr/bin/env bash
# The real clients again, each through `forkcache proxy` in front of `forkcache serve`, once with
# plain responses and once with `serve --compress` (gzip, br or zstd as the client asks; streams
# flushed per event): the clients' own checks must still pass, and the proxy's trace must equal
# the server's body for body, with every usage parsed, replay with 100% agreement and hold no key
# (scripts/clients/check_proxy.py). The Python SDK and Claude Code stream, the TypeScript SDK
# and the Python SDK also send non-streaming requests: both kinds are covered both ways.
#
# Then the Python SDK once more, with `brotli` and `backports.zstd` installed in its virtualenv
# so its HTTP client (httpx2) can decode br and zstd. It then asks `gzip, deflate, br, zstd`
# (python_sdk.py prints what it sends), and `serve --compress` takes the first listed, gzip; so
# two further runs set the header to br and to zstd alone: the SDK decodes those answers itself,
# and the proxy must decode them from a real client's exchange (check_proxy.py,
# FORKCACHE_EXPECT_ENCODING).
set -euo pipefail
cd "$(dirname "$0")/../.."
export FORKCACHE_VIA_PROXY=1
for compress in 0 1; do
  export FORKCACHE_SERVE_COMPRESS="$compress"
  echo "== through the proxy, serve --compress: $([[ $compress == 1 ]] && echo on || echo off)"
  bash scripts/clients/python-sdk.sh
  bash scripts/clients/typescript-sdk.sh
  bash scripts/claude-code-harness.sh
done
export FORKCACHE_SERVE_COMPRESS=1 FORKCACHE_PY_DECODERS=1
for encoding in "" br zstd; do
  asked="${encoding:-the SDK default}"
  echo "== through the proxy, serve --compress, Python SDK with brotli and backports.zstd, accept-encoding: $asked"
  FORKCACHE_ACCEPT_ENCODING="$encoding" FORKCACHE_EXPECT_ENCODING="${encoding:-gzip}" bash scripts/clients/python-sdk.sh
done
