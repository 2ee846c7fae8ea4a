//! `forkcache report` (issue 4): every file of `reports/`, the same bytes every time (PNG
//! included), valid charts of the stated size, CSVs with their documented columns, and the
//! golden `summary.csv`.
//!
//! The default grid takes a release build a few seconds and a debug build minutes, so these
//! tests build the report over a small grid; `FORKCACHE_SLOW=1` also rebuilds it with the
//! default grids and compares every file with the committed `reports/` (CI does the same with
//! the release binary).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use forkcache_engine::PriceTable;
use forkcache_report::sweep::SweepSpec;
use forkcache_report::{Artifact, ReportOptions, build, chart, cost_curve_columns, suite_columns, write};

const REPORTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/reports");

/// Every axis the charts plot, at two or three values: 160 cells.
const SMALL_GRID: &str = r#"{
  "name": "small",
  "scenario": {"seed": 3, "bill_output": false},
  "fork": {"tool_use_tokens": 100, "placeholder_tokens": 50, "directive_tokens": 100},
  "grid": {
    "history_tokens": [10000, 100000],
    "forks": [1, 4],
    "subagents": ["fork", "named"],
    "policy": ["anthropic", "longest-prefix"],
    "variant": ["all-tool-uses", "own-tool-use"],
    "mark_placeholders": [false, true],
    "ttl": ["5m", "1h"],
    "idle_ms": [0, 360000]
  }
}"#;

const SMALL_CURVES: &str =
    r#"{"name": "small-curves", "grid": {"history_tokens": [10000, 100000], "forks": [1, 4]}}"#;

const SMALL_PROVIDERS: &str = r#"{"name": "small-providers", "grid": {"history_tokens": [100000], "forks": [1, 4],
    "provider": ["anthropic", "bedrock", "openai", "gemini-implicit", "deepseek"]}}"#;

fn small_options(threads: usize) -> ReportOptions {
    ReportOptions {
        sweep: SweepSpec::from_json(SMALL_GRID).unwrap(),
        cost_curves: SweepSpec::from_json(SMALL_CURVES).unwrap(),
        providers: SweepSpec::from_json(SMALL_PROVIDERS).unwrap(),
        threads: Some(threads),
        seed: None,
    }
}

fn small_report(threads: usize) -> Vec<Artifact> {
    build(&small_options(threads), &PriceTable::builtin(), || {}).expect("the report builds")
}

/// The small report on two threads, built once for the tests that only read it.
fn shared_report() -> &'static [Artifact] {
    static REPORT: std::sync::OnceLock<Vec<Artifact>> = std::sync::OnceLock::new();
    REPORT.get_or_init(|| small_report(2))
}

fn artifact<'a>(artifacts: &'a [Artifact], name: &str) -> &'a Artifact {
    artifacts.iter().find(|a| a.name == name).unwrap_or_else(|| panic!("no {name}"))
}

fn text<'a>(artifacts: &'a [Artifact], name: &str) -> &'a str {
    std::str::from_utf8(&artifact(artifacts, name).bytes).expect("UTF-8")
}

const CHARTS: [&str; 10] = [
    "antipatterns",
    "cost_curves",
    "cost_vs_forks",
    "cost_vs_idle",
    "policy_gap",
    "providers",
    "savings_vs_history",
    "session_timeline",
    "delegation_vs_history",
    "delegation_vs_idle",
];

const TABLES: [&str; 8] = [
    "antipatterns.csv",
    "cost_curves.csv",
    "delegation.csv",
    "providers.csv",
    "requests.csv",
    "seed_example.csv",
    "summary.csv",
    "sweep.csv",
];

#[test]
fn the_report_holds_every_file_in_name_order() {
    let artifacts = shared_report();
    let mut expected: Vec<String> = TABLES.iter().map(|t| t.to_string()).collect();
    expected.extend(CHARTS.iter().flat_map(|c| [format!("{c}.png"), format!("{c}.svg")]));
    expected.extend(["README.md".to_string(), "sweep.meta.json".to_string()]);
    expected.sort();
    assert_eq!(artifacts.iter().map(|a| a.name.clone()).collect::<Vec<_>>(), expected);
}

/// Files by name, read back from a directory.
fn read_dir(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let path = entry.unwrap().path();
            (path.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&path).unwrap())
        })
        .collect()
}

fn fresh_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn two_reports_are_byte_identical_on_one_thread_and_two() {
    let (first, second) = (fresh_dir("report-1"), fresh_dir("report-2"));
    write(&first, &small_report(1)).unwrap();
    write(&second, shared_report()).unwrap();
    let (a, b) = (read_dir(&first), read_dir(&second));
    assert_eq!(a.len(), 30);
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    for (name, bytes) in &a {
        assert!(b[name] == *bytes, "{name} differs between the two runs");
    }
}

/// Width and height from a PNG's IHDR chunk, after checking the signature.
fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "PNG signature");
    assert_eq!(&bytes[12..16], b"IHDR");
    let be = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    (be(16), be(20))
}

#[test]
fn every_chart_is_a_valid_png_and_svg_of_the_stated_size() {
    let artifacts = shared_report();
    for stem in CHARTS {
        let png = &artifact(artifacts, &format!("{stem}.png")).bytes;
        assert_eq!(png_size(png), (1200, 800), "{stem}.png");
        assert_eq!((chart::WIDTH, chart::HEIGHT), (1200, 800));
        // A full decode: every chunk and the image data are well formed.
        let mut reader = png::Decoder::new(std::io::Cursor::new(png)).read_info().expect("a PNG header");
        let mut pixels = vec![0; reader.output_buffer_size()];
        let frame = reader.next_frame(&mut pixels).expect("decodes");
        assert_eq!((frame.width, frame.height), (1200, 800), "{stem}.png");
        let svg = text(artifacts, &format!("{stem}.svg"));
        assert!(
            svg.starts_with("<svg") && svg.contains(r#"width="1200""#) && svg.contains(r#"height="800""#)
        );
        // Every chart names the price table's date in its caption.
        assert!(svg.contains(&PriceTable::builtin().date), "{stem}.svg has no price date");
    }
}

#[test]
fn sweep_charts_have_titles_axes_legends_and_captions() {
    let artifacts = shared_report();
    let svg = |stem: &str| text(artifacts, &format!("{stem}.svg")).to_string();
    let savings = svg("savings_vs_history");
    for needle in
        ["What forks save", "(tokens, log scale)", "saved vs no sharing (%)", "1 fork", "4 forks", "seed 3"]
    {
        assert!(savings.contains(needle), "savings_vs_history.svg lacks {needle:?}");
    }
    let forks = svg("cost_vs_forks");
    for needle in
        ["forks, no sharing (naive)", "forks sharing the parent", "named sub-agents", "(USD, log scale)"]
    {
        assert!(forks.contains(needle), "cost_vs_forks.svg lacks {needle:?}");
    }
    let idle = svg("cost_vs_idle");
    assert!(idle.contains("5-minute TTL") && idle.contains("1-hour TTL") && idle.contains("(minutes)"));
    // Both TTLs are marked on the idle axis.
    assert!(idle.contains("5m TTL") && idle.contains("1h TTL"));
    let gap = svg("policy_gap");
    assert!(gap.contains("longest-prefix") && gap.contains("marker on the last placeholder"));
    assert!(gap.contains("cost per fork"));
    let antipatterns = svg("antipatterns");
    assert!(antipatterns.contains("log scale") && antipatterns.contains("1.01×"));
    let timeline = svg("session_timeline");
    assert!(timeline.contains("read from the cache") && timeline.contains("seed 42"));
    assert!(timeline.contains("seconds into the session"));
}

#[test]
fn the_html_page_inlines_every_chart_and_the_small_tables() {
    let artifacts = shared_report();
    let page = forkcache_report::html_page(artifacts).unwrap();
    assert_eq!(page.name, "index.html");
    let html = String::from_utf8(page.bytes).unwrap();
    assert_eq!(html.matches("<svg").count(), CHARTS.len(), "one inline SVG per chart");
    assert_eq!(html.matches("<table class=\"sortable\">").count(), 3);
    // Each chart's one-line reading sits under it, as in README.md.
    let readme = text(artifacts, "README.md");
    let reading = "Cost is flat except for one jump where the gap outlasts the TTL";
    assert!(html.contains(reading) && readme.contains(reading));
    // Self-contained: no script, style, image or link fetched from anywhere (the contents link
    // within the page only).
    let outside = html.replace("href=\"#section-", "");
    for needle in ["src=", "href=", "@import", "url("] {
        assert!(!outside.contains(needle), "index.html refers outside itself: {needle}");
    }
    // It opens on the seeds' example: 31,140 warm against 302,400 without sharing, 1 −
    // 31,140 / 302,400 = 0.8970 → 89.7% less; then its contents.
    assert!(html.contains(
        "<p class=\"headline\">The seed articles&#39; worked example, with a warm cache, costs 31,140 token-equivalents where sending it without sharing costs 302,400: 89.7% less.</p>"
    ));
    assert!(html.contains("<li><a href=\"#section-1\">Charts</a></li>"));
    // Money in dollars, shares in percent, right-aligned: the seed table's warm savings 0.8970.
    assert!(!html.contains("nanousd") && html.contains("cost_usd"));
    assert!(html.contains("<td class=\"num\">89.7%</td>"));
}

/// The header and rows of a CSV file, every row checked to parse with the header's width.
fn parse(csv_text: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut reader = csv::Reader::from_reader(csv_text.as_bytes());
    let header: Vec<String> = reader.headers().expect("a header").iter().map(str::to_string).collect();
    let rows: Vec<Vec<String>> =
        reader.records().map(|r| r.expect("a row parses").iter().map(str::to_string).collect()).collect();
    assert!(rows.iter().all(|row| row.len() == header.len()));
    (header, rows)
}

#[test]
fn csvs_parse_and_have_the_documented_columns() {
    let artifacts = shared_report();
    let documented: BTreeMap<&str, Vec<&str>> = [
        (
            "summary.csv",
            vec![
                "scenario",
                "policy",
                "billing",
                "seed",
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
                "naive_token_equivalents",
                "hit_rate",
                "rewrite_factor",
                "tokens_missed",
                "misses",
                "forks_identical",
            ],
        ),
        (
            "requests.csv",
            vec![
                "scenario",
                "index",
                "role",
                "agent",
                "spawn",
                "fork",
                "at_ms",
                "model",
                "read_tokens",
                "write_5m_tokens",
                "write_1h_tokens",
                "uncached_tokens",
                "output_tokens",
                "cost_nanousd",
                "naive_nanousd",
                "token_equivalents",
                "ttft_ms",
                "miss",
                "miss_dimension",
                "miss_path",
                "tokens_missed",
            ],
        ),
        (
            "antipatterns.csv",
            vec![
                "mistake",
                "what",
                "mistake_scenario",
                "correct_scenario",
                "correct_nanousd",
                "mistake_nanousd",
                "extra_nanousd",
                "correct_token_equivalents",
                "mistake_token_equivalents",
                "multiplier",
                "tokens_missed",
                "misses",
            ],
        ),
        (
            "cost_curves.csv",
            vec![
                "history_tokens",
                "forks",
                "policy",
                "billing",
                "context_tokens",
                "forks_cost_nanousd",
                "forks_naive_nanousd",
                "cost_per_fork_nanousd",
                "naive_per_fork_nanousd",
                "savings",
                "naive_over_shared",
            ],
        ),
    ]
    .into_iter()
    .collect();
    for (file, columns) in suite_columns() {
        assert_eq!(columns, documented[file], "{file}: the library's list");
    }
    assert_eq!(cost_curve_columns(), documented["cost_curves.csv"]);
    for (file, columns) in &documented {
        let (header, rows) = parse(text(artifacts, file));
        assert_eq!(header, *columns, "{file}");
        assert!(!rows.is_empty(), "{file} has rows");
    }
    // One row per fixture, one per request of the suite, one per mistake, one per cell.
    assert_eq!(parse(text(artifacts, "summary.csv")).1.len(), forkcache_scenario::FIXTURES.len());
    assert_eq!(parse(text(artifacts, "antipatterns.csv")).1.len(), forkcache_scenario::MISTAKES.len());
    assert_eq!(parse(text(artifacts, "cost_curves.csv")).1.len(), 4);
    assert_eq!(parse(text(artifacts, "sweep.csv")).1.len(), 2 * 2 * (2 * 2 * 2 * 2 * 2 + 2 * 2 * 2));
    let requests = parse(text(artifacts, "requests.csv")).1;
    let session = requests.iter().filter(|row| row[0] == "session").count();
    assert_eq!(session, 46, "the session fixture's requests");
}

#[test]
fn the_notes_describe_every_column_and_name_the_settings() {
    let artifacts = shared_report();
    let notes = text(artifacts, "README.md");
    for file in TABLES {
        let header = text(artifacts, file).lines().next().unwrap();
        for column in header.split(',') {
            let line = notes
                .lines()
                .skip_while(|l| !l.starts_with(&format!("### `{file}`")))
                .find(|l| l.starts_with(&format!("- `{column}`: ")))
                .unwrap_or_else(|| panic!("{file}: `{column}` is not documented"));
            assert!(line.len() > column.len() + 8, "{file}: `{column}` has an empty description");
        }
    }
    assert!(notes.contains(&format!("`fixtures/pricing.json` of {}", PriceTable::builtin().date)));
    assert!(notes.contains("**small** (`fixtures/sweeps/small.json`), seed 3, 160 cells"));
    for stem in CHARTS {
        assert!(notes.contains(&format!("`{stem}.png`")), "{stem} is not listed");
    }
}

#[test]
fn summary_rows_checked_by_hand() {
    let artifacts = shared_report();
    let (header, rows) = parse(text(artifacts, "summary.csv"));
    let row = |name: &str| -> BTreeMap<&str, &str> {
        let row = rows.iter().find(|r| r[0] == name).unwrap_or_else(|| panic!("no {name}"));
        header.iter().map(String::as_str).zip(row.iter().map(String::as_str)).collect()
    };
    // seed-warm (DESIGN §2.5): the parent's turn writes 100,000 tokens at 1.0×, then the forks
    // cost 31,140; alone, the parent's request costs 100,000 and each fork 100,800.
    let warm = row("seed-warm");
    assert_eq!((warm["policy"], warm["billing"], warm["seed"]), ("longest-prefix", "seed", "1"));
    assert_eq!(warm["token_equivalents"], "131140.000");
    assert_eq!(warm["naive_token_equivalents"], "402400.000");
    assert_eq!(warm["savings"], "0.6741"); // 1 − 131,140 / 402,400 = 0.67410…
    assert_eq!(warm["requests"], "4");
    // docs/run.md's mistake table: a timestamp in the system prompt, 32,380 → 79,875.
    let (header, rows) = parse(text(artifacts, "antipatterns.csv"));
    let timestamp = rows.iter().find(|r| r[0] == "timestamp").unwrap();
    let cell = |name: &str| &timestamp[header.iter().position(|h| h == name).unwrap()];
    assert_eq!(cell("correct_token_equivalents"), "32380.000");
    assert_eq!(cell("mistake_token_equivalents"), "79875.000");
    assert_eq!(cell("multiplier"), "2.467"); // 79,875 / 32,380 = 2.4668…
}

#[test]
fn the_delegation_table_has_five_ways_at_every_point() {
    let artifacts = shared_report();
    let (header, rows) = parse(text(artifacts, "delegation.csv"));
    assert_eq!(header[..3], ["way", "history_tokens", "idle_ms"]);
    // 5 history sizes at no idle gap and 4 more idle gaps at 100,000 tokens, for each of 5 ways.
    assert_eq!(rows.len(), 5 * (5 + 4));
    let ways: std::collections::BTreeSet<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(ways.into_iter().collect::<Vec<_>>(), ["background", "fork", "named", "subagent", "teammate"]);
    for name in ["delegation_vs_history.png", "delegation_vs_idle.svg"] {
        assert!(artifacts.iter().any(|a| a.name == name), "{name}");
    }
}

#[test]
fn summary_csv_matches_the_golden_file() {
    let artifacts = shared_report();
    let fresh = text(artifacts, "summary.csv");
    let golden = Path::new(REPORTS).join("summary.csv");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden, fresh).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&golden).expect("reports/summary.csv is committed");
    assert!(
        committed == fresh,
        "reports/summary.csv is out of date; if the change is intended, rerun with UPDATE_GOLDEN=1\n\
         (or `cargo run --release -- report`, which rewrites every file)"
    );
}

#[test]
fn the_full_report_equals_the_committed_files() {
    if std::env::var_os("FORKCACHE_SLOW").is_none() {
        return; // the default grids: seconds in release, minutes in debug (CI checks with release)
    }
    let artifacts = build(&ReportOptions::default(), &PriceTable::builtin(), || {}).unwrap();
    let committed = read_dir(Path::new(REPORTS));
    let names: Vec<&String> = committed.keys().collect();
    assert_eq!(names, artifacts.iter().map(|a| &a.name).collect::<Vec<_>>(), "no stale or missing files");
    for artifact in &artifacts {
        assert!(committed[&artifact.name] == artifact.bytes, "reports/{} is out of date", artifact.name);
    }
}
