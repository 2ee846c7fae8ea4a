//! forkcache-report: every file of `reports/`, charts, HTML pages, sweeps and the demo. It may
//! import every library layer below it; it must never import the network or the command line.
//!
//! Reports: every file under `reports/` — CSV tables, charts (PNG and SVG) and the notes that
//! say what they hold — as a pure function of the built-in fixtures, the sweep grids, the price
//! table and the seeds.
//!
//! [`build`] returns the files as [`Artifact`]s (name and bytes, in name order); [`write()`] puts
//! them in a directory. `forkcache report` and `forkcache demo` both call them, and
//! `cargo bench --bench cost_curves` calls [`cost_curve_artifacts`]. [`html_page`] turns the
//! files into one self-contained `index.html` (`forkcache report --html`). [`sweep`] runs the
//! parameter grids, [`demo`] the built-in suite, and [`import`] draws an import's charts and page.
#![deny(missing_docs)]
// Input-derived data is never unwrapped: a bad input is an error naming it, never a panic. The
// few sites that cannot fail carry an `allow` saying why.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod chart;
mod curves;
mod delegation;
pub mod demo;
mod figures;
pub(crate) mod format;
pub mod html;
pub mod import;
mod notes;
pub mod providers;
mod replay_table;
pub mod sweep;
mod tables;

pub use curves::columns as cost_curve_columns;
pub use replay_table::replay_csv;
pub use tables::{scenario_requests_csv, suite_columns};

use std::path::{Path, PathBuf};

use forkcache_engine::billing::PriceTable;
use forkcache_scenario::SuiteRun;

use crate::sweep::{Shard, SweepOptions, SweepResult, SweepSpec};

/// One file of a report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Artifact {
    /// File name, relative to the report directory.
    pub name: String,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

impl Artifact {
    fn new(name: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Artifact {
        Artifact { name: name.into(), bytes: bytes.into() }
    }
}

/// Writes `artifacts` into `dir` (created if missing); returns the paths written.
pub fn write(dir: &Path, artifacts: &[Artifact]) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    artifacts
        .iter()
        .map(|artifact| {
            let path = dir.join(&artifact.name);
            std::fs::write(&path, &artifact.bytes)?;
            Ok(path)
        })
        .collect()
}

/// A sweep's files: `sweep.csv` and `sweep.meta.json` (a shard: `sweep-i-of-n.csv` and
/// `sweep-i-of-n.meta.json`, `i` zero-padded so the names sort in order).
pub fn sweep_artifacts(spec: &SweepSpec, result: &SweepResult) -> Vec<Artifact> {
    let stem = result.shard.file_stem();
    vec![
        Artifact::new(format!("{stem}.csv"), result.to_csv()),
        Artifact::new(format!("{stem}.meta.json"), result.meta_json(spec)),
    ]
}

/// Writes a sweep's files into `dir`.
pub fn write_sweep(dir: &Path, spec: &SweepSpec, result: &SweepResult) -> std::io::Result<Vec<PathBuf>> {
    write(dir, &sweep_artifacts(spec, result))
}

/// What `forkcache report` builds, and how.
#[derive(Clone, Debug)]
pub struct ReportOptions {
    /// The grid behind `sweep.csv` and the sweep charts. Default: `fixtures/sweeps/default.json`.
    pub sweep: SweepSpec,
    /// The grid behind the cost curves. Default: `fixtures/sweeps/cost-curves.json`.
    pub cost_curves: SweepSpec,
    /// The grid behind `providers.csv` and its chart. Default: `fixtures/sweeps/providers.json`.
    pub providers: SweepSpec,
    /// Worker threads for the sweeps; `None`: one per core. The bytes do not depend on it.
    pub threads: Option<usize>,
    /// The seed of every generated conversation (fixtures and sweeps); `None`: each one's own.
    pub seed: Option<u64>,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            sweep: SweepSpec::default_grid(),
            cost_curves: SweepSpec::cost_curves(),
            providers: SweepSpec::providers(),
            threads: None,
            seed: None,
        }
    }
}

impl ReportOptions {
    /// Sweep cells the report runs (for a progress bar's length).
    pub fn cells(&self) -> usize {
        self.sweep.cells().len() + self.cost_curves.cells().len() + self.providers.cells().len()
    }

    /// These options with `seed`, when given, set on both sweeps' base scenarios.
    fn seeded(&self) -> ReportOptions {
        let mut options = self.clone();
        if let Some(seed) = self.seed {
            options.sweep.scenario.seed = seed;
            options.cost_curves.scenario.seed = seed;
            options.providers.scenario.seed = seed;
        }
        options
    }
}

/// Why a report could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A fixture scenario failed.
    #[error(transparent)]
    Scenario(#[from] forkcache_scenario::ScenarioError),
    /// The seed example failed.
    #[error(transparent)]
    Replay(#[from] forkcache_ingest::replay::ReplayError),
    /// A sweep failed.
    #[error(transparent)]
    Sweep(#[from] crate::sweep::SweepError),
    /// A chart could not be drawn.
    #[error(transparent)]
    Chart(#[from] chart::ChartError),
    /// A CSV could not be written.
    #[error(transparent)]
    Csv(#[from] csv::Error),
}

/// The scenario whose requests `session_timeline` draws.
const TIMELINE_SCENARIO: &str = "session";

/// Every file of `reports/`, in name order. `on_cell_done` is called once per sweep cell.
pub fn build(
    options: &ReportOptions,
    prices: &PriceTable,
    on_cell_done: impl Fn() + Sync,
) -> Result<Vec<Artifact>, ReportError> {
    let options = &options.seeded();
    let runs = forkcache_scenario::run_suite_seeded(prices, options.seed)?;
    let seed_runs = crate::demo::seed_example(prices)?;
    let sweep_options = SweepOptions { threads: options.threads, shard: Shard::WHOLE };
    let sweep = crate::sweep::run(&options.sweep, &sweep_options, prices, &on_cell_done)?;
    let curves = crate::sweep::run(&options.cost_curves, &sweep_options, prices, &on_cell_done)?;
    let providers = crate::sweep::run(&options.providers, &sweep_options, prices, &on_cell_done)?;
    let mut artifacts = suite_artifacts(&runs, &prices.date)?;
    artifacts.push(Artifact::new("seed_example.csv", crate::demo::seed_example_csv(&seed_runs)?));
    artifacts.extend(sweep_artifacts(&options.sweep, &sweep));
    artifacts.extend(sweep_charts(&options.sweep, &sweep)?);
    artifacts.extend(cost_curve_artifacts(&curves)?);
    artifacts.extend(delegation_artifacts(prices)?);
    artifacts.extend(provider_artifacts(&options.providers, &providers)?);
    let notes = notes::readme(&notes::Inputs {
        artifacts: &artifacts,
        sweep: (&options.sweep, &sweep),
        curves: (&options.cost_curves, &curves),
        providers: (&options.providers, &providers),
        prices_date: &prices.date,
    });
    artifacts.push(Artifact::new("README.md", notes));
    artifacts.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(artifacts)
}

/// `summary.csv`, `requests.csv`, `antipatterns.csv` and the suite's charts.
fn suite_artifacts(runs: &[SuiteRun], prices_date: &str) -> Result<Vec<Artifact>, ReportError> {
    let mut artifacts = vec![
        Artifact::new("summary.csv", tables::summary_csv(runs)),
        Artifact::new("requests.csv", tables::requests_csv(runs)),
        Artifact::new("antipatterns.csv", tables::antipatterns_csv(runs)),
    ];
    artifacts.extend(drawn("antipatterns", figures::antipatterns(&tables::mistake_rows(runs), prices_date)?));
    if let Some(run) = runs.iter().find(|run| run.fixture.name == TIMELINE_SCENARIO) {
        artifacts
            .extend(drawn("session_timeline", figures::session_timeline(&run.report, TIMELINE_SCENARIO)?));
    }
    Ok(artifacts)
}

/// `providers.csv` (the providers grid's rows, in the sweep's columns) and its chart.
fn provider_artifacts(spec: &SweepSpec, result: &SweepResult) -> Result<Vec<Artifact>, ReportError> {
    let axes = spec.axes();
    let view = figures::SweepView::new(result, &axes);
    let mut artifacts = vec![Artifact::new("providers.csv", result.to_csv())];
    artifacts.extend(drawn("providers", figures::providers(&view, &spec.scenario.model)?));
    Ok(artifacts)
}

/// The charts drawn from the sweep.
fn sweep_charts(spec: &SweepSpec, sweep: &SweepResult) -> Result<Vec<Artifact>, ReportError> {
    let axes = spec.axes();
    let view = figures::SweepView::new(sweep, &axes);
    let mut artifacts = drawn("savings_vs_history", figures::savings_vs_history(&view)?).to_vec();
    artifacts.extend(drawn("cost_vs_forks", figures::cost_vs_forks(&view)?));
    artifacts.extend(drawn("cost_vs_idle", figures::cost_vs_idle(&view)?));
    artifacts.extend(drawn("policy_gap", figures::policy_gap(&view)?));
    Ok(artifacts)
}

/// `cost_curves.csv`, `.png` and `.svg`, from a run of the cost-curve grid
/// ([`SweepSpec::cost_curves`]); `cargo bench --bench cost_curves` writes them too.
pub fn cost_curve_artifacts(result: &SweepResult) -> Result<Vec<Artifact>, ReportError> {
    let mut artifacts = vec![Artifact::new("cost_curves.csv", curves::curves_csv(result))];
    artifacts.extend(drawn("cost_curves", curves::curves_chart(result)?));
    Ok(artifacts)
}

/// `delegation.csv` and its two charts: one unit of delegated work, five ways.
fn delegation_artifacts(prices: &PriceTable) -> Result<Vec<Artifact>, ReportError> {
    let rows = delegation::rows(prices)?;
    let mut artifacts = vec![Artifact::new("delegation.csv", delegation::csv(&rows))];
    artifacts.extend(drawn("delegation_vs_history", delegation::vs_history(&rows, prices)?));
    let steps = delegation::gap_steps(&rows, prices)?;
    artifacts.extend(drawn("delegation_vs_idle", delegation::vs_idle(&rows, &steps, prices)?));
    Ok(artifacts)
}

/// A chart's two files.
fn drawn(stem: &str, rendered: chart::Rendered) -> [Artifact; 2] {
    [Artifact::new(format!("{stem}.png"), rendered.png), Artifact::new(format!("{stem}.svg"), rendered.svg)]
}

/// Tables small enough to read in the HTML page (the sweeps and every request stay in their CSVs).
const HTML_TABLES: [&str; 3] = ["summary.csv", "antipatterns.csv", "seed_example.csv"];

/// `index.html`: every chart of `artifacts` inline with its one-line reading, then the small
/// tables, sortable. Self-contained: nothing is fetched when it opens.
pub fn html_page(artifacts: &[Artifact]) -> Result<Artifact, ReportError> {
    let find =
        |name: &str| artifacts.iter().find(|a| a.name == name).map(|a| String::from_utf8_lossy(&a.bytes));
    let mut page = html::Page::new(
        "forkcache report",
        "What prompt-cache sharing saves and costs, from the built-in fixtures and sweeps. Every file is \
         described in README.md beside this page; click a table's header to sort by that column.",
    );
    if let Some(headline) = find("seed_example.csv").and_then(|text| seed_headline(&text)) {
        page.headline(headline);
    }
    let charts = page.section("Charts");
    for note in notes::CHARTS {
        if let Some(svg) = find(&format!("{}.svg", note.stem)) {
            charts.chart(svg.into_owned(), note.read);
        }
    }
    let tables = page.section("Tables");
    for (file, row) in notes::TABLES.iter().filter(|(file, _)| HTML_TABLES.contains(file)) {
        if let Some(text) = find(file) {
            let table = html::Table::from_csv(&text)?.for_reading(&HTML_SHARES);
            tables.table(format!("{file}: a row is {}", row.replace('`', "")), table);
        }
    }
    Ok(Artifact::new("index.html", page.render()))
}

/// The HTML tables' columns that hold a share between 0 and 1, shown as percentages.
const HTML_SHARES: [&str; 2] = ["savings", "hit_rate"];

/// The page's opening figure: the seeds' worked example, warm, against no sharing, with the
/// share saved as the table states it.
fn seed_headline(seed_example_csv: &str) -> Option<String> {
    let table = html::Table::from_csv(seed_example_csv).ok()?.for_reading(&HTML_SHARES);
    let column = |name: &str| table.columns.iter().position(|c| c == name);
    let (case, forks, naive, savings) = (
        column("case")?,
        column("forks_token_equivalents")?,
        column("naive_token_equivalents")?,
        column("savings")?,
    );
    let warm = table.rows.iter().find(|row| row[case] == "warm")?;
    let tokens = |cell: &str| cell.parse::<f64>().ok().map(|t| format::grouped(t.round() as u64));
    Some(format!(
        "The seed articles' worked example, with a warm cache, costs {} token-equivalents where sending it without sharing costs {}: {} less.",
        tokens(&warm[forks])?,
        tokens(&warm[naive])?,
        warm[savings]
    ))
}
