//! Issue 12's regressions, one test per numbered item (named `itemN_…`): what an attacker or a
//! careless user could do to the CLI and the server, and the clear error or result each now gets.

use std::io::Write as _;
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

use forkcache_engine::billing::{PriceTable, Usage};
use forkcache_engine::clock::SimTime;
use forkcache_engine::endpoint::{Call, EndpointConfig, MockEndpoint};
use forkcache_ingest::replay::{ReplayConfig, ReplayError, replay};
use forkcache_ingest::trace::key_fingerprint;
use forkcache_net::serve::ServeConfig;

use crate::serve::tempfile;
use crate::serve_harness::{Running, cached_request, client, post, post_with_headers};

const SONNET: &str = "claude-sonnet-4-6";

fn forkcache(args: &[&str], stdin: &[u8]) -> Output {
    crate::support::run_binary(args, stdin)
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// One raw request body line: a 2,000-token cached system block, which a second identical
/// request on a warm cache reads.
fn body_line() -> String {
    cached_request(SONNET, 2_000, "hi", false)
}

// ---- item 5: a trace appended to by several server runs ----

#[test]
fn item5_each_serve_run_starts_a_session_and_replay_reproduces_every_run() {
    let trace = tempfile("item5");
    let _ = std::fs::remove_file(&trace);
    let agent = client();
    let body = body_line();
    let mut returned: Vec<Usage> = Vec::new();
    for run in 0..2 {
        let server = Running::start(
            ServeConfig { trace: Some(trace.clone()), ..ServeConfig::default() },
            EndpointConfig::default(),
        );
        let url = server.url("/v1/messages");
        returned.push(post(&agent, &url, Some("tenant"), body.as_bytes()).usage());
        returned.push(post(&agent, &url, Some("tenant"), body.as_bytes()).usage());
        server.stop();
        if run == 0 {
            // A crash mid-line: the next run must not glue its marker onto this fragment.
            let mut file = std::fs::OpenOptions::new().append(true).open(&trace).unwrap();
            file.write_all(br#"{"at_ms":12,"body":{"mod"#).unwrap();
        }
    }
    // Each run: a cold write of 2,000, then a read of it (7 uncached "hi" tokens each time).
    let cold = Usage::new(7, 0, 2_000, 0, returned[0].output_tokens);
    let warm = Usage::new(7, 2_000, 0, 0, returned[1].output_tokens);
    assert_eq!(returned, [cold, warm, cold, warm]);

    let bytes = std::fs::read(&trace).unwrap();
    let text = String::from_utf8(bytes.clone()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2 * 3 + 1, "marker + 2 requests per run, and the torn fragment alone");
    assert!(lines[0].starts_with(r#"{"forkcache_session":{"started":""#), "{}", lines[0]);
    assert_eq!(lines[3], r#"{"at_ms":12,"body":{"mod"#);
    assert!(lines[4].starts_with(r#"{"forkcache_session":"#), "{}", lines[4]);
    assert!(!text.contains(r#""api_key""#) && !text.contains("tenant"), "no key in the trace: {text}");
    assert!(text.contains(&key_fingerprint("tenant")));

    let report = replay(&ReplayConfig::default(), PriceTable::builtin(), &bytes).unwrap();
    assert_eq!(report.sessions, 2);
    let replayed: Vec<Usage> = report.records.iter().map(|r| r.result.as_ref().unwrap().usage).collect();
    assert_eq!(replayed, returned, "each run replays on its own cache and clock");
    assert_eq!(report.unreadable.len(), 1);
    assert_eq!(report.unreadable[0].line, 4);
    let _ = std::fs::remove_file(trace);
}

// ---- item 6: a trace torn inside a UTF-8 character ----

#[test]
fn item6_a_trace_cut_inside_a_utf8_character_replays_every_whole_line() {
    let mut trace = format!("{}\n", body_line()).into_bytes();
    trace.extend_from_slice(
        br#"{"model":"claude-sonnet-4-6","max_tokens":1,"messages":[{"role":"user","content":"caf"#,
    );
    trace.push(0xc3); // the first byte of "é", the second never written
    let output = forkcache(&["replay", "-", "--json"], &trace);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let report: Value = serde_json::from_slice(&output.stdout).expect("one JSON document");
    assert_eq!(report["requests"].as_array().map(Vec::len), Some(1));
    assert_eq!(report["requests"][0]["usage"]["cache_creation_input_tokens"], 2_000);
    assert_eq!(report["unreadable"][0]["line"], 2);
    assert!(stderr(&output).contains("line 2: not UTF-8"), "{}", stderr(&output));
}

// ---- item 8: replay's exit codes ----

#[test]
fn item8_replay_exits_0_for_rejected_requests_3_for_unreadable_lines_and_1_under_strict() {
    // A request the API would reject (no max_tokens) is a result: exit 0.
    let rejected = r#"{"model":"claude-sonnet-4-6","messages":[{"role":"user","content":"hi"}]}"#;
    let clean = format!("{}\n{rejected}\n", body_line());
    let output = forkcache(&["replay", "-", "--json"], clean.as_bytes());
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["requests"][1]["error"]["message"], "max_tokens: Field required");
    assert!(report.get("unreadable").is_none());

    // Not JSON, not an object: reported, the replay goes on, exit 3.
    let broken = format!("not json\n[1,2]\n{}\n", body_line());
    let output = forkcache(&["replay", "-"], broken.as_bytes());
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let table = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(table.contains("1 requests (0 rejected)"), "{table}");
    assert!(table.contains("unreadable line 1: not JSON"), "{table}");
    assert!(table.contains("unreadable line 2: expected a JSON object"), "{table}");
    // Under --json the table is not printed: stderr lists them instead.
    let output = forkcache(&["replay", "-", "--json"], broken.as_bytes());
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("skipped unreadable line 1: not JSON"), "{err}");
    assert!(err.contains("skipped unreadable line 2: expected a JSON object"), "{err}");

    // --strict stops at the first: exit 1, nothing on stdout, the line named.
    let output = forkcache(&["replay", "-", "--strict"], broken.as_bytes());
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty());
    assert!(stderr(&output).contains("-: line 1: not JSON"), "{}", stderr(&output));
    let strict = ReplayConfig { strict: true, ..ReplayConfig::default() };
    let stopped = replay(&strict, PriceTable::builtin(), broken.as_bytes());
    assert!(matches!(stopped, Err(ReplayError::Unreadable(line)) if line.line == 1));
}

// ---- item 1: deep JSON ----

/// A request whose one user block nests `depth` arrays inside a member.
fn deep_request(depth: usize) -> String {
    let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    format!(
        r#"{{"model":"{SONNET}","max_tokens":1,"messages":[{{"role":"user","content":[{{"type":"text","text":"x","extra":{nested}}}]}}]}}"#
    )
}

#[test]
fn item1_deeply_nested_blocks_get_a_400_from_serve_and_a_rejected_line_from_replay() {
    let server = Running::default_server();
    let agent = client();
    let url = server.url("/v1/messages");
    for depth in [127, 128, 200, 100_000] {
        let answer = post(&agent, &url, Some("deep"), deep_request(depth).as_bytes());
        assert_eq!(answer.status, 400, "depth {depth}: {}", answer.body);
        assert_eq!(answer.error().0, "invalid_request_error", "depth {depth}");
    }
    // The connection and the server are still fine.
    assert_eq!(post(&agent, &url, Some("deep"), body_line().as_bytes()).status, 200);
    server.stop();

    let trace: String = [127, 200, 100_000].iter().map(|&depth| deep_request(depth) + "\n").collect();
    let output = forkcache(&["replay", "-", "--json"], trace.as_bytes());
    assert_eq!(output.status.code(), Some(0), "rejected requests are results: {}", stderr(&output));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let requests = report["requests"].as_array().unwrap();
    assert_eq!(requests.len(), 3);
    for request in requests {
        assert_eq!(request["error"]["type"], "invalid_request_error", "{request}");
    }
}

// ---- item 3: sums near 2^64 ----

#[test]
fn item3_sizes_near_2_pow_64_are_input_errors_naming_the_line_never_wrapped_sums() {
    let huge = u64::MAX;
    let declared = format!(
        r#"{{"model":"{SONNET}","max_tokens":1,"messages":[{{"role":"user","content":[{{"type":"text","text":"x","forkcache_tokens":{huge}}}]}}]}}"#
    );
    let logged_output = format!(r#"{{"at_ms":5,"usage":{{"output_tokens":{huge}}},"body":{}}}"#, body_line());
    let trace = format!("{declared}\n{logged_output}\n{}\n", body_line());
    let report = replay(&ReplayConfig::default(), PriceTable::builtin(), &trace).unwrap();
    // Line 1: a request the API would refuse, naming the field.
    let error = report.records[0].result.as_ref().unwrap_err();
    assert_eq!(
        error.message,
        "messages.0.content.0.forkcache_tokens: Input should be less than or equal to 1000000000"
    );
    // Line 2: a logged usage no response can have: the line is unreadable, named.
    assert_eq!(report.unreadable.len(), 1);
    assert_eq!(report.unreadable[0].line, 2);
    assert!(report.unreadable[0].message.contains("usage.output_tokens"), "{}", report.unreadable[0].message);
    // Line 3 is priced normally.
    assert_eq!(report.totals.requests, 1);

    // A total already near 2^64 refuses the next record instead of wrapping.
    let record = report.records[1].result.as_ref().unwrap();
    let mut totals = report.totals.clone();
    totals.usage.cache_creation_input_tokens = u64::MAX - 1;
    let before = totals.clone();
    assert!(!totals.checked_add(record), "2,000 more tokens would pass 2^64");
    assert_eq!(totals, before, "nothing was added");
    let mut cost_totals = report.totals.clone();
    cost_totals.cost.output_nanousd = u64::MAX - 10;
    assert!(!cost_totals.checked_add(record), "the total cost would pass 2^64");
}

// ---- item 2: scenario and sweep sizes ----

/// `forkcache run -` on `scenario`: the exit code and standard error.
fn run_scenario(scenario: &str) -> (Option<i32>, String) {
    let output = forkcache(&["run", "-", "--json"], scenario.as_bytes());
    (output.status.code(), stderr(&output))
}

#[test]
fn item2_scenario_and_sweep_sizes_past_their_caps_are_refused_naming_the_field() {
    let cases = [
        (
            r#"{"name":"x","history":{"generate":{"tool_calls":[0,4000000000]}},"timeline":[{"turn":{}}]}"#,
            "history.generate.tool_calls: expected at most 1000, got 4000000000",
        ),
        (
            r#"{"name":"x","timeline":[{"turn":{"count":4000000000}}]}"#,
            "timeline[0].turn.count: expected at most 100000",
        ),
        (
            r#"{"name":"x","agent":{"system":[{"kind":"main","tokens":18446744073709551615}]},"timeline":[{"turn":{}}]}"#,
            "agent.system[0].tokens: expected at most 1000000000",
        ),
        (
            r#"{"name":"x","timeline":[{"fork":{"count":4096,"child_turns":100000}}]}"#,
            "timeline: plans 409600001 requests; expected at most 1000000",
        ),
        (
            r#"{"name":"x","timeline":[{"fork":{"count":2,"placeholder_tokens":[1,18446744073709551615]}}]}"#,
            "timeline[0].fork.placeholder_tokens[1]: expected at most 1000000000",
        ),
        (
            r#"{"name":"x","timeline":[{"idle":{"ms":18446744073709551615}}]}"#,
            "timeline[0].idle.ms: expected at most",
        ),
        // The runtime events too.
        (
            r#"{"name":"x","timeline":[{"task":{"rounds":4000000000}}]}"#,
            "timeline[0].task.rounds: expected at most 100000",
        ),
        (
            r#"{"name":"x","timeline":[{"team":{"size":2,"messages":4000000000}}]}"#,
            "timeline[0].team.messages: expected at most 1000,",
        ),
    ];
    for (scenario, expected) in cases {
        let started = std::time::Instant::now();
        let (code, err) = run_scenario(scenario);
        assert_ne!(code, Some(0), "{scenario}");
        assert_ne!(code, Some(101), "a panic: {err}");
        assert!(err.contains(expected), "{scenario}\n{err}");
        assert!(started.elapsed() < std::time::Duration::from_secs(30), "refused before running: {scenario}");
    }
    // A sweep's base scenario is held to the same caps.
    let sweep = r#"{"scenario":{"history":{"generate":{"tool_calls":[0,4000000000]}}}}"#;
    let output = forkcache(&["sweep", "-"], sweep.as_bytes());
    assert_ne!(output.status.code(), Some(0));
    assert!(stderr(&output).contains("tool_calls: expected at most 1000"), "{}", stderr(&output));
}

#[test]
fn item8_run_of_a_scenario_without_a_timeline_is_an_error() {
    let (code, err) = run_scenario(r#"{"name":"empty"}"#);
    assert_ne!(code, Some(0));
    assert!(err.contains("timeline: expected at least one event"), "{err}");
}

// ---- item 7: a body that is not UTF-8 ----

#[test]
fn item7_a_body_with_invalid_utf8_gets_a_400_and_the_trace_records_the_rejection_not_altered_bytes() {
    let trace = tempfile("item7");
    let _ = std::fs::remove_file(&trace);
    let server = Running::start(
        ServeConfig { trace: Some(trace.clone()), ..ServeConfig::default() },
        EndpointConfig::default(),
    );
    let mut body = body_line().into_bytes();
    let at = body.windows(2).position(|pair| pair == b"hi").unwrap();
    body[at] = 0xff; // "hi" becomes "\xffi"
    let answer = post(&client(), &server.url("/v1/messages"), Some("k"), &body);
    assert_eq!(answer.status, 400);
    let (kind, message) = answer.error();
    assert_eq!(kind, "invalid_request_error");
    assert!(message.starts_with("request body is not valid UTF-8"), "{message}");
    server.stop();

    let text = std::fs::read_to_string(&trace).expect("the trace stays UTF-8");
    assert!(!text.contains('\u{fffd}'), "no replacement characters: {text}");
    let report = replay(&ReplayConfig::default(), PriceTable::builtin(), &text).unwrap();
    assert_eq!((report.totals.requests, report.totals.rejected), (0, 1), "replayed as the rejection");
    let error = report.records[0].result.as_ref().unwrap_err();
    assert_eq!(error.message, message);
    let _ = std::fs::remove_file(trace);
}

#[test]
fn item5_a_rejected_request_is_traced_with_the_betas_it_named() {
    let trace = tempfile("item5_rejected_betas");
    let _ = std::fs::remove_file(&trace);
    let server = Running::start(
        ServeConfig { trace: Some(trace.clone()), ..ServeConfig::default() },
        EndpointConfig::default(),
    );
    let agent = client();
    let url = server.url("/v1/messages");
    let headers = [("x-api-key", "k"), ("anthropic-beta", "context-management-2025-06-27, b-beta")];
    // Turned away at the edge (not UTF-8: the error is logged), and by the endpoint (no
    // messages: replay finds the error in the body).
    let mut not_utf8 = body_line().into_bytes();
    let at = not_utf8.windows(2).position(|pair| pair == b"hi").unwrap();
    not_utf8[at] = 0xff;
    assert_eq!(post_with_headers(&agent, &url, &headers, &not_utf8).status, 400);
    let no_messages = format!(r#"{{"model":"{SONNET}","max_tokens":5,"messages":[]}}"#);
    assert_eq!(post_with_headers(&agent, &url, &headers, no_messages.as_bytes()).status, 400);
    server.stop();
    let text = std::fs::read_to_string(&trace).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .filter(|line: &Value| line.get("body").is_some())
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    for line in &lines {
        assert_eq!(line["betas"], serde_json::json!(["context-management-2025-06-27", "b-beta"]), "{line}");
    }
    let _ = std::fs::remove_file(trace);
}

// ---- item 9: slow and idle clients ----

fn limited_server(header_ms: u64, body_ms: u64, idle_ms: u64, max_connections: usize) -> Running {
    let config = ServeConfig {
        header_timeout_ms: header_ms,
        body_timeout_ms: body_ms,
        idle_timeout_ms: idle_ms,
        max_connections,
        shutdown_grace_ms: 200,
        ..ServeConfig::default()
    };
    Running::start(config, EndpointConfig::default())
}

/// Everything the server sends until it closes the connection (or 10 s pass: a hang).
fn read_until_closed(stream: &mut std::net::TcpStream) -> (String, std::time::Duration) {
    use std::io::Read as _;
    let started = std::time::Instant::now();
    stream.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    let mut received = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => received.extend_from_slice(&chunk[..n]),
            Err(err) if err.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(err) => panic!("no close within 10 s ({err}); got {}", String::from_utf8_lossy(&received)),
        }
    }
    (String::from_utf8_lossy(&received).into_owned(), started.elapsed())
}

#[test]
fn item9_half_sent_headers_are_closed_after_the_header_timeout_while_others_are_served() {
    let server = limited_server(300, 10_000, 10_000, 64);
    let mut slow = std::net::TcpStream::connect(server.addr).unwrap();
    slow.write_all(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\n").unwrap();
    // Meanwhile a normal client is served.
    assert_eq!(post(&client(), &server.url("/v1/messages"), Some("k"), body_line().as_bytes()).status, 200);
    let (_, waited) = read_until_closed(&mut slow);
    assert!(waited < std::time::Duration::from_secs(5), "closed after {waited:?}");
    let mut silent = std::net::TcpStream::connect(server.addr).unwrap();
    let (sent, _) = read_until_closed(&mut silent);
    assert!(sent.is_empty() || sent.starts_with("HTTP/1.1 408"), "{sent}");
    server.stop();
}

/// One response on a kept-alive connection, read by its `content-length`.
fn read_response(stream: &mut std::net::TcpStream) -> String {
    use std::io::Read as _;
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut received = Vec::new();
    let mut byte = [0u8; 1];
    while !received.ends_with(b"\r\n\r\n") {
        assert_eq!(
            stream.read(&mut byte).unwrap(),
            1,
            "closed mid-head: {}",
            String::from_utf8_lossy(&received)
        );
        received.push(byte[0]);
    }
    let head = String::from_utf8(received).unwrap();
    let length: usize = head
        .lines()
        .find_map(|line| line.to_ascii_lowercase().strip_prefix("content-length: ").map(str::to_string))
        .expect("a content-length")
        .parse()
        .unwrap();
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).unwrap();
    head + &String::from_utf8(body).unwrap()
}

/// The header timeout runs from the end of each response, not from the connection's first
/// wait: a connection's heads share one alarm, which rings early for a later head (here 400 ms
/// after the first wait began, about 150 ms into the third) and must then wait on, closing the
/// connection only once the third head is a whole timeout late.
#[test]
fn item9_each_head_on_a_kept_alive_connection_gets_the_whole_header_timeout() {
    let server = limited_server(400, 10_000, 10_000, 64);
    let mut stream = std::net::TcpStream::connect(server.addr).unwrap();
    stream.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    assert!(read_response(&mut stream).starts_with("HTTP/1.1 200"));
    std::thread::sleep(Duration::from_millis(250));
    stream.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    assert!(read_response(&mut stream).starts_with("HTTP/1.1 200"));
    let answered = std::time::Instant::now();
    stream.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").unwrap();
    let (sent, _) = read_until_closed(&mut stream);
    let waited = answered.elapsed();
    assert!(sent.is_empty() || sent.starts_with("HTTP/1.1 408"), "{sent}");
    // 400 ms less the time the last response took to arrive; the first wait's alarm would have
    // closed it about 150 ms in, the idle timeout after 10 s.
    assert!(waited >= Duration::from_millis(300), "closed {waited:?} after the last response");
    assert!(waited < Duration::from_secs(5), "closed {waited:?} after the last response");
    server.stop();
}

#[test]
fn item9_a_half_sent_body_gets_a_408_after_the_body_timeout() {
    let server = limited_server(10_000, 300, 10_000, 64);
    let mut slow = std::net::TcpStream::connect(server.addr).unwrap();
    slow.write_all(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"model\":").unwrap();
    let (sent, waited) = read_until_closed(&mut slow);
    assert!(sent.starts_with("HTTP/1.1 408"), "{sent}");
    assert!(sent.contains(r#""type":"timeout_error""#), "{sent}");
    assert!(waited < std::time::Duration::from_secs(5), "{waited:?}");
    assert_eq!(post(&client(), &server.url("/v1/messages"), Some("k"), body_line().as_bytes()).status, 200);
    server.stop();
}

#[test]
fn item9_a_late_body_is_traced_as_a_408_rejection_counted_in_the_stats_and_replayed_as_it() {
    let trace = tempfile("item9_late_body");
    let _ = std::fs::remove_file(&trace);
    let config = ServeConfig {
        body_timeout_ms: 300,
        trace: Some(trace.clone()),
        shutdown_grace_ms: 200,
        ..ServeConfig::default()
    };
    let server = Running::start(config, EndpointConfig::default());
    let mut slow = std::net::TcpStream::connect(server.addr).unwrap();
    slow.write_all(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: sk-late\r\nContent-Length: 1000\r\n\r\n{\"model\":").unwrap();
    let (sent, _) = read_until_closed(&mut slow);
    assert!(sent.starts_with("HTTP/1.1 408"), "{sent}");
    let body = &sent[sent.find("\r\n\r\n").unwrap() + 4..];
    let error: Value = serde_json::from_str(body).unwrap();
    assert_eq!(error["type"], "error", "the API's error shape: {body}");
    assert_eq!(error["error"]["type"], "timeout_error");
    assert_eq!(error["error"]["message"], "request body not received within 300 ms");
    let summary = server.stop();
    // Counted as one rejected Messages request, in the key's workspace (its fingerprint).
    let workspace = key_fingerprint("sk-late");
    let totals = &summary.stats.workspaces[&workspace];
    assert_eq!((totals.requests, totals.rejected), (0, 1));
    // Traced as a rejection carrying its error and none of the partial bytes.
    let text = std::fs::read_to_string(&trace).unwrap();
    let line = text.lines().find(|line| line.contains(r#""error""#)).expect("a rejection line");
    let logged: Value = serde_json::from_str(line).unwrap();
    assert_eq!(logged["error"]["status"], 408, "{line}");
    assert_eq!(logged["error"]["type"], "timeout_error");
    assert_eq!(logged["body"], "", "{line}");
    let report = replay(&ReplayConfig::default(), PriceTable::builtin(), &text).unwrap();
    assert_eq!((report.totals.requests, report.totals.rejected), (0, 1));
    let replayed = report.records[0].result.as_ref().unwrap_err();
    assert_eq!(replayed.kind.status(), 408);
    let _ = std::fs::remove_file(trace);
}

#[test]
fn item9_a_kept_alive_connection_left_idle_is_closed_after_the_idle_timeout() {
    let server = limited_server(10_000, 10_000, 300, 64);
    let mut stream = std::net::TcpStream::connect(server.addr).unwrap();
    stream.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let (sent, waited) = read_until_closed(&mut stream);
    assert!(sent.starts_with("HTTP/1.1 200"), "{sent}");
    assert!(waited < std::time::Duration::from_secs(5), "an idle connection lives on: {waited:?}");
    server.stop();
}

#[test]
fn item9_connections_past_max_connections_wait_for_a_free_slot_and_are_then_served() {
    let server = limited_server(400, 10_000, 10_000, 2);
    // Two sockets that never send a byte hold both slots until the header timeout frees them.
    let idle: Vec<std::net::TcpStream> =
        (0..2).map(|_| std::net::TcpStream::connect(server.addr).unwrap()).collect();
    std::thread::sleep(std::time::Duration::from_millis(50));
    let started = std::time::Instant::now();
    let answer = post(&client(), &server.url("/v1/messages"), Some("k"), body_line().as_bytes());
    assert_eq!(answer.status, 200);
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(250),
        "served before a slot was freed: the cap did not hold ({:?})",
        started.elapsed()
    );
    drop(idle);
    server.stop();
}

// ---- item 11: tenancy ----

#[test]
fn item11_stats_need_a_key_and_show_only_its_workspace_and_no_key_is_ever_shown() {
    let server = Running::start(
        ServeConfig { require_key: true, ..ServeConfig::default() },
        EndpointConfig::default(),
    );
    let agent = client();
    let url = server.url("/v1/messages");
    assert_eq!(post(&agent, &url, Some("sk-alice"), body_line().as_bytes()).status, 200);
    assert_eq!(post(&agent, &url, Some("sk-bob"), body_line().as_bytes()).status, 200);
    let stats = |key: Option<&str>| {
        let mut request = agent.get(server.url("/forkcache/stats"));
        if let Some(key) = key {
            request = request.header("x-api-key", key);
        }
        let mut response = request.call().unwrap();
        (response.status().as_u16(), response.body_mut().read_to_string().unwrap())
    };
    let (status, body) = stats(None);
    assert_eq!(status, 401, "{body}");
    let (status, body) = stats(Some("sk-alice"));
    assert_eq!(status, 200);
    let view: Value = serde_json::from_str(&body).unwrap();
    let workspaces: Vec<&String> = view["workspaces"].as_object().unwrap().keys().collect();
    assert_eq!(workspaces, [&key_fingerprint("sk-alice")]);
    assert_eq!(view["totals"]["requests"], 1, "bob's request is not in alice's totals");
    assert!(view.get("cache").is_none(), "server-wide counters are not a tenant's: {body}");
    assert!(!body.contains("sk-") && !body.contains(&key_fingerprint("sk-bob")), "{body}");
    let summary = server.stop();
    assert!(summary.to_json().contains(&key_fingerprint("sk-bob")));
    assert!(!summary.to_json().contains("sk-") && !summary.to_table().contains("sk-"));
}

#[test]
fn item11_the_key_default_does_not_reach_the_anonymous_workspace() {
    let server = Running::default_server();
    let agent = client();
    let url = server.url("/v1/messages");
    let anonymous = post(&agent, &url, None, body_line().as_bytes()).usage();
    let keyed = post(&agent, &url, Some("default"), body_line().as_bytes()).usage();
    assert_eq!(anonymous.cache_creation_input_tokens, 2_000);
    assert_eq!(
        keyed.cache_creation_input_tokens, 2_000,
        "the key `default` must not read the anonymous entry"
    );
    let summary = server.stop();
    let names: Vec<&String> = summary.stats.workspaces.keys().collect();
    assert_eq!(names, [&"default".to_string(), &key_fingerprint("default")]);
}

// ---- item 10: validation as the API does it ----

/// Bodies shaped as the real clients send them (reference `real-clients.md`: Claude Code's main
/// loop and title call with their top-level keys in order, the Python and TypeScript SDKs'
/// create, stream and beta calls), each short of the real prompt texts.
fn real_client_bodies() -> Vec<(&'static str, String)> {
    let system = r#"[{"type":"text","text":"x-anthropic-billing-header: cc_version=2.1.197.abc; cc_entrypoint=sdk-cli;"},{"type":"text","text":"You are a Claude agent, built on Anthropic's Claude Agent SDK.","cache_control":{"type":"ephemeral"}},{"type":"text","text":"main prompt","cache_control":{"type":"ephemeral"}}]"#;
    let tools = r#"[{"name":"Agent","description":"Launch a sub-agent","input_schema":{"type":"object","properties":{"prompt":{"type":"string"}},"required":["prompt"]}},{"name":"Read","description":"Read a file","input_schema":{"type":"object","properties":{"file_path":{"type":"string"}}},"defer_loading":true}]"#;
    let messages = r#"[{"role":"user","content":[{"type":"text","text":"<system-reminder>Today's date is 2026-11-22</system-reminder>"},{"type":"text","text":"fork two sub-agents","cache_control":{"type":"ephemeral"}}]},{"role":"system","content":"Available agent types for the Agent tool"}]"#;
    let metadata = r#"{"user_id":"{\"device_id\":\"d\",\"account_uuid\":\"\",\"session_id\":\"s\"}"}"#;
    vec![
        (
            "claude-code main loop",
            format!(
                r#"{{"model":"claude-opus-4-8","messages":{messages},"system":{system},"tools":{tools},"metadata":{metadata},"max_tokens":64000,"thinking":{{"type":"adaptive"}},"context_management":{{"edits":[{{"type":"clear_thinking_20251015","keep":"all"}}]}},"output_config":{{"effort":"high"}},"stream":true}}"#
            ),
        ),
        (
            "claude-code title",
            format!(
                r#"{{"model":"claude-opus-4-8","messages":[{{"role":"user","content":"<session>\nhi\n</session>"}}],"system":{system},"tools":[],"metadata":{metadata},"max_tokens":32000,"thinking":{{"type":"disabled"}},"output_config":{{"format":{{"type":"json_schema","schema":{{"type":"object","properties":{{"title":{{"type":"string"}}}}}}}}}},"stream":true}}"#
            ),
        ),
        (
            "python sdk create",
            r#"{"max_tokens":256,"messages":[{"role":"user","content":"hi"}],"model":"claude-sonnet-4-6","system":"You are terse.","stream":false}"#.to_string(),
        ),
        (
            "typescript sdk tools",
            format!(
                r#"{{"model":"claude-sonnet-4-6","max_tokens":256,"tools":{tools},"tool_choice":{{"type":"auto"}},"messages":[{{"role":"user","content":"read a file"}}],"temperature":0.5,"top_p":0.9,"top_k":5,"stop_sequences":["END"],"service_tier":"auto","inference_geo":"us","metadata":{{"user_id":"u"}}}}"#
            ),
        ),
        (
            "sdk beta fields",
            r#"{"model":"claude-opus-5-5","max_tokens":0,"messages":[{"role":"user","content":"warm"}],"cache_control":{"type":"ephemeral"},"speed":"fast","diagnostics":{"cache":true},"container":"c","mcp_servers":[]}"#.to_string(),
        ),
    ]
}

#[test]
fn item10_every_real_client_body_passes_strict_and_bad_bodies_get_the_apis_errors() {
    let server =
        Running::start(ServeConfig { strict: true, ..ServeConfig::default() }, EndpointConfig::default());
    let agent = client();
    let url = server.url("/v1/messages");
    for (client_name, body) in real_client_bodies() {
        let answer = post(&agent, &url, Some("k"), body.as_bytes());
        assert_eq!(answer.status, 200, "{client_name}: {}", answer.body);
    }
    let base = r#""model":"claude-sonnet-4-6","max_tokens":5"#;
    let cases = [
        (format!(r#"{{{base},"messages":[]}}"#), 400, "messages: at least one message is required"),
        (
            format!(r#"{{{base},"messages":[{{"role":"user","content":[]}}]}}"#),
            400,
            "messages.0: all messages must have non-empty content except for the optional final assistant message",
        ),
        (
            format!(r#"{{{base},"messages":[{{"role":"user","content":"hi"}}],"temperature":"hot"}}"#),
            400,
            "temperature: invalid type: string \"hot\", expected f64",
        ),
        (
            format!(r#"{{{base},"messages":[{{"role":"user","content":"hi"}}],"bogus":1}}"#),
            400,
            "bogus: Extra inputs are not permitted",
        ),
        (
            r#"{"model":"claude-sonnet-4-6","messages":[{"role":"user","content":"hi"}]}"#.to_string(),
            400,
            "max_tokens: Field required",
        ),
    ];
    for (body, status, message) in cases {
        let answer = post(&agent, &url, Some("k"), body.as_bytes());
        assert_eq!((answer.status, answer.error().1.as_str()), (status, message), "{body}");
    }
    // max_tokens 0 stays the documented pre-warm.
    let prewarm =
        r#"{"model":"claude-sonnet-4-6","max_tokens":0,"messages":[{"role":"user","content":"hi"}]}"#;
    assert_eq!(post(&agent, &url, Some("k"), prewarm.as_bytes()).status, 200);

    // Methods and probes.
    let status = |method: &str, path: &str| {
        let request = ureq::http::Request::builder().method(method).uri(server.url(path)).body(()).unwrap();
        agent.run(request).unwrap().status().as_u16()
    };
    assert_eq!(status("HEAD", "/"), 200);
    assert_eq!(status("HEAD", "/api/hello"), 200);
    assert_eq!(status("GET", "/v1/messages"), 405);
    assert_eq!(status("DELETE", "/v1/models"), 405);
    assert_eq!(status("GET", "/v2/nothing"), 404);
    server.stop();

    // Not strict: the unknown field is accepted and counted.
    let server = Running::default_server();
    let body = format!(r#"{{{base},"messages":[{{"role":"user","content":"hi"}}],"bogus":1}}"#);
    assert_eq!(post(&agent, &server.url("/v1/messages"), Some("k"), body.as_bytes()).status, 200);
    let summary = server.stop();
    assert_eq!(summary.stats.unknown_fields.get("bogus"), Some(&1));
}

// ---- item 4: past the context window ----

/// A request to `model` whose one user message holds `blocks` blocks declaring `each` tokens.
fn declared_context(model: &str, blocks: usize, each: u64) -> String {
    let block = format!(r#"{{"type":"text","text":"x","forkcache_tokens":{each}}}"#);
    let content = vec![block; blocks].join(",");
    format!(r#"{{"model":"{model}","max_tokens":5,"messages":[{{"role":"user","content":[{content}]}}]}}"#)
}

/// A request to `model` whose one user message is a string the tokenizer estimates at exactly
/// `tokens`: bytes4 counts the block `{"type":"text","text":"…"}`, 25 bytes around the text, at
/// ceil(bytes / 4); a text of 4 × `tokens` − 25 bytes makes it 4 × `tokens` bytes, `tokens` tokens.
fn estimated_context(model: &str, tokens: u64) -> String {
    let text = "a".repeat(4 * tokens as usize - 25);
    format!(r#"{{"model":"{model}","max_tokens":5,"messages":[{{"role":"user","content":"{text}"}}]}}"#)
}

#[test]
fn item4_a_prompt_just_past_the_context_window_is_priced_with_a_warning_in_replay_and_serve() {
    // Estimated sizes only (declared ones are exact: see the next tests). Sonnet 4.6's window is
    // 1,000,000 tokens (fixtures/pricing.json); the refusal starts past 1,000,000 × (100 + 30)
    // / 100 = 1,300,000. 99% = 990,000: priced, no warning; 101% = 1,010,000 and 129% =
    // 1,290,000: priced with a warning; 131% = 1,310,000: refused.
    let sizes = [990_000u64, 1_010_000, 1_290_000, 1_310_000];
    let trace: String = sizes.iter().map(|&tokens| estimated_context(SONNET, tokens) + "\n").collect();
    let output = forkcache(&["replay", "-", "--json"], trace.as_bytes());
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    let requests = json["requests"].as_array().unwrap();
    assert!(requests[0].get("warnings").is_none(), "99%: no warning: {}", requests[0]);
    for (index, tokens) in [(1, 1_010_000), (2, 1_290_000)] {
        assert!(requests[index]["usage"].is_object(), "priced: {}", requests[index]);
        let warnings = requests[index]["warnings"].as_array().unwrap();
        assert_eq!(
            warnings[0],
            format!(
                "prompt of {tokens} tokens is past the 1000000 token context window (an estimate: the API may refuse it)"
            )
        );
    }
    assert_eq!(requests[3]["error"]["message"], "prompt is too long: 1310000 tokens > 1000000 maximum");
    assert_eq!(json["totals"]["context_warnings"], 2);
    assert_eq!(
        (json["totals"]["requests"].as_u64(), json["totals"]["rejected"].as_u64()),
        (Some(3), Some(1))
    );

    // The server prices it too, counts the warning in the stats, and logs it.
    let server = Running::default_server();
    let url = server.url("/v1/messages");
    let agent = client();
    for &tokens in &sizes[..3] {
        assert_eq!(post(&agent, &url, Some("k"), estimated_context(SONNET, tokens).as_bytes()).status, 200);
    }
    let stats = crate::serve_harness::get(&agent, &server.url("/forkcache/stats")).json();
    assert_eq!(stats["totals"]["context_warnings"], 2, "{stats}");
    let summary = server.stop();
    assert_eq!(summary.stats.totals().context_warnings, 2);
}

#[test]
fn item3_a_run_whose_cost_sums_would_pass_2_64_is_an_input_error_naming_the_request() {
    // A price table whose Opus 4.6 row has no context window, so only the declared sizes bound
    // a prompt. Its 5-minute write is $6.25/MTok, 6,250 nano-dollars a token. A 20,000-block
    // history of 1e9 tokens each is 2e13 tokens: each request priced alone (the naive cost,
    // which writes its whole prompt) costs 2e13 × 6,250 = 1.25e17 nano-dollars and a little
    // more (the turns' own few thousand tokens). 2^64 = 18,446,744,073,709,551,616 holds 147 of
    // those (147 × 1.25e17 = 1.8375e19) but not 148 (1.85e19): the 148th request, index 147,
    // is the one named.
    let mut table: Value = serde_json::from_slice(&std::fs::read("fixtures/pricing.json").unwrap()).unwrap();
    let opus = table["models"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|row| row["ids"].as_array().unwrap().iter().any(|id| id == "claude-opus-4-6"))
        .unwrap();
    opus.as_object_mut().unwrap().remove("context_window");
    for (_, list) in opus.as_object_mut().unwrap().iter_mut().filter(|(_, v)| v.is_array()) {
        list.as_array_mut().unwrap().retain(|field| field != "context_window");
    }
    let prices = tempfile("item3_prices");
    std::fs::write(&prices, table.to_string()).unwrap();
    let block = r#"{"type":"text","text":"h","forkcache_tokens":1000000000}"#;
    let history = vec![block; 20_000].join(",");
    let scenario = format!(
        r#"{{"name":"huge","model":"claude-opus-4-6","history":{{"messages":[{{"role":"user","content":[{history}]}}]}},"timeline":[{{"turn":{{"count":200}}}}]}}"#
    );
    let prices_arg = prices.to_str().unwrap();
    let output = forkcache(&["run", "-", "--json", "--prices", prices_arg], scenario.as_bytes());
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(
        err.contains("request 147 (parent 148) was rejected: the run's token or cost totals would pass 2^64"),
        "{err}"
    );
    let _ = std::fs::remove_file(prices);
}

#[test]
fn item4_a_prompt_past_the_context_window_is_refused_as_the_api_does_never_priced() {
    // Sonnet 4.6: a 1,000,000-token window (fixtures/pricing.json). 15 blocks × 1e9 = 1.5e10.
    let huge = declared_context(SONNET, 15, 1_000_000_000);
    // 1,200,000 declared. This prompt was once priced with a warning, as if it were within the
    // 30% an estimate may be off by; a declared size is no estimate, and the API refuses a
    // prompt one token past the window (issue 12, item 4), so it is refused.
    let near = declared_context(SONNET, 1, 1_200_000);
    let over = declared_context(SONNET, 1, 1_400_000);
    let trace = format!("{huge}\n{near}\n{over}\n");
    let report = replay(&ReplayConfig::default(), PriceTable::builtin(), &trace).unwrap();
    // A declared block counts exactly what it declares.
    assert_eq!(
        report.records[0].result.as_ref().unwrap_err().message,
        "prompt is too long: 15000000000 tokens > 1000000 maximum"
    );
    assert_eq!(
        report.records[1].result.as_ref().unwrap_err().message,
        "prompt is too long: 1200000 tokens > 1000000 maximum"
    );
    assert_eq!(
        report.records[2].result.as_ref().unwrap_err().message,
        "prompt is too long: 1400000 tokens > 1000000 maximum"
    );
    assert_eq!(report.totals.rejected, 3);

    let server = Running::default_server();
    let answer = post(&client(), &server.url("/v1/messages"), Some("k"), huge.as_bytes());
    assert_eq!(
        (answer.status, answer.error().1.as_str()),
        (400, "prompt is too long: 15000000000 tokens > 1000000 maximum")
    );
    server.stop();

    // A scenario whose history is past the window stops with the request named.
    let scenario = r#"{"name":"big","history":{"messages":[{"role":"user","content":[{"type":"text","text":"h","forkcache_tokens":900000000}]}]},"timeline":[{"turn":{}}]}"#;
    let (code, err) = run_scenario(scenario);
    assert_ne!(code, Some(0));
    assert!(err.contains("prompt is too long:") && err.contains("> 1000000 maximum"), "{err}");
}

const HAIKU: &str = "claude-haiku-4-5";

#[test]
fn item4_declared_sizes_are_refused_one_token_past_the_window_with_no_margin() {
    // Haiku 4.5's window is 200,000 tokens (fixtures/pricing.json). Declared sizes are exact:
    // 200,000 is priced (all of it uncached input), 200,001 is refused as the API words it.
    let at_window = declared_context(HAIKU, 2, 100_000);
    let past = declared_context(HAIKU, 1, 200_001);
    let trace = format!("{at_window}\n{past}\n");
    let report = replay(&ReplayConfig::default(), PriceTable::builtin(), &trace).unwrap();
    let priced = report.records[0].result.as_ref().unwrap();
    assert_eq!(priced.usage.input_tokens, 200_000);
    assert_eq!(priced.context_warning, None);
    assert_eq!(
        report.records[1].result.as_ref().unwrap_err().message,
        "prompt is too long: 200001 tokens > 200000 maximum"
    );

    let server = Running::default_server();
    let agent = client();
    let url = server.url("/v1/messages");
    assert_eq!(post(&agent, &url, Some("k"), at_window.as_bytes()).status, 200);
    let answer = post(&agent, &url, Some("k"), past.as_bytes());
    assert_eq!(
        (answer.status, answer.error()),
        (
            400,
            (
                "invalid_request_error".to_string(),
                "prompt is too long: 200001 tokens > 200000 maximum".to_string()
            )
        )
    );
    server.stop();
}

#[test]
fn item4_in_a_prompt_of_declared_and_estimated_blocks_only_the_estimate_gets_the_margin() {
    // Haiku 4.5, window 200,000. A declared 150,000-token block, then a string the tokenizer
    // puts at E tokens (25 + 4E − 25 bytes, see `estimated_context`). The fewest tokens the
    // prompt can hold are 150,000 + E × 100 / 130. E = 65,000: 150,000 + 50,000 = 200,000, not
    // past the window: priced, warned (215,000 counted). E = 65,004: 150,000 + 50,003.1 >
    // 200,000: refused (215,004 counted).
    let mixed = |estimated: u64| {
        let text = "a".repeat(4 * estimated as usize - 25);
        format!(
            r#"{{"model":"{HAIKU}","max_tokens":5,"messages":[{{"role":"user","content":[{{"type":"text","text":"x","forkcache_tokens":150000}}]}},{{"role":"assistant","content":"ok"}},{{"role":"user","content":"{text}"}}]}}"#
        )
    };
    // The assistant's "ok" is one more estimated block: {"type":"text","text":"ok"}, 27 bytes,
    // 7 tokens. So E above is the user string's count plus 7: the strings are 64,993 and 64,997.
    let trace = format!("{}\n{}\n", mixed(64_993), mixed(64_997));
    let report = replay(&ReplayConfig::default(), PriceTable::builtin(), &trace).unwrap();
    let priced = report.records[0].result.as_ref().unwrap();
    assert_eq!(priced.usage.input_tokens, 215_000);
    assert_eq!(priced.context_warning.map(|w| (w.tokens, w.window)), Some((215_000, 200_000)));
    assert_eq!(
        report.records[1].result.as_ref().unwrap_err().message,
        "prompt is too long: 215004 tokens > 200000 maximum"
    );
}

#[test]
fn item10_unknown_models_get_a_404_and_max_tokens_past_the_models_output_a_400() {
    let server = Running::default_server();
    let agent = client();
    let url = server.url("/v1/messages");
    let body = |model: &str, max_tokens: u64| {
        format!(
            r#"{{"model":"{model}","max_tokens":{max_tokens},"messages":[{{"role":"user","content":"hi"}}]}}"#
        )
    };
    // Claude Code 2.1.330 sends claude-opus-5-5: in the table.
    assert_eq!(post(&agent, &url, Some("k"), body("claude-opus-5-5", 64_000).as_bytes()).status, 200);
    let answer = post(&agent, &url, Some("k"), body("claude-nope-9", 10).as_bytes());
    assert_eq!(
        (answer.status, answer.error()),
        (404, ("not_found_error".to_string(), "model: claude-nope-9".to_string()))
    );
    // Sonnet 4.6 writes at most 64,000 tokens.
    let answer = post(&agent, &url, Some("k"), body(SONNET, 64_001).as_bytes());
    assert_eq!(answer.status, 400);
    assert_eq!(
        answer.error().1,
        "max_tokens: 64001 > 64000, which is the maximum allowed number of output tokens for claude-sonnet-4-6"
    );
    assert_eq!(post(&agent, &url, Some("k"), body(SONNET, 64_000).as_bytes()).status, 200);
    assert_eq!(post(&agent, &url, Some("k"), body(SONNET, 0).as_bytes()).status, 200, "the pre-warm");
    server.stop();
    // The engine itself still simulates an unknown model (replay flags it unpriced).
    let report = replay(&ReplayConfig::default(), PriceTable::builtin(), &body("claude-nope-9", 10)).unwrap();
    assert!(report.records[0].result.is_ok());
}

// ---- "nothing recorded is lost": kill -9 under load ----

/// The usage of a complete 200 response, or `None` once the server is gone.
fn try_post(agent: &ureq::Agent, url: &str, key: &str, body: &[u8]) -> Option<Usage> {
    let request = agent.post(url).header("content-type", "application/json").header("x-api-key", key);
    let mut response = request.send(body).ok()?;
    if response.status() != 200 {
        return None;
    }
    let text = response.body_mut().read_to_string().ok()?;
    let message: Value = serde_json::from_str(&text).ok()?;
    serde_json::from_value(message["usage"].clone()).ok()
}

/// Clients that hammer a `forkcache serve --trace` process until it is killed.
const KILL_CLIENTS: usize = 8;

#[test]
fn kill_9_under_load_leaves_a_readable_trace_that_replays_to_every_response_sent() {
    use std::io::BufRead as _;
    let trace = tempfile("kill9");
    let _ = std::fs::remove_file(&trace);
    let mut child = Command::new(env!("CARGO_BIN_EXE_forkcache"))
        .args(["serve", "--addr", "127.0.0.1:0", "--quiet", "--trace"])
        .arg(&trace)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    let url = format!("{}/v1/messages", first.trim().strip_prefix("forkcache serve listening on ").unwrap());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let workers: Vec<_> = (0..KILL_CLIENTS)
        .map(|c| {
            let (url, stop) = (url.clone(), std::sync::Arc::clone(&stop));
            std::thread::spawn(move || {
                // Each client its own workspace, so its responses can be matched to the trace.
                let (agent, key) = (client(), format!("kill-{c}"));
                let mut received = Vec::new();
                for turn in 0.. {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        break;
                    }
                    let body =
                        cached_request(SONNET, 2_000 + turn, &format!("client {c} turn {turn}"), false);
                    // A response cut by the kill was not sent: it does not count.
                    let Some(usage) = try_post(&agent, &url, &key, body.as_bytes()) else { break };
                    received.push(usage);
                }
                (key, received)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1_500));
    child.kill().unwrap(); // SIGKILL: no shutdown, no flush beyond what was written
    child.wait().unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let received: Vec<(String, Vec<Usage>)> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    let sent: usize = received.iter().map(|(_, usages)| usages.len()).sum();
    assert!(sent > 50, "the load ran: {sent} responses");

    let bytes = std::fs::read(&trace).unwrap();
    let report = replay(&ReplayConfig::default(), PriceTable::builtin(), &bytes).unwrap();
    assert!(report.unreadable.len() <= 1, "at most the line being written is torn: {:?}", report.unreadable);
    let lost_or_unanswered = report.records.len() + report.unreadable.len() - sent;
    eprintln!(
        "kill -9 under load: {sent} responses sent, {} trace requests, {} torn, {lost_or_unanswered} in flight",
        report.records.len(),
        report.unreadable.len()
    );
    assert!(lost_or_unanswered <= KILL_CLIENTS, "only in-flight requests differ: {lost_or_unanswered}");
    for (key, usages) in &received {
        let workspace = key_fingerprint(key);
        let replayed: Vec<Usage> = report
            .records
            .iter()
            .filter_map(|r| r.result.as_ref().ok())
            .filter(|record| record.workspace == workspace)
            .map(|record| record.usage)
            .collect();
        assert!(replayed.len() >= usages.len() && replayed.len() <= usages.len() + 1, "{key}");
        assert_eq!(&replayed[..usages.len()], &usages[..], "{key}: replay equals every response sent");
    }
    let _ = std::fs::remove_file(trace);
}

#[test]
fn item11_capacity_is_per_workspace_so_one_tenant_cannot_evict_anothers_entries() {
    let mut endpoint = EndpointConfig::default();
    endpoint.cache.capacity_entries = 2;
    let server = Running::start(ServeConfig::default(), endpoint);
    let agent = client();
    let url = server.url("/v1/messages");
    // Alice caches one prefix (one entry).
    let alice = cached_request(SONNET, 2_000, "alice", false);
    assert_eq!(
        post(&agent, &url, Some("alice"), alice.as_bytes()).usage().cache_creation_input_tokens,
        2_000
    );
    // Mallory writes 10 different prefixes: 10 entries, far past a capacity of 2.
    for n in 0..10 {
        let noise = cached_request(SONNET, 2_000 + n, "noise", false);
        post(&agent, &url, Some("mallory"), noise.as_bytes());
    }
    // Alice's entry is still there.
    assert_eq!(post(&agent, &url, Some("alice"), alice.as_bytes()).usage().cache_read_input_tokens, 2_000);
    let summary = server.stop();
    assert_eq!(summary.cache.evictions, 8, "mallory evicted 8 of its own 10");
}

/// Prices `body` for `workspace` at `at_ms` and then, as the server does at every arrival,
/// drops the other workspaces gone idle; returns the usage and the workspaces dropped.
fn priced_then_retired(
    endpoint: &mut MockEndpoint,
    workspace: &str,
    body: &str,
    at_ms: u64,
) -> (Usage, Vec<String>) {
    let mut call = Call::new(body.as_bytes(), SimTime(at_ms));
    call.workspace = Some(workspace);
    let usage = endpoint.handle(call).unwrap().record.usage;
    (usage, endpoint.drop_idle_workspaces(SimTime(at_ms), Some(workspace)))
}

#[test]
fn item11_an_idle_workspace_is_dropped_at_the_next_request_after_its_last_entry_expires() {
    let mut endpoint = MockEndpoint::new(EndpointConfig::default(), PriceTable::builtin()).unwrap();
    // A 2,000-token system block marked 5m, then "hi" ({"type":"text","text":"hi"}, 27 bytes, 7
    // tokens): the first request writes 2,000 and leaves 7 uncached.
    let five_minutes = body_line();
    let one_hour = five_minutes.replace(r#"{"type":"ephemeral"}"#, r#"{"type":"ephemeral","ttl":"1h"}"#);
    assert_ne!(one_hour, five_minutes);
    let (alice, _) = priced_then_retired(&mut endpoint, "alice", &five_minutes, 0);
    assert_eq!((alice.cache_creation.ephemeral_5m_input_tokens, alice.input_tokens), (2_000, 7));
    let (carol, _) = priced_then_retired(&mut endpoint, "carol", &one_hour, 0);
    assert_eq!(carol.cache_creation.ephemeral_1h_input_tokens, 2_000);
    assert_eq!(endpoint.cache_stats().entries, 2);

    // Alice's entry expires at 0 + 300,000 ms. At 299,999 ms it is still readable: kept.
    let (_, dropped) = priced_then_retired(
        &mut endpoint,
        "bob",
        "{\"model\":\"claude-sonnet-4-6\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
        299_999,
    );
    assert!(dropped.is_empty(), "{dropped:?}");
    assert!(endpoint.holds_workspace("alice"));
    // At 5m + 1 ms a request from another workspace drops alice (entry and scopes); carol's 1h
    // entry lives to 3,600,000 ms: kept. Bob asked nothing to be cached, but is kept 5 minutes
    // after his request (it is the current one here anyway).
    let (_, dropped) = priced_then_retired(
        &mut endpoint,
        "bob",
        "{\"model\":\"claude-sonnet-4-6\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
        300_001,
    );
    assert_eq!(dropped, ["alice"]);
    assert!(!endpoint.holds_workspace("alice") && endpoint.holds_workspace("carol"));
    assert_eq!(endpoint.workspaces_held(), 2, "carol and bob");
    assert_eq!(endpoint.cache_stats().entries, 1, "carol's entry alone");

    // Usage is what it would have been: alice's entry had expired, so she writes it again.
    let (again, _) = priced_then_retired(&mut endpoint, "alice", &five_minutes, 300_002);
    assert_eq!((again.cache_read_input_tokens, again.cache_creation.ephemeral_5m_input_tokens), (0, 2_000));
    // Carol at 5m + 3 ms still reads her 1h entry.
    let (carol, _) = priced_then_retired(&mut endpoint, "carol", &one_hour, 300_003);
    assert_eq!(carol.cache_read_input_tokens, 2_000);
    // Her read renewed it to 300,003 + 3,600,000 = 3,900,003 ms: kept one ms before, dropped at it.
    let (_, dropped) = priced_then_retired(&mut endpoint, "bob", &five_minutes, 3_900_002);
    assert!(!dropped.contains(&"carol".to_string()), "{dropped:?}");
    let (_, dropped) = priced_then_retired(&mut endpoint, "bob", &five_minutes, 3_900_003);
    assert!(dropped.contains(&"carol".to_string()), "{dropped:?}");
}

#[test]
fn item10_every_captured_real_client_body_passes_strict() {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/clients");
    let mut bodies: Vec<(String, Vec<u8>)> = Vec::new();
    for entry in std::fs::read_dir(&fixtures).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let bytes = std::fs::read(&path).unwrap();
        if name.ends_with(".jsonl") {
            for (index, line) in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()).enumerate() {
                let envelope: Value = serde_json::from_slice(line).unwrap();
                bodies.push((format!("{name}:{}", index + 1), envelope["body"].to_string().into_bytes()));
            }
        } else {
            bodies.push((name, bytes));
        }
    }
    assert!(bodies.len() > 3, "the captured fixtures are there: {}", bodies.len());
    let server =
        Running::start(ServeConfig { strict: true, ..ServeConfig::default() }, EndpointConfig::default());
    let agent = client();
    for (name, body) in &bodies {
        let answer = post(&agent, &server.url("/v1/messages"), Some("captured"), body);
        assert_eq!(answer.status, 200, "{name}: {}", answer.body);
    }
    server.stop();
}

// ---- the next failures, found by mutating transcripts ----

/// A Claude Code transcript of three assistant lines (one request each) carrying `usage`.
fn transcript_with_usage(usage: &str) -> String {
    (1..=3)
        .map(|i| {
            format!(
                r#"{{"uuid":"u{i}","sessionId":"s","timestamp":"2026-01-01T00:00:0{i}Z","type":"assistant","requestId":"r{i}","message":{{"id":"m{i}","model":"claude-opus-4-6","role":"assistant","content":[{{"type":"text","text":"x"}}],"usage":{usage}}}}}"#
            ) + "\n"
        })
        .collect()
}

#[test]
fn import_of_a_recorded_usage_near_2_64_skips_the_line_instead_of_panicking() {
    // Found by mutation: counts near 2^64 overflowed the total input sum (a panic), and a count
    // of 2^63 became a declared block past the 1e9 cap that the prediction then `expect`ed valid.
    for usage in [
        r#"{"input_tokens":18446744073709551615,"output_tokens":1,"cache_read_input_tokens":18446744073709551615}"#,
        r#"{"input_tokens":9223372036854775807,"cache_read_input_tokens":9223372036854775807}"#,
        r#"{"input_tokens":1000000001}"#,
        // Each count under the cap, their sum (600,000,000 × 2 = 1.2e9) past it.
        r#"{"input_tokens":600000000,"cache_read_input_tokens":600000000}"#,
        r#"{"input_tokens":5,"output_tokens":18446744073709551615}"#,
    ] {
        let path = tempfile("next_import_usage");
        std::fs::write(&path, transcript_with_usage(usage)).unwrap();
        let output = forkcache(&["import", "claude-code", path.to_str().unwrap(), "--json"], b"");
        let err = stderr(&output);
        // Every line skipped, so no request was read: exit 1 (nothing found) wins over exit 3.
        assert_eq!(output.status.code(), Some(1), "{usage}: {err}");
        assert!(
            err.contains(":1: request r1: message.usage"),
            "{usage}: the line and the field are named: {err}"
        );
        let _ = std::fs::remove_file(path);
    }
    // An ordinary usage is still a request.
    let path = tempfile("next_import_usage_ok");
    std::fs::write(
        &path,
        transcript_with_usage(r#"{"input_tokens":4000,"cache_read_input_tokens":6000,"output_tokens":7}"#),
    )
    .unwrap();
    let output = forkcache(&["import", "claude-code", path.to_str().unwrap(), "--json"], b"");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let _ = std::fs::remove_file(path);
}
