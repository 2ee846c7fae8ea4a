//! `forkcache proxy` in front of a real `forkcache serve` over loopback: bytes pass through
//! unchanged, the proxy's trace equals the server's own body for body, the live comparison agrees
//! with the server (plumbing, not fidelity: the upstream is the same simulator), faults pass
//! through and are recorded, and no key is written anywhere.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use forkcache_engine::billing::{PriceTable, Usage};
use forkcache_engine::endpoint::{EndpointConfig, MockEndpoint};
use forkcache_ingest::calibrate::calibrate;
use forkcache_ingest::replay::{ReplayConfig, replay};
use forkcache_ingest::trace::key_fingerprint;
use forkcache_net::proxy::{Proxy, ProxyConfig, ProxyStats};
use forkcache_net::serve::{LatencyMode, Script, ServeConfig};

use crate::serve_harness::{Running, cached_request, client, on_own_runtime, post, sse_events};

const MODEL: &str = "claude-sonnet-4-6";
const KEY: &str = "sk-ant-api03-PROXY-TEST-SECRET-0123456789";

/// A proxy in the test process, its request log captured.
pub struct RunningProxy {
    pub addr: SocketAddr,
    log: Arc<Mutex<Vec<u8>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<ProxyStats>>,
}

/// A `Write` into shared memory, for the request log.
struct SharedLog(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for SharedLog {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl RunningProxy {
    pub fn start(upstream: &str, trace: Option<PathBuf>) -> RunningProxy {
        RunningProxy::start_with(upstream, |config| config.trace = trace)
    }

    pub fn start_with(upstream: &str, configure: impl FnOnce(&mut ProxyConfig)) -> RunningProxy {
        let mut config = ProxyConfig::new(upstream);
        config.addr = SocketAddr::from(([127, 0, 0, 1], 0));
        configure(&mut config);
        let log = Arc::new(Mutex::new(Vec::new()));
        config.request_log = Some(Box::new(SharedLog(Arc::clone(&log))));
        let (addr, stop, thread) = on_own_runtime(move |bound, stopped| async move {
            let endpoint = MockEndpoint::new(EndpointConfig::default(), PriceTable::builtin()).unwrap();
            let proxy = Proxy::bind(config, endpoint).await.unwrap();
            bound.send(proxy.local_addr()).unwrap();
            proxy.run(async move { stopped.await.unwrap_or(()) }).await.unwrap()
        });
        RunningProxy { addr, log, stop: Some(stop), thread: Some(thread) }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Stops the proxy once every exchange is written; returns its totals and its log.
    pub fn stop(mut self) -> (ProxyStats, String) {
        let _ = self.stop.take().unwrap().send(());
        let stats = self.thread.take().unwrap().join().expect("the proxy thread does not panic");
        let log = String::from_utf8(self.log.lock().unwrap().clone()).unwrap();
        (stats, log)
    }
}

/// A fresh scratch directory for one test's files.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("forkcache-proxy-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `forkcache proxy --addr 127.0.0.1:0` as a process, with what `configure` adds: the child and
/// the address it printed it listens on.
pub fn proxy_process(configure: impl FnOnce(&mut std::process::Command)) -> (std::process::Child, String) {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_forkcache"));
    command.args(["proxy", "--addr", "127.0.0.1:0"]).stdout(std::process::Stdio::piped());
    configure(&mut command);
    let mut child = command.spawn().unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    let addr = first
        .strip_prefix("forkcache proxy listening on http://")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("{first}"));
    (child, addr.to_string())
}

/// A trace's envelopes (its session markers left out).
pub fn trace_lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|line| line.get("forkcache_session").is_none())
        .collect()
}

/// A trace's session markers.
fn session_markers(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok()?.get("forkcache_session").cloned())
        .collect()
}

/// The exact bytes of each line's `body` member.
fn raw_bodies(path: &Path) -> Vec<String> {
    #[derive(serde::Deserialize)]
    struct Line<'a> {
        #[serde(borrow)]
        body: Option<&'a serde_json::value::RawValue>,
    }
    let text = std::fs::read_to_string(path).unwrap();
    // Session markers have no body.
    text.lines()
        .filter_map(|line| Some(serde_json::from_str::<Line>(line).unwrap().body?.get().to_string()))
        .collect()
}

/// `forkcache serve` tracing to DIR/serve.jsonl, and the proxy in front tracing to DIR/proxy.jsonl.
fn serve_and_proxy(dir: &Path) -> (Running, RunningProxy) {
    let server = Running::start(
        ServeConfig { trace: Some(dir.join("serve.jsonl")), ..ServeConfig::default() },
        EndpointConfig::default(),
    );
    let proxy = RunningProxy::start(&server.url(""), Some(dir.join("proxy.jsonl")));
    (server, proxy)
}

/// One conversation's turns: the same cached system prompt, a growing user text.
fn turn(conversation: usize, turn: usize, stream: bool) -> String {
    let user = format!("conversation {conversation} turn {turn}: {}", "words ".repeat(turn * 20));
    cached_request(MODEL, 2_000 + conversation as u64, &user, stream)
}

#[test]
fn proxy_trace_equals_the_servers_body_for_body_and_agrees_with_it() {
    let dir = scratch("identity");
    let (server, proxy) = serve_and_proxy(&dir);
    let agent = client();
    let mut answers = Vec::new();
    for step in 0..4 {
        answers.push(post(
            &agent,
            &proxy.url("/v1/messages?beta=true"),
            Some(KEY),
            turn(0, step, step % 2 == 1).as_bytes(),
        ));
    }
    let count =
        post(&agent, &proxy.url("/v1/messages/count_tokens"), Some(KEY), turn(0, 0, false).as_bytes());
    assert_eq!(count.status, 200, "other routes are forwarded too: {}", count.body);
    let (stats, log) = proxy.stop();
    drop(server);

    // The client got the server's answers: the first turn writes the system block, the others read it.
    let usages: Vec<Usage> = answers.iter().map(|a| a.usage()).collect();
    assert_eq!(usages[0].cache_creation_input_tokens, 2_000);
    assert!(usages[1..].iter().all(|u| u.cache_read_input_tokens == 2_000), "{usages:?}");
    assert!(answers[1].is_stream() && !answers[0].is_stream());

    let proxied = trace_lines(&dir.join("proxy.jsonl"));
    assert_eq!(
        raw_bodies(&dir.join("proxy.jsonl")),
        raw_bodies(&dir.join("serve.jsonl")),
        "count_tokens is not a Messages exchange"
    );
    for (line, answer) in proxied.iter().zip(&answers) {
        assert_eq!(line["request_id"].as_str(), answer.request_id.as_deref());
        assert_eq!(line["workspace"], key_fingerprint(KEY).as_str());
        assert!(line["first_byte_ms"].as_u64() >= line["at_ms"].as_u64());
        let recorded: Usage = serde_json::from_value(line["usage"].clone()).unwrap();
        assert_eq!(recorded, answer.usage(), "usage as the upstream returned it");
        assert!(
            line.get("incomplete").is_none() && line.get("error").is_none() && line.get("api_key").is_none()
        );
    }
    let workspace = &stats.workspaces[&key_fingerprint(KEY)];
    assert_eq!((workspace.exchanges, workspace.compared, workspace.agreed), (4, 4, 4), "{log}");
    // Each turn is one user message of its own, so no two share a message to resume from.
    let json: Value = serde_json::from_str(&stats.to_json()).unwrap();
    assert_eq!(json["renders"], json!({"whole": 4, "resumed": 0}), "{json}");
    assert_eq!(workspace.recorded_usage, workspace.predicted.usage);
    assert_eq!(workspace.recorded_cost, workspace.predicted.cost);
    assert_eq!(
        log.lines().filter(|line| line.ends_with(')') && line.contains("· agrees (cached")).count(),
        4,
        "{log}"
    );

    // Replaying either trace agrees 100% with what it recorded. The upstream is the same
    // simulator, so this proves the plumbing (bytes, times, workspaces, usage), not fidelity.
    for trace in ["proxy.jsonl", "serve.jsonl"] {
        let text = std::fs::read_to_string(dir.join(trace)).unwrap();
        let report = replay(&ReplayConfig::default(), PriceTable::builtin(), &text).unwrap();
        let recorded = report.recorded.clone().expect("the trace recorded usage");
        assert_eq!((recorded.requests, recorded.compared, recorded.agreed), (4, 4, 4), "{trace}");
        for record in &report.records {
            assert_eq!(
                record.recorded.as_ref().unwrap().usage,
                record.result.as_ref().unwrap().usage,
                "{trace}"
            );
        }
        assert_eq!(recorded.cost, report.totals.cost, "{trace}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// An agent resends its conversation with a turn more each time: the prediction renders every
/// request after the first from where it parts from the last (the stats say so), and predicts
/// what the upstream billed all the same.
#[test]
fn the_prediction_resumes_a_growing_conversation_and_still_agrees() {
    let dir = scratch("resumed");
    let (server, proxy) = serve_and_proxy(&dir);
    let agent = client();
    let mut messages = Vec::new();
    for step in 0..4 {
        messages
            .push(json!({"role": "user", "content": format!("question {step}: {}", "words ".repeat(40))}));
        let body = json!({"model": MODEL, "max_tokens": 64, "messages": messages, "cache_control": {"type": "ephemeral"}});
        let answer = post(&agent, &proxy.url("/v1/messages"), Some(KEY), body.to_string().as_bytes());
        assert_eq!(answer.status, 200, "{}", answer.body);
        messages.push(json!({"role": "assistant", "content": format!("answer {step}")}));
    }
    let (stats, log) = proxy.stop();
    drop(server);

    let workspace = &stats.workspaces[&key_fingerprint(KEY)];
    assert_eq!((workspace.exchanges, workspace.compared, workspace.agreed), (4, 4, 4), "{log}");
    assert_eq!(workspace.recorded_usage, workspace.predicted.usage);
    // The first request is rendered whole; the other three share its messages and more.
    let json: Value = serde_json::from_str(&stats.to_json()).unwrap();
    assert_eq!(json["renders"], json!({"whole": 1, "resumed": 3}), "{json}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A prediction queue with no room (a bound of 0 bytes fits no body): every exchange is
/// forwarded and written to the trace as usual, and only its prediction is skipped, said so in
/// its line and counted; the trace still replays to 100% agreement.
#[test]
fn a_full_prediction_queue_records_every_exchange_and_skips_only_the_prediction() {
    let dir = scratch("queue-full");
    let server = Running::start(
        ServeConfig { trace: Some(dir.join("serve.jsonl")), ..ServeConfig::default() },
        EndpointConfig::default(),
    );
    let proxy = RunningProxy::start_with(&server.url(""), |config| {
        config.trace = Some(dir.join("proxy.jsonl"));
        config.prediction_queue_bytes = 0;
    });
    let agent = client();
    let answers: Vec<_> = (0..3)
        .map(|step| post(&agent, &proxy.url("/v1/messages"), Some(KEY), turn(0, step, step == 1).as_bytes()))
        .collect();
    let (stats, log) = proxy.stop();
    drop(server);

    assert!(answers.iter().all(|a| a.status == 200), "forwarding does not depend on the queue");
    assert_eq!(raw_bodies(&dir.join("proxy.jsonl")), raw_bodies(&dir.join("serve.jsonl")));
    assert_eq!(log.lines().count(), 3, "{log}");
    assert!(
        log.lines().all(|line| line
            .ends_with("· prediction skipped (the prediction queue was full; replay the trace for it)")
            && line.contains(": recorded read ")),
        "{log}"
    );
    let workspace = &stats.workspaces[&key_fingerprint(KEY)];
    assert_eq!((workspace.exchanges, workspace.skipped, workspace.compared), (3, 3, 0), "{log}");
    assert_eq!(workspace.predicted.requests, 0, "nothing was priced");
    assert_eq!(stats.predictions_pending, 0, "every queued exchange was taken off at shutdown");
    // Only the system block (2,000 declared tokens) is marked: the first turn writes it, the next
    // two read it.
    assert_eq!(workspace.recorded_usage.cache_creation_input_tokens, 2_000);
    assert_eq!(workspace.recorded_usage.cache_read_input_tokens, 2 * 2_000);
    let json: Value = serde_json::from_str(&stats.to_json()).unwrap();
    assert_eq!(json["workspaces"][key_fingerprint(KEY)]["predictions_skipped"], 3);
    assert_eq!(json["predictions_pending"], 0);

    // The trace is whole: replaying it predicts what the proxy skipped, and prices the recorded
    // usage (from the request's model) as the proxy did (from the model its response named).
    let text = std::fs::read_to_string(dir.join("proxy.jsonl")).unwrap();
    let report = replay(&ReplayConfig::default(), PriceTable::builtin(), &text).unwrap();
    let replayed = report.recorded.clone().expect("the trace recorded usage");
    assert_eq!((replayed.requests, replayed.compared, replayed.agreed), (3, 3, 3));
    assert_eq!(replayed.cost, workspace.recorded_cost);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A trace as a proxy in front of the real API would record it: the real counts run 30% above
/// bytes4's estimate, and the third request missed where forkcache predicts a read.
///
/// Body: a 2,000-token marked system block and "hi" (7 tokens) on Sonnet 4.6 ($3 input, $3.75 5m
/// write, $0.30 read per MTok = 3,000 / 3,750 / 300 nano-dollars per token).
#[test]
fn replay_scores_recorded_usage_and_the_apis_miss_reasons() {
    let body = cached_request(MODEL, 2_000, "hi", false);
    let write = r#"{"input_tokens":9,"cache_creation_input_tokens":2600,"cache_read_input_tokens":0,"output_tokens":0}"#;
    let read = r#"{"input_tokens":9,"cache_creation_input_tokens":0,"cache_read_input_tokens":2600,"output_tokens":0}"#;
    let system_changed =
        r#"{"cache_miss_reason":{"type":"system_changed","cache_missed_input_tokens":2600}}"#;
    let trace = [
        format!(r#"{{"at_ms":0,"first_byte_ms":500,"workspace":"wrkspc_a","usage":{write},"body":{body}}}"#),
        format!(r#"{{"at_ms":60000,"first_byte_ms":60300,"workspace":"wrkspc_a","usage":{read},"body":{body}}}"#),
        format!(r#"{{"at_ms":120000,"first_byte_ms":120500,"workspace":"wrkspc_a","usage":{write},"diagnostics":{system_changed},"body":{body}}}"#),
    ]
    .join("\n");
    let report = replay(&ReplayConfig::default(), PriceTable::builtin(), &trace).unwrap();
    let json: Value = serde_json::from_str(&report.to_json()).unwrap();
    let requests = json["requests"].as_array().unwrap();
    // 0: predicted 0 of 2,007 read, recorded 0 of 2,609: the same share.
    // 1: predicted 2,000 / 2,007 = 99.65%, recorded 2,600 / 2,609 = 99.66%: agree.
    // 2: predicted 99.65%, recorded 0%; rescaled, 2,000 × 2,609 / 2,007 ≈ 2,600 tokens off: differ.
    let agrees: Vec<bool> = requests.iter().map(|r| r["agreement"]["agrees"].as_bool().unwrap()).collect();
    assert_eq!(agrees, [true, true, false]);
    assert_eq!(requests[1]["agreement"]["recorded_cached_share"], 0.99655);
    // The API says the system changed; forkcache predicts no miss at all.
    assert_eq!(
        requests[2]["agreement"]["miss_reason"],
        serde_json::json!({"recorded": "system_changed", "predicted": null, "agrees": false})
    );
    // 9 × 3,000 + 2,600 × 3,750 = 9,777,000; 9 × 3,000 + 2,600 × 300 = 807,000.
    assert_eq!(requests[0]["recorded"]["cost_nanousd"], 9_777_000);
    assert_eq!(requests[1]["recorded"]["cost_nanousd"], 807_000);
    let totals = &json["totals"];
    assert_eq!(totals["recorded"]["cost_nanousd"], 9_777_000 + 807_000 + 9_777_000);
    assert_eq!(totals["recorded"]["usage"]["cache_read_input_tokens"], 2_600);
    assert_eq!(
        totals["agreement"],
        serde_json::json!({"compared": 3, "agreed": 2, "rate": 0.666667, "miss_reasons_compared": 1, "miss_reasons_agreed": 0})
    );
    assert_eq!(totals["usage"]["cache_read_input_tokens"], 4_000, "the predicted totals are unchanged");
    assert!(report.to_table().contains("agreement 2/3 (66.7%"), "{}", report.to_table());
}

#[test]
fn no_file_the_proxy_writes_holds_the_key() {
    let dir = scratch("keys");
    let server = Running::start(ServeConfig::default(), EndpointConfig::default());
    let proxy = RunningProxy::start(&server.url(""), Some(dir.join("proxy.jsonl")));
    let agent = client();
    post(&agent, &proxy.url("/v1/messages"), Some(KEY), turn(1, 0, false).as_bytes());
    let bearer = agent
        .post(&proxy.url("/v1/messages"))
        .header("authorization", format!("Bearer {KEY}"))
        .send(turn(1, 1, true).as_bytes())
        .unwrap()
        .into_body()
        .read_to_string()
        .unwrap();
    assert!(bearer.contains("message_stop"));
    // The journal counts an exchange after its response: wait until the page shows it.
    let read_stats = || crate::serve_harness::get(&agent, &proxy.url("/forkcache/stats")).body;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut stats_page = read_stats();
    while !stats_page.contains(&key_fingerprint(KEY)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        stats_page = read_stats();
    }
    let (stats, log) = proxy.stop();
    let trace = std::fs::read_to_string(dir.join("proxy.jsonl")).unwrap();
    assert_eq!(trace.lines().count(), 3, "a session marker, then two exchanges");
    for (what, text) in
        [("trace", &trace), ("log", &log), ("stats", &stats_page), ("summary", &stats.to_table())]
    {
        assert!(
            !text.contains(KEY) && !text.contains("PROXY-TEST-SECRET"),
            "the {what} holds the key: {text}"
        );
    }
    assert!(stats_page.contains(&key_fingerprint(KEY)), "{stats_page}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(dir.join("proxy.jsonl")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the trace is readable by its owner only");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Each proxy run appends a session marker through the trace writer: the upstream named by its
/// host alone (no scheme, port or path), never a key; a torn last line left by a crashed run gets
/// its newline first; replay reads each run as its own timeline.
#[test]
fn each_run_starts_a_session_naming_the_upstream_host_only() {
    let dir = scratch("sessions");
    let path = dir.join("proxy.jsonl");
    std::fs::write(&path, b"{\"at_ms\":0,\"body\":{\"model\"").unwrap();
    let server = Running::start(ServeConfig::default(), EndpointConfig::default());
    let agent = client();
    for run in 0..2 {
        let proxy = RunningProxy::start(&server.url(""), Some(path.clone()));
        post(&agent, &proxy.url("/v1/messages"), Some(KEY), turn(run, 0, false).as_bytes());
        proxy.stop();
    }
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains(KEY), "{text}");
    let markers = session_markers(&path);
    assert_eq!(markers.len(), 2);
    for marker in &markers {
        assert_eq!(marker["settings"]["upstream"], "127.0.0.1");
        assert_eq!(marker["version"], env!("CARGO_PKG_VERSION"));
    }
    // The torn line stays one unreadable line of its own (before the first marker, with no
    // request, so no session); the two runs read as two sessions, and the recorded usage agrees.
    let report = replay(&ReplayConfig::default(), PriceTable::builtin(), text.as_bytes()).unwrap();
    assert_eq!((report.sessions, report.unreadable.len(), report.records.len()), (2, 1, 2));
    let recorded = report.recorded.expect("usage recorded");
    assert_eq!((recorded.compared, recorded.agreed), (2, 2));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `/forkcache/stats` on the proxy follows serve's rule: asked with a key it shows that key's
/// workspace alone; with `require_key`, asking without a key is a 401 in the API's shape.
#[test]
fn stats_asked_with_a_key_show_that_keys_workspace_alone() {
    const OTHER: &str = "sk-ant-api03-OTHER-TENANT";
    let server = Running::start(ServeConfig::default(), EndpointConfig::default());
    let proxy = RunningProxy::start_with(&server.url(""), |config| config.require_key = true);
    let agent = client();
    post(&agent, &proxy.url("/v1/messages"), Some(KEY), turn(1, 0, false).as_bytes());
    post(&agent, &proxy.url("/v1/messages"), Some(OTHER), turn(2, 0, false).as_bytes());
    // The journal counts an exchange after its response: wait until both are counted.
    let stats_for = |key: &str| {
        let response = agent.get(&proxy.url("/forkcache/stats")).header("x-api-key", key).call().unwrap();
        serde_json::from_str::<Value>(&response.into_body().read_to_string().unwrap()).unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while stats_for(OTHER)["workspaces"].as_object().unwrap().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mine = stats_for(KEY);
    let workspaces: Vec<&String> = mine["workspaces"].as_object().unwrap().keys().collect();
    assert_eq!(workspaces, [&key_fingerprint(KEY)], "{mine}");
    assert_eq!(mine["workspaces"][key_fingerprint(KEY)]["exchanges"], 1);
    for proxy_wide in ["trace_write_errors", "predictions_pending", "renders"] {
        assert!(mine.get(proxy_wide).is_none(), "nothing proxy-wide for one tenant: {mine}");
    }
    let theirs = stats_for(OTHER);
    let workspaces: Vec<&String> = theirs["workspaces"].as_object().unwrap().keys().collect();
    assert_eq!(workspaces, [&key_fingerprint(OTHER)], "{theirs}");
    let unauthenticated = agent
        .get(&proxy.url("/forkcache/stats"))
        .config()
        .http_status_as_error(false)
        .build()
        .call()
        .unwrap();
    assert_eq!(unauthenticated.status(), 401);
    let body: Value = serde_json::from_str(&unauthenticated.into_body().read_to_string().unwrap()).unwrap();
    assert_eq!(body["error"]["type"], "authentication_error");
    let (stats, _) = proxy.stop();
    assert_eq!(stats.workspaces.len(), 2);
}

#[test]
fn upstream_down_is_a_502_api_error_naming_it() {
    let dir = scratch("down");
    // A port that was just free: nothing listens there.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let upstream = format!("http://{closed}");
    let proxy = RunningProxy::start(&upstream, Some(dir.join("proxy.jsonl")));
    let answer = post(&client(), &proxy.url("/v1/messages"), Some(KEY), turn(2, 0, false).as_bytes());
    let (_, log) = proxy.stop();
    assert_eq!(answer.status, 502);
    let (kind, message) = answer.error();
    assert_eq!(kind, "api_error");
    assert!(message.contains(&upstream) && message.contains("refused"), "{message}");
    let line = &trace_lines(&dir.join("proxy.jsonl"))[0];
    assert_eq!(line["error"]["status"], 502);
    assert_eq!(line["error"]["type"], "api_error");
    assert!(line.get("usage").is_none());
    assert!(log.contains("error 502 api_error"), "{log}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A request sent chunked, `pieces` chunks of `body`, on a fresh connection: the raw answer.
fn post_chunked(addr: &str, body: &[u8], pieces: usize) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    let head = format!(
        "POST /v1/messages HTTP/1.1\r\nhost: {addr}\r\nx-api-key: {KEY}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).unwrap();
    for piece in body.chunks(body.len().div_ceil(pieces)) {
        stream.write_all(format!("{:x}\r\n", piece.len()).as_bytes()).unwrap();
        stream.write_all(piece).unwrap();
        stream.write_all(b"\r\n").unwrap();
        stream.flush().unwrap();
    }
    stream.write_all(b"0\r\n\r\n").unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

/// A body that arrives in many pieces reaches the upstream byte for byte (its frames are sent on
/// as they came, never joined on the way) and is recorded whole; past the body limit the proxy
/// answers 413 as the API does and forwards nothing.
#[test]
fn request_bodies_pass_in_pieces_and_past_the_limit_get_413() {
    let dir = scratch("pieces");
    let body = turn(3, 2, false);
    let limit = body.len() + 10;
    let server = Running::start(
        ServeConfig { trace: Some(dir.join("serve.jsonl")), ..ServeConfig::default() },
        EndpointConfig::default(),
    );
    let proxy = RunningProxy::start_with(&server.url(""), |config| {
        config.trace = Some(dir.join("proxy.jsonl"));
        config.body_limit_bytes = limit;
    });
    let addr = proxy.url("").trim_start_matches("http://").to_string();
    let answer = post_chunked(&addr, body.as_bytes(), 7);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // Past the limit by one byte, as a declared length (the chunked case is a unit test of
    // `read_frames`: a client cut off mid-body is reset, so a raw one may read no answer).
    let too_long = format!("{body}{}", " ".repeat(11));
    let declared = post(&client(), &proxy.url("/v1/messages"), Some(KEY), too_long.as_bytes());
    assert_eq!(declared.status, 413);
    assert_eq!(declared.error().0, "request_too_large");
    proxy.stop();
    drop(server);
    let served = raw_bodies(&dir.join("serve.jsonl"));
    // A one-line JSON body is written into the trace as it came.
    assert_eq!(served, [body], "only the body within the limit was forwarded, byte for byte");
    assert_eq!(raw_bodies(&dir.join("proxy.jsonl"))[0], served[0], "recorded as forwarded");
    let errors: Vec<u64> = trace_lines(&dir.join("proxy.jsonl"))[1..]
        .iter()
        .map(|l| l["error"]["status"].as_u64().unwrap())
        .collect();
    assert_eq!(errors, [413]);
    let _ = std::fs::remove_dir_all(&dir);
}

fn faults_server(latency: LatencyMode) -> Running {
    let script = Script::from_json(include_str!("../../fixtures/scripts/faults.json")).unwrap();
    Running::start(ServeConfig { script, latency, ..ServeConfig::default() }, EndpointConfig::default())
}

#[test]
fn rate_limit_passes_through_with_retry_after_and_is_recorded() {
    let dir = scratch("429");
    let server = faults_server(LatencyMode::Instant);
    let proxy = RunningProxy::start(&server.url(""), Some(dir.join("proxy.jsonl")));
    let direct = post(
        &client(),
        &server.url("/v1/messages"),
        Some(KEY),
        cached_request(MODEL, 10, "RATE_LIMIT", false).as_bytes(),
    );
    let proxied = post(
        &client(),
        &proxy.url("/v1/messages"),
        Some(KEY),
        cached_request(MODEL, 10, "RATE_LIMIT", false).as_bytes(),
    );
    proxy.stop();
    assert_eq!((proxied.status, proxied.retry_after.as_deref()), (429, Some("2")));
    assert_eq!(proxied.error().0, "rate_limit_error");
    // The body is the server's (its request id numbers the server's requests).
    assert_eq!(
        proxied.body.replace(proxied.request_id.as_deref().unwrap(), "ID"),
        direct.body.replace(direct.request_id.as_deref().unwrap(), "ID")
    );
    let line = &trace_lines(&dir.join("proxy.jsonl"))[0];
    assert_eq!(line["error"]["status"], 429);
    assert_eq!(line["error"]["type"], "rate_limit_error");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn upstream_cutting_a_stream_is_recorded_incomplete_with_its_input_usage() {
    let dir = scratch("cut");
    let server = faults_server(LatencyMode::Instant);
    let proxy = RunningProxy::start(&server.url(""), Some(dir.join("proxy.jsonl")));
    let body = cached_request(MODEL, 2_000, "CUT", true);
    let outcome = client()
        .post(&proxy.url("/v1/messages"))
        .send(body.as_bytes())
        .map(|mut r| r.body_mut().read_to_string());
    let (stats, _) = proxy.stop();
    assert!(!matches!(outcome, Ok(Ok(ref text)) if text.contains("message_stop")), "{outcome:?}");
    let line = &trace_lines(&dir.join("proxy.jsonl"))[0];
    assert_eq!(line["incomplete"], true);
    // The write happened upstream: it is in message_start's usage, and the request is priced.
    assert_eq!(line["usage"]["cache_creation_input_tokens"], 2_000);
    let workspace = &stats.workspaces["default"];
    assert_eq!((workspace.incomplete, workspace.compared, workspace.agreed), (1, 1, 1));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn client_hanging_up_mid_stream_cancels_the_upstream_and_is_recorded_incomplete() {
    let dir = scratch("hangup");
    // Modelled latency: a long reply streams for many seconds.
    let script = r#"{"rules": [], "default": {"text": "LONG", "output_tokens": 200000}}"#;
    let script = Script::from_json(script).unwrap();
    let server = Running::start(
        ServeConfig { script, latency: LatencyMode::Model, ..ServeConfig::default() },
        EndpointConfig::default(),
    );
    let proxy = RunningProxy::start(&server.url(""), Some(dir.join("proxy.jsonl")));
    let body = cached_request(MODEL, 2_000, &"long answer please ".repeat(2_000), true);
    let mut socket = TcpStream::connect(proxy.addr).unwrap();
    write!(socket, "POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}", body.len()).unwrap();
    let mut reader = BufReader::new(socket.try_clone().unwrap());
    let mut seen = String::new();
    while !seen.contains("message_start") {
        assert!(reader.read_line(&mut seen).unwrap() > 0, "the stream began: {seen}");
    }
    socket.shutdown(std::net::Shutdown::Both).unwrap();
    drop((reader, socket));
    let (stats, _) = proxy.stop();
    let stopped = Instant::now();
    server.stop();
    assert!(stopped.elapsed() < Duration::from_secs(5), "the upstream stream was cancelled, not left to run");
    let line = &trace_lines(&dir.join("proxy.jsonl"))[0];
    assert_eq!(line["incomplete"], true, "{line}");
    assert_eq!(line["usage"]["cache_creation_input_tokens"], 2_000);
    assert_eq!(stats.workspaces["default"].incomplete, 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sixteen_concurrent_clients_are_recorded_in_trace_order() {
    let dir = scratch("sixteen");
    let (server, proxy) = serve_and_proxy(&dir);
    let url = proxy.url("/v1/messages");
    let clients: Vec<_> = (0..16)
        .map(|conversation| {
            let url = url.clone();
            std::thread::spawn(move || {
                let agent = client();
                let key = format!("key-of-client-{conversation}");
                (0..4)
                    .map(|step| {
                        post(&agent, &url, Some(&key), turn(conversation, step, step % 2 == 0).as_bytes())
                            .status
                    })
                    .collect::<Vec<u16>>()
            })
        })
        .collect();
    for client in clients {
        assert_eq!(client.join().unwrap(), [200; 4]);
    }
    let (stats, log) = proxy.stop();
    drop(server);
    let lines = trace_lines(&dir.join("proxy.jsonl"));
    assert_eq!(lines.len(), 64);
    // Trace order: a line comes after every earlier-started line of its workspace whose response
    // began before it started (each client's own turns, here).
    let ms = |line: &Value, member: &str| line[member].as_u64().unwrap();
    for (later, line) in lines.iter().enumerate() {
        for earlier in &lines[later + 1..] {
            let could_read = earlier["workspace"] == line["workspace"]
                && ms(earlier, "at_ms") < ms(line, "at_ms")
                && ms(earlier, "first_byte_ms") <= ms(line, "at_ms");
            assert!(!could_read, "{earlier} comes after {line}");
        }
    }
    let mut proxied = raw_bodies(&dir.join("proxy.jsonl"));
    let mut served = raw_bodies(&dir.join("serve.jsonl"));
    proxied.sort();
    served.sort();
    assert_eq!(proxied, served);
    assert_eq!(stats.workspaces.len(), 16);
    assert!(stats.workspaces.values().all(|w| (w.exchanges, w.agreed) == (4, 4)), "{log}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// An upstream that answers every request with one fixed, compressed SSE stream.
fn compressed_upstream(encoding: &'static str, body: Vec<u8>) -> (SocketAddr, tokio::runtime::Runtime) {
    use axum::http::header;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().fallback(move || {
        let body = body.clone();
        async move {
            (
                [
                    (header::CONTENT_TYPE, "text/event-stream"),
                    (header::CONTENT_ENCODING, encoding),
                    (header::HeaderName::from_static("request-id"), "req_up"),
                ],
                body,
            )
        }
    });
    runtime.spawn(async move { axum::serve(listener, app).await });
    (addr, runtime)
}

#[test]
fn compressed_responses_pass_through_as_received_and_are_read_decoded() {
    let plain = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":9000,\"output_tokens\":1}}}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":5}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(plain.as_bytes()).unwrap();
    let gzipped = gz.finish().unwrap();
    let dir = scratch("gzip");
    let (addr, _runtime) = compressed_upstream("gzip", gzipped.clone());
    let proxy = RunningProxy::start(&format!("http://{addr}"), Some(dir.join("proxy.jsonl")));
    let mut socket = TcpStream::connect(proxy.addr).unwrap();
    let body = cached_request(MODEL, 10, "hi", true);
    write!(socket, "POST /v1/messages HTTP/1.1\r\nhost: x\r\naccept-encoding: gzip, deflate, br, zstd\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}", body.len()).unwrap();
    let mut received = Vec::new();
    socket.read_to_end(&mut received).unwrap();
    proxy.stop();
    let split = received.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&received[..split]).to_ascii_lowercase();
    assert!(head.contains("content-encoding: gzip"), "{head}");
    let payload = dechunk(&received[split..], &head);
    assert_eq!(payload, gzipped, "the client gets the compressed bytes as the upstream sent them");
    let line = &trace_lines(&dir.join("proxy.jsonl"))[0];
    assert_eq!(
        line["usage"].to_string(),
        r#"{"input_tokens":3,"cache_creation_input_tokens":0,"cache_read_input_tokens":9000,"output_tokens":5}"#
    );
    assert_eq!(line["request_id"], "req_up");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The body of an HTTP/1.1 response: de-chunked when `transfer-encoding: chunked`.
fn dechunk(bytes: &[u8], head: &str) -> Vec<u8> {
    if !head.contains("transfer-encoding: chunked") {
        return bytes.to_vec();
    }
    let mut out = Vec::new();
    let mut rest = bytes;
    loop {
        let end = rest.windows(2).position(|w| w == b"\r\n").unwrap();
        let size = usize::from_str_radix(std::str::from_utf8(&rest[..end]).unwrap().trim(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&rest[end + 2..end + 2 + size]);
        rest = &rest[end + 2 + size + 2..];
    }
}

#[test]
fn sse_through_the_proxy_is_the_servers_event_sequence() {
    let server = Running::start(ServeConfig::default(), EndpointConfig::default());
    let proxy = RunningProxy::start(&server.url(""), None);
    let body = cached_request(MODEL, 2_000, "hi", true);
    let direct = post(&client(), &server.url("/v1/messages"), Some("a"), body.as_bytes());
    let proxied = post(&client(), &proxy.url("/v1/messages"), Some("b"), body.as_bytes());
    proxy.stop();
    let names = |text: &str| sse_events(text).into_iter().map(|(name, _)| name).collect::<Vec<_>>();
    assert_eq!(names(&proxied.body), names(&direct.body));
    assert_eq!(proxied.usage(), direct.usage(), "a fresh workspace each: the same cold write");
}

#[test]
fn a_disagreement_names_the_predicted_miss_and_the_first_divergence() {
    // The upstream reads 9,000 tokens every time; forkcache predicts a write for the first
    // request and, for the second, whose one (marked) system block changed, another write: no
    // read, and no miss either (nothing before the change was ever cached).
    let plain = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":9000,\"output_tokens\":1}}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    let (addr, _runtime) = compressed_upstream("identity", plain.as_bytes().to_vec());
    let proxy = RunningProxy::start(&format!("http://{addr}"), None);
    let first = cached_request(MODEL, 2_000, "hi", true);
    let second = first.replace("You are a test.", "You are a test!");
    for body in [&first, &second] {
        let answer = post(&client(), &proxy.url("/v1/messages"), Some(KEY), body.as_bytes());
        assert_eq!(answer.status, 200);
    }
    let (stats, log) = proxy.stop();
    let lines: Vec<&str> = log.lines().collect();
    // 9,000 / 9,003 = 99.97% read against 0%.
    assert!(
        lines[1].contains("· differs (cached 100.0% recorded, 0.0% predicted); predicted miss -"),
        "{log}"
    );
    // Cache order starts with the model, "claude-sonnet-4-6" (19 bytes), then the system block
    // without its marker: {"type":"text","text":"You are a test (37 bytes) is shared: byte 56.
    assert!(
        lines[1].ends_with("first divergence from req_up: system[0].text (system, system_text) at byte 56"),
        "{log}"
    );
    assert!(!lines[0].contains("first divergence"), "nothing came before the first request: {log}");
    assert_eq!(stats.workspaces[&key_fingerprint(KEY)].agreed, 0);
}

/// Two turns of a conversation with a tool: real text everywhere, every string holding SECRET.
fn secret_turns() -> Vec<String> {
    let system = [
        json!({"type": "text", "text": format!("SECRET rules. {}", "Keep the house rules. ".repeat(300)), "cache_control": {"type": "ephemeral"}}),
    ];
    let tools = [
        json!({"name": "Read", "description": "SECRET tool", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}),
    ];
    let question = json!({"role": "user", "content": "SECRET question"});
    let call = json!({"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "SECRET.txt"}}]});
    let result = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "SECRET contents", "cache_control": {"type": "ephemeral"}}]});
    let turn = |messages: Vec<Value>| {
        json!({"model": MODEL, "max_tokens": 64, "system": system, "tools": tools, "messages": messages})
            .to_string()
    };
    vec![turn(vec![question.clone()]), turn(vec![question, call, result])]
}

#[test]
fn a_redacted_trace_holds_no_text_and_replays_to_the_same_usage() {
    let dir = scratch("redact");
    let server = Running::start(
        ServeConfig { trace: Some(dir.join("serve.jsonl")), ..ServeConfig::default() },
        EndpointConfig::default(),
    );
    let trace = dir.join("proxy.jsonl");
    let proxy = RunningProxy::start_with(&server.url(""), |config| {
        config.trace = Some(trace);
        config.redact = true;
    });
    for body in secret_turns() {
        assert_eq!(post(&client(), &proxy.url("/v1/messages"), Some(KEY), body.as_bytes()).status, 200);
    }
    proxy.stop();
    drop(server);
    let redacted = std::fs::read_to_string(dir.join("proxy.jsonl")).unwrap();
    assert!(!redacted.contains("SECRET") && !redacted.contains("house rules"), "{redacted}");
    let usages = |name: &str| {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        let report = replay(&ReplayConfig::default(), PriceTable::builtin(), &text).unwrap();
        report.records.iter().map(|r| r.result.clone().unwrap().usage).collect::<Vec<Usage>>()
    };
    let original = usages("serve.jsonl");
    assert!(
        original[1].cache_read_input_tokens > 1_024,
        "the second turn reads the first's prefix: {original:?}"
    );
    assert_eq!(usages("proxy.jsonl"), original);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Four requests of one 2,000-token marked system block and "hi" (7 tokens) at 0, 1, 2 and 3 s,
/// without first_byte_ms; the recorded counts are the predicted ones × 1.3 (write or read 2,600,
/// uncached 9). Even requests fit, odd ones (1 and 3) are held out.
#[test]
fn calibration_fits_token_counts_and_scores_candidates_on_the_held_out_half() {
    let body = cached_request(MODEL, 2_000, "hi", false);
    let usage = |read: u64, write: u64| {
        format!(
            r#"{{"input_tokens":9,"cache_creation_input_tokens":{write},"cache_read_input_tokens":{read},"output_tokens":0}}"#
        )
    };
    let trace: Vec<String> = (0..4)
        .map(|i| {
            let recorded = if i == 0 { usage(0, 2_600) } else { usage(2_600, 0) };
            format!(r#"{{"at_ms":{},"usage":{recorded},"body":{body}}}"#, i * 1_000)
        })
        .collect();
    let calibration = calibrate(&ReplayConfig::default(), &PriceTable::builtin(), &trace.join("\n")).unwrap();
    let fit = &calibration.models[0];
    // Fit half: recorded 2 × 2,609 = 5,218 against predicted 2 × 2,007 = 4,014.
    assert_eq!((fit.fit_requests, fit.recorded_tokens, fit.predicted_tokens), (2, 5_218, 4_014));
    // Held out: |2,007 − 2,609| × 2 / 5,218 = 23.07%; rescaled, 2,007 × 5,218 / 4,014 = 2,609: 0.
    assert_eq!(
        (fit.held_out_requests, fit.held_out_error_ppm, fit.held_out_error_rescaled_ppm),
        (2, 230_739, 0)
    );
    // The 2,000-token prefix is cached only when the minimum is at most 2,000 (the table says 1,024).
    let by_minimum: Vec<(Option<u64>, u64)> =
        calibration.min_cacheable.iter().map(|c| (c.value, c.agreed)).collect();
    assert_eq!(
        by_minimum,
        [(None, 2), (Some(256), 2), (Some(512), 2), (Some(1_024), 2), (Some(2_048), 0), (Some(4_096), 0)]
    );
    // Request 0's write is readable at base + 2,007 × 20 µs ≈ base + 41 ms: request 1 (at 1 s)
    // reads it for a base of 0–400 ms, not for 1,000 or 2,000; request 3 (at 3 s) always does.
    let by_delay: Vec<(Option<u64>, u64)> =
        calibration.first_token_ms.iter().map(|c| (c.value, c.agreed)).collect();
    assert_eq!(by_delay, [(Some(0), 2), (Some(200), 2), (Some(400), 2), (Some(1_000), 1), (Some(2_000), 1)]);
    assert!(calibration.min_cacheable.iter().all(|c| c.compared == 2));
    let json: Value = serde_json::from_str(&calibration.to_json()).unwrap();
    assert_eq!(json["calibration"]["models"][0]["recorded_per_predicted_token"], 1.29995);
    assert!(calibration.to_table().contains("price table    2/2"), "{}", calibration.to_table());
}

#[test]
fn calibrate_names_unreadable_lines_and_exits_3_like_replay() {
    let dir = scratch("calibrate-unreadable");
    let body = cached_request(MODEL, 2_000, "hi", false);
    let usage = r#"{"input_tokens":9,"cache_creation_input_tokens":2600,"cache_read_input_tokens":0,"output_tokens":0}"#;
    // Line 2 is not JSON, line 4 not UTF-8; lines 1 and 3 are requests.
    let mut trace = format!("{{\"at_ms\":0,\"usage\":{usage},\"body\":{body}}}\nnot json\n").into_bytes();
    trace.extend_from_slice(format!("{{\"at_ms\":1000,\"usage\":{usage},\"body\":{body}}}\n").as_bytes());
    trace.extend_from_slice(b"{\"at_ms\":2000,\"body\":\"\xff\xfe\"}\n");
    let path = dir.join("trace.jsonl");
    std::fs::write(&path, &trace).unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_forkcache"))
        .args(["replay", "--calibrate", "--json"])
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("skipped unreadable line 2:") && stderr.contains("skipped unreadable line 4:"),
        "{stderr}"
    );
    let document: Value = serde_json::from_slice(&output.stdout).unwrap();
    let lines: Vec<&Value> = document["unreadable"].as_array().unwrap().iter().map(|u| &u["line"]).collect();
    assert_eq!(lines, [2, 4]);
    // The two readable requests: one fits (index 0), one is held out (index 1).
    assert_eq!(document["calibration"]["models"][0]["fit_requests"], 1);
    assert_eq!(document["calibration"]["models"][0]["held_out_requests"], 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn import_joins_past_a_proxy_trace_line_that_is_not_utf8_and_exits_3() {
    // The shared proxy trace fixture (line 5 is `not json`) with a non-UTF-8 line 2 put in.
    let dir = scratch("join-utf8");
    let fixture =
        std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/proxy_every_rule.jsonl")).unwrap();
    let first_end = fixture.iter().position(|&b| b == b'\n').unwrap() + 1;
    let mut trace = fixture[..first_end].to_vec();
    trace.extend_from_slice(b"{\"request_id\":\"req_x\",\"body\":\"\xc3\x28\"}\n");
    trace.extend_from_slice(&fixture[first_end..]);
    let path = dir.join("proxy.jsonl");
    std::fs::write(&path, &trace).unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_forkcache"))
        .args(["import", "claude-code", "--json"])
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/claude_code/every_rule"))
        .arg("--trace")
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("skipped unreadable line 2: not UTF-8"), "{stderr}");
    assert!(stderr.contains("skipped unreadable line 6: not a trace envelope"), "{stderr}");
    // The join went on past line 2: both breaks the fixture locates are still located.
    let document: Value = serde_json::from_slice(&output.stdout).unwrap();
    let join = &document["totals"]["trace_join"];
    assert_eq!(join, &json!({"breaks_located": 2, "breaks_unmatched": 3, "skipped_lines": 2}));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_command_checks_its_upstream_before_it_listens() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_forkcache"))
        .args(["proxy", "--addr", "127.0.0.1:0", "--upstream", "api.anthropic.com"])
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "a usage error: {stderr}");
    assert!(
        stderr.contains(r#"--upstream "api.anthropic.com": give the scheme, http:// or https://"#),
        "{stderr}"
    );
    assert!(!String::from_utf8_lossy(&output.stdout).contains("listening"));
}

/// An upstream whose answers the test holds: a request saying `HELD_HEAD` gets no response until
/// released; one saying `HELD_BODY` gets its head and half its body at once and the rest when
/// released; anything else its whole answer at once. It reports each held request's arrival.
struct HeldUpstream {
    addr: SocketAddr,
    arrived: std::sync::mpsc::Receiver<()>,
    release: Arc<tokio::sync::Notify>,
    _runtime: tokio::runtime::Runtime,
}

impl HeldUpstream {
    const MESSAGE: &str = r#"{"id":"msg_held","type":"message","content":[],"usage":{"input_tokens":10,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}"#;

    fn start() -> HeldUpstream {
        use axum::http::header;
        let runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let (arrival, arrived) = std::sync::mpsc::channel::<()>();
        let arrival = Arc::new(Mutex::new(arrival));
        let release = Arc::new(tokio::sync::Notify::new());
        let held = Arc::clone(&release);
        let app = axum::Router::new().fallback(move |body: axum::body::Bytes| {
            let (arrival, release) = (Arc::clone(&arrival), Arc::clone(&held));
            async move {
                let text = String::from_utf8_lossy(&body).to_string();
                let json = [(header::CONTENT_TYPE, "application/json")];
                if text.contains("HELD_HEAD") {
                    arrival.lock().unwrap().send(()).unwrap();
                    release.notified().await;
                }
                let body = if text.contains("HELD_BODY") {
                    arrival.lock().unwrap().send(()).unwrap();
                    let (first, rest) = HeldUpstream::MESSAGE.split_at(20);
                    let parts = futures_util::stream::unfold(0, move |part| {
                        let release = Arc::clone(&release);
                        async move {
                            match part {
                                0 => Some((Ok::<_, std::io::Error>(first.to_string()), 1)),
                                1 => {
                                    release.notified().await;
                                    Some((Ok(rest.to_string()), 2))
                                }
                                _ => None,
                            }
                        }
                    });
                    axum::body::Body::from_stream(parts)
                } else {
                    // Never within the millisecond the exchange started: one that ends there
                    // keeps plain start order (proxy/order.rs) and would wait for the held one.
                    tokio::time::sleep(Duration::from_millis(3)).await;
                    axum::body::Body::from(HeldUpstream::MESSAGE)
                };
                (json, body)
            }
        });
        runtime.spawn(async move { axum::serve(listener, app).await });
        HeldUpstream { addr, arrived, release, _runtime: runtime }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// Waits (up to a generous bound, for a loaded machine) until the trace holds `lines` envelopes.
fn await_lines(path: &Path, lines: usize) -> Vec<Value> {
    for _ in 0..600 {
        let written = trace_lines(path);
        if written.len() >= lines {
            return written;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the trace never reached {lines} lines: {:?}", trace_lines(path));
}

fn user_text(line: &Value) -> String {
    line["body"]["messages"][0]["content"].to_string()
}

#[test]
fn a_long_exchange_holds_back_only_the_lines_that_could_read_its_cache() {
    let dir = scratch("order");
    let trace = dir.join("proxy.jsonl");
    let upstream = HeldUpstream::start();
    let proxy = RunningProxy::start(&upstream.url(), Some(trace.clone()));
    let url = proxy.url("/v1/messages");
    let send = |user: &str| {
        let (url, body) = (url.clone(), cached_request(MODEL, 2_000, user, false));
        std::thread::spawn(move || post(&client(), &url, Some(KEY), body.as_bytes()).status)
    };

    // 1. The long exchange has not begun its response when the short one starts: they are
    //    concurrent, and the short one's line is written while the long one is still waiting.
    let long = send("HELD_HEAD long");
    upstream.arrived.recv().unwrap();
    assert_eq!(send("short while the long one waits").join().unwrap(), 200);
    let written = await_lines(&trace, 1);
    assert!(user_text(&written[0]).contains("short while"), "{written:?}");
    upstream.release.notify_one();
    assert_eq!(long.join().unwrap(), 200);
    let written = await_lines(&trace, 2);
    assert!(user_text(&written[1]).contains("HELD_HEAD"));
    // The trace is not in start order here, and need not be: neither could read the other's writes.
    assert!(written[1]["at_ms"].as_u64() <= written[0]["at_ms"].as_u64());
    assert!(written[1]["first_byte_ms"].as_u64() > written[0]["at_ms"].as_u64());

    // 2. The long exchange's response has begun when the short one starts: the short one could
    //    read what the long one wrote, so its line follows the long one's, though it ended first.
    let (begun, head) = std::sync::mpsc::channel();
    let body = cached_request(MODEL, 2_000, "HELD_BODY long", false);
    let long_url = url.clone();
    let long = std::thread::spawn(move || {
        let mut response = client().post(&long_url).header("x-api-key", KEY).send(body.as_bytes()).unwrap();
        begun.send(()).unwrap();
        response.body_mut().read_to_string().unwrap()
    });
    upstream.arrived.recv().unwrap();
    head.recv().unwrap();
    assert_eq!(send("short after the long one began").join().unwrap(), 200);
    upstream.release.notify_one();
    assert_eq!(long.join().unwrap(), HeldUpstream::MESSAGE);
    proxy.stop();
    let written = trace_lines(&trace);
    assert_eq!(written.len(), 4);
    assert!(user_text(&written[2]).contains("HELD_BODY"), "{written:?}");
    assert!(user_text(&written[3]).contains("short after"), "{written:?}");
    assert!(written[2]["first_byte_ms"].as_u64() <= written[3]["at_ms"].as_u64());
    assert_eq!(written[2]["usage"]["output_tokens"], 1, "the long line has its usage");
    let _ = std::fs::remove_dir_all(&dir);
}

/// One request through `proxy` to `serve --compress`, asking for `encoding`, on a raw socket:
/// the response head and its de-chunked (still compressed) body.
fn compressed_exchange(proxy: &RunningProxy, encoding: &str, body: &str) -> (String, Vec<u8>) {
    let mut socket = TcpStream::connect(proxy.addr).unwrap();
    write!(
        socket,
        "POST /v1/messages HTTP/1.1\r\nhost: x\r\nx-api-key: {KEY}\r\naccept-encoding: {encoding}\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut received = Vec::new();
    socket.read_to_end(&mut received).unwrap();
    let split = received.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&received[..split]).to_ascii_lowercase();
    let payload = dechunk(&received[split..], &head);
    (head, payload)
}

#[test]
fn a_compressing_server_through_the_proxy_records_its_bodies_and_usage_in_every_encoding() {
    use forkcache_net::proxy::Encodings;
    let dir = scratch("compress");
    let server = Running::start(
        ServeConfig { trace: Some(dir.join("serve.jsonl")), compress: true, ..ServeConfig::default() },
        EndpointConfig::default(),
    );
    let proxy = RunningProxy::start(&server.url(""), Some(dir.join("proxy.jsonl")));
    let mut step = 0;
    let mut usages = Vec::new();
    for encoding in ["gzip", "br", "zstd"] {
        for stream in [false, true] {
            let (head, payload) = compressed_exchange(&proxy, encoding, &turn(0, step, stream));
            step += 1;
            assert!(head.contains(&format!("content-encoding: {encoding}")), "{head}");
            let plain =
                String::from_utf8(Encodings::parse(Some(encoding)).decode(&payload).unwrap()).unwrap();
            let usage: Usage = if stream {
                assert!(plain.ends_with("data: {\"type\":\"message_stop\"}\n\n"), "{plain}");
                let start = sse_events(&plain).into_iter().find(|(name, _)| name == "message_start").unwrap();
                serde_json::from_value(start.1["message"]["usage"].clone()).unwrap()
            } else {
                serde_json::from_str::<Value>(&plain)
                    .map(|m| serde_json::from_value(m["usage"].clone()).unwrap())
                    .unwrap()
            };
            usages.push(usage);
        }
    }
    let (stats, log) = proxy.stop();
    drop(server);
    assert_eq!(raw_bodies(&dir.join("proxy.jsonl")), raw_bodies(&dir.join("serve.jsonl")));
    let lines = trace_lines(&dir.join("proxy.jsonl"));
    assert_eq!(lines.len(), 6);
    // The first turn writes the 2,000-token system block; every later one reads it.
    assert_eq!(usages[0].cache_creation_input_tokens, 2_000);
    assert!(usages[1..].iter().all(|u| u.cache_read_input_tokens == 2_000), "{usages:?}");
    for (line, usage) in lines.iter().zip(&usages) {
        assert_eq!(line["usage"]["cache_read_input_tokens"], usage.cache_read_input_tokens, "{line}");
        assert_eq!(line["usage"]["cache_creation_input_tokens"], usage.cache_creation_input_tokens, "{line}");
        assert!(line.get("incomplete").is_none(), "{line}");
    }
    let workspace = &stats.workspaces[&key_fingerprint(KEY)];
    assert_eq!((workspace.compared, workspace.agreed), (6, 6), "{log}");
    let encodings: Vec<(&str, u64)> = stats.content_encodings.iter().map(|(n, c)| (n.as_str(), *c)).collect();
    assert_eq!(encodings, [("br", 2), ("gzip", 2), ("zstd", 2)]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_compressed_stream_is_flushed_per_event_so_a_hang_up_keeps_its_usage() {
    use forkcache_net::proxy::Encodings;
    let dir = scratch("compress-flush");
    // Modelled latency: a long reply streams for many seconds after message_start.
    let script = r#"{"rules": [], "default": {"text": "LONG", "output_tokens": 200000}}"#;
    let script = Script::from_json(script).unwrap();
    let server = Running::start(
        ServeConfig { script, latency: LatencyMode::Model, compress: true, ..ServeConfig::default() },
        EndpointConfig::default(),
    );
    let proxy = RunningProxy::start(&server.url(""), Some(dir.join("proxy.jsonl")));
    let body = cached_request(MODEL, 2_000, &"long answer please ".repeat(2_000), true);
    let mut socket = TcpStream::connect(proxy.addr).unwrap();
    write!(socket, "POST /v1/messages HTTP/1.1\r\nhost: x\r\naccept-encoding: gzip\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}", body.len()).unwrap();
    // Read until the compressed bytes so far decode to message_start (the encoder's own test,
    // serve::compress, shows each frame decodes alone), then hang up: the proxy's copy must hold
    // the usage too.
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let read = socket.read(&mut buffer).unwrap();
        assert!(read > 0, "the stream ended before message_start decoded");
        received.extend_from_slice(&buffer[..read]);
        let Some(split) = received.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
        // The whole chunks received so far, de-framed (the last may still be arriving).
        let payload = whole_chunks(&received[split + 4..]);
        let plain = Encodings::parse(Some("gzip")).decode(&payload).unwrap_or_default();
        if String::from_utf8_lossy(&plain).contains("message_start") {
            break;
        }
    }
    socket.shutdown(std::net::Shutdown::Both).unwrap();
    drop(socket);
    let (stats, _) = proxy.stop();
    server.stop();
    let line = &trace_lines(&dir.join("proxy.jsonl"))[0];
    assert_eq!(line["incomplete"], true, "{line}");
    assert_eq!(line["usage"]["cache_creation_input_tokens"], 2_000, "the proxy decoded the flushed events");
    assert_eq!(stats.workspaces["default"].incomplete, 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The data of every complete chunk at the start of a chunked body.
fn whole_chunks(mut rest: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(end) = rest.windows(2).position(|w| w == b"\r\n") {
        let Ok(size) = usize::from_str_radix(std::str::from_utf8(&rest[..end]).unwrap_or("").trim(), 16)
        else {
            break;
        };
        if size == 0 || rest.len() < end + 2 + size {
            break;
        }
        out.extend_from_slice(&rest[end + 2..end + 2 + size]);
        rest = &rest[(end + 4 + size).min(rest.len())..];
    }
    out
}

/// `forkcache proxy` with FORKCACHE_KEY_SALT: the exchange's workspace is the salted fingerprint
/// of its key, the key finds its own workspaces in the stats through the same salt, and neither
/// the public fingerprint nor the secret is shown.
#[test]
fn the_proxy_keys_fingerprints_with_the_salt_and_finds_a_key_s_stats_through_it() {
    let server = Running::start(ServeConfig::default(), EndpointConfig::default());
    let (mut child, addr) = proxy_process(|command| {
        command.args(["--upstream", &server.url("")]).env("FORKCACHE_KEY_SALT", "pepper-5678");
    });
    let agent = client();
    let body = cached_request(MODEL, 2_000, "hi", false);
    assert_eq!(post(&agent, &format!("http://{addr}/v1/messages"), Some(KEY), body.as_bytes()).status, 200);
    let salted = forkcache_engine::endpoint::KeySalt::new("pepper-5678").fingerprint(KEY);
    // The exchange is written and counted off the forwarding path: wait for it.
    let deadline = Instant::now() + Duration::from_secs(20);
    let stats = loop {
        let stats = agent.get(&format!("http://{addr}/forkcache/stats")).header("x-api-key", KEY).call();
        let text = stats.unwrap().body_mut().read_to_string().unwrap();
        let value: Value = serde_json::from_str(&text).unwrap();
        if value["workspaces"].as_object().is_some_and(|w| !w.is_empty()) || Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = child.kill();
    let _ = child.wait();
    let workspaces: Value = serde_json::from_str::<Value>(&stats).unwrap()["workspaces"].clone();
    assert_eq!(
        workspaces.as_object().map(|w| w.keys().cloned().collect::<Vec<_>>()),
        Some(vec![salted]),
        "{stats}"
    );
    assert!(!stats.contains(&key_fingerprint(KEY)) && !stats.contains("pepper"), "{stats}");
}
