//! `forkcache import claude-code`, run as a program on hand-made transcripts named for the rule
//! they exercise (`tests/data/claude_code/`). Every expected figure is worked out below from the
//! fixture lines and the price table (Sonnet 4.6: input 3,000, 5m write 3,750, 1h write 6,000,
//! read 300, output 15,000 nano-dollars per token; Opus 4.6: 5,000 / 6,250 / 10,000 / 500 /
//! 25,000; Haiku 4.5: 1,000 / 1,250 / 2,000 / 100 / 5,000).

use std::process::Command;

use serde_json::Value;

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/claude_code/");

/// `import claude-code PATH --json FLAGS…` → (exit code, document).
fn import(path: &str, flags: &[&str]) -> (i32, Value) {
    let output = Command::new(env!("CARGO_BIN_EXE_forkcache"))
        .args(["import", "claude-code", &format!("{DATA}{path}"), "--json"])
        .args(flags)
        .output()
        .expect("the binary runs");
    let code = output.status.code().expect("an exit code");
    let document = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("exit {code}: {e}: {}", String::from_utf8_lossy(&output.stderr)));
    (code, document)
}

/// Every request of every chain, with its chain name.
fn requests(document: &Value) -> Vec<(String, Value)> {
    let mut found = Vec::new();
    for session in document["sessions"].as_array().expect("sessions") {
        for chain in session["chains"].as_array().expect("chains") {
            for request in chain["requests"].as_array().expect("requests") {
                found.push((chain["chain"].as_str().expect("a chain name").to_string(), request.clone()));
            }
        }
    }
    found
}

fn request<'d>(all: &'d [(String, Value)], id: &str) -> &'d Value {
    &all.iter().find(|(_, r)| r["request_id"] == id).unwrap_or_else(|| panic!("no {id}")).1
}

#[test]
fn every_rule_fixture_totals_equal_the_lines_added_by_hand() {
    let (code, document) = import("every_rule", &[]);
    // The session file's last line is torn: skipped, noted, exit 3.
    assert_eq!(code, 3);
    let totals = &document["totals"];
    assert_eq!(totals["skipped_lines"], 1);
    assert_eq!(totals["unknown_line_kinds"]["mystery-kind"], 1);
    // 9 requests: req_1..req_6 (main) and req_a1..req_a3 (agent ag1). req_1's two streamed lines
    // count once, the agent_progress echo of req_a1 and its own line count once, the
    // <synthetic> line not at all.
    assert_eq!(totals["requests"], 9);
    let usage = &totals["recorded"]["usage"];
    // uncached 3+4+5+3+3+3 + 2+1+1 = 25; read 20,000 + 3×15,000 + 8,000 = 73,000;
    // written 20,000+1,500+21,600+3,000+3,100+5,000 + 8,000+500+8,600 = 71,300;
    // output 150+60+10+20+10+10 + 40+30+5 = 335 (req_1's last line: 150, not the snapshot 5).
    assert_eq!(usage["input_tokens"], 25);
    assert_eq!(usage["cache_read_input_tokens"], 73_000);
    assert_eq!(usage["cache_creation_input_tokens"], 71_300);
    assert_eq!(usage["output_tokens"], 335);
}

#[test]
fn a_streamed_request_keeps_its_last_line_and_passes_its_usage_through() {
    let (_, document) = import("every_rule", &[]);
    let all = requests(&document);
    let first = request(&all, "req_1");
    let recorded = &first["recorded"]["usage"];
    assert_eq!(recorded["output_tokens"], 150);
    // Fields forkcache does not price are passed through as recorded.
    assert_eq!(recorded["speed"], "standard");
    assert_eq!(recorded["inference_geo"], "");
    assert_eq!(recorded["iterations"][0]["output_tokens"], 150);
    // 3 × 3,000 + 20,000 × 6,000 (1h) + 150 × 15,000 = 9,000 + 120,000,000 + 2,250,000 nano-dollars.
    assert_eq!(first["recorded"]["cost_usd"], 0.122259);
    // Its start is the user line it answers (10:00:00), the session's first: at_ms 0.
    assert_eq!((first["index"].as_u64(), first["at_ms"].as_u64()), (Some(0), Some(0)));
    // req_2 answers the tool result at 10:00:30.
    assert_eq!(request(&all, "req_2")["at_ms"], 30_000);
}

#[test]
fn sub_agent_requests_form_their_own_chain_linked_to_the_spawning_request() {
    let (_, document) = import("every_rule", &[]);
    let chains = document["sessions"][0]["chains"].as_array().expect("chains").clone();
    let names: Vec<&str> = chains.iter().map(|c| c["chain"].as_str().expect("name")).collect();
    assert_eq!(names, ["main", "agent:ag1"]);
    assert_eq!(chains[0]["parent"], Value::Null);
    assert_eq!(chains[1]["parent"], serde_json::json!({"chain": "main", "request_id": "req_1"}));
    let agent: Vec<&str> = chains[1]["requests"]
        .as_array()
        .expect("requests")
        .iter()
        .map(|r| r["request_id"].as_str().unwrap())
        .collect();
    assert_eq!(agent, ["req_a1", "req_a2", "req_a3"]);
}

#[test]
fn every_break_cause_in_the_fixture_is_found_with_its_loss_and_cost() {
    let (_, document) = import("every_rule", &[]);
    let all = requests(&document);
    let break_of = |id: &str| request(&all, id)["break"].clone();
    // req_3 switched to Opus: it could read 20,000 + 1,500 = 21,500 (≤ its 21,605 input), read 0.
    // Extra: 21,500 × (Opus 1h write 10,000 − read 500) = 204,250,000 nano-dollars.
    assert_eq!(break_of("req_3")["cause"], "model_changed");
    assert_eq!(break_of("req_3")["tokens_lost"], 21_500);
    assert_eq!(break_of("req_3")["extra_cost_usd"], 0.20425);
    // req_4 after a compact_boundary: cached 21,600 but its input is 18,003; read 15,000 → 3,003.
    assert_eq!(break_of("req_4")["cause"], "compacted");
    assert_eq!(break_of("req_4")["tokens_lost"], 3_003);
    // req_5 starts at 12:00:00, 79 min 59 s after req_4 started (10:40:01, the summary line it
    // answers): more than the main chain's 1-hour TTL. Lost 18,000 − 15,000.
    assert_eq!(break_of("req_5")["cause"], "expired");
    assert_eq!(break_of("req_5")["tokens_lost"], 3_000);
    assert_eq!(break_of("req_5")["gap_ms"], 4_799_000);
    // req_6 60 s later, after deferred_tools_delta: 18,100 − 15,000.
    assert_eq!(break_of("req_6")["cause"], "tool_search_loaded");
    assert_eq!(break_of("req_6")["tokens_lost"], 3_100);
    // req_a3: the sub-agent wrote 5-minute entries and waited 10:00:10 → 10:20:00.
    assert_eq!(break_of("req_a3")["cause"], "expired");
    assert_eq!(break_of("req_a3")["tokens_lost"], 8_500);
    assert_eq!(break_of("req_2"), Value::Null);
    let breaks = &document["totals"]["breaks"];
    assert_eq!(
        breaks,
        &serde_json::json!({"model_changed": 1, "compacted": 1, "expired": 2, "tool_search_loaded": 1})
    );
}

#[test]
fn a_compaction_s_summarising_call_is_estimated_separately() {
    let (_, document) = import("every_rule", &[]);
    let compaction = &document["compactions"][0];
    assert_eq!(compaction["next_request_id"], "req_4");
    assert_eq!(compaction["pre_tokens"], 21_605);
    assert_eq!(compaction["estimate"], true);
    // A read of the 21,605-token context on Opus 4.6: 21,605 × 500 = 10,802,500 nano-dollars.
    assert_eq!(compaction["estimated_cost_usd"], 0.0108025);
}

#[test]
fn a_write_without_the_5m_1h_split_is_priced_as_5m_and_says_so() {
    let (code, document) = import("write_without_split.jsonl", &[]);
    assert_eq!(code, 0);
    let all = requests(&document);
    let recorded = &request(&all, "req_o1")["recorded"];
    assert_eq!(recorded["writes_priced_as"], "5m");
    // 4 × 3,000 + 1,000 × 3,750 + 10 × 15,000 = 12,000 + 3,750,000 + 150,000 nano-dollars.
    assert_eq!(recorded["cost_usd"], 0.003912);
    assert_eq!(document["totals"]["writes_priced_as_5m"], 1);
}

#[test]
fn a_model_without_a_price_row_is_counted_but_never_priced() {
    let (_, document) = import("unpriced_model.jsonl", &[]);
    let all = requests(&document);
    assert_eq!(request(&all, "req_n1")["recorded"]["cost_usd"], Value::Null);
    assert_eq!(request(&all, "req_n1")["predicted"]["cost_usd"], Value::Null);
    let totals = &document["totals"];
    assert_eq!(totals["unpriced_models"], serde_json::json!(["claude-unknown-9"]));
    // Both requests' tokens count; only Sonnet's are priced: 10 × 3,000 + 5 × 15,000 = 105,000.
    assert_eq!(totals["recorded"]["usage"]["input_tokens"], 20);
    assert_eq!(totals["recorded"]["cost_usd"], 0.000105);
    assert_eq!(document["by_model"]["claude-unknown-9"]["cost_usd"], Value::Null);
}

#[test]
fn agreement_is_reported_beside_the_baseline() {
    let (_, document) = import("every_rule", &[]);
    let totals = &document["totals"];
    for key in ["agreement", "baseline_agreement"] {
        let share = totals[key].as_f64().expect("a share");
        assert!((0.0..=1.0).contains(&share), "{key} = {share}");
    }
    // Chain starts: 2 (req_1, req_a1), both cold and predicted cold.
    assert_eq!(totals["on_chain_starts"]["requests"], 2);
    assert_eq!(totals["on_chain_starts"]["agreement"], 1.0);
    // The sub-agent's expiry: the baseline guesses a read of 8,500, the simulation 0 as recorded.
    let all = requests(&document);
    let expired = request(&all, "req_a3");
    assert_eq!(
        (expired["agreement"].as_bool(), expired["baseline_agreement"].as_bool()),
        (Some(true), Some(false))
    );
    assert_eq!(expired["predicted"]["miss"]["cause"], "expired");
}

/// The simulated costs of the what-if fixtures (S = the stable prefix, 12,000 tokens by default
/// and never more than a chain's first input minus one):
///
/// `what_if_idle.jsonl` (Sonnet 4.6, main chain): req_1 at 0 s, 20,000 tokens; req_2 at 600 s,
/// 21,000 tokens; the chain wrote 5-minute entries. As recorded: req_1 writes 20,000 at 5m
/// (75,000,000); at 600 s the chain's cache has expired, and req_1 read nothing, so no stable
/// prefix of the account is known warm (`warmth`): req_2 writes all 21,000 (78,750,000); total
/// 153,750,000, and req_2 breaks (20,000 − 0 > 1,000).
/// A request's uncached tokens are what it sent after its last breakpoint (its own count, 0
/// here), so predicted req_1 writes all 20,000: 75,000,000 at 5m, 120,000,000 at 1h.
#[test]
fn what_if_ttl_1h_by_hand() {
    let (_, document) = import("what_if_idle.jsonl", &["--what-if", "ttl=1h", "--what-if", "ttl=5m"]);
    // 1h: req_1 120,000,000; req_2 reads 20,000 × 300 = 6,000,000 and writes 1,000 × 6,000 =
    // 6,000,000: 132,000,000 against 153,750,000, i.e. −21,750,000; writes 120,000,000 +
    // 6,000,000 = 126,000,000; req_2's break avoided.
    let one_hour = &document["what_if"][0];
    assert_eq!(one_hour["setting"], "ttl=1h");
    assert_eq!(one_hour["delta_usd"], -0.02175);
    assert_eq!(one_hour["writes_usd"], 0.126);
    assert_eq!(one_hour["reads_usd"], 0.006);
    assert_eq!((one_hour["breaks_avoided"].as_u64(), one_hour["breaks_added"].as_u64()), (Some(1), Some(0)));
    // 5m is what the chain did: no change.
    let five_minutes = &document["what_if"][1];
    assert_eq!(five_minutes["delta_usd"], 0.0);
    assert_eq!(five_minutes["breaks_avoided"], 0);
}

#[test]
fn what_if_max_idle_by_hand() {
    // The 600 s gap becomes 240 s, inside the 5-minute TTL: req_2 reads 20,000 (6,000,000) and
    // writes 1,000 × 3,750 = 3,750,000. Total 75,000,000 + 9,750,000 = 84,750,000, i.e.
    // −69,000,000 against 153,750,000; writes 75,000,000 + 3,750,000 = 78,750,000.
    let (_, document) = import("what_if_idle.jsonl", &["--what-if", "max-idle=4m"]);
    let idle = &document["what_if"][0];
    assert_eq!(idle["setting"], "max-idle=4m");
    assert_eq!(idle["delta_usd"], -0.069);
    assert_eq!(idle["writes_usd"], 0.07875);
    assert_eq!(idle["reads_usd"], 0.006);
    assert_eq!(idle["breaks_avoided"], 1);
}

#[test]
fn what_if_no_model_switch_by_hand() {
    // `what_if_model_switch.jsonl`: req_1 Sonnet 4.6, 20,000 tokens at 0 s; req_2 Opus 4.6,
    // 21,000 tokens at 60 s. As recorded: 20,000 × 3,750 = 75,000,000, then Opus is cold:
    // 21,000 × 6,250 = 131,250,000; total 206,250,000. Staying on Sonnet, req_2 reads 20,000
    // (6,000,000) and writes 1,000 × 3,750 (3,750,000): 84,750,000 in all, −121,500,000; writes
    // 75,000,000 + 3,750,000 = 78,750,000.
    let (_, document) = import("what_if_model_switch.jsonl", &["--what-if", "no-model-switch"]);
    let same_model = &document["what_if"][0];
    assert_eq!(same_model["delta_usd"], -0.1215);
    assert_eq!(same_model["writes_usd"], 0.07875);
    assert_eq!(same_model["reads_usd"], 0.006);
    assert_eq!(same_model["breaks_avoided"], 1);
}

#[test]
fn what_if_subagent_ttl_1h_by_hand() {
    // `what_if_subagent/agent-sub1.jsonl` (a sub-agent file alone, Haiku 4.5): 10,000 tokens at
    // 0 s, 11,000 at 600 s. As recorded (5m): 10,000 × 1,250 + 11,000 × 1,250 = 26,250,000 (no
    // pre-warm for sub-agents). At 1h: 10,000 × 2,000 = 20,000,000, then a read of 10,000 × 100 =
    // 1,000,000 and a write of 1,000 × 2,000 = 2,000,000: 23,000,000, i.e. −3,250,000; writes
    // 23,000,000 − 1,000,000 (the read) = 22,000,000.
    let (_, document) = import("what_if_subagent", &["--what-if", "subagent-ttl=1h"]);
    let sub = &document["what_if"][0];
    assert_eq!(sub["delta_usd"], -0.00325);
    assert_eq!(sub["writes_usd"], 0.022);
    assert_eq!(sub["reads_usd"], 0.001);
    assert_eq!(sub["breaks_avoided"], 1);
    assert_eq!(document["sessions"][0]["chains"][0]["chain"], "agent:sub1");
}

#[test]
fn import_twice_gives_identical_bytes_and_a_replayable_trace() {
    let dir = std::env::temp_dir().join(format!("forkcache-import-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("trace.jsonl");
    let run = || {
        Command::new(env!("CARGO_BIN_EXE_forkcache"))
            .args(["import", "claude-code", &format!("{DATA}every_rule"), "--json", "--emit-trace"])
            .arg(&trace)
            .arg("--csv")
            .arg(&dir)
            .arg("--chart")
            .arg(&dir)
            .output()
            .expect("the binary runs")
            .stdout
    };
    let chart = dir.join("s1-usage.png");
    let first = run();
    let first_chart = std::fs::read(&chart).expect("the usage chart is written");
    assert_eq!(first, run());
    assert_eq!(first_chart, std::fs::read(&chart).unwrap());
    assert!(std::fs::read_to_string(dir.join("s1-read.svg")).unwrap().contains("predicted read (main)"));
    let replayed = Command::new(env!("CARGO_BIN_EXE_forkcache"))
        .args(["replay", "--json"])
        .arg(&trace)
        .output()
        .expect("the binary runs");
    assert!(replayed.status.success());
    let report: Value = serde_json::from_slice(&replayed.stdout).expect("replay prints JSON");
    assert_eq!(report["totals"]["rejected"], 0);
    replays_to_the_import(&serde_json::from_slice(&first).unwrap(), &report);
    let lines = std::fs::read_to_string(&trace).unwrap();
    let prewarms = lines.lines().filter(|line| line.contains(r#""prewarm":true"#)).count();
    assert_eq!(prewarms, 2, "the account's pre-warms are in the trace, run but not listed");
    let breaks = std::fs::read_to_string(dir.join("breaks.csv")).unwrap();
    // A header and the 5 breaks.
    assert_eq!(breaks.lines().count(), 6);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An emitted trace replays to the import: the same requests (the account's pre-warms are run
/// into the cache but are not rows), the real usage and bill exactly (the trace carries each
/// request's real usage; a session's marker is dated on its first request, so replay prices on
/// the session's date), and the same prediction, usage and cost (the import splits a request's
/// unread tokens where its breakpoint lies, which is what the emitted body holds).
fn replays_to_the_import(import: &Value, replay: &Value) {
    let (imported, replayed) = (&import["totals"], &replay["totals"]);
    assert_eq!(replayed["requests"], imported["requests"]);
    assert_eq!(replayed["recorded"]["usage"], imported["recorded"]["usage"]);
    assert_eq!(replayed["recorded"]["cost_usd"], imported["recorded"]["cost_usd"]);
    assert_eq!(replayed["usage"], imported["predicted"]["usage"]);
    assert_eq!(replayed["cost_usd"], imported["predicted"]["cost_usd"]);
    assert_eq!(replayed["agreement"]["rate"], imported["agreement"]);
}

#[test]
fn a_bad_what_if_is_a_usage_error() {
    let output = Command::new(env!("CARGO_BIN_EXE_forkcache"))
        .args(["import", "claude-code", &format!("{DATA}every_rule"), "--what-if", "ttl=2h"])
        .output()
        .expect("the binary runs");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("ttl=2h"));
}

#[test]
fn a_fork_child_s_inherited_copy_of_its_parent_stays_in_the_parent_s_chain() {
    // `fork_inherits/`: the child's file (read first: it sorts before the session file) opens
    // with Claude Code 2.1's fork-context-ref and a copy of the parent's req_p1 carrying the
    // message_start snapshot (output 1). req_p1 belongs to main with its own line's output 78.
    let (code, document) = import("fork_inherits", &[]);
    assert_eq!(code, 0);
    let chains = &document["sessions"][0]["chains"];
    assert_eq!(chains[0]["chain"], "main");
    assert_eq!(chains[0]["requests"][0]["request_id"], "req_p1");
    assert_eq!(chains[0]["requests"][0]["recorded"]["usage"]["output_tokens"], 78);
    assert_eq!(chains[1]["chain"], "agent:f1");
    assert_eq!(chains[1]["parent"], serde_json::json!({"chain": "main", "request_id": "req_p1"}));
    // The child extends the parent's prompt at the spawn: it reads what req_p1 cached (17,700;
    // the parent's 1,500 tokens after its breakpoint were not cached), as recorded.
    let child = &chains[1]["requests"][0];
    assert_eq!(child["predicted"]["usage"]["cache_read_input_tokens"], 17_700);
    assert_eq!(child["agreement"], true);
    assert_eq!(document["totals"]["unknown_line_kinds"], serde_json::json!({}));
}

#[test]
fn a_real_published_session_is_billed_line_by_line() {
    // fixtures/transcripts/claude-code-log-sidechain-integrated.jsonl (see its README): Sonnet
    // 4.5 ($3 / $3.75 5m / $0.30 / $15 per MTok), no 5m/1h split (priced as 5m):
    //   req_011CVJ517i: 3 × 3,000 + 141,272 × 3,750 + 365 × 15,000 = 535,254,000
    //   req_011CVJ51yt (two lines, one request): 3 × 3,000 + 19,830 × 3,750 + 183 × 15,000 = 77,116,500
    //   req_011CVJ5Au8: 3 × 3,000 + 2,952 × 3,750 + 141,272 × 300 + 190 × 15,000 = 56,310,600
    // Total 668,681,100 nano-dollars.
    let output = Command::new(env!("CARGO_BIN_EXE_forkcache"))
        .args(["import", "claude-code", "--json"])
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fixtures/transcripts/claude-code-log-sidechain-integrated.jsonl"
        ))
        .output()
        .expect("the binary runs");
    assert!(output.status.success());
    let document: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let totals = &document["totals"];
    assert_eq!(totals["requests"], 3);
    assert_eq!(totals["recorded"]["cost_usd"], 0.6686811);
    assert_eq!(totals["writes_priced_as_5m"], 3);
    // The sidechain lines name no agent: their own chain, not the main one.
    let chains: Vec<&str> = document["sessions"][0]["chains"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["chain"].as_str().unwrap())
        .collect();
    assert_eq!(chains, ["main", "agent:sidechain"]);
}

/// `system_changed.jsonl` (Sonnet 4.6, main chain, 1-hour writes): req_1 answers a prompt in
/// `/home/dev/app` and reads 12,500 (the account's warm stable prefix), writes 2,000; its Bash
/// tool moves to `/home/dev/app/server` (the tool result's `cwd`) and req_2 reads 12,500 + 2,000
/// = 14,500: a tool moving the directory changes nothing until the next turn. The next prompt
/// starts in `/home/dev/app/server`; Claude Code's system prompt names the working directory, so
/// req_3 reads only the stable prefix: 12,500 of the 14,500 + 400 = 14,900 cached.
#[test]
fn a_turn_in_another_working_directory_breaks_as_system_changed() {
    let (code, document) = import("system_changed.jsonl", &[]);
    assert_eq!(code, 0);
    let all = requests(&document);
    assert_eq!(request(&all, "req_2")["break"], Value::Null);
    let moved = request(&all, "req_3");
    // Lost 14,900 − 12,500 = 2,400; extra 2,400 × (1h write 6,000 − read 300) = 13,680,000.
    assert_eq!(moved["break"]["cause"], "system_changed");
    assert_eq!(moved["break"]["tokens_lost"], 2_400);
    assert_eq!(moved["break"]["extra_cost_usd"], 0.01368);
    assert_eq!(moved["break"]["gap_ms"], 55_000);
    // The prediction sends the history anew after the stable prefix req_1 showed (12,500): a
    // read of 12,500 as recorded; the baseline guesses 14,900.
    assert_eq!(moved["predicted"]["usage"]["cache_read_input_tokens"], 12_500);
    assert_eq!(
        (moved["agreement"].as_bool(), moved["baseline_agreement"].as_bool()),
        (Some(true), Some(false))
    );
    assert_eq!(request(&all, "req_2")["predicted"]["usage"]["cache_read_input_tokens"], 14_500);
    // req_1 is the import's first request: nothing earlier shows the account's warm prefix, so
    // both guess 0 against 12,500. Agreement 2 of 3, the baseline 1 of 3 (req_2 only).
    assert_eq!(request(&all, "req_1")["agreement"], false);
    assert_eq!(document["totals"]["agreement"], 0.666667);
    assert_eq!(document["totals"]["baseline_agreement"], 0.333333);
    assert_eq!(document["totals"]["breaks"], serde_json::json!({"system_changed": 1}));
}

/// `effort_changed.jsonl` (Opus 4.6, main chain, 1-hour writes): req_1 reads 12,800 (the
/// account's warm stable prefix) and writes 2,000. The user then runs `/effort max`; the API
/// renders the effort ahead of the messages, so req_2 reads only the stable prefix: 12,800 of the
/// 14,800 cached. A second `/effort max` sets the level already in force: req_3 reads all
/// 12,800 + 2,400 = 15,200 that req_2 left.
#[test]
fn another_effort_level_breaks_as_effort_changed() {
    let (code, document) = import("effort_changed.jsonl", &[]);
    assert_eq!(code, 0);
    let all = requests(&document);
    let changed = request(&all, "req_2");
    // Lost 14,800 − 12,800 = 2,000; extra 2,000 × (1h write $10 − read $0.50) / M = $0.019.
    assert_eq!(changed["break"]["cause"], "effort_changed");
    assert_eq!(changed["break"]["tokens_lost"], 2_000);
    assert_eq!(changed["break"]["extra_cost_usd"], 0.019);
    // The prediction sends the history anew after the stable prefix req_1 showed: 12,800, as
    // recorded; the baseline guesses 14,800.
    assert_eq!(changed["predicted"]["usage"]["cache_read_input_tokens"], 12_800);
    assert_eq!(
        (changed["agreement"].as_bool(), changed["baseline_agreement"].as_bool()),
        (Some(true), Some(false))
    );
    let same_level = request(&all, "req_3");
    assert_eq!(same_level["break"], Value::Null);
    assert_eq!(same_level["predicted"]["usage"]["cache_read_input_tokens"], 15_200);
    assert_eq!(document["totals"]["breaks"], serde_json::json!({"effort_changed": 1}));
}

/// `fixtures/transcripts/claude-parser-opus-4-1-session.jsonl` (see its README): a real Claude
/// Code 1.0.89 session on Opus 4.1, 98 lines, 24 requests on the main chain. Its totals, as the
/// independent reader `tests/claude_code_totals.py` sums them: 124 uncached, 404,173 read,
/// 19,486 written, 2,759 output.
///
/// Agreement by hand from the recorded usage. The baseline (previous read + creation) is right
/// on 21 of 24 requests and wrong on three: #0, a chain start that reads 11,506 (guess 0); #7,
/// the first turn after the user's shell moved from `/Volumes/…/claude-parser` to
/// `/Users/ali/.claude/projects/claude-parser`, reading 11,506 (guess 16,486 + 139 = 16,625);
/// #13, the first turn after a tool moved to `/Users/ali`, reading 11,506 (guess 17,425 + 166 =
/// 17,591). In #7 and #13 the prompt changed after the stable prefix #0 showed (11,506), which
/// the simulation reads back exactly; #0 is the import's first request, so it is predicted cold.
/// The simulation: 23 of 24.
#[test]
fn a_real_opus_session_breaks_where_its_working_directory_changed() {
    let output = Command::new(env!("CARGO_BIN_EXE_forkcache"))
        .args(["import", "claude-code", "--json"])
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fixtures/transcripts/claude-parser-opus-4-1-session.jsonl"
        ))
        .output()
        .expect("the binary runs");
    assert!(output.status.success());
    let document: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let totals = &document["totals"];
    assert_eq!(totals["requests"], 24);
    let usage = &totals["recorded"]["usage"];
    let summed = ["input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "output_tokens"]
        .map(|key| usage[key].as_u64().expect("a count"));
    assert_eq!(summed, [124, 404_173, 19_486, 2_759]);
    // 21 / 24 = 0.875 and 23 / 24 = 0.958333 (six decimals).
    assert_eq!(totals["baseline_agreement"], 0.875);
    assert_eq!(totals["agreement"], 0.958333);
    assert_eq!(totals["breaks"], serde_json::json!({"system_changed": 2}));
    let all = requests(&document);
    let read = |index: usize| &all[index].1["predicted"]["usage"]["cache_read_input_tokens"];
    assert_eq!((read(0), read(7), read(13)), (&Value::from(0), &Value::from(11_506), &Value::from(11_506)));
}

/// `fixtures/transcripts/claude-code-viewer-sonnet-4-first-26-lines.jsonl` (see its README):
/// the first 26 lines of a real Claude Code 1.0.98 session on Sonnet 4 — three main-chain
/// requests (the last spawning four `Task` sub-agents) and the first sub-agent's four requests,
/// written into the session file as a sidechain. Totals as the independent reader
/// `tests/claude_code_totals.py` sums them: 7 requests, 38 uncached, 83,300 read, 14,431
/// written, 1,778 output.
///
/// By hand, the baseline (previous read + creation) is right on 6 of 7: main 14,874 + 1,331 =
/// 16,205 and 16,205 + 235 = 16,440; the sub-agent starts cold (0) and reads 0 + 11,776,
/// 11,776 + 177 = 11,953, 11,953 + 99 = 12,052. It misses the session's first request, which
/// reads 14,874 of the account's warm stable prefix; nothing earlier shows it, so the
/// simulation predicts it cold too: a tie, 6 of 7 each.
#[test]
fn a_real_sonnet_session_with_a_sidechain_sub_agent_ties_the_baseline() {
    let output = Command::new(env!("CARGO_BIN_EXE_forkcache"))
        .args(["import", "claude-code", "--json"])
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fixtures/transcripts/claude-code-viewer-sonnet-4-first-26-lines.jsonl"
        ))
        .output()
        .expect("the binary runs");
    assert!(output.status.success());
    let document: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let totals = &document["totals"];
    assert_eq!(totals["requests"], 7);
    let usage = &totals["recorded"]["usage"];
    let summed = ["input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "output_tokens"]
        .map(|key| usage[key].as_u64().expect("a count"));
    assert_eq!(summed, [38, 83_300, 14_431, 1_778]);
    // 6 / 7 = 0.857143 (six decimals), for both.
    assert_eq!(
        (&totals["agreement"], &totals["baseline_agreement"]),
        (&Value::from(0.857143), &Value::from(0.857143))
    );
    let all = requests(&document);
    let chains: Vec<&str> = all.iter().map(|(chain, _)| chain.as_str()).collect();
    assert_eq!(
        chains,
        ["main", "main", "main", "agent:sidechain", "agent:sidechain", "agent:sidechain", "agent:sidechain"]
    );
    assert_eq!(all[0].1["recorded"]["usage"]["cache_read_input_tokens"], 14_874);
    assert_eq!(all[0].1["predicted"]["usage"]["cache_read_input_tokens"], 0);
}

#[test]
fn a_proxy_trace_locates_each_break_in_the_bytes() {
    // tests/data/proxy_every_rule.jsonl holds bodies for req_2, req_3, req_5 and req_6 (and one
    // unreadable line). req_3 switched model: its prompt leaves req_2's at `model`, 8 bytes in
    // (`"claude-`). req_6 loaded WebFetch: its tools gain a second tool where req_5's go on to
    // the system prompt. req_4, req_5 and req_a3 lack a body on one side: unmatched.
    let trace = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/proxy_every_rule.jsonl");
    let (_, document) = import("every_rule", &["--trace", trace]);
    let join = &document["totals"]["trace_join"];
    assert_eq!(join, &serde_json::json!({"breaks_located": 2, "breaks_unmatched": 3, "skipped_lines": 1}));
    let all = requests(&document);
    let model = &request(&all, "req_3")["break"]["divergence"];
    assert_eq!((model["path"].as_str(), model["byte_offset"].as_u64()), (Some("model"), Some(8)));
    let tools = &request(&all, "req_6")["break"]["divergence"];
    assert_eq!(tools["dimension"], "tools");
    assert_eq!(tools["cause"], "tool_definition");
    assert!(tools["b"].as_str().unwrap().contains("WebFetch"));
    assert_eq!(request(&all, "req_4")["break"].get("divergence"), None);
}

#[test]
fn each_request_is_priced_on_its_date_with_its_modifiers() {
    // `priced_at_its_date.jsonl`: Sonnet 5.5 reads were cut from $0.20 to $0.10 per MTok on
    // 2026-10-07: 10,000 read the second before cost 2,000,000 nano-dollars, the second after
    // 1,000,000. Opus 5.5 in fast mode (input $8, 5m write $10, output $40): 10 × 8,000 +
    // 1,000 × 10,000 + 100 × 40,000 = 14,080,000. With `inference_geo: "us"` (×1.1 on input $4,
    // 5m write $5, output $20): (40,000 + 5,000,000 + 2,000,000) × 1.1 = 7,744,000.
    let (_, document) = import("priced_at_its_date.jsonl", &[]);
    let all = requests(&document);
    let cost = |id: &str| request(&all, id)["recorded"]["cost_usd"].as_f64().unwrap();
    assert_eq!(cost("req_before_cut"), 0.002);
    assert_eq!(cost("req_after_cut"), 0.001);
    assert_eq!(cost("req_fast"), 0.01408);
    assert_eq!(cost("req_us"), 0.007744);
    assert_eq!(document["by_day"]["2026-10-06"]["cost_usd"], 0.002);
    assert_eq!(document["by_day"]["2026-11-01"]["cost_usd"], 0.021824);
}

#[test]
fn an_emitted_trace_carries_fast_mode_and_data_residency() {
    // The prediction of req_fast is priced in fast mode and req_us at the US premium, as their
    // records were (above); the emitted bodies name both, so replay prices them alike.
    let dir = std::env::temp_dir().join(format!("forkcache-import-modifiers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("trace.jsonl");
    let (_, document) = import("priced_at_its_date.jsonl", &["--emit-trace", trace.to_str().unwrap()]);
    let lines = std::fs::read_to_string(&trace).unwrap();
    // In the bodies (the envelopes' recorded usage names them too).
    assert_eq!(lines.matches(r#""max_tokens":1,"speed":"fast","system""#).count(), 1);
    assert_eq!(lines.matches(r#""max_tokens":1,"inference_geo":"us","system""#).count(), 1);
    let replayed = Command::new(env!("CARGO_BIN_EXE_forkcache"))
        .args(["replay", "--json"])
        .arg(&trace)
        .output()
        .expect("the binary runs");
    let report: Value = serde_json::from_slice(&replayed.stdout).expect("replay prints JSON");
    replays_to_the_import(&document, &report);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn unknown_fields_are_counted_by_path_and_listed_never_fatal() {
    let (code, document) = import("unknown_fields.jsonl", &[]);
    assert_eq!(code, 0);
    let totals = &document["totals"];
    // Per line holding the field: the user line has `futureFlag`; both streamed lines of req_1
    // have `experimentId`, `message.reasoning_trace` and `message.usage.cache_hints`. The
    // queue-operation's and the unknown kind's fields are not read, so not counted.
    let expected = serde_json::json!({"experimentId": 2, "futureFlag": 1,
        "message.reasoning_trace": 2, "message.usage.cache_hints": 2});
    assert_eq!(totals["unknown_fields"], expected);
    let names: Vec<&String> = totals["unknown_fields"].as_object().unwrap().keys().collect();
    assert_eq!(names, ["experimentId", "futureFlag", "message.reasoning_trace", "message.usage.cache_hints"]);
    assert_eq!(totals["unknown_line_kinds"], serde_json::json!({"mystery-kind": 1}));
    // The request is read as usual: its last line's output.
    assert_eq!(totals["requests"], 1);
    assert_eq!(totals["recorded"]["usage"]["output_tokens"], 40);

    let output = Command::new(env!("CARGO_BIN_EXE_forkcache"))
        .args(["import", "claude-code", &format!("{DATA}unknown_fields.jsonl")])
        .output()
        .expect("the binary runs");
    let table = String::from_utf8(output.stdout).unwrap();
    assert!(
        table.contains(
            "unknown fields (counted, not read): experimentId ×2, futureFlag ×1, message.reasoning_trace ×2, message.usage.cache_hints ×2"
        ),
        "{table}"
    );
    assert!(table.contains("unknown line kinds (counted, not read): mystery-kind ×1"), "{table}");
}

/// Regression: the prediction used to `expect` the endpoint to accept every simulated body, so
/// a transcript with absurd counts panicked.
#[test]
fn absurd_usage_is_a_counted_skip_or_a_refused_prediction_never_a_panic() {
    let (code, document) = import("absurd_usage.jsonl", &[]);
    // req_2's counts are near u64::MAX: its line is skipped and noted by request id, exit 3.
    assert_eq!(code, 3);
    let totals = &document["totals"];
    assert_eq!(totals["skipped_lines"], 1);
    let note = totals["notes"][0].as_str().unwrap();
    assert!(note.contains("request req_2") && note.contains("input_tokens"), "{note}");
    // req_1 and req_3 are read; req_3's 900,020,003-token prompt is past Sonnet 4.6's context
    // window, so the simulation cannot price it: refused, named, counted, not predicted.
    assert_eq!(totals["requests"], 2);
    assert_eq!(totals["predictions_refused"], 1);
    let all = requests(&document);
    let refused = &request(&all, "req_3")["predicted"];
    assert!(refused["refused"].as_str().unwrap().contains("prompt is too long"), "{refused}");
    assert_eq!(refused["usage"], Value::Null);
    assert_eq!(request(&all, "req_3")["agreement"], false);
    assert_eq!(request(&all, "req_1")["predicted"]["refused"], Value::Null);
}

#[test]
fn html_is_one_self_contained_page_with_a_section_per_session() {
    let dir = std::env::temp_dir().join(format!("forkcache-import-html-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let output = Command::new(env!("CARGO_BIN_EXE_forkcache"))
        .args(["import", "claude-code", &format!("{DATA}every_rule"), "--what-if", "ttl=1h", "--html"])
        .arg(&dir)
        .output()
        .expect("the binary runs");
    // every_rule ends in a torn line: exit 3, the page is written all the same.
    assert_eq!(output.status.code(), Some(3), "{}", String::from_utf8_lossy(&output.stderr));
    let names: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert_eq!(names, ["index.html"]);
    let html = std::fs::read_to_string(dir.join("index.html")).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    // One session (s1): the overview, then its section with two inline charts.
    assert_eq!(html.matches("<h2>").count(), 2, "{html}");
    assert!(html.contains("<h2>Session s1</h2>"));
    assert_eq!(html.matches("<svg").count(), 2);
    // Sortable tables: sessions, what-ifs, the session's breaks (one row per break cause the
    // fixture holds, named as in --json).
    assert_eq!(html.matches("<table class=\"sortable\">").count(), 3);
    assert!(html.contains("<td>ttl=1h</td>"));
    let (_, document) = import("every_rule", &[]);
    for (cause, _) in document["totals"]["breaks"].as_object().unwrap() {
        assert!(html.contains(&format!("<td>{cause}</td>")), "break cause {cause} missing");
    }
    // The SVG namespace names a URI but fetches nothing; anything else would be a reference.
    // The contents link within the page only.
    let without_namespace =
        html.replace("xmlns=\"http://www.w3.org/2000/svg\"", "").replace("href=\"#section-", "");
    for needle in ["http://", "https://", "src=", "href=", "@import", "url("] {
        assert!(!without_namespace.contains(needle), "the page refers outside itself: {needle}");
    }
}

#[test]
fn the_json_document_is_pinned_byte_for_byte() {
    // The documents in tests/golden/import_claude_code/ were written by the import as it stood
    // before the document was serialized from borrowed views (it used to be built as a
    // `serde_json::Value` per request): key order, number forms and the recorded usage objects,
    // canonical or not (`usage_as_recorded.jsonl` spells one with spaces, a float as 1.50 and
    // 1e3, escapes and a repeated key), must not move. `UPDATE_GOLDEN=1` rewrites them.
    // Run from the crate root with relative paths: the notes name the files as given.
    let root = env!("CARGO_MANIFEST_DIR");
    let golden = format!("{root}/tests/golden/import_claude_code/");
    let proxy_trace = "tests/data/proxy_every_rule.jsonl";
    let what_ifs = [
        "--what-if",
        "ttl=1h",
        "--what-if",
        "ttl=5m",
        "--what-if",
        "subagent-ttl=1h",
        "--what-if",
        "no-model-switch",
        "--what-if",
        "max-idle=5m",
    ];
    let cases: [(&str, &str, &[&str]); 4] = [
        ("every_rule_what_ifs.json", "every_rule", &what_ifs),
        ("every_rule_proxy_trace.json", "every_rule", &["--trace", proxy_trace]),
        ("usage_as_recorded.json", "usage_as_recorded.jsonl", &[]),
        ("fork_inherits.json", "fork_inherits", &[]),
    ];
    for (name, path, flags) in cases {
        let output = Command::new(env!("CARGO_BIN_EXE_forkcache"))
            .current_dir(root)
            .args(["import", "claude-code", &format!("tests/data/claude_code/{path}"), "--json"])
            .args(flags)
            .output()
            .expect("the binary runs");
        let file = format!("{golden}{name}");
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::write(&file, &output.stdout).unwrap();
            continue;
        }
        let pinned = std::fs::read(&file).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(
            output.stdout == pinned,
            "{name}: the document changed; if deliberately, rerun with UPDATE_GOLDEN=1\n{}",
            String::from_utf8_lossy(&output.stdout)
        );
    }
}

#[test]
fn a_request_s_uncached_tokens_are_its_own_tail_after_its_last_breakpoint() {
    let predicted = |all: &[(String, Value)], id: &str| {
        let usage = &request(all, id)["predicted"]["usage"];
        let count = |field: &str| usage[field].as_u64().unwrap();
        (count("input_tokens"), count("cache_creation_input_tokens"), count("cache_read_input_tokens"))
    };
    // every_rule: req_1 (main) is the import's first request: 3 + 20,000 + 0 = 20,003 tokens, none
    // cached before; it sent 3 after its breakpoint, so 3 uncached and 20,000 written, as
    // recorded (it used to be predicted as 20,003 written). req_a1, the first sub-agent request,
    // 2 + 8,000 = 8,002 tokens: its stable prefix is the default 12,000 capped at its input less
    // one, 8,001, so its conversation holds 1 token and only that 1 can come after the
    // breakpoint: 1 uncached, 8,001 written.
    let (_, document) = import("every_rule", &[]);
    let all = requests(&document);
    assert_eq!(predicted(&all, "req_1"), (3, 20_000, 0));
    assert_eq!(predicted(&all, "req_a1"), (1, 8_001, 0));
    // Another file's counts do not move it: write_without_split.jsonl's req_o1 (main, 4
    // uncached) comes before what_if_idle.jsonl's req_1 (20,000 tokens, 0 after its breakpoint).
    let (_, document) = import("what_if_idle.jsonl", &[&format!("{DATA}write_without_split.jsonl")]);
    let all = requests(&document);
    let (uncached, written, read) = predicted(&all, "req_1");
    assert_eq!((uncached, written + read), (0, 20_000));
}

#[test]
fn a_request_past_the_table_window_ran_with_the_1m_beta_and_pays_long_context_rates() {
    // `long_context_1m.jsonl`, Sonnet 4.5 (window 200,000 in the table; 1,000,000 with the
    // context-1m beta until 2026-04-30; above 200K input the whole request at $6 in, 5m write
    // $7.50, read $0.60, $22.50 out: 6,000 / 7,500 / 600 / 22,500 nano-dollars per token).
    // Transcripts carry no headers: a request past 200,000 was accepted, so it had the beta.
    let (code, document) = import("long_context_1m.jsonl", &[]);
    assert_eq!(code, 0);
    let all = requests(&document);
    let recorded_cost = |id: &str| request(&all, id)["recorded"]["cost_usd"].as_f64().unwrap();
    // req_l1, 20,003 input, standard: 3 × 3,000 + 20,000 × 3,750 + 10 × 15,000
    // = 9,000 + 75,000,000 + 150,000.
    assert_eq!(recorded_cost("req_l1"), 0.075159);
    // req_l2, 3 + 230,000 written + 20,000 read = 250,003 input: 3 × 6,000 + 230,000 × 7,500
    // + 20,000 × 600 + 10 × 22,500 = 18,000 + 1,725,000,000 + 12,000,000 + 225,000.
    assert_eq!(recorded_cost("req_l2"), 1.737243);
    // req_l3, 3 + 1,000 written + 250,000 read: 18,000 + 7,500,000 + 150,000,000 + 225,000
    // (at standard rates it would be 9,000 + 3,750,000 + 75,000,000 + 150,000 = $0.078909).
    assert_eq!(recorded_cost("req_l3"), 0.157743);
    // The prediction is not refused: the chain names the beta from req_l2 on. It reads what
    // req_l2 wrote up to its breakpoint (250,003 less the 3 after it) and is priced alike.
    for id in ["req_l1", "req_l2", "req_l3"] {
        assert_eq!(request(&all, id)["predicted"]["refused"], Value::Null, "{id}");
    }
    let predicted = &request(&all, "req_l3")["predicted"];
    assert_eq!(predicted["usage"]["cache_read_input_tokens"], 250_000);
    assert_eq!(predicted["cost_usd"], 0.157743);
    // req_late is dated 2026-06-01, after the beta's retirement: the simulation follows the
    // table and refuses it, while its real cost is priced as the API evidently served it:
    // 3 × 6,000 + 250,000 × 7,500 + 10 × 22,500 = 18,000 + 1,875,000,000 + 225,000.
    let late = request(&all, "req_late");
    assert_eq!(late["predicted"]["refused"], "prompt is too long: 250003 tokens > 200000 maximum");
    assert_eq!(late["recorded"]["cost_usd"], 1.875243);
    assert_eq!(document["totals"]["predictions_refused"], 1);
}

#[test]
fn a_break_on_a_long_context_request_costs_the_long_context_rates() {
    // `long_context_break.jsonl`, Sonnet 4.5 on 2026-03-10 (1M-context beta in force): req_b1
    // writes 250,000 (5m), req_b2 reads nothing and writes 250,100, so it lost
    // min(250,000, 250,103) − 0 = 250,000 tokens. Both requests are past 200K input, so the
    // bill used the long-context band: 5m write 7,500, read 600 nano-dollars per token.
    // Extra: 250,000 × (7,500 − 600) = 1,725,000,000 nano-dollars (at standard rates it would
    // be 250,000 × (3,750 − 300) = $0.8625).
    let (code, document) = import("long_context_break.jsonl", &[]);
    assert_eq!(code, 0);
    let all = requests(&document);
    let broken = &request(&all, "req_b2")["break"];
    assert_eq!(broken["tokens_lost"], 250_000);
    assert_eq!(broken["extra_cost_usd"], 1.725);
}

#[test]
fn an_emitted_trace_names_the_1m_beta_where_the_prediction_used_it() {
    let dir = std::env::temp_dir().join(format!("forkcache-import-1m-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("trace.jsonl");
    let output = Command::new(env!("CARGO_BIN_EXE_forkcache"))
        .args(["import", "claude-code", &format!("{DATA}long_context_1m.jsonl"), "--json", "--emit-trace"])
        .arg(&trace)
        .output()
        .expect("the binary runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = std::fs::read_to_string(&trace).unwrap();
    let lines: Vec<Value> = text.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    let betas: Vec<Value> = lines
        .iter()
        .filter(|line| line["workspace"] == "session:long" && line["body"]["max_tokens"] != 0)
        .map(|line| line["betas"].clone())
        .collect();
    // The requests (not the account's pre-warms): req_l1 (20,003 tokens) names none; req_l2 and
    // req_l3 name the beta.
    let beta = serde_json::json!(["context-1m-2025-08-07"]);
    assert_eq!(betas.last(), Some(&beta), "{text}");
    assert_eq!(betas.iter().filter(|b| **b == beta).count(), 2, "{text}");
    // Each session opens with a marker dated on its first request (its reply's first line), so `replay` prices it on that
    // day with no `--date`: session "long" (2026-03-10) still had the beta and nothing of it is
    // refused; only "late"'s request past 200,000 tokens (2026-06-01, after the beta's retirement)
    // is, as the import's own prediction refused it. Undated, all three past 200,000 were refused.
    let markers: Vec<&str> =
        lines.iter().filter_map(|line| line["forkcache_session"]["started"].as_str()).collect();
    assert_eq!(markers, ["2026-06-01T09:00:02.000Z", "2026-03-10T09:00:02.000Z"], "{text}");
    let replayed = Command::new(env!("CARGO_BIN_EXE_forkcache"))
        .args(["replay", "--json"])
        .arg(&trace)
        .output()
        .expect("the binary runs");
    let document: Value = serde_json::from_slice(&replayed.stdout).unwrap();
    assert_eq!(document["totals"]["rejected"], 1, "{}", String::from_utf8_lossy(&replayed.stdout));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `import claude-code ARGS…` (no `--json`) → (exit code, stdout, stderr).
fn import_plain(args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_forkcache"))
        .args(["import", "claude-code"])
        .args(args)
        .output()
        .expect("the binary runs");
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (output.status.code().expect("an exit code"), text(&output.stdout), text(&output.stderr))
}

#[test]
fn finding_nothing_is_an_error_that_names_the_path_and_says_what_to_try() {
    let dir = crate::proxy::scratch("import-nothing");
    // An empty directory: no file at all.
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let (code, _, stderr) = import_plain(&[empty.to_str().unwrap()]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains(empty.to_str().unwrap()) && stderr.contains("no transcript file"), "{stderr}");
    // A path that does not exist is named in the error.
    let missing = dir.join("missing.jsonl");
    let (code, _, stderr) = import_plain(&[missing.to_str().unwrap()]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains(missing.to_str().unwrap()), "{stderr}");
    // A forkcache trace is not a transcript: exit 1 (no request read wins over exit 3's
    // unreadable lines), with the command that reads it.
    let trace = dir.join("trace.jsonl");
    std::fs::write(&trace, "{\"at_ms\":0,\"body\":{\"model\":\"claude-sonnet-4-6\"}}\n").unwrap();
    let (code, stdout, stderr) = import_plain(&[trace.to_str().unwrap()]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("forkcache replay"), "{stderr}");
    assert!(stdout.is_empty(), "no report of 0 requests: {stdout}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn day_filters_are_checked_as_flags_and_an_empty_window_is_an_error() {
    let every_rule = format!("{DATA}every_rule");
    let (code, _, stderr) = import_plain(&[&every_rule, "--since", "yesterday"]);
    assert_eq!(code, 2, "a value clap refuses: {stderr}");
    assert!(stderr.contains("yesterday"), "{stderr}");
    let (code, _, stderr) = import_plain(&[&every_rule, "--since", "2026-05-01", "--until", "2026-04-01"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--since 2026-05-01 is after --until 2026-04-01"), "{stderr}");
    // Every request of the fixture is on 2026-04-02: none is in 2027.
    let (code, _, stderr) = import_plain(&[&every_rule, "--since", "2027-01-01"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("no request of"), "{stderr}");
}

#[test]
fn unreadable_lines_are_listed_up_to_twenty_then_counted() {
    let dir = crate::proxy::scratch("import-notes");
    let file = dir.join("session.jsonl");
    // One real request, then 25 lines that are not JSON: 20 listed, "… and 5 more".
    let mut text = std::fs::read_to_string(format!("{DATA}usage_as_recorded.jsonl")).unwrap();
    for n in 0..25 {
        text.push_str(&format!("not json {n}\n"));
    }
    std::fs::write(&file, text).unwrap();
    let (code, stdout, stderr) = import_plain(&[file.to_str().unwrap()]);
    assert_eq!(code, 3, "{stderr}");
    assert_eq!(stdout.matches(": not a JSON object").count(), 20, "{stdout}");
    assert!(stdout.contains("… and 5 more"), "{stdout}");
    assert!(stderr.is_empty(), "the table lists them; stderr does not repeat them: {stderr}");
    // Under --json the list goes to stderr instead, as capped.
    let (code, _, stderr) = import_plain(&[file.to_str().unwrap(), "--json"]);
    assert_eq!(code, 3);
    assert_eq!(stderr.lines().count(), 21, "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}
