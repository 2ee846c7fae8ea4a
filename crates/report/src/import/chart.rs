//! `import --chart DIR`: two charts per session, PNG and SVG, drawn by [`crate::chart`].
//!
//! - `<session>-usage`: each request's real read, written and uncached tokens, stacked, in start
//!   order and labelled by minutes since the session's first request; a break carries its
//!   cause above its column.
//! - `<session>-read`: real read beside predicted read, a dot per request on the same time axis
//!   (minutes): a line between two requests would claim reads in between that never happened.

use forkcache_ingest::report::SessionReport;

use crate::Artifact;
use crate::chart::{
    ChartError, Column, Corner, LineChart, Rendered, Series, StackedColumns, ValueFormat, line_chart,
    stacked_columns,
};

/// Every chart of every session, as files named after the session.
pub fn charts(sessions: &[SessionReport]) -> Result<Vec<Artifact>, ChartError> {
    let mut artifacts = Vec::new();
    for session in sessions {
        let name = file_stem(&session.session.session_id);
        for (suffix, rendered) in session_charts(session)? {
            artifacts.push(Artifact { name: format!("{name}-{suffix}.png"), bytes: rendered.png });
            artifacts
                .push(Artifact { name: format!("{name}-{suffix}.svg"), bytes: rendered.svg.into_bytes() });
        }
    }
    Ok(artifacts)
}

/// A session's two charts, by the suffix of their file names: `usage`, then `read`.
pub fn session_charts(session: &SessionReport) -> Result<[(&'static str, Rendered); 2], ChartError> {
    Ok([("usage", usage_chart(session)?), ("read", read_chart(session)?)])
}

/// A session id as a file name: letters, digits, `-` and `_` kept, anything else `_`.
fn file_stem(session_id: &str) -> String {
    let stem: String = session_id
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
        .collect();
    if stem.is_empty() { "session".to_string() } else { stem }
}

fn minutes_since_start(session: &SessionReport, index: usize) -> f64 {
    let first = session.session.requests.first().map_or(0, |r| r.start_ms);
    (session.session.requests[index].start_ms - first) as f64 / 60_000.0
}

/// A column a hundredth of the session's span wide (a minute for a session shorter than that):
/// wide enough to see, narrow enough that idle gaps show.
fn column_width(session: &SessionReport) -> f64 {
    let last = session.session.requests.len().saturating_sub(1);
    (minutes_since_start(session, last) / 100.0).max(1.0 / 60.0)
}

fn usage_chart(session: &SessionReport) -> Result<Rendered, ChartError> {
    let columns = session
        .session
        .requests
        .iter()
        .enumerate()
        .map(|(index, request)| {
            let usage = &request.request.recorded.usage;
            Column {
                at: minutes_since_start(session, index),
                values: vec![
                    usage.cache_read_input_tokens as f64,
                    usage.cache_creation_input_tokens as f64,
                    usage.input_tokens as f64,
                ],
                mark: request.break_.map(|b| b.cause.name().to_string()),
            }
        })
        .collect();
    stacked_columns(&StackedColumns {
        title: format!("Session {}: real usage per request", session.session.session_id),
        x_label: "minutes since the session's first request".into(),
        x_format: ValueFormat::Count,
        column_width: column_width(session),
        y_label: "input tokens".into(),
        y_format: ValueFormat::Count,
        layers: vec!["read".into(), "written".into(), "uncached".into()],
        columns,
        mark_legend: "a label above a column: a cache break and its cause".into(),
        legend: Corner::UpperLeft,
        caption: "forkcache import claude-code: usage as recorded in the transcript".into(),
    })
}

fn read_chart(session: &SessionReport) -> Result<Rendered, ChartError> {
    line_chart(&read_lines(session))
}

fn read_lines(session: &SessionReport) -> LineChart {
    let points = |agents: bool, predicted: bool| -> Vec<(f64, f64)> {
        let requests = &session.session.requests;
        (0..requests.len())
            .filter(|&index| requests[index].is_agent() == agents)
            .map(|index| {
                let read = if predicted {
                    session.rows[index].predicted.usage.cache_read_input_tokens
                } else {
                    requests[index].request.recorded.usage.cache_read_input_tokens
                };
                (minutes_since_start(session, index), read as f64)
            })
            .collect()
    };
    let mut series = vec![
        Series::dots("real read (main)", points(false, false)),
        Series::dots("predicted read (main)", points(false, true)),
    ];
    if session.session.requests.iter().any(|r| r.is_agent()) {
        series.push(Series::dots("real read (sub-agents)", points(true, false)));
        series.push(Series::dots("predicted read (sub-agents)", points(true, true)));
    }
    series.retain(|s| !s.points.is_empty());
    LineChart {
        title: format!("Session {}: cache reads, real and predicted", session.session.session_id),
        x_label: "minutes since the session's first request".into(),
        y_label: "tokens read from the cache".into(),
        y_format: ValueFormat::Count,
        x_format: ValueFormat::Count,
        x_margin: column_width(session),
        log_x: false,
        log_y: false,
        y_from_zero: true,
        legend: Corner::UpperLeft,
        layered: true,
        series,
        x_marks: Vec::new(),
        caption: "the prediction of each request uses only earlier requests and its total input".into(),
    }
}

#[cfg(test)]
mod tests {
    use forkcache_engine::billing::PriceTable;
    use forkcache_ingest::report::ImportOptions;
    use forkcache_ingest::transcript::TranscriptReader;

    use super::*;

    /// A session from the repository's transcripts: two requests at its start, one two minutes
    /// later that reads 141K.
    fn sparse_session() -> SessionReport {
        let path = "../../fixtures/transcripts/claude-code-log-sidechain-integrated.jsonl";
        let mut reader = TranscriptReader::new();
        reader.read(path, std::fs::read(path).unwrap().as_slice()).unwrap();
        let options = ImportOptions { what_ifs: Vec::new(), emit_trace: false };
        let report = forkcache_ingest::import(reader.finish(), &options, &PriceTable::builtin()).unwrap();
        report.sessions.into_iter().next().unwrap()
    }

    #[test]
    fn reads_are_dots_at_their_requests_never_a_line_between_them() {
        let chart = read_lines(&sparse_session());
        assert!(!chart.series.is_empty());
        for series in &chart.series {
            assert!(series.dots_only, "{}: a line would ramp between requests minutes apart", series.name);
        }
    }

    #[test]
    fn the_read_chart_spans_the_usage_chart_s_columns_with_room_at_both_ends() {
        let session = sparse_session();
        assert_eq!(read_lines(&session).x_margin, column_width(&session));
    }
}
