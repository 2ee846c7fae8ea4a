"""Drives the live page of `forkcache proxy --require-key` in headless Chromium over WebDriver
(chromedriver's W3C HTTP API, spoken with the standard library alone) while a client runs
through the proxy, and checks what the page showed.

Usage: live_page.py DRIVER_URL PROXY_URL KEY OTHER_KEY SCREENSHOT.png -- CLIENT COMMAND...

1. Opens PROXY_URL/forkcache/; the feed answers 401, so the page must show its key field. KEY is
   typed into it (OTHER_KEY, another tenant, sends requests through the proxy too).
2. Runs the client command (it must exit 0) while reading the page's rows every 250 ms, and on
   until they are complete: they must come in over several reads, in the same page (a marker set
   at the start must survive: no reload).
3. Once the proxy's feed for KEY holds every exchange its stats count, the page's rows (read
   from its DOM) must be exactly the feed's, and add up to `GET /forkcache/stats` for KEY: as
   many rows as exchanges, the same read, written and uncached tokens, recorded and predicted,
   and the page's cost figure the stats' recorded cost, in dollars. No row of OTHER_KEY's
   workspace shows, and the page's text never holds either key.
4. The browser's console logged nothing; a screenshot is written to SCREENSHOT.png.
"""

import base64
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request

ELEMENT = "element-6066-11e4-a52e-4f735466cecf"

driver_url, proxy_url, key, other_key, screenshot, separator, *client = sys.argv[1:]
assert separator == "--" and client, __doc__


def call(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(driver_url + path, data=data, method=method,
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.load(response)["value"]
    except urllib.error.HTTPError as err:
        raise SystemExit(f"live page check failed: WebDriver {method} {path}: {err.read().decode()}")


def fetch(path, with_key):
    headers = {"x-api-key": with_key} if with_key else {}
    request = urllib.request.Request(proxy_url + path, headers=headers)
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def fail(message):
    raise SystemExit(f"live page check failed: {message}")


capabilities = {
    "browserName": "chrome",
    "goog:loggingPrefs": {"browser": "ALL"},
    "goog:chromeOptions": {
        "binary": "/usr/bin/chromium",
        "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--window-size=1500,900"],
    },
}
session = call("POST", "/session", {"capabilities": {"alwaysMatch": capabilities}})["sessionId"]
base = f"/session/{session}"


def script(source):
    return call("POST", f"{base}/execute/sync", {"script": source, "args": []})


def element(css):
    found = call("POST", f"{base}/element", {"using": "css selector", "value": css})
    # The W3C name of the reference, or the name older drivers use.
    return found.get(ELEMENT) or found["ELEMENT"]


def wait_for(what, predicate, seconds=20):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    fail(f"timed out waiting for {what}")


# The page's rows, as shown: the cells of each body row, newest first.
ROWS = """return Array.from(document.querySelectorAll('#rows tr:not(.empty)')).map(tr => ({
  index: Number(tr.dataset.index), workspace: tr.dataset.workspace,
  cells: Array.from(tr.cells).map(td => td.textContent)}));"""

try:
    call("POST", f"{base}/url", {"url": proxy_url + "/forkcache/"})
    script("window.forkcacheMarker = 'set before the run'; return null;")
    wait_for("the page to ask for a key", lambda: script("return !document.getElementById('keyform').hidden;"))
    call("POST", f"{base}/element/{element('#key')}/value", {"text": key})
    call("POST", f"{base}/element/{element('#keyform button')}/click", {})
    wait_for("the page to read the feed with the key",
             lambda: script("return document.getElementById('status').textContent.startsWith('live');"))

    seen = []
    run = subprocess.Popen(client)
    while run.poll() is None:
        seen.append(len(script(ROWS)))
        time.sleep(0.25)
    during_run = max(seen, default=0)
    if run.returncode != 0:
        fail(f"the client exited with status {run.returncode}")

    # Wait until every exchange the stats count for the key has its row on the page (the
    # prediction, at the lowest CPU priority, may still be catching up).
    def settled():
        stats = fetch("/forkcache/stats", key)["workspaces"]
        exchanges = sum(w["exchanges"] for w in stats.values())
        feed = fetch("/forkcache/events", key)
        seen.append(len(script(ROWS)))
        return exchanges > 0 and len(feed["rows"]) == exchanges and seen[-1] == exchanges
    wait_for("the page to show every exchange", settled, seconds=60)
    # The rows must come in while the page stays open (the marker below proves no reload).
    # Against the mock, Claude Code's six requests come within about 0.3 s, faster than the
    # page's once-a-second poll, and the client exits soon after: whether rows arrived while it
    # ran is a race, so it is reported, not required.
    growth = sorted(set(seen))
    if len(growth) < 2 or growth[0] != 0:
        fail(f"the page's rows did not grow from none while it was open (counts seen: {growth})")
    print(f"rows on the page while the client ran: {during_run} of {growth[-1]}; counts seen: {growth}")
    # A poll more, so the page's figures are those of its last rows.
    time.sleep(1.5)

    if script("return window.forkcacheMarker;") != "set before the run":
        fail("the page was reloaded")
    feed = fetch("/forkcache/events", key)
    stats = fetch("/forkcache/stats", key)["workspaces"]
    page_rows = script(ROWS)
    if [row["index"] for row in page_rows] != [row["index"] for row in reversed(feed["rows"])]:
        fail(f"the page's rows {[r['index'] for r in page_rows]} are not the feed's, newest first")
    mine = set(stats)
    strangers = [row for row in page_rows if row["workspace"] not in mine]
    if strangers:
        fail(f"rows of another workspace shown: {strangers[:3]}")
    headers = script("return Array.from(document.querySelectorAll('#head th')).map(th => th.textContent);")
    # Columns: # time workspace model | read real, pred. | written real, pred. | uncached real, pred. | ...
    as_int = lambda text: 0 if text == "-" else int(text.replace(",", ""))
    sums = [sum(as_int(row["cells"][column]) for row in page_rows) for column in range(4, 10)]
    expected = []
    for field in ["cache_read_input_tokens", "cache_creation_input_tokens", "input_tokens"]:
        expected.append(sum(w["recorded"]["usage"][field] for w in stats.values()))
        expected.append(sum(w["predicted"]["usage"][field] for w in stats.values()))
    if sums != expected:
        fail(f"the page's columns {headers[4:10]} add up to {sums}, the stats to {expected}")
    recorded_cost = sum(w["recorded"]["cost_usd"] for w in stats.values())
    figure = script("return document.getElementById('cost').textContent;")
    if abs(float(figure.lstrip("$")) - recorded_cost) > 1e-4:
        fail(f"the page's cost figure {figure} is not the stats' ${recorded_cost:.6f}")
    requests = script("return document.getElementById('requests').textContent;")
    exchanges = sum(w["exchanges"] for w in stats.values())
    if as_int(requests) != exchanges:
        fail(f"the page counts {requests} requests, the stats {exchanges}")
    text = script("return document.documentElement.outerHTML;")
    if key in text or other_key in text:
        fail("the page's document holds a key")
    # The browser itself logs the feed's 401 before the key was typed (a failed resource load):
    # that one is by design. Anything else — a script error, a blocked load — fails.
    logs = [entry for entry in call("POST", f"{base}/se/log", {"type": "browser"})
            if not ("/forkcache/events" in entry.get("message", "") and " 401 " in entry.get("message", ""))]
    if logs:
        fail(f"the page logged to the console: {logs}")
    png = base64.b64decode(call("GET", f"{base}/screenshot"))
    with open(screenshot, "wb") as out:
        out.write(png)
    agreed = sum(1 for row in page_rows if row["cells"][10] == "yes")
    print(f"live page: {len(page_rows)} rows came in without a reload (counts seen {growth}), "
          f"equal to the feed and to /forkcache/stats for the key (tokens {expected}, {figure}); "
          f"{agreed} agree; none of the other tenant's; no console message ({screenshot})")
finally:
    call("DELETE", base)
