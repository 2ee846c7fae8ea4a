#!/usr/bin/env bash
# Every Codex rollout (hand-made in fixtures/codex/, real ones in ../shared/corpus/codex/ when
# present): `forkcache import codex` requests and totals equal the independent reader's
# (scripts/codex_totals.py, no shared code).
set -euo pipefail
source "$(dirname "$0")/clients/common.sh"
build_forkcache
status=0
files=("$ROOT"/fixtures/codex/*.jsonl)
if [[ -d "$ROOT/../shared/corpus/codex" ]]; then
  files+=("$ROOT"/../shared/corpus/codex/*.jsonl)
else
  echo "SKIPPED the real sessions: ../shared/corpus/codex is absent"
fi
for file in "${files[@]}"; do
  ours="$("$FORKCACHE_BIN" import codex "$file" --json --price-provider pawtronic | python3 -c '
import json, sys
t = json.load(sys.stdin)["totals"]
print(json.dumps({"requests": t["requests"], "input_tokens": t["input"], "cached_input_tokens": t["cached"],
                  "output_tokens": t["output"], "reasoning_output_tokens": t["reasoning"]}, sort_keys=True))
')" || true
  theirs="$(python3 "$ROOT/scripts/codex_totals.py" "$file")"
  if [[ "$ours" == "$theirs" ]]; then
    echo "ok    $(basename "$file"): $ours"
  else
    echo "FAIL  $(basename "$file"): forkcache $ours, independent reader $theirs" >&2
    status=1
  fi
done
exit $status
