//! The `forkcache serve` command: prints where it listens (port 0 works), logs each request,
//! stops after `--max-requests` with a summary, writes a trace `forkcache replay` prices to the
//! same usage, and refuses a broken script naming the field.

use std::io::{BufRead as _, BufReader, Read as _};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::serve::tempfile;
use crate::serve_harness::{cached_request, client, post};

fn forkcache() -> Command {
    Command::new(env!("CARGO_BIN_EXE_forkcache"))
}

/// A running `forkcache serve` started as `command` (its stdout piped), its standard output after
/// the first line, and the address that line names.
fn listening(mut command: Command) -> (std::process::Child, BufReader<std::process::ChildStdout>, String) {
    let mut child = command.stdout(Stdio::piped()).spawn().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    let addr = first
        .trim()
        .strip_prefix("forkcache serve listening on http://")
        .unwrap_or_else(|| panic!("{first}"));
    (child, stdout, addr.to_string())
}

#[test]
fn serve_prints_its_address_stops_after_max_requests_and_its_trace_replays() {
    let trace = tempfile("cli");
    let mut command = forkcache();
    command.args(["serve", "--addr", "127.0.0.1:0", "--max-requests", "3", "--trace"]).arg(&trace);
    let (mut child, mut stdout, addr) = listening(command);
    let url = format!("http://{addr}/v1/messages");
    let agent = client();
    let body = cached_request("claude-sonnet-4-6", 2_000, "hi", false);
    let usages: Vec<Value> = (0..2)
        .map(|_| serde_json::to_value(post(&agent, &url, Some("cli"), body.as_bytes()).usage()).unwrap())
        .collect();
    assert_eq!(post(&agent, &url, Some("cli"), b"{").status, 400);
    let status = wait(&mut child);
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    assert!(status.success(), "{rest}");
    let request_lines = rest.lines().filter(|l| l.starts_with("req_")).count();
    assert_eq!(request_lines, 3, "{rest}");
    // The summary row: 2 priced, 1 rejected; read 2,000, written 2,000, uncached 7 + 7.
    let workspace = format!("{} ", forkcache_ingest::trace::key_fingerprint("cli"));
    let row = rest.lines().find(|l| l.starts_with(&workspace)).unwrap_or_else(|| panic!("{rest}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[1..6], ["2", "1", "2000", "2000", "14"], "{row}");

    let replayed = forkcache().args(["replay", "--json"]).arg(&trace).output().unwrap();
    assert!(replayed.status.success());
    let report: Value = serde_json::from_slice(&replayed.stdout).unwrap();
    let requests = report["requests"].as_array().unwrap();
    assert_eq!(requests[0]["usage"], usages[0]);
    assert_eq!(requests[1]["usage"], usages[1]);
    assert_eq!(requests[2]["error"]["type"], "invalid_request_error");
    let _ = std::fs::remove_file(trace);
}

#[test]
fn serve_refuses_a_broken_script_naming_the_field() {
    let script = tempfile("bad-script");
    std::fs::write(&script, r#"{"rules": [{"when": {"tool": "Agent"}, "reply": {"text": "x"}}]}"#).unwrap();
    let output =
        forkcache().args(["serve", "--addr", "127.0.0.1:0", "--script"]).arg(&script).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "invalid input");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("rules[0].when.tool: unknown field `tool`"), "{stderr}");
    let _ = std::fs::remove_file(script);
}

/// Waits for the process, killing it after 30 s so a hung server fails the test instead of CI.
fn wait(child: &mut std::process::Child) -> std::process::ExitStatus {
    for _ in 0..300 {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap();
    panic!("forkcache serve did not stop after --max-requests");
}

#[test]
fn serve_listens_on_a_host_name() {
    let mut command = forkcache();
    command.args(["serve", "--addr", "localhost:0", "--max-requests", "1"]);
    let (mut child, _, addr) = listening(command);
    // `localhost` resolves to a loopback address, IPv4 or IPv6.
    let ip: std::net::SocketAddr = addr.parse().unwrap_or_else(|e| panic!("{addr}: {e}"));
    assert!(ip.ip().is_loopback(), "{addr}");
    let body = cached_request("claude-sonnet-4-6", 2_000, "hi", false);
    let reply = post(&client(), &format!("http://{addr}/v1/messages"), Some("cli"), body.as_bytes());
    assert_eq!(reply.status, 200);
    assert!(wait(&mut child).success());
}

/// A key salt from the environment keys the workspace fingerprints of the stats and the trace,
/// and the trace says a salt was used without holding it.
#[test]
fn a_key_salt_keys_the_fingerprints_and_is_never_written() {
    let trace = tempfile("salted");
    let mut command = forkcache();
    command.args(["serve", "--addr", "127.0.0.1:0", "--max-requests", "1", "--trace"]).arg(&trace);
    command.env("FORKCACHE_KEY_SALT", "pepper-1234");
    let (mut child, mut stdout, addr) = listening(command);
    let body = cached_request("claude-sonnet-4-6", 2_000, "hi", false);
    assert_eq!(
        post(&client(), &format!("http://{addr}/v1/messages"), Some("cli"), body.as_bytes()).status,
        200
    );
    assert!(wait(&mut child).success());
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    let salted = forkcache_engine::endpoint::KeySalt::new("pepper-1234").fingerprint("cli");
    let public = forkcache_ingest::trace::key_fingerprint("cli");
    assert!(rest.contains(&salted) && !rest.contains(&public), "{rest}");
    let text = std::fs::read_to_string(&trace).unwrap();
    let lines: Vec<Value> = text.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(lines[0]["forkcache_session"]["settings"]["key_salted"], true);
    assert_eq!(lines[1]["workspace"], salted.as_str());
    assert!(!text.contains("pepper") && !text.contains(&public), "{text}");
    let _ = std::fs::remove_file(trace);
}
