//! The price table as the endpoint, `replay` and `prices` use it: effective dates, unpriced
//! models, fast mode and US-only inference. Every expected cost is written out by hand.

use serde_json::{Value, json};

use forkcache_engine::ApiError;
use forkcache_engine::billing::{InferenceGeo, PriceDate, Speed};
use forkcache_engine::endpoint::{EndpointConfig, Record};
use forkcache_net::serve::ServeConfig;
use forkcache_wire::{Betas, CONTEXT_1M};

use crate::serve_harness::{Running, client, post_with_headers};
use crate::support::{Body, Client, Opts, bp, text, user};

/// One marked 10,000-token block plus an unmarked 5-token question, for `model`.
fn body(model: &str) -> Body {
    Body::new(model, vec![user(vec![bp(text("doc", 10_000)), text("q", 5)])])
}

#[test]
fn a_model_the_table_does_not_list_is_simulated_but_unpriced() {
    let record = Client::new().send(&body("claude-opus-9"), 0);
    assert!(!record.model_known && !record.priced);
    // Tokens are counted as for any model: the 10,000-token prefix is written.
    assert_eq!(record.usage.cache_creation_input_tokens, 10_000);
    assert_eq!(record.cost.total_nanousd(), 0);
}

#[test]
fn sonnet_5_5_reads_are_priced_on_the_request_date() {
    // A write at 0 and a read at 1 s of 10,000 tokens; the read at $0.20/MTok before
    // 2026-10-07 (10,000 × 200 = 2,000,000 nano-dollars) and $0.10 from then (1,000,000);
    // the 5 uncached tokens at $2 (10,000) either way.
    for (day, read_nanousd) in [("2026-10-06", 2_000_000), ("2026-10-07", 1_000_000)] {
        let config =
            EndpointConfig { price_date: Some(PriceDate::parse(day).unwrap()), ..EndpointConfig::default() };
        let mut client = Client::with_config(config);
        client.send(&body("claude-sonnet-5-5"), 0);
        let read = client.send(&body("claude-sonnet-5-5"), 1_000);
        assert_eq!(read.usage.cache_read_input_tokens, 10_000, "{day}");
        assert_eq!(read.cost.read_nanousd, read_nanousd, "{day}");
        assert_eq!(read.cost.uncached_nanousd, 5 * 2_000, "{day}");
    }
}

#[test]
fn fast_mode_is_priced_at_its_rates_and_refused_where_a_model_has_none() {
    let fast = body("claude-opus-5-5").with("speed", json!("fast"));
    let record = Client::new().send(&fast, 0);
    assert_eq!(record.usage.speed, Some(Speed::Fast));
    // 10,000 written at fast mode's 5m rate $10/MTok = 100,000,000 nano-dollars; 5 uncached at $8.
    assert_eq!(record.cost.write_5m_nanousd, 100_000_000);
    assert_eq!(record.cost.uncached_nanousd, 40_000);
    let error = Client::new().reject(&body("claude-sonnet-4-6").with("speed", json!("fast")), 0);
    assert_eq!(error.message, "speed: fast mode is not available for model claude-sonnet-4-6");
    let error = Client::new().reject(&body("claude-opus-5-5").with("speed", json!("ludicrous")), 0);
    assert!(error.message.starts_with("speed: Input should be 'standard' or 'fast'"), "{}", error.message);
}

#[test]
fn us_only_inference_costs_a_tenth_more_and_is_reported_in_usage() {
    let record = Client::new().send(&body("claude-opus-5-5").with("inference_geo", json!("us")), 0);
    assert_eq!(record.usage.inference_geo, Some(InferenceGeo::Us));
    // 10,000 written at $5/MTok = 50,000,000 nano-dollars, × 1.1 = 55,000,000.
    assert_eq!(record.cost.write_5m_nanousd, 55_000_000);
    let standard = Client::new().send(&body("claude-opus-5-5"), 0);
    assert_eq!(standard.usage.inference_geo, None);
    assert_eq!(standard.cost.write_5m_nanousd, 50_000_000);
}

fn forkcache(args: &[&str], stdin: &str) -> Value {
    let output = crate::support::run_binary(args, stdin.as_bytes());
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("one JSON document")
}

#[test]
fn replay_shows_unpriced_models_as_null_cost_and_lists_them() {
    let trace = format!("{}\n{}\n", body("claude-opus-9").0, body("claude-sonnet-4-6").0);
    let report = forkcache(&["replay", "-", "--json"], &trace);
    assert_eq!(report["requests"][0]["cost_usd"], Value::Null);
    assert_eq!(report["requests"][0]["unknown_model"], json!(true));
    // Sonnet 4.6: 10,000 written at $3.75/MTok + 5 uncached at $3 = 37,500,000 + 15,000 nano-dollars.
    assert_eq!(report["requests"][1]["cost_nanousd"], json!(37_515_000));
    assert_eq!(report["totals"]["cost_nanousd"], json!(37_515_000));
    assert_eq!(report["totals"]["unpriced_models"], json!(["claude-opus-9"]));
    // Priced as another model only when asked: Opus 4.8's 5m write is $6.25/MTok.
    let report = forkcache(&["replay", "-", "--json", "--price-unknown-as", "claude-opus-4-8"], &trace);
    assert_eq!(report["requests"][0]["cost_nanousd"], json!(10_000 * 6_250 + 5 * 5_000));
    assert_eq!(report["requests"][0]["priced_as"], json!("claude-opus-4-8"));
    assert_eq!(report["totals"]["unpriced_models"], json!([]));
    // The old flag name still works.
    let report = forkcache(&["replay", "-", "--json", "--default-model", "claude-opus-4-8"], &trace);
    assert_eq!(report["totals"]["unpriced_models"], json!([]));
}

#[test]
fn replay_prices_on_the_date_given() {
    let trace = format!("{}\n{}\n", body("claude-sonnet-5-5").0, body("claude-sonnet-5-5").0);
    let read_cost = |flags: &[&str]| {
        let mut args = vec!["replay", "-", "--json"];
        args.extend_from_slice(flags);
        forkcache(&args, &trace)["requests"][1]["cost_nanousd"].as_u64().expect("priced")
    };
    // 10,000 read + 5 uncached at $2: at $0.20 → 2,000,000 + 10,000; at $0.10 → 1,000,000 + 10,000.
    assert_eq!(read_cost(&["--date", "2026-09-30"]), 2_010_000);
    assert_eq!(read_cost(&[]), 1_010_000);
}

#[test]
fn replay_prices_each_run_on_the_date_its_session_marker_names() {
    // Two server runs, each a write then a read of the same 10,000 tokens: the first run's
    // server started 2026-09-30 (reads at $0.20/MTok), the second's 2026-10-08 ($0.10/MTok).
    // Read request cost: 10,000 read + 5 uncached at $2 → 2,000,000 + 10,000 = 2,010,000, then
    // 1,000,000 + 10,000 = 1,010,000.
    let marker = |started: &str| json!({"forkcache_session": {"started": started}}).to_string();
    let request = body("claude-sonnet-5-5").0.to_string();
    let trace = [marker("2026-09-30T08:00:00Z"), request.clone(), request.clone()]
        .into_iter()
        .chain([marker("2026-10-08T08:00:00Z"), request.clone(), request])
        .map(|line| line + "\n")
        .collect::<String>();
    let costs = |flags: &[&str]| {
        let mut args = vec!["replay", "-", "--json"];
        args.extend_from_slice(flags);
        let report = forkcache(&args, &trace);
        [1, 3].map(|i| report["requests"][i]["cost_nanousd"].as_u64().expect("priced"))
    };
    assert_eq!(costs(&[]), [2_010_000, 1_010_000]);
    // A date given on the command line holds for every run.
    assert_eq!(costs(&["--date", "2026-10-08"]), [1_010_000, 1_010_000]);
}

#[test]
fn prices_csv_has_a_row_per_model_with_the_tables_rates() {
    let output = crate::support::run_binary(&["prices", "--csv"], b"");
    assert_eq!(output.status.code(), Some(0));
    let text = String::from_utf8(output.stdout).expect("UTF-8");
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let header: Vec<String> = reader.headers().expect("a header").iter().map(String::from).collect();
    assert_eq!(
        &header[..7],
        ["model", "ids", "input", "cache_write_5m", "cache_write_1h", "cache_read", "output"]
    );
    let rows: Vec<csv::StringRecord> = reader.records().map(|row| row.expect("a row")).collect();
    let json = forkcache(&["prices", "--json"], "");
    assert_eq!(rows.len(), json["models"].as_array().expect("models").len());
    // Opus 5.5 as the pricing page gives it: $4 input, $5 / $8 writes, $0.20 read, $20 output.
    let opus = rows.iter().find(|row| row[1].split(' ').any(|id| id == "claude-opus-5-5")).expect("Opus 5.5");
    assert_eq!(&opus.iter().collect::<Vec<_>>()[2..7], ["4", "5", "8", "0.2", "20"]);
    assert!(!opus[13].is_empty(), "a source");
}

#[test]
fn prices_lists_every_row_with_a_source() {
    let table = forkcache(&["prices", "--json"], "");
    let models = table["models"].as_array().expect("models");
    assert!(models.len() >= 25);
    for model in models {
        assert!(!model["source"].as_str().unwrap_or_default().is_empty(), "{model}");
    }
    let opus = models.iter().find(|m| m["ids"][0] == "claude-opus-5-5").expect("Opus 5.5");
    assert_eq!((opus["input"].as_f64(), opus["output"].as_f64()), (Some(4.0), Some(20.0)));
    assert_eq!(opus["fast"]["input"].as_f64(), Some(8.0));
}

// The 1M-context beta (`context-1m-2025-08-07`): Sonnet 4 / 4.5 get a 1,000,000-token window
// instead of the table's 200,000, and above 200K input the whole request pays $6 in / $22.50 out
// per MTok with the cache multipliers on the $6 (5m write $7.50, 1h $12, read $0.60), until the
// beta's retirement on 2026-04-30 (reference §2.1). Reads come a minute after their write, once
// the write is visible (first-token visibility) and well within its 5 minutes.

const SONNET_4_5: &str = "claude-sonnet-4-5";

/// One marked block of `tokens` declared tokens (all of the prompt: nothing after the marker).
fn long_body(model: &str, tokens: u64) -> Body {
    Body::new(model, vec![user(vec![bp(text("doc", tokens))])])
}

fn on(day: &str) -> EndpointConfig {
    EndpointConfig { price_date: Some(PriceDate::parse(day).unwrap()), ..EndpointConfig::default() }
}

/// Sends `body` with the 1M beta named.
fn send_with_beta(client: &mut Client, body: &Body, at_ms: u64) -> Result<Record, ApiError> {
    let betas = Betas::from_names([CONTEXT_1M]);
    client.call(body, at_ms, Opts { betas: Some(&betas), ..Opts::default() })
}

#[test]
fn the_1m_beta_opens_sonnet_4_5_s_window_and_its_long_context_rates() {
    let body = long_body(SONNET_4_5, 250_000);
    // Without the beta: past the 200,000 window, refused as the API words it.
    let refusal = Client::with_config(on("2026-03-01")).reject(&body, 0);
    assert_eq!(refusal.message, "prompt is too long: 250000 tokens > 200000 maximum");
    // With it, before the retirement: a write then a read of 250,000 tokens, both above 200K.
    // Write: 250,000 × $7.50 = 1,875,000,000 nano-dollars. Read: 250,000 × $0.60 = 150,000,000
    // ($0.15, where the standard $0.30 read would be $0.075).
    let mut client = Client::with_config(on("2026-03-01"));
    let write = send_with_beta(&mut client, &body, 0).unwrap();
    assert_eq!(write.usage.cache_creation_input_tokens, 250_000);
    assert_eq!(write.cost.total_nanousd(), 1_875_000_000);
    assert!(write.context_1m);
    let read = send_with_beta(&mut client, &body, 60_000).unwrap();
    assert_eq!(read.usage.cache_read_input_tokens, 250_000);
    assert_eq!(read.cost.total_nanousd(), 150_000_000);
    // The beta's window is 1,000,000: one token past it is refused.
    let past = send_with_beta(&mut client, &long_body(SONNET_4_5, 1_000_001), 120_000).unwrap_err();
    assert_eq!(past.message, "prompt is too long: 1000001 tokens > 1000000 maximum");
}

#[test]
fn the_1m_beta_at_or_below_200k_input_changes_no_price() {
    // 150,000 read with the beta: not above 200K, the standard $0.30: 45,000,000.
    let mut client = Client::with_config(on("2026-03-01"));
    let body = long_body(SONNET_4_5, 150_000);
    send_with_beta(&mut client, &body, 0).unwrap();
    let read = send_with_beta(&mut client, &body, 60_000).unwrap();
    assert_eq!(read.cost.total_nanousd(), 45_000_000);
}

#[test]
fn the_retired_1m_beta_leaves_the_table_window() {
    // Retired 2026-04-30: from that day (and with no date: the table's newest prices) the
    // beta changes nothing, so 250,000 tokens are past Sonnet 4.5's 200,000.
    let body = long_body(SONNET_4_5, 250_000);
    for config in [on("2026-04-30"), EndpointConfig::default()] {
        let mut client = Client::with_config(config);
        let refusal = send_with_beta(&mut client, &body, 0).unwrap_err();
        assert_eq!(refusal.message, "prompt is too long: 250000 tokens > 200000 maximum");
    }
    // On the last day it existed, accepted.
    assert!(send_with_beta(&mut Client::with_config(on("2026-04-29")), &body, 0).unwrap().context_1m);
}

#[test]
fn models_the_1m_beta_does_not_list_are_unaffected() {
    // Sonnet 4.6's window is already 1,000,000 and billed at standard rates: 250,000 read at
    // $0.30 = 75,000,000 with or without the beta.
    let body = long_body("claude-sonnet-4-6", 250_000);
    let mut client = Client::with_config(on("2026-03-01"));
    send_with_beta(&mut client, &body, 0).unwrap();
    let read = send_with_beta(&mut client, &body, 60_000).unwrap();
    assert_eq!(read.cost.total_nanousd(), 75_000_000);
    assert!(!read.context_1m);
    // Opus 4.5 (200,000, no such beta): still refused.
    let refusal =
        send_with_beta(&mut Client::with_config(on("2026-03-01")), &long_body("claude-opus-4-5", 250_000), 0)
            .unwrap_err();
    assert_eq!(refusal.message, "prompt is too long: 250000 tokens > 200000 maximum");
}

#[test]
fn replay_and_serve_price_the_1m_beta_as_the_endpoint_does() {
    // A trace of two envelopes naming the beta: the write, then the read of 250,000 tokens.
    // On 2026-03-01: read 250,000 × 600 = 150,000,000 nano-dollars.
    let body = long_body(SONNET_4_5, 250_000).0;
    let line = |at_ms: u64| json!({"at_ms": at_ms, "betas": [CONTEXT_1M], "body": body}).to_string();
    let trace = format!("{}\n{}\n", line(0), line(60_000));
    let report = forkcache(&["replay", "-", "--json", "--date", "2026-03-01"], &trace);
    assert_eq!(report["requests"][1]["cost_nanousd"], json!(150_000_000));

    let server = Running::start(ServeConfig::default(), on("2026-03-01"));
    let agent = client();
    let url = server.url("/v1/messages");
    let headers = [("anthropic-beta", "claude-code-20250219,context-1m-2025-08-07")];
    let bytes = long_body(SONNET_4_5, 250_000).bytes();
    assert_eq!(post_with_headers(&agent, &url, &headers, &bytes).status, 200);
    let read = post_with_headers(&agent, &url, &headers, &bytes);
    assert_eq!(read.usage().cache_read_input_tokens, 250_000);
    // Without the header: refused.
    let refused = post_with_headers(&agent, &url, &[], &bytes);
    assert_eq!(refused.status, 400);
    server.stop();
}

#[test]
fn prices_shows_the_1m_beta_s_offer_and_its_band() {
    let table = forkcache(&["prices", "--json"], "");
    let models = table["models"].as_array().expect("models");
    let sonnet = models.iter().find(|m| m["ids"][1] == SONNET_4_5).expect("Sonnet 4.5");
    assert_eq!(sonnet["context_1m"], json!({"window": 1_000_000, "until": "2026-04-30"}));
    assert_eq!(sonnet["bands"][0]["with_context_1m"], json!(true));
    assert_eq!(sonnet["bands"][0]["input"], json!(6.0));
    let haiku = models.iter().find(|m| m["ids"][0] == "claude-haiku-5-5").expect("Haiku 5.5");
    assert_eq!(haiku["bands"][0].get("with_context_1m"), None);
    let output = crate::support::run_binary(&["prices"], b"");
    let text = String::from_utf8(output.stdout).unwrap();
    let row = text.lines().find(|line| line.starts_with("claude-sonnet-4-5-20250929")).expect("a row");
    assert!(
        row.ends_with(
            "context-1m beta: 1M window until 2026-04-30; above 200K input with the context-1m beta: 6/7.5/12/0.6/22.5"
        ),
        "{row}"
    );
}
