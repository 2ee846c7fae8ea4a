#!/usr/bin/env python3
"""Independent reader of Claude Code transcripts: sums the usage of every request, the way the
transcript reference says to (one request per requestId across all files, its last line's usage,
the parent's own line over a fork child's inherited copy;
agent_progress echoes included; <synthetic> lines and torn lines skipped). Shares no code with
forkcache. Prints {"requests", "input_tokens", "cache_read_input_tokens",
"cache_creation_input_tokens", "output_tokens"} for the files and directories given.

    python3 tests/claude_code_totals.py PATH...
"""
import json
import os
import sys

FIELDS = ["input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "output_tokens"]


def files(paths):
    for path in paths:
        if os.path.isdir(path):
            for root, _, names in sorted(os.walk(path)):
                yield from (os.path.join(root, n) for n in sorted(names) if n.endswith(".jsonl"))
        else:
            yield path


def assistant_lines(path):
    with open(path, encoding="utf-8") as f:
        for text in f:
            try:
                line = json.loads(text)
            except ValueError:
                continue
            if not isinstance(line, dict):
                continue
            data = line.get("data") if line.get("type") == "progress" else None
            if isinstance(data, dict) and data.get("type") == "agent_progress":
                line = dict(data.get("message") or {}, isSidechain=True)
            if line.get("type") == "assistant":
                yield line


def absurd(usage):
    """A count above 1e9 tokens is no real request's: such a line is skipped."""
    split = usage.get("cache_creation") if isinstance(usage.get("cache_creation"), dict) else {}
    counts = [usage.get(f) for f in FIELDS] + list(split.values())
    return any(isinstance(n, int) and n > 1_000_000_000 for n in counts)


def totals(paths):
    last = {}
    for path in files(paths):
        for line in assistant_lines(path):
            message = line.get("message") or {}
            if message.get("model") == "<synthetic>" or "usage" not in message:
                continue
            if absurd(message["usage"]):
                continue
            key = line.get("requestId") or message.get("id")
            # A fork child's file copies parent lines; the main chain's own line wins.
            main = line.get("isSidechain") is False
            if key not in last or main or not last[key][0]:
                last[key] = (main, message["usage"])
    sums = {"requests": len(last)}
    for field in FIELDS:
        sums[field] = sum(usage.get(field) or 0 for _, usage in last.values())
    return sums


if __name__ == "__main__":
    print(json.dumps(totals(sys.argv[1:]), sort_keys=True))
