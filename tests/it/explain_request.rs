//! `explain TRACE --request N`: the miss, both requests' bytes around the first divergence, and
//! the fix with its saving. Sonnet 4.6: 5-minute writes $3.75, reads $0.30 per MTok, so a token
//! read instead of written saves 3,750 − 300 = 3,450 nano-dollars.

use serde_json::{Value, json};

use forkcache_engine::PriceTable;
use forkcache_engine::cache::MissCause;
use forkcache_engine::verify::DivergenceCause;
use forkcache_ingest::explain::{ExplainError, explain_request};
use forkcache_ingest::replay::ReplayConfig;

use crate::support::{Body, bp, text, tool, user};

/// A trace of raw bodies, one per line (30 s apart).
fn trace(bodies: &[Body]) -> String {
    bodies.iter().map(|body| format!("{}\n", body.0)).collect()
}

fn explain(bodies: &[Body], index: usize) -> forkcache_ingest::explain::RequestExplanation {
    explain_request(&ReplayConfig::default(), PriceTable::builtin(), &trace(bodies), index).unwrap()
}

/// A marked system prompt of 2,000 tokens holding `now`, and a marked 100-token question.
fn with_clock(now: &str) -> Body {
    let system = json!([bp(
        json!({"type": "text", "text": format!("You are terse. Now: {now}"), "forkcache_tokens": 2_000})
    )]);
    Body::blocks(vec![bp(text("q", 100))]).with("system", system)
}

#[test]
fn a_timestamp_in_the_system_prompt_is_shown_and_moved_out() {
    let explained = explain(&[with_clock("2026-11-24 12:00"), with_clock("2026-11-24 12:05")], 1);
    let miss = explained.miss.clone().unwrap();
    assert_eq!((miss.cause, miss.path.as_str()), (MissCause::PrefixChanged, "system[0]"));
    assert_eq!(explained.compared_with, Some(0));
    let divergence = explained.comparison.as_ref().unwrap().divergence.clone().unwrap();
    assert_eq!((divergence.path.as_str(), divergence.cause), ("system[0].text", DivergenceCause::SystemText));
    assert!(divergence.before.ends_with("Now: 2026-11-24 12:0"), "{:?}", divergence.before);
    assert!(divergence.a.starts_with('0') && divergence.b.starts_with('5'));
    let fix = explained.fix.clone().unwrap();
    assert!(fix.advice.starts_with("move the timestamp out of the system prompt"), "{}", fix.advice);
    // The first request cached 2,100 tokens; all of them were written again: 2,100 × 3,450.
    assert_eq!((fix.tokens_saved, fix.saving_nanousd), (2_100, 7_245_000));
    let text = explained.to_text();
    assert!(
        text.contains("fix: move the timestamp") && text.contains("saving: 2100 tokens, $0.007245"),
        "{text}"
    );
}

/// A 1,000-token tool whose schema lists `properties` in the given order, marked.
fn tools_with(keys: [&str; 2]) -> Value {
    let properties: serde_json::Map<String, Value> =
        keys.iter().map(|key| (key.to_string(), json!({"type": "string"}))).collect();
    let mut read = tool("Read", 1_000);
    read["input_schema"] = json!({"type": "object", "properties": properties});
    json!([bp(read)])
}

#[test]
fn a_schema_whose_keys_move_is_told_to_sort_them() {
    let body = |keys| Body::blocks(vec![bp(text("q", 2_000))]).with("tools", tools_with(keys));
    let explained = explain(&[body(["path", "limit"]), body(["limit", "path"])], 1);
    let divergence = explained.comparison.as_ref().unwrap().divergence.clone().unwrap();
    assert_eq!(divergence.cause, DivergenceCause::KeyOrder);
    let fix = explained.fix.unwrap();
    assert!(fix.advice.starts_with("sort the keys of tools[0]"), "{}", fix.advice);
}

#[test]
fn content_no_marker_covered_gets_a_marker() {
    // Request 0 sends 2,000 unmarked tokens; request 1 repeats them and marks its question:
    // a marker there would have let it read the 2,000 it wrote (2,000 × 3,450 saved).
    let bodies =
        [Body::blocks(vec![text("doc", 2_000)]), Body::blocks(vec![text("doc", 2_000), bp(text("q", 100))])];
    let explained = explain(&bodies, 1);
    assert_eq!(explained.miss.as_ref().unwrap().cause, MissCause::NotWritten);
    let fix = explained.fix.unwrap();
    assert!(fix.advice.starts_with("put a cache_control marker"), "{}", fix.advice);
    assert_eq!((fix.tokens_saved, fix.saving_nanousd), (2_000, 6_900_000));
}

#[test]
fn a_request_without_a_miss_has_no_fix_and_bad_indexes_say_why() {
    let bodies = [with_clock("12:00"), user_only()];
    let explained = explain(&bodies, 0);
    assert_eq!((explained.miss, explained.fix, explained.compared_with), (None, None, None));
    let err =
        explain_request(&ReplayConfig::default(), PriceTable::builtin(), &trace(&bodies), 5).unwrap_err();
    assert!(matches!(err, ExplainError::NoSuchRequest { index: 5, count: 2 }), "{err}");
    // Request 1 has no max_tokens: the API refuses it, so there is nothing to explain.
    let err =
        explain_request(&ReplayConfig::default(), PriceTable::builtin(), &trace(&bodies), 1).unwrap_err();
    assert_eq!(
        err.to_string(),
        "request 1 (line 2) was rejected: invalid_request_error (400): max_tokens: Field required"
    );
}

fn user_only() -> Body {
    Body(json!({"model": crate::support::SONNET, "messages": [user(vec![text("q", 10)])]}))
}

#[test]
fn the_command_prints_the_fix_and_wants_b_or_request() {
    let path = crate::serve::tempfile("explain-clock.jsonl");
    std::fs::write(&path, trace(&[with_clock("2026-11-24 12:00"), with_clock("2026-11-24 12:05")])).unwrap();
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_forkcache"))
            .arg("explain")
            .args(args)
            .output()
            .unwrap()
    };
    let path = path.to_str().unwrap();
    let output = run(&[path, "--request", "1"]);
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(
        text.starts_with("request 1 (claude-sonnet-4-6): read 0 · written 2100 · uncached 0\n"),
        "{text}"
    );
    assert!(text.contains("saving: 2100 tokens, $0.007245 on this request"), "{text}");
    let json: Value = serde_json::from_slice(&run(&[path, "--request", "1", "--json"]).stdout).unwrap();
    assert_eq!(json["fix"]["saving_nanousd"], 7_245_000);
    assert_eq!(json["miss"]["cause"], "prefix_changed");
    // Neither B nor --request: a usage error.
    assert_eq!(run(&[path]).status.code(), Some(2));
}

#[test]
fn explaining_two_files_that_are_not_requests_is_an_error_naming_the_file() {
    let dir = crate::proxy::scratch("explain-not-requests");
    let (a, b) = (dir.join("a.json"), dir.join("b.json"));
    std::fs::write(&a, r#"{"a":1}"#).unwrap();
    std::fs::write(&b, r#"{"b":[1,2,3]}"#).unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_forkcache"))
        .arg("explain")
        .args([&a, &b])
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("a.json") && stderr.contains("not a Messages request"), "{stderr}");
    assert!(output.stdout.is_empty(), "no verdict on two non-requests");
    std::fs::remove_dir_all(&dir).unwrap();
}
