//! Scope (DESIGN §1, reference §1.3, §1.8): entries are shared within one workspace × model and
//! never across; one API key is one workspace unless configured otherwise.

use std::collections::BTreeMap;

use forkcache_engine::cache::MissCause::ModelChanged;
use forkcache_engine::endpoint::EndpointConfig;

use crate::support::{Body, Client, Opts, U, bp, text, u};

const WRITE: U = u(0, 2_000, 0, 0);
const READ: U = u(2_000, 0, 0, 0);

fn doc(model: &str) -> Body {
    Body::new(model, vec![crate::support::user(vec![bp(text("document", 2_000))])])
}

/// Sends the steps `(model, api key, expected usage)` 10 s apart.
fn check(config: EndpointConfig, steps: &[(&str, &str, U)]) -> Vec<forkcache_engine::Record> {
    let mut client = Client::with_config(config);
    let mut records = Vec::new();
    for (index, &(model, key, expect)) in steps.iter().enumerate() {
        let at_ms = index as u64 * 10_000;
        let record = client.call(&doc(model), at_ms, Opts { api_key: Some(key), ..Opts::default() }).unwrap();
        assert_eq!(U::of(&record), expect, "step {index}: {model} with {key}");
        records.push(record);
    }
    records
}

#[test]
fn two_api_keys_never_share() {
    let records = check(
        EndpointConfig::default(),
        &[
            ("claude-sonnet-4-6", "sk-a", WRITE),
            ("claude-sonnet-4-6", "sk-b", WRITE),
            ("claude-sonnet-4-6", "sk-a", READ),
        ],
    );
    // Another workspace's entries are not this one's history: nothing was missed.
    assert_eq!(records[1].miss, None);
}

#[test]
fn keys_configured_into_one_workspace_share() {
    let workspaces =
        BTreeMap::from([("sk-a".to_string(), "team".to_string()), ("sk-b".to_string(), "team".to_string())]);
    let config = EndpointConfig { workspaces, ..Default::default() };
    check(config, &[("claude-sonnet-4-6", "sk-a", WRITE), ("claude-sonnet-4-6", "sk-b", READ)]);
}

#[test]
fn a_model_change_misses_with_model_changed() {
    let records = check(
        EndpointConfig::default(),
        &[
            ("claude-sonnet-4-6", "sk-a", WRITE),
            ("claude-opus-4-8", "sk-a", WRITE),
            ("claude-sonnet-4-6", "sk-a", READ),
        ],
    );
    let miss = records[1].miss.clone().expect("the prefix is cached under the other model");
    assert_eq!((miss.cause, miss.tokens_missed), (ModelChanged, 2_000));
}

#[test]
fn an_alias_is_the_same_model() {
    check(
        EndpointConfig::default(),
        &[("claude-sonnet-4-5", "sk-a", WRITE), ("claude-sonnet-4-5-20250929", "sk-a", READ)],
    );
}

/// System [billing header, S (2,000) marked] and a marked 1,000-token question.
fn with_billing_header(header: &str) -> Body {
    let system = serde_json::json!([{"type": "text", "text": header}, bp(text("S", 2_000))]);
    Body::blocks(vec![bp(text("question", 1_000))]).with("system", system)
}

#[test]
fn the_billing_header_block_is_ignored() {
    // Claude Code's per-request billing line is system[0]: no position, no tokens. Two requests
    // differing only in it share the whole prefix: T = 2,000 + 1,000.
    let mut client = Client::new();
    let first = with_billing_header("x-anthropic-billing-header: cc_version=2.1.197.fa0; cch=1a2b3;");
    let second = with_billing_header("x-anthropic-billing-header: cc_version=2.1.197.fa0; cch=9f8e7;");
    assert_eq!(U::of(&client.send(&first, 0)), u(0, 3_000, 0, 0));
    let record = client.send(&second, 10_000);
    assert_eq!(U::of(&record), u(3_000, 0, 0, 0));
    assert_eq!(record.miss, None);
}

#[test]
fn a_marker_on_the_billing_header_is_ignored() {
    // A 1h marker on the ignored block, after a 5m tool marker, with 4 other markers: neither the
    // TTL order nor the count of 4 is broken, because the block is not there.
    let header = bp_1h_header("x-anthropic-billing-header: cch=1;");
    let system = serde_json::json!([header, bp(text("S", 2_000))]);
    let body = Body::blocks(vec![bp(text("q1", 500)), bp(text("q2", 500))])
        .with("tools", serde_json::json!([bp(crate::support::tool("t", 1_000))]))
        .with("system", system);
    let record = Client::new().send(&body, 0);
    // T: tool 1,000; hidden tool prompt 497 → 1,497; S → 3,497; q1 → 3,997; q2 → 4,497.
    assert_eq!((record.breakpoints, U::of(&record)), (4, u(0, 4_497, 0, 0)));
}

fn bp_1h_header(text: &str) -> serde_json::Value {
    serde_json::json!({"type": "text", "text": text, "cache_control": {"type": "ephemeral", "ttl": "1h"}})
}

#[test]
fn the_billing_prefix_counts_in_a_message() {
    // Only system blocks are dropped: in a user message the same text is content.
    let line = "x-anthropic-billing-header: cch=1;";
    let body = Body::blocks(vec![serde_json::json!({"type": "text", "text": line}), bp(text("q", 2_000))]);
    // {"type":"text","text":"x-anthropic-billing-header: cch=1;"} is 25 + 34 = 59 bytes → 15.
    assert_eq!(U::of(&Client::new().send(&body, 0)), u(0, 2_015, 0, 0));
}
