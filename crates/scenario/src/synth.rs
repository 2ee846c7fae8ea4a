//! Synthetic agent conversations for benchmarks and load tests: a coding agent's growing session
//! with ~20 tools, a three-block system prompt, and tool calls every turn, serialized the way real
//! clients send it (compact JSON, the last block of the last user message marked).
//!
//! Everything is drawn from a seeded ChaCha8 stream, so the same spec gives the same bytes.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};

/// What to generate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConversationSpec {
    /// Requests (one per agent turn).
    pub requests: usize,
    /// Tool definitions.
    pub tools: usize,
    /// Approximate size the history grows to by the last request, in bytes of JSON
    /// (bytes/4 ≈ tokens).
    pub final_history_bytes: usize,
    /// The stream's seed.
    pub seed: u64,
    /// The model id.
    pub model: &'static str,
}

impl Default for ConversationSpec {
    /// 200 requests growing to about 200K tokens: about 93 MB of request JSON in all.
    fn default() -> Self {
        ConversationSpec {
            requests: 200,
            tools: 20,
            final_history_bytes: 560_000,
            seed: 7,
            model: "claude-opus-4-8",
        }
    }
}

const WORDS: &[&str] = &[
    "the", "cache", "prefix", "agent", "fork", "request", "token", "function", "return", "let", "match",
    "value", "error", "struct", "impl", "module", "test", "build", "file", "path", "read", "write", "config",
    "system", "message", "tool", "result", "input", "output", "line", "byte",
];

fn words(rng: &mut ChaCha8Rng, bytes: usize) -> String {
    let mut text = String::with_capacity(bytes + 16);
    while text.len() < bytes {
        text.push_str(WORDS[rng.random_range(0..WORDS.len())]);
        // Real file contents and outputs are full of newlines, quotes and tabs: JSON escapes.
        text.push(match rng.random_range(0..12) {
            0 => '\n',
            1 => '\t',
            2 => '"',
            _ => ' ',
        });
    }
    text
}

fn tool(rng: &mut ChaCha8Rng, index: usize) -> Value {
    let properties: serde_json::Map<String, Value> = (0..rng.random_range(2..6))
        .map(|p| {
            let size = rng.random_range(60..300);
            let description = words(rng, size);
            (format!("param_{p}"), json!({"type": "string", "description": description}))
        })
        .collect();
    let size = rng.random_range(400..3000);
    let description = words(rng, size);
    json!({
        "name": format!("Tool{index}"),
        "description": description,
        "input_schema": {"type": "object", "properties": properties, "required": ["param_0"], "additionalProperties": false},
    })
}

fn system(rng: &mut ChaCha8Rng) -> Value {
    json!([
        {"type": "text", "text": "x-anthropic-billing-header: cc_version=1.0.0.abc; cc_entrypoint=bench;"},
        {"type": "text", "text": "You are a coding agent.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": words(rng, 20_000), "cache_control": {"type": "ephemeral"}},
    ])
}

/// One turn's new messages: the assistant's tool calls and the user's tool results.
fn turn(rng: &mut ChaCha8Rng, turn: usize, tools: usize, result_bytes: usize) -> [Value; 2] {
    let calls = rng.random_range(1..4);
    let size = rng.random_range(80..600);
    let mut uses = vec![json!({"type": "text", "text": words(rng, size)})];
    let mut results = Vec::new();
    for call in 0..calls {
        let id = format!("toolu_{turn:04}_{call}");
        let name = format!("Tool{}", rng.random_range(0..tools));
        let size = rng.random_range(20..200);
        let argument = words(rng, size);
        let number: u32 = rng.random_range(0..10_000);
        uses.push(json!({"type": "tool_use", "id": id, "name": name,
                         "input": {"param_0": argument, "param_1": number}}));
        let size = rng.random_range(result_bytes / 2..result_bytes * 3 / 2 + 1) / calls;
        let content = words(rng, size);
        results.push(json!({"type": "tool_result", "tool_use_id": id, "content": content}));
    }
    [json!({"role": "assistant", "content": uses}), json!({"role": "user", "content": results})]
}

/// The request bodies, in order: each the whole conversation so far, compact JSON.
pub fn growing_conversation(spec: &ConversationSpec) -> Vec<String> {
    growing_conversation_iter(spec).collect()
}

/// [`growing_conversation`] one body at a time, so a trace of gigabytes can be written without
/// holding it: the same bodies in the same order.
pub fn growing_conversation_iter(spec: &ConversationSpec) -> impl Iterator<Item = String> + use<> {
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
    let tools: Vec<Value> = (0..spec.tools).map(|i| tool(&mut rng, i)).collect();
    let system = system(&mut rng);
    let per_turn = spec.final_history_bytes / spec.requests.max(1);
    let mut messages =
        vec![json!({"role": "user", "content": [{"type": "text", "text": words(&mut rng, 400)}]})];
    let (model, tool_count) = (spec.model, spec.tools);
    (0..spec.requests).map(move |index| {
        if index > 0 {
            messages.extend(turn(&mut rng, index, tool_count, per_turn));
        }
        body(model, &tools, &system, &messages)
    })
}

/// Serializes one request, marking the last block of the last message (the moving breakpoint).
fn body(model: &str, tools: &[Value], system: &Value, messages: &[Value]) -> String {
    let mut messages = messages.to_vec();
    if let Some(last) =
        messages.last_mut().and_then(|m| m["content"].as_array_mut()).and_then(|c| c.last_mut())
    {
        last["cache_control"] = json!({"type": "ephemeral"});
    }
    json!({
        "model": model,
        "messages": messages,
        "system": system,
        "tools": tools,
        "max_tokens": 32000,
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "high"},
        "stream": true,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_bytes_and_a_growing_history() {
        let spec =
            ConversationSpec { requests: 5, final_history_bytes: 20_000, ..ConversationSpec::default() };
        let first = growing_conversation(&spec);
        assert_eq!(first, growing_conversation(&spec));
        assert!(first.windows(2).all(|pair| pair[1].len() > pair[0].len()));
    }

    #[test]
    fn the_rng_stream_is_pinned() {
        // A value-stability check: if the generator's first draw changes, every synthetic
        // benchmark input changes with it.
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        assert_eq!(rng.random::<u64>(), 2_910_824_217_569_608_635);
    }
}
