//! Every provider's bill on one small conversation, worked out by hand from the rules and prices
//! the providers document (docs/providers.md, and each policy's module doc).
//!
//! The conversation, every size declared (no tokenizer involved):
//! - request 1 at 0 s: system S (3,000) + U1 (1,000) = 4,000 tokens;
//! - request 2 at 60 s: S + U1 + A1 (500) + U2 (500) = 5,000;
//! - request 3 at 61 s, a fork of request 2's prefix: S + U1 + A1 + U3 (300) = 4,800;
//! - request 4 at 62 s, another fork: S + U1 + A1 + U4 (200) = 4,700.
//!
//! Positions end at 3,000 (S), 4,000 (U1), 4,500 (A1), then the request's own last turn.
//! Prices per million tokens: 1 token at $1/M is 1,000 nano-dollars.

use serde_json::Value;

use forkcache_engine::{Provider, Record};

use crate::support::{Body, Client, MINUTE_MS, U, assistant, bp, text, u, user};

/// The `n`-th request (1-based) of the conversation, on `model`; `marked` puts a 5-minute
/// breakpoint on the last block (the markers automatic caches ignore).
fn request(model: &str, n: usize, marked: bool) -> Body {
    let last = |label: &str, tokens| if marked { bp(text(label, tokens)) } else { text(label, tokens) };
    let mut messages: Vec<Value> = vec![user(vec![text("U1", 1_000)])];
    match n {
        1 => messages = vec![user(vec![last("U1", 1_000)])],
        2 => messages.extend([assistant(vec![text("A1", 500)]), user(vec![last("U2", 500)])]),
        3 => messages.extend([assistant(vec![text("A1", 500)]), user(vec![last("U3", 300)])]),
        _ => messages.extend([assistant(vec![text("A1", 500)]), user(vec![last("U4", 200)])]),
    }
    Body::new(model, messages).with("system", serde_json::json!([text("S", 3_000)]))
}

/// Sends requests 1–4 at 0, 60, 61 and 62 seconds.
fn conversation(client: &mut Client, model: &str, marked: bool) -> Vec<Record> {
    [0, MINUTE_MS, MINUTE_MS + 1_000, MINUTE_MS + 2_000]
        .iter()
        .enumerate()
        .map(|(i, &at)| client.send(&request(model, i + 1, marked), at))
        .collect()
}

fn usages(records: &[Record]) -> Vec<U> {
    records.iter().map(U::of).collect()
}

fn costs(records: &[Record]) -> Vec<u64> {
    records.iter().map(|r| r.cost.total_nanousd()).collect()
}

#[test]
fn openai_reads_every_message_end_in_128_token_steps_and_writes_free() {
    // gpt-5.4: $2.50 input (writes too: no premium through GPT-5.5), $0.25 cached; minimum
    // 1,024; `cached_tokens` rounded down to a multiple of 128.
    let records = conversation(&mut Client::on_provider(Provider::Openai), "gpt-5.4", false);
    assert_eq!(
        usages(&records),
        [
            // 1: nothing cached; S and U1 written (4,000).
            u(0, 4_000, 0, 0),
            // 2: U1's end (4,000) read as 31 x 128 = 3,968; A1 and U2 written (1,000); 32 left.
            u(3_968, 1_000, 0, 32),
            // 3: A1's end (4,500, written by 2) read as 35 x 128 = 4,480; U3 written; 20 left.
            u(4_480, 300, 0, 20),
            // 4: the same prefix: 4,480 read, U4 written, 20 left.
            u(4_480, 200, 0, 20),
        ]
    );
    assert_eq!(
        costs(&records),
        [
            4_000 * 2_500,               // $0.0100
            3_968 * 250 + 1_032 * 2_500, // $0.003572
            4_480 * 250 + 320 * 2_500,   // $0.00192
            4_480 * 250 + 220 * 2_500,   // $0.00167
        ]
    );
}

#[test]
fn openai_from_gpt_5_6_reads_exactly_and_writes_at_1_25x() {
    // gpt-5.6-terra (from 2026-07-30): $2.00 input, $2.50 writes, $0.20 cached; exact reads.
    let records = conversation(&mut Client::on_provider(Provider::Openai), "gpt-5.6-terra", false);
    assert_eq!(
        usages(&records),
        [u(0, 4_000, 0, 0), u(4_000, 1_000, 0, 0), u(4_500, 300, 0, 0), u(4_500, 200, 0, 0)]
    );
    assert_eq!(
        costs(&records),
        [4_000 * 2_500, 4_000 * 200 + 1_000 * 2_500, 4_500 * 200 + 300 * 2_500, 4_500 * 200 + 200 * 2_500]
    );
    // The guide's example: one write and one full reuse cost 1.35x one uncached request
    // (4,000 tokens at $2.00: 8,000,000 nano-dollars), priced here by the endpoint.
    let mut client = Client::on_provider(Provider::Openai);
    let write = client.send(&request("gpt-5.6-terra", 1, false), 0).cost.total_nanousd();
    let reuse = client.send(&request("gpt-5.6-terra", 1, false), MINUTE_MS).cost.total_nanousd();
    assert_eq!((write + reuse) * 100 / (4_000 * 2_000), 135);
}

#[test]
fn openai_entries_outlive_a_10_minute_gap_on_24h_models_only() {
    // gpt-5.4 keeps `24h` retention (idle lifetime taken as 30 min), gpt-5.4-mini `in_memory`
    // (10 min). Request 1, then the same request 11 minutes later.
    for (model, read) in [("gpt-5.4", 3_968), ("gpt-5.4-mini", 0)] {
        let mut client = Client::on_provider(Provider::Openai);
        client.send(&request(model, 1, false), 0);
        let again = client.send(&request(model, 1, false), 11 * MINUTE_MS);
        assert_eq!(U::of(&again).read, read, "{model}");
    }
}

#[test]
fn gemini_implicit_caches_nothing_below_its_minimum_and_forgets_after_5_idle_minutes() {
    // gemini-3.1-pro: $2.00 input (writes too), $0.20 cached, minimum 4,096.
    let mut client = Client::on_provider(Provider::GeminiImplicit);
    let records = conversation(&mut client, "gemini-3.1-pro", false);
    assert_eq!(
        usages(&records),
        [
            // 1: 4,000 tokens, below the minimum: nothing cached.
            u(0, 0, 0, 4_000),
            // 2: nothing to read; A1 (4,500) and U2 (5,000) pass the minimum: 5,000 written.
            u(0, 5_000, 0, 0),
            // 3: A1's end read (4,500), U3 written.
            u(4_500, 300, 0, 0),
            u(4_500, 200, 0, 0),
        ]
    );
    assert_eq!(
        costs(&records),
        [4_000 * 2_000, 5_000 * 2_000, 4_500 * 200 + 300 * 2_000, 4_500 * 200 + 200 * 2_000]
    );
    // Last read at 62 s; 6 minutes later (> 5) nothing is left.
    let late = client.send(&request("gemini-3.1-pro", 4, false), MINUTE_MS + 2_000 + 6 * MINUTE_MS);
    assert_eq!(U::of(&late), u(0, 4_700, 0, 0));
}

#[test]
fn deepseek_hits_only_whole_units_and_persists_the_prefix_two_requests_share() {
    // deepseek-v4-pro off-peak: $0.66 a miss, $0.022 a hit; 64-token units.
    let records = conversation(&mut Client::on_provider(Provider::Deepseek), "deepseek-v4-pro", false);
    assert_eq!(
        usages(&records),
        [
            // 1: the unit at the end of its input (4,000) persisted.
            u(0, 4_000, 0, 0),
            // 2: that unit read, 62 x 64 = 3,968; its own end (5,000) persisted; 32 left.
            u(3_968, 1_000, 0, 32),
            // 3: A1's end (4,500) is no unit yet ("A+B then A+C misses"): U1's unit read again;
            //    the prefix it shares with 2 (through A1) and its own end persisted: 800.
            u(3_968, 800, 0, 32),
            // 4: "…after which A is persisted and A+D hits": 4,500 read as 70 x 64 = 4,480.
            u(4_480, 200, 0, 20),
        ]
    );
    assert_eq!(
        costs(&records),
        [4_000 * 660, 3_968 * 22 + 1_032 * 660, 3_968 * 22 + 832 * 660, 4_480 * 22 + 220 * 660]
    );
}

#[test]
fn bedrock_keeps_anthropics_rules_under_its_own_minimums() {
    // Claude Opus 4.7: 2,048-token minimum on Anthropic's API, 4,096 on Bedrock. A marker on
    // U1 (4,000 tokens): Anthropic writes it, Bedrock accepts it and caches nothing.
    let body = request("claude-opus-4-7", 1, true);
    let anthropic = Client::on_provider(Provider::Anthropic).send(&body, 0);
    let bedrock = Client::on_provider(Provider::Bedrock).send(&body, 0);
    assert_eq!(U::of(&anthropic), u(0, 4_000, 0, 0));
    assert_eq!(U::of(&bedrock), u(0, 0, 0, 4_000));
    // Both at $5.00 input, $6.25 for 5-minute writes (Bedrock's prices assumed Anthropic's).
    assert_eq!(anthropic.cost.total_nanousd(), 4_000 * 6_250);
    assert_eq!(bedrock.cost.total_nanousd(), 4_000 * 5_000);
}

#[test]
fn gemini_explicit_objects_are_billed_whole_with_storage_and_not_renewed_by_use() {
    // gemini-3.1-pro: $2.00 input, $0.20 cached, storage $4.50 per million tokens per hour,
    // minimum 4,096. A 5-minute object's creation and first use: 2.00 + 0.20 + 4.50 / 12 =
    // $2.575 per million tokens: 2,575 nano-dollars a token.
    let write = 2_000 + 200 + 4_500 / 12;
    assert_eq!(write, 2_575);
    let mut client = Client::on_provider(Provider::GeminiExplicit);
    let records = conversation(&mut client, "gemini-3.1-pro", true);
    assert_eq!(
        usages(&records),
        [
            // 1: the marker on 4,000 tokens is below the minimum: no object.
            u(0, 0, 0, 4_000),
            // 2: no live object within the lookback: one created, the whole 5,000.
            u(0, 5_000, 0, 0),
            // 3 and 4: 2's object (through U2) is not their prefix; each creates its own.
            u(0, 4_800, 0, 0),
            u(0, 4_700, 0, 0),
        ]
    );
    assert_eq!(costs(&records), [4_000 * 2_000, 5_000 * write, 4_800 * write, 4_700 * write]);
    // Request 2 again at 300 s uses its object (created at 60 s, for 5 minutes)…
    let again = client.send(&request("gemini-3.1-pro", 2, true), 5 * MINUTE_MS);
    assert_eq!((U::of(&again), again.cost.total_nanousd()), (u(5_000, 0, 0, 0), 5_000 * 200));
    // …which does not renew it: at 361 s it is gone and created again.
    let later = client.send(&request("gemini-3.1-pro", 2, true), 6 * MINUTE_MS + 1_000);
    assert_eq!(U::of(&later), u(0, 5_000, 0, 0));
}

#[test]
fn run_compares_providers_in_one_document_and_names_a_provider_from_the_scenario() {
    use crate::support::run_binary;
    let scenario = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/scenarios/forks.json");
    let csv = run_binary(&["run", scenario, "--provider", "openai,all", "--csv"], b"");
    assert!(csv.status.success(), "{}", String::from_utf8_lossy(&csv.stderr));
    let text = String::from_utf8(csv.stdout).unwrap();
    // `openai` first as given, then every other provider once, in the documented order.
    let providers: Vec<&str> = text.lines().skip(1).map(|line| line.split(',').next().unwrap()).collect();
    assert_eq!(
        providers,
        ["openai", "anthropic", "bedrock", "gemini-implicit", "gemini-explicit", "deepseek"]
    );
    assert!(text.starts_with("provider,model,policy,prices_date,requests,"), "{text}");

    // A scenario file may name its provider; the table says which and what stands in.
    let named = r#"{"name": "p", "provider": "deepseek", "timeline": [{"turn": {}}]}"#;
    let out = run_binary(&["run", "-"], named.as_bytes());
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(
        table.starts_with("scenario p · seed 0 · provider deepseek (deepseek-v4-pro) · policy deepseek"),
        "{table}"
    );

    // One run's bodies cannot come from several providers: a usage error, exit 2.
    let bodies = std::env::temp_dir().join("forkcache-provider-bodies");
    let both = run_binary(&["run", scenario, "--provider", "all", "--bodies", bodies.to_str().unwrap()], b"");
    assert_eq!(both.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&both.stderr).contains("--bodies writes the bodies of one run"));
}

#[test]
fn every_request_of_a_scenario_runs_on_the_providers_model_of_its_tier() {
    use crate::support::run_binary;
    // agent-types: the main loop on Sonnet 4.6, Explore on Haiku 4.5, named agents inheriting.
    let scenario = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/scenarios/agent-types.json");
    let out = run_binary(&["run", scenario, "--provider", "openai", "--json"], b"");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut models: Vec<&str> =
        report["requests"].as_array().unwrap().iter().map(|r| r["model"].as_str().unwrap()).collect();
    models.sort_unstable();
    models.dedup();
    assert_eq!(models, ["gpt-5.4", "gpt-5.4-mini"]);
    assert_eq!(report["scenario"]["policy"], "openai");
}
