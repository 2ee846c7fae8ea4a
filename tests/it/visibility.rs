//! Visibility (DESIGN §2.1.8–9, reference §1.7): an entry is readable only once its writer's
//! response has begun — at `t0 + ttft`, `ttft = 400 ms + 20 µs × (total − read)` rounded up to a
//! whole millisecond — or at the real first byte when that is known.

use forkcache_engine::cache::MissCause::NotYetVisible;
use forkcache_engine::endpoint::EndpointConfig;
use forkcache_engine::{SimTime, Visibility};

use crate::support::{Body, Client, Opts, U, bp, text, u};

/// 10,000 tokens, one breakpoint: cold ttft = 400 + 10,000 × 0.02 = 600 ms.
fn doc() -> Body {
    Body::blocks(vec![bp(text("document", 10_000))])
}

const WRITE: U = u(0, 10_000, 0, 0);
const READ: U = u(10_000, 0, 0, 0);

#[test]
fn two_identical_requests_at_one_instant_both_write() {
    let mut client = Client::new();
    let first = client.send(&doc(), 0);
    assert_eq!((U::of(&first), first.ttft_ms, first.visible_at), (WRITE, 600, SimTime(600)));
    let second = client.send(&doc(), 0);
    assert_eq!(U::of(&second), WRITE);
    assert_eq!(second.miss.map(|m| m.cause), Some(NotYetVisible));
}

#[test]
fn a_later_request_reads_from_the_first_ones_first_token() {
    let mut client = Client::new();
    client.send(&doc(), 0);
    // 599 ms: the first response has not begun → writes again.
    let early = client.send(&doc(), 599);
    assert_eq!(U::of(&early), WRITE);
    assert_eq!(early.miss.map(|m| m.cause), Some(NotYetVisible));
    // 600 ms: readable (the rewrite at 599 kept the earliest visibility, 600).
    assert_eq!(U::of(&client.send(&doc(), 600)), READ);
}

#[test]
fn ttft_counts_uncached_tokens_rounded_up_to_a_millisecond() {
    let mut client = Client::new();
    // 10,001 uncached: 200,020 µs → 201 ms; ttft 601.
    let cold = Body::blocks(vec![bp(text("document", 10_001))]);
    assert_eq!(client.send(&cold, 0).ttft_ms, 601);
    // Read 10,001 of 10,052: 51 uncached × 20 µs = 1,020 µs → 2 ms; ttft 402.
    let warm = Body::blocks(vec![bp(text("document", 10_001)), text("question", 51)]);
    let record = client.send(&warm, 10_000);
    assert_eq!(U::of(&record), u(10_001, 0, 0, 51));
    assert_eq!((record.ttft_ms, record.visible_at), (402, SimTime(10_402)));
}

#[test]
fn a_known_first_byte_decides_visibility_instead_of_the_model() {
    // The writer's response really began at 5,000 ms (the model says 600).
    let mut client = Client::new();
    let first = client.call(&doc(), 0, Opts { first_byte_ms: Some(5_000), ..Opts::default() }).unwrap();
    assert_eq!(first.visible_at, SimTime(5_000));
    let early = client.send(&doc(), 4_999);
    assert_eq!((U::of(&early), early.miss.map(|m| m.cause)), (WRITE, Some(NotYetVisible)));
    // The rewrite at 4,999 would be visible at 5,599; the entry keeps the earliest, 5,000.
    assert_eq!(U::of(&client.send(&doc(), 5_000)), READ);

    // And earlier than the model: began at 100 ms → readable at 100.
    let mut client = Client::new();
    client.call(&doc(), 0, Opts { first_byte_ms: Some(100), ..Opts::default() }).unwrap();
    assert_eq!(U::of(&client.send(&doc(), 100)), READ);
}

#[test]
fn start_and_complete_visibility() {
    let config = |visibility| {
        let mut config = EndpointConfig::default();
        config.cache.visibility = visibility;
        config
    };
    // Start: readable by a request at the same instant.
    let mut client = Client::with_config(config(Visibility::Start));
    client.send(&doc(), 0);
    assert_eq!(U::of(&client.send(&doc(), 0)), READ);

    // Complete: 600 ms to the first token, then 100 output tokens × 20 ms = 2,000 ms → 2,600.
    let mut client = Client::with_config(config(Visibility::Complete));
    let first = client.call(&doc(), 0, Opts { output_tokens: 100, ..Opts::default() }).unwrap();
    assert_eq!(first.visible_at, SimTime(2_600));
    assert_eq!(U::of(&client.send(&doc(), 2_599)), WRITE);
    assert_eq!(U::of(&client.send(&doc(), 2_600)), READ);
}
