//! The import's result: every request's real bill beside its prediction, the breaks and what
//! they cost, totals per session, chain, model and day, and the what-ifs; as JSON, a table or
//! CSV.
//!
//! Real costs come from the price table at the request's date. A model without a row is never
//! priced as another: its tokens are counted, its cost is `null`, and it is listed under
//! `unpriced_models`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use forkcache_engine::billing::{Cost, PriceDate, PriceTable, Usage};
use forkcache_engine::prompt::Ttl;
use forkcache_engine::tokenize::TokenizerUnavailable;

use super::breaks::{self, BreakCause, Turn};
use super::predict::{self, AccountView, Predicted, WhatIf};
use super::transcript::{Chain, Event, ReadStats, TranscriptRequest, day_of};
use super::{ImportedSession, SessionRequest};

mod json;

/// Import settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportOptions {
    /// Settings to re-run the prediction under.
    pub what_ifs: Vec<WhatIf>,
    /// Keep the simulated requests as trace lines (`--emit-trace`).
    pub emit_trace: bool,
}

/// What `usage` costs on `model` at `request`'s date with its recorded modifiers (fast mode,
/// `inference_geo`, batch); `None` when the table has no price for it. An unknown model is
/// never priced as another. Transcripts carry no headers: a usage past the model's table
/// window ran with the 1M-context beta (the API accepted it) and pays its long-context rates
/// ([`PriceTable::cost_of_recorded_usage`]); a prediction has the request's total input, so it
/// is priced alike.
pub fn cost_of(prices: &PriceTable, request: &TranscriptRequest, model: &str, usage: &Usage) -> Option<Cost> {
    let date = PriceDate::parse(&request.at).ok();
    prices.cost_of_recorded_usage(model, date, usage, request.recorded.modifiers)
}

/// Rewriting `tokens` (at the TTL the request wrote with) minus reading them, at the rates of
/// the request's own band: both sides keep the request's whole input, so a request past 200K
/// input on the 1M-context beta prices its break at the long-context rates, as its bill did.
fn rewrite_minus_read(prices: &PriceTable, request: &TranscriptRequest, tokens: u64) -> Option<Cost> {
    let rest = request.recorded.usage.total_input_tokens().saturating_sub(tokens);
    let rewrite = match predict::written_ttl(&request.recorded.usage) {
        Some(Ttl::OneHour) => Usage::new(rest, 0, 0, tokens, 0),
        _ => Usage::new(rest, 0, tokens, 0, 0),
    };
    let write = cost_of(prices, request, &request.model, &rewrite)?.total_nanousd();
    let read = cost_of(prices, request, &request.model, &Usage::new(rest, tokens, 0, 0, 0))?.total_nanousd();
    Some(Cost { write_5m_nanousd: write.saturating_sub(read), ..Cost::default() })
}

/// A predicted read agrees with the real one within max(1,000 tokens, 2% of the real read).
pub fn agrees(predicted_read: u64, real_read: u64) -> bool {
    predicted_read.abs_diff(real_read) <= (real_read / 50).max(breaks::BREAK_THRESHOLD_TOKENS)
}

/// One request's row.
#[derive(Clone, Debug)]
pub struct RequestRow {
    /// Real cost (`None`: unpriced model).
    pub recorded_cost: Option<Cost>,
    /// The prediction.
    pub predicted: Predicted,
    /// Predicted cost.
    pub predicted_cost: Option<Cost>,
    /// Predicted read within tolerance of the real read.
    pub agreement: bool,
    /// The baseline guess (previous read + creation) within tolerance of the real read.
    pub baseline_agreement: bool,
    /// A break's extra cost: rewriting the lost tokens minus reading them.
    pub break_extra: Option<Cost>,
}

/// Agreement counts over a set of requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Agreement {
    /// Requests counted.
    pub requests: u64,
    /// The prediction agreed.
    pub predicted: u64,
    /// The baseline agreed.
    pub baseline: u64,
}

impl Agreement {
    fn add(&mut self, row: &RequestRow) {
        self.requests += 1;
        self.predicted += u64::from(row.agreement);
        self.baseline += u64::from(row.baseline_agreement);
    }
}

/// Sums over a set of requests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Requests.
    pub requests: u64,
    /// Real usage summed.
    pub recorded_usage: Usage,
    /// Real cost of the priced requests.
    pub recorded_cost: Cost,
    /// Predicted usage summed.
    pub predicted_usage: Usage,
    /// Predicted cost of the priced requests.
    pub predicted_cost: Cost,
    /// Every request.
    pub agreement: Agreement,
    /// Requests with an observed break.
    pub on_breaks: Agreement,
    /// Chains' first requests.
    pub on_chain_starts: Agreement,
    /// Breaks by cause.
    pub breaks: BTreeMap<BreakCause, u64>,
    /// Tokens lost to breaks.
    pub tokens_lost: u64,
    /// Extra cost of the priced breaks.
    pub breaks_extra_cost: Cost,
    /// Models without a price row.
    pub unpriced_models: BTreeSet<String>,
    /// Requests whose writes had no 5m/1h split (priced as 5m).
    pub writes_assumed_5m: u64,
    /// Requests whose simulated prompt the endpoint refused (not predicted; their predicted
    /// usage counts as zero).
    pub predictions_refused: u64,
}

impl Totals {
    fn add(&mut self, request: &SessionRequest, row: &RequestRow) {
        let recorded = &request.request.recorded;
        self.requests += 1;
        self.recorded_usage.add(&recorded.usage);
        self.predicted_usage.add(&row.predicted.usage);
        match (&row.recorded_cost, &row.predicted_cost) {
            (Some(real), Some(predicted)) => {
                self.recorded_cost.add(real);
                self.predicted_cost.add(predicted);
            }
            _ => {
                self.unpriced_models.insert(request.request.model.clone());
            }
        }
        self.agreement.add(row);
        if request.observed_break() {
            self.on_breaks.add(row);
        }
        if request.chain_index == 0 {
            self.on_chain_starts.add(row);
        }
        if let Some(observed) = &request.break_ {
            *self.breaks.entry(observed.cause).or_insert(0) += 1;
            self.tokens_lost += observed.tokens_lost;
        }
        if let Some(extra) = &row.break_extra {
            self.breaks_extra_cost.add(extra);
        }
        self.predictions_refused += u64::from(row.predicted.refused.is_some());
        self.writes_assumed_5m +=
            u64::from(!recorded.split_known && recorded.usage.cache_creation_input_tokens > 0);
    }
}

/// The summarising call of a compaction: not in the transcript, estimated as a read of the whole
/// cached context (`compactMetadata.preTokens`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompactionEstimate {
    /// Session.
    pub session_id: String,
    /// Chain compacted.
    pub chain: Chain,
    /// The first request after the compaction.
    pub next_request_id: String,
    /// Context the summarising call read.
    pub pre_tokens: u64,
    /// Its estimated cost (reads only), `None` for an unpriced model.
    pub cost: Option<Cost>,
}

/// One what-if's result, beside the prediction under the real settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WhatIfResult {
    /// The setting.
    pub setting: WhatIf,
    /// Predicted cost under the setting.
    pub cost: Cost,
    /// Predicted cost under the real settings.
    pub baseline_cost: Cost,
    /// Requests predicted to break under the real settings but not under this one.
    pub breaks_avoided: u64,
    /// Requests predicted to break under this setting only.
    pub breaks_added: u64,
}

/// One session's rows and totals.
#[derive(Clone, Debug)]
pub struct SessionReport {
    /// The session as imported.
    pub session: ImportedSession,
    /// A row per request, in the session's order.
    pub rows: Vec<RequestRow>,
    /// Sums.
    pub totals: Totals,
}

/// A whole import.
#[derive(Clone, Debug)]
pub struct ImportReport {
    /// Every session.
    pub sessions: Vec<SessionReport>,
    /// Sums over every session.
    pub totals: Totals,
    /// Real cost per model and per day (UTC).
    pub by_model: BTreeMap<String, Totals>,
    /// Real cost per day.
    pub by_day: BTreeMap<String, Totals>,
    /// Compactions' summarising calls.
    pub compactions: Vec<CompactionEstimate>,
    /// What-ifs.
    pub what_ifs: Vec<WhatIfResult>,
    /// What reading counted.
    pub read: ReadStats,
    /// The simulated requests as trace lines, when asked for.
    pub trace: Vec<String>,
    /// Breaks located in a proxy's bytes (`--trace`), when given.
    pub join: Option<super::proxy::Join>,
}

/// Prices, predicts and totals imported sessions.
pub fn analyse(
    sessions: Vec<ImportedSession>,
    read: ReadStats,
    options: &ImportOptions,
    prices: &PriceTable,
) -> Result<ImportReport, TokenizerUnavailable> {
    let account = AccountView::of(&sessions);
    let mut report = ImportReport {
        sessions: Vec::new(),
        totals: Totals::default(),
        by_model: BTreeMap::new(),
        by_day: BTreeMap::new(),
        compactions: Vec::new(),
        what_ifs: Vec::new(),
        read,
        trace: Vec::new(),
        join: None,
    };
    let mut what_if_costs = vec![(Cost::default(), 0u64, 0u64); options.what_ifs.len()];
    let mut baseline_cost = Cost::default();
    for session in sessions {
        if options.emit_trace {
            report.trace.push(session_marker_line(&session));
        }
        let trace = options.emit_trace.then_some(&mut report.trace);
        let predictions = predict::predict_session(&session, &account, None, prices, trace)?;
        let baseline_breaks = predicted_breaks(&session, &predictions);
        for (what_if, sums) in options.what_ifs.iter().zip(&mut what_if_costs) {
            let changed = predict::predict_session(&session, &account, Some(what_if), prices, None)?;
            sums.0.add(&predicted_cost(&session, &changed, prices));
            let changed_breaks = predicted_breaks(&session, &changed);
            sums.1 += baseline_breaks.difference(&changed_breaks).count() as u64;
            sums.2 += changed_breaks.difference(&baseline_breaks).count() as u64;
        }
        baseline_cost.add(&predicted_cost(&session, &predictions, prices));
        let rows = rows_of(&session, predictions, prices);
        report.compactions.extend(compactions_of(&session, prices));
        let mut totals = Totals::default();
        for (request, row) in session.requests.iter().zip(&rows) {
            totals.add(request, row);
            report.totals.add(request, row);
            report.by_model.entry(request.request.model.clone()).or_default().add(request, row);
            report.by_day.entry(day_of(&request.request.at).to_string()).or_default().add(request, row);
        }
        report.sessions.push(SessionReport { session, rows, totals });
    }
    report.what_ifs = options
        .what_ifs
        .iter()
        .zip(what_if_costs)
        .map(|(setting, (cost, breaks_avoided, breaks_added))| WhatIfResult {
            setting: setting.clone(),
            cost,
            baseline_cost,
            breaks_avoided,
            breaks_added,
        })
        .collect();
    Ok(report)
}

/// The marker that opens a session's part of an emitted trace: `replay` starts a new timeline
/// there and prices it on the day the session began, as the import did.
fn session_marker_line(session: &ImportedSession) -> String {
    let started = session.requests.first().map_or_else(String::new, |first| first.request.at.clone());
    let marker = crate::trace::SessionMarker {
        started,
        version: env!("CARGO_PKG_VERSION").to_string(),
        format: crate::trace::TRACE_FORMAT,
        settings: serde_json::json!({ "import": "claude-code", "session_id": session.session_id }),
    };
    crate::trace::session_line(&marker)
}

fn rows_of(session: &ImportedSession, predictions: Vec<Predicted>, prices: &PriceTable) -> Vec<RequestRow> {
    let mut cached_before: BTreeMap<&Chain, u64> = BTreeMap::new();
    session
        .requests
        .iter()
        .zip(predictions)
        .map(|(request, predicted)| {
            let usage = &request.request.recorded.usage;
            let baseline_read = cached_before
                .get(&request.request.chain)
                .copied()
                .unwrap_or(0)
                .min(usage.total_input_tokens());
            cached_before.insert(
                &request.request.chain,
                usage.cache_read_input_tokens + usage.cache_creation_input_tokens,
            );
            let break_extra = request
                .break_
                .and_then(|observed| rewrite_minus_read(prices, &request.request, observed.tokens_lost));
            RequestRow {
                recorded_cost: cost_of(prices, &request.request, &request.request.model, usage),
                predicted_cost: cost_of(prices, &request.request, &predicted.model, &predicted.usage),
                // A request the simulation could not price is counted as a disagreement.
                agreement: predicted.refused.is_none()
                    && agrees(predicted.usage.cache_read_input_tokens, usage.cache_read_input_tokens),
                baseline_agreement: agrees(baseline_read, usage.cache_read_input_tokens),
                predicted,
                break_extra,
            }
        })
        .collect()
}

fn predicted_cost(session: &ImportedSession, predictions: &[Predicted], prices: &PriceTable) -> Cost {
    let mut total = Cost::default();
    for (request, predicted) in session.requests.iter().zip(predictions) {
        if let Some(cost) = cost_of(prices, &request.request, &predicted.model, &predicted.usage) {
            total.add(&cost);
        }
    }
    total
}

/// Indexes of the requests whose predicted read broke their chain's predicted cache.
fn predicted_breaks(session: &ImportedSession, predictions: &[Predicted]) -> BTreeSet<usize> {
    let mut previous: BTreeMap<&Chain, Usage> = BTreeMap::new();
    let mut found = BTreeSet::new();
    for (index, (request, predicted)) in session.requests.iter().zip(predictions).enumerate() {
        let turn = |usage: &Usage| Turn {
            model: "",
            start_ms: 0,
            read: usage.cache_read_input_tokens,
            creation: usage.cache_creation_input_tokens,
            total_input: usage.total_input_tokens(),
        };
        if let Some(before) = previous.get(&request.request.chain) {
            if breaks::observe(&turn(before), &turn(&predicted.usage), Ttl::OneHour, &[]).is_some() {
                found.insert(index);
            }
        }
        previous.insert(&request.request.chain, predicted.usage);
    }
    found
}

fn compactions_of(session: &ImportedSession, prices: &PriceTable) -> Vec<CompactionEstimate> {
    let mut found = Vec::new();
    for request in &session.requests {
        for event in &request.request.events {
            if let Event::Compacted { pre_tokens } = event {
                let read_all = Usage::new(0, *pre_tokens, 0, 0, 0);
                found.push(CompactionEstimate {
                    session_id: session.session_id.clone(),
                    chain: request.request.chain.clone(),
                    next_request_id: request.request.request_id.clone(),
                    pre_tokens: *pre_tokens,
                    cost: cost_of(prices, &request.request, &request.request.model, &read_all),
                });
            }
        }
    }
    found
}

fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 { 0.0 } else { (part as f64 / whole as f64 * 1e6).round() / 1e6 }
}

impl ImportReport {
    /// (break request id, the chain's previous request id) for every observed break.
    pub fn break_pairs(&self) -> Vec<(String, String)> {
        let mut pairs = Vec::new();
        for session in &self.sessions {
            let mut previous: BTreeMap<&Chain, &str> = BTreeMap::new();
            for request in &session.session.requests {
                let r = &request.request;
                if let (Some(_), Some(before)) = (request.break_, previous.get(&r.chain)) {
                    pairs.push((r.request_id.clone(), (*before).to_string()));
                }
                previous.insert(&r.chain, &r.request_id);
            }
        }
        pairs
    }

    /// The `--json` document.
    #[allow(clippy::expect_used)] // writing to a Vec cannot fail, and serde_json writes UTF-8
    pub fn to_json(&self) -> String {
        let mut out = Vec::new();
        self.write_json(&mut out).expect("writing to memory cannot fail");
        String::from_utf8(out).expect("JSON is UTF-8")
    }

    /// Writes the `--json` document, streamed: nothing of it is built in memory first.
    pub fn write_json(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        json::write(self, out)
    }

    /// The table: per session its totals, then every break.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        for report in &self.sessions {
            session_table(&mut out, report);
        }
        let t = &self.totals;
        let _ = writeln!(
            out,
            "all sessions: {} requests, real ${:.4}, predicted ${:.4}",
            t.requests,
            t.recorded_cost.usd(),
            t.predicted_cost.usd()
        );
        let _ = writeln!(
            out,
            "  agreement {:.1}% (baseline {:.1}%); on breaks {:.1}% (baseline {:.1}%); on chain starts {:.1}% (baseline {:.1}%)",
            percent(t.agreement.predicted, t.agreement.requests),
            percent(t.agreement.baseline, t.agreement.requests),
            percent(t.on_breaks.predicted, t.on_breaks.requests),
            percent(t.on_breaks.baseline, t.on_breaks.requests),
            percent(t.on_chain_starts.predicted, t.on_chain_starts.requests),
            percent(t.on_chain_starts.baseline, t.on_chain_starts.requests),
        );
        if !t.unpriced_models.is_empty() {
            let names: Vec<&str> = t.unpriced_models.iter().map(String::as_str).collect();
            let _ =
                writeln!(out, "  warning: no price for {} (tokens counted, cost left out)", names.join(", "));
        }
        if t.predictions_refused > 0 {
            let _ = writeln!(
                out,
                "  warning: {} requests not predicted (the simulated prompt was refused; see predicted.refused in --json)",
                t.predictions_refused
            );
        }
        if t.writes_assumed_5m > 0 {
            let _ = writeln!(
                out,
                "  note: {} requests wrote without a 5m/1h split (priced as 5-minute writes)",
                t.writes_assumed_5m
            );
        }
        for c in &self.compactions {
            let cost = c.cost.map_or("unpriced".to_string(), |c| format!("~${:.4}", c.usd()));
            let _ = writeln!(
                out,
                "  compaction before {} ({}): summarising call read ~{} tokens, {cost} (estimate)",
                c.next_request_id,
                c.chain.name(),
                c.pre_tokens
            );
        }
        for w in &self.what_ifs {
            let delta = w.cost.total_nanousd() as i128 - w.baseline_cost.total_nanousd() as i128;
            let _ = writeln!(
                out,
                "  what if {}: {:+.4} $ (writes ${:.4}, reads ${:.4}), breaks avoided {}, added {}",
                w.setting.name(),
                delta as f64 / 1e9,
                (w.cost.write_5m_nanousd + w.cost.write_1h_nanousd) as f64 / 1e9,
                w.cost.read_nanousd as f64 / 1e9,
                w.breaks_avoided,
                w.breaks_added
            );
        }
        unknown_table_line(&mut out, "unknown line kinds", &self.read.unknown_line_kinds);
        unknown_table_line(&mut out, "unknown fields", &self.read.unknown_fields);
        if self.read.skipped_lines > 0 {
            let _ = writeln!(out, "  {} unreadable lines skipped:", self.read.skipped_lines);
            for line in listed_notes(&self.read.notes) {
                let _ = writeln!(out, "    {line}");
            }
        }
        out
    }

    /// `requests.csv` and `breaks.csv`: a row per request and per break.
    pub fn to_csv(&self) -> Result<(Vec<u8>, Vec<u8>), csv::Error> {
        let mut requests = csv::Writer::from_writer(Vec::new());
        requests.write_record([
            "session_id",
            "chain",
            "index",
            "request_id",
            "at",
            "model",
            "input_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
            "output_tokens",
            "cost_nanousd",
            "predicted_read",
            "predicted_creation",
            "predicted_cost_nanousd",
            "agreement",
            "baseline_agreement",
            "break",
        ])?;
        let mut breaks = csv::Writer::from_writer(Vec::new());
        breaks.write_record([
            "session_id",
            "chain",
            "request_id",
            "at",
            "cause",
            "gap_ms",
            "tokens_lost",
            "extra_cost_nanousd",
        ])?;
        for report in &self.sessions {
            for (index, (request, row)) in report.session.requests.iter().zip(&report.rows).enumerate() {
                let r = &request.request;
                let u = &r.recorded.usage;
                let nanos = |c: &Option<Cost>| c.map_or(String::new(), |c| c.total_nanousd().to_string());
                let cause = request.break_.map_or("", |b| b.cause.name());
                requests.write_record([
                    &r.session_id,
                    &r.chain.name(),
                    &index.to_string(),
                    &r.request_id,
                    &r.at,
                    &r.model,
                    &u.input_tokens.to_string(),
                    &u.cache_read_input_tokens.to_string(),
                    &u.cache_creation_input_tokens.to_string(),
                    &u.output_tokens.to_string(),
                    &nanos(&row.recorded_cost),
                    &row.predicted.usage.cache_read_input_tokens.to_string(),
                    &row.predicted.usage.cache_creation_input_tokens.to_string(),
                    &nanos(&row.predicted_cost),
                    &row.agreement.to_string(),
                    &row.baseline_agreement.to_string(),
                    cause,
                ])?;
                if let Some(b) = request.break_ {
                    breaks.write_record([
                        &r.session_id,
                        &r.chain.name(),
                        &r.request_id,
                        &r.at,
                        cause,
                        &b.gap_ms.to_string(),
                        &b.tokens_lost.to_string(),
                        &nanos(&row.break_extra),
                    ])?;
                }
            }
        }
        let finish = |w: csv::Writer<Vec<u8>>| w.into_inner().map_err(|e| csv::Error::from(e.into_error()));
        Ok((finish(requests)?, finish(breaks)?))
    }
}

fn session_table(out: &mut String, report: &SessionReport) {
    let t = &report.totals;
    let u = &t.recorded_usage;
    let _ = writeln!(out, "session {} ({} chains)", report.session.session_id, report.session.chains.len());
    let _ = writeln!(
        out,
        "  requests {:>6}   read {:>11}   written {:>10}   uncached {:>9}   output {:>9}",
        t.requests, u.cache_read_input_tokens, u.cache_creation_input_tokens, u.input_tokens, u.output_tokens
    );
    let _ = writeln!(
        out,
        "  real ${:.4}   predicted ${:.4}   breaks {} (${:.4} extra)   agreement {:.1}% (baseline {:.1}%)",
        t.recorded_cost.usd(),
        t.predicted_cost.usd(),
        t.breaks.values().sum::<u64>(),
        t.breaks_extra_cost.usd(),
        percent(t.agreement.predicted, t.agreement.requests),
        percent(t.agreement.baseline, t.agreement.requests),
    );
    let breaks: Vec<_> = report
        .session
        .requests
        .iter()
        .zip(&report.rows)
        .filter_map(|(r, row)| Some((r, row, r.break_?)))
        .collect();
    if breaks.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "  {:<24} {:<22} {:>9} {:<24} {:>11} {:>10}",
        "time", "chain", "gap", "cause", "tokens lost", "extra $"
    );
    for (request, row, b) in breaks {
        let extra = row.break_extra.map_or("unpriced".to_string(), |c| format!("{:.4}", c.usd()));
        let _ = writeln!(
            out,
            "  {:<24} {:<22} {:>8}s {:<24} {:>11} {:>10}",
            request.request.at,
            request.request.chain.name(),
            b.gap_ms / 1000,
            b.cause.name(),
            b.tokens_lost,
            extra
        );
    }
}

/// `  unknown fields (counted, not read): message.foo ×3, bar ×1`, when there are any.
fn unknown_table_line(out: &mut String, what: &str, counts: &BTreeMap<String, u64>) {
    if counts.is_empty() {
        return;
    }
    let listed: Vec<String> = counts.iter().map(|(name, n)| format!("{name} ×{n}")).collect();
    let _ = writeln!(out, "  {what} (counted, not read): {}", listed.join(", "));
}

fn percent(part: u64, whole: u64) -> f64 {
    ratio(part, whole) * 100.0
}

/// Notes listed at most, the rest summarised: a file that is not a transcript at all would
/// otherwise print one note per line.
pub const NOTES_LISTED: usize = 20;

/// The first [`NOTES_LISTED`] notes, then a line counting the rest.
pub fn listed_notes<T: std::fmt::Display>(notes: &[T]) -> Vec<String> {
    let mut lines: Vec<String> = notes.iter().take(NOTES_LISTED).map(T::to_string).collect();
    if notes.len() > NOTES_LISTED {
        lines.push(format!("… and {} more", notes.len() - NOTES_LISTED));
    }
    lines
}
