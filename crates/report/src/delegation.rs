//! "One unit of delegated work, five ways" (`delegation.csv`, `delegation_vs_history.*`,
//! `delegation_vs_idle.*`): the scenarios of [`forkcache_scenario::delegation_spec`] across history
//! sizes (1 s between the delegate's requests) and across that gap (at the focus history), run
//! one after another. What
//! delegating costs is the session's cost less the same session without the delegation
//! ([`forkcache_scenario::baseline_spec`]): the parent's call and its longer context count, as do
//! the delegate's own requests.

use forkcache_engine::billing::PriceTable;
use forkcache_scenario::{
    RequestRole, RunConfig, ScenarioError, ScenarioSpec, ScenarioTotals, WAYS, Way, baseline_spec,
    delegation_spec, run,
};

use super::chart::{ChartError, Corner, LineChart, Rendered, Series, ValueFormat, XMark, line_chart};
use super::format;

/// History sizes of the first chart.
pub(crate) const HISTORY_TOKENS: [u64; 5] = [10_000, 30_000, 60_000, 100_000, 150_000];
/// Gaps between the delegate's requests, the second chart's axis (the first holds the first).
pub(crate) const IDLE_MS: [u64; 5] = [1_000, 60_000, 150_000, 240_000, 360_000];
/// The history the idle chart holds fixed.
pub(crate) const FOCUS_HISTORY_TOKENS: u64 = 100_000;

/// One run: a way at a history size and idle gap.
pub(crate) struct Row {
    way: Way,
    history_tokens: u64,
    idle_ms: u64,
    totals: ScenarioTotals,
    /// Requests of everyone but the parent: the delegate's own.
    delegate: ScenarioTotals,
    /// The session without the delegation.
    baseline: ScenarioTotals,
}

impl Row {
    /// What delegating added to the session, in thousandths of a token-equivalent.
    fn added(&self) -> u64 {
        self.totals.token_equivalents.0.saturating_sub(self.baseline.token_equivalents.0)
    }
}

fn run_spec(
    spec: &ScenarioSpec,
    prices: &PriceTable,
) -> Result<forkcache_scenario::ScenarioReport, ScenarioError> {
    let mut config = RunConfig::for_spec(spec);
    config.verify = false;
    config.naive = false;
    run(spec, &config, prices)
}

/// Every row: each way across the history sizes, then across the gaps (the focus history at the
/// first gap appears once).
pub(crate) fn rows(prices: &PriceTable) -> Result<Vec<Row>, ScenarioError> {
    let mut points: Vec<(u64, u64)> = HISTORY_TOKENS.iter().map(|&h| (h, IDLE_MS[0])).collect();
    points.extend(IDLE_MS[1..].iter().map(|&idle| (FOCUS_HISTORY_TOKENS, idle)));
    // The baseline sends no delegate, so the gap does not change it.
    let baselines = points
        .iter()
        .map(|&(history_tokens, _)| Ok(run_spec(&baseline_spec(history_tokens), prices)?.totals))
        .collect::<Result<Vec<_>, ScenarioError>>()?;
    let mut rows = Vec::new();
    for way in WAYS {
        for (&(history_tokens, idle_ms), baseline) in points.iter().zip(&baselines) {
            let report = run_spec(&delegation_spec(way, history_tokens, idle_ms), prices)?;
            let delegate = report.totals_of(|record| record.role != RequestRole::Parent);
            let baseline = baseline.clone();
            rows.push(Row { way, history_tokens, idle_ms, totals: report.totals, delegate, baseline });
        }
    }
    Ok(rows)
}

/// `delegation.csv`.
#[allow(clippy::expect_used)] // writing CSV of our own strings to memory cannot fail
pub(crate) fn csv(rows: &[Row]) -> String {
    let mut writer = csv::Writer::from_writer(Vec::new());
    let header = [
        "way",
        "history_tokens",
        "idle_ms",
        "requests",
        "delegate_requests",
        "cost_nanousd",
        "token_equivalents",
        "baseline_token_equivalents",
        "added_token_equivalents",
        "delegate_token_equivalents",
        "hit_rate",
        "delegate_hit_rate",
    ];
    writer.write_record(header).expect("writing to memory");
    for row in rows {
        let hit = |t: &ScenarioTotals| {
            format::fraction(
                i128::from(t.usage.cache_read_input_tokens),
                u128::from(t.usage.total_input_tokens()),
            )
        };
        writer
            .write_record([
                row.way.name().to_string(),
                row.history_tokens.to_string(),
                row.idle_ms.to_string(),
                row.totals.requests.to_string(),
                row.delegate.requests.to_string(),
                row.totals.cost_nanousd.to_string(),
                format::thousandths(row.totals.token_equivalents.0),
                format::thousandths(row.baseline.token_equivalents.0),
                format::thousandths(row.added()),
                format::thousandths(row.delegate.token_equivalents.0),
                hit(&row.totals),
                hit(&row.delegate),
            ])
            .expect("writing to memory");
    }
    String::from_utf8(writer.into_inner().expect("writing to memory")).expect("csv output is UTF-8")
}

fn series(rows: &[Row], way: Way, keep: impl Fn(&Row) -> bool, x: impl Fn(&Row) -> f64) -> Series {
    let points = rows
        .iter()
        .filter(|row| row.way == way && keep(row))
        .map(|row| (x(row), row.added() as f64 / 1000.0))
        .collect();
    Series::new(way.name(), points)
}

/// One line per way over the history sizes, at the first gap.
fn history_series(rows: &[Row]) -> Vec<Series> {
    WAYS.iter()
        .map(|&way| series(rows, way, |r| r.idle_ms == IDLE_MS[0], |r| r.history_tokens as f64))
        .collect()
}

/// The TTL the delegation rows run under, in minutes on the idle axis: a gap's cost is flat up to
/// it and jumps there (the entry expired), so the lines step at it instead of sloping.
const TTL_MINUTES: f64 = 5.0;

/// One line per way over the gaps, at the focus history, stepping at the TTL.
fn gap_series(rows: &[Row]) -> Vec<Series> {
    let at_focus = |r: &Row| r.history_tokens == FOCUS_HISTORY_TOKENS;
    WAYS.iter()
        .map(|&way| Series {
            steps_at: vec![TTL_MINUTES],
            ..series(rows, way, at_focus, |r| r.idle_ms as f64 / 60_000.0)
        })
        .collect()
}

fn caption(fixed: &str, prices: &PriceTable) -> String {
    format!(
        "{fixed} · tools 12k, system 8k, Sonnet 4.6, anthropic, 5m TTL; 3 requests, a 1k task, a 500-token report · prices of {}",
        prices.date
    )
}

/// The whole session's cost by history size, one line per way.
pub(crate) fn vs_history(rows: &[Row], prices: &PriceTable) -> Result<Rendered, ChartError> {
    line_chart(&LineChart {
        x_marks: Vec::new(),
        title: "One unit of delegated work, five ways: cost by history size".into(),
        x_label: "the parent's history (tokens, log scale)".into(),
        y_label: "what delegating added to the session (token-equivalents)".into(),
        y_format: ValueFormat::Count,
        x_format: ValueFormat::Count,
        log_x: true,
        log_y: false,
        y_from_zero: true,
        legend: Corner::UpperLeft,
        layered: true,
        series: history_series(rows),
        caption: caption("1 s between the delegate's requests", prices),
    })
}

/// The whole session's cost by the idle gap before the delegation, one line per way.
pub(crate) fn vs_idle(rows: &[Row], prices: &PriceTable) -> Result<Rendered, ChartError> {
    line_chart(&LineChart {
        x_marks: vec![XMark { at: TTL_MINUTES, label: "5m TTL".into() }],
        title: "One unit of delegated work, five ways: cost by the gap between the delegate's requests"
            .into(),
        x_label: "the delegate's gap between requests: its tools' time, or a teammate's wait (minutes)"
            .into(),
        y_label: "what delegating added to the session (token-equivalents)".into(),
        y_format: ValueFormat::Count,
        x_format: ValueFormat::Count,
        log_x: false,
        log_y: false,
        y_from_zero: true,
        legend: Corner::UpperLeft,
        layered: true,
        series: gap_series(rows),
        caption: caption("100k history", prices),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_way_has_a_point_at_every_history_size_and_gap() {
        let rows = rows(&PriceTable::builtin()).unwrap();
        for series in history_series(&rows) {
            let xs: Vec<f64> = series.points.iter().map(|p| p.0).collect();
            assert_eq!(xs, HISTORY_TOKENS.map(|h| h as f64), "{}", series.name);
        }
        for series in gap_series(&rows) {
            let xs: Vec<f64> = series.points.iter().map(|p| p.0).collect();
            assert_eq!(xs, IDLE_MS.map(|ms| ms as f64 / 60_000.0), "{}", series.name);
        }
    }

    #[test]
    fn the_idle_lines_step_at_the_ttl_instead_of_sloping() {
        // Gaps of 4 and 6 minutes sit either side of the 5-minute TTL: a line that changes
        // between them must hold its 4-minute value up to x = 5, then jump.
        let rows = rows(&PriceTable::builtin()).unwrap();
        let mut stepped = 0;
        for series in gap_series(&rows) {
            assert_eq!(series.steps_at, vec![5.0], "{}", series.name);
            let at = |x: f64| series.points.iter().find(|p| p.0 == x).map(|p| p.1);
            let (before, after) = (at(4.0).unwrap(), at(6.0).unwrap());
            let path = series.path();
            if before != after {
                stepped += 1;
                let i = path.iter().position(|&p| p == (5.0, before)).expect("the corner at the TTL");
                assert_eq!(path[i + 1], (5.0, after), "{}: vertical at the TTL", series.name);
            }
        }
        assert!(stepped > 0, "some way pays again once the entry expired");
    }
}
