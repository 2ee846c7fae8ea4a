"""The official OpenAI Python SDK against `forkcache serve`: Responses and Chat Completions,
streamed and not, a long prefix sent again and again. Checks that cached_tokens grows on the
repeated prefix (in 128-token steps on gpt-5.5, exact with reported writes on gpt-5.6-terra), and
that the usage the SDK parsed adds up to the server's own `openai` stats row.

Usage: openai_sdk.py BASE_URL
"""

import json
import sys
import urllib.request

import openai

BASE_URL = sys.argv[1]
client = openai.OpenAI(base_url=BASE_URL + "/v1", api_key="sk-forkcache-dummy", max_retries=0)

# About 2,500 tokens under the server's default estimate (bytes / 4): past the 1,024 minimum.
PREFIX = "You are forkcache's test assistant. " + " ".join(f"rule {n}: answer briefly." for n in range(450))

# Both routes render the same prompt for the same messages (and share its cache, as OpenAI's
# two APIs feed one model): Chat Completions gets a prefix of its own to start cold.
CHAT_PREFIX = "Chat. " + PREFIX

seen = {"requests": 0, "input_tokens": 0, "cached_tokens": 0, "output_tokens": 0}


def count(input_tokens, cached_tokens, output_tokens):
    seen["requests"] += 1
    seen["input_tokens"] += input_tokens
    seen["cached_tokens"] += cached_tokens
    seen["output_tokens"] += output_tokens


def fail(message):
    print("FAIL: " + message, file=sys.stderr)
    sys.exit(1)


def responses_usage(model, question, stream):
    """One Responses call; returns its usage object as the SDK parsed it."""
    kwargs = dict(model=model, instructions=PREFIX, input=[{"role": "user", "content": question}])
    if not stream:
        response = client.responses.create(**kwargs)
        if not response.output_text:
            fail("a Responses answer without output_text")
        usage = response.usage
    else:
        kinds, usage, text = [], None, ""
        with client.responses.create(stream=True, **kwargs) as events:
            for event in events:
                kinds.append(event.type)
                if event.type == "response.output_text.delta":
                    text += event.delta
                if event.type == "response.completed":
                    usage = event.response.usage
        if kinds[0] != "response.created" or kinds[-1] != "response.completed" or not text:
            fail(f"unexpected Responses stream: {kinds}")
    count(usage.input_tokens, usage.input_tokens_details.cached_tokens, usage.output_tokens)
    return usage


def chat_usage(model, question, stream):
    """One Chat Completions call; returns its usage object as the SDK parsed it."""
    messages = [{"role": "system", "content": CHAT_PREFIX}, {"role": "user", "content": question}]
    if not stream:
        completion = client.chat.completions.create(model=model, messages=messages)
        if not completion.choices[0].message.content:
            fail("a chat completion without content")
        usage = completion.usage
    else:
        chunks = list(
            client.chat.completions.create(
                model=model, messages=messages, stream=True, stream_options={"include_usage": True}
            )
        )
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        usage = chunks[-1].usage
        if usage is None or not text:
            fail("a chat stream without usage in its last chunk, or without text")
    count(usage.prompt_tokens, usage.prompt_tokens_details.cached_tokens, usage.completion_tokens)
    return usage


def details_writes(details):
    """cache_write_tokens, whether this SDK version models the field or keeps it as an extra."""
    value = getattr(details, "cache_write_tokens", None)
    if value is None and details.model_extra:
        value = details.model_extra.get("cache_write_tokens")
    return value


def check_growth(label, cached, step):
    print(f"{label}: cached_tokens {' -> '.join(map(str, cached))}")
    if cached[0] != 0 or not all(b > 0 for b in cached[1:]):
        fail(f"{label}: the repeated prefix was not read from the cache: {cached}")
    if any(c % step for c in cached):
        fail(f"{label}: cached_tokens not in {step}-token steps: {cached}")


# gpt-5.5 over the Responses API, then streamed: the prefix is read in 128-token steps.
cached = [
    responses_usage("gpt-5.5", q, stream)
    .input_tokens_details.cached_tokens
    for q, stream in [("first?", False), ("second?", False), ("third?", True)]
]
check_growth("responses gpt-5.5", cached, 128)

# gpt-5.5 over Chat Completions.
cached = [
    chat_usage("gpt-5.5", q, stream).prompt_tokens_details.cached_tokens
    for q, stream in [("first?", False), ("second?", True), ("third?", False)]
]
check_growth("chat gpt-5.5", cached, 128)

# gpt-5.6-terra: exact reads, and writes reported from the first call on.
usages = [responses_usage("gpt-5.6-terra", q, False) for q in ("first?", "second?")]
writes = [details_writes(u.input_tokens_details) for u in usages]
cached = [u.input_tokens_details.cached_tokens for u in usages]
print(f"responses gpt-5.6-terra: cached_tokens {cached}, cache_write_tokens {writes}")
if writes[0] is None or writes[0] < 1024 or cached[1] < 1024:
    fail(f"gpt-5.6-terra: expected a written then read prefix, got cached {cached}, writes {writes}")

with urllib.request.urlopen(BASE_URL + "/forkcache/stats") as answer:
    stats = json.load(answer)["openai"]
for name, value in seen.items():
    if stats[name] != value:
        fail(f"{name}: the SDK saw {value}, the server counted {stats[name]}")
print(f"the SDK's usage equals the server's openai row: {json.dumps(seen)}; cost_usd {stats['cost_usd']}")
print("OK: openai SDK", openai.__version__)
