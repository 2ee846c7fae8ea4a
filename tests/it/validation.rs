//! Marker validation (DESIGN §2.1.4, reference §1.2, §1.6, §4.5): each rejection is a 400
//! `invalid_request_error` with the API's own message.

use serde_json::{Value, json};

use forkcache_engine::ErrorKind;

use crate::support::{Body, Client, U, assistant, bp, bp_1h, text, tool, u, user};

const TOO_MANY_5: &str = "A maximum of 4 blocks with cache_control may be provided. Found 5.";

fn ttl_order(path: &str) -> String {
    format!(
        "{path}.cache_control.ttl: a ttl='1h' cache_control block must not come after a ttl='5m' cache_control block. Note that blocks are processed in the following order: `tools`, `system`, `messages`."
    )
}

/// `n` user blocks of 500 tokens, all marked.
fn marked_blocks(n: usize) -> Vec<Value> {
    (0..n).map(|k| bp(text(&format!("block {k}"), 500))).collect()
}

fn thinking_block() -> Value {
    json!({"type": "thinking", "thinking": "Let me think.", "signature": "c2ln", "cache_control": {"type": "ephemeral"}})
}

/// The request is rejected with exactly `message`.
fn check(what: &str, body: Body, message: &str) {
    let error = Client::new().reject(&body, 0);
    assert_eq!((error.kind, error.kind.status()), (ErrorKind::InvalidRequest, 400), "{what}");
    assert_eq!(error.message, message, "{what}");
}

#[test]
fn more_than_four_breakpoints() {
    check("5 explicit", Body::blocks(marked_blocks(5)), TOO_MANY_5);
    // The automatic breakpoint takes one of the 4 slots: 4 explicit + top-level on the
    // unmarked last block = 5 (coder/mux PR #3112).
    let mut blocks = marked_blocks(4);
    blocks.push(text("last", 500));
    check(
        "4 + automatic",
        Body::blocks(blocks).with("cache_control", json!({"type": "ephemeral"})),
        TOO_MANY_5,
    );
    // Spread over tools, system and messages: 2 + 2 + 2 = 6.
    let body = Body::blocks(marked_blocks(2))
        .with("tools", json!([bp(tool("a", 100)), bp(tool("b", 100))]))
        .with("system", json!(marked_blocks(2)));
    check("6 across levels", body, "A maximum of 4 blocks with cache_control may be provided. Found 6.");
}

#[test]
fn four_breakpoints_are_accepted() {
    let record = Client::new().send(&Body::blocks(marked_blocks(4)), 0);
    assert_eq!(record.breakpoints, 4);
    // The automatic marker lands on a block already marked with the same TTL: still 4.
    let body = Body::blocks(marked_blocks(4)).with("cache_control", json!({"type": "ephemeral"}));
    assert_eq!(Client::new().send(&body, 0).breakpoints, 4);
}

#[test]
fn a_1h_breakpoint_after_a_5m_one() {
    // In messages, with the path of the offending block (anthropics/claude-code #37842 shape).
    let messages = vec![
        user(vec![bp(text("first", 500))]),
        assistant(vec![text("answer", 500)]),
        user(vec![text("a", 100), text("b", 100), bp_1h(text("c", 100))]),
    ];
    check("messages", Body::new("claude-sonnet-4-6", messages), &ttl_order("messages.2.content.2"));
    // Across levels: tools are processed before system.
    let body = Body::blocks(vec![text("question", 100)])
        .with("tools", json!([bp(tool("a", 100))]))
        .with("system", json!([text("intro", 100), bp_1h(text("rules", 100))]));
    check("tools then system", body, &ttl_order("system.1"));
    // Between two tools.
    let body = Body::blocks(vec![text("question", 100)])
        .with("tools", json!([bp(tool("a", 100)), bp_1h(tool("b", 100))]));
    check("tool then tool", body, &ttl_order("tools.1"));
}

#[test]
fn a_1h_breakpoint_before_a_5m_one_is_fine() {
    // T = 1,100 at the 1h breakpoint (above Sonnet 4.6's 1,024), 2,100 at the 5m one.
    let body =
        Body::blocks(vec![bp(text("question", 1_000))]).with("system", json!([bp_1h(text("rules", 1_100))]));
    assert_eq!(U::of(&Client::new().send(&body, 0)), u(0, 1_000, 1_100, 0));
}

#[test]
fn cache_control_on_an_empty_text_block() {
    let empty = json!({"type": "text", "text": "", "cache_control": {"type": "ephemeral"}});
    check(
        "empty text",
        Body::blocks(vec![text("question", 100), empty]),
        "messages.0.content.1.text: cache_control cannot be set for empty text blocks",
    );
}

#[test]
fn cache_control_on_a_thinking_block() {
    // The SDK's ThinkingBlockParam and RedactedThinkingBlockParam have no cache_control field,
    // so the API rejects the member as an unknown input (reference §1.2; the exact wording is
    // not published, this is the API's wording for any extra field).
    let messages =
        vec![user(vec![text("question", 100)]), assistant(vec![thinking_block(), text("answer", 100)])];
    check(
        "thinking",
        Body::new("claude-sonnet-4-6", messages),
        "messages.1.content.0.cache_control: Extra inputs are not permitted",
    );
    let redacted =
        json!({"type": "redacted_thinking", "data": "ZW5j", "cache_control": {"type": "ephemeral"}});
    let messages = vec![user(vec![text("question", 100)]), assistant(vec![text("answer", 100), redacted])];
    check(
        "redacted thinking",
        Body::new("claude-sonnet-4-6", messages),
        "messages.1.content.1.cache_control: Extra inputs are not permitted",
    );
}
