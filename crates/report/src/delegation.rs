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

/// The TTL the delegation rows run under, in minutes on the idle axis (marked on the chart).
const TTL_MINUTES: f64 = 5.0;

/// How finely the idle chart's steps are placed: a step is drawn at the first whole second
/// whose gap costs the new amount.
const STEP_RESOLUTION_MS: u64 = 1_000;

/// Where one way's added cost changes on the idle axis: `(gap_ms, added)` — from `gap_ms` on,
/// delegating adds `added` thousandths of a token-equivalent.
pub(crate) struct GapSteps {
    way: Way,
    steps: Vec<(u64, u64)>,
}

/// Each way's steps between the sampled gaps. The cost of a gap changes only where an entry
/// expires or arrivals reorder, so it is flat between those points and jumps at them; where the
/// two gaps either side of an interval cost differently, the session is run again inside it,
/// halving it down to a second, to find where.
pub(crate) fn gap_steps(rows: &[Row], prices: &PriceTable) -> Result<Vec<GapSteps>, ScenarioError> {
    let mut all = Vec::new();
    for way in WAYS {
        let samples: Vec<&Row> =
            rows.iter().filter(|r| r.way == way && r.history_tokens == FOCUS_HISTORY_TOKENS).collect();
        let Some(baseline) = samples.first().map(|r| r.baseline.token_equivalents.0) else { continue };
        let mut added = |gap_ms: u64| -> Result<u64, ScenarioError> {
            let report = run_spec(&delegation_spec(way, FOCUS_HISTORY_TOKENS, gap_ms), prices)?;
            Ok(report.totals.token_equivalents.0.saturating_sub(baseline))
        };
        let mut steps = Vec::new();
        for pair in samples.windows(2) {
            let (low, high) = ((pair[0].idle_ms, pair[0].added()), (pair[1].idle_ms, pair[1].added()));
            find_steps(low, high, &mut added, &mut steps)?;
        }
        all.push(GapSteps { way, steps });
    }
    Ok(all)
}

/// The steps of a step function between two of its samples `(x, value)`, in x order: each the
/// first x (to `STEP_RESOLUTION_MS`) with a new value. Bounded: each call halves the interval.
fn find_steps<E>(
    low: (u64, u64),
    high: (u64, u64),
    value_at: &mut impl FnMut(u64) -> Result<u64, E>,
    steps: &mut Vec<(u64, u64)>,
) -> Result<(), E> {
    if low.1 == high.1 {
        return Ok(());
    }
    if high.0 - low.0 <= STEP_RESOLUTION_MS {
        steps.push(high);
        return Ok(());
    }
    let half = ((high.0 - low.0) / 2 / STEP_RESOLUTION_MS).max(1) * STEP_RESOLUTION_MS;
    let middle = (low.0 + half, value_at(low.0 + half)?);
    find_steps(low, middle, value_at, steps)?;
    find_steps(middle, high, value_at, steps)
}

fn minutes(ms: u64) -> f64 {
    ms as f64 / 60_000.0
}

/// One line per way over the gaps, at the focus history: a dot at each sampled gap, flat between
/// them, jumping where the cost changes.
fn gap_series(rows: &[Row], steps: &[GapSteps]) -> Vec<Series> {
    let at_focus = |r: &Row| r.history_tokens == FOCUS_HISTORY_TOKENS;
    WAYS.iter()
        .map(|&way| {
            let steps = steps.iter().filter(|s| s.way == way).flat_map(|s| &s.steps);
            Series {
                steps: steps.map(|&(ms, added)| (minutes(ms), added as f64 / 1000.0)).collect(),
                ..series(rows, way, at_focus, |r| minutes(r.idle_ms))
            }
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
        x_margin: 0.0,
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
pub(crate) fn vs_idle(rows: &[Row], steps: &[GapSteps], prices: &PriceTable) -> Result<Rendered, ChartError> {
    line_chart(&LineChart {
        x_marks: vec![XMark { at: TTL_MINUTES, label: "5m TTL".into() }],
        title: "One unit of delegated work, five ways: cost by the gap between the delegate's requests"
            .into(),
        x_label: "the delegate's gap between requests: its tools' time, or a teammate's wait (minutes)"
            .into(),
        y_label: "what delegating added to the session (token-equivalents)".into(),
        y_format: ValueFormat::Count,
        x_format: ValueFormat::Count,
        x_margin: 0.0,
        log_x: false,
        log_y: false,
        y_from_zero: true,
        legend: Corner::UpperLeft,
        layered: true,
        series: gap_series(rows, steps),
        caption: caption("100k history, steps found to the second", prices),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_way_has_a_point_at_every_history_size_and_gap() {
        let prices = PriceTable::builtin();
        let rows = rows(&prices).unwrap();
        for series in history_series(&rows) {
            let xs: Vec<f64> = series.points.iter().map(|p| p.0).collect();
            assert_eq!(xs, HISTORY_TOKENS.map(|h| h as f64), "{}", series.name);
        }
        for series in gap_series(&rows, &gap_steps(&rows, &prices).unwrap()) {
            let xs: Vec<f64> = series.points.iter().map(|p| p.0).collect();
            assert_eq!(xs, IDLE_MS.map(minutes), "{}", series.name);
        }
    }

    #[test]
    fn steps_are_found_to_the_second_between_samples() {
        // Two jumps between the samples at 0 and 100 s: at 30.5 s (drawn at 31 s) and at 70 s.
        let value = |ms: u64| -> Result<u64, ()> {
            Ok(if ms < 30_500 {
                1
            } else if ms < 70_000 {
                2
            } else {
                3
            })
        };
        let mut steps = Vec::new();
        find_steps((0, 1), (100_000, 3), &mut |ms| value(ms), &mut steps).unwrap();
        assert_eq!(steps, vec![(31_000, 2), (70_000, 3)]);
        // Equal ends: nothing is run, nothing found.
        let mut calls = 0;
        find_steps(
            (0, 1),
            (100_000, 1),
            &mut |_| -> Result<u64, ()> {
                calls += 1;
                Ok(9)
            },
            &mut steps,
        )
        .unwrap();
        assert_eq!((calls, steps.len()), (0, 2));
    }

    #[test]
    fn the_idle_lines_are_flat_between_steps_never_sloping() {
        // A gap's cost is a step function (an entry expires or not): every segment of every line
        // is level or vertical. A sync agent makes the parent wait two gaps, so its parent's
        // entry expires near a 2.5-minute gap, between the samples at 1 and 2.5 minutes.
        let prices = PriceTable::builtin();
        let rows = rows(&prices).unwrap();
        let steps = gap_steps(&rows, &prices).unwrap();
        for series in gap_series(&rows, &steps) {
            for segment in series.path().windows(2) {
                let [(x0, y0), (x1, y1)] = [segment[0], segment[1]];
                assert!(x0 == x1 || y0 == y1, "{}: sloped from ({x0}, {y0}) to ({x1}, {y1})", series.name);
            }
        }
        let named = steps.iter().find(|s| s.way == Way::Named).unwrap();
        assert!(
            named.steps.iter().any(|&(ms, _)| (60_001..=150_000).contains(&ms)),
            "the parent's expiry falls between the 1- and 2.5-minute samples"
        );
    }
}
