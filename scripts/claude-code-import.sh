#!/usr/bin/env bash
# The import round trip: Claude Code (the pinned version, forks on) runs against `forkcache
# serve` with HOME at a scratch directory (scripts/claude-code-harness.sh), then
# `forkcache import claude-code` reads the transcripts it wrote (main and sub-agent files).
# Passes when every imported request's usage is one the server returned, both fork children are
# linked to the parent request that spawned them, the prediction agrees on every request, and
# the totals equal those of the independent reader (tests/claude_code_totals.py).
#
# Against `serve` the agreement proves the plumbing (the server and the prediction share one
# cache model), not the model's fidelity to the real API.
set -euo pipefail
source "$(dirname "$0")/clients/common.sh"
RUN="${KEEP:-$(mktemp -d)}"
cleanup() {
  if [[ -z "${KEEP:-}" ]]; then rm -rf "$RUN"; fi
}
trap cleanup EXIT
KEEP="$RUN" bash "$ROOT/scripts/claude-code-harness.sh" "$@"
if [[ ! -f "$RUN/trace.jsonl" ]]; then
  echo "claude-code import: no run to import (the harness was skipped)"
  exit 0
fi
PROJECTS="$RUN/home/.claude/projects"
"$FORKCACHE_BIN" import claude-code "$PROJECTS" --json >"$RUN/import.json"
"$FORKCACHE_BIN" import claude-code "$PROJECTS"
python3 "$ROOT/tests/claude_code_totals.py" "$PROJECTS" >"$RUN/independent.json"
python3 "$ROOT/scripts/clients/check_import.py" "$RUN/trace.jsonl" "$RUN/import.json" "$RUN/independent.json"
echo "claude-code import: passed"
