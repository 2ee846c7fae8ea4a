//! `import codex --html DIR`: one self-contained page (`index.html`) over the Codex sessions,
//! shaped as `import claude-code`'s ([`super::html`]): the sessions side by side, the what-ifs,
//! then a section per session with two charts as inline SVG and its breaks as a sortable table.
//!
//! The charts use the provider-neutral usage every request carries (read, written, uncached), so
//! they read the same as Claude Code's. Their x axis is the request's number in its thread (a
//! rollout's `token_count` lines are not all timed, and a thread's requests are what matter).

use std::collections::BTreeMap;

use forkcache_ingest::codex::CodexReport;
use forkcache_ingest::codex::analysis::SessionReport;

use crate::Artifact;
use crate::chart::{
    ChartError, Column, Corner, LineChart, Rendered, Series, StackedColumns, ValueFormat, line_chart,
    stacked_columns,
};
use crate::html::{Page, Table};

use super::html::percent;

/// The page, as the one file of the directory.
pub fn page(report: &CodexReport) -> Result<Artifact, ChartError> {
    let t = &report.totals;
    let mut page = Page::new(
        "forkcache import codex",
        format!(
            "{} sessions, {} requests: real ${:.4}, predicted ${:.4} (OpenAI's prices of {}); predicted read within tolerance on {:.1}% of requests (the baseline guess “the previous request's whole input”: {:.1}%).",
            report.sessions.len(),
            t.requests,
            usd(t.cost_nanousd),
            usd(t.predicted_cost_nanousd),
            report.prices.date,
            percent(t.agreement.predicted, t.agreement.requests),
            percent(t.agreement.baseline, t.agreement.requests),
        ),
    );
    let overview = page.section("Sessions");
    overview.table("one row per session (a thread); click a header to sort", sessions_table(report));
    if !report.what_ifs.is_empty() {
        overview.table(
            "the prediction under a changed setting, minus the prediction under the real one",
            what_if_table(report),
        );
    }
    for session in &report.sessions {
        session_section(&mut page, session)?;
    }
    Ok(Artifact { name: "index.html".into(), bytes: page.render().into_bytes() })
}

fn session_section(page: &mut Page, session: &SessionReport) -> Result<(), ChartError> {
    let t = &session.totals;
    let section = page.section(format!("Session {}", session.file));
    let parent = session.parent.as_deref().map_or(String::new(), |p| format!(", a sub-agent of {p}"));
    section.paragraph(format!(
        "thread {}{parent} · {} {} · provider {}: {} requests, real ${:.4}, predicted ${:.4}; {} breaks; agreement {:.1}% (baseline {:.1}%).",
        session.thread,
        session.originator,
        session.cli_version,
        session.provider,
        t.requests,
        usd(t.cost_nanousd),
        usd(t.predicted_cost_nanousd),
        session.breaks.len(),
        percent(t.agreement.predicted, t.agreement.requests),
        percent(t.agreement.baseline, t.agreement.requests),
    ));
    if session.requests.is_empty() {
        section.paragraph("no billed request in this rollout");
        return Ok(());
    }
    section.chart(
        usage_chart(session)?.svg,
        "real usage per request (read, written, uncached); a label marks a break and its cause",
    );
    section.chart(read_chart(session)?.svg, "real and predicted cache reads, request by request");
    section.table("the breaks, with their causes", breaks_table(session));
    if !session.unbilled.is_empty() {
        let rows = session.unbilled.iter().map(|u| vec![u.time.clone(), u.kind.to_string()]).collect();
        let table = Table { columns: vec!["time".into(), "kind".into()], rows };
        section.table("work the rollout shows without usage (a remote compaction): not billed here", table);
    }
    Ok(())
}

/// The cause of the break at each rollout line that has one.
fn breaks_by_line(session: &SessionReport) -> BTreeMap<usize, &'static str> {
    session.breaks.iter().map(|b| (b.line, b.cause.name())).collect()
}

/// Each request's column width, in requests: a gap between neighbours.
const COLUMN_WIDTH: f64 = 0.8;

fn usage_chart(session: &SessionReport) -> Result<Rendered, ChartError> {
    let breaks = breaks_by_line(session);
    let columns = session
        .requests
        .iter()
        .enumerate()
        .map(|(index, request)| {
            let usage = &request.recorded.neutral;
            Column {
                at: index as f64,
                values: vec![usage.read as f64, usage.written as f64, usage.uncached as f64],
                mark: breaks.get(&request.line).map(|cause| cause.to_string()),
            }
        })
        .collect();
    stacked_columns(&StackedColumns {
        title: format!("{}: real usage per request", session.file),
        x_label: "request in the thread (0-based)".into(),
        x_format: ValueFormat::Count,
        column_width: COLUMN_WIDTH,
        y_label: "input tokens".into(),
        y_format: ValueFormat::Count,
        layers: vec!["read".into(), "written".into(), "uncached".into()],
        columns,
        mark_legend: "a label above a column: a cache break and its cause".into(),
        legend: Corner::UpperLeft,
        caption: "forkcache import codex: usage as recorded in the rollout".into(),
    })
}

fn read_chart(session: &SessionReport) -> Result<Rendered, ChartError> {
    let points = |predicted: bool| -> Vec<(f64, f64)> {
        session
            .requests
            .iter()
            .enumerate()
            .map(|(index, request)| {
                let read = if predicted { request.predicted.read } else { request.recorded.neutral.read };
                (index as f64, read as f64)
            })
            .collect()
    };
    line_chart(&LineChart {
        title: format!("{}: cache reads, real and predicted", session.file),
        x_label: "request in the thread (0-based)".into(),
        y_label: "tokens read from the cache".into(),
        y_format: ValueFormat::Count,
        x_format: ValueFormat::Count,
        x_margin: COLUMN_WIDTH,
        log_x: false,
        log_y: false,
        y_from_zero: true,
        legend: Corner::UpperLeft,
        layered: true,
        series: vec![Series::dots("real read", points(false)), Series::dots("predicted read", points(true))],
        x_marks: Vec::new(),
        caption: "the prediction of each request uses only earlier requests and its total input".into(),
    })
}

fn sessions_table(report: &CodexReport) -> Table {
    let columns = [
        "session",
        "thread",
        "parent",
        "requests",
        "real_usd",
        "predicted_usd",
        "breaks",
        "agreement_pct",
        "baseline_pct",
    ];
    let rows = report
        .sessions
        .iter()
        .map(|s| {
            let t = &s.totals;
            vec![
                s.file.clone(),
                s.thread.clone(),
                s.parent.clone().unwrap_or_default(),
                t.requests.to_string(),
                format!("{:.4}", usd(t.cost_nanousd)),
                format!("{:.4}", usd(t.predicted_cost_nanousd)),
                s.breaks.len().to_string(),
                format!("{:.1}", percent(t.agreement.predicted, t.agreement.requests)),
                format!("{:.1}", percent(t.agreement.baseline, t.agreement.requests)),
            ]
        })
        .collect();
    Table { columns: columns.map(String::from).to_vec(), rows }
}

fn what_if_table(report: &CodexReport) -> Table {
    let columns = ["setting", "delta_usd", "threads_priced"];
    let rows = report
        .what_ifs
        .iter()
        .map(|w| {
            vec![
                w.setting.name().to_string(),
                format!("{:.4}", w.delta_nanousd as f64 / 1e9),
                w.delta_nanousd_by_thread.len().to_string(),
            ]
        })
        .collect();
    Table { columns: columns.map(String::from).to_vec(), rows }
}

/// A row per break: where, when, what was expected to be read, what was, and why.
fn breaks_table(session: &SessionReport) -> Table {
    let columns = ["line", "time", "model", "expected_read", "read", "tokens_lost", "cause"];
    let rows = session
        .breaks
        .iter()
        .map(|b| {
            vec![
                b.line.to_string(),
                b.time.clone().unwrap_or_default(),
                b.model.clone().unwrap_or_default(),
                b.expected_read.to_string(),
                b.read.to_string(),
                b.lost.to_string(),
                b.cause.name().to_string(),
            ]
        })
        .collect();
    Table { columns: columns.map(String::from).to_vec(), rows }
}

fn usd(nanousd: u64) -> f64 {
    nanousd as f64 / 1e9
}
