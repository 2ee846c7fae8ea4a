"""The official Python SDK against `forkcache serve` (run with fixtures/scripts/sdk-clients.json).

Usage: python_sdk.py BASE_URL OUT.json

Exercises messages.create, messages.stream, create(stream=True), count_tokens, a streamed
tool_use, beta.messages.create, models.list and a 529, asserting what the SDK parsed. Writes the
usage the SDK parsed for every Messages request, in order, to OUT.json, for check_usage.py to
compare with `forkcache replay` of the server's trace; also checks the server's own stats.
"""

import json
import os
import sys
import urllib.request

import anthropic

BASE_URL, OUT = sys.argv[1], sys.argv[2]
KEY = "python-sdk"
MODEL = "claude-sonnet-4-6"
# About 1,600 tokens (bytes / 4): above the model's 1,024-token minimum, so it can be cached.
SYSTEM = [{"type": "text", "text": "You are a careful assistant. " * 220, "cache_control": {"type": "ephemeral"}}]
HELLO = [{"role": "user", "content": "Say hello."}]
WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Current weather for a place.",
    "input_schema": {"type": "object", "properties": {"location": {"type": "string"}, "unit": {"type": "string"}}},
}

# FORKCACHE_ACCEPT_ENCODING replaces the accept-encoding header the SDK's HTTP client sends (the
# SDK still decodes the answer itself: br needs the `brotli` package, zstd `backports.zstd`). Every value the
# client actually sends is printed once, so a run shows what it asked for.
ACCEPT_ENCODING = os.environ.get("FORKCACHE_ACCEPT_ENCODING")
sent_encodings = set()


def log_accept_encoding(request):
    value = request.headers.get("accept-encoding")
    if value not in sent_encodings:
        sent_encodings.add(value)
        print(f"python SDK sends accept-encoding: {value}")


client = anthropic.Anthropic(
    base_url=BASE_URL,
    api_key=KEY,
    max_retries=0,
    default_headers={"accept-encoding": ACCEPT_ENCODING} if ACCEPT_ENCODING else None,
    http_client=anthropic.DefaultHttpxClient(event_hooks={"request": [log_accept_encoding]}),
)
calls = []  # one entry per Messages request, in the order sent


def part(value, name):
    """A field of an SDK model, or of a dict where the SDK's type does not declare it (the
    message_delta usage type has no cache_creation member; the SDK keeps it as a plain dict)."""
    return value[name] if isinstance(value, dict) else getattr(value, name)


def usage_dict(usage):
    creation = part(usage, "cache_creation")
    return {
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "ephemeral_5m_input_tokens": part(creation, "ephemeral_5m_input_tokens"),
        "ephemeral_1h_input_tokens": part(creation, "ephemeral_1h_input_tokens"),
        "output_tokens": usage.output_tokens,
    }


def record(name, usage):
    calls.append({"name": name, "usage": usage_dict(usage)})
    print(f"  {name}: {calls[-1]['usage']}")


def check(condition, message):
    if not condition:
        raise SystemExit(f"python-sdk check failed: {message}")


# 1, 2. The same request twice: the second reads what the first wrote.
first = client.messages.create(model=MODEL, max_tokens=64, system=SYSTEM, messages=HELLO)
record("create (cold)", first.usage)
second = client.messages.create(model=MODEL, max_tokens=64, system=SYSTEM, messages=HELLO)
record("create (warm)", second.usage)
written = first.usage.cache_creation_input_tokens
check(written > 0 and first.usage.cache_read_input_tokens == 0, f"the first call writes: {first.usage}")
check(second.usage.cache_read_input_tokens == written, f"the second reads {written}: {second.usage}")
check(second.usage.cache_creation_input_tokens == 0, f"the second writes nothing: {second.usage}")
check(first.content[0].text == "Hello from forkcache.", f"scripted text: {first.content}")
check(first._request_id and first._request_id.startswith("req_"), "a request id")

# 3. messages.stream with the helper.
with client.messages.stream(model=MODEL, max_tokens=64, system=SYSTEM, messages=HELLO) as stream:
    streamed_text = "".join(stream.text_stream)
    final = stream.get_final_message()
record("messages.stream", final.usage)
check(streamed_text == "Hello from forkcache.", f"streamed text: {streamed_text!r}")
check(final.usage.cache_read_input_tokens == written, f"stream reads the cache: {final.usage}")

# 4. create(stream=True): the raw events, in the documented order.
events = list(client.messages.create(model=MODEL, max_tokens=64, system=SYSTEM, messages=HELLO, stream=True))
kinds = [event.type for event in events]
check(kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"], f"event order: {kinds}")
check("content_block_delta" in kinds, f"deltas: {kinds}")
start_usage = events[0].message.usage
delta_usage = events[-2].usage
check(start_usage.cache_read_input_tokens == written, f"message_start usage: {start_usage}")
check(delta_usage.cache_read_input_tokens == written, f"message_delta usage is cumulative: {delta_usage}")
record("create(stream=True)", delta_usage)

# 5. count_tokens: the whole prompt, and it touches no cache entry.
counted = client.messages.count_tokens(model=MODEL, system=SYSTEM, messages=HELLO)
total_input = first.usage.input_tokens + written + first.usage.cache_read_input_tokens
check(counted.input_tokens == total_input, f"count_tokens {counted.input_tokens} = total input {total_input}")

# 6. A streamed tool_use: input_json_delta chunks reassembled by the SDK.
weather = [{"role": "user", "content": "WEATHER in Paris?"}]
with client.messages.stream(model=MODEL, max_tokens=64, tools=[WEATHER_TOOL], messages=weather) as stream:
    tool_message = stream.get_final_message()
record("stream tool_use", tool_message.usage)
tool_use = [block for block in tool_message.content if block.type == "tool_use"]
check(len(tool_use) == 1 and tool_use[0].name == "get_weather", f"one tool call: {tool_message.content}")
check(tool_use[0].input == {"location": "Paris, France", "unit": "celsius"}, f"tool input: {tool_use[0].input}")
check(tool_use[0].id.startswith("toolu_"), f"tool id: {tool_use[0].id}")
check(tool_message.stop_reason == "tool_use", f"stop reason: {tool_message.stop_reason}")

# 7. The beta surface (anthropic-beta header, ?beta=true).
beta = client.beta.messages.create(
    model=MODEL, max_tokens=64, system=SYSTEM, messages=HELLO, betas=["prompt-caching-scope-2026-01-05"]
)
record("beta.messages.create", beta.usage)
check(beta.usage.cache_read_input_tokens == written, f"beta call reads the cache: {beta.usage}")

# 8. A scripted 529 surfaces as the SDK's overloaded error.
try:
    client.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "OVERLOAD"}])
    raise SystemExit("python-sdk check failed: expected a 529")
except anthropic.APIStatusError as error:
    check(error.status_code == 529, f"status {error.status_code}")
    check(error.body["error"]["type"] == "overloaded_error", f"error body: {error.body}")
    calls.append({"name": "overloaded", "error": "overloaded_error"})
    print("  overloaded: 529 overloaded_error")

# 9. models.list reads the price table.
ids = [model.id for model in client.models.list()]
check(MODEL in ids, f"models: {ids}")

# The server's own totals for this key equal the sum of what the SDK parsed (asked of the server
# itself when a proxy stands in front of it). Asked with the key, the stats show that key's
# workspace alone (named by the key's fingerprint, never the key).
STATS_URL = os.environ.get("FORKCACHE_STATS_URL", BASE_URL)
stats_request = urllib.request.Request(f"{STATS_URL}/forkcache/stats", headers={"x-api-key": KEY})
with urllib.request.urlopen(stats_request) as response:
    stats = json.load(response)
check(len(stats["workspaces"]) == 1, f"one workspace for one key: {list(stats['workspaces'])}")
(mine,) = stats["workspaces"].values()
parsed = [call["usage"] for call in calls if "usage" in call]
for field in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens"):
    total = sum(usage[field] for usage in parsed)
    check(mine["usage"][field] == total, f"stats {field} {mine['usage'][field]} = SDK sum {total}")
check(mine["requests"] == len(parsed) and mine["rejected"] == 1, f"stats counts: {mine}")

with open(OUT, "w") as out:
    json.dump(calls, out, indent=1)
print(f"python-sdk {anthropic.__version__}: {len(calls)} Messages requests checked")
