// The official TypeScript SDK against `forkcache serve` (run with fixtures/scripts/sdk-clients.json).
//
// Usage: node typescript_sdk.mjs BASE_URL OUT.json   (run where @anthropic-ai/sdk is installed)
//
// create (twice: the second reads what the first wrote), messages.stream + finalMessage,
// create({stream: true}) and countTokens. Writes the usage the SDK parsed for every Messages
// request, in order, to OUT.json for check_usage.py.
import { writeFileSync } from "node:fs";
import Anthropic from "@anthropic-ai/sdk";

const [baseURL, out] = process.argv.slice(2);
const model = "claude-sonnet-4-6";
const system = [{ type: "text", text: "You are a careful assistant. ".repeat(220), cache_control: { type: "ephemeral" } }];
const messages = [{ role: "user", content: "Say hello." }];
const client = new Anthropic({ baseURL, apiKey: "typescript-sdk", maxRetries: 0 });
const calls = [];

function check(condition, message) {
  if (!condition) {
    console.error(`typescript-sdk check failed: ${message}`);
    process.exit(1);
  }
}

function record(name, usage) {
  const entry = {
    name,
    usage: {
      input_tokens: usage.input_tokens,
      cache_creation_input_tokens: usage.cache_creation_input_tokens,
      cache_read_input_tokens: usage.cache_read_input_tokens,
      ephemeral_5m_input_tokens: usage.cache_creation?.ephemeral_5m_input_tokens,
      ephemeral_1h_input_tokens: usage.cache_creation?.ephemeral_1h_input_tokens,
      output_tokens: usage.output_tokens,
    },
  };
  calls.push(entry);
  console.log(`  ${name}: ${JSON.stringify(entry.usage)}`);
}

const first = await client.messages.create({ model, max_tokens: 64, system, messages });
record("create (cold)", first.usage);
const second = await client.messages.create({ model, max_tokens: 64, system, messages });
record("create (warm)", second.usage);
const written = first.usage.cache_creation_input_tokens;
check(written > 0 && first.usage.cache_read_input_tokens === 0, `the first call writes: ${JSON.stringify(first.usage)}`);
check(second.usage.cache_read_input_tokens === written, `the second reads ${written}: ${JSON.stringify(second.usage)}`);
check(first.content[0].text === "Hello from forkcache.", `scripted text: ${JSON.stringify(first.content)}`);

const stream = client.messages.stream({ model, max_tokens: 64, system, messages });
let text = "";
stream.on("text", (delta) => (text += delta));
const final = await stream.finalMessage();
record("messages.stream", final.usage);
check(text === "Hello from forkcache.", `streamed text: ${text}`);
check(final.usage.cache_read_input_tokens === written, `stream reads the cache: ${JSON.stringify(final.usage)}`);

const raw = await client.messages.create({ model, max_tokens: 64, system, messages, stream: true });
const kinds = [];
let deltaUsage;
for await (const event of raw) {
  kinds.push(event.type);
  if (event.type === "message_delta") deltaUsage = event.usage;
}
check(kinds[0] === "message_start" && kinds.at(-1) === "message_stop", `event order: ${kinds}`);
record("create({stream: true})", deltaUsage);

const counted = await client.messages.countTokens({ model, system, messages });
const totalInput = first.usage.input_tokens + written + first.usage.cache_read_input_tokens;
check(counted.input_tokens === totalInput, `countTokens ${counted.input_tokens} = total input ${totalInput}`);

writeFileSync(out, JSON.stringify(calls, null, 1));
console.log(`typescript-sdk: ${calls.length} Messages requests checked`);
