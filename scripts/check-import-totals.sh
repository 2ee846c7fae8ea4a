#!/usr/bin/env bash
# Every transcript fixture (hand-made in tests/data/claude_code/, real ones in
# fixtures/transcripts/): `forkcache import claude-code` totals equal the independent reader's
# (tests/claude_code_totals.py, no shared code).
set -euo pipefail
source "$(dirname "$0")/clients/common.sh"
build_forkcache
status=0
for fixture in "$ROOT"/tests/data/claude_code/* "$ROOT"/fixtures/transcripts/*; do
  [[ -e "$fixture" && "$fixture" != *.md ]] || continue
  ours="$("$FORKCACHE_BIN" import claude-code "$fixture" --json 2>/dev/null | python3 -c '
import json, sys
totals = json.load(sys.stdin)["totals"]
fields = ["input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "output_tokens"]
print(json.dumps({"requests": totals["requests"], **{f: totals["recorded"]["usage"][f] for f in fields}}, sort_keys=True))
')" || true
  theirs="$(python3 "$ROOT/tests/claude_code_totals.py" "$fixture")"
  if [[ "$ours" == "$theirs" ]]; then
    echo "ok    ${fixture#"$ROOT"/}: $ours"
  else
    echo "FAIL  ${fixture#"$ROOT"/}: forkcache $ours, independent reader $theirs" >&2
    status=1
  fi
done
exit $status
