"""Checks that `forkcache import codex` read from Codex's rollout what `forkcache serve` returned:
the import's totals equal the server's `openai` stats row, and the second turn read the first
turn's prefix from the cache.

Usage: check_codex.py IMPORT_JSON STATS_JSON
"""

import json
import sys

with open(sys.argv[1]) as f:
    imported = json.load(f)
with open(sys.argv[2]) as f:
    served = json.load(f)["openai"]

totals = imported["totals"]
pairs = {
    "requests": (totals["requests"], served["requests"]),
    "input tokens": (totals["input"], served["input_tokens"]),
    "cached tokens": (totals["cached"], served["cached_tokens"]),
    "output tokens": (totals["output"], served["output_tokens"]),
    "reasoning tokens": (totals["reasoning"], served["reasoning_tokens"]),
    "cost (nano-USD)": (totals["cost_nanousd"], served["cost_nanousd"]),
}
failed = False
for name, (read, returned) in pairs.items():
    mark = "ok" if read == returned else "MISMATCH"
    failed |= read != returned
    print(f"{name:>17}: import codex {read}, serve {returned} {mark}")
if served["rejected"]:
    print(f"serve rejected {served['rejected']} of Codex's requests", file=sys.stderr)
    failed = True
if totals["requests"] < 2 or totals["cached"] == 0:
    print("the second turn did not read the first turn's prefix from the cache", file=sys.stderr)
    failed = True
if failed:
    sys.exit(1)
print("OK: Codex's rollout totals equal what forkcache serve returned (plumbing, not fidelity)")
