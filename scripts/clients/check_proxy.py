"""Checks a `forkcache proxy` trace recorded in front of `forkcache serve`.

Usage: check_proxy.py SERVE.jsonl PROXY.jsonl PROXY_REPLAY.json KEY FILE...

- The proxy's trace holds the server's requests, body for body, byte for byte, in the same
  order (one client at a time) or as the same multiset (concurrent clients);
- `forkcache replay --json` of the proxy's trace agrees with every recorded usage: the upstream
  is the same simulator, so this proves the plumbing (bytes, times, workspaces, usage), not the
  simulator's fidelity to the real API;
- every exchange that did not fail has its usage parsed (from a compressed body too);
- with FORKCACHE_EXPECT_COMPRESSED=1, the proxy's summary (the last FILE, its log) counts only
  compressed responses: the server compressed every one and the proxy decoded them; with
  FORKCACHE_EXPECT_ENCODING=NAME too, only responses in that encoding;
- no FILE the proxy wrote contains KEY.
"""

import os
import re

import json
import sys

serve_path, proxy_path, replay_path, key, *written = sys.argv[1:]


def bodies(path):
    """The exact bytes of each line's body member (decoded once to find it, re-read raw)."""
    out = []
    decoder = json.JSONDecoder()
    for line in open(path, encoding="utf-8"):
        # Blank lines and lines that carry no request (a session marker) hold no body.
        if '"body":' not in line:
            continue
        start = line.index('"body":') + len('"body":')
        _, end = decoder.raw_decode(line, start)
        out.append(line[start:end])
    return out


served, proxied = bodies(serve_path), bodies(proxy_path)
if sorted(served) != sorted(proxied):
    raise SystemExit(f"proxy check failed: the server logged {len(served)} bodies, the proxy {len(proxied)}, and they differ")
lines = [json.loads(line) for line in open(proxy_path, encoding="utf-8") if '"body":' in line]
unparsed = [i for i, line in enumerate(lines) if "error" not in line and "usage" not in line]
if unparsed:
    raise SystemExit(f"proxy check failed: no usage parsed for exchanges {unparsed}")
encodings = "not compressed"
if os.environ.get("FORKCACHE_EXPECT_COMPRESSED") == "1":
    found = re.search(r"^responses by content-encoding: (.*)$", open(written[-1], encoding="utf-8").read(), re.M)
    if found is None or "identity" in found.group(1):
        raise SystemExit(f"proxy check failed: expected only compressed responses, the proxy saw {found and found.group(1)}")
    expected = os.environ.get("FORKCACHE_EXPECT_ENCODING")
    if expected and not re.fullmatch(rf"{re.escape(expected)} \d+", found.group(1)):
        raise SystemExit(f"proxy check failed: expected only {expected} responses, the proxy saw {found.group(1)}")
    encodings = f"compressed ({found.group(1)})"
totals = json.load(open(replay_path))["totals"]
agreement = totals.get("agreement")
if agreement is None or agreement["compared"] == 0 or agreement["agreed"] != agreement["compared"]:
    raise SystemExit(f"proxy check failed: replay of the proxy's trace does not agree 100%: {agreement}")
for path in written:
    if key in open(path, encoding="utf-8", errors="replace").read():
        raise SystemExit(f"proxy check failed: {path} contains the API key")
print(
    f"proxy check, {encodings}: {len(proxied)} exchanges equal the server's, body for body, usage parsed; replay agrees on "
    f"{agreement['agreed']}/{agreement['compared']} (plumbing, not fidelity); no key in {len(written)} files"
)
