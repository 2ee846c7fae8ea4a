//! Cache diagnostics (beta `cache-diagnosis-2026-04-07`): a request carrying
//! `diagnostics.previous_message_id` is compared with the request behind that response; the
//! answer's `diagnostics.cache_miss_reason` names where they parted and the earlier request's
//! tokens from there on. Streaming puts it on `message_start`. Sizes are declared
//! (`forkcache_tokens`) on Sonnet 4.6.

use serde_json::{Value, json};

use forkcache_engine::cache::{CacheMissType, miss_reason_type};
use forkcache_engine::endpoint::Call;
use forkcache_engine::{Reply, SimTime};

use crate::serve_harness::{Running, client, post, sse_events};
use crate::support::{Body, Client, SONNET, assistant, bp, text, tool, user};

/// Sends `body` with `diagnostics` set to `previous` (a JSON id or null) and returns the
/// response's JSON.
fn ask(client: &mut Client, body: &Body, previous: Value, at_ms: u64) -> Value {
    let body = body.clone().with("diagnostics", json!({"previous_message_id": previous}));
    send(client, &body, at_ms)
}

fn send(client: &mut Client, body: &Body, at_ms: u64) -> Value {
    let bytes = body.bytes();
    let mut call = Call::new(&bytes, SimTime(at_ms));
    call.reply = Reply { output_tokens: Some(0), ..Reply::input_only() };
    let exchange = client.endpoint.handle(call).unwrap_or_else(|err| panic!("rejected: {err}"));
    serde_json::from_str(&exchange.response.to_json()).unwrap()
}

/// A 41,800-token system prompt (`label` tells versions apart), marked.
fn system(label: &str) -> Value {
    json!([bp(text(label, 41_800))])
}

/// The first turn: a marked 50-token question, 41,850 tokens in all.
fn first_turn(label: &str) -> Body {
    Body::new(SONNET, vec![user(vec![bp(text("question", 50))])]).with("system", system(label))
}

/// The first turn plus a 20-token reply and an unmarked 22-token follow-up (42 new tokens).
fn second_turn(label: &str) -> Body {
    let messages = vec![
        user(vec![bp(text("question", 50))]),
        assistant(vec![text("answer", 20)]),
        user(vec![text("follow-up", 22)]),
    ];
    Body::new(SONNET, messages).with("system", system(label))
}

#[test]
fn the_documented_example_a_changed_system_prompt_misses_the_previous_requests_tokens() {
    // The reference's example: usage in 42, read 0, written 41,850, and `system_changed` with
    // 41,850 missed — the previous request's tokens from the divergence (system[0], token 0)
    // on; the 42 new tokens are not counted.
    let mut client = Client::new();
    let first = ask(&mut client, &first_turn("You are helpful. Today is Monday."), Value::Null, 0);
    assert_eq!(first["diagnostics"], Value::Null, "a first turn: null");
    assert!(first.as_object().unwrap().contains_key("diagnostics"));
    let second =
        ask(&mut client, &second_turn("You are helpful. Today is Tuesday."), first["id"].clone(), 10_000);
    let usage = &second["usage"];
    assert_eq!(
        (&usage["input_tokens"], &usage["cache_read_input_tokens"], &usage["cache_creation_input_tokens"]),
        (&json!(42), &json!(0), &json!(41_850))
    );
    assert_eq!(
        second["diagnostics"],
        json!({"cache_miss_reason": {"type": "system_changed", "cache_missed_input_tokens": 41_850}})
    );
}

#[test]
fn an_extension_of_the_previous_request_has_null_diagnostics() {
    let mut client = Client::new();
    let first = ask(&mut client, &first_turn("system"), Value::Null, 0);
    let second = ask(&mut client, &second_turn("system"), first["id"].clone(), 10_000);
    assert_eq!(second["usage"]["cache_read_input_tokens"], json!(41_850));
    assert_eq!(second["diagnostics"], Value::Null);
}

#[test]
fn without_the_field_the_response_has_no_diagnostics_key() {
    let mut client = Client::new();
    let response = send(&mut client, &first_turn("system"), 0);
    assert!(!response.as_object().unwrap().contains_key("diagnostics"), "{response}");
}

#[test]
fn an_unknown_id_is_previous_message_not_found_without_tokens() {
    let mut client = Client::new();
    let response = ask(&mut client, &first_turn("system"), json!("msg_never_sent"), 0);
    assert_eq!(
        response["diagnostics"],
        json!({"cache_miss_reason": {"type": "previous_message_not_found", "cache_missed_input_tokens": null}})
    );
}

#[test]
fn the_model_tools_messages_and_parameters_each_name_their_change() {
    // Tools Read (1,000) and Bash (1,000), then the first turn: 2,000 + 41,850 = 43,850 tokens
    // (the hidden tool prompt adds 497 after the tools: 44,347).
    let tools = || json!([tool("Read", 1_000), bp(tool("Bash", 1_000))]);
    let base = || first_turn("system").with("tools", tools());
    let cases: [(&str, Body, Value); 4] = [
        // Another model: every token of the previous request.
        ("model", base().with("model", json!("claude-opus-4-8")), json!(["model_changed", 44_347])),
        // tools[1] changed: everything from token 1,000 on.
        (
            "tools",
            first_turn("system").with("tools", json!([tool("Read", 1_000), bp(tool("Grep", 1_000))])),
            json!(["tools_changed", 43_347]),
        ),
        // The question changed: 44,347 − 2,497 − 41,800 = the 50 tokens of messages[0].
        (
            "messages",
            Body::new(SONNET, vec![user(vec![bp(text("another question", 50))])])
                .with("system", system("system"))
                .with("tools", tools()),
            json!(["messages_changed", 50]),
        ),
        // A prompt-affecting parameter: not comparable block by block.
        (
            "thinking",
            base()
                .with("thinking", json!({"type": "enabled", "budget_tokens": 2_000}))
                .with("max_tokens", json!(4_096)),
            json!(["unavailable", null]),
        ),
    ];
    for (what, changed, expected) in cases {
        let mut client = Client::new();
        let first = ask(&mut client, &base(), Value::Null, 0);
        let second = ask(&mut client, &changed, first["id"].clone(), 10_000);
        let reason = &second["diagnostics"]["cache_miss_reason"];
        assert_eq!(json!([reason["type"], reason["cache_missed_input_tokens"]]), expected, "{what}");
    }
}

#[test]
fn a_streamed_answer_carries_the_diagnostics_on_message_start() {
    let server = Running::default_server();
    let agent = client();
    let url = server.url("/v1/messages");
    let first = post(&agent, &url, Some("k"), &ask_bytes(&first_turn("Monday"), Value::Null, false));
    let id = first.json()["id"].clone();
    let second = post(&agent, &url, Some("k"), &ask_bytes(&second_turn("Tuesday"), id, true));
    let events = sse_events(&second.body);
    assert_eq!(events[0].0, "message_start");
    assert_eq!(
        events[0].1["message"]["diagnostics"],
        json!({"cache_miss_reason": {"type": "system_changed", "cache_missed_input_tokens": 41_850}})
    );
    server.stop();
}

fn ask_bytes(body: &Body, previous: Value, stream: bool) -> Vec<u8> {
    body.clone()
        .with("diagnostics", json!({"previous_message_id": previous}))
        .with("stream", json!(stream))
        .bytes()
}

#[test]
fn forkcaches_own_miss_causes_map_onto_the_apis_types() {
    // The same change as the documented example, seen by forkcache's diagnosis.
    let mut client = Client::new();
    client.send(&first_turn("Monday"), 0);
    let record = client.send(&second_turn("Tuesday"), 10_000);
    assert_eq!(record.miss.as_ref().and_then(miss_reason_type), Some(CacheMissType::SystemChanged));
    // An expired entry: the two requests' structure agrees, so the API would name nothing.
    let mut client = Client::new();
    client.send(&first_turn("system"), 0);
    let record = client.send(&second_turn("system"), 3_600_000);
    assert_eq!(record.miss.as_ref().map(|m| m.cause.name()), Some("expired"));
    assert_eq!(record.miss.as_ref().and_then(miss_reason_type), None);
}
