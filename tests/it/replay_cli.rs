//! `forkcache replay TRACE --json`, run as a program (DESIGN §5, issue 2 item 7).
//!
//! `tests/data/replay_mixed.jsonl` (Sonnet 4.6; D = one marked 10,000-token block, cold ttft
//! 400 + 200 = 600 ms):
//!
//! | line | index | what | start |
//! |---|---|---|---|
//! | 1 | 0 | raw body D | 0 (first line) |
//! | 2 | 1 | envelope, D | 100 |
//! | 3 | 2 | envelope, key sk-b, first byte 5,000, D | 1,000 |
//! | 4 | 3 | envelope, key sk-b, D | 4,999 |
//! | 5 | 4 | envelope, key sk-b, D as a string | 5,000 |
//! | 6 | – | not JSON: unreadable, skipped (exit 3) | – |
//! | 7 | – | blank | – |
//! | 8 | 5 | envelope, 5 markers | 6,000 |
//! | 9 | 6 | raw body: D's block unmarked + a marked 100-token question | 6,000 + 30,000 = 36,000 |

use std::process::Command;

use serde_json::Value;

const TRACE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/replay_mixed.jsonl");

/// The program's standard output for `replay TRACE --json` plus `flags`; it exits 3, as line 6
/// is unreadable.
fn replay_json(flags: &[&str]) -> Vec<u8> {
    let output = Command::new(env!("CARGO_BIN_EXE_forkcache"))
        .args(["replay", TRACE, "--json"])
        .args(flags)
        .output()
        .expect("the binary runs");
    assert_eq!(output.status.code(), Some(3), "{}", String::from_utf8_lossy(&output.stderr));
    output.stdout
}

fn requests() -> Vec<Value> {
    let report: Value = serde_json::from_slice(&replay_json(&[])).expect("--json prints JSON");
    report["requests"].as_array().expect("a requests array").clone()
}

/// (read, 5m, 1h, uncached) of a priced request.
fn usage(request: &Value) -> [u64; 4] {
    let usage = &request["usage"];
    let field = |value: &Value| value.as_u64().unwrap_or_else(|| panic!("not a count in {request}"));
    [
        field(&usage["cache_read_input_tokens"]),
        field(&usage["cache_creation"]["ephemeral_5m_input_tokens"]),
        field(&usage["cache_creation"]["ephemeral_1h_input_tokens"]),
        field(&usage["input_tokens"]),
    ]
}

#[test]
fn replay_json_twice_gives_identical_bytes() {
    for flags in [&[][..], &["--policy", "longest-prefix"], &["--billing", "seed", "--identity", "wire"]] {
        let first = replay_json(flags);
        assert!(!first.is_empty());
        assert_eq!(first, replay_json(flags), "{flags:?}");
    }
}

#[test]
fn every_line_is_priced_in_start_time_order() {
    let requests = requests();
    assert_eq!(requests.len(), 7, "blank and unreadable lines are skipped");
    let starts: Vec<u64> = requests.iter().map(|r| r["at_ms"].as_u64().unwrap()).collect();
    assert_eq!(starts, [0, 100, 1_000, 4_999, 5_000, 6_000, 36_000]);
    // 0: cold write. 1: at 100 the entry is not visible until 600 → written again.
    assert_eq!(usage(&requests[0]), [0, 10_000, 0, 0]);
    assert_eq!(usage(&requests[1]), [0, 10_000, 0, 0]);
    assert_eq!(requests[1]["miss"]["cause"], "not_yet_visible");
    // 2: another workspace, nothing shared. 3: its response began at 5,000 (not 1,600):
    // at 4,999 it is not visible. 4: at 5,000 it is (the string body is the same request).
    assert_eq!(usage(&requests[2]), [0, 10_000, 0, 0]);
    assert_eq!(requests[2]["miss"], Value::Null);
    assert_eq!(usage(&requests[3]), [0, 10_000, 0, 0]);
    assert_eq!(usage(&requests[4]), [10_000, 0, 0, 0]);
    // 6: the default workspace's entry (written at 0, rewritten at 100) is alive at 36,000:
    // read 10,000, write the question's 100.
    assert_eq!(usage(&requests[6]), [10_000, 100, 0, 0]);
}

#[test]
fn a_malformed_line_is_reported_with_its_line_number_and_the_replay_goes_on() {
    let report: Value = serde_json::from_slice(&replay_json(&[])).unwrap();
    let unreadable = report["unreadable"].as_array().expect("an unreadable list");
    assert_eq!(unreadable.len(), 1);
    assert_eq!(unreadable[0]["line"], 6);
    let message = unreadable[0]["message"].as_str().expect("a message");
    assert!(message.starts_with("not JSON"), "{message}");
    assert!(report["requests"][6].get("usage").is_some(), "the lines after it are priced");
}

#[test]
fn a_rejected_request_has_an_error_and_no_usage() {
    let requests = requests();
    let rejected = requests[5].as_object().expect("an object");
    assert_eq!(rejected["error"]["type"], "invalid_request_error");
    assert_eq!(
        rejected["error"]["message"],
        "A maximum of 4 blocks with cache_control may be provided. Found 5."
    );
    for absent in ["usage", "cost_usd", "cost_nanousd", "token_equivalents", "miss"] {
        assert!(!rejected.contains_key(absent), "{absent} on a rejected request");
    }
    let report: Value = serde_json::from_slice(&replay_json(&[])).unwrap();
    assert_eq!(
        (report["totals"]["requests"].as_u64(), report["totals"]["rejected"].as_u64()),
        (Some(6), Some(1))
    );
}

/// A line marked `"prewarm": true` (the account's traffic an import stands in for) is run into
/// the cache but is not a request of the replay: not listed, not counted, not billed, and the
/// listed requests keep consecutive indexes.
#[test]
fn a_prewarm_line_warms_the_cache_and_is_not_a_request() {
    use forkcache_engine::billing::PriceTable;
    use forkcache_ingest::replay::{ReplayConfig, replay};
    let system = r#""system":[{"type":"text","text":"stable","forkcache_tokens":2000,"cache_control":{"type":"ephemeral"}}]"#;
    let body = |text: &str, max_tokens: u32| {
        format!(
            r#"{{"model":"claude-sonnet-4-6","max_tokens":{max_tokens},{system},"messages":[{{"role":"user","content":"{text}"}}]}}"#
        )
    };
    let trace = [
        format!(
            r#"{{"at_ms":0,"first_byte_ms":0,"workspace":"w","prewarm":true,"body":{}}}"#,
            body("warm", 0)
        ),
        format!(r#"{{"at_ms":10,"first_byte_ms":10,"workspace":"w","body":{}}}"#, body("hello", 1)),
    ]
    .join("\n");
    let report = replay(&ReplayConfig::default(), PriceTable::builtin(), trace.as_bytes()).unwrap();
    assert_eq!(report.records.len(), 1);
    assert_eq!((report.records[0].index, report.records[0].line), (0, 2));
    let usage = report.records[0].result.as_ref().unwrap().usage;
    // The pre-warm wrote the 2,000-token system prompt; the request reads it.
    assert_eq!(usage.cache_read_input_tokens, 2_000);
    assert_eq!(report.totals.requests, 1);
    assert_eq!(report.totals.usage.cache_creation_input_tokens, 0, "the pre-warm's write is not billed");
}
