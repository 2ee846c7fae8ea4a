"""Compares the usage a client parsed with `forkcache replay --json` of the server's trace.

Usage: check_usage.py CLIENT.json REPLAY.json

CLIENT.json lists the client's Messages requests in order, each {"name", "usage": {...}} or
{"name", "error": "<type>"}. Every request must replay to exactly the usage the client parsed (or
to the same error): the numbers the client saw are the numbers forkcache computed.
"""

import json
import sys

FIELDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")

client = json.load(open(sys.argv[1]))
replayed = json.load(open(sys.argv[2]))["requests"]
if len(client) != len(replayed):
    raise SystemExit(f"{len(client)} client requests but {len(replayed)} trace lines")
for index, (seen, priced) in enumerate(zip(client, replayed)):
    if "error" in seen:
        got = priced.get("error", {}).get("type")
        if got != seen["error"]:
            raise SystemExit(f"request {index} ({seen['name']}): client saw {seen['error']}, replay says {got}")
        continue
    usage = priced.get("usage")
    if usage is None:
        raise SystemExit(f"request {index} ({seen['name']}): replay rejected it: {priced.get('error')}")
    expected = {field: usage[field] for field in FIELDS}
    expected["ephemeral_5m_input_tokens"] = usage["cache_creation"]["ephemeral_5m_input_tokens"]
    expected["ephemeral_1h_input_tokens"] = usage["cache_creation"]["ephemeral_1h_input_tokens"]
    parsed = {field: seen["usage"].get(field) for field in expected}
    if parsed != expected:
        raise SystemExit(f"request {index} ({seen['name']}): client parsed {parsed}, replay computes {expected}")
print(f"usage check: all {len(client)} requests replay to the usage the client parsed")
