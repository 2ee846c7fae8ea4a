// Runs penguin-harness's PromptCacheSim test helper over a trace of request bodies (one JSON
// body per line), the way its tests feed it: each body split into the wire config (tools,
// system, parameters) and the wire messages, one `request()` per line, on a virtual clock that
// advances GAP_MS per request (forkcache replay's default gap). Prints its throughput and its
// cache answer next to forkcache's, from `forkcache replay --json` on the same trace.
//
// node prompt_cache_sim.mjs SIM_MODULE TRACE FORKCACHE_JSON FORKCACHE_SECONDS
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const GAP_MS = 30_000;
const [simModule, tracePath, forkcacheJson, forkcacheSeconds] = process.argv.slice(2);
const { PromptCacheSim } = await import(pathToFileURL(simModule).href);

/** Removes every `cache_control` marker in place (tools, system blocks, message blocks). */
function unmark(value) {
  if (Array.isArray(value)) value.forEach(unmark);
  else if (value && typeof value === "object") {
    delete value.cache_control;
    Object.values(value).forEach(unmark);
  }
}

/**
 * One pass of the helper over the trace: read, parse, simulate. `unmarked` strips the markers
 * first, giving the helper the shape it models (automatic caching: one top-level marker, none
 * on blocks); as sent, a block's marker is part of its text, so the block marked in one
 * request differs from the same block unmarked in the next.
 */
function runPeer(unmarked) {
  const start = performance.now();
  const lines = readFileSync(tracePath, "utf8").split("\n").filter((line) => line.length > 0);
  let now = 0;
  const sim = new PromptCacheSim({ now: () => now });
  const totals = { requests: 0, read: 0, write: 0, uncached: 0 };
  lines.forEach((line, index) => {
    const body = JSON.parse(line);
    if (unmarked) unmark(body);
    const { messages, ...wireConfig } = body;
    const usage = sim.request({ index, messages: [], config: {}, wire: messages, wireConfig });
    totals.requests += 1;
    totals.read += usage.cache_read_input_tokens;
    totals.write += usage.cache_creation_input_tokens;
    totals.uncached += usage.input_tokens;
    now += GAP_MS;
  });
  return { seconds: (performance.now() - start) / 1000, totals };
}

const bytes = readFileSync(tracePath).length;
const peer = runPeer(false);
const peerUnmarked = runPeer(true);
const report = JSON.parse(readFileSync(forkcacheJson, "utf8"));
const usage = report.totals.usage;
const ours = {
  requests: report.totals.requests,
  read: usage.cache_read_input_tokens,
  write: usage.cache_creation_input_tokens,
  uncached: usage.input_tokens,
};
const rate = (seconds) => `${(bytes / 1e6 / seconds).toFixed(1)} MB/s (${seconds.toFixed(2)} s)`;
const hit = (t) => `${((100 * t.read) / (t.read + t.write + t.uncached)).toFixed(2)}%`;
const rows = [
  ["", "forkcache replay", "PromptCacheSim, as sent", "PromptCacheSim, markers removed"],
  ["throughput", rate(Number(forkcacheSeconds)), rate(peer.seconds), rate(peerUnmarked.seconds)],
  ["requests", ours.requests, peer.totals.requests, peerUnmarked.totals.requests],
  ["cache read tokens", ours.read, peer.totals.read, peerUnmarked.totals.read],
  ["cache write tokens", ours.write, peer.totals.write, peerUnmarked.totals.write],
  ["uncached tokens", ours.uncached, peer.totals.uncached, peerUnmarked.totals.uncached],
  ["read / all input", hit(ours), hit(peer.totals), hit(peerUnmarked.totals)],
];
console.log(`trace: ${(bytes / 1e6).toFixed(1)} MB, ${ours.requests} requests`);
for (const [label, ...cells] of rows) {
  console.log(String(label).padEnd(20) + cells.map((cell) => String(cell).padEnd(30)).join("").trimEnd());
}
