//! `proxy --redact` (issue: secrets left in clear): a redacted body holds none of the strings
//! written, stays a request the API's checks accept, and replays to the same usage under the
//! default tokenizer — on generated conversations and on real requests (`fixtures/clients/` and,
//! when present, `../shared/corpus/captures/envelopes/`).

use std::path::Path;

use proptest::prelude::*;
use serde_json::{Value, json};

use forkcache_engine::billing::{PriceTable, Usage};
use forkcache_ingest::replay::{ReplayConfig, replay};
use forkcache_net::proxy::redact;
use forkcache_wire::{Betas, check::check_request, parse_request_str};

use crate::strict_traffic::{betas_of, captured_envelopes, files_in};

/// What replay made of each line: its usage, or the refusal's type.
fn outcomes(trace: &str) -> Vec<Result<Usage, String>> {
    let report = replay(&ReplayConfig::default(), PriceTable::builtin(), trace).unwrap();
    report
        .records
        .iter()
        .map(|record| match &record.result {
            Ok(result) => Ok(result.usage),
            Err(error) => Err(format!("{error:?}").chars().take(40).collect()),
        })
        .collect()
}

/// The body's text as the client sent it (some envelopes keep it as a JSON string).
fn body_text(body: &Value) -> String {
    body.as_str().map_or_else(|| body.to_string(), str::to_string)
}

/// The envelope line with its body redacted, in the form the proxy writes it.
fn redacted_line(envelope: &Value) -> Value {
    let mut envelope = envelope.clone();
    if let Some(body) = envelope.get_mut("body") {
        let redacted = String::from_utf8(redact(body_text(body).as_bytes())).unwrap();
        *body = serde_json::from_str(&redacted).unwrap_or(Value::String(redacted));
    }
    envelope
}

/// A body's length once compacted (the proxy writes a redacted body compact); a body that is not
/// JSON as it is.
fn compact_len(text: &str) -> usize {
    serde_json::from_str::<Value>(text).map_or(text.len(), |value| value.to_string().len())
}

fn accepted(body: &Value, betas: &Betas) -> bool {
    parse_request_str(&body_text(body)).is_ok_and(|view| check_request(&view, betas).is_ok())
}

/// Redacts every envelope of `trace` and checks the three promises; returns how many requests
/// were compared.
fn check_trace(name: &str, trace: &str) -> usize {
    let envelopes: Vec<Value> = trace
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{name}: {e}")))
        .collect();
    let redacted: Vec<Value> = envelopes.iter().map(redacted_line).collect();
    for (index, (original, redacted)) in envelopes.iter().zip(&redacted).enumerate() {
        let Some(body) = original.get("body") else { continue };
        let betas = betas_of(original);
        if accepted(body, &betas) {
            assert!(accepted(&redacted["body"], &betas), "{name}:{index}: the redacted body is refused");
        }
        assert_eq!(
            compact_len(&body_text(&redacted["body"])),
            compact_len(&body_text(body)),
            "{name}:{index}: the body keeps its length"
        );
    }
    let joined = |lines: &[Value]| lines.iter().map(Value::to_string).collect::<Vec<_>>().join("\n");
    let before = outcomes(&joined(&envelopes));
    assert_eq!(outcomes(&joined(&redacted)), before, "{name}: the redacted trace replays differently");
    before.len()
}

/// A string of at least twelve lowercase letters, then anything: the letters make two different
/// strings' rewritings differ except with odds of 26⁻¹² (shorter strings can collide — see
/// `redact`'s documentation — and would then fail this test for a reason it documents).
fn written() -> impl Strategy<Value = String> {
    ("[a-z]{12}", any::<String>()).prop_map(|(letters, rest)| {
        let rest: String = rest.chars().take(30).collect();
        format!("{letters}{rest}")
    })
}

/// A conversation over a pool of strings: a long marked system prompt (so later requests read
/// it), tools, tool calls and results, an image, stop sequences and a user id, each request one
/// turn longer than the last and marked at its end.
fn conversation() -> impl Strategy<Value = Vec<String>> {
    (prop::collection::vec(written(), 6..12), 2..5usize, prop::collection::vec(0..6usize, 8))
        .prop_map(|(pool, turns, picks)| {
            let pick = |i: usize| pool[picks[i % picks.len()] % pool.len()].clone();
            let system = json!([{"type": "text", "text": pick(0).repeat(200), "cache_control": {"type": "ephemeral"}}]);
            let tools = json!([{"name": "lookup", "description": pick(1), "input_schema": {"type": "object", "properties": {"q": {"type": "string", "description": pick(2)}}}}]);
            let mut messages: Vec<Value> = Vec::new();
            let mut bodies = Vec::new();
            for turn in 0..turns {
                let id = format!("toolu_{turn}");
                messages.push(json!({"role": "user", "content": [
                    {"type": "text", "text": pick(turn + 3)},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]}));
                let mut body = json!({"model": "claude-sonnet-4-5", "max_tokens": 64, "system": system,
                    "tools": tools, "messages": messages, "stop_sequences": [pick(turn)],
                    "metadata": {"user_id": pick(turn + 1)}});
                let last = body["messages"].as_array_mut().unwrap().last_mut().unwrap();
                last["content"][0]["cache_control"] = json!({"type": "ephemeral"});
                bodies.push(body.to_string());
                messages.push(json!({"role": "assistant", "content": [
                    {"type": "tool_use", "id": id, "name": "lookup", "input": {"q": pick(turn + 4)}}]}));
                messages.push(json!({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": id, "content": pick(turn + 5)}]}));
            }
            bodies
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn a_redacted_conversation_replays_to_the_same_usage(bodies in conversation()) {
        let trace: Vec<String> = bodies
            .iter()
            .enumerate()
            .map(|(i, body)| format!(r#"{{"at_ms":{},"body":{body}}}"#, i * 1_000))
            .collect();
        let trace = trace.join("\n");
        let usages = outcomes(&trace);
        // The system prompt is 200 copies of a 12+-letter string: over 1,024 tokens, so every
        // request after the first reads it — the test compares real cache reads, not zeros.
        prop_assert!(usages.iter().skip(1).all(|u| u.as_ref().is_ok_and(|u| u.cache_read_input_tokens > 0)));
        check_trace("generated", &trace);
        for body in &bodies {
            let out = String::from_utf8(redact(body.as_bytes())).unwrap();
            let original: Value = serde_json::from_str(body).unwrap();
            for text in [&original["metadata"]["user_id"], &original["stop_sequences"][0], &original["messages"][0]["content"][0]["text"]] {
                let text = text.as_str().unwrap();
                prop_assert!(!out.contains(&text[..12]), "{} left in {}", text, out);
            }
        }
    }
}

#[test]
fn real_client_requests_redact_and_replay_the_same() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/clients");
    let mut compared = 0;
    for path in files_in(&dir) {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        if name.ends_with(".jsonl") {
            compared += check_trace(&name, &text);
        } else if name.ends_with(".json") {
            compared += check_trace(
                &name,
                &json!({"at_ms": 0, "body": serde_json::from_str::<Value>(&text).unwrap()}).to_string(),
            );
        }
    }
    assert!(compared >= 2, "client requests compared: {compared}");
}

#[test]
fn captured_requests_redact_and_replay_the_same() {
    let Some(captures) = captured_envelopes() else { return };
    let compared: usize = captures.iter().map(|(name, text)| check_trace(name, text)).sum();
    // The corpus README: 115 proxy-recorded requests and 64 from SDK cassettes.
    assert!(compared >= 115 + 64, "captured requests compared: {compared}");
}
