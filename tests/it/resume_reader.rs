//! The resuming trace reader (`LineReader`, the one replay's workers use) reads every line exactly
//! as the one-pass read does (`ParsedBatch::parse`): the same entries (compared in their `Debug`
//! form, every field's value) and the same block keys — on traces of growing conversations in every line shape the reader walks
//! (raw bodies, envelopes with the body last or not, string bodies, duplicate and escaped keys,
//! whitespace, `null` members, session markers), and on the same lines with a byte changed,
//! dropped or added anywhere, or cut short: lines that share a prefix with a body the reader has
//! sketched and then part from it, valid or not.

use std::io::Cursor;

use proptest::prelude::*;
use rand::SeedableRng as _;
use rand_chacha::ChaCha8Rng;
use serde_json::{Map, Value, json};

use forkcache_ingest::trace::{BatchReader, LineReader, ParsedBatch};

/// Reads `trace` both ways in batches of about `batch_bytes` and requires the same result for
/// every line; the reader keeps its sketches from batch to batch, as a replay worker does.
fn check_same(trace: &[u8], batch_bytes: usize) {
    check_same_with(trace, batch_bytes, LineReader::default());
}

/// [`check_same`] with a given reader.
fn check_same_with(trace: &[u8], batch_bytes: usize, mut reader: LineReader) {
    let mut one_pass = BatchReader::new(Cursor::new(trace), batch_bytes);
    let mut resumed = BatchReader::new(Cursor::new(trace), batch_bytes);
    while let Some(expected) = one_pass.next_batch().unwrap() {
        let expected = ParsedBatch::parse(expected);
        let got = reader.parse(resumed.next_batch().unwrap().expect("the same batches"));
        assert_eq!(expected.entries().len(), got.entries().len());
        for (expected, got) in expected.entries().iter().zip(got.entries()) {
            let (want, have) = (format!("{:?}", expected.entry), format!("{:?}", got.entry));
            assert_eq!(want, have, "a line read differently; the trace:\n{}", String::from_utf8_lossy(trace));
            assert_eq!(expected.keys, got.keys, "block keys differ for {want}");
            assert_eq!(expected.bytes, got.bytes);
        }
    }
    assert!(resumed.next_batch().unwrap().is_none());
}

/// How a line is written.
#[derive(Clone, Copy)]
struct Style {
    /// A space after every `:` and `,` outside strings.
    spaced: bool,
    /// `messages` spelled with an escape (`"\u006dessages"`).
    escaped_key: bool,
}

/// Compact JSON, or with spaces, never a newline (a trace line is one line).
fn write(value: &Value, style: Style, out: &mut String) {
    let (colon, comma) = if style.spaced { (": ", ", ") } else { (":", ",") };
    match value {
        Value::Object(map) => {
            out.push('{');
            for (index, (key, value)) in map.iter().enumerate() {
                if index > 0 {
                    out.push_str(comma);
                }
                if style.escaped_key && key == "messages" {
                    out.push_str(r#""\u006dessages""#);
                } else {
                    out.push_str(&Value::from(key.as_str()).to_string());
                }
                out.push_str(colon);
                write(value, style, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push_str(comma);
                }
                write(item, style, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Words with the characters JSON escapes, so strings hold escapes as real traces' do.
const WORDS: [&str; 10] =
    ["fork", "cache", "the", "file\tname", "say \"hi\"", "a\\b", "line\nbreak", "é", "🙂", "x"];

fn words(rng: &mut ChaCha8Rng, count: usize) -> String {
    (0..count).map(|_| WORDS[rng.random_range(0..WORDS.len())]).collect::<Vec<_>>().join(" ")
}

/// One conversation: its fixed parts and its growing history.
struct Conversation {
    /// Member order: `messages` first (as Claude Code sends), or last.
    messages_first: bool,
    model: String,
    system: Value,
    tools: Value,
    messages: Vec<Value>,
    turn: usize,
}

impl Conversation {
    fn new(rng: &mut ChaCha8Rng, id: usize) -> Conversation {
        let system = match rng.random_range(0..4) {
            0 => Value::Null,
            1 => Value::from(format!("You are agent {id}. {}", words(rng, 12))),
            2 => {
                json!([{"type": "text", "text": format!("agent {id}: {}", words(rng, 20)), "cache_control": {"type": "ephemeral"}}])
            }
            _ => {
                json!([{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1"}, {"type": "text", "text": words(rng, 30)}])
            }
        };
        let tools: Vec<Value> = (0..rng.random_range(0..4))
            .map(|i| json!({"name": format!("Tool{i}"), "description": words(rng, 8), "input_schema": {"type": "object"}}))
            .collect();
        Conversation {
            messages_first: rng.random_bool(0.5),
            model: ["claude-sonnet-4-6", "claude-opus-4-8"][rng.random_range(0..2)].to_string(),
            system,
            tools: Value::Array(tools),
            messages: Vec::new(),
            turn: 0,
        }
    }

    /// Adds a turn: an answer (text or a tool call) and a question (text, blocks or a tool
    /// result), the breakpoint moved to the new last block.
    fn grow(&mut self, rng: &mut ChaCha8Rng) {
        self.turn += 1;
        for message in &mut self.messages {
            if let Some(blocks) = message["content"].as_array_mut() {
                for block in blocks {
                    if let Some(block) = block.as_object_mut() {
                        block.remove("cache_control");
                    }
                }
            }
        }
        if self.turn > 1 {
            let id = format!("toolu_{}", self.turn);
            let answer = if rng.random_bool(0.5) {
                json!({"role": "assistant", "content": words(rng, 6)})
            } else {
                json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "Tool0", "input": {"path": words(rng, 2)}}]})
            };
            self.messages.push(answer);
        }
        let question = match rng.random_range(0..3) {
            0 => json!({"role": "user", "content": words(rng, 10)}),
            1 => {
                json!({"role": "user", "content": [{"type": "text", "text": words(rng, 15), "cache_control": {"type": "ephemeral"}}]})
            }
            _ => json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": format!("toolu_{}", self.turn), "content": words(rng, 25)},
                {"type": "text", "text": words(rng, 4), "cache_control": {"type": "ephemeral"}}
            ]}),
        };
        self.messages.push(question);
    }

    /// The request body, members in this conversation's order, with `extra` members mixed in.
    fn body(&self, extra: &[(&str, Value)]) -> Value {
        let mut body = Map::new();
        body.insert("model".into(), Value::from(self.model.clone()));
        if self.messages_first {
            body.insert("messages".into(), Value::Array(self.messages.clone()));
        }
        if !self.system.is_null() {
            body.insert("system".into(), self.system.clone());
        }
        if self.tools.as_array().is_some_and(|tools| !tools.is_empty()) {
            body.insert("tools".into(), self.tools.clone());
        }
        if !self.messages_first {
            body.insert("messages".into(), Value::Array(self.messages.clone()));
        }
        body.insert("max_tokens".into(), Value::from(1024));
        for (key, value) in extra {
            body.insert((*key).into(), value.clone());
        }
        body.insert("stream".into(), Value::Bool(true));
        Value::Object(body)
    }
}

/// A body's text with a member appended after its closing brace is removed: duplicate keys, which
/// a `Map` cannot hold.
fn with_duplicate(body: &str, member: &str) -> String {
    format!("{},{member}}}", &body[..body.len() - 1])
}

/// One line for `conversation`'s current request, in one of the shapes a trace may hold.
fn line(rng: &mut ChaCha8Rng, conversation: &Conversation, at_ms: u64) -> String {
    let style = Style { spaced: rng.random_bool(0.2), escaped_key: rng.random_bool(0.1) };
    let extra: Vec<(&str, Value)> = match rng.random_range(0..6) {
        0 => vec![("metadata", json!({"user_id": words(rng, 1)}))],
        1 => vec![("thinking", json!({"type": "enabled", "budget_tokens": 2048}))],
        2 => vec![("cache_control", json!({"type": "ephemeral"}))],
        _ => vec![],
    };
    let mut body = String::new();
    write(&conversation.body(&extra), style, &mut body);
    body = match rng.random_range(0..12) {
        0 => with_duplicate(&body, r#""messages":null"#),
        1 => with_duplicate(&body, r#""tools":[{"name":"Late","input_schema":{}}]"#),
        2 => with_duplicate(&body, r#""system":"late system""#),
        3 => with_duplicate(&body, r#""max_tokens":7"#),
        _ => body,
    };
    let usage = r#""usage":{"input_tokens":3,"cache_creation_input_tokens":0,"cache_read_input_tokens":900,"output_tokens":5}"#;
    match rng.random_range(0..8) {
        0 | 1 => body,
        2 => format!("{{\"at_ms\":{at_ms},\"workspace\":\"w\",{usage},\"body\":{body}}}"),
        3 => format!("{{\"at_ms\":{at_ms},\"body\":{body},\"first_byte_ms\":{}}}", at_ms + 9),
        4 => format!("{{\"at_ms\":{at_ms},\"body\":{}}}", Value::from(body)),
        5 => format!("{{ \"at_ms\" : {at_ms} , \"body\" : {body} }}"),
        _ => format!("{{\"at_ms\":{at_ms},\"body\":{body}}}"),
    }
}

/// `line` with one byte changed, dropped or added (at its end too), or cut short, somewhere.
fn mutated(rng: &mut ChaCha8Rng, line: &str) -> String {
    let mut bytes = line.as_bytes().to_vec();
    let at = rng.random_range(0..bytes.len());
    const NOISE: &[u8] = b"{}[],:\"\\ 0a7-en";
    let noise = NOISE[rng.random_range(0..NOISE.len())];
    match rng.random_range(0..5) {
        0 => bytes[at] = noise,
        1 => drop(bytes.remove(at)),
        2 => bytes.insert(at, noise),
        3 => bytes.push(noise),
        _ => bytes.truncate(at),
    }
    String::from_utf8_lossy(&bytes).replace('\n', " ")
}

/// A few conversations (`count` of them, drawn from the range).
fn conversations(rng: &mut ChaCha8Rng, count: std::ops::Range<usize>) -> Vec<Conversation> {
    (0..rng.random_range(count)).map(|id| Conversation::new(rng, id)).collect()
}

/// One of `conversations`, picked at random, a turn longer.
fn next_turn<'c>(rng: &mut ChaCha8Rng, conversations: &'c mut [Conversation]) -> &'c Conversation {
    let pick = rng.random_range(0..conversations.len());
    conversations[pick].grow(rng);
    &conversations[pick]
}

/// A trace of interleaved growing conversations, with odd lines among them.
fn trace(seed: u64, lines: usize) -> Vec<u8> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut conversations = conversations(&mut rng, 1..4);
    let mut out = String::new();
    for index in 0..lines {
        let conversation = next_turn(&mut rng, &mut conversations);
        let line = line(&mut rng, conversation, 1_000 * index as u64);
        match rng.random_range(0..20) {
            0 => out.push_str(&mutated(&mut rng, &line)),
            1 => out.push_str(
                r#"{"forkcache_session":{"started":"2026-11-25T00:00:00Z","version":"0.1.0","settings":{}}}"#,
            ),
            2 => out.push_str("[1, 2]"),
            3 => out.push_str("   "),
            _ => out.push_str(&line),
        }
        out.push('\n');
        // Often the same request again, changed: it shares a prefix with a sketched body.
        if rng.random_bool(0.3) {
            out.push_str(&mutated(&mut rng, &line));
            out.push('\n');
        }
    }
    out.into_bytes()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn resumed_lines_read_as_the_one_pass_read_reads_them(seed in any::<u64>(), lines in 4usize..40) {
        let trace = trace(seed, lines);
        // Small batches (a line or two each: sketches cross batches) and large ones; and a
        // reader without budget, which keeps its newest body alone.
        check_same(&trace, 1 << 10);
        check_same(&trace, 1 << 16);
        check_same_with(&trace, 1 << 10, LineReader::new(0));
    }
}

#[test]
fn an_agent_trace_reads_the_same_both_ways() {
    let spec = forkcache_scenario::synth::ConversationSpec {
        requests: 40,
        final_history_bytes: 200_000,
        ..Default::default()
    };
    let trace: String = forkcache_scenario::synth::growing_conversation(&spec)
        .iter()
        .map(|body| format!("{body}\n"))
        .collect();
    check_same(trace.as_bytes(), 1 << 18);
}

/// The cases that turn on exactly which bytes a reused member or message spans: a value that
/// continues past the bytes it shares with the sketched one (a longer number, a longer key), a
/// member sketched as `null`, a line cut inside a shared message, bytes after the line's object.
#[test]
fn shared_bytes_that_continue_differently_read_as_the_one_pass_read() {
    let base = r#"{"model":"m","system":"s","tools":[],"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}],"max_tokens":12}"#;
    let lines = [
        base,
        r#"{"model":"m","system":"s","tools":[],"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}],"max_tokens":123}"#,
        r#"{"model":"m","system":"s","tools":[]x,"messages":[{"role":"user","content":"a"}]}"#,
        r#"{"model":"m","system":"s","toolsX":[],"messages":[{"role":"user","content":"a"},{"role":"user","content":"bc"}]}"#,
        r#"{"model":"m","system":null,"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"},]}"#,
        r#"{"model":"m","system":nullx,"messages":[]}"#,
        r#"{"model":"m","system":"s","tools":[],"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]"#,
        r#"{"model":"m","system":"s","tools":[],"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}],"messages":null}"#,
        r#"{"model":"m","system":"s","tools":[],"messages":[{"role":"user","content":"a"},{"role":"robot","content":"b"}]}"#,
        r#"{"model":"m","system":"s","tools":[],"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}],"max_tokens":12} x"#,
        r#"{"model":"m","system":"s","tools":[],"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}],"max_tokens":12}}"#,
        base,
    ];
    let trace: String = lines.iter().map(|line| format!("{line}\n")).collect();
    check_same(trace.as_bytes(), 1 << 16);
    check_same(trace.as_bytes(), 16);
}

/// Every member a line or a body may hold, and a message's own members, nested near serde_json's
/// nesting limit: the reader reads each at its own offset, with more of the limit to spend than
/// in place, which must not matter (it applies only to values serde_json builds, and nothing
/// the reader builds nests deeply). A field given a recursive type later fails here.
#[test]
fn every_member_nested_near_the_limit_reads_as_the_one_pass_read() {
    let members = [
        "model",
        "max_tokens",
        "messages",
        "system",
        "tools",
        "tool_choice",
        "thinking",
        "output_config",
        "cache_control",
        "stream",
        "speed",
        "diagnostics",
        "inference_geo",
        "metadata",
        "unknown",
    ];
    let envelope_members =
        ["at_ms", "workspace", "betas", "first_byte_ms", "usage", "diagnostics", "error", "unknown"];
    let message = r#"{"role":"user","content":"hi"}"#;
    let mut lines = Vec::new();
    for depth in 120..=130 {
        for deep in [
            format!("{}{}", "[".repeat(depth), "]".repeat(depth)),
            format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth)),
        ] {
            for member in members {
                let body = format!(r#"{{"model":"m","messages":[{message}],"{member}":{deep}}}"#);
                lines.push(body.clone());
                lines.push(format!(r#"{{"at_ms":1,"body":{body}}}"#));
            }
            for member in envelope_members {
                lines.push(format!(
                    r#"{{"at_ms":1,"{member}":{deep},"body":{{"model":"m","messages":[{message}]}}}}"#
                ));
            }
            lines.push(format!(
                r#"{{"model":"m","messages":[{{"role":"user","content":"hi","extra":{deep}}}]}}"#
            ));
            lines.push(format!(r#"{{"model":"m","messages":[{{"role":"user","content":[{deep}]}}]}}"#));
            lines.push(format!(r#"{{"model":"m","messages":[{message},{{"role":"user","content":[{{"type":"text","text":"x","x":{deep}}}]}}]}}"#));
        }
    }
    let trace: String = lines.iter().map(|line| format!("{line}\n")).collect();
    check_same(trace.as_bytes(), 1 << 16);
}

/// A session marker's settings are a JSON tree, which serde_json builds under its nesting limit:
/// read at its own offset it would meet the limit one level later than in place. Around the
/// limit, markers read as the one-pass read reads them (some of these are unreadable lines).
#[test]
fn session_markers_nested_near_the_limit_read_as_the_one_pass_read() {
    let trace: String = (120..=130)
        .map(|depth| {
            let settings = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
            format!("{{\"forkcache_session\":{{\"started\":\"\",\"settings\":{settings}}}}}\n")
        })
        .collect();
    check_same(trace.as_bytes(), 1 << 16);
}

/// One request body as a client sends it (no envelope), in the shapes `line` writes them, with
/// now and then a member the edge checks: a wrong type, an unknown field, a duplicate.
fn body(rng: &mut ChaCha8Rng, conversation: &Conversation) -> String {
    let style = Style { spaced: rng.random_bool(0.2), escaped_key: rng.random_bool(0.1) };
    let extra: Vec<(&str, Value)> = match rng.random_range(0..10) {
        0 => vec![("metadata", json!({"user_id": words(rng, 1)}))],
        1 => vec![("temperature", json!(0.5)), ("stop_sequences", json!(["\n\nHuman:"]))],
        2 => vec![("temperature", json!("hot"))],
        3 => vec![("zeta", json!(1)), ("alpha", json!([1, {"b": null}]))],
        4 => vec![("top_k", json!(-3))],
        5 => vec![("thinking", json!({"type": "enabled", "budget_tokens": 2048}))],
        _ => vec![],
    };
    let mut body = String::new();
    write(&conversation.body(&extra), style, &mut body);
    match rng.random_range(0..12) {
        0 => with_duplicate(&body, r#""tools":[{"name":"Late","input_schema":{}}]"#),
        1 => with_duplicate(&body, r#""system":"late system""#),
        2 => with_duplicate(&body, r#""zeta":2"#),
        3 => format!(" {body}\n"),
        _ => body,
    }
}

/// Reads `bodies` in order with one `BodyReader` (as one connection's requests are read) and
/// with `parse_checked`, and requires the same answer for each: the view (in its `Debug` form),
/// the unknown fields, the block keys, or the same error.
fn check_bodies_same(bodies: &[String], strict: bool, reader: &mut forkcache_ingest::trace::BodyReader) {
    use forkcache_net::serve::validate::{parse_checked, read_checked};
    for text in bodies {
        let bytes = bytes::Bytes::from(text.clone());
        let text = std::str::from_utf8(&bytes).unwrap();
        let expected = parse_checked(text, strict).map(|(view, unknown)| {
            (format!("{view:?}"), unknown, forkcache_engine::prompt::BlockKeys::of(&view))
        });
        let got = read_checked(Some(&mut *reader), &bytes, text, strict)
            .map(|(view, unknown, keys)| (format!("{view:?}"), unknown, keys));
        assert_eq!(expected, got, "a body read differently:\n{text}");
    }
}

/// Growing conversations' bodies as one connection carries them, some changed a byte.
fn bodies(seed: u64, count: usize) -> Vec<String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut conversations = conversations(&mut rng, 1..3);
    let mut out = Vec::new();
    for _ in 0..count {
        let conversation = next_turn(&mut rng, &mut conversations);
        let body = body(&mut rng, conversation);
        out.push(if rng.random_range(0..10) == 0 { mutated(&mut rng, &body) } else { body.clone() });
        if rng.random_bool(0.3) {
            out.push(mutated(&mut rng, &body));
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// serve's per-connection reader answers every body as the one-pass read and check does.
    #[test]
    fn resumed_bodies_read_and_check_as_the_one_pass_read(seed in any::<u64>(), count in 2usize..30) {
        use forkcache_ingest::trace::{BodyBudget, BodyReader, BODY_BUDGET_BYTES};
        let bodies = bodies(seed, count);
        for strict in [false, true] {
            check_bodies_same(&bodies, strict, &mut BodyReader::new(BodyBudget::new(BODY_BUDGET_BYTES)));
        }
        // A reader whose budget is spent keeps nothing and reads every body in one pass.
        check_bodies_same(&bodies, false, &mut BodyReader::new(BodyBudget::new(0)));
    }
}

/// The budget counts the bodies the readers keep (the last each read, when it was sketched) and
/// gets them back when a reader moves on or is dropped; past it, nothing is kept.
#[test]
fn body_readers_keep_their_last_bodies_within_their_budget() {
    use forkcache_ingest::trace::{BodyBudget, BodyReader};
    let first = r#"{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}"#;
    let second = r#"{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"},{"role":"user","content":"and?"}]}"#;
    let read = |reader: &mut BodyReader, text: &str| {
        let bytes = bytes::Bytes::from(text.to_string());
        let text = std::str::from_utf8(&bytes).unwrap();
        reader.read(&bytes, text, |_, _| None).map(|(view, _)| view.messages.map(|m| m.len()))
    };
    // Room for the second body and the first, not for the second twice.
    let budget = BodyBudget::new(second.len() + first.len());
    let (mut one, mut two) = (BodyReader::new(budget.clone()), BodyReader::new(budget.clone()));
    assert_eq!(read(&mut one, first), Some(Some(1)));
    assert_eq!(budget.kept(), first.len());
    assert_eq!(read(&mut one, second), Some(Some(3)));
    assert_eq!(budget.kept(), second.len(), "the first body is given back when the second is kept");
    assert_eq!(read(&mut two, second), Some(Some(3)), "read in one pass, and not kept: no room");
    assert_eq!(budget.kept(), second.len());
    assert_eq!(read(&mut two, first), Some(Some(1)));
    assert_eq!(budget.kept(), second.len() + first.len());
    drop(one);
    assert_eq!(budget.kept(), first.len());
    drop(two);
    assert_eq!(budget.kept(), 0);
    // A member the view does not read goes to the caller, which may refuse it.
    let mut reader = BodyReader::new(budget.clone());
    let unknown = r#"{"model":"m","max_tokens":1,"zeta":3,"messages":[{"role":"user","content":"hi"}]}"#;
    assert_eq!(read(&mut reader, unknown), None);
    assert_eq!(budget.kept(), 0, "a refused body is not kept");
}
