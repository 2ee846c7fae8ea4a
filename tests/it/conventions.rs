//! One set of conventions across commands (docs/design.md, "Command line"): every command's
//! `--json` is one JSON document with the same key names and types; savings are fractions in
//! JSON and CSV; request indexes are 0-based.

use serde_json::Value;

use super::support::run_binary;

/// The four usage keys the API returns, each a whole number of tokens.
const USAGE_KEYS: [&str; 4] =
    ["input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens"];

/// A grid small enough to run in a test: one history, one and two forks.
const SMALL_GRID: &str = r#"{"name": "small", "grid": {"history_tokens": [10000], "forks": [1, 2]}}"#;

/// What a walk over one document found, for the per-command expectations.
#[derive(Default)]
struct Seen {
    usage_objects: usize,
    costs_usd: usize,
    savings: usize,
}

/// Runs `forkcache args…`, expecting `codes` and one JSON document on standard output.
fn json_of(args: &[&str], codes: &[i32]) -> Value {
    let out = run_binary(args, b"");
    let code = out.status.code().unwrap_or(-1);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(codes.contains(&code), "forkcache {args:?} exited {code}: {stderr}");
    let stdout = String::from_utf8(out.stdout).expect("UTF-8 output");
    assert_eq!(stdout.trim_end().lines().count(), 1, "forkcache {args:?}: one JSON document on one line");
    serde_json::from_str(&stdout).unwrap_or_else(|err| panic!("forkcache {args:?}: {err}\n{stdout}"))
}

/// Walks a document and fails on the first key that breaks a convention.
fn check(doc: &Value, what: &str) -> Seen {
    let mut seen = Seen::default();
    walk(doc, &mut format!("{what}:"), &mut seen);
    seen
}

fn walk(value: &Value, path: &mut String, seen: &mut Seen) {
    match value {
        Value::Object(map) => {
            if map.contains_key("cache_read_input_tokens") {
                check_usage(map, path);
                seen.usage_objects += 1;
            }
            for (key, value) in map {
                let len = path.len();
                path.push('.');
                path.push_str(key);
                check_key(key, value, path, seen);
                walk(value, path, seen);
                path.truncate(len);
            }
        }
        Value::Array(items) => {
            check_indexes(items, path);
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                walk(item, path, seen);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

fn check_usage(usage: &serde_json::Map<String, Value>, path: &str) {
    for key in USAGE_KEYS {
        assert!(usage.get(key).is_some_and(Value::is_u64), "{path}.{key}: a usage object's whole number");
    }
}

/// Money, savings and rates: one name and one type each, everywhere.
fn check_key(key: &str, value: &Value, path: &str, seen: &mut Seen) {
    let lower = key.to_ascii_lowercase();
    for banned in ["pct", "percent", "dollar"] {
        assert!(
            !lower.contains(banned),
            "{path}: no `{banned}` keys (savings are fractions, money is *_usd)"
        );
    }
    assert!(!["cost", "usd", "price", "savings_usd"].contains(&key), "{path}: money is `cost_usd`");
    if key.ends_with("_nanousd") {
        assert!(value.is_u64() || value.is_null(), "{path}: nano-dollars are whole numbers, got {value}");
    } else if key.ends_with("_usd") {
        assert!(value.is_number() || value.is_null(), "{path}: dollars are a number or null, got {value}");
        seen.costs_usd += usize::from(key == "cost_usd");
    }
    if key == "savings" || key.ends_with("_savings") || key == "hit_rate" || key.ends_with("_hit_rate") {
        let fraction = value.as_f64().unwrap_or_else(|| panic!("{path}: a number, got {value}"));
        assert!((0.0..=1.0).contains(&fraction), "{path}: a fraction in [0, 1], got {fraction}");
        seen.savings += 1;
    }
    if key == "index" {
        assert!(value.is_u64(), "{path}: an index is a whole number, got {value}");
    }
}

/// A command's list of requests (objects with an `index`) counts from 0. (Lists inside, such
/// as an import chain's requests, hold indexes into their session's requests.)
fn check_indexes(items: &[Value], path: &str) {
    if !path.ends_with(":.requests") {
        return;
    }
    if let Some(first) = items.first().and_then(|item| item.get("index")) {
        assert_eq!(first, 0, "{path}[0].index: request indexes are 0-based");
    }
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("forkcache-conventions-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temp dir");
    dir
}

fn path_str(path: &std::path::Path) -> &str {
    path.to_str().expect("a UTF-8 temp path")
}

#[test]
fn every_commands_json_shares_key_names_and_types() {
    let dir = temp_dir("json");
    let grid = dir.join("small.json");
    std::fs::write(&grid, SMALL_GRID).expect("grid written");
    let (grid, bodies) = (path_str(&grid), dir.join("bodies"));
    let scenario = "fixtures/scenarios/forks.json";
    let trace = "tests/data/replay_mixed.jsonl";

    let run = check(&json_of(&["run", scenario, "--json", "--bodies", path_str(&bodies)], &[0]), "run");
    assert!(run.usage_objects > 0 && run.costs_usd > 0 && run.savings > 0, "run: usage, cost_usd, savings");

    // The trace holds one unreadable line on purpose: exit 3, the document still printed.
    let replay = check(&json_of(&["replay", trace, "--json"], &[3]), "replay");
    assert!(replay.usage_objects > 0 && replay.costs_usd > 0, "replay: usage and cost_usd");

    let explained = json_of(&["explain", trace, "--request", "1", "--json"], &[0]);
    assert_eq!(explained["index"], 1, "explain --request 1 explains the request with index 1");
    assert!(check(&explained, "explain --request").usage_objects > 0);
    let a = bodies.join("0000-parent.json");
    let b = bodies.join("0001-fork.json");
    check(&json_of(&["explain", path_str(&a), path_str(&b), "--json"], &[0]), "explain");

    let import = json_of(&["import", "claude-code", "tests/data/claude_code/every_rule", "--json"], &[0, 3]);
    let session = &import["sessions"][0];
    let chains = session["chains"].as_array().expect("a session's chains");
    let indexes = chains.iter().flat_map(|c| c["requests"].as_array().expect("a chain's requests"));
    let first = indexes.filter_map(|r| r["index"].as_u64()).min();
    assert_eq!(first, Some(0), "a session's first request is request 0");
    let import = check(&import, "import");
    assert!(import.usage_objects > 0 && import.costs_usd > 0, "import: usage and cost_usd");

    check(&json_of(&["prices", "--json"], &[0]), "prices");

    let out = dir.join("sweep");
    let sweep = json_of(&["sweep", grid, "--out", path_str(&out), "--json"], &[0]);
    check(&sweep, "sweep");
    assert_eq!(sweep["rows"], 2, "two cells: one history × forks 1 and 2");
    // People count shards: the whole grid is part 1 of 1.
    assert_eq!((sweep["shard"]["i"].as_u64(), sweep["shard"]["n"].as_u64()), (Some(1), Some(1)));

    let out = dir.join("demo");
    let demo_args = ["demo", "--out", path_str(&out), "--sweep", grid, "--cost-curves", grid, "--json"];
    let demo = json_of(&demo_args, &[0]);
    let seen = check(&demo, "demo");
    assert!(
        seen.usage_objects > 0 && seen.costs_usd > 0 && seen.savings > 0,
        "demo: usage, cost_usd, savings"
    );
    // The seed example's warm case under the seed billing: 1 − 31,140 / 302,400 = 0.897024 (§2.5).
    let warm = &demo["seed_example"][0];
    assert_eq!((warm["case"].as_str(), warm["billing"].as_str()), (Some("warm"), Some("seed")));
    assert_eq!(warm["savings"].as_f64(), Some(0.897024));
    check_csv_savings(&out);

    let out = dir.join("report");
    let report_args = ["report", "--out", path_str(&out), "--sweep", grid, "--cost-curves", grid, "--json"];
    let report = json_of(&report_args, &[0]);
    check(&report, "report");
    let files = report["files"].as_array().expect("report --json lists its files");
    assert!(files.iter().any(|f| f.as_str().is_some_and(|f| f.ends_with("summary.csv"))), "{files:?}");

    let shards = dir.join("shards");
    for shard in ["1/2", "2/2"] {
        let part = json_of(&["sweep", grid, "--shard", shard, "--out", path_str(&shards), "--json"], &[0]);
        assert_eq!(part["rows"], 1, "shard {shard}: one of the two cells");
    }
    let merged = json_of(&["merge-shards", path_str(&shards), "--json"], &[0]);
    check(&merged, "merge-shards");
    assert_eq!((merged["shards"].as_u64(), merged["rows"].as_u64()), (Some(2), Some(2)));
}

/// Every savings and hit-rate column of the files `demo` writes holds fractions in [0, 1], and
/// no header speaks of percents.
fn check_csv_savings(dir: &std::path::Path) {
    for name in ["summary.csv", "sweep.csv", "cost_curves.csv", "seed_example.csv", "delegation.csv"] {
        let text = std::fs::read_to_string(dir.join(name)).expect("the demo wrote it");
        check_csv_text(&text, name);
    }
}

fn check_csv_text(text: &str, name: &str) {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let header = reader.headers().expect("a header").clone();
    assert!(header.iter().all(|column| !column.contains("pct")), "{name}: {header:?}");
    let fractions: Vec<usize> = (0..header.len())
        .filter(|&i| {
            ["savings", "hit_rate"]
                .iter()
                .any(|key| header[i] == **key || header[i].ends_with(&format!("_{key}")))
        })
        .collect();
    assert!(
        !fractions.is_empty() || name == "seed_example.csv" || name == "delegation.csv",
        "{name}: {header:?}"
    );
    for row in reader.records() {
        let row = row.expect("a CSV row");
        for &i in &fractions {
            let value: f64 =
                row[i].parse().unwrap_or_else(|_| panic!("{name}.{}: {:?}", &header[i], &row[i]));
            assert!((0.0..=1.0).contains(&value), "{name}.{}: a fraction in [0, 1], got {value}", &header[i]);
        }
    }
}

#[test]
fn table_commands_print_csv_with_0_based_indexes_and_fractions() {
    let out = run_binary(&["run", "fixtures/scenarios/forks.json", "--csv"], b"");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let index =
        reader.headers().expect("a header").iter().position(|c| c == "index").expect("an index column");
    let first = reader.records().next().expect("a row").expect("a CSV row");
    assert_eq!(&first[index], "0", "the first request is request 0");

    let out = run_binary(&["replay", "tests/data/replay_mixed.jsonl", "--csv"], b"");
    assert_eq!(out.status.code(), Some(3), "one unreadable line");
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let header = reader.headers().expect("a header").clone();
    for key in USAGE_KEYS.iter().chain(&["index", "line", "cost_usd"]) {
        assert!(header.iter().any(|c| c == *key), "replay --csv has {key}: {header:?}");
    }
    let first = reader.records().next().expect("a row").expect("a CSV row");
    // Index 0 is on line 1: indexes count from 0, line numbers from 1.
    assert_eq!((&first[0], &first[1]), ("0", "1"));
    // 10,000 tokens written for 5 minutes on Sonnet at $3.75/MTok: $0.0375.
    let cost = header.iter().position(|c| c == "cost_usd").expect("cost_usd");
    assert_eq!(&first[cost], "0.037500000");
}

#[test]
fn quiet_prints_nothing_on_stdout_and_json_conflicts_with_csv() {
    let out = run_binary(&["run", "fixtures/scenarios/forks.json", "--quiet"], b"");
    assert!(out.status.success());
    assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
    let out = run_binary(&["run", "fixtures/scenarios/forks.json", "--json", "--csv"], b"");
    assert_eq!(out.status.code(), Some(2), "a usage error");
}

// ---- scenario realism knobs: a history of a target size, the model's context window ----

/// A Haiku 5.5 scenario (a 200,000-token context window in the shipped price table) whose
/// history is generated to `target` tokens in steps of exactly 2,000: a 1,000-token reply with no
/// tool call, then a 1,000-token prompt. `extra` is spliced into the top-level object.
fn window_scenario(target: u64, turns: u32, extra: &str) -> forkcache_scenario::ScenarioSpec {
    let json = format!(
        r#"{{"name": "window", "model": "claude-haiku-5-5", "seed": 1, {extra}
            "history": {{"target_tokens": {target}, "generate": {{"user_tokens": [1000, 1000],
              "assistant_tokens": [1000, 1000], "tool_calls": [0, 0]}}}},
            "timeline": [{{"turn": {{"count": {turns}}}}}]}}"#
    );
    forkcache_scenario::ScenarioSpec::from_json(&json).expect("a valid scenario")
}

fn run_scenario(
    spec: &forkcache_scenario::ScenarioSpec,
) -> Result<forkcache_scenario::ScenarioReport, forkcache_scenario::ScenarioError> {
    let config = forkcache_scenario::RunConfig::for_spec(spec);
    forkcache_scenario::run(spec, &config, &forkcache_engine::PriceTable::builtin())
}

fn first_input_tokens(report: &forkcache_scenario::ScenarioReport) -> u64 {
    report.records[0].record.usage.total_input_tokens()
}

#[test]
fn a_history_is_generated_to_its_target_token_count() {
    // Target 1: the first prompt alone, 1,000 tokens. Target 150,000: 1,000 + 75 × 2,000 =
    // 151,000 (74 steps reach 149,000, short of it). The first request differs by 150,000.
    let small = run_scenario(&window_scenario(1, 1, "")).expect("runs");
    let large = run_scenario(&window_scenario(150_000, 1, "")).expect("runs");
    assert_eq!(first_input_tokens(&large) - first_input_tokens(&small), 150_000);
}

#[test]
fn a_target_past_the_context_window_is_an_error_naming_the_field() {
    let err = run_scenario(&window_scenario(250_000, 1, "")).unwrap_err().to_string();
    assert!(err.starts_with("history.target_tokens:"), "{err}");
    assert!(err.contains("200000") && err.contains("context_window"), "{err}");
}

#[test]
fn a_main_loop_past_the_window_compacts_when_enabled_and_is_an_error_otherwise() {
    // 151,000 tokens of history plus 2,000 per turn: 60 turns pass the window (200,000), where a
    // prompt of declared sizes is refused, whatever the system and tools add.
    let err = run_scenario(&window_scenario(150_000, 60, "")).unwrap_err().to_string();
    assert!(err.starts_with("agent.compaction_threshold_tokens:"), "{err}");
    assert!(err.contains("context_window"), "{err}");
    // A threshold above the window: compaction happens at 90% of it (180,000) instead, early
    // enough that the summary request, which reads it all, fits.
    let agent = r#""agent": {"compaction_threshold_tokens": 10000000},"#;
    let report = run_scenario(&window_scenario(150_000, 60, agent)).expect("compaction keeps it inside");
    let compactions = report.records.iter().filter(|r| r.role.name() == "compaction").count();
    assert!(compactions >= 1, "compacted at the window");
    let largest = report.records.iter().map(|r| r.record.usage.total_input_tokens()).max().unwrap();
    assert!(largest <= 200_000, "no request past the window: {largest}");
}

#[test]
fn a_bad_flag_value_is_a_usage_error_on_every_command() {
    let cases: &[&[&str]] = &[
        &["replay", "--date", "2026-13-01", "trace.jsonl"],
        &["import", "claude-code", "--since", "yesterday", "tests/data/claude_code/every_rule"],
        &["sweep", "fixtures/sweeps/default.json", "--shard", "abc"],
        &["sweep", "fixtures/sweeps/default.json", "--shard", "4/3"],
        &["proxy", "--upstream", "ftp://x"],
        &["serve", "--addr", "nowhere"],
        &["replay", "--threads", "0", "trace.jsonl"],
    ];
    for args in cases {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_forkcache"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(*args)
            .output()
            .expect("the binary runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("invalid value"), "{args:?}: clap names the flag and value: {stderr}");
    }
}
