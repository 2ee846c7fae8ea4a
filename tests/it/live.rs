//! The live page (`GET /forkcache/`) and its feed (`GET /forkcache/events?since=N`) on `serve`
//! and `proxy`: the feed's shape and order, `since`, the bound on its rows, and that a key sees
//! its own workspace alone.

use std::time::{Duration, Instant};

use serde_json::Value;

use forkcache_engine::endpoint::EndpointConfig;
use forkcache_ingest::trace::key_fingerprint;
use forkcache_net::serve::ServeConfig;

use crate::proxy::{RunningProxy, scratch, trace_lines};
use crate::serve_harness::{Running, cached_request, client, post};

const MODEL: &str = "claude-sonnet-4-6";
/// Priced as Sonnet 4.6 is, with the same 1,024-token minimum.
const OTHER_MODEL: &str = "claude-sonnet-4-5-20250929";
const ALICE: &str = "sk-ant-api03-LIVE-ALICE-0123456789";
const BOB: &str = "sk-ant-api03-LIVE-BOB-9876543210";

/// A request with a 2,000-token cached system block and "hi" (`{"type":"text","text":"hi"}`,
/// 26 bytes: 7 tokens).
fn hello() -> String {
    cached_request(MODEL, 2_000, "hi", false)
}

/// `GET url` with an optional key: status and body.
fn fetch(url: &str, key: Option<&str>) -> (u16, String) {
    let agent = client();
    let mut request = agent.get(url).config().http_status_as_error(false).build();
    if let Some(key) = key {
        request = request.header("x-api-key", key);
    }
    let mut response = request.call().unwrap();
    let status = response.status().as_u16();
    (status, response.body_mut().read_to_string().unwrap())
}

fn feed(url: &str, key: Option<&str>) -> Value {
    let (status, body) = fetch(url, key);
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

fn rows_of(feed: &Value) -> &Vec<Value> {
    feed["rows"].as_array().unwrap()
}

/// A usage's (read, written, uncached).
fn counts(usage: &Value) -> (u64, u64, u64) {
    let n = |name: &str| usage[name].as_u64().unwrap();
    (n("cache_read_input_tokens"), n("cache_creation_input_tokens"), n("input_tokens"))
}

/// Sonnet 4.6 at the table's rates, by hand: $3/MTok uncached, $3.75 a 5-minute write, $0.30 a
/// read, $15 output.
fn sonnet_cost_usd(usage: &Value) -> f64 {
    let (read, written, uncached) = counts(usage);
    let output = usage["output_tokens"].as_u64().unwrap();
    (read as f64 * 0.30 + written as f64 * 3.75 + uncached as f64 * 3.0 + output as f64 * 15.0) / 1e6
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn serve_feed_lists_requests_in_pricing_order_with_running_cost() {
    let server = Running::default_server();
    let agent = client();
    let url = server.url("/v1/messages");
    post(&agent, &url, Some(ALICE), hello().as_bytes());
    post(&agent, &url, Some(ALICE), hello().as_bytes());
    // The same prompt under another model: the cache is per model, so the block is missed.
    post(&agent, &url, Some(ALICE), cached_request(OTHER_MODEL, 2_000, "hi", false).as_bytes());
    let refused = post(&agent, &url, Some(ALICE), br#"{"model":"claude-sonnet-4-6","messages":[]}"#);
    assert_eq!(refused.status, 400);

    let doc = feed(&server.url("/forkcache/events"), None);
    assert_eq!(
        (doc["edge"].as_str(), doc["next"].as_u64(), doc["missed"].as_u64()),
        (Some("serve"), Some(4), Some(0))
    );
    assert_eq!(doc["capacity"], 1_000);
    let rows = rows_of(&doc);
    let indexes: Vec<u64> = rows.iter().map(|row| row["index"].as_u64().unwrap()).collect();
    assert_eq!(indexes, [0, 1, 2, 3]);
    assert!(rows.windows(2).all(|pair| pair[0]["at_ms"].as_u64() <= pair[1]["at_ms"].as_u64()));
    // The first writes the 2,000-token block, the second reads it; "hi" is 7 tokens uncached.
    assert_eq!(counts(&rows[0]["usage"]), (0, 2_000, 7));
    assert_eq!(counts(&rows[1]["usage"]), (2_000, 0, 7));
    // The first is new content: no miss. The third writes again what Sonnet 4.6 holds: its
    // break is the model, 2,000 tokens that could have been read.
    assert!(rows[0]["miss"].is_null(), "{}", rows[0]);
    assert_eq!(counts(&rows[2]["usage"]), (0, 2_000, 7));
    assert_eq!(rows[2]["miss"]["cause"], "model_changed", "{}", rows[2]);
    assert_eq!(rows[2]["miss"]["tokens_missed"], 2_000, "{}", rows[2]);
    assert_eq!(rows[2]["model"], OTHER_MODEL);
    let mut running = 0.0;
    for row in &rows[..3] {
        assert_eq!(row["workspace"], key_fingerprint(ALICE).as_str());
        assert!(row["error"].is_null(), "{row}");
        assert!(close(row["cost_usd"].as_f64().unwrap(), sonnet_cost_usd(&row["usage"])), "{row}");
        assert!(
            row.get("recorded").is_none() && row.get("predicted").is_none(),
            "serve rows carry usage: {row}"
        );
        running += row["cost_usd"].as_f64().unwrap();
        assert!(close(row["running_cost_usd"].as_f64().unwrap(), running), "{row}");
    }
    // The refusal: its error, no usage, no cost, the running cost unchanged.
    assert_eq!(rows[3]["error"]["status"], 400);
    assert_eq!(rows[3]["error"]["type"], "invalid_request_error");
    assert!(rows[3]["usage"].is_null() && rows[3]["cost_usd"].is_null(), "{}", rows[3]);
    assert!(close(rows[3]["running_cost_usd"].as_f64().unwrap(), running));

    // The totals are the stats' own.
    let stats = feed(&server.url("/forkcache/stats"), None);
    assert_eq!(doc["totals"]["requests"], 4);
    assert!(close(
        doc["totals"]["cost_usd"].as_f64().unwrap(),
        stats["totals"]["cost_usd"].as_f64().unwrap()
    ));
    assert!(close(doc["totals"]["cost_usd"].as_f64().unwrap(), running));

    // since=N: the rows numbered N and after.
    let later = feed(&server.url("/forkcache/events?since=3"), None);
    assert_eq!(rows_of(&later).len(), 1);
    assert_eq!((rows_of(&later)[0]["index"].as_u64(), later["next"].as_u64()), (Some(3), Some(4)));
    assert!(rows_of(&feed(&server.url("/forkcache/events?since=4"), None)).is_empty());
    let (status, body) = fetch(&server.url("/forkcache/events?since=soon"), None);
    assert_eq!(status, 400, "{body}");
    let error: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(error["error"]["type"], "invalid_request_error");
    assert!(error["error"]["message"].as_str().unwrap().contains("since"), "{error}");
    server.stop();
}

#[test]
fn serve_feed_keeps_its_last_rows_only() {
    let config = ServeConfig { live_rows: 3, ..ServeConfig::default() };
    let server = Running::start(config, EndpointConfig::default());
    let agent = client();
    for _ in 0..5 {
        post(&agent, &server.url("/v1/messages"), Some(ALICE), hello().as_bytes());
    }
    let doc = feed(&server.url("/forkcache/events"), None);
    let indexes: Vec<u64> = rows_of(&doc).iter().map(|row| row["index"].as_u64().unwrap()).collect();
    // 5 requests, numbered 0 to 4: the last 3 kept, 2 missed by a reader starting at 0.
    assert_eq!(indexes, [2, 3, 4]);
    assert_eq!(
        (doc["next"].as_u64(), doc["missed"].as_u64(), doc["capacity"].as_u64()),
        (Some(5), Some(2), Some(3))
    );
    // The totals still count every request.
    assert_eq!(doc["totals"]["requests"], 5);
    let caught_up = feed(&server.url("/forkcache/events?since=4"), None);
    assert_eq!((rows_of(&caught_up).len(), caught_up["missed"].as_u64()), (1, Some(0)));
    server.stop();
}

#[test]
fn serve_feed_under_require_key_shows_each_key_its_own_workspace() {
    let config = ServeConfig { require_key: true, ..ServeConfig::default() };
    let server = Running::start(config, EndpointConfig::default());
    let agent = client();
    for key in [ALICE, BOB, ALICE] {
        post(&agent, &server.url("/v1/messages"), Some(key), hello().as_bytes());
    }
    let (status, body) = fetch(&server.url("/forkcache/events"), None);
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("authentication_error"), "{body}");
    let (status, alice_body) = fetch(&server.url("/forkcache/events"), Some(ALICE));
    assert_eq!(status, 200);
    assert!(!alice_body.contains(ALICE) && !alice_body.contains(BOB), "no key is ever echoed: {alice_body}");
    let alice: Value = serde_json::from_str(&alice_body).unwrap();
    let indexes: Vec<u64> = rows_of(&alice).iter().map(|row| row["index"].as_u64().unwrap()).collect();
    assert_eq!(indexes, [0, 2], "alice's rows keep their server-wide numbers");
    assert!(rows_of(&alice).iter().all(|row| row["workspace"] == key_fingerprint(ALICE).as_str()));
    assert_eq!(alice["totals"]["requests"], 2);
    let bob = feed(&server.url("/forkcache/events"), Some(BOB));
    assert_eq!(rows_of(&bob).len(), 1);
    assert_eq!(rows_of(&bob)[0]["workspace"], key_fingerprint(BOB).as_str());
    // Bob's one request wrote his own cache: nothing of alice's is read across workspaces.
    assert_eq!(counts(&rows_of(&bob)[0]["usage"]), (0, 2_000, 7));
    assert_eq!(bob["totals"]["requests"], 1);
    server.stop();
}

#[test]
fn the_page_is_one_self_contained_document_served_to_anyone() {
    let config = ServeConfig { require_key: true, ..ServeConfig::default() };
    let server = Running::start(config, EndpointConfig::default());
    let response = client().get(&server.url("/forkcache/")).call().unwrap();
    let header = |name: &str| response.headers().get(name).unwrap().to_str().unwrap().to_string();
    assert!(header("content-type").starts_with("text/html"));
    // The browser itself refuses anything not inline and any request but to this server.
    let policy = header("content-security-policy");
    assert!(policy.contains("default-src 'none'") && policy.contains("connect-src 'self'"), "{policy}");
    let page = response.into_body().read_to_string().unwrap();
    for external in ["src=\"http", "href=\"http", "src=\"//", "href=\"//", "@import", "url("] {
        assert!(!page.contains(external), "the page loads nothing from elsewhere: {external}");
    }
    assert!(page.contains("events?since="), "it reads the feed beside it");
    // The key goes in a header, never in the URL.
    assert!(page.contains("\"x-api-key\": key") && !page.contains("key=\" +"));
    // Without the slash, on to the page (its relative links need it).
    let agent: ureq::Agent =
        ureq::Agent::config_builder().max_redirects(0).http_status_as_error(false).build().into();
    let redirect = agent.get(&server.url("/forkcache")).call().unwrap();
    assert_eq!(redirect.status().as_u16(), 308);
    assert_eq!(redirect.headers().get("location").unwrap(), "/forkcache/");
    server.stop();
}

/// Polls the proxy's feed until it holds `count` rows (a row is added once its exchange is
/// predicted, after the response).
fn proxy_feed(proxy: &RunningProxy, key: Option<&str>, count: usize) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let doc = feed(&proxy.url("/forkcache/events"), key);
        if rows_of(&doc).len() >= count || Instant::now() > deadline {
            return doc;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn proxy_feed_puts_recorded_beside_predicted_in_trace_order() {
    let dir = scratch("live");
    let server = Running::default_server();
    let trace = dir.join("proxy.jsonl");
    let proxy = RunningProxy::start(&server.url(""), Some(trace.clone()));
    let agent = client();
    for _ in 0..3 {
        post(&agent, &proxy.url("/v1/messages"), Some(ALICE), hello().as_bytes());
    }
    let doc = proxy_feed(&proxy, None, 3);
    let stats = feed(&proxy.url("/forkcache/stats"), None);
    let (_, _) = proxy.stop();
    drop(server);

    assert_eq!(doc["edge"], "proxy");
    let rows = rows_of(&doc);
    assert_eq!(rows.len(), 3);
    // The trace's order, its request ids and times.
    let lines = trace_lines(&trace);
    for (index, (row, line)) in rows.iter().zip(&lines).enumerate() {
        assert_eq!(row["index"].as_u64(), Some(index as u64));
        assert_eq!(row["request_id"], line["request_id"]);
        assert_eq!(row["at_ms"], line["at_ms"]);
        assert_eq!(row["recorded"], line["usage"], "the upstream's usage as recorded");
        assert_eq!(row["agrees"], true, "the upstream is the same simulator: {row}");
        assert_eq!(row["prediction_skipped"], false);
        assert!(row["divergence"].is_null() && row.get("usage").is_none(), "{row}");
    }
    assert_eq!(counts(&rows[0]["recorded"]), (0, 2_000, 7));
    assert_eq!(counts(&rows[0]["predicted"]), (0, 2_000, 7));
    assert_eq!(counts(&rows[2]["recorded"]), (2_000, 0, 7));
    assert_eq!(counts(&rows[2]["predicted"]), (2_000, 0, 7));
    // Costs: each row's recorded usage at the table's prices; the running total is the stats'.
    let mut running = 0.0;
    for row in rows {
        let cost = row["cost_usd"].as_f64().unwrap();
        assert!(close(cost, sonnet_cost_usd(&row["recorded"])), "{row}");
        running += cost;
        assert!(close(row["running_cost_usd"].as_f64().unwrap(), running), "{row}");
    }
    let workspace = &stats["workspaces"][key_fingerprint(ALICE)];
    assert!(close(running, workspace["recorded"]["cost_usd"].as_f64().unwrap()), "{stats}");
    let predicted_total = workspace["predicted"]["cost_usd"].as_f64().unwrap();
    assert!(close(rows[2]["running_predicted_cost_usd"].as_f64().unwrap(), predicted_total));
    assert!(close(doc["totals"]["cost_usd"].as_f64().unwrap(), running));
    assert!(close(doc["totals"]["predicted_cost_usd"].as_f64().unwrap(), predicted_total));
    assert_eq!(doc["totals"]["requests"], 3);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn proxy_feed_under_require_key_shows_each_key_its_own_workspace() {
    let server = Running::default_server();
    let proxy = RunningProxy::start_with(&server.url(""), |config| {
        config.require_key = true;
        config.live_rows = 2;
    });
    let agent = client();
    for key in [ALICE, BOB, ALICE, ALICE] {
        post(&agent, &proxy.url("/v1/messages"), Some(key), hello().as_bytes());
    }
    let all_counted = || feed(&proxy.url("/forkcache/events"), Some(ALICE))["next"].as_u64() == Some(4);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !all_counted() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let (status, body) = fetch(&proxy.url("/forkcache/events"), None);
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("authentication_error"), "{body}");
    let (_, alice_body) = fetch(&proxy.url("/forkcache/events"), Some(ALICE));
    assert!(!alice_body.contains(ALICE) && !alice_body.contains(BOB), "{alice_body}");
    let alice: Value = serde_json::from_str(&alice_body).unwrap();
    // Two rows kept (2 and 3), both alice's; rows 0 and 1 are gone.
    let indexes: Vec<u64> = rows_of(&alice).iter().map(|row| row["index"].as_u64().unwrap()).collect();
    assert_eq!(indexes, [2, 3]);
    assert_eq!(alice["missed"], 2);
    assert!(rows_of(&alice).iter().all(|row| row["workspace"] == key_fingerprint(ALICE).as_str()));
    assert_eq!(alice["totals"]["requests"], 3, "the totals count every exchange of hers");
    // Bob's one row is gone from the feed; his totals remain, and nothing of alice's shows.
    let bob = feed(&proxy.url("/forkcache/events"), Some(BOB));
    assert!(rows_of(&bob).is_empty(), "{bob}");
    assert_eq!(bob["totals"]["requests"], 1);
    // A key that sent nothing sees nothing.
    let stranger = feed(&proxy.url("/forkcache/events"), Some("sk-ant-api03-NOBODY"));
    assert!(rows_of(&stranger).is_empty() && stranger["totals"]["requests"] == 0, "{stranger}");
    proxy.stop();
}

#[test]
fn the_proxy_serves_the_page_itself_without_its_upstream() {
    // Nothing listens upstream: the page and the feed are the proxy's own.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let proxy = RunningProxy::start(&format!("http://{closed}"), None);
    let (status, page) = fetch(&proxy.url("/forkcache/"), None);
    assert_eq!(status, 200);
    assert!(page.starts_with("<!DOCTYPE html>"));
    let doc = feed(&proxy.url("/forkcache/events"), None);
    assert_eq!((doc["edge"].as_str(), doc["next"].as_u64()), (Some("proxy"), Some(0)));
    proxy.stop();
}
