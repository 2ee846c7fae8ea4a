//! `forkcache sweep` (issue 4): the grid, its numbers checked by hand, its CSV, and the same
//! bytes whatever the thread count or shard split.

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use forkcache_engine::PriceTable;
use forkcache_report::sweep::{COLUMNS, Shard, SweepError, SweepOptions, SweepResult, SweepSpec, run};

/// The seed articles' example (DESIGN §2.5) as a grid: no system prompt, no tools, 100,000
/// tokens of history; the parent's turn adds a 200-token reply and a 100-token prompt; then 3
/// forks, one after another, each with 500 tokens of `tool_use`, 200 of placeholders and a
/// 100-token directive. Seed billing: writes 1.0×, reads 0.1× (token-equivalents are tokens).
const HAND: &str = r#"{
  "name": "hand",
  "scenario": {
    "seed": 1,
    "bill_output": false,
    "agent": {"system": [], "tools": [], "max_tokens": 1024},
    "history": {"generate": {"turns": 0, "user_tokens": [100, 100], "assistant_tokens": [200, 200], "tool_calls": [0, 0]}}
  },
  "fork": {"launch": "sequential", "gap_ms": 30000, "tool_use_tokens": [166, 167, 167], "placeholder_tokens": [66, 67, 67], "directive_tokens": 100},
  "grid": {
    "history_tokens": [100000],
    "forks": [3],
    "subagents": ["fork", "named"],
    "policy": ["longest-prefix", "anthropic"],
    "billing": ["seed"],
    "ttl": ["5m", "1h"],
    "idle_ms": [0, 360000]
  }
}"#;

fn hand() -> SweepResult {
    let spec = SweepSpec::from_json(HAND).expect("the hand grid parses");
    run(&spec, &SweepOptions::default(), &PriceTable::builtin(), || {}).expect("the hand grid runs")
}

/// The CSV as maps from column to cell, one per row.
fn records(csv: &str) -> Vec<std::collections::BTreeMap<String, String>> {
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let header: Vec<String> = reader.headers().expect("a header").iter().map(str::to_string).collect();
    reader
        .records()
        .map(|record| header.iter().cloned().zip(record.expect("a row").iter().map(str::to_string)).collect())
        .collect()
}

/// The row whose settings are `pairs`.
fn find<'r>(
    rows: &'r [std::collections::BTreeMap<String, String>],
    pairs: &[(&str, &str)],
) -> &'r std::collections::BTreeMap<String, String> {
    let matching: Vec<_> = rows.iter().filter(|row| pairs.iter().all(|(k, v)| row[*k] == *v)).collect();
    assert_eq!(matching.len(), 1, "exactly one row for {pairs:?}");
    matching[0]
}

#[test]
fn the_seed_example_by_hand_under_both_policies() {
    let rows = records(&hand().to_csv());
    // 2 policies × 2 TTLs × 2 idle gaps, for forks and for named sub-agents.
    assert_eq!(rows.len(), 16);
    // longest-prefix: the parent's first request writes the 100,000-token history (100,000);
    // its spawning request reads it and writes its 300-token turn (10,000 + 300); fork 1 reads
    // those 100,300 and writes 800 (10,030 + 800); forks 2 and 3 also read what fork 1 wrote,
    // 101,000, and write their directive (10,100 + 100 each).
    let lp =
        find(&rows, &[("policy", "longest-prefix"), ("subagents", "fork"), ("ttl", "5m"), ("idle_ms", "0")]);
    assert_eq!(lp["subagent_token_equivalents"], "31230.000");
    assert_eq!(lp["token_equivalents"], "141530.000");
    // Alone, each fork writes its whole 101,100-token request.
    assert_eq!(lp["subagent_naive_nanousd"], (3 * 101_100 * 3_000u64).to_string());
    assert_eq!(lp["subagent_savings"], "0.8970"); // 1 − 31,230 / 303,300 = 0.89703…
    assert_eq!(lp["requests"], "5");
    assert_eq!(lp["context_tokens"], "101100");
    assert_eq!(lp["misses"], "");
    // anthropic: fork 1 writes only at its directive, so forks 2 and 3 read the parent's
    // 100,300 and write 800 each, like fork 1 — and the engine says why.
    let an = find(&rows, &[("policy", "anthropic"), ("subagents", "fork"), ("ttl", "5m"), ("idle_ms", "0")]);
    assert_eq!(an["subagent_token_equivalents"], "32490.000");
    assert_eq!(an["token_equivalents"], "142790.000");
    assert_eq!(an["misses"], "prefix_changed=2");
}

#[test]
fn an_idle_gap_past_the_ttl_costs_the_history_again() {
    let rows = records(&hand().to_csv());
    // Six idle minutes expire a 5-minute entry: the spawning request writes all 100,300 tokens
    // instead of reading 100,000 of them (100,300 instead of 10,300); the forks read it as before.
    let expired = [
        ("longest-prefix", "231530.000", "expired=1"),
        ("anthropic", "232790.000", "prefix_changed=2;expired=1"),
    ];
    for (policy, total, misses) in expired {
        let at = |ttl, idle| {
            find(&rows, &[("policy", policy), ("subagents", "fork"), ("ttl", ttl), ("idle_ms", idle)])
        };
        assert_eq!(at("5m", "360000")["token_equivalents"], total, "{policy}");
        assert_eq!(at("5m", "360000")["misses"], misses, "{policy}");
        // A 1-hour entry lives through it (seed billing prices both TTLs alike).
        assert_eq!(at("1h", "360000")["token_equivalents"], at("1h", "0")["token_equivalents"], "{policy}");
        assert_eq!(at("1h", "0")["write_1h_tokens"], at("5m", "0")["write_5m_tokens"], "{policy}");
    }
}

#[test]
fn named_sub_agents_share_only_their_own_instructions() {
    let rows = records(&hand().to_csv());
    // Named general-purpose agents: 1,500 tokens of their own instructions (no sections, no
    // tools in this agent) and a 1,000-token brief each. The first writes 2,500; the others
    // read the instructions and write their own brief: 150 + 1,000 each. 2,500 + 2 × 1,150.
    for policy in ["longest-prefix", "anthropic"] {
        let named =
            find(&rows, &[("policy", policy), ("subagents", "named"), ("ttl", "5m"), ("idle_ms", "0")]);
        assert_eq!(named["subagent_requests"], "3");
        assert_eq!(named["subagent_token_equivalents"], "4800.000", "{policy}");
        assert_eq!(
            (named["variant"].as_str(), named["launch"].as_str()),
            ("", ""),
            "fork-only settings stay empty"
        );
    }
}

#[test]
fn anthropic_billing_in_nano_dollars() {
    // Sonnet 4.6: reads $0.30/MTok (300 nano-dollars a token), 5-minute writes $3.75 (3,750).
    let text = HAND.replace(r#""billing": ["seed"]"#, r#""billing": ["anthropic"]"#);
    let spec = SweepSpec::from_json(&text).unwrap();
    let result = run(&spec, &SweepOptions::default(), &PriceTable::builtin(), || {}).unwrap();
    let rows = records(&result.to_csv());
    let lp =
        find(&rows, &[("policy", "longest-prefix"), ("subagents", "fork"), ("ttl", "5m"), ("idle_ms", "0")]);
    let fork1 = 100_300 * 300 + 800 * 3_750;
    let later = 101_000 * 300 + 100 * 3_750;
    assert_eq!(lp["subagent_cost_nanousd"], (fork1 + 2 * later).to_string());
    assert_eq!(lp["billing"], "anthropic");
}

/// 2 histories × 3 fork counts × (2 policies × 2 launches for forks, 2 policies for named)
/// × 2 idle gaps = 72 cells, small enough for a debug build.
pub(crate) const SMALL: &str = r#"{
  "name": "small",
  "scenario": {"seed": 5, "bill_output": false},
  "fork": {"tool_use_tokens": 100, "placeholder_tokens": 50, "directive_tokens": 100},
  "grid": {
    "history_tokens": [10000, 50000],
    "forks": [1, 3, 8],
    "subagents": ["fork", "named"],
    "policy": ["anthropic", "longest-prefix"],
    "launch": ["staggered", "parallel"],
    "idle_ms": [0, 360000]
  }
}"#;

pub(crate) fn small_csv(options: SweepOptions) -> String {
    let spec = SweepSpec::from_json(SMALL).unwrap();
    run(&spec, &options, &PriceTable::builtin(), || {}).expect("the small grid runs").to_csv()
}

#[test]
fn the_same_bytes_on_one_thread_two_threads_and_in_shards() {
    let whole = small_csv(SweepOptions { threads: Some(1), shard: Shard::WHOLE });
    assert_eq!(whole.lines().count(), 1 + 72);
    assert_eq!(small_csv(SweepOptions { threads: Some(2), shard: Shard::WHOLE }), whole);
    for count in [2, 3, 5] {
        let parts: String = (1..=count)
            .map(|index| small_csv(SweepOptions { threads: Some(2), shard: Shard { index, count } }))
            .collect();
        assert_eq!(parts, whole, "{count} shards concatenated");
    }
    let second = small_csv(SweepOptions { threads: None, shard: Shard { index: 2, count: 2 } });
    assert!(!second.starts_with("cell,"), "only the first shard has the header");
    assert!(second.starts_with("36,"), "shard 2 of 2 starts at cell 36: {}", &second[..20]);
}

#[test]
fn progress_is_reported_once_per_cell() {
    let spec = SweepSpec::from_json(SMALL).unwrap();
    let done = AtomicUsize::new(0);
    let options = SweepOptions { threads: Some(2), shard: Shard { index: 1, count: 3 } };
    let result = run(&spec, &options, &PriceTable::builtin(), || {
        done.fetch_add(1, Ordering::Relaxed);
    })
    .unwrap();
    assert_eq!(done.load(Ordering::Relaxed), 24);
    assert_eq!((result.rows.len(), result.cells_total), (24, 72));
    let indices: Vec<usize> = result.rows.iter().map(|r| r.cell.index).collect();
    assert_eq!(indices, (0..24).collect::<Vec<_>>(), "rows in grid order");
}

#[test]
fn the_csv_has_the_documented_columns() {
    const DOCUMENTED: [&str; 34] = [
        "cell",
        "history_tokens",
        "forks",
        "subagents",
        "provider",
        "policy",
        "billing",
        "variant",
        "launch",
        "mark_placeholders",
        "ttl",
        "idle_ms",
        "requests",
        "context_tokens",
        "read_tokens",
        "write_5m_tokens",
        "write_1h_tokens",
        "uncached_tokens",
        "output_tokens",
        "cost_nanousd",
        "naive_nanousd",
        "savings",
        "token_equivalents",
        "hit_rate",
        "subagent_requests",
        "subagent_read_tokens",
        "subagent_write_tokens",
        "subagent_uncached_tokens",
        "subagent_cost_nanousd",
        "subagent_naive_nanousd",
        "subagent_savings",
        "subagent_token_equivalents",
        "tokens_missed",
        "misses",
    ];
    assert_eq!(COLUMNS, DOCUMENTED);
    let csv = small_csv(SweepOptions::default());
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    assert_eq!(reader.headers().unwrap().iter().collect::<Vec<_>>(), DOCUMENTED);
    for record in reader.records() {
        let record = record.expect("every row parses");
        assert_eq!(record.len(), DOCUMENTED.len());
        // Tokens and money are integers; savings are fractions with four decimals, token-equivalents three.
        for column in ["read_tokens", "cost_nanousd", "subagent_naive_nanousd", "tokens_missed"] {
            let cell = &record[DOCUMENTED.iter().position(|c| *c == column).unwrap()];
            assert!(cell.parse::<u64>().is_ok(), "{column} = {cell:?}");
        }
        let at = |column: &str| DOCUMENTED.iter().position(|c| *c == column).unwrap();
        let savings = &record[at("savings")];
        assert_eq!(savings.split_once('.').map(|(_, d)| d.len()), Some(4), "savings = {savings:?}");
        let te = &record[at("token_equivalents")];
        assert_eq!(te.split_once('.').map(|(_, d)| d.len()), Some(3), "token_equivalents = {te:?}");
    }
}

fn spec_error(text: &str) -> String {
    match SweepSpec::from_json(text) {
        Err(err) => err.to_string(),
        Ok(_) => panic!("accepted {text}"),
    }
}

#[test]
fn bad_sweep_files_name_the_field() {
    let cases = [
        (r#"{"grid": {"forkz": [1]}}"#, "grid.forkz: unknown field `forkz`"),
        (
            r#"{"grid": {"policy": ["anthropic", "longest"]}}"#,
            "grid.policy[1]: unknown value `longest`; did you mean `longest-prefix`?",
        ),
        (r#"{"grid": {"forks": []}}"#, "grid.forks: expected at least one value"),
        (r#"{"grid": {"forks": [4, 0]}}"#, "grid.forks[1]: expected 1 to 1024 forks, got 0"),
        (r#"{"grid": {"history_tokens": [0]}}"#, "grid.history_tokens[0]: expected token counts from 1"),
        (r#"{"grid": {"ttl": ["5m", "5m"]}}"#, r#"grid.ttl[1]: "5m" is listed twice"#),
        (
            r#"{"grid": {"provider": ["bedrock", "openai"], "policy": ["anthropic", "longest-prefix"]}}"#,
            "grid.policy: the provider openai (in grid.provider) brings its own cache rules; give one policy",
        ),
        (r#"{"grid": {"provider": ["azure"]}}"#, "grid.provider[0]: unknown value `azure`"),
        (
            r#"{"grid": {"idle_ms": [-1]}}"#,
            "grid.idle_ms[0]: expected a whole number of milliseconds, e.g. 20000; found the number -1",
        ),
        (r#"{"fork": {"count": 3}}"#, "fork.count: the grid sets how many forks"),
        (r#"{"fork": {"child_turns": 0}}"#, "fork.child_turns: expected at least 1"),
        (r#"{"named": {"agent": "explore", "turns": 0}}"#, "named.turns: expected at least 1"),
        (r#"{"scenario": {"timeline": [{"turn": {}}]}}"#, "scenario.timeline: the grid sets the timeline"),
        (
            r#"{"scenario": {"history": {"messages": []}}}"#,
            "scenario.history.messages: the grid sets the history",
        ),
        (
            r#"{"scenario": {"history": {"target_tokens": 50000}}}"#,
            "scenario.history.target_tokens: the grid sets the history's size",
        ),
        (r#"{"scenario": {"agent": {"max_tokenz": 1}}}"#, "scenario.agent.max_tokenz: unknown field"),
        (r#"{"grid": {"history_tokens": [1], "forks": [1]}, "extra": 1}"#, "extra: unknown field `extra`"),
        (r#"{"grid": "#, "sweep: the file ends before the JSON does"),
        ("[]", "sweep: expected a JSON object"),
    ];
    for (text, expected) in cases {
        let message = spec_error(text);
        assert!(message.starts_with(expected), "{text}\n  gave {message:?}\n  expected {expected:?}…");
    }
    let hundred = (1..=100).map(|n| n.to_string()).collect::<Vec<_>>().join(",");
    let huge = format!(
        r#"{{"grid": {{"history_tokens": [{hundred}], "forks": [{hundred}], "idle_ms": [{hundred}], "ttl": ["5m", "1h"]}}}}"#
    );
    assert_eq!(spec_error(&huge), "grid: 2000000 cells; expected at most 1000000");
}

#[test]
fn an_unknown_model_fails_before_any_cell_runs() {
    let spec = SweepSpec::from_json(r#"{"scenario": {"model": "claude-nonesuch"}}"#).unwrap();
    let err =
        run(&spec, &SweepOptions::default(), &PriceTable::builtin(), || panic!("no cell runs")).unwrap_err();
    assert_eq!(err.to_string(), r#"scenario.model: "claude-nonesuch" is not in the price table"#);
}

#[test]
fn shards_and_threads_are_checked() {
    for bad in ["0/2", "3/2", "1/0", "a/b", "2", "1/2/3"] {
        assert!(matches!(Shard::parse(bad), Err(SweepError::Shard { .. })), "{bad}");
    }
    assert_eq!(Shard::parse("2/4").unwrap(), Shard { index: 2, count: 4 });
    // 10 cells in 4 shards: [0, 2), [2, 5), [5, 7), [7, 10).
    let ranges: Vec<_> = (1..=4).map(|index| Shard { index, count: 4 }.range(10)).collect();
    assert_eq!(ranges, [0..2, 2..5, 5..7, 7..10]);
    let spec = SweepSpec::from_json("{}").unwrap();
    let err =
        run(&spec, &SweepOptions { threads: Some(0), shard: Shard::WHOLE }, &PriceTable::builtin(), || {});
    assert_eq!(err.unwrap_err().to_string(), "threads: expected at least 1");
}

#[test]
fn the_shipped_grids_parse_and_have_the_stated_size() {
    // 5 histories × 7 fork counts × 2 TTLs × 6 idle gaps × (2 policies × 2 billings × 2 variants
    // × 3 launches × 2 marker placements for forks + 2 policies × 2 billings for named).
    let default = SweepSpec::default_grid();
    assert_eq!(default.cells().len(), 5 * 7 * 2 * 6 * (2 * 2 * 2 * 3 * 2 + 2 * 2));
    assert_eq!(SweepSpec::cost_curves().cells().len(), 13 * 4);
    let file = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/sweeps/default.json"))
        .unwrap();
    assert_eq!(SweepSpec::from_json(&file).unwrap(), default);
}

/// `forkcache sweep FILE --out DIR [--shard i/n]`, run as a program.
fn sweep_cli(dir: &std::path::Path, extra: &[&str]) {
    let file = dir.join("small.json");
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(&file, SMALL).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_forkcache"))
        .arg("sweep")
        .arg(&file)
        .arg("--out")
        .arg(dir)
        .args(extra)
        .env("CI", "true")
        .output()
        .expect("the binary runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(
        output.stderr.is_empty(),
        "no progress bar under CI: {:?}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_command_writes_shards_that_concatenate_to_the_whole() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("sweep-cli");
    let _ = std::fs::remove_dir_all(&dir);
    sweep_cli(&dir, &[]);
    sweep_cli(&dir, &["--shard", "1/2", "--threads", "1"]);
    sweep_cli(&dir, &["--shard", "2/2"]);
    let read = |name: &str| std::fs::read(dir.join(name)).unwrap();
    let joined = [read("sweep-1-of-2.csv"), read("sweep-2-of-2.csv")].concat();
    assert_eq!(joined, read("sweep.csv"));
    assert_eq!(read("sweep.csv"), small_csv(SweepOptions::default()).into_bytes());
    let meta: serde_json::Value = serde_json::from_slice(&read("sweep.meta.json")).unwrap();
    assert_eq!(meta["prices_date"], PriceTable::builtin().date.as_str());
    assert_eq!((meta["seed"].as_u64(), meta["cells"].as_u64()), (Some(5), Some(72)));
}

#[test]
fn a_bad_sweep_file_is_an_error_not_a_panic() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("sweep-cli-bad");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.json");
    std::fs::write(&file, r#"{"grid": {"launch": ["paralel"]}}"#).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_forkcache")).arg("sweep").arg(&file).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "invalid input");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("grid.launch[0]: unknown value `paralel`; did you mean `parallel`?"), "{stderr}");
}

#[test]
fn the_readme_sweep_example_is_a_valid_sweep() {
    let section = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/sweep.md")).unwrap();
    let start = section.find("```json\n").expect("a JSON example") + "```json\n".len();
    let example = &section[start..start + section[start..].find("```").unwrap()];
    let spec = SweepSpec::from_json(example).expect("docs/sweep.md's example parses");
    // 2 histories × 4 fork counts × 2 idle gaps × (2 policies × 2 launches × 2 marker
    // placements for forks + 2 policies for named sub-agents).
    assert_eq!(spec.cells().len(), 2 * 4 * 2 * (2 * 2 * 2 + 2));
}

#[test]
fn each_provider_cell_runs_on_its_own_rules_table_and_model() {
    // One fork on a 10K history, on two providers: the CSV names each cell's provider, and the
    // policy is the provider's own (OpenAI's rules replace the base scenario's `anthropic`).
    let spec = SweepSpec::from_json(
        r#"{"grid": {"history_tokens": [10000], "forks": [1], "provider": ["anthropic", "openai"]}}"#,
    )
    .unwrap();
    let result = run(&spec, &SweepOptions::default(), &PriceTable::builtin(), || {}).unwrap();
    let cells: Vec<(&str, &str)> =
        result.rows.iter().map(|row| (row.cell.provider.name(), row.cell.policy.name())).collect();
    assert_eq!(cells, [("anthropic", "anthropic"), ("openai", "openai")]);
    let csv = result.to_csv();
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let providers: Vec<String> = reader.records().map(|r| r.unwrap()[4].to_string()).collect();
    assert_eq!(providers, ["anthropic", "openai"]);
    // Anthropic's tool-use system prompt (497 tokens for Sonnet 4.6 with tools) is its own:
    // gpt-5.4 sends the same blocks without it, on each of the cell's requests.
    let [anthropic, openai] = [&result.rows[0].totals, &result.rows[1].totals];
    let requests = anthropic.requests;
    assert_eq!(openai.requests, requests);
    assert_eq!(anthropic.usage.total_input_tokens() - openai.usage.total_input_tokens(), 497 * requests);
}
