"""Reads a Claude Code run served by `forkcache serve` and checks that forks shared the cache.

Usage: check_forks.py TRACE.jsonl REPLAY.json CLAUDE_OUTPUT.json

The trace says what Claude Code sent; `forkcache replay --json` of it says what each request
read and wrote. Checks: the run succeeded; one parent request carries the prompt; exactly two
fork children (their last user message holds Claude Code's <fork-boilerplate> directive); and
each child read at least the prefix the parent wrote — the parent's whole cached prefix — from
the cache; every request's model is in forkcache's price table; and forkcache's total cost is
within 0.5% of the `total_cost_usd` Claude Code computed for the same usage (it prices with a
table of its own). Prints a request-by-request table.
"""

import json
import sys

MARKER = "FORKCACHE_SPAWN_TWO_FORKS"
# How far forkcache's total may be from Claude Code's own, relative to Claude Code's.
COST_TOLERANCE = 0.005


def text_of(content):
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if block.get("type") == "text":
            parts.append(block.get("text", ""))
        elif block.get("type") == "tool_result":
            inner = block.get("content")
            parts.append(inner if isinstance(inner, str) else text_of(inner or []))
    return "\n".join(parts)


def role_of(body):
    last_user = [m for m in body.get("messages", []) if m.get("role") == "user"][-1]
    text = text_of(last_user["content"])
    if "<fork-boilerplate>" in text:
        return "fork child"
    if "<task-notification>" in text:
        return "parent: fork reported"
    if any(b.get("type") == "tool_result" for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]):
        return "parent: after tool results"
    if MARKER in text:
        return "parent"
    return "other"


# Session markers (one per server start) are not requests.
trace = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
trace = [line for line in trace if "forkcache_session" not in line]
replayed = json.load(open(sys.argv[2]))
claude = json.load(open(sys.argv[3]))
requests = replayed["requests"]
assert len(trace) == len(requests), "one replayed request per trace line"

print(f"{'#':>3} {'at_ms':>7}  {'request':<28} {'read':>8} {'written':>8} {'uncached':>8}  miss")
rows = []
for line, priced in zip(trace, requests):
    role = role_of(line["body"]) if isinstance(line.get("body"), dict) else "unreadable"
    usage = priced.get("usage") or {}
    miss = priced.get("miss") or {}
    rows.append((role, usage))
    miss_text = f"{miss.get('cause')} at {miss.get('path')} ({miss.get('tokens_missed')} tokens)" if miss else "-"
    print(
        f"{priced['index']:>3} {priced['at_ms']:>7}  {role:<28} {usage.get('cache_read_input_tokens', 0):>8} "
        f"{usage.get('cache_creation_input_tokens', 0):>8} {usage.get('input_tokens', 0):>8}  {miss_text}"
    )

failures = []
if claude.get("is_error") or claude.get("subtype") != "success":
    failures.append(f"Claude Code reported an error: {json.dumps(claude)[:300]}")
parents = [usage for role, usage in rows if role == "parent"]
children = [usage for role, usage in rows if role == "fork child"]
if len(parents) != 1:
    failures.append(f"expected one parent request carrying {MARKER}, found {len(parents)}")
if len(children) != 2:
    failures.append(f"expected two fork children, found {len(children)}")
if parents and children:
    parent_prefix = parents[0]["cache_creation_input_tokens"] + parents[0]["cache_read_input_tokens"]
    for number, child in enumerate(children, 1):
        if parent_prefix == 0 or child["cache_read_input_tokens"] < parent_prefix:
            failures.append(
                f"fork child {number} read {child['cache_read_input_tokens']} tokens, "
                f"less than the parent's cached prefix of {parent_prefix}"
            )
    if not failures:
        print(
            f"\nboth fork children read the parent's cached prefix ({parent_prefix} tokens): "
            f"{[c['cache_read_input_tokens'] for c in children]}"
        )
totals = replayed["totals"]
print(
    f"forkcache: {totals['requests']} requests, hit rate {totals['hit_rate'] * 100:.1f}%, "
    f"cost ${totals['cost_usd']:.6f}; Claude Code reported total_cost_usd ${claude.get('total_cost_usd', 0):.6f}"
)


def unpriced_models(requests):
    """Models forkcache could not price: flagged unknown, or without a cost."""
    return sorted(
        {r.get("model", "?") for r in requests if "usage" in r and (r.get("unknown_model") or r.get("cost_usd") is None)}
    )


unpriced = unpriced_models(requests)
if unpriced:
    failures.append(f"not in forkcache's price table: {', '.join(unpriced)} (its cost cannot be checked)")
reported = claude.get("total_cost_usd")
if not isinstance(reported, (int, float)) or reported <= 0:
    failures.append(f"Claude Code reported no total_cost_usd ({reported!r})")
elif not unpriced:
    difference = abs(totals["cost_usd"] - reported) / reported
    if difference > COST_TOLERANCE:
        failures.append(
            f"forkcache's cost ${totals['cost_usd']:.6f} differs from Claude Code's ${reported:.6f} "
            f"by {difference * 100:.2f}% (more than {COST_TOLERANCE * 100:.1f}%)"
        )
    else:
        print(f"cost matches Claude Code's own within {difference * 100:.3f}%")
if failures:
    for failure in failures:
        print(f"FAIL: {failure}")
    sys.exit(1)
