//! `import --html DIR`: one self-contained page (`index.html`) over the whole import, written
//! with the report's page writer ([`crate::html`]): the sessions side by side, the
//! what-ifs, then a section per session with its two charts as inline SVG (real usage with the
//! breaks marked; real beside predicted read over time) and its breaks as a sortable table.

use forkcache_ingest::report::{ImportReport, SessionReport};

use crate::Artifact;
use crate::chart::ChartError;
use crate::html::{Page, Table};

/// The page, as the one file of the directory.
pub fn page(report: &ImportReport) -> Result<Artifact, ChartError> {
    let t = &report.totals;
    let mut page = Page::new(
        "forkcache import claude-code",
        format!(
            "{} sessions, {} requests: real ${:.4}, predicted ${:.4}; predicted read within tolerance on {:.1}% of requests (the baseline guess “previous read + creation”: {:.1}%).",
            report.sessions.len(),
            t.requests,
            t.recorded_cost.usd(),
            t.predicted_cost.usd(),
            percent(t.agreement.predicted, t.agreement.requests),
            percent(t.agreement.baseline, t.agreement.requests),
        ),
    );
    let overview = page.section("Sessions");
    overview.table("one row per session; click a header to sort", sessions_table(report));
    if !report.what_ifs.is_empty() {
        overview.table(
            "the prediction under a changed setting, beside the prediction under the real one",
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
    let section = page.section(format!("Session {}", session.session.session_id));
    section.paragraph(format!(
        "{} requests in {} chains: real ${:.4}, predicted ${:.4}; {} breaks costing ${:.4} extra; agreement {:.1}% (baseline {:.1}%).",
        t.requests,
        session.session.chains.len(),
        t.recorded_cost.usd(),
        t.predicted_cost.usd(),
        t.breaks.values().sum::<u64>(),
        t.breaks_extra_cost.usd(),
        percent(t.agreement.predicted, t.agreement.requests),
        percent(t.agreement.baseline, t.agreement.requests),
    ));
    let [(_, usage), (_, read)] = super::chart::session_charts(session)?;
    section.chart(
        usage.svg,
        "real usage per request (read, written, uncached); a label marks a break and its cause",
    );
    section.chart(read.svg, "real and predicted cache reads over the session");
    section.table("the breaks, with their causes (observed in the transcript)", breaks_table(session));
    Ok(())
}

fn sessions_table(report: &ImportReport) -> Table {
    let columns = [
        "session",
        "requests",
        "chains",
        "real_usd",
        "predicted_usd",
        "breaks",
        "extra_usd",
        "agreement_pct",
        "baseline_pct",
    ];
    let rows = report
        .sessions
        .iter()
        .map(|s| {
            let t = &s.totals;
            vec![
                s.session.session_id.clone(),
                t.requests.to_string(),
                s.session.chains.len().to_string(),
                format!("{:.4}", t.recorded_cost.usd()),
                format!("{:.4}", t.predicted_cost.usd()),
                t.breaks.values().sum::<u64>().to_string(),
                format!("{:.4}", t.breaks_extra_cost.usd()),
                format!("{:.1}", percent(t.agreement.predicted, t.agreement.requests)),
                format!("{:.1}", percent(t.agreement.baseline, t.agreement.requests)),
            ]
        })
        .collect();
    Table { columns: columns.map(String::from).to_vec(), rows }
}

fn what_if_table(report: &ImportReport) -> Table {
    let columns = ["setting", "delta_usd", "writes_usd", "reads_usd", "breaks_avoided", "breaks_added"];
    let rows = report
        .what_ifs
        .iter()
        .map(|w| {
            let delta = w.cost.total_nanousd() as i128 - w.baseline_cost.total_nanousd() as i128;
            vec![
                w.setting.name(),
                format!("{:.4}", delta as f64 / 1e9),
                format!("{:.4}", (w.cost.write_5m_nanousd + w.cost.write_1h_nanousd) as f64 / 1e9),
                format!("{:.4}", w.cost.read_nanousd as f64 / 1e9),
                w.breaks_avoided.to_string(),
                w.breaks_added.to_string(),
            ]
        })
        .collect();
    Table { columns: columns.map(String::from).to_vec(), rows }
}

/// A row per break: when, where, after what gap, why, what it lost and cost.
fn breaks_table(session: &SessionReport) -> Table {
    let columns = ["index", "at", "chain", "gap_s", "cause", "tokens_lost", "extra_usd"];
    let rows = session
        .session
        .requests
        .iter()
        .zip(&session.rows)
        .enumerate()
        .filter_map(|(index, (request, row))| {
            let observed = request.break_?;
            Some(vec![
                index.to_string(),
                request.request.at.clone(),
                request.request.chain.name(),
                (observed.gap_ms / 1000).to_string(),
                observed.cause.name().to_string(),
                observed.tokens_lost.to_string(),
                row.break_extra.map_or("unpriced".to_string(), |c| format!("{:.4}", c.usd())),
            ])
        })
        .collect();
    Table { columns: columns.map(String::from).to_vec(), rows }
}

/// `part` of `whole` in percent, 0 for nothing at all.
pub(super) fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 { 0.0 } else { part as f64 * 100.0 / whole as f64 }
}
