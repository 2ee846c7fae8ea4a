//! A prompt rendered from where a request parts from the client's last one
//! (`Renderer::render_resumed`, what each `serve` connection does) is the prompt the whole render
//! gives: the same positions, hashes, tokens, breakpoints and salts, or the same error. Checked
//! on generated clients whose requests grow, fork, compact, move and multiply their markers,
//! switch models, tools and parameters, and hold every block kind the salts and runs care about.

use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::{Map, Value, json};

use forkcache_engine::billing::PriceTable;
use forkcache_engine::prompt::{
    BlockKeys, DeferredTools, IdentityMode, PromptConfig, RenderSketch, Renderer, ToolChanges,
};
use forkcache_engine::tokenize::Bytes4;
use forkcache_wire::parse_request;

const WORDS: &[&str] = &["alpha", "beta", "file", "src/main.rs", "fix", "the", "test", "ok", "read", "café"];

fn words(rng: &mut ChaCha8Rng, count: usize) -> String {
    (0..count).map(|_| WORDS[rng.random_range(0..WORDS.len())]).collect::<Vec<_>>().join(" ")
}

/// A marker, now and then with a TTL (a 1h after a 5m one is an error the API names).
fn marker(rng: &mut ChaCha8Rng) -> Value {
    match rng.random_range(0..20) {
        0 => json!({"type": "ephemeral", "ttl": "1h"}),
        1 => json!({"type": "ephemeral", "ttl": "5m"}),
        _ => json!({"type": "ephemeral"}),
    }
}

/// One content block of any kind the prompt treats apart: text, runs of tool calls and results,
/// images, cited documents, thinking, a tool search's reference, an empty text.
fn block(rng: &mut ChaCha8Rng, role: &str, turn: usize) -> Value {
    let id = format!("toolu_{turn}_{}", rng.random_range(0..3));
    match (role, rng.random_range(0..10)) {
        ("assistant", 0..=3) => {
            json!({"type": "tool_use", "id": id, "name": "Tool0", "input": {"path": words(rng, 1)}})
        }
        ("assistant", 4) => json!({"type": "thinking", "thinking": words(rng, 5), "signature": "c2ln"}),
        ("user", 0..=2) => json!({"type": "tool_result", "tool_use_id": id, "content": words(rng, 6)}),
        // A marker moved up from the result's last inner block.
        ("user", 6) if rng.random_bool(0.3) => {
            json!({"type": "tool_result", "tool_use_id": id,
            "content": [{"type": "text", "text": words(rng, 3)}, {"type": "text", "text": words(rng, 2), "cache_control": marker(rng)}]})
        }
        ("user", 3) => {
            json!({"type": "tool_result", "tool_use_id": id, "content": [{"type": "tool_reference", "tool_name": "Deferred"}]})
        }
        ("user", 4) => {
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}})
        }
        ("user", 5) => {
            json!({"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": words(rng, 8)}, "citations": {"enabled": true}})
        }
        _ => json!({"type": "text", "text": words(rng, 4)}),
    }
}

/// One client conversation: fixed parts that change now and then, and a growing history.
struct Conversation {
    model: &'static str,
    system: Value,
    tools: Vec<Value>,
    messages: Vec<Value>,
    params: Map<String, Value>,
    turn: usize,
    /// Whether the model, tools, system and parameters change now and then, and the history
    /// forks and compacts.
    churn: bool,
}

impl Conversation {
    fn new(rng: &mut ChaCha8Rng, churn: bool) -> Conversation {
        let mut conversation = Conversation {
            model: "claude-sonnet-4-6",
            system: Value::Null,
            tools: Vec::new(),
            messages: Vec::new(),
            params: Map::new(),
            turn: 0,
            churn,
        };
        conversation.new_system(rng);
        conversation.new_tools(rng);
        conversation
    }

    fn new_system(&mut self, rng: &mut ChaCha8Rng) {
        self.system = match rng.random_range(0..4) {
            0 => Value::Null,
            1 => Value::from(words(rng, 10)),
            2 => json!([{"type": "text", "text": words(rng, 12), "cache_control": marker(rng)}]),
            _ => json!([
                {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1"},
                {"type": "text", "text": words(rng, 20)}
            ]),
        };
    }

    fn new_tools(&mut self, rng: &mut ChaCha8Rng) {
        self.tools = (0..rng.random_range(0..4))
            .map(|i| match rng.random_range(0..8) {
                0 => json!({"type": "web_search_20250305", "name": "web_search"}),
                1 => json!({"name": "Deferred", "description": words(rng, 3), "input_schema": {"type": "object"}, "defer_loading": true}),
                2 => json!({"name": format!("Tool{i}"), "input_schema": {"type": "object"}, "cache_control": marker(rng)}),
                _ => json!({"name": format!("Tool{i}"), "description": words(rng, 6), "input_schema": {"type": "object"}}),
            })
            .collect();
    }

    /// The next request: usually a turn more, with the markers moved to the end; sometimes a
    /// fork, a compaction, the same request again, or a change of model, tools, system or
    /// parameters.
    fn next(&mut self, rng: &mut ChaCha8Rng) {
        self.turn += 1;
        let change = if self.churn { rng.random_range(0..40) } else { 40 };
        match change {
            0 => {
                self.model =
                    ["claude-sonnet-4-6", "claude-opus-4-8", "claude-haiku-4-5"][rng.random_range(0..3)]
            }
            1 => self.new_tools(rng),
            2 => self.new_system(rng),
            3 => {
                let keep = rng.random_range(0..=self.messages.len());
                self.messages.truncate(keep);
            }
            4 => {
                self.messages =
                    vec![json!({"role": "user", "content": format!("Summary: {}", words(rng, 9))})]
            }
            5 => return,
            6 | 7 => self.reshape(rng),
            _ => {}
        }
        if self.churn {
            self.change_params(rng);
        }
        if rng.random_bool(0.85) {
            self.drop_markers();
        }
        if self.turn > 1 {
            self.push(rng, "assistant");
        }
        // Now and then the request ends with the assistant's turn, its last block a thinking
        // block: after the last eligible block, where a top-level `cache_control` puts its
        // breakpoint.
        if self.churn && rng.random_bool(0.1) {
            let thinking = json!({"type": "thinking", "thinking": words(rng, 3), "signature": "c2ln"});
            self.messages.push(
                json!({"role": "assistant", "content": [{"type": "text", "text": words(rng, 3)}, thinking]}),
            );
            return;
        }
        if rng.random_bool(0.05) {
            self.messages.push(json!({"role": "system", "content": words(rng, 3)}));
        }
        self.push(rng, "user");
    }

    /// The same blocks in other messages: one message's role changed, or one message of blocks
    /// split in two of the same role (the blocks' keys stay in the same order).
    fn reshape(&mut self, rng: &mut ChaCha8Rng) {
        if self.messages.is_empty() {
            return;
        }
        let at = rng.random_range(0..self.messages.len());
        let message = &mut self.messages[at];
        let blocks = message["content"].as_array().filter(|blocks| blocks.len() > 1).cloned();
        match blocks {
            Some(mut first) if rng.random_bool(0.5) => {
                let second = first.split_off(rng.random_range(1..first.len()));
                message["content"] = Value::Array(first);
                let role = message["role"].clone();
                self.messages.insert(at + 1, json!({"role": role, "content": second}));
            }
            _ => {
                let role = ["user", "assistant", "system"][rng.random_range(0..3)];
                message["role"] = Value::from(role);
            }
        }
    }

    /// A parameter set, changed or dropped; now and then all of them dropped (some pairs are
    /// refused together, such as thinking with a forced tool).
    fn change_params(&mut self, rng: &mut ChaCha8Rng) {
        if rng.random_bool(0.3) {
            self.params.clear();
        }
        let (key, value) = match rng.random_range(0..30) {
            0 => ("thinking", json!({"type": "enabled", "budget_tokens": 2048})),
            1 => ("tool_choice", json!({"type": "any"})),
            2 => ("tool_choice", json!({"type": "tool", "name": "Tool0"})),
            3 => ("output_config", json!({"effort": "low"})),
            4 => ("speed", json!("fast")),
            5..=7 => ("cache_control", marker(rng)),
            8 => ("cache_control", Value::Null),
            _ => return,
        };
        if rng.random_bool(0.3) {
            self.params.remove(key);
        } else {
            self.params.insert(key.into(), value);
        }
    }

    /// Every block's marker, and its inner blocks', removed: the client moves them to the end.
    fn drop_markers(&mut self) {
        for message in &mut self.messages {
            for block in message["content"].as_array_mut().into_iter().flatten() {
                block.as_object_mut().map(|block| block.remove("cache_control"));
                for inner in block.get_mut("content").and_then(Value::as_array_mut).into_iter().flatten() {
                    inner.as_object_mut().map(|inner| inner.remove("cache_control"));
                }
            }
        }
    }

    /// A message of `role`: a string, or one to four blocks, the last often marked.
    fn push(&mut self, rng: &mut ChaCha8Rng, role: &str) {
        let content = if rng.random_bool(0.3) {
            Value::from(words(rng, 5))
        } else {
            let mut blocks: Vec<Value> =
                (0..rng.random_range(1..5)).map(|_| block(rng, role, self.turn)).collect();
            let last = blocks.last_mut().and_then(Value::as_object_mut).expect("a block");
            // A marked thinking block is refused: now and then only.
            let thinking = last["type"] == "thinking";
            if rng.random_bool(if thinking { 0.05 } else { 0.7 }) {
                last.insert("cache_control".into(), marker(rng));
            }
            Value::Array(blocks)
        };
        self.messages.push(json!({"role": role, "content": content}));
    }

    /// The request; now and then, this time only, ending with an empty assistant message (a
    /// prefill the API accepts) or an empty text block (which it refuses).
    fn body(&self, rng: &mut ChaCha8Rng) -> String {
        let mut messages = self.messages.clone();
        match rng.random_range(0..40) {
            0 => messages.push(json!({"role": "user", "content": [{"type": "text", "text": ""}]})),
            1 | 2 => messages.push(json!({"role": "assistant", "content": []})),
            _ => {}
        }
        let mut body = Map::new();
        body.insert("model".into(), Value::from(self.model));
        body.insert("max_tokens".into(), Value::from(1024));
        if !self.system.is_null() {
            body.insert("system".into(), self.system.clone());
        }
        if !self.tools.is_empty() {
            body.insert("tools".into(), Value::Array(self.tools.clone()));
        }
        body.insert("messages".into(), Value::Array(messages));
        body.extend(self.params.clone());
        Value::Object(body).to_string()
    }
}

/// The settings a renderer may run under.
fn config(rng: &mut ChaCha8Rng) -> PromptConfig {
    PromptConfig {
        identity: [IdentityMode::Semantic, IdentityMode::Wire][rng.random_range(0..2)],
        collapse_tool_runs: rng.random_bool(0.8),
        render_config_ahead: rng.random_bool(0.2),
        deferred_tools: [DeferredTools::Documented, DeferredTools::Observed][rng.random_range(0..2)],
        ..PromptConfig::default()
    }
}

/// One client's requests: `count` bodies of 1 to 3 interleaved conversations (one without
/// `churn`), each growing a turn at a time, changing as `churn` says.
fn bodies(rng: &mut ChaCha8Rng, count: usize, churn: bool) -> Vec<String> {
    let count_of_conversations = if churn { rng.random_range(1..4) } else { 1 };
    let mut conversations: Vec<Conversation> =
        (0..count_of_conversations).map(|_| Conversation::new(rng, churn)).collect();
    (0..count)
        .map(|_| {
            let pick = rng.random_range(0..conversations.len());
            conversations[pick].next(rng);
            conversations[pick].body(rng)
        })
        .collect()
}

/// Renders one client's requests both ways and requires the same answer for each. Returns how
/// many were resumed.
fn check(seed: u64, count: usize, churn: bool) -> u64 {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let config = if churn { config(&mut rng) } else { PromptConfig::default() };
    let prices = PriceTable::builtin();
    let mut whole = Renderer::new(config.clone(), Box::new(Bytes4));
    let mut resumed = Renderer::new(config, Box::new(Bytes4));
    // One request kept, or a few: interleaved conversations then each resume from their own.
    let mut sketch = RenderSketch::with_capacity(if churn { rng.random_range(1..5) } else { 1 });
    for body in bodies(&mut rng, count, churn) {
        let Ok(view) = parse_request(body.as_bytes()) else { continue };
        let model = &prices.resolve(view.model.as_deref().unwrap_or("")).price;
        // A client names the tool-changes beta from its first request on, or now and then.
        let tool_changes =
            [ToolChanges::Invalidate, ToolChanges::KeepCache][usize::from(churn && rng.random_bool(0.1))];
        let keys = BlockKeys::of(&view);
        let expected = whole.render_keyed(&view, Some(&keys), model, tool_changes);
        let got = resumed.render_resumed(&view, &keys, &mut sketch, model, tool_changes);
        assert_eq!(expected, got, "seed {seed}: rendered differently:\n{body}");
    }
    resumed.counts().resumed
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn a_resumed_render_is_the_whole_render(seed in any::<u64>(), count in 2usize..40) {
        check(seed, count, true);
        check(seed, count, false);
    }
}

/// The checks reach the resumed path, not only the whole render: a conversation that only grows
/// is resumed at most turns (not its first two, those after a refusal, nor those whose new
/// blocks turn a salt on: a first image or cited document), and the churning clients still often.
#[test]
fn growing_conversations_are_resumed() {
    let requests = 64 * 30;
    let steady: u64 = (0..64).map(|seed| check(seed, 30, false)).sum();
    assert!(steady * 10 > requests * 7, "{steady} of {requests} requests resumed");
    let churning: u64 = (0..64).map(|seed| check(seed, 30, true)).sum();
    assert!(churning * 5 > requests, "{churning} of {requests} requests resumed");
}

/// A thinking block has no inner blocks to move a marker up from (the API moves one up only
/// from a tool result's `content` and a document's `source.content`), so a marker in a thinking
/// block's `content` is refused, by the resumed render as by the whole one, with a top-level
/// `cache_control` or without. (It once gave the block a breakpoint after the automatic one.)
#[test]
fn a_marker_in_a_thinking_blocks_content_is_refused_by_both_renders() {
    let thinking = json!({"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s",
        "content": [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}]}]});
    let hello = json!({"role": "user", "content": "hello"});
    let next = json!({"role": "user", "content": "next"});
    let prices = PriceTable::builtin();
    let model = &prices.resolve("claude-sonnet-4-6").price;
    for automatic in [Value::Null, json!({"type": "ephemeral"}), json!({"type": "ephemeral", "ttl": "1h"})] {
        let first = json!({"model": "claude-sonnet-4-6", "max_tokens": 8, "messages": [hello, thinking], "cache_control": automatic});
        let second = json!({"model": "claude-sonnet-4-6", "max_tokens": 8, "messages": [hello, thinking, next], "cache_control": automatic});
        let mut whole = Renderer::new(PromptConfig::default(), Box::new(Bytes4));
        let mut resumed = Renderer::new(PromptConfig::default(), Box::new(Bytes4));
        let mut sketch = RenderSketch::default();
        for body in [first.to_string(), second.to_string()] {
            let view = parse_request(body.as_bytes()).unwrap();
            let keys = BlockKeys::of(&view);
            let expected = whole.render_keyed(&view, Some(&keys), model, ToolChanges::Invalidate);
            let got = resumed.render_resumed(&view, &keys, &mut sketch, model, ToolChanges::Invalidate);
            let refused = expected.as_ref().expect_err(&body);
            assert_eq!(
                refused.message, "messages.1.content.0.content: Extra inputs are not permitted",
                "{body}"
            );
            assert_eq!(expected, got, "{body}");
        }
    }
}

/// `serve` renders each connection's prompts from its last request, and `replay` each trace's
/// from its last few: every request of a keep-alive client is priced as an endpoint rendering
/// every prompt whole prices it (in the same order, at the times the server stamped), and as the
/// server's own trace replays it, refusals included; and both did resume (their render counts).
#[test]
fn a_connection_and_its_trace_are_priced_as_whole_renders_price_them() {
    use forkcache_engine::SimTime;
    use forkcache_engine::endpoint::{Call, EndpointConfig, MockEndpoint};
    use forkcache_ingest::{replay::ReplayConfig, replay::replay};
    use forkcache_net::serve::ServeConfig;

    use crate::serve_harness::{Running, client, post};

    // Lenient: the random bodies are about resuming renders, not about the API's own checks,
    // which would refuse many of them before any render.
    let lenient = EndpointConfig { lenient: true, ..EndpointConfig::default() };
    for seed in 0..4 {
        let trace = crate::serve::tempfile(&format!("resumed-render-{seed}"));
        let config = ServeConfig { trace: Some(trace.clone()), ..ServeConfig::default() };
        let server = Running::start(config, lenient.clone());
        let (agent, url) = (client(), server.url("/v1/messages"));
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let served: Vec<Result<forkcache_engine::Usage, String>> = bodies(&mut rng, 40, seed % 2 == 0)
            .iter()
            .map(|body| {
                let answer = post(&agent, &url, Some("key"), body.as_bytes());
                if answer.status == 200 { Ok(answer.usage()) } else { Err(answer.error().0) }
            })
            .collect();
        let renders = server.stop().renders;
        let text = std::fs::read_to_string(&trace).unwrap();

        // Whole renders: each traced body priced by `handle` (every prompt rendered whole), at its
        // arrival.
        let mut whole = MockEndpoint::new(lenient.clone(), PriceTable::builtin()).unwrap();
        let input = |usage: &forkcache_engine::Usage| {
            (usage.input_tokens, usage.cache_creation, usage.cache_read_input_tokens)
        };
        for (index, line) in text.lines().skip(1).enumerate() {
            let line: Value = serde_json::from_str(line).unwrap();
            if line.get("error").is_some() {
                assert!(served[index].is_err(), "seed {seed}, request {index}: refused at the edge");
                continue;
            }
            let (body, at) = (line["body"].to_string(), SimTime(line["at_ms"].as_u64().unwrap()));
            let call = Call { api_key: Some("key"), first_byte: Some(at), ..Call::new(body.as_bytes(), at) };
            let priced = whole.handle(call).map(|exchange| exchange.record.usage);
            let served = served[index].as_ref().map(input).map_err(String::as_str);
            let priced = priced.as_ref().map(input).map_err(|error| error.kind.type_name());
            assert_eq!(priced, served, "seed {seed}, request {index}");
        }

        let replay_config = ReplayConfig { endpoint: lenient.clone(), ..ReplayConfig::default() };
        let report = replay(&replay_config, PriceTable::builtin(), &text).unwrap();
        let replayed: Vec<Result<forkcache_engine::Usage, String>> = report
            .records
            .iter()
            .map(|r| r.result.as_ref().map(|record| record.usage).map_err(|e| e.kind.type_name().to_string()))
            .collect();
        assert_eq!(replayed, served, "seed {seed}");
        // The answers cannot tell a resumed render from a whole one: the counts can. The same
        // requests reach the renderer in both (the edge's and the endpoint's early refusals
        // never do), and the resumed path is taken as often as `growing_conversations_are_resumed`
        // requires of the renderer alone. A connection keeps its last request only, so a churning
        // client's interleaved conversations resume less often on the server than in a replay.
        let rendered = renders.whole + renders.resumed;
        assert_eq!(report.renders.whole + report.renders.resumed, rendered, "seed {seed}");
        let least_percent = if seed % 2 == 0 { 20 } else { 70 };
        for (path, counts) in [("serve", renders), ("replay", report.renders)] {
            assert!(counts.resumed * 100 > rendered * least_percent, "seed {seed}, {path}: {counts:?}");
        }
        assert!(served.iter().filter(|r| r.is_ok()).count() > 20, "seed {seed}: most requests priced");
        let _ = std::fs::remove_file(trace);
    }
}
