//! The report's charts, each built from rows of the sweep or the fixture suite.
//!
//! A sweep chart holds every axis it does not plot at one grid point, the *focus*: each
//! categorical axis at its first listed value (so the sweep file's order decides), history and
//! fork count at the values nearest 100,000 tokens and 4 forks. A series whose points are not in
//! the grid is left out rather than drawn empty.

use forkcache_engine::cache::Policy;
use forkcache_engine::prompt::Ttl;
use forkcache_engine::provider::Provider;
use forkcache_scenario::agent::ForkVariant;
use forkcache_scenario::{RequestRole, ScenarioReport, ScenarioTotals};

use super::chart::{
    Bar, BarChart, ChartError, Column, Corner, LineChart, Rendered, Series, StackedColumns, ValueFormat,
    XMark, bar_chart, line_chart, stacked_columns,
};
use super::tables::MistakeRow;
use crate::sweep::{Axes, Subagents, SweepCell, SweepResult, SweepRow};

/// History size and fork count the sweep charts hold fixed when they plot something else.
const FOCUS_HISTORY_TOKENS: u64 = 100_000;
const FOCUS_FORKS: u32 = 4;

/// Sweep rows and the point every chart holds fixed.
pub(crate) struct SweepView<'a> {
    pub result: &'a SweepResult,
    pub axes: &'a Axes,
    pub focus: SweepCell,
}

impl<'a> SweepView<'a> {
    pub(crate) fn new(result: &'a SweepResult, axes: &'a Axes) -> SweepView<'a> {
        SweepView { result, axes, focus: focus(axes) }
    }

    /// The row at `point` (its index ignored), if the grid has it.
    pub(crate) fn at(&self, point: &SweepCell) -> Option<&'a SweepRow> {
        self.result.rows.iter().find(|row| SweepCell { index: row.cell.index, ..*point } == row.cell)
    }

    /// The focus with the fork count and history size changed.
    pub(crate) fn point(&self, history_tokens: u64, forks: u32) -> SweepCell {
        SweepCell { history_tokens, forks, ..self.focus }
    }

    /// `(x, y)` for each x whose point exists.
    fn series<X: Copy>(
        &self,
        name: String,
        xs: &[X],
        point: impl Fn(X) -> SweepCell,
        x_value: impl Fn(X) -> f64,
        y_value: impl Fn(&SweepRow) -> f64,
    ) -> Option<Series> {
        let points: Vec<(f64, f64)> =
            xs.iter().filter_map(|&x| self.at(&point(x)).map(|row| (x_value(x), y_value(row)))).collect();
        (!points.is_empty()).then(|| Series::new(name, points))
    }

    /// The small print: what is held fixed, the sweep, its seed, the price table's date.
    fn caption(&self, fixed: &str) -> String {
        let r = self.result;
        format!("{fixed} · sweep \"{}\", seed {} · prices of {}", r.name, r.seed, r.prices_date)
    }

    fn settings(&self) -> String {
        let f = &self.focus;
        format!("{} policy, {} billing, {} TTL", f.policy.name(), f.billing.name(), f.ttl.name())
    }
}

/// Each categorical axis at its first value; history and forks nearest the focus values.
fn focus(axes: &Axes) -> SweepCell {
    SweepCell {
        index: 0,
        history_tokens: nearest(&axes.history_tokens, FOCUS_HISTORY_TOKENS),
        forks: nearest(&axes.forks.iter().map(|&n| u64::from(n)).collect::<Vec<_>>(), FOCUS_FORKS.into())
            as u32,
        subagents: Subagents::Fork,
        provider: axes.provider[0],
        policy: axes.policy[0],
        billing: axes.billing[0],
        variant: Some(axes.variant[0]),
        launch: Some(axes.launch[0]),
        mark_placeholders: Some(axes.mark_placeholders[0]),
        ttl: axes.ttl[0],
        idle_ms: axes.idle_ms[0],
    }
}

/// The value closest to `target` on a log scale (ties: the first listed), compared in integers
/// so no machine breaks a tie differently.
fn nearest(values: &[u64], target: u64) -> u64 {
    // v is closer than w when max(v,t)/min(v,t) < max(w,t)/min(w,t).
    let spread = |v: u64| (u128::from(v.max(target)), u128::from(v.min(target).max(1)));
    let mut best = values[0];
    for &value in values {
        let ((v_hi, v_lo), (b_hi, b_lo)) = (spread(value), spread(best));
        if v_hi * b_lo < b_hi * v_lo {
            best = value;
        }
    }
    best
}

/// A count on a log₂ axis (drawn with [`ValueFormat::PowerOfTwo`]).
fn log2(count: u32) -> f64 {
    f64::from(count.max(1)).log2()
}

/// Nano-dollars as dollars, for plotting only.
fn usd(nanousd: u64) -> f64 {
    nanousd as f64 / 1e9
}

/// `1 − cost ÷ naive` in percent, for plotting only.
fn savings_pct(t: &ScenarioTotals) -> f64 {
    if t.naive_nanousd == 0 { 0.0 } else { 100.0 * (1.0 - t.cost_nanousd as f64 / t.naive_nanousd as f64) }
}

fn forks_name(forks: u32) -> String {
    if forks == 1 { "1 fork".into() } else { format!("{forks} forks") }
}

fn tokens_name(tokens: u64) -> String {
    ValueFormat::Count.format(tokens as f64)
}

/// Savings of the forks' requests against no sharing, by history size, one line per N.
pub(crate) fn savings_vs_history(view: &SweepView) -> Result<Rendered, ChartError> {
    let series = view
        .axes
        .forks
        .iter()
        .filter_map(|&forks| {
            view.series(
                forks_name(forks),
                &view.axes.history_tokens,
                |tokens| view.point(tokens, forks),
                |tokens| tokens as f64,
                |row| savings_pct(&row.subagents),
            )
        })
        .collect();
    line_chart(&LineChart {
        title: "What forks save by sharing the parent's cache".into(),
        x_label: "parent's history before the spawn (tokens, log scale)".into(),
        y_label: "forks' input cost saved vs no sharing (%)".into(),
        y_format: ValueFormat::Percent,
        x_format: ValueFormat::Count,
        x_margin: 0.0,
        log_x: true,
        log_y: false,
        y_from_zero: false,
        legend: Corner::LowerRight,
        layered: false,
        series,
        x_marks: Vec::new(),
        caption: view.caption(&format!("{}; {}", view.settings(), fork_settings(&view.focus))),
    })
}

fn fork_settings(cell: &SweepCell) -> String {
    let variant = cell.variant.map_or("", |v| v.name());
    let launch = cell.launch.map_or("", crate::sweep::launch_name);
    format!("{variant} forks, {launch} launch")
}

/// The sub-agents' cost by N: forks without sharing, forks sharing, named sub-agents.
pub(crate) fn cost_vs_forks(view: &SweepView) -> Result<Rendered, ChartError> {
    let tokens = view.focus.history_tokens;
    let forks = &view.axes.forks;
    let named = |n: u32| SweepCell {
        subagents: Subagents::Named,
        variant: None,
        launch: None,
        mark_placeholders: None,
        ..view.point(tokens, n)
    };
    let x = log2;
    let series = [
        view.series(
            "forks, no sharing (naive)".into(),
            forks,
            |n| view.point(tokens, n),
            x,
            |r| usd(r.subagents.naive_nanousd),
        ),
        view.series(
            "forks sharing the parent's cache".into(),
            forks,
            |n| view.point(tokens, n),
            x,
            |r| usd(r.subagents.cost_nanousd),
        ),
        view.series("named sub-agents (fresh context)".into(), forks, named, x, |r| {
            usd(r.subagents.cost_nanousd)
        }),
    ];
    line_chart(&LineChart {
        title: format!("What N sub-agents cost on a {}-token history", tokens_name(tokens)),
        x_label: "sub-agents spawned (log scale)".into(),
        y_label: "sub-agents' input cost (USD, log scale)".into(),
        y_format: ValueFormat::Usd,
        x_format: ValueFormat::PowerOfTwo,
        x_margin: 0.0,
        log_x: false,
        log_y: true,
        y_from_zero: false,
        legend: Corner::UpperLeft,
        layered: false,
        series: series.into_iter().flatten().collect(),
        x_marks: Vec::new(),
        caption: view.caption(&format!("{}; named: general-purpose, own prompt and tools", view.settings())),
    })
}

/// The forks' cost by how many are spawned, one line per provider: the same agent on each
/// provider's cache rules, prices and models (`model`: the Claude model the sweep names).
pub(crate) fn providers(view: &SweepView, model: &str) -> Result<Rendered, ChartError> {
    let tokens = view.focus.history_tokens;
    let mut series: Vec<Series> = Vec::new();
    for &provider in &view.axes.provider {
        let line = view.series(
            format!("{provider} ({})", provider.model_for(model)),
            &view.axes.forks,
            |n| view.point(tokens, n).on_provider(provider),
            log2,
            |r| usd(r.subagents.cost_nanousd),
        );
        let Some(mut line) = line else { continue };
        // A line on top of another hides it: say so in the legend (Bedrock under Anthropic's
        // rules and prices, wherever their minimums agree).
        if let Some(under) = series.iter().find(|earlier| earlier.points == line.points) {
            let first = under.name.split(' ').next().unwrap_or_default();
            line.name = format!("{} = {first}", line.name);
        }
        series.push(line);
    }
    line_chart(&LineChart {
        title: format!(
            "The same forks on every provider's cache, on a {}-token history",
            tokens_name(tokens)
        ),
        x_label: "forks spawned (log scale)".into(),
        y_label: "forks' input cost (USD, log scale)".into(),
        y_format: ValueFormat::Usd,
        x_format: ValueFormat::PowerOfTwo,
        x_margin: 0.0,
        log_x: false,
        log_y: true,
        y_from_zero: false,
        legend: Corner::UpperLeft,
        layered: true,
        series,
        x_marks: Vec::new(),
        caption: format!(
            "seed {}, {} · prices {}",
            view.result.seed,
            fork_settings(&view.focus),
            price_dates(view)
        ),
    })
}

/// Each price table's date once, with the providers priced by it: Anthropic's table is the one
/// the sweep was given, the others are built in.
fn price_dates(view: &SweepView) -> String {
    let mut dates: Vec<(String, Vec<&str>)> = Vec::new();
    for &provider in &view.axes.provider {
        let date = match provider {
            Provider::Anthropic => view.result.prices_date.clone(),
            other => other.prices().date,
        };
        match dates.iter_mut().find(|(known, _)| *known == date) {
            Some((_, names)) => names.push(provider.name()),
            None => dates.push((date, vec![provider.name()])),
        }
    }
    let parts: Vec<String> =
        dates.iter().map(|(date, names)| format!("{date} {}", names.join(", "))).collect();
    parts.join("; ")
}

/// Whole-session cost by idle gap before the spawn, one line per TTL: a step where the gap
/// outlasts the TTL (the parent's entry expires and the spawn writes it again), flat elsewhere.
pub(crate) fn cost_vs_idle(view: &SweepView) -> Result<Rendered, ChartError> {
    let minutes = |ms: u64| ms as f64 / 60_000.0;
    let series = view
        .axes
        .ttl
        .iter()
        .filter_map(|&ttl| {
            let line = view.series(
                ttl_name(ttl).into(),
                &view.axes.idle_ms,
                |idle_ms| SweepCell { ttl, idle_ms, ..view.focus },
                minutes,
                |row| usd(row.totals.cost_nanousd),
            )?;
            Some(line.stepping_at(minutes(ttl.ms())))
        })
        .collect();
    let x_marks = [Ttl::FiveMinutes, Ttl::OneHour]
        .into_iter()
        .map(|ttl| XMark { at: minutes(ttl.ms()), label: format!("{} TTL", ttl.name()) })
        .collect();
    let f = &view.focus;
    line_chart(&LineChart {
        title: "An idle gap before the spawn: 5-minute vs 1-hour cache TTL".into(),
        x_label: "idle gap between the parent's turn and the spawn (minutes)".into(),
        y_label: "whole session's input cost (USD)".into(),
        y_format: ValueFormat::Usd,
        x_format: ValueFormat::Count,
        x_margin: 0.0,
        log_x: false,
        log_y: false,
        y_from_zero: true,
        legend: Corner::LowerRight,
        layered: false,
        series,
        x_marks,
        caption: view.caption(&format!(
            "{} history, {}; {} policy, {} billing; dots: sweep cells",
            tokens_name(f.history_tokens),
            forks_name(f.forks),
            f.policy.name(),
            f.billing.name()
        )),
    })
}

fn ttl_name(ttl: Ttl) -> &'static str {
    match ttl {
        Ttl::FiveMinutes => "5-minute TTL (writes 1.25×)",
        Ttl::OneHour => "1-hour TTL (writes 2×)",
    }
}

/// What one fork costs by N under the documented cache and the idealised one: per fork, so
/// small N is as readable as large N.
pub(crate) fn policy_gap(view: &SweepView) -> Result<Rendered, ChartError> {
    let tokens = view.focus.history_tokens;
    // Wider lines first: the idealised cache under the marked one shows where they coincide.
    let lines: [(&str, Policy, ForkVariant, bool); 4] = [
        ("anthropic, marker on the directive only", Policy::Anthropic, ForkVariant::AllToolUses, false),
        (
            "longest-prefix (the seeds' idealised cache)",
            Policy::LongestPrefix,
            ForkVariant::AllToolUses,
            false,
        ),
        ("anthropic, marker on the last placeholder too", Policy::Anthropic, ForkVariant::AllToolUses, true),
        ("anthropic, own-tool-use forks", Policy::Anthropic, ForkVariant::OwnToolUse, false),
    ];
    let series = lines
        .iter()
        .filter_map(|&(name, policy, variant, marked)| {
            let point = |n: u32| SweepCell {
                policy,
                variant: Some(variant),
                mark_placeholders: Some(marked),
                ..view.point(tokens, n)
            };
            view.series(name.into(), &view.axes.forks, point, log2, |r| {
                usd(r.subagents.cost_nanousd) / f64::from(r.cell.forks.max(1))
            })
        })
        .collect();
    let f = &view.focus;
    line_chart(&LineChart {
        title: "The documented cache vs the idealised one: what one of N forks costs".into(),
        x_label: "forks (log scale)".into(),
        y_label: "input cost per fork (USD)".into(),
        y_format: ValueFormat::Usd,
        x_format: ValueFormat::PowerOfTwo,
        x_margin: 0.0,
        log_x: false,
        log_y: false,
        // From $0: a line twice as high costs twice as much.
        y_from_zero: true,
        legend: Corner::UpperLeft,
        layered: true,
        series,
        x_marks: Vec::new(),
        caption: view.caption(&format!(
            "{} history; {} billing, {} launch, {} TTL",
            tokens_name(tokens),
            f.billing.name(),
            f.launch.map_or("", crate::sweep::launch_name),
            f.ttl.name()
        )),
    })
}

/// Each anti-pattern's whole-scenario cost over its correct twin's, largest first.
pub(crate) fn antipatterns(rows: &[MistakeRow], prices_date: &str) -> Result<Rendered, ChartError> {
    let mut bars: Vec<(u64, Bar)> = rows
        .iter()
        .map(|row| {
            let value = row.multiplier_thousandths() as f64 / 1000.0;
            (row.multiplier_thousandths(), Bar { label: row.mistake.what.into(), value })
        })
        .collect();
    // Stable: equal multipliers keep DESIGN's order.
    bars.sort_by_key(|bar| std::cmp::Reverse(bar.0));
    bar_chart(&BarChart {
        title: "What each mistake costs: the whole scenario vs its correct twin".into(),
        value_label: "cost with the mistake ÷ cost without (×, log scale; 1× = no change)".into(),
        value_format: ValueFormat::Multiplier,
        bars: bars.into_iter().map(|(_, bar)| bar).collect(),
        reference: Some(1.0),
        log_scale: true,
        caption: format!(
            "fixtures/scenarios/mistake-*.json vs their twins; anthropic policy and billing; each fixture's own seed · prices of {prices_date}"
        ),
    })
}

/// Width of a request's column on the timeline, as a share of the session's span.
const TIMELINE_COLUMN_SHARE: f64 = 0.006;

/// One session request by request on a time axis (idle gaps show as gaps): read, written and
/// uncached input, roles marked.
pub(crate) fn session_timeline(report: &ScenarioReport, fixture: &str) -> Result<Rendered, ChartError> {
    stacked_columns(&timeline(report, fixture))
}

fn timeline(report: &ScenarioReport, fixture: &str) -> StackedColumns {
    let starts: Vec<f64> = report.records.iter().map(|r| r.record.at.0 as f64 / 1000.0).collect();
    let span = starts.iter().copied().fold(0.0, f64::max) - starts.first().copied().unwrap_or(0.0);
    let width = span.max(1.0) * TIMELINE_COLUMN_SHARE;
    let columns = report
        .records
        .iter()
        .zip(side_by_side(&starts, width))
        .map(|(r, at)| {
            let u = &r.record.usage;
            let values = [u.cache_read_input_tokens, u.cache_creation_input_tokens, u.input_tokens];
            Column {
                at,
                values: values.iter().map(|&v| v as f64).collect(),
                mark: role_mark(r.role).map(str::to_string),
            }
        })
        .collect();
    let endpoint = &report.config.endpoint;
    StackedColumns {
        title: format!("One session over time (scenario \"{fixture}\")"),
        x_label: "request start (seconds into the session)".into(),
        x_format: ValueFormat::Count,
        column_width: width,
        y_label: "input tokens".into(),
        y_format: ValueFormat::Count,
        layers: vec!["read from the cache".into(), "written to the cache".into(), "uncached".into()],
        columns,
        mark_legend: "F fork · N named · S sidecar · C compaction".into(),
        legend: Corner::UpperRight,
        caption: format!(
            "close starts drawn side by side · {} policy, {} billing, seed {} · prices of {}",
            endpoint.cache.policy.name(),
            endpoint.billing.name(),
            report.seed,
            report.prices_date
        ),
    }
}

/// Column positions: each start time, moved right just enough not to cover the column before.
fn side_by_side(starts: &[f64], width: f64) -> Vec<f64> {
    let mut placed: Vec<f64> = Vec::with_capacity(starts.len());
    for &start in starts {
        let at = placed.last().map_or(start, |&before| start.max(before + width));
        placed.push(at);
    }
    placed
}

fn role_mark(role: RequestRole) -> Option<&'static str> {
    match role {
        RequestRole::Parent => None,
        RequestRole::Fork => Some("F"),
        RequestRole::Named => Some("N"),
        RequestRole::Task => Some("T"),
        RequestRole::Teammate => Some("M"),
        RequestRole::Sidecar => Some("S"),
        RequestRole::Compaction => Some("C"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_is_on_a_log_scale() {
        assert_eq!(nearest(&[10_000, 50_000, 200_000], 100_000), 50_000);
        assert_eq!(nearest(&[10_000, 60_000, 200_000], 100_000), 60_000);
        assert_eq!(nearest(&[1, 2, 8, 16], 4), 2);
        assert_eq!(nearest(&[7], 4), 7);
    }

    #[test]
    fn no_two_marks_of_the_session_timeline_overlap() {
        let prices = forkcache_engine::billing::PriceTable::builtin();
        let fixture = forkcache_scenario::fixture(crate::TIMELINE_SCENARIO).unwrap();
        let spec = forkcache_scenario::ScenarioSpec::from_json(fixture.json).unwrap();
        let report =
            forkcache_scenario::run(&spec, &forkcache_scenario::RunConfig::for_spec(&spec), &prices).unwrap();
        let marks = crate::chart::placed_marks(&timeline(&report, fixture.name)).unwrap();
        assert!(marks.len() > 10, "the session marks its forks, named agents, sidecars and compaction");
        for (i, a) in marks.iter().enumerate() {
            for b in &marks[i + 1..] {
                assert!(!a.bounds.overlaps(&b.bounds), "{a:?} covers {b:?}");
            }
        }
        // Each set straight above its own column, some would cover a neighbour's ("FFF").
        let unmoved: Vec<_> =
            marks.iter().map(|m| crate::chart::PixelBox::above(m.column_top, m.size())).collect();
        let collisions =
            unmoved.iter().enumerate().filter(|(i, a)| unmoved[i + 1..].iter().any(|b| a.overlaps(b)));
        assert!(collisions.count() > 0, "the test covers marks that would collide");
    }

    #[test]
    fn columns_starting_together_sit_side_by_side() {
        // 0 and 0.5 are closer than the width 2: the second moves to 2, the third (at 3) to 4;
        // 10 is clear of 4 + 2 and stays.
        assert_eq!(side_by_side(&[0.0, 0.5, 3.0, 10.0], 2.0), vec![0.0, 2.0, 4.0, 10.0]);
    }
}
