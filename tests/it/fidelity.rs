//! Fidelity rules of the import's prediction, on hand-made transcripts
//! (`tests/data/claude_code/`) and, where the corpus is present, on a real session
//! (`../shared/corpus`, relative to the repository; skipped with a message when absent).

use std::path::Path;
use std::process::Command;

use serde_json::Value;

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/claude_code/");

fn import(path: &str, flags: &[&str]) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_forkcache"))
        .args(["import", "claude-code", path, "--json", "-q"])
        .args(flags)
        .output()
        .expect("the binary runs");
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stderr)))
}

/// (request id, predicted read, warmth, break cause) of every request.
fn predictions(document: &Value) -> Vec<(String, u64, String, Option<String>)> {
    let mut found = Vec::new();
    for session in document["sessions"].as_array().expect("sessions") {
        for chain in session["chains"].as_array().expect("chains") {
            for r in chain["requests"].as_array().expect("requests") {
                found.push((
                    r["request_id"].as_str().expect("id").to_string(),
                    r["predicted"]["usage"]["cache_read_input_tokens"].as_u64().expect("a read"),
                    r["predicted"]["warmth"].as_str().expect("warmth").to_string(),
                    r["break"]["cause"].as_str().map(str::to_string),
                ));
            }
        }
    }
    found
}

/// `warmth_expiry_compaction.jsonl` (Sonnet 4.6, main chain, every write 1h): req_1 at 09:00
/// reads 15,000 of 20,000 (the account's warm prefix); req_2 at 09:05, 21,000; req_3 at 11:00
/// (115 minutes idle, past the 1-hour TTL), 22,000; a compaction; req_4 at 11:01, 18,000.
#[test]
fn after_an_expiry_and_a_compaction_the_chain_reads_its_first_read() {
    let document = import(&format!("{DATA}warmth_expiry_compaction.jsonl"), &[]);
    let expected = [
        // A chain start with nothing earlier in the import: cold, nothing read.
        ("req_1", 0, "cold", None),
        // 5 minutes later the chain's own cache holds req_1's 20,000 tokens.
        ("req_2", 20_000, "cold", None),
        // Expired: only the stable prefix the chain showed first (15,000) is warm, kept so by
        // traffic the import does not hold (req_2, the latest request seen, is 115 minutes back).
        ("req_3", 15_000, "unseen_activity", Some("expired")),
        // The compaction replaces the history: the same 15,000, touched by req_3 a minute before.
        ("req_4", 15_000, "seen", Some("compacted")),
    ];
    let got = predictions(&document);
    let want: Vec<_> = expected
        .iter()
        .map(|(id, read, warmth, cause)| {
            (id.to_string(), *read, warmth.to_string(), cause.map(str::to_string))
        })
        .collect();
    assert_eq!(got, want);
}

/// `compaction_after_a_warm_start.jsonl` (Sonnet 4.6, every write 1h): req_1 at 09:00 reads
/// 15,000 of 20,000 (the account's warm prefix, larger than the 12,000-token default a chain
/// starts with); req_2 at 09:05 reads 20,000 of 21,000; a compaction; req_3 at 09:07 reads
/// 15,000 of 18,000. The chain had sent 21,000 tokens before the compaction, so the prefix it
/// showed first (15,000) is readable whole: the cap is what was sent *before* the compaction
/// cleared the history, not the 12,000 left after it.
#[test]
fn a_compaction_reads_the_first_read_even_past_the_default_prefix() {
    let document = import(&format!("{DATA}compaction_after_a_warm_start.jsonl"), &[]);
    let got = predictions(&document);
    let last = got.last().expect("three requests");
    assert_eq!(
        (last.0.as_str(), last.1, last.2.as_str(), last.3.as_deref()),
        ("req_3", 15_000, "seen", Some("compacted")),
        "{got:?}"
    );
}

/// A what-if equal to what the session did changes nothing: every write of the fixture is 1h.
#[test]
fn what_if_ttl_1h_on_a_session_that_wrote_only_1h_is_zero() {
    let document = import(&format!("{DATA}warmth_expiry_compaction.jsonl"), &["--what-if", "ttl=1h"]);
    assert_eq!(document["what_if"][0]["delta_usd"], 0.0);
    assert_eq!(document["what_if"][0]["breaks_avoided"], 0);
}

/// The same identity on a real session that wrote only 1h (set A's Opus 4.7 file: 17 requests,
/// every write 1h per SOURCES-A.md).
#[test]
fn what_if_ttl_1h_on_a_real_1h_session_is_zero() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/corpus/transcripts/main-2.1.119-opus47.jsonl");
    if !Path::new(path).exists() {
        eprintln!("skipped: ../shared/corpus is absent");
        return;
    }
    let document = import(path, &["--what-if", "ttl=1h"]);
    assert_eq!(document["totals"]["recorded"]["usage"]["cache_creation"]["ephemeral_5m_input_tokens"], 0);
    assert_eq!(document["what_if"][0]["delta_usd"], 0.0);
}

/// `tool_search_reference.jsonl`: req_1 writes 20,000 and calls `ToolSearch`; its result holds a
/// `tool_reference` (no `deferred_tools_delta` attachment, as builds 2.1.81–2.1.177 write);
/// req_2 reads 5,000 of the 20,000: a break of 15,000 whose cause is the tool load.
#[test]
fn a_tool_reference_result_explains_the_break_after_it() {
    let document = import(&format!("{DATA}tool_search_reference.jsonl"), &[]);
    let got = predictions(&document);
    assert_eq!(got[1].0, "req_2");
    assert_eq!(got[1].3.as_deref(), Some("tool_search_loaded"));
    assert_eq!(document["totals"]["breaks"]["tool_search_loaded"], 1);
}

/// `tool_search_then_compaction.jsonl` (Sonnet 4.6, every write 1h): req_1 at 09:00:00 starts
/// cold and writes 20,000, calling `ToolSearch`; its `tool_reference` result loads a tool, and
/// req_2 at 09:00:20 reads 15,000 of 21,000 (a break the tool load explains: the prompt changed
/// before the conversation, so what req_2 read is the stable prefix); req_3 reads 21,000 of
/// 22,000; a compaction; req_4 at 09:03 reads 15,000 of 18,000. The compaction reads the prefix
/// req_2 showed: 15,000, not the 12,000-token default the cold start declared.
#[test]
fn a_compaction_after_a_tool_load_reads_the_prefix_the_load_showed() {
    let document = import(&format!("{DATA}tool_search_then_compaction.jsonl"), &[]);
    let got = predictions(&document);
    assert_eq!(got[1].3.as_deref(), Some("tool_search_loaded"), "{got:?}");
    let last = got.last().expect("four requests");
    assert_eq!(
        (last.0.as_str(), last.1, last.2.as_str(), last.3.as_deref()),
        ("req_4", 15_000, "seen", Some("compacted")),
        "{got:?}"
    );
}
