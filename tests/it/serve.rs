//! `forkcache serve` over a real loopback socket: the Messages API's routes, usage computed from
//! the bytes, visibility that follows the server's real response, scripts, the trace (replayed to
//! the same usage) and errors in the API's shape.
//!
//! Sizes are declared (`forkcache_tokens`) or hand-counted with bytes4 = ceil(bytes / 4) of a
//! block's compact JSON. Model claude-sonnet-4-6: $3 input, $3.75 5m write, $0.30 read, $15
//! output per MTok = 3,000 / 3,750 / 300 / 15,000 nano-dollars per token; minimum cacheable 1,024.

use std::io::Read as _;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use forkcache_engine::billing::{PriceTable, Usage};
use forkcache_engine::clock::LatencyModel;
use forkcache_engine::clock::SimTime;
use forkcache_engine::endpoint::{Call, EndpointConfig, MockEndpoint};
use forkcache_engine::{ErrorKind, MissCause};
use forkcache_ingest::replay::{ReplayConfig, replay};
use forkcache_ingest::trace::key_fingerprint;
use forkcache_net::serve::{LatencyMode, Script, ServeConfig};

use crate::serve_harness::{Running, cached_request, client, get, post, sse_events};

const MODEL: &str = "claude-sonnet-4-6";

/// The user text "hi" as one text block: `{"type":"text","text":"hi"}` = 27 bytes → 7 tokens.
const HI_TOKENS: u64 = 7;
/// The default reply `{"type":"text","text":"forkcache mock reply."}` = 46 bytes → 12 tokens.
const REPLY_TOKENS: u64 = 12;

#[test]
fn repeated_request_flips_from_cache_write_to_read_in_json_and_sse() {
    let server = Running::default_server();
    let agent = client();
    let url = server.url("/v1/messages");
    let first = post(&agent, &url, Some("k1"), cached_request(MODEL, 2_000, "hi", false).as_bytes());
    assert_eq!(first.status, 200, "{}", first.body);
    // Cold: the 2,000-token system block is written (5m), "hi" is the uncached tail.
    assert_eq!(first.usage(), Usage::new(HI_TOKENS, 0, 2_000, 0, REPLY_TOKENS));
    let message = first.json();
    assert_eq!(message["type"], "message");
    assert_eq!(message["content"], json!([{"type": "text", "text": "forkcache mock reply."}]));
    assert_eq!(message["stop_reason"], "end_turn");
    assert!(message["id"].as_str().unwrap().starts_with("msg_"));
    assert!(first.request_id.as_deref().is_some_and(|id| id.starts_with("req_")));

    // The same request streamed, with ?beta=true and a bearer token: the write is read back.
    let second = agent
        .post(&server.url("/v1/messages?beta=true"))
        .header("authorization", "Bearer k1")
        .header("anthropic-beta", "prompt-caching-scope-2026-01-05,not-a-real-beta")
        .header("anthropic-version", "2026-10-21")
        .send(cached_request(MODEL, 2_000, "hi", true).as_bytes())
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    let events = sse_events(&second);
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "ping",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    let start: Usage = serde_json::from_value(events[0].1["message"]["usage"].clone()).unwrap();
    assert_eq!(start, Usage::new(HI_TOKENS, 2_000, 0, 0, 1), "message_start carries the input side");
    let end: Usage = serde_json::from_value(events[5].1["usage"].clone()).unwrap();
    assert_eq!(end, Usage::new(HI_TOKENS, 2_000, 0, 0, REPLY_TOKENS), "message_delta is cumulative");

    let summary = server.stop();
    let k1 = &summary.stats.workspaces[&key_fingerprint("k1")];
    assert_eq!((k1.requests, k1.rejected), (2, 0));
    // 7×3,000 + 2,000×3,750 + 12×15,000 = 7,701,000; then 7×3,000 + 2,000×300 + 12×15,000 = 801,000.
    assert_eq!(k1.cost.total_nanousd(), 8_502_000);
    // Token-weighted hit rate: 2,000 read of 2 × 2,007 input tokens.
    assert!((k1.hit_rate() - 2_000.0 / 4_014.0).abs() < 1e-12);
    assert_eq!((summary.cache.writes, summary.cache.reads), (1, 1));
}

/// A fork child: the parent's request, the parent's tool_use, a placeholder result and a directive.
fn fork_bodies() -> (String, String, String) {
    let system = json!([{"type": "text", "text": "sys", "forkcache_tokens": 2_000, "cache_control": {"type": "ephemeral"}}]);
    let task = |marked: bool| {
        let mut block = json!({"type": "text", "text": "task", "forkcache_tokens": 500});
        if marked {
            block["cache_control"] = json!({"type": "ephemeral"});
        }
        json!({"role": "user", "content": [block]})
    };
    let parent = json!({"model": MODEL, "max_tokens": 64, "system": system, "messages": [task(true)]});
    let child = |directive: &str| {
        json!({"model": MODEL, "max_tokens": 64, "system": system, "stream": true, "messages": [
            task(false),
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Agent", "input": {}, "forkcache_tokens": 300}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Fork started", "forkcache_tokens": 100},
                {"type": "text", "text": directive, "forkcache_tokens": 50, "cache_control": {"type": "ephemeral"}}
            ]}
        ]})
        .to_string()
    };
    (parent.to_string(), child("directive one"), child("directive two"))
}

#[test]
fn fork_child_reads_the_parents_prefix_once_the_parents_response_began() {
    let server = Running::default_server();
    let agent = client();
    let url = server.url("/v1/messages");
    let (parent, child, _) = fork_bodies();
    // Parent: 2,000 (system) + 500 (task), both marked, nothing cached: writes 2,500.
    let parent = post(&agent, &url, Some("k"), parent.as_bytes());
    assert_eq!(parent.usage(), Usage::new(0, 0, 2_500, 0, REPLY_TOKENS));
    // Child, after the parent's response: 2,950 tokens; its directive's lookback passes the
    // result (1), the tool_use (2) and finds the parent's entry at the task (3): reads 2,500,
    // writes 300 + 100 + 50 = 450.
    let child = post(&agent, &url, Some("k"), child.as_bytes());
    assert_eq!(child.usage(), Usage::new(0, 2_500, 450, 0, REPLY_TOKENS));
}

#[test]
fn with_modelled_latency_a_child_arriving_before_the_parents_first_byte_misses() {
    let mut endpoint = EndpointConfig::default();
    endpoint.cache.latency = LatencyModel { base_ms: 400, per_uncached_token_us: 0, per_output_token_us: 0 };
    let server =
        Running::start(ServeConfig { latency: LatencyMode::Model, ..ServeConfig::default() }, endpoint);
    let url = server.url("/v1/messages");
    let (parent_body, child_one, child_two) = fork_bodies();
    let started = Instant::now();
    let parent = std::thread::scope(|scope| {
        let parent = scope.spawn(|| post(&client(), &url, Some("k"), parent_body.as_bytes()));
        std::thread::sleep(Duration::from_millis(80));
        // Arrives ~80 ms in; the parent's first byte is due at 400 ms: nothing is readable yet.
        let early = post(&client(), &url, Some("k"), child_one.as_bytes());
        assert_eq!(early.usage(), Usage::new(0, 0, 2_950, 0, REPLY_TOKENS));
        parent.join().unwrap()
    });
    assert!(started.elapsed() >= Duration::from_millis(400), "the server waited the modelled ttft");
    assert_eq!(parent.usage(), Usage::new(0, 0, 2_500, 0, REPLY_TOKENS));
    // After the parent's response began, a sibling reads the parent's 2,500 and writes 450.
    let late = post(&client(), &url, Some("k"), child_two.as_bytes());
    assert_eq!(late.usage(), Usage::new(0, 2_500, 450, 0, REPLY_TOKENS));
    let summary = server.stop();
    assert_eq!(
        summary.stats.workspaces[&key_fingerprint("k")].misses.get(&MissCause::NotYetVisible),
        Some(&1)
    );
}

const SCRIPT: &str = r#"{"rules": [
    {"when": {"last_user_contains": "OVERLOAD"}, "reply": {"error": {"status": 529, "retry_after_s": 3}}},
    {"when": {"last_user_contains": "CUT"}, "reply": {"cut_stream": true}},
    {"when": {"last_user_contains": "MIDSTREAM"}, "reply": {"error": {"status": 529, "mid_stream": true}}},
    {"when": {"last_user_contains": "WEATHER", "tool_offered": "get_weather"},
     "reply": {"text": "Let me check.", "tool_use": [{"name": "get_weather", "input": {"location": "San Francisco, CA", "unit": "celsius"}}]}}
]}"#;

fn weather_request(stream: bool) -> String {
    json!({"model": MODEL, "max_tokens": 64, "stream": stream,
        "tools": [{"name": "get_weather", "description": "Weather", "input_schema": {"type": "object", "properties": {"location": {"type": "string"}}}}],
        "messages": [{"role": "user", "content": "WEATHER in SF?"}]})
    .to_string()
}

#[test]
fn scripted_tool_use_streams_its_input_as_json_deltas() {
    let config = ServeConfig { script: Script::from_json(SCRIPT).unwrap(), ..ServeConfig::default() };
    let server = Running::start(config, EndpointConfig::default());
    let agent = client();
    let url = server.url("/v1/messages");
    let streamed = post(&agent, &url, None, weather_request(true).as_bytes());
    let events = sse_events(&streamed.body);
    let tool_start =
        events.iter().find(|(name, data)| name == "content_block_start" && data["index"] == 1).unwrap();
    assert_eq!(tool_start.1["content_block"]["name"], "get_weather");
    assert_eq!(tool_start.1["content_block"]["input"], json!({}));
    let partials: Vec<&str> = events
        .iter()
        .filter(|(name, data)| name == "content_block_delta" && data["index"] == 1)
        .map(|(_, data)| data["delta"]["partial_json"].as_str().unwrap())
        .collect();
    assert_eq!(partials[0], "", "the first input_json_delta is empty");
    assert!(partials.len() > 2);
    let input: Value = serde_json::from_str(&partials.concat()).unwrap();
    assert_eq!(input, json!({"location": "San Francisco, CA", "unit": "celsius"}));
    let stop = events.iter().find(|(name, _)| name == "message_delta").unwrap();
    assert_eq!(stop.1["delta"]["stop_reason"], "tool_use");
    // Non-streamed: the same blocks, key order of the input kept, a deterministic toolu_ id.
    let message = post(&agent, &url, None, weather_request(false).as_bytes()).json();
    assert_eq!(message["content"][0], json!({"type": "text", "text": "Let me check."}));
    assert_eq!(
        serde_json::to_string(&message["content"][1]["input"]).unwrap(),
        r#"{"location":"San Francisco, CA","unit":"celsius"}"#
    );
    assert!(message["content"][1]["id"].as_str().unwrap().starts_with("toolu_"));
}

/// Reads what arrives before the connection drops (a cut stream ends in a read error).
fn post_partial(agent: &ureq::Agent, url: &str, body: &[u8]) -> (u16, String, bool) {
    let mut response = agent.post(url).header("x-api-key", "k1").send(body).unwrap();
    let status = response.status().as_u16();
    let mut reader = response.body_mut().as_reader();
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    let cut = loop {
        match reader.read(&mut buffer) {
            Ok(0) => break false,
            Ok(n) => received.extend_from_slice(&buffer[..n]),
            Err(_) => break true,
        }
    };
    (status, String::from_utf8(received).unwrap(), cut)
}

#[test]
fn trace_replays_to_exactly_the_usage_the_server_returned_errors_included() {
    let trace = tempfile("replay");
    let config = ServeConfig {
        script: Script::from_json(SCRIPT).unwrap(),
        trace: Some(trace.clone()),
        require_key: true,
        body_limit_bytes: 64 << 10,
        ..ServeConfig::default()
    };
    let server = Running::start(config, EndpointConfig::default());
    let agent = client();
    let url = server.url("/v1/messages");
    let too_many_markers = json!({"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": (0..5)
        .map(|i| json!({"type": "text", "text": format!("b{i}"), "cache_control": {"type": "ephemeral"}})).collect::<Vec<_>>()}]});
    let huge = format!(
        r#"{{"model":"{MODEL}","max_tokens":5,"messages":[{{"role":"user","content":"{}"}}]}}"#,
        "x".repeat(100 << 10)
    );

    // What every request came back as: Ok(usage) or Err(error type).
    let mut returned: Vec<Result<Usage, String>> = Vec::new();
    let mut send = |key: Option<&str>, body: &str| {
        let answer = post(&agent, &url, key, body.as_bytes());
        returned.push(if answer.status == 200 { Ok(answer.usage()) } else { Err(answer.error().0) });
        answer
    };
    send(Some("k1"), &cached_request(MODEL, 2_000, "hi", false));
    send(Some("k1"), &cached_request(MODEL, 2_000, "hi", true));
    send(Some("k2"), &cached_request(MODEL, 2_000, "hi", true));
    let overloaded = send(Some("k1"), &cached_request(MODEL, 2_000, "OVERLOAD", false));
    assert_eq!((overloaded.status, overloaded.retry_after.as_deref()), (529, Some("3")));
    send(Some("k1"), r#"{"model": "#);
    send(Some("k1"), &too_many_markers.to_string());
    send(None, &cached_request(MODEL, 2_000, "no key", false));
    let too_large = send(Some("k1"), &huge);
    assert_eq!(too_large.status, 413);
    send(Some("k2"), &weather_request(true));
    // Overloaded mid-stream: status 200, message_start (priced), then an `error` event.
    let failed = post(&agent, &url, Some("k1"), cached_request(MODEL, 2_500, "MIDSTREAM", true).as_bytes());
    let events = sse_events(&failed.body);
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!((failed.status, names), (200, vec!["message_start", "error"]));
    assert_eq!(events[1].1["error"], json!({"type": "overloaded_error", "message": "Overloaded"}));
    // "MIDSTREAM" → `{"type":"text","text":"MIDSTREAM"}` = 34 bytes → 9 tokens.
    let start: Usage = serde_json::from_value(events[0].1["message"]["usage"].clone()).unwrap();
    assert_eq!(start, Usage::new(9, 0, 2_500, 0, 0));
    returned.push(Ok(start));
    // A cut stream: message_start (priced: the writes happened), then the connection drops.
    let (status, partial, cut) =
        post_partial(&agent, &url, cached_request(MODEL, 3_000, "CUT", true).as_bytes());
    assert!(status == 200 && cut, "status {status}, cut {cut}: {partial}");
    let events = sse_events(&partial);
    assert_eq!(events.len(), 1, "only message_start arrives: {partial}");
    let start: Usage = serde_json::from_value(events[0].1["message"]["usage"].clone()).unwrap();
    // "CUT" → `{"type":"text","text":"CUT"}` = 28 bytes → 7 tokens; nothing is generated.
    assert_eq!(start, Usage::new(7, 0, 3_000, 0, 0));
    returned.push(Ok(start));
    let summary = server.stop();

    let text = std::fs::read_to_string(&trace).unwrap();
    assert_eq!(
        text.lines().count(),
        1 + returned.len(),
        "a session marker, then one line per Messages request"
    );
    let report = replay(&ReplayConfig::default(), PriceTable::builtin(), &text).unwrap();
    let replayed: Vec<Result<Usage, String>> = report
        .records
        .iter()
        .map(|r| r.result.as_ref().map(|record| record.usage).map_err(|e| e.kind.type_name().to_string()))
        .collect();
    assert_eq!(replayed, returned);
    // The mix, by hand: priced are the 3 cached requests, the tool call, the mid-stream error and
    // the cut stream (6); rejected, in order: 529, malformed, 5 markers, no key, 413 (5).
    let expected_errors = [
        "overloaded_error",
        "invalid_request_error",
        "invalid_request_error",
        "authentication_error",
        "request_too_large",
    ];
    let errors: Vec<&String> = returned.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(errors, expected_errors);
    assert_eq!(summary.stats.totals().requests, 6);
    assert_eq!(summary.stats.totals().rejected, 5);
    assert_eq!(report.totals.usage, summary.stats.totals().usage);
    let _ = std::fs::remove_file(trace);
}

/// Regression: a body the edge refuses for what the engine does not check (an empty content
/// before the last message, a documented field of the wrong type) was traced as its bytes alone,
/// and replayed as a priced request. The trace carries the error, and replays to it.
#[test]
fn an_edge_refusal_replays_as_its_error() {
    let trace = tempfile("edge-refusal");
    let server = Running::start(
        ServeConfig { trace: Some(trace.clone()), ..ServeConfig::default() },
        EndpointConfig::default(),
    );
    let (agent, url) = (client(), server.url("/v1/messages"));
    let empty_first = json!({"model": MODEL, "max_tokens": 5, "messages": [
        {"role": "user", "content": []}, {"role": "user", "content": "hi"}]});
    let hot = json!({"model": MODEL, "max_tokens": 5, "temperature": "hot", "messages": [{"role": "user", "content": "hi"}]});
    let served: Vec<(u16, String)> = [empty_first, hot]
        .iter()
        .map(|body| {
            let answer = post(&agent, &url, Some("k"), body.to_string().as_bytes());
            (answer.status, answer.error().1)
        })
        .collect();
    server.stop();
    let text = std::fs::read_to_string(&trace).unwrap();
    let report = replay(&ReplayConfig::default(), PriceTable::builtin(), &text).unwrap();
    let replayed: Vec<(u16, String)> = report
        .records
        .iter()
        .map(|record| {
            record
                .result
                .as_ref()
                .map_or_else(|e| (e.kind.status(), e.message.clone()), |_| (200, String::new()))
        })
        .collect();
    assert_eq!(replayed, served);
    assert_eq!(
        served[0].1,
        "messages.0: all messages must have non-empty content except for the optional final assistant message"
    );
    assert!(served[1].1.starts_with("temperature: "), "{}", served[1].1);
    let _ = std::fs::remove_file(trace);
}

#[test]
fn bad_input_gets_the_apis_errors_and_never_stops_the_server() {
    let config = ServeConfig { require_key: true, ..ServeConfig::default() };
    let server = Running::start(config, EndpointConfig::default());
    let agent = client();
    let url = server.url("/v1/messages");
    let check = |key: Option<&str>, body: &[u8], status: u16, kind: &str, message_start: &str| {
        let answer = post(&agent, &url, key, body);
        assert_eq!(answer.status, status, "{}", answer.body);
        let (error_type, message) = answer.error();
        assert_eq!(error_type, kind);
        assert!(message.starts_with(message_start), "{message:?} should start with {message_start:?}");
        assert_eq!(answer.request_id.as_deref(), answer.json()["request_id"].as_str(), "header = body");
    };
    let valid = cached_request(MODEL, 2_000, "hi", false);
    check(None, valid.as_bytes(), 401, "authentication_error", "x-api-key header is required");
    check(
        Some("k"),
        br#"{"model": "m", "messages": [}"#,
        400,
        "invalid_request_error",
        "malformed JSON at line 1 column 29",
    );
    check(
        Some("k"),
        br#"{"model":"m","max_tokens":5,"messages":[{"role":"user","content":7}]}"#,
        400,
        "invalid_request_error",
        "messages.0.content: invalid type: integer `7`",
    );
    check(
        Some("k"),
        br#"{"model":"m","messages":[]}"#,
        400,
        "invalid_request_error",
        "max_tokens: Field required",
    );
    check(
        Some("k"),
        b"{\"model\":\"\xff\"}",
        400,
        "invalid_request_error",
        "request body is not valid UTF-8",
    );
    let five = json!({"model": MODEL, "max_tokens": 5, "system": (0..5)
        .map(|i| json!({"type": "text", "text": format!("s{i}"), "cache_control": {"type": "ephemeral"}})).collect::<Vec<_>>(),
        "messages": [{"role": "user", "content": "x"}]});
    check(
        Some("k"),
        five.to_string().as_bytes(),
        400,
        "invalid_request_error",
        "A maximum of 4 blocks with cache_control may be provided. Found 5.",
    );
    // 32 MB is the limit: one byte more is refused, and the server keeps answering.
    let mut oversized = valid.clone().into_bytes();
    oversized.resize((32 << 20) + 1, b' ');
    check(
        Some("k"),
        &oversized,
        413,
        "request_too_large",
        "Request exceeds the maximum size of 33554432 bytes",
    );
    let answer = get(&agent, &server.url("/v1/nothing"));
    assert_eq!((answer.status, answer.error().0.as_str()), (404, "not_found_error"));
    let answer = get(&agent, &url);
    assert_eq!((answer.status, answer.error().0.as_str()), (405, "invalid_request_error"));
    assert_eq!(post(&agent, &url, Some("k"), valid.as_bytes()).status, 200);
}

#[test]
fn count_tokens_models_root_and_stats() {
    let server = Running::default_server();
    let agent = client();
    let body = cached_request(MODEL, 2_000, "hi", false);
    let counted = post(&agent, &server.url("/v1/messages/count_tokens"), Some("k"), body.as_bytes());
    assert_eq!(counted.json(), json!({"input_tokens": 2_000 + HI_TOKENS}));
    // count_tokens wrote nothing: the first real request still writes the system block.
    let first = post(&agent, &server.url("/v1/messages"), Some("k"), body.as_bytes());
    assert_eq!(first.usage(), Usage::new(HI_TOKENS, 0, 2_000, 0, REPLY_TOKENS));

    let models = get(&agent, &server.url("/v1/models")).json();
    let ids: Vec<&str> =
        models["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert!(ids.contains(&MODEL) && ids.contains(&"claude-opus-4-8"), "{ids:?}");
    assert_eq!(models["has_more"], false);
    let one = get(&agent, &server.url("/v1/models/claude-opus-4-8")).json();
    assert_eq!(
        (one["type"].as_str(), one["display_name"].as_str()),
        (Some("model"), Some("Claude Opus 4.8"))
    );
    // An id that is not UTF-8 once decoded names no model: a 404 in the API's shape.
    let bad = get(&agent, &server.url("/v1/models/%ff"));
    assert_eq!((bad.status, bad.content_type.as_deref()), (404, Some("application/json")));
    assert_eq!(bad.json()["error"], json!({"type": "not_found_error", "message": "model: %ff"}));
    let head = agent.head(&server.url("/")).call().unwrap();
    assert_eq!(head.status().as_u16(), 200);

    let stats = get(&agent, &server.url("/forkcache/stats")).json();
    assert_eq!(stats["count_tokens_requests"], 1);
    let k = &stats["workspaces"][key_fingerprint("k")];
    assert_eq!(k["requests"], 1);
    assert_eq!(k["usage"]["cache_creation_input_tokens"], 2_000);
    // 7×3,000 + 2,000×3,750 + 12×15,000 = 7,701,000 nano-dollars.
    assert_eq!(k["cost_nanousd"], 7_701_000);
    assert_eq!(stats["totals"]["requests"], 1);
    assert_eq!(stats["cache"]["writes"], 1);
}

/// The library's `count_tokens` on the bytes counts what the route counts, and writes nothing
/// either: the first request after it still writes the system block.
#[test]
fn the_endpoints_count_tokens_counts_as_the_route_and_writes_nothing() {
    let mut endpoint = MockEndpoint::new(EndpointConfig::default(), PriceTable::builtin()).unwrap();
    let body = cached_request(MODEL, 2_000, "hi", false);
    assert_eq!(endpoint.count_tokens(body.as_bytes()), Ok(2_000 + HI_TOKENS));
    let first = endpoint.handle(Call::new(body.as_bytes(), SimTime(0))).unwrap();
    let usage = first.record.usage;
    assert_eq!((usage.input_tokens, usage.cache_creation_input_tokens), (HI_TOKENS, 2_000));
    let refused = endpoint.count_tokens(br#"{"model": "claude-sonnet-4-6"}"#).unwrap_err();
    assert_eq!(refused.kind, ErrorKind::InvalidRequest, "{refused:?}");
}

#[test]
fn rejected_request_is_counted_against_its_keys_workspace() {
    let server = Running::default_server();
    let agent = client();
    let answer = post(&agent, &server.url("/v1/messages"), Some("team-a"), br#"{"model":"m"}"#);
    assert_eq!(answer.status, 400);
    assert_eq!(ErrorKind::from_status(answer.status), ErrorKind::InvalidRequest);
    let summary = server.stop();
    assert_eq!(summary.stats.workspaces[&key_fingerprint("team-a")].rejected, 1);
}

/// A fresh path under the target directory's temp area.
pub fn tempfile(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join("forkcache-tests");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(format!("{name}-{}-{:?}.jsonl", std::process::id(), std::thread::current().id()))
}

#[test]
fn a_client_stalled_mid_request_does_not_hold_up_shutdown() {
    let config = ServeConfig { shutdown_grace_ms: 300, ..ServeConfig::default() };
    let server = Running::start(config, EndpointConfig::default());
    // Announces 1,000 bytes, sends 10, and never sends the rest.
    let mut stalled = std::net::TcpStream::connect(server.addr).unwrap();
    std::io::Write::write_all(
        &mut stalled,
        b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-length: 1000\r\n\r\n{\"model\":",
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let stopping = Instant::now();
    let summary = server.stop();
    assert!(stopping.elapsed() < Duration::from_secs(5), "stopped after {:?}", stopping.elapsed());
    assert_eq!(summary.stats.totals().requests, 0);
}
