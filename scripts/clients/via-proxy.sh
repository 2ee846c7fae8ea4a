#!/usr/bin/env bash
# The real clients again, each through `forkcache proxy` in front of `forkcache serve`: the
# clients' own checks must still pass, and the proxy's trace must equal the server's body for
# body, replay with 100% agreement and hold no key (scripts/clients/check_proxy.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
export FORKCACHE_VIA_PROXY=1
bash scripts/clients/python-sdk.sh
bash scripts/clients/typescript-sdk.sh
bash scripts/claude-code-harness.sh
