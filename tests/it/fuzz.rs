//! "A clear error or a result, never a panic, never a hang": seeded byte-level mutations of
//! valid inputs fed to every entry point — `replay` (a trace of mutated lines), `serve` (mutated
//! bodies over HTTP from several clients at once), and `run`/`sweep` (mutated scenario and sweep
//! files). Each run is deterministic (ChaCha8 from a fixed seed); `FORKCACHE_FUZZ_SCALE=N`
//! multiplies the case counts for a longer search.

use std::sync::mpsc;
use std::time::Duration;

use rand::{RngExt as _, SeedableRng as _};
use rand_chacha::ChaCha8Rng;

use forkcache_engine::billing::PriceTable;
use forkcache_engine::endpoint::EndpointConfig;
use forkcache_ingest::replay::{ReplayConfig, replay};
use forkcache_ingest::trace::{TraceEntry, read_trace};
use forkcache_net::serve::ServeConfig;
use forkcache_report::sweep::SweepSpec;
use forkcache_scenario::{RunConfig, ScenarioSpec, run};

use crate::serve_harness::{Running, cached_request, client, post};

/// Mutated trace lines replayed per run (before scaling).
pub const REPLAY_CASES: usize = 100_000;
/// Mutated bodies sent to the server per run (before scaling).
pub const SERVE_CASES: usize = 4_000;
/// Mutated scenario and sweep files per run (before scaling).
pub const FILE_CASES: usize = 300;

fn scale() -> usize {
    std::env::var("FORKCACHE_FUZZ_SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(1).max(1)
}

/// Runs `work` on its own thread; a panic or a run past `limit` fails the test by name.
fn bounded<T: Send + 'static>(what: &str, limit: Duration, work: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, result) = mpsc::channel();
    let worker = std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(move || {
            let _ = done.send(work());
        })
        .expect("a thread");
    match result.recv_timeout(limit) {
        Ok(value) => {
            let _ = worker.join();
            value
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{what}: panicked"),
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: no result within {limit:?} (a hang)"),
    }
}

/// Valid request bodies to start from: plain, cached, streamed, tools, thinking, pre-warm.
fn seed_bodies() -> Vec<Vec<u8>> {
    let mut bodies: Vec<Vec<u8>> = vec![
        cached_request("claude-sonnet-4-6", 2_000, "hi", false).into_bytes(),
        cached_request("claude-opus-4-8", 3_000, "stream me", true).into_bytes(),
        br#"{"model":"claude-haiku-4-5","max_tokens":0,"cache_control":{"type":"ephemeral"},"messages":[{"role":"user","content":"warm"}]}"#.to_vec(),
        br#"{"model":"claude-sonnet-4-6","max_tokens":64,"tools":[{"name":"Read","description":"d","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto"},"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Read","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"ok","cache_control":{"type":"ephemeral","ttl":"1h"}}]}]}"#.to_vec(),
    ];
    let envelope = format!(
        r#"{{"at_ms":10,"workspace":"key-0011223344556677","first_byte_ms":12,"usage":{{"output_tokens":5}},"body":{}}}"#,
        cached_request("claude-sonnet-4-6", 1_500, "env", false)
    );
    bodies.push(envelope.into_bytes());
    bodies
}

/// Pieces a mutation may splice in: structure, extreme numbers, wrong types, markers, bad bytes.
const TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b",",
    b":",
    b"null",
    b"true",
    b"-1",
    b"0",
    b"1e999",
    b"18446744073709551615",
    b"18446744073709551616",
    b"-9223372036854775809",
    b"\"\\ud800\"",
    b"\"cache_control\":{\"type\":\"ephemeral\"}",
    b"\"forkcache_tokens\":999999999999",
    b"\"at_ms\":18446744073709551615",
    b"{\"forkcache_session\":{}}",
    b"\xff",
    b"\xc3",
    b"\n",
    b"\\",
];

/// One random mutation of `input`.
fn mutate(rng: &mut ChaCha8Rng, input: &[u8]) -> Vec<u8> {
    let mut bytes = input.to_vec();
    let rounds = rng.random_range(1..4);
    for _ in 0..rounds {
        let len = bytes.len().max(1);
        let at = rng.random_range(0..len).min(bytes.len());
        match rng.random_range(0..7) {
            0 => {
                if at < bytes.len() {
                    bytes[at] = rng.random();
                }
            }
            1 => {
                let end = (at + rng.random_range(1..64)).min(bytes.len());
                bytes.drain(at..end);
            }
            2 => {
                let end = (at + rng.random_range(1..256)).min(bytes.len());
                let copy = bytes[at..end].to_vec();
                bytes.splice(at..at, copy);
            }
            3 => {
                let token = TOKENS[rng.random_range(0..TOKENS.len())];
                bytes.splice(at..at, token.iter().copied());
            }
            4 => bytes.truncate(at),
            5 => {
                // Wrap a span in deep nesting.
                let depth = rng.random_range(100..3_000);
                bytes.splice(at..at, std::iter::repeat_n(b'[', depth));
                let close = (at + depth + rng.random_range(0..32)).min(bytes.len());
                bytes.splice(close..close, std::iter::repeat_n(b']', depth));
            }
            _ => {
                // A digit run becomes an extreme number.
                if let Some(start) = bytes[at..].iter().position(u8::is_ascii_digit).map(|p| p + at) {
                    let end = bytes[start..]
                        .iter()
                        .position(|b| !b.is_ascii_digit())
                        .map_or(bytes.len(), |p| p + start);
                    bytes.splice(start..end, b"99999999999999999999".iter().copied());
                }
            }
        }
    }
    bytes
}

/// `count` mutated bodies from the seeds, one per line (newlines inside a body split it, as a
/// torn trace would).
fn mutated_corpus(seed: u64, count: usize) -> Vec<Vec<u8>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let seeds = seed_bodies();
    (0..count)
        .map(|_| {
            let seed = rng.random_range(0..seeds.len());
            mutate(&mut rng, &seeds[seed])
        })
        .collect()
}

#[test]
fn fuzz_replay_reads_every_mutated_line_as_a_result_or_an_unreadable_line() {
    let count = REPLAY_CASES * scale();
    let corpus = mutated_corpus(12, count);
    let mut trace = Vec::new();
    for body in &corpus {
        trace.extend_from_slice(body);
        trace.push(b'\n');
    }
    let entries = read_trace(&trace).filter(|entry| !matches!(entry, TraceEntry::Session { .. })).count();
    let report = bounded("replay", Duration::from_secs(300), move || {
        // Mutated `at_ms` values put lines anywhere in time: a window as wide as the trace runs
        // them all in start order, as a sort would.
        let config = ReplayConfig { reorder_window: usize::MAX, ..ReplayConfig::default() };
        replay(&config, PriceTable::builtin(), &trace).expect("only --strict stops a replay")
    });
    assert_eq!(report.records.len() + report.unreadable.len(), entries, "every line is accounted for");
    let priced = report.records.iter().filter(|r| r.result.is_ok()).count();
    assert!(priced > count / 20, "the mutations leave many requests valid: {priced} of {count}");
    assert!(report.totals.rejected > 0 && !report.unreadable.is_empty(), "and break many");
    eprintln!(
        "fuzz replay: {count} mutated lines, {priced} priced, {} rejected, {} unreadable",
        report.totals.rejected,
        report.unreadable.len()
    );
    for record in &report.records {
        if let Err(error) = &record.result {
            assert!(!error.message.is_empty(), "line {}: an error says what is wrong", record.line);
        }
    }
}

#[test]
fn fuzz_serve_answers_every_mutated_body_with_a_message_or_an_api_error() {
    let count = SERVE_CASES * scale();
    let server = Running::start(ServeConfig::default(), EndpointConfig::default());
    let url = server.url("/v1/messages");
    let corpus = mutated_corpus(34, count);
    let clients = 4;
    let chunks: Vec<Vec<Vec<u8>>> =
        (0..clients).map(|c| corpus.iter().skip(c).step_by(clients).cloned().collect()).collect();
    let answered = bounded("serve", Duration::from_secs(300), move || {
        let workers: Vec<_> = chunks
            .into_iter()
            .map(|bodies| {
                let url = url.clone();
                std::thread::spawn(move || {
                    let agent = client();
                    for body in bodies {
                        let answer = post(&agent, &url, Some("fuzz"), &body);
                        assert!(
                            answer.status == 200 || (400..500).contains(&answer.status),
                            "status {} for {:?}: {}",
                            answer.status,
                            String::from_utf8_lossy(&body),
                            answer.body
                        );
                        if answer.status != 200 {
                            let (kind, message) = answer.error();
                            assert!(!kind.is_empty() && !message.is_empty(), "{}", answer.body);
                        }
                    }
                })
            })
            .collect();
        workers.into_iter().map(|worker| worker.join().is_ok()).filter(|ok| *ok).count()
    });
    assert_eq!(answered, clients, "every client thread finished without a failed check");
    let valid = cached_request("claude-sonnet-4-6", 2_000, "hi", false);
    assert_eq!(post(&client(), &server.url("/v1/messages"), Some("k"), valid.as_bytes()).status, 200);
    let summary = server.stop();
    let totals = summary.stats.totals();
    assert_eq!(totals.requests + totals.rejected, count as u64 + 1, "every body was counted");
    eprintln!("fuzz serve: {count} mutated bodies, {} priced, {} rejected", totals.requests, totals.rejected);
}

fn fixture(path: &str) -> Vec<u8> {
    std::fs::read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).expect("a fixture")
}

#[test]
fn fuzz_run_and_sweep_files_give_an_error_naming_a_field_or_a_result() {
    let count = FILE_CASES * scale();
    let seeds = [fixture("fixtures/scenarios/forks.json"), fixture("fixtures/scenarios/main-loop.json")];
    let sweep = fixture("fixtures/sweeps/default.json");
    let outcomes = bounded("run/sweep", Duration::from_secs(300), move || {
        let mut rng = ChaCha8Rng::seed_from_u64(56);
        let prices = PriceTable::builtin();
        let (mut ran, mut refused) = (0, 0);
        for _ in 0..count {
            let pick = rng.random_range(0..seeds.len());
            let scenario = mutate(&mut rng, &seeds[pick]);
            let outcome = std::str::from_utf8(&scenario)
                .map_err(|e| e.to_string())
                .and_then(|text| ScenarioSpec::from_json(text).map_err(|e| e.to_string()))
                .and_then(|spec| run(&spec, &RunConfig::for_spec(&spec), &prices).map_err(|e| e.to_string()));
            match outcome {
                Ok(_) => ran += 1,
                Err(message) => {
                    assert!(!message.is_empty());
                    refused += 1;
                }
            }
            let sweep = mutate(&mut rng, &sweep);
            if let Ok(text) = std::str::from_utf8(&sweep) {
                // Parsing and validating only: a valid grid is hundreds of runs.
                let _ = SweepSpec::from_json(text).map(|spec| spec.cells().len());
            }
        }
        (ran, refused)
    });
    assert!(outcomes.0 > 0 && outcomes.1 > 0, "both outcomes occur: {outcomes:?}");
    eprintln!(
        "fuzz run/sweep: {count} mutated scenarios, {} ran, {} refused; {count} sweeps read",
        outcomes.0, outcomes.1
    );
}
