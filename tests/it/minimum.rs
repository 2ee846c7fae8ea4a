//! Minimum cacheable length (DESIGN §2.1.5, reference §1.5): a breakpoint whose *cumulative*
//! prefix is below the model's minimum is silently dropped — no read, no write, no error.

use forkcache_engine::cache::MissCause;

use crate::support::{Body, Client, U, bp, text, u, user};

/// The minimums of reference §1.5, per model.
const MINIMUMS: [(&str, u64); 6] = [
    ("claude-opus-5", 512),
    ("claude-sonnet-4-6", 1_024),
    ("claude-opus-4-8", 1_024),
    ("claude-opus-4-7", 2_048),
    ("claude-3-5-haiku-20241022", 2_048),
    ("claude-haiku-4-5", 4_096),
];

/// A 100-token system block, then one user block with a breakpoint, `total` tokens in all.
fn prefix_of(model: &str, total: u64) -> Body {
    Body::new(model, vec![user(vec![bp(text("question", total - 100))])])
        .with("system", serde_json::json!([text("system prompt", 100)]))
}

/// Sends the same request twice, 10 s apart; checks both usages.
fn check(model: &str, total: u64, first: U, second: U) {
    let mut client = Client::new();
    let body = prefix_of(model, total);
    assert_eq!(U::of(&client.send(&body, 0)), first, "{model} at {total} tokens, first");
    assert_eq!(U::of(&client.send(&body, 10_000)), second, "{model} at {total} tokens, second");
}

#[test]
fn one_token_below_the_minimum_caches_nothing_and_is_no_error() {
    for (model, minimum) in MINIMUMS {
        // T[b] = minimum − 1: everything uncached, twice.
        let below = minimum - 1;
        check(model, below, u(0, 0, 0, below), u(0, 0, 0, below));
    }
}

#[test]
fn exactly_the_minimum_is_cached() {
    for (model, minimum) in MINIMUMS {
        // T[b] = minimum: written, then read.
        check(model, minimum, u(0, minimum, 0, 0), u(minimum, 0, 0, 0));
    }
}

#[test]
fn the_repeat_of_a_short_prompt_reports_below_minimum() {
    let mut client = Client::new();
    let body = prefix_of("claude-sonnet-4-6", 1_000);
    let first = client.send(&body, 0);
    assert_eq!(first.breakpoints_dropped, 1);
    let second = client.send(&body, 10_000);
    let miss = second.miss.expect("1,000 shared tokens were not read");
    assert_eq!(miss.cause, MissCause::BelowMinimum);
    assert_eq!(miss.tokens_missed, 1_000);
}

#[test]
fn the_minimum_applies_to_the_cumulative_prefix_not_the_segment() {
    // Sonnet 4.6, minimum 1,024: a 10-token marked block after a 2,000-token system prompt has
    // T[b] = 2,010 and is cached in full.
    let body = Body::new("claude-sonnet-4-6", vec![user(vec![bp(text("short", 10))])])
        .with("system", serde_json::json!([text("long system prompt", 2_000)]));
    let mut client = Client::new();
    assert_eq!(U::of(&client.send(&body, 0)), u(0, 2_010, 0, 0));
    assert_eq!(U::of(&client.send(&body, 10_000)), u(2_010, 0, 0, 0));
}

#[test]
fn a_short_breakpoint_is_dropped_while_a_long_one_writes() {
    // Haiku 4.5, minimum 4,096 (the probe of reference §1.5): system [300, 200 marked] gives
    // T = 500 at the first breakpoint (dropped); the user block's breakpoint has T = 6,500.
    let system = serde_json::json!([text("instructions", 300), bp(text("short", 200))]);
    let long = Body::new("claude-haiku-4-5", vec![user(vec![bp(text("document", 6_000))])])
        .with("system", system.clone());
    let record = Client::new().send(&long, 0);
    assert_eq!(U::of(&record), u(0, 6_500, 0, 0));
    assert_eq!(record.breakpoints_dropped, 1);

    // With only the short breakpoint, the marker is simply ignored: all 6,500 uncached.
    let short =
        Body::new("claude-haiku-4-5", vec![user(vec![text("document", 6_000)])]).with("system", system);
    let mut client = Client::new();
    assert_eq!(U::of(&client.send(&short, 0)), u(0, 0, 0, 6_500));
    assert_eq!(U::of(&client.send(&short, 10_000)), u(0, 0, 0, 6_500));
}
