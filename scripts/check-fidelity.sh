#!/usr/bin/env bash
# Regenerates docs/fidelity.md from the real traffic in ../shared/corpus (scripts/fidelity.py)
# and fails when the committed file differs, or when a gated target is missed.
#
# Gated (the issue's targets the prediction meets, and floors at what it reaches now, so that it
# cannot fall back unnoticed):
#   - agreement on the 32 transcripts (each imported alone) at least the baseline's + 1.0 point;
#   - provable breaks predicted: at least MIN_PROVABLE_BREAKS (the target: 20 of 29);
#   - all breaks predicted: at least MIN_BREAKS (the target: 25);
#   - Claude Code captures agreeing: at least MIN_CAPTURES (the target: 108 of 113);
#   - every file's `--emit-trace` replays to its import (requests, predicted usage and cost).
# The targets not met yet, reported in docs/fidelity.md only: predicted ÷ recorded cost within
# 0.98..1.02, >= 80% of sessions within 5%.
# Without ../shared/corpus (a user's clone) it says so and skips.
set -euo pipefail
source "$(dirname "$0")/clients/common.sh"
CORPUS="$ROOT/../shared/corpus"
MIN_PROVABLE_BREAKS=22
MIN_BREAKS=26
MIN_CAPTURES=108
if [[ ! -d "$CORPUS/transcripts" || ! -d "$CORPUS/captures/envelopes" ]]; then
  echo "SKIPPED: ../shared/corpus is absent; docs/fidelity.md is not regenerated"
  exit 0
fi
build_forkcache
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
figures="$(python3 "$ROOT/scripts/fidelity.py" "$FORKCACHE_BIN" "$CORPUS" "$out")"
echo "$figures"
status=0
if ! diff -u "$ROOT/docs/fidelity.md" "$out"; then
  echo "FAIL  docs/fidelity.md is not current: run scripts/check-fidelity.sh --write and commit it" >&2
  status=1
fi
if [[ "${1:-}" == "--write" ]]; then
  cp "$out" "$ROOT/docs/fidelity.md"
  status=0
fi
value() { sed -n "s/^$1=//p" <<<"$figures"; }
agreement="$(value agreement_permille)"
baseline="$(value baseline_permille)"
if (( agreement < baseline + 10 )); then
  echo "FAIL  agreement ${agreement}‰ is below the baseline's ${baseline}‰ + 10‰" >&2
  status=1
fi
provable="$(value provable_breaks)"
if (( ${provable%/*} < MIN_PROVABLE_BREAKS )); then
  echo "FAIL  provable breaks predicted $provable, below $MIN_PROVABLE_BREAKS" >&2
  status=1
fi
breaks="$(value all_breaks)"
if (( ${breaks%/*} < MIN_BREAKS )); then
  echo "FAIL  breaks predicted $breaks, below $MIN_BREAKS" >&2
  status=1
fi
captures="$(value captures_claude_code)"
if (( ${captures%/*} < MIN_CAPTURES )); then
  echo "FAIL  Claude Code captures agreeing $captures, below $MIN_CAPTURES" >&2
  status=1
fi
replayed="$(value emitted_traces_replayed)"
if (( ${replayed%/*} != ${replayed#*/} )); then
  echo "FAIL  emitted traces replaying to their import: $replayed" >&2
  status=1
fi
exit $status
