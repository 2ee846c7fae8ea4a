//! The `longest-prefix` policy (DESIGN §2.2): every position boundary of every request is
//! written; a lookup reads the longest prefix ever written in scope — no breakpoints needed, no
//! lookback limit, no minimum length; TTL and visibility as under `anthropic`. Writes take the
//! request's largest marker TTL (5m without markers).

use forkcache_engine::cache::CacheConfig;
use forkcache_engine::endpoint::EndpointConfig;
use forkcache_engine::{Policy, SimTime};

use crate::support::{Body, Client, U, bp, bp_1h, text, u};

fn client() -> Client {
    let cache = CacheConfig { policy: Policy::LongestPrefix, ..CacheConfig::default() };
    Client::with_config(EndpointConfig { cache, ..Default::default() })
}

/// Blocks 1..=n of `tokens` each; those in `edited` carry other text.
fn blocks(n: u64, tokens: u64, edited: &[u64]) -> Body {
    Body::blocks(
        (1..=n)
            .map(|k| {
                let label =
                    if edited.contains(&k) { format!("block {k}, edited") } else { format!("block {k}") };
                text(&label, tokens)
            })
            .collect(),
    )
}

/// `(body, at_ms, expected)` in order on one client.
fn check(steps: &[(Body, u64, U)]) {
    let mut client = client();
    for (index, (body, at_ms, expect)) in steps.iter().enumerate() {
        assert_eq!(U::of(&client.send(body, *at_ms)), *expect, "step {index}");
    }
}

#[test]
fn no_breakpoint_is_needed() {
    // Unmarked 1,000-token blocks: the first request writes all 3,000; a branch sharing two
    // blocks reads 2,000 and writes its own 1,000. Nothing is ever left uncached.
    check(&[
        (blocks(3, 1_000, &[]), 0, u(0, 3_000, 0, 0)),
        (blocks(3, 1_000, &[3]), 10_000, u(2_000, 1_000, 0, 0)),
    ]);
}

#[test]
fn there_is_no_lookback_limit() {
    // 30 blocks written; 35 blocks with block 5 edited read blocks 1–4, 31 positions behind the
    // end: 4,000 read, 31,000 written.
    check(&[
        (blocks(30, 1_000, &[]), 0, u(0, 30_000, 0, 0)),
        (blocks(35, 1_000, &[5]), 10_000, u(4_000, 31_000, 0, 0)),
    ]);
}

#[test]
fn there_is_no_minimum_length() {
    // 10-token blocks on Sonnet 4.6 (minimum 1,024 under `anthropic`).
    check(&[(blocks(1, 10, &[]), 0, u(0, 10, 0, 0)), (blocks(2, 10, &[]), 10_000, u(10, 10, 0, 0))]);
}

#[test]
fn writes_take_the_largest_marker_ttl() {
    // A 1h marker anywhere makes every write 1h, even with a 5m marker after it.
    let mixed = Body::blocks(vec![bp_1h(text("a", 1_000)), bp(text("b", 1_000)), text("c", 1_000)]);
    check(&[(mixed, 0, u(0, 0, 3_000, 0))]);
    let five = Body::blocks(vec![bp(text("a", 1_000)), text("b", 1_000)]);
    check(&[(five, 0, u(0, 2_000, 0, 0))]);
}

#[test]
fn ttl_and_visibility_rules_are_the_same() {
    // 10,000 tokens: visible at 600 ms (400 + 200), expired at 300,000.
    let doc = || blocks(1, 10_000, &[]);
    let mut client = client();
    assert_eq!(client.send(&doc(), 0).visible_at, SimTime(600));
    assert_eq!(U::of(&client.send(&doc(), 599)), u(0, 10_000, 0, 0));
    assert_eq!(U::of(&client.send(&doc(), 600)), u(10_000, 0, 0, 0));
    // The read at 600 renewed the entry until 300,600.
    assert_eq!(U::of(&client.send(&doc(), 300_599)), u(10_000, 0, 0, 0));
    assert_eq!(U::of(&client.send(&doc(), 300_599 + 300_000)), u(0, 10_000, 0, 0));
}
