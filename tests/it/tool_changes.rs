//! The beta `mid-conversation-tool-changes-2026-07-01`: on Fable 5, Mythos 5, Opus 4.8 and Opus 5
//! (and their point releases), adding or removing tools mid-conversation keeps the cached system
//! and messages; tokens of added tools were never cached and are billed as new input. Without
//! the beta, or on another model, a tools change is a prefix change.
//!
//! Sizes are declared (`forkcache_tokens`). Constants from the reference: Opus 5 has a 512-token
//! minimum and a 286-token hidden tool prompt (`tool_choice` auto); Sonnet 5 a 1,024-token minimum
//! and a 354-token hidden tool prompt; Opus 5.5's hidden prompt size is not in the table (0).

use serde_json::{Value, json};

use forkcache_engine::billing::{PriceTable, Usage};
use forkcache_engine::cache::MissCause;
use forkcache_engine::endpoint::Record;
use forkcache_engine::prompt::Dimension;
use forkcache_ingest::replay::{ReplayConfig, replay};
use forkcache_net::serve::ServeConfig;
use forkcache_wire::{Betas, MID_CONVERSATION_TOOL_CHANGES};

use crate::proxy::{RunningProxy, scratch, trace_lines};
use crate::serve::tempfile;
use crate::serve_harness::{Running, client, post_with_headers};
use crate::support::{Body, Client, Opts, U, assistant, bp, text, tool, u, user};

const OPUS_5: &str = "claude-opus-5";
const OPUS_5_5: &str = "claude-opus-5-5";
const SONNET_5: &str = "claude-sonnet-5";

/// A 2,000-token marked system prompt.
fn system() -> Value {
    json!([bp(text("system", 2_000))])
}

/// The first turn: `tools`, the system prompt, a marked 500-token question.
fn first_turn(model: &str, tools: Vec<Value>) -> Body {
    Body::new(model, vec![user(vec![bp(text("question", 500))])])
        .with("system", system())
        .with("tools", Value::Array(tools))
}

/// The second turn: the same question (its marker moved on), a 200-token answer and a marked
/// 100-token follow-up.
fn second_turn(model: &str, tools: Vec<Value>) -> Body {
    let messages = vec![
        user(vec![text("question", 500)]),
        assistant(vec![text("answer", 200)]),
        user(vec![bp(text("follow-up", 100))]),
    ];
    Body::new(model, messages).with("system", system()).with("tools", Value::Array(tools))
}

fn read_only() -> Vec<Value> {
    vec![tool("Read", 1_000)]
}

fn read_and_grep() -> Vec<Value> {
    vec![tool("Read", 1_000), tool("Grep", 300)]
}

fn send(client: &mut Client, body: &Body, at_ms: u64, betas: &Betas) -> Record {
    let opts = Opts { betas: Some(betas), ..Opts::default() };
    client.call(body, at_ms, opts).unwrap_or_else(|err| panic!("rejected: {err}"))
}

fn beta() -> Betas {
    Betas::from_names([MID_CONVERSATION_TOOL_CHANGES])
}

#[test]
fn with_the_beta_on_opus_5_an_added_tool_keeps_system_and_messages_cached() {
    let mut client = Client::new();
    let betas = beta();
    // T: Read 1,000; hidden prompt 1,286; system 3,286; question 3,786 — all written.
    let first = send(&mut client, &first_turn(OPUS_5, read_only()), 0, &betas);
    assert_eq!(U::of(&first), u(0, 3_786, 0, 0));
    // T: Read 1,000; Grep 1,300; hidden prompt 1,586; system 3,586; question 4,086; answer
    // 4,286; follow-up 4,386. The question's entry holds 3,786: read. The rest, 4,386 − 3,786 =
    // 600 (Grep 300 + answer 200 + follow-up 100), is new and written at the follow-up's marker.
    let second = send(&mut client, &second_turn(OPUS_5, read_and_grep()), 10_000, &betas);
    assert_eq!(U::of(&second), u(3_786, 600, 0, 0));
    assert_eq!(second.miss, None, "new tools are new content, not a miss");
    // The next turn with the same tools reads all 4,386 the second turn wrote; only its own
    // 100 + 50 tokens are written.
    let mut third = second_turn(OPUS_5, read_and_grep());
    let messages = third.0["messages"].as_array_mut().unwrap();
    messages[2] = user(vec![text("follow-up", 100)]);
    messages.push(assistant(vec![text("second answer", 100)]));
    messages.push(user(vec![bp(text("third question", 50))]));
    let third = send(&mut client, &third, 20_000, &betas);
    assert_eq!(U::of(&third), u(4_386, 150, 0, 0));
}

#[test]
fn without_the_beta_an_added_tool_changes_the_prefix() {
    let mut client = Client::new();
    let first = send(&mut client, &first_turn(OPUS_5, read_only()), 0, Betas::NONE);
    assert_eq!(U::of(&first), u(0, 3_786, 0, 0));
    // Nothing is read: system and messages follow other tools. All 4,386 tokens are written.
    let second = send(&mut client, &second_turn(OPUS_5, read_and_grep()), 10_000, Betas::NONE);
    assert_eq!(U::of(&second), u(0, 4_386, 0, 0));
    let miss = second.miss.expect("a tools change is a miss");
    assert_eq!(
        (miss.cause, miss.dimension, miss.path.as_str()),
        (MissCause::PrefixChanged, Some(Dimension::Tools), "tools[1]")
    );
}

#[test]
fn on_a_model_the_beta_does_not_list_an_added_tool_changes_the_prefix() {
    let mut client = Client::new();
    let betas = beta();
    // Sonnet 5, T: Read 1,000; hidden prompt 1,354; system 3,354; question 3,854.
    let first = send(&mut client, &first_turn(SONNET_5, read_only()), 0, &betas);
    assert_eq!(U::of(&first), u(0, 3_854, 0, 0));
    // Read 1,000; Grep 1,300; hidden prompt 1,654; system 3,654; question 4,154; answer 4,354;
    // follow-up 4,454: nothing read, all written.
    let second = send(&mut client, &second_turn(SONNET_5, read_and_grep()), 10_000, &betas);
    assert_eq!(U::of(&second), u(0, 4_454, 0, 0));
    assert_eq!(second.miss.map(|miss| miss.cause), Some(MissCause::PrefixChanged));
}

#[test]
fn with_the_beta_a_removed_tool_keeps_the_cache_and_reads_up_to_the_requests_own_length() {
    let mut client = Client::new();
    let betas = beta();
    // T: Read 1,000; Grep 1,300; hidden prompt 1,586; system 3,586; question 4,086.
    let first = send(&mut client, &first_turn(OPUS_5, read_and_grep()), 0, &betas);
    assert_eq!(U::of(&first), u(0, 4_086, 0, 0));
    // Without Grep, T: Read 1,000; hidden prompt 1,286; system 3,286; question 3,786; answer
    // 3,986; follow-up 4,086. The question's entry (4,086 when written) is read up to this
    // request's 3,786; answer and follow-up, 300, are written.
    let second = send(&mut client, &second_turn(OPUS_5, read_only()), 10_000, &betas);
    assert_eq!(U::of(&second), u(3_786, 300, 0, 0));
    assert_eq!(second.miss, None);

    let mut strict = Client::new();
    send(&mut strict, &first_turn(OPUS_5, read_and_grep()), 0, Betas::NONE);
    let second = send(&mut strict, &second_turn(OPUS_5, read_only()), 10_000, Betas::NONE);
    assert_eq!(U::of(&second), u(0, 4_086, 0, 0), "without the beta the removal misses everything");
    assert_eq!(
        second.miss.map(|miss| (miss.cause, miss.dimension)),
        Some((MissCause::PrefixChanged, Some(Dimension::Tools)))
    );
}

#[test]
fn opus_5_5_counts_as_opus_5() {
    let mut client = Client::new();
    let betas = beta();
    // No hidden prompt size in the table: T: Read 1,000; system 3,000; question 3,500.
    let first = send(&mut client, &first_turn(OPUS_5_5, read_only()), 0, &betas);
    assert_eq!(U::of(&first), u(0, 3_500, 0, 0));
    // Read 1,000; Grep 1,300; system 3,300; question 3,800; answer 4,000; follow-up 4,100:
    // 3,500 read, 4,100 − 3,500 = 600 written.
    let second = send(&mut client, &second_turn(OPUS_5_5, read_and_grep()), 10_000, &betas);
    assert_eq!(U::of(&second), u(3_500, 600, 0, 0));
}

/// Input-side numbers of a `usage` (output depends on the server's reply).
fn input_side(usage: &Usage) -> (u64, u64, u64) {
    (usage.input_tokens, usage.cache_read_input_tokens, usage.cache_creation_input_tokens)
}

#[test]
fn serve_reads_the_beta_header_records_it_in_the_trace_and_replay_prices_alike() {
    let trace = tempfile("tool-changes");
    let _ = std::fs::remove_file(&trace);
    let config = ServeConfig { trace: Some(trace.clone()), ..ServeConfig::default() };
    let server = Running::start(config, Default::default());
    let agent = client();
    let url = server.url("/v1/messages");
    let first = first_turn(OPUS_5, read_only()).bytes();
    // One header naming two betas; the next request names them in two headers. (A request
    // without the beta hashes its system and messages after its tools, so the conversation names
    // it from its first request on, as Claude Code does.)
    let one_header = [("anthropic-beta", "claude-code-20250219,mid-conversation-tool-changes-2026-07-01")];
    let answer = post_with_headers(&agent, &url, &one_header, &first);
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(input_side(&answer.usage()), (0, 0, 3_786));
    // The same arithmetic as without a server: 3,786 read, 600 written.
    let headers = [
        ("anthropic-beta", "claude-code-20250219"),
        ("anthropic-beta", "mid-conversation-tool-changes-2026-07-01, effort-2025-11-24"),
    ];
    let second = second_turn(OPUS_5, read_and_grep()).bytes();
    let answer = post_with_headers(&agent, &url, &headers, &second);
    assert_eq!(answer.status, 200, "{}", answer.body);
    let served = answer.usage();
    assert_eq!(input_side(&served), (0, 3_786, 600));
    server.stop();

    let text = std::fs::read_to_string(&trace).unwrap();
    let lines: Vec<Value> = text.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(lines.len(), 3, "a session marker and two requests");
    assert_eq!(
        lines[1]["betas"],
        json!(["claude-code-20250219", "mid-conversation-tool-changes-2026-07-01"])
    );
    assert_eq!(
        lines[2]["betas"],
        json!(["claude-code-20250219", "mid-conversation-tool-changes-2026-07-01", "effort-2025-11-24"])
    );
    let report = replay(&ReplayConfig::default(), PriceTable::builtin(), &text).unwrap();
    let replayed = report.records[1].result.as_ref().unwrap();
    assert_eq!(input_side(&replayed.usage), (0, 3_786, 600));
}

#[test]
fn replay_passes_envelope_betas_on_and_an_envelope_without_them_is_strict() {
    let line = |body: &Body, at_ms: u64, betas: Option<Value>| {
        let mut envelope = json!({"at_ms": at_ms, "body": body.0});
        if let Some(betas) = betas {
            envelope["betas"] = betas;
        }
        envelope.to_string()
    };
    let with_beta = Some(json!([MID_CONVERSATION_TOOL_CHANGES]));
    let first = first_turn(OPUS_5, read_only());
    let second = second_turn(OPUS_5, read_and_grep());
    let usages = |trace: String| -> Vec<(u64, u64, u64)> {
        let report = replay(&ReplayConfig::default(), PriceTable::builtin(), &trace).unwrap();
        report.records.iter().map(|r| input_side(&r.result.as_ref().unwrap().usage)).collect()
    };
    let beta_trace = [line(&first, 0, with_beta.clone()), line(&second, 10_000, with_beta)].join("\n");
    assert_eq!(usages(beta_trace), [(0, 0, 3_786), (0, 3_786, 600)]);
    // An old trace (no `betas`) reads as before: strict, nothing read.
    let old_trace = [line(&first, 0, None), line(&second, 10_000, None)].join("\n");
    assert_eq!(usages(old_trace), [(0, 0, 3_786), (0, 0, 4_386)]);
}

#[test]
fn the_proxy_records_the_betas_it_passes_on_and_its_trace_replays_in_agreement() {
    let dir = scratch("tool-changes");
    let server = Running::start(ServeConfig::default(), Default::default());
    let proxy = RunningProxy::start(&server.url(""), Some(dir.join("proxy.jsonl")));
    let agent = client();
    let url = proxy.url("/v1/messages");
    let headers = [("anthropic-beta", MID_CONVERSATION_TOOL_CHANGES)];
    let first = post_with_headers(&agent, &url, &headers, &first_turn(OPUS_5, read_only()).bytes());
    assert_eq!(input_side(&first.usage()), (0, 0, 3_786));
    // The upstream saw the header too: it read the system and the question despite the new tool.
    let second = post_with_headers(&agent, &url, &headers, &second_turn(OPUS_5, read_and_grep()).bytes());
    assert_eq!(input_side(&second.usage()), (0, 3_786, 600));
    proxy.stop();
    server.stop();

    let lines = trace_lines(&dir.join("proxy.jsonl"));
    assert_eq!(lines.len(), 2);
    assert!(lines.iter().all(|line| line["betas"] == json!([MID_CONVERSATION_TOOL_CHANGES])));
    let text = std::fs::read_to_string(dir.join("proxy.jsonl")).unwrap();
    let report = replay(&ReplayConfig::default(), PriceTable::builtin(), &text).unwrap();
    let recorded = report.recorded.clone().expect("the trace recorded usage");
    assert_eq!((recorded.requests, recorded.compared, recorded.agreed), (2, 2, 2));
    let _ = std::fs::remove_dir_all(&dir);
}
