#!/usr/bin/env python3
"""Independent reading of Codex rollout files (stdlib only, no code shared with forkcache).

Prints one JSON object per file: requests and recorded totals (input includes cached, output
includes reasoning), by the rules of the rollout format: a token_count record is a request
unless its info is null, its last usage has zero input and output (an estimate after a
compaction) or its total repeats the previous one; a total that rose by more than the record's
own usage holds one more request whose record is missing; a forked file's records before its
second task_started are its parent's, and the last of their totals is subtracted.
"""
import json
import sys

FIELDS = ["input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens"]


def read(path):
    forked = False
    seen_meta = False
    task_starts = 0
    previous = {f: 0 for f in FIELDS}
    inherited = {f: 0 for f in FIELDS}
    requests = 0
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            record = json.loads(line)
            kind, payload = record.get("type"), record.get("payload") or {}
            if kind == "session_meta" and not seen_meta:
                seen_meta = True
                forked = bool(payload.get("forked_from_id"))
            if kind != "event_msg":
                continue
            if payload.get("type") == "task_started":
                task_starts += 1
            if payload.get("type") != "token_count" or payload.get("info") is None:
                continue
            total = {f: payload["info"]["total_token_usage"].get(f, 0) for f in FIELDS}
            last = {f: payload["info"]["last_token_usage"].get(f, 0) for f in FIELDS}
            if forked and task_starts < 2:
                inherited = previous = total
                continue
            if last["input_tokens"] == 0 and last["output_tokens"] == 0 and last["cached_input_tokens"] == 0:
                continue
            if total == previous:
                continue
            if total["input_tokens"] - previous["input_tokens"] > last["input_tokens"]:
                requests += 1  # the missing record's request
            requests += 1
            previous = total
    totals = {f: previous[f] - inherited[f] for f in FIELDS}
    return {"requests": requests, **totals}


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(json.dumps(read(name), sort_keys=True))
