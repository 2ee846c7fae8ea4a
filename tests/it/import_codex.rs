//! `forkcache import codex` on the hand-made rollouts of `fixtures/codex/`, one reader rule of
//! the rollout format each; every expected number is worked out by hand in the comments.

use std::process::Command;

use serde_json::Value;

fn import(path: &str, flags: &[&str]) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_forkcache"))
        .args(["import", "codex", path, "--json"])
        .args(flags)
        .output()
        .expect("the binary runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("the report is JSON")
}

#[test]
fn the_reader_skips_what_is_not_a_request_and_restores_a_missing_record() {
    let report = import("fixtures/codex/rules.jsonl", &[]);
    let requests = report["sessions"][0]["requests"].as_array().unwrap();
    // 10 token_count lines: one with info null, one repeat, one post-compaction estimate
    // skipped; one reveals a missing record (the total rose by 7,000 + 8,000 input while its own
    // usage says 8,000): 7 requests.
    assert_eq!(requests.len(), 7);
    let inferred: Vec<bool> = requests.iter().map(|r| r["inferred"].as_bool().unwrap()).collect();
    assert_eq!(inferred, [false, false, false, true, false, false, false]);
    assert_eq!(requests[3]["recorded"]["usage"]["input_tokens"], 7_000);
    assert_eq!(requests[3]["recorded"]["usage"]["cached_input_tokens"], 5_888);
    // Totals: input 20,000 + 21,000 + 6,000 + 7,000 + 8,000 + 9,000 + 3,000 = 74,000;
    // cached 2,432 + 19,968 + 2,432 + 5,888 + 6,912 + 2,432 + 0 = 40,064.
    assert_eq!(report["totals"]["input"], 74_000);
    assert_eq!(report["totals"]["cached"], 40_064);
    // The usage object keeps the rollout's own names; the neutral summary splits it.
    assert_eq!(requests[0]["recorded"]["usage"]["reasoning_output_tokens"], 100);
    let neutral = &requests[0]["recorded"]["neutral"];
    // gpt-5.5 has no write premium: 20,000 − 2,432 = 17,568 uncached, nothing written.
    assert_eq!((neutral["read"].as_u64(), neutral["written"].as_u64()), (Some(2_432), Some(0)));
    assert_eq!(neutral["uncached"], 17_568);
    assert_eq!(report["sessions"][0]["unbilled"][0]["kind"], "remote_compaction");
}

#[test]
fn breaks_get_their_causes_and_the_prediction_beats_the_baseline() {
    let report = import("fixtures/codex/rules.jsonl", &[]);
    let breaks = report["sessions"][0]["breaks"].as_array().unwrap();
    let causes: Vec<(&str, u64)> =
        breaks.iter().map(|b| (b["cause"].as_str().unwrap(), b["lost"].as_u64().unwrap())).collect();
    // After the remote compaction: min(21,000, 6,000) − 2,432 = 3,568 lost. After 1 h 58 min
    // idle (past the 30-minute typical `24h` lifetime): min(8,000, 9,000) − 2,432 = 5,568.
    // The local compaction (with a switch to gpt-5.4): 3,000 − 0.
    assert_eq!(
        causes,
        [("remote_compaction", 3_568), ("idle_past_retention", 5_568), ("local_compaction", 3_000)]
    );
    let predicted: Vec<u64> = report["sessions"][0]["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["predicted"]["read"].as_u64().unwrap())
        .collect();
    // 0 at the start; 20,000 rounded down to 128s = 19,968; after the reset the first read
    // (2,432); 6,000 -> 5,888; 7,000 -> 6,912; after idle 2,432; another model: 0.
    assert_eq!(predicted, [0, 19_968, 2_432, 5_888, 6_912, 2_432, 0]);
    // Within max(1,024, 2%): the prediction misses only the first request (6 of 7); the
    // baseline (previous input) also misses the three breaks (3 of 7).
    assert_eq!(report["totals"]["agreement"]["predicted"], 6);
    assert_eq!(report["totals"]["agreement"]["baseline"], 3);
}

#[test]
fn a_bill_at_each_price_tier() {
    let report =
        import("fixtures/codex/rules.jsonl", &["--what-if", "retention=24h", "--what-if", "no-model-switch"]);
    let requests = report["sessions"][0]["requests"].as_array().unwrap();
    // gpt-5.5 at $5 / $0.50 / $30 per MTok: 17,568 x 5,000 + 2,432 x 500 + 500 x 30,000 nano$
    // = 87,840,000 + 1,216,000 + 15,000,000 = 104,056,000.
    assert_eq!(requests[0]["cost_nanousd"], 104_056_000);
    // gpt-5.4 at $2.50 / $0.25 / $15: 3,000 x 2,500 + 50 x 15,000 = 8,250,000.
    assert_eq!(requests[6]["cost_nanousd"], 8_250_000);
    let what_ifs = report["what_ifs"].as_array().unwrap();
    // The session already ran with `24h` (gpt-5.5 accepts nothing else): no change.
    assert_eq!(what_ifs[0]["delta_nanousd"], 0);
    // Without the switch the last request runs on gpt-5.5 and reads the shared 2,432:
    // 568 x 5,000 + 2,432 x 500 + 50 x 30,000 = 5,556,000, against 8,250,000 predicted.
    assert_eq!(what_ifs[1]["delta_nanousd"], 5_556_000 - 8_250_000);

    let fork = import("fixtures/codex/forked-subagent.jsonl", &[]);
    let child = &fork["sessions"][0];
    assert_eq!(child["parent"], "parent");
    // The inherited parent record (18,278 input) is not the sub-agent's: 18,300 + 26,458.
    assert_eq!(fork["totals"]["input"], 44_758);
    // gpt-5.6-terra on 2026-07-13, its launch price $2.50 / $0.25 / write $3.125 / $15: the
    // uncached 380 tokens are priced as written (an upper bound):
    // 380 x 3,125 + 17,920 x 250 + 1,000 x 15,000 = 1,187,500 + 4,480,000 + 15,000,000.
    assert_eq!(child["requests"][0]["cost_nanousd"], 20_667_500);
    assert_eq!(child["requests"][0]["recorded"]["neutral"]["written"], 380);
}

#[test]
fn another_provider_is_priced_only_when_named() {
    let dir = std::env::temp_dir().join(format!("forkcache-codex-provider-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = std::fs::read_to_string("fixtures/codex/forked-subagent.jsonl").unwrap();
    let path = dir.join("custom.jsonl");
    std::fs::write(&path, text.replace("\"model_provider\":\"openai\"", "\"model_provider\":\"relay\""))
        .unwrap();
    let path = path.to_str().unwrap();
    assert!(import(path, &[])["sessions"][0]["requests"][0]["cost_nanousd"].is_null());
    assert_eq!(
        import(path, &["--price-provider", "relay"])["sessions"][0]["requests"][0]["cost_nanousd"],
        20_667_500
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_bad_line_names_its_file_and_line() {
    let dir = std::env::temp_dir().join(format!("forkcache-codex-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.jsonl");
    std::fs::write(&path, "{\"timestamp\":\"2026-07-01T10:00:00.000Z\",\"type\":\"session_meta\",\"payload\":{\"id\":\"x\"}}\n{\"timestamp\":\"2026-07-01T10:00:00.000Z\",\"type\":\"turn_context\",\"payload\":\n").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_forkcache"))
        .args(["import", "codex", path.to_str().unwrap()])
        .output()
        .expect("the binary runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("bad.jsonl:2:"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn prices_lists_openai_rows_with_uncertain_values_marked() {
    let output = Command::new(env!("CARGO_BIN_EXE_forkcache"))
        .args(["prices", "--provider", "openai"])
        .output()
        .expect("the binary runs");
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    let row = |id: &str| {
        text.lines().find(|line| line.starts_with(&format!("{id} "))).unwrap_or_default().to_string()
    };
    // gpt-5.3-codex's $1.75 input comes from third-party copies only: marked `?`.
    assert!(row("gpt-5.3-codex").contains("1.75?"), "{text}");
    // gpt-5.5's $5 / $0.50 / $30 are from the pricing page: unmarked.
    assert!(!row("gpt-5.5").contains('?') && row("gpt-5.5").contains("0.5"), "{text}");
    // No API price for the ChatGPT-plan model.
    assert!(row("gpt-5.3-codex-spark").is_empty());
}

#[test]
fn html_is_one_page_with_charts_breaks_unbilled_work_and_what_ifs() {
    let dir = std::env::temp_dir().join(format!("forkcache-codex-html-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let output = Command::new(env!("CARGO_BIN_EXE_forkcache"))
        .args(["import", "codex", "fixtures/codex/rules.jsonl", "-q", "--what-if", "retention=24h", "--html"])
        .arg(&dir)
        .output()
        .expect("the binary runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let page = std::fs::read_to_string(dir.join("index.html")).unwrap();
    // One session with 7 requests: its two charts inline, nothing fetched.
    assert_eq!(page.matches("<svg").count(), 2, "usage and read charts");
    assert!(!page.contains("src=\"http") && !page.contains("href=\"http"), "self-contained");
    assert!(page.contains("real usage per request") && page.contains("real and predicted cache reads"));
    // The fixture's breaks table, its remote compaction (no usage), and the what-if row.
    assert!(page.contains("the breaks, with their causes"), "breaks table");
    assert!(page.contains("remote_compaction"), "the unbilled remote compaction is listed");
    assert!(page.contains("retention=24h"), "the what-if row");
    std::fs::remove_dir_all(&dir).unwrap();
}
