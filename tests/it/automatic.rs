//! Automatic caching (reference §1.10): a top-level `cache_control` puts one breakpoint on the
//! last eligible block, moving forward as the conversation grows.

use serde_json::{Value, json};

use forkcache_engine::ErrorKind;

use crate::support::{Body, Client, SONNET, U, assistant, bp, bp_1h, text, u, user};

fn auto() -> Value {
    json!({"type": "ephemeral"})
}

/// System S (2,000) and the turns so far: U1 (1,000), then (A1 500, U2 500), (A2 300, U3 200).
fn turn(n: usize) -> Body {
    let mut messages = vec![user(vec![text("U1", 1_000)])];
    let later = [("A1", 500, "U2", 500), ("A2", 300, "U3", 200)];
    for &(a, a_tokens, q, q_tokens) in &later[..n - 1] {
        messages.push(assistant(vec![text(a, a_tokens)]));
        messages.push(user(vec![text(q, q_tokens)]));
    }
    Body::new(SONNET, messages).with("system", json!([text("S", 2_000)])).with("cache_control", auto())
}

#[test]
fn the_breakpoint_moves_forward_with_the_conversation() {
    let mut client = Client::new();
    // 1: System + U1◀ — everything written: 3,000.
    assert_eq!(U::of(&client.send(&turn(1), 0)), u(0, 3_000, 0, 0));
    // 2: … + A1 + U2◀ — System..U1 read (3,000); A1 + U2 written (1,000).
    assert_eq!(U::of(&client.send(&turn(2), 10_000)), u(3_000, 1_000, 0, 0));
    // 3: … + A2 + U3◀ — System..U2 read (4,000); A2 + U3 written (500).
    assert_eq!(U::of(&client.send(&turn(3), 20_000)), u(4_000, 500, 0, 0));
}

#[test]
fn it_walks_back_past_a_trailing_thinking_block() {
    // The last block is thinking (ineligible): the marker lands on the text before it. T there
    // = 3,000 + 500; the 200 thinking tokens after it stay uncached.
    let thinking =
        json!({"type": "thinking", "thinking": "hmm", "signature": "c2ln", "forkcache_tokens": 200});
    let messages = vec![user(vec![text("U1", 3_000)]), assistant(vec![text("A1", 500), thinking])];
    let body = Body::new(SONNET, messages).with("cache_control", auto());
    assert_eq!(U::of(&Client::new().send(&body, 0)), u(0, 3_500, 0, 200));
}

#[test]
fn the_same_ttl_already_on_the_last_block_is_a_no_op() {
    // One breakpoint, not two: the usage is that of the explicit marker alone.
    let body = Body::blocks(vec![text("doc", 2_000), bp(text("q", 100))]).with("cache_control", auto());
    let record = Client::new().send(&body, 0);
    assert_eq!((record.breakpoints, U::of(&record)), (1, u(0, 2_100, 0, 0)));
}

#[test]
fn a_different_ttl_on_the_last_block_is_a_400() {
    // Reference §1.10 (b): the status is documented, the message is not.
    let body = Body::blocks(vec![text("doc", 2_000), bp(text("q", 100))])
        .with("cache_control", json!({"type": "ephemeral", "ttl": "1h"}));
    assert_eq!(Client::new().reject(&body, 0).kind, ErrorKind::InvalidRequest);
}

#[test]
fn a_1h_top_level_marker_writes_1h() {
    let body = Body::blocks(vec![text("doc", 2_000)])
        .with("cache_control", json!({"type": "ephemeral", "ttl": "1h"}));
    assert_eq!(U::of(&Client::new().send(&body, 0)), u(0, 0, 2_000, 0));
    // And it may follow explicit 1h markers, not 5m ones.
    let body = Body::blocks(vec![bp_1h(text("doc", 2_000)), text("q", 100)])
        .with("cache_control", json!({"type": "ephemeral", "ttl": "1h"}));
    assert_eq!(U::of(&Client::new().send(&body, 0)), u(0, 0, 2_100, 0));
}

#[test]
fn it_caches_string_system_and_string_content() {
    // Counted, not declared (bytes4): string content counts as {"type":"text","text":…}.
    // The question "hi" → {"type":"text","text":"hi"}: 27 bytes → 7 tokens. The system string
    // of 4,075 × "a" → 25 + 4,075 = 4,100 bytes → 1,025 tokens. Total 1,032 ≥ 1,024.
    let body = Body(json!({
        "model": SONNET, "max_tokens": 1024, "cache_control": {"type": "ephemeral"},
        "system": "a".repeat(4_075),
        "messages": [{"role": "user", "content": "hi"}],
    }));
    let mut client = Client::new();
    assert_eq!(U::of(&client.send(&body, 0)), u(0, 1_032, 0, 0));
    assert_eq!(U::of(&client.send(&body, 10_000)), u(1_032, 0, 0, 0));
}
