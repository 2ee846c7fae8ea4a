//! Cost curves (`cost_curves.csv`, `cost_curves.png`/`.svg`): what one fork costs, sharing the
//! parent's cache and not, as the history grows, for several fork counts. Computed from the
//! `cost-curves` sweep; `cargo bench --bench cost_curves` and `forkcache report` both write them.

use super::chart::{ChartError, Corner, LineChart, Rendered, Series, ValueFormat, line_chart};
use super::format::{ratio, savings_fraction};
use crate::sweep::{SweepCell, SweepResult, SweepRow};

type Cell = fn(&SweepRow) -> String;

/// The columns of `cost_curves.csv`, in order, with how each cell is written.
const TABLE: &[(&str, Cell)] = &[
    ("history_tokens", |r| r.cell.history_tokens.to_string()),
    ("forks", |r| r.cell.forks.to_string()),
    ("policy", |r| r.cell.policy.name().into()),
    ("billing", |r| r.cell.billing.name().into()),
    ("context_tokens", |r| r.totals.largest_context_tokens.to_string()),
    ("forks_cost_nanousd", |r| r.subagents.cost_nanousd.to_string()),
    ("forks_naive_nanousd", |r| r.subagents.naive_nanousd.to_string()),
    ("cost_per_fork_nanousd", |r| per_fork(r.subagents.cost_nanousd, r.cell.forks).to_string()),
    ("naive_per_fork_nanousd", |r| per_fork(r.subagents.naive_nanousd, r.cell.forks).to_string()),
    ("savings", |r| savings_fraction(r.subagents.cost_nanousd, r.subagents.naive_nanousd)),
    ("naive_over_shared", |r| {
        ratio(u128::from(r.subagents.naive_nanousd), u128::from(r.subagents.cost_nanousd))
    }),
];

/// The columns of `cost_curves.csv`.
pub fn columns() -> Vec<&'static str> {
    TABLE.iter().map(|(name, _)| *name).collect()
}

/// `total ÷ forks`, rounded to the nearest nano-dollar.
fn per_fork(total_nanousd: u64, forks: u32) -> u64 {
    let forks = u64::from(forks.max(1));
    (total_nanousd + forks / 2) / forks
}

/// `cost_curves.csv`: one row per cell, in grid order.
#[allow(clippy::expect_used)] // writing CSV to memory cannot fail
pub(crate) fn curves_csv(result: &SweepResult) -> String {
    let mut writer = csv::Writer::from_writer(Vec::new());
    writer.write_record(columns()).expect("writing to memory");
    for row in &result.rows {
        writer.write_record(TABLE.iter().map(|(_, cell)| cell(row))).expect("writing to memory");
    }
    String::from_utf8(writer.into_inner().expect("writing to memory")).expect("csv output is UTF-8")
}

/// Per-fork cost by history size: one line per fork count sharing the cache, and the naive
/// cost at the smallest and largest fork counts.
pub(crate) fn curves_chart(result: &SweepResult) -> Result<Rendered, ChartError> {
    // One curve per fork count: other axes, if the grid has several values, stay at the first
    // row's settings.
    let rows: Vec<&SweepRow> = match result.rows.first() {
        Some(first) => result.rows.iter().filter(|r| same_settings(&r.cell, &first.cell)).collect(),
        None => Vec::new(),
    };
    let mut forks: Vec<u32> = rows.iter().map(|r| r.cell.forks).collect();
    forks.sort_unstable();
    forks.dedup();
    let line = |n: u32, naive: bool| {
        let points = rows
            .iter()
            .filter(|r| r.cell.forks == n)
            .map(|r| {
                let total = if naive { r.subagents.naive_nanousd } else { r.subagents.cost_nanousd };
                (r.cell.history_tokens as f64, per_fork(total, n) as f64 / 1e9)
            })
            .collect();
        let plural = if n == 1 { "fork" } else { "forks" };
        let name = if naive { format!("no sharing, {n} {plural}") } else { format!("{n} {plural} sharing") };
        Series::new(name, points)
    };
    let mut series: Vec<Series> = forks.iter().map(|&n| line(n, false)).collect();
    let extremes = [forks.first(), forks.last()];
    let mut naive_counts: Vec<u32> = extremes.into_iter().flatten().copied().collect();
    naive_counts.dedup();
    series.extend(naive_counts.into_iter().map(|n| line(n, true)));
    line_chart(&LineChart {
        title: "Cost curves: what one fork costs as the parent's history grows".into(),
        x_label: "parent's history before the spawn (tokens, log scale)".into(),
        y_label: "input cost per fork (USD, log scale)".into(),
        y_format: ValueFormat::Usd,
        x_format: ValueFormat::Count,
        x_margin: 0.0,
        log_x: true,
        log_y: true,
        y_from_zero: false,
        legend: Corner::UpperLeft,
        layered: false,
        series,
        x_marks: Vec::new(),
        caption: caption(result),
    })
}

/// Equal but for history size and fork count.
fn same_settings(a: &SweepCell, b: &SweepCell) -> bool {
    SweepCell { index: b.index, history_tokens: b.history_tokens, forks: b.forks, ..*a } == *b
}

fn caption(result: &SweepResult) -> String {
    let first = result.rows.first().map(|r| r.cell);
    let settings = first.map_or(String::new(), |c| {
        format!("{} policy, {} billing, {} TTL; ", c.policy.name(), c.billing.name(), c.ttl.name())
    });
    format!("{settings}sweep \"{}\", seed {} · prices of {}", result.name, result.seed, result.prices_date)
}
