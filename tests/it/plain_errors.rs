//! The texts of the common mistakes in scenario and sweep files, held in a golden file
//! (`tests/golden/errors.txt`): each names the field and line, says what was expected in plain
//! words, and suggests the name meant. `UPDATE_GOLDEN=1 cargo test --test it plain_errors`
//! rewrites the file after a deliberate change; review its diff.

use forkcache_report::sweep::SweepSpec;
use forkcache_scenario::ScenarioSpec;

const GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/errors.txt");

/// A scenario with one timeline event, written the way people write them.
fn scenario(timeline: &str) -> String {
    format!(
        "{{\n  \"name\": \"t\",\n  \"model\": \"claude-sonnet-4-6\",\n  \"history\": {{\"generate\": {{\"turns\": 2}}}},\n  \"timeline\": [\n    {timeline}\n  ]\n}}\n"
    )
}

/// A sweep over the fork counts given.
fn sweep(grid: &str) -> String {
    format!(
        "{{\n  \"name\": \"s\",\n  \"scenario\": {{\"model\": \"claude-sonnet-4-6\"}},\n  \"grid\": {{{grid}}}\n}}\n"
    )
}

fn cases() -> Vec<(&'static str, String)> {
    vec![
        ("fork count written as a word", scenario(r#"{"fork": {"count": "four"}}"#)),
        ("a misspelt field", scenario(r#"{"fork": {"count": 3, "child_turn": 2}}"#)),
        ("a misspelt event kind", scenario(r#"{"frok": {"count": 3}}"#)),
        ("a negative idle gap", scenario(r#"{"idle": {"ms": -5}}"#)),
        ("a comma missing between fields", scenario(r#"{"fork": {"count": 3 "child_turns": 2}}"#)),
        ("a trailing comma", scenario(r#"{"turn": {"count": 2},}"#)),
        (
            "a file cut short",
            scenario(r#"{"turn": {"count": 2}}"#).trim_end().trim_end_matches('}').to_string(),
        ),
        ("a true/false field given text", scenario(r#"{"fork": {"count": 2, "worktree": "yes"}}"#)),
        ("a sweep's fork counts as text", sweep(r#""history_tokens": [10000], "forks": ["4"]"#)),
        ("a misspelt sweep axis", sweep(r#""history_tokens": [10000], "fork": [4]"#)),
    ]
}

fn rendered() -> String {
    let mut out = String::new();
    for (name, text) in cases() {
        let error = if name.starts_with("a sweep") || name.starts_with("a misspelt sweep") {
            SweepSpec::from_json(&text).expect_err(name).to_string()
        } else {
            ScenarioSpec::from_json(&text).expect_err(name).to_string()
        };
        out.push_str(&format!("## {name}\n{error}\n\n"));
    }
    out
}

#[test]
fn common_mistakes_read_in_plain_words() {
    let actual = rendered();
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(GOLDEN, &actual).unwrap();
    }
    let golden =
        std::fs::read_to_string(GOLDEN).expect("tests/golden/errors.txt (UPDATE_GOLDEN=1 writes it)");
    assert_eq!(actual, golden, "error texts changed; if deliberately, rerun with UPDATE_GOLDEN=1");
    // No Rust type names reach the user.
    for rust in ["u32", "u64", "usize", "invalid type", "struct "] {
        assert!(!actual.contains(rust), "a Rust internal leaks into an error: {rust}");
    }
}

#[test]
fn a_trace_given_to_run_or_sweep_points_to_replay() {
    let dir = crate::proxy::scratch("trace-to-run");
    let trace = dir.join("trace.jsonl");
    let marker =
        r#"{"forkcache_session":{"started":"2026-04-02T10:00:00.000Z","version":"0.1.0","format":3}}"#;
    std::fs::write(&trace, format!("{marker}\n")).unwrap();
    for command in ["run", "sweep"] {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_forkcache"))
            .args([command, trace.to_str().unwrap()])
            .output()
            .expect("the binary runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{command}: {stderr}");
        let hint = format!("`forkcache replay {}` prices it; `{command}` takes", trace.display());
        assert!(stderr.contains(&hint), "{command}: {stderr}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
