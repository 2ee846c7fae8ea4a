//! Issue 29's regressions, one test per item (named `itemN_…`): traces that always replay, no
//! endless input, no secret on disk, tenants that cannot slow each other. Loopback only; every
//! load is bounded in count and time.

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::process::Output;

use serde_json::Value;

use forkcache_engine::endpoint::EndpointConfig;
use forkcache_ingest::trace::key_fingerprint;
use forkcache_net::serve::ServeConfig;

use crate::proxy::{RunningProxy, scratch};
use crate::serve::tempfile;
use crate::serve_harness::{Running, cached_request, client, post};

const SONNET: &str = "claude-sonnet-4-6";
const KEY: &str = "sk-ant-api03-RELIABILITY-SECRET-0123456789";

fn forkcache(args: &[&str], stdin: &[u8]) -> Output {
    crate::support::run_binary(args, stdin)
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

// ---- item 1: a refused body that is not strict JSON ----

#[test]
fn item1_bodies_refused_for_an_out_of_range_number_or_a_lone_surrogate_replay_as_refused() {
    let trace = tempfile("item29-1");
    let _ = std::fs::remove_file(&trace);
    let server = Running::start(
        ServeConfig { trace: Some(trace.clone()), ..ServeConfig::default() },
        EndpointConfig::default(),
    );
    let url = server.url("/v1/messages");
    let messages = r#""messages":[{"role":"user","content":"hi"}]"#;
    let bodies = [
        format!(r#"{{"model":"{SONNET}","max_tokens":1e400,{messages}}}"#),
        format!(r#"{{"model":"{SONNET}","max_tokens":1,"system":"\ud800",{messages}}}"#),
    ];
    for body in &bodies {
        let answer = post(&client(), &url, Some(KEY), body.as_bytes());
        assert_eq!(answer.status, 400, "{}", answer.body);
    }
    server.stop();
    let output = forkcache(&["replay", trace.to_str().unwrap(), "--json"], b"");
    // Before: both lines were written as objects a full parse refuses, replay exited 3 with 0
    // rejected. Now both read, and each is the same refusal serve answered.
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let requests = report["requests"].as_array().unwrap();
    assert_eq!(requests.len(), 2);
    for request in requests {
        assert_eq!(request["error"]["type"], "invalid_request_error", "{request}");
    }
    let _ = std::fs::remove_file(&trace);
}

// ---- item 3: a transcript line that is not UTF-8 ----

#[test]
fn item3_import_skips_and_counts_a_line_torn_inside_a_character_and_reads_the_other_files() {
    let dir = scratch("item29-3");
    let good = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/claude_code/every_rule/s1.jsonl");
    std::fs::copy(good, dir.join("a.jsonl")).unwrap();
    // A session file whose last line was cut inside "é" (0xc3 0xa9).
    std::fs::write(dir.join("b.jsonl"), b"{\"type\":\"user\",\"message\":\"caf\xc3").unwrap();
    let output = forkcache(&["import", "claude-code", dir.to_str().unwrap(), "--json"], b"");
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let document: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(!document["sessions"].as_array().unwrap().is_empty(), "the good file is still read");
    assert!(stderr(&output).contains("b.jsonl:1: torn last line"), "{}", stderr(&output));
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- item 7: --threads is bounded ----

#[test]
fn item7_a_million_threads_is_refused_at_once_on_every_command() {
    for command in [
        &["replay", "-", "--threads", "1000000"][..],
        &["sweep", "-", "--threads", "1000000"],
        &["report", "--threads", "0"],
    ] {
        let started = std::time::Instant::now();
        let output = forkcache(command, b"");
        assert_eq!(output.status.code(), Some(2), "{command:?}: {}", stderr(&output));
        assert!(stderr(&output).contains("expected 1 to 1024"), "{command:?}: {}", stderr(&output));
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "{command:?}");
    }
}

// ---- item 8: credentials in --upstream ----

#[test]
fn item8_upstream_credentials_are_in_no_502_trace_or_log() {
    let dir = scratch("item29-8");
    // A port that was just free: nothing listens there.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let proxy =
        RunningProxy::start(&format!("http://user:PASSWORD-42@{closed}"), Some(dir.join("proxy.jsonl")));
    let answer = post(
        &client(),
        &proxy.url("/v1/messages"),
        Some(KEY),
        cached_request(SONNET, 10, "hi", false).as_bytes(),
    );
    let (_, log) = proxy.stop();
    assert_eq!(answer.status, 502);
    assert!(
        answer.body.contains(&format!("http://{closed}")),
        "the upstream is still named: {}",
        answer.body
    );
    let trace = std::fs::read_to_string(dir.join("proxy.jsonl")).unwrap();
    for (what, text) in [("502 body", &answer.body), ("trace", &trace), ("log", &log)] {
        assert!(!text.contains("PASSWORD-42") && !text.contains("user:"), "{what}: {text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- item 9: an upstream that echoes the key ----

/// An upstream that answers every request with a 401 whose message echoes the request's key
/// header, then closes: `requests` of them.
fn echoing_upstream(requests: usize) -> (String, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let thread = std::thread::spawn(move || {
        for _ in 0..requests {
            let (mut stream, _) = listener.accept().unwrap();
            let head = read_head(&mut stream);
            let key =
                head.lines().find_map(|line| line.strip_prefix("x-api-key: ")).unwrap_or("").to_string();
            let body = format!(
                r#"{{"type":"error","error":{{"type":"authentication_error","message":"invalid x-api-key: {key}; did you mean sk-ant-api03-OTHER-KEY?"}}}}"#
            );
            let answer = format!(
                "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            stream.write_all(answer.as_bytes()).unwrap();
        }
    });
    (url, thread)
}

/// Reads a request's head and its declared body, returning the head.
fn read_head(stream: &mut TcpStream) -> String {
    let mut bytes = Vec::new();
    let mut byte = [0u8; 1];
    while !bytes.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap() == 1 {
        bytes.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&bytes).to_ascii_lowercase().replace(&KEY.to_ascii_lowercase(), KEY);
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length: "))
        .map_or(0, |n| n.trim().parse().unwrap());
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).unwrap();
    head
}

#[test]
fn item9_a_key_an_upstream_echoes_is_scrubbed_from_the_trace_and_the_log() {
    let dir = scratch("item29-9");
    let (upstream, thread) = echoing_upstream(1);
    let proxy = RunningProxy::start(&upstream, Some(dir.join("proxy.jsonl")));
    let answer = post(
        &client(),
        &proxy.url("/v1/messages"),
        Some(KEY),
        cached_request(SONNET, 10, "hi", false).as_bytes(),
    );
    let (_, log) = proxy.stop();
    thread.join().unwrap();
    // The client gets the upstream's answer as it was (it is the client's own key).
    assert_eq!(answer.status, 401);
    let trace = std::fs::read_to_string(dir.join("proxy.jsonl")).unwrap();
    for (what, text) in [("trace", &trace), ("log", &log)] {
        assert!(!text.contains(KEY) && !text.contains("sk-ant-api03-OTHER"), "{what}: {text}");
    }
    let line = &crate::proxy::trace_lines(&dir.join("proxy.jsonl"))[0];
    assert_eq!(line["error"]["message"], "invalid x-api-key: [scrubbed]; did you mean [scrubbed]?");
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- item 11: a key that is not UTF-8 ----

/// Posts `body` on a fresh connection with raw header bytes; the answer's status and body.
fn post_raw(addr: &str, path: &str, key: &[u8], body: &[u8]) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    let mut request = format!("POST {path} HTTP/1.1\r\nhost: {addr}\r\nx-api-key: ").into_bytes();
    request.extend_from_slice(key);
    request.extend_from_slice(
        format!(
            "\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    request.extend_from_slice(body);
    stream.write_all(&request).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer.get(9..12).and_then(|code| code.parse().ok()).unwrap_or(0);
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, body)| body).to_string();
    (status, body)
}

#[test]
fn item11_a_key_that_is_not_utf8_is_refused_with_a_401_not_merged_with_another() {
    let server = Running::default_server();
    let addr = server.addr.to_string();
    let body = cached_request(SONNET, 10, "hi", false);
    for key in [&b"tenant-\xff"[..], b"tenant-\xfe"] {
        let (status, answer) = post_raw(&addr, "/v1/messages", key, body.as_bytes());
        assert_eq!(status, 401, "{answer}");
        assert!(
            answer.contains(r#""type":"authentication_error""#) && answer.contains("not UTF-8"),
            "{answer}"
        );
    }
    assert_eq!(post_raw(&addr, "/v1/messages", b"tenant-ok", body.as_bytes()).0, 200);
    let summary = server.stop();
    let keyed: Vec<&String> =
        summary.stats.workspaces.keys().filter(|name| name.starts_with("key-")).collect();
    assert_eq!(keyed, [&key_fingerprint("tenant-ok")], "only the UTF-8 key has a workspace");
    assert!(!summary.stats.workspaces.contains_key(&key_fingerprint("tenant-\u{fffd}")));
}

// ---- item 5: no endless input ----

#[test]
fn item5_every_file_input_is_capped_with_an_error_naming_the_file_or_line_and_the_flag() {
    // /dev/zero never ends and holds no newline: before the cap each command grew by about a
    // gigabyte a second. A 1 MB cap refuses each within a second or so.
    let no_newline = std::env::temp_dir().join(format!("forkcache-item29-5-{}", std::process::id()));
    std::fs::write(&no_newline, vec![b'x'; 1_500_000]).unwrap();
    let file = no_newline.to_str().unwrap();
    let cases: [(&[&str], &str); 7] = [
        (&["run", "/dev/zero"], "/dev/zero is longer than the input cap of 1000000 bytes"),
        (&["sweep", "/dev/zero"], "/dev/zero is longer than the input cap of 1000000 bytes"),
        (&["serve", "--script", "/dev/zero"], "/dev/zero is longer than the input cap of 1000000 bytes"),
        (&["prices", "--prices", "/dev/zero"], "/dev/zero is longer than the input cap of 1000000 bytes"),
        (&["explain", "/dev/zero", "--request", "0"], "line 1 is longer than the input cap of 1000000 bytes"),
        (&["replay", file], "line 1 is longer than the input cap of 1000000 bytes"),
        (&["import", "claude-code", file], "line 1 is longer than the input cap of 1000000 bytes"),
    ];
    for (args, expected) in cases {
        let started = std::time::Instant::now();
        let output = forkcache(&[args, &["--max-input-bytes", "1000000"]].concat(), b"");
        assert_eq!(output.status.code(), Some(1), "{args:?}: {}", stderr(&output));
        let err = stderr(&output);
        assert!(err.contains(expected) && err.contains("--max-input-bytes"), "{args:?}: {err}");
        assert!(started.elapsed() < std::time::Duration::from_secs(20), "{args:?}");
    }
    // Raised past the line, the same file reads: as one unreadable line (it is not JSON), and
    // since no line was a request, as a file that is not a trace (exit 1, not a cap's error).
    let output = forkcache(&["replay", file, "--max-input-bytes", "2000000"], b"");
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("no request read (1 unreadable lines)"), "{}", stderr(&output));
    let _ = std::fs::remove_file(&no_newline);
}

// ---- item 13: --max-requests under concurrency ----

#[test]
fn item13_max_requests_answers_and_traces_exactly_that_many_under_16_clients() {
    let trace = tempfile("item29-13");
    let _ = std::fs::remove_file(&trace);
    let config =
        ServeConfig { max_requests: Some(100), trace: Some(trace.clone()), ..ServeConfig::default() };
    let server = Running::start(config, EndpointConfig::default());
    let url = server.url("/v1/messages");
    // 16 clients × 10 requests = 160 tries for 100 answers: each client stops at its first
    // refusal (529 past the limit, or a connection the stopped server closed).
    let clients: Vec<_> = (0..16)
        .map(|client_number| {
            let url = url.clone();
            std::thread::spawn(move || {
                let agent = client();
                let body = cached_request(SONNET, 10, &format!("client {client_number}"), false);
                let mut answered = 0u64;
                for _ in 0..10 {
                    let sent = agent.post(&url).header("x-api-key", KEY).send(body.as_bytes());
                    match sent.map(|response| response.status().as_u16()) {
                        Ok(200) => answered += 1,
                        _ => break,
                    }
                }
                answered
            })
        })
        .collect();
    let answered: u64 = clients.into_iter().map(|client| client.join().unwrap()).sum();
    let summary = server.wait();
    assert_eq!(answered, 100, "clients were answered exactly --max-requests times");
    assert_eq!(summary.stats.messages_requests(), 100);
    let traced = std::fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .filter(|line| !line.contains("forkcache_session"))
        .count();
    assert_eq!(traced, 100);
    let _ = std::fs::remove_file(&trace);
}

// ---- shape: what hyper refuses before any handler runs ----

/// Sends `request` raw on a fresh connection; the whole answer (the server closes after it).
fn exchange_raw(addr: &str, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.write_all(request).unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    String::from_utf8(answer).unwrap()
}

#[test]
fn shape_malformed_http_gets_the_apis_error_json_on_serve_and_proxy() {
    let server = Running::default_server();
    let proxy = RunningProxy::start(&server.url(""), None);
    let long_uri = format!("GET /{} HTTP/1.1\r\nhost: x\r\n\r\n", "a".repeat(70_000));
    let cases: [(&[u8], u16); 4] = [
        (b"GARBAGE \x01\x02 HTTP/1.1\r\n\r\n", 400),
        (b"POST /v1/messages HTTP/1.1\r\nhost: x\r\nno colon here\r\n\r\n", 400),
        (b"GET / HTTP/9.9\r\n\r\n", 400),
        (long_uri.as_bytes(), 414),
    ];
    for addr in [server.addr.to_string(), proxy.addr.to_string()] {
        for (request, status) in cases {
            let answer = exchange_raw(&addr, request);
            let (head, body) = answer.split_once("\r\n\r\n").unwrap();
            assert!(head.starts_with(&format!("HTTP/1.1 {status} ")), "{head}");
            assert!(head.contains("content-type: application/json"), "{head}");
            assert!(head.contains(&format!("content-length: {}", body.len())), "{head}");
            let error: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
            assert_eq!(error["type"], "error", "{body}");
            assert_eq!(error["error"]["type"], "invalid_request_error", "{body}");
        }
        // A well-formed request on the same server is answered as before.
        let answer = exchange_raw(&addr, b"GET /v1/models HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
        assert!(answer.starts_with("HTTP/1.1 200 OK") || answer.starts_with("HTTP/1.1 502"), "{answer}");
    }
    proxy.stop();
}
