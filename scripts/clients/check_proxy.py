"""Checks a `forkcache proxy` trace recorded in front of `forkcache serve`.

Usage: check_proxy.py SERVE.jsonl PROXY.jsonl PROXY_REPLAY.json KEY FILE...

- The proxy's trace holds the server's requests, body for body, byte for byte, in the same
  order (one client at a time) or as the same multiset (concurrent clients);
- `forkcache replay --json` of the proxy's trace agrees with every recorded usage: the upstream
  is the same simulator, so this proves the plumbing (bytes, times, workspaces, usage), not the
  simulator's fidelity to the real API;
- no FILE the proxy wrote contains KEY.
"""

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
totals = json.load(open(replay_path))["totals"]
agreement = totals.get("agreement")
if agreement is None or agreement["compared"] == 0 or agreement["agreed"] != agreement["compared"]:
    raise SystemExit(f"proxy check failed: replay of the proxy's trace does not agree 100%: {agreement}")
for path in written:
    if key in open(path, encoding="utf-8", errors="replace").read():
        raise SystemExit(f"proxy check failed: {path} contains the API key")
print(
    f"proxy check: {len(proxied)} exchanges equal the server's, body for body; replay agrees on "
    f"{agreement['agreed']}/{agreement['compared']} (plumbing, not fidelity); no key in {len(written)} files"
)
