//! The fixture suite as CSV: `summary.csv` (one row per scenario), `requests.csv` (one row per
//! request) and `antipatterns.csv` (one row per mistake against its correct twin).
//!
//! Each table is a list of `(column, how its cell is written)` pairs, so the column order is
//! fixed in one place and the header can never drift from the values.

use forkcache_scenario::{MISTAKES, Mistake, ScenarioRecord, ScenarioReport, ScenarioTotals, SuiteRun};

use super::format::{fraction, misses, ratio, savings_fraction, thousandths};

type Table<R> = [(&'static str, fn(&R) -> String)];
/// A request's cell (rows borrow the suite's reports, so the type is higher-ranked).
type RequestCell = for<'a, 'r> fn(&'a (&'r str, &'r ScenarioRecord)) -> String;
/// A mistake's cell.
type MistakeCell = for<'a, 'r> fn(&'a MistakeRow<'r>) -> String;

#[allow(clippy::expect_used)] // writing CSV to memory cannot fail
pub(super) fn to_csv<R, F: Fn(&R) -> String>(table: &[(&'static str, F)], rows: &[R]) -> String {
    let mut writer = csv::Writer::from_writer(Vec::new());
    writer.write_record(table.iter().map(|(name, _)| *name)).expect("writing to memory");
    for row in rows {
        writer.write_record(table.iter().map(|(_, cell)| cell(row))).expect("writing to memory");
    }
    String::from_utf8(writer.into_inner().expect("writing to memory")).expect("csv output is UTF-8")
}

/// Column names of a table.
fn names<F>(table: &[(&'static str, F)]) -> Vec<&'static str> {
    table.iter().map(|(name, _)| *name).collect()
}

const SUMMARY: &Table<SuiteRun> = &[
    ("scenario", |r| r.fixture.name.into()),
    ("policy", |r| r.report.config.endpoint.cache.policy.name().into()),
    ("billing", |r| r.report.config.endpoint.billing.name().into()),
    ("seed", |r| r.report.seed.to_string()),
    ("requests", |r| r.report.totals.requests.to_string()),
    ("context_tokens", |r| r.report.totals.largest_context_tokens.to_string()),
    ("read_tokens", |r| r.report.totals.usage.cache_read_input_tokens.to_string()),
    ("write_5m_tokens", |r| r.report.totals.usage.cache_creation.ephemeral_5m_input_tokens.to_string()),
    ("write_1h_tokens", |r| r.report.totals.usage.cache_creation.ephemeral_1h_input_tokens.to_string()),
    ("uncached_tokens", |r| r.report.totals.usage.input_tokens.to_string()),
    ("output_tokens", |r| r.report.totals.usage.output_tokens.to_string()),
    ("cost_nanousd", |r| r.report.totals.cost_nanousd.to_string()),
    ("naive_nanousd", |r| r.report.totals.naive_nanousd.to_string()),
    ("savings", |r| savings_fraction(r.report.totals.cost_nanousd, r.report.totals.naive_nanousd)),
    ("token_equivalents", |r| thousandths(r.report.totals.token_equivalents.0)),
    ("naive_token_equivalents", |r| thousandths(r.report.totals.naive_token_equivalents.0)),
    ("hit_rate", |r| hit_rate(&r.report.totals)),
    ("rewrite_factor", |r| rewrite_factor(&r.report.totals)),
    ("tokens_missed", |r| r.report.totals.tokens_missed.to_string()),
    ("misses", |r| misses(&r.report.totals)),
    ("forks_identical", |r| identical(&r.report)),
];

const REQUESTS: &[(&str, RequestCell)] = &[
    ("scenario", |(name, _)| (*name).into()),
    ("index", |(_, r)| r.index.to_string()),
    ("role", |(_, r)| r.role.name().into()),
    ("agent", |(_, r)| r.agent.clone()),
    ("spawn", |(_, r)| r.spawn.map_or(String::new(), |s| s.to_string())),
    ("fork", |(_, r)| r.fork.map_or(String::new(), |f| f.to_string())),
    ("at_ms", |(_, r)| r.record.at.ms().to_string()),
    ("model", |(_, r)| r.record.model.clone()),
    ("read_tokens", |(_, r)| r.record.usage.cache_read_input_tokens.to_string()),
    ("write_5m_tokens", |(_, r)| r.record.usage.cache_creation.ephemeral_5m_input_tokens.to_string()),
    ("write_1h_tokens", |(_, r)| r.record.usage.cache_creation.ephemeral_1h_input_tokens.to_string()),
    ("uncached_tokens", |(_, r)| r.record.usage.input_tokens.to_string()),
    ("output_tokens", |(_, r)| r.record.usage.output_tokens.to_string()),
    ("cost_nanousd", |(_, r)| r.record.cost.total_nanousd().to_string()),
    ("naive_nanousd", |(_, r)| r.naive_nanousd.to_string()),
    ("token_equivalents", |(_, r)| thousandths(r.record.token_equivalents.0)),
    ("ttft_ms", |(_, r)| r.record.ttft_ms.to_string()),
    ("miss", |(_, r)| r.record.miss.as_ref().map_or(String::new(), |m| m.cause.name().into())),
    ("miss_dimension", |(_, r)| {
        r.record.miss.as_ref().and_then(|m| m.dimension).map_or(String::new(), |d| d.name().into())
    }),
    ("miss_path", |(_, r)| r.record.miss.as_ref().map_or(String::new(), |m| m.path.clone())),
    ("tokens_missed", |(_, r)| r.record.miss.as_ref().map_or(0, |m| m.tokens_missed).to_string()),
];

/// One mistake beside its correct twin.
pub(crate) struct MistakeRow<'r> {
    pub mistake: &'static Mistake,
    pub wrong: &'r ScenarioReport,
    pub right: &'r ScenarioReport,
}

impl MistakeRow<'_> {
    /// Whole-scenario cost of the mistake over the correct twin's, in thousandths.
    pub(crate) fn multiplier_thousandths(&self) -> u64 {
        let right = u128::from(self.right.totals.cost_nanousd.max(1));
        ((u128::from(self.wrong.totals.cost_nanousd) * 1000 + right / 2) / right) as u64
    }
}

const ANTIPATTERNS: &[(&str, MistakeCell)] = &[
    ("mistake", |m| m.mistake.name.into()),
    ("what", |m| m.mistake.what.into()),
    ("mistake_scenario", |m| m.mistake.mistake.into()),
    ("correct_scenario", |m| m.mistake.correct.into()),
    ("correct_nanousd", |m| m.right.totals.cost_nanousd.to_string()),
    ("mistake_nanousd", |m| m.wrong.totals.cost_nanousd.to_string()),
    ("extra_nanousd", |m| {
        (i128::from(m.wrong.totals.cost_nanousd) - i128::from(m.right.totals.cost_nanousd)).to_string()
    }),
    ("correct_token_equivalents", |m| thousandths(m.right.totals.token_equivalents.0)),
    ("mistake_token_equivalents", |m| thousandths(m.wrong.totals.token_equivalents.0)),
    ("multiplier", |m| {
        ratio(u128::from(m.wrong.totals.cost_nanousd), u128::from(m.right.totals.cost_nanousd))
    }),
    ("tokens_missed", |m| m.wrong.totals.tokens_missed.to_string()),
    ("misses", |m| misses(&m.wrong.totals)),
];

fn hit_rate(t: &ScenarioTotals) -> String {
    fraction(i128::from(t.usage.cache_read_input_tokens), u128::from(t.usage.total_input_tokens()))
}

fn rewrite_factor(t: &ScenarioTotals) -> String {
    ratio(u128::from(t.usage.cache_creation_input_tokens), u128::from(t.largest_context_tokens))
}

/// Each spawn's byte identity across its forks, `;`-separated.
fn identical(report: &ScenarioReport) -> String {
    let spawns = report.spawns.iter().filter_map(|s| s.verification.as_ref());
    let pcts: Vec<String> =
        spawns.map(|c| fraction(i128::from(c.common_prefix_bytes), u128::from(c.longest_bytes))).collect();
    pcts.join(";")
}

/// `summary.csv`.
pub(crate) fn summary_csv(runs: &[SuiteRun]) -> String {
    to_csv(SUMMARY, runs)
}

/// `requests.csv`.
pub(crate) fn requests_csv(runs: &[SuiteRun]) -> String {
    let rows: Vec<(&str, &ScenarioRecord)> =
        runs.iter().flat_map(|run| run.report.records.iter().map(|r| (run.fixture.name, r))).collect();
    to_csv(REQUESTS, &rows)
}

/// `run --csv`: one scenario's requests, with `requests.csv`'s columns.
pub fn scenario_requests_csv(report: &ScenarioReport) -> String {
    let rows: Vec<(&str, &ScenarioRecord)> =
        report.records.iter().map(|r| (report.name.as_str(), r)).collect();
    to_csv(REQUESTS, &rows)
}

/// Every mistake whose two fixtures ran, in [`MISTAKES`] order.
pub(crate) fn mistake_rows(runs: &[SuiteRun]) -> Vec<MistakeRow<'_>> {
    let report = |name: &str| runs.iter().find(|run| run.fixture.name == name).map(|run| &run.report);
    MISTAKES
        .iter()
        .filter_map(|mistake| {
            Some(MistakeRow { mistake, wrong: report(mistake.mistake)?, right: report(mistake.correct)? })
        })
        .collect()
}

/// `antipatterns.csv`.
pub(crate) fn antipatterns_csv(runs: &[SuiteRun]) -> String {
    to_csv(ANTIPATTERNS, &mistake_rows(runs))
}

/// The documented columns of each suite table, by file name.
pub fn suite_columns() -> [(&'static str, Vec<&'static str>); 3] {
    [
        ("summary.csv", names(SUMMARY)),
        ("requests.csv", names(REQUESTS)),
        ("antipatterns.csv", names(ANTIPATTERNS)),
    ]
}
