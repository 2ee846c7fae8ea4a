//! The `--json` document, serialized straight from the report through borrowed views: nothing
//! is built per request but the recorded usage's text, and a canonical one (see
//! [`CompactJson`]) goes into the document as its recorded bytes. Field order is the document's
//! key order; a test pins the bytes (`tests/golden/import_claude_code/`).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde::ser::{Error as _, SerializeMap as _, SerializeSeq as _, Serializer};
use serde_json::value::RawValue;

use forkcache_engine::billing::{Cost, Usage};
use forkcache_engine::cache::Miss;
use forkcache_engine::verify::Divergence;

use super::super::breaks::BreakCause;
use super::{Agreement, ImportReport, RequestRow, SessionReport, Totals, WhatIfResult, ratio};
use crate::compact::CompactJson;
use crate::{ChainInfo, SessionRequest};

/// Breaks located in a proxy's bytes, by request id.
type Divergences = BTreeMap<String, Divergence>;

/// Writes the document; memory holds nothing of it beyond one usage text at a time.
pub(super) fn write(report: &ImportReport, out: &mut impl std::io::Write) -> std::io::Result<()> {
    serde_json::to_writer(out, &Document::of(report)).map_err(std::io::Error::from)
}

#[derive(Serialize)]
struct Document<'a> {
    sessions: Sessions<'a>,
    totals: ImportTotals<'a>,
    by_model: By<'a>,
    by_day: By<'a>,
    compactions: Vec<CompactionDoc<'a>>,
    what_if: Vec<WhatIfDoc>,
}

impl<'a> Document<'a> {
    fn of(report: &'a ImportReport) -> Document<'a> {
        let divergences = report.join.as_ref().map(|j| &j.divergences);
        Document {
            sessions: Sessions { sessions: &report.sessions, divergences },
            totals: ImportTotals::of(report),
            by_model: By(&report.by_model),
            by_day: By(&report.by_day),
            compactions: report.compactions.iter().map(CompactionDoc::of).collect(),
            what_if: report.what_ifs.iter().map(WhatIfDoc::of).collect(),
        }
    }
}

struct Sessions<'a> {
    sessions: &'a [SessionReport],
    divergences: Option<&'a Divergences>,
}

impl Serialize for Sessions<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.sessions.iter().map(|report| SessionDoc::of(report, self.divergences)))
    }
}

#[derive(Serialize)]
struct SessionDoc<'a> {
    session_id: &'a str,
    chains: Vec<ChainDoc<'a>>,
    totals: TotalsFields<'a>,
}

impl<'a> SessionDoc<'a> {
    fn of(report: &'a SessionReport, divergences: Option<&'a Divergences>) -> SessionDoc<'a> {
        let session = &report.session;
        let first_ms = session.requests.first().map_or(0, |r| r.start_ms);
        let mut chains: Vec<ChainDoc> =
            session.chains.iter().map(|info| ChainDoc::of(info, report, first_ms, divergences)).collect();
        let position: BTreeMap<_, usize> =
            session.chains.iter().enumerate().map(|(i, c)| (&c.chain, i)).collect();
        for (index, request) in session.requests.iter().enumerate() {
            if let Some(chain) = position.get(&request.request.chain).and_then(|&i| chains.get_mut(i)) {
                chain.requests.indexes.push(index);
            }
        }
        SessionDoc { session_id: &session.session_id, chains, totals: TotalsFields::of(&report.totals) }
    }
}

#[derive(Serialize)]
struct ChainDoc<'a> {
    chain: String,
    parent: Option<ParentDoc<'a>>,
    requests: ChainRequests<'a>,
}

impl<'a> ChainDoc<'a> {
    fn of(
        info: &'a ChainInfo,
        report: &'a SessionReport,
        first_ms: i64,
        divergences: Option<&'a Divergences>,
    ) -> ChainDoc<'a> {
        let parent =
            info.parent.as_ref().map(|p| ParentDoc { chain: p.chain.name(), request_id: &p.request_id });
        let requests = ChainRequests { report, first_ms, divergences, indexes: Vec::new() };
        ChainDoc { chain: info.chain.name(), parent, requests }
    }
}

#[derive(Serialize)]
struct ParentDoc<'a> {
    chain: String,
    request_id: &'a str,
}

/// A chain's requests: indexes into the session's requests, in session order.
struct ChainRequests<'a> {
    report: &'a SessionReport,
    first_ms: i64,
    divergences: Option<&'a Divergences>,
    indexes: Vec<usize>,
}

impl Serialize for ChainRequests<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.indexes.len()))?;
        let (requests, rows) = (&self.report.session.requests, &self.report.rows);
        for &index in &self.indexes {
            let (Some(request), Some(row)) = (requests.get(index), rows.get(index)) else {
                return Err(S::Error::custom(format!("request {index} has no row")));
            };
            seq.serialize_element(&RequestDoc::of(index, request, row, self.first_ms, self.divergences))?;
        }
        seq.end()
    }
}

#[derive(Serialize)]
struct RequestDoc<'a> {
    /// 0-based position in the session (not in the chain).
    index: usize,
    request_id: &'a str,
    at: &'a str,
    at_ms: i64,
    model: &'a str,
    recorded: RecordedDoc<'a>,
    predicted: PredictedDoc<'a>,
    agreement: bool,
    baseline_agreement: bool,
    #[serde(rename = "break")]
    break_: Option<BreakDoc<'a>>,
}

impl<'a> RequestDoc<'a> {
    fn of(
        index: usize,
        request: &'a SessionRequest,
        row: &'a RequestRow,
        first_ms: i64,
        divergences: Option<&'a Divergences>,
    ) -> RequestDoc<'a> {
        let r = &request.request;
        let break_ = request.break_.map(|b| BreakDoc {
            cause: b.cause.name(),
            gap_ms: b.gap_ms,
            tokens_lost: b.tokens_lost,
            extra_cost_usd: usd(&row.break_extra),
            divergence: divergences.and_then(|d| d.get(&r.request_id)),
        });
        let writes_assumed_5m = !r.recorded.split_known && r.recorded.usage.cache_creation_input_tokens > 0;
        RequestDoc {
            index,
            request_id: &r.request_id,
            at: &r.at,
            at_ms: request.start_ms - first_ms,
            model: &r.model,
            recorded: RecordedDoc {
                usage: RecordedUsageDoc { raw: r.recorded.raw.as_ref(), usage: &r.recorded.usage },
                cost_usd: usd(&row.recorded_cost),
                writes_priced_as: writes_assumed_5m.then_some("5m"),
            },
            predicted: PredictedDoc::of(row),
            agreement: row.agreement,
            baseline_agreement: row.baseline_agreement,
            break_,
        }
    }
}

#[derive(Serialize)]
struct RecordedDoc<'a> {
    usage: RecordedUsageDoc<'a>,
    cost_usd: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    writes_priced_as: Option<&'static str>,
}

/// The usage object as recorded (or, when the reader did not keep it, the counts read from it).
struct RecordedUsageDoc<'a> {
    raw: Option<&'a CompactJson>,
    usage: &'a Usage,
}

impl Serialize for RecordedUsageDoc<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Some(raw) = self.raw else {
            return self.usage.serialize(serializer);
        };
        let text = raw.text();
        if raw.is_canonical() {
            // The recorded bytes are what writing the parsed value would give: copy them.
            let raw: &RawValue = serde_json::from_str(&text).map_err(S::Error::custom)?;
            return raw.serialize(serializer);
        }
        // Spelled otherwise (spaces, a repeated key, another number form): written as parsed.
        // It was read as JSON once, so null here means only that it could not be read again.
        serde_json::from_str::<serde_json::Value>(&text).unwrap_or_default().serialize(serializer)
    }
}

/// A request's `predicted` object; a refused prediction says why instead of a usage.
#[derive(Serialize)]
struct PredictedDoc<'a> {
    usage: Option<&'a Usage>,
    cost_usd: Option<f64>,
    miss: Option<&'a Miss>,
    #[serde(skip_serializing_if = "Option::is_none")]
    refused: Option<&'a str>,
    /// `cold`, `seen` or `unseen_activity` (`warmth`).
    warmth: &'static str,
}

impl<'a> PredictedDoc<'a> {
    fn of(row: &'a RequestRow) -> PredictedDoc<'a> {
        match &row.predicted.refused {
            Some(why) => PredictedDoc {
                usage: None,
                cost_usd: None,
                miss: None,
                refused: Some(why),
                warmth: row.predicted.warmth.name(),
            },
            None => PredictedDoc {
                usage: Some(&row.predicted.usage),
                cost_usd: usd(&row.predicted_cost),
                miss: row.predicted.miss.as_ref(),
                refused: None,
                warmth: row.predicted.warmth.name(),
            },
        }
    }
}

#[derive(Serialize)]
struct BreakDoc<'a> {
    cause: &'static str,
    gap_ms: u64,
    tokens_lost: u64,
    extra_cost_usd: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    divergence: Option<&'a Divergence>,
}

/// The totals object of a session (and, with the reading counts, of the import).
#[derive(Serialize)]
struct TotalsFields<'a> {
    requests: u64,
    recorded: UsageCost<'a>,
    predicted: UsageCost<'a>,
    agreement: f64,
    baseline_agreement: f64,
    on_breaks: AgreementDoc,
    on_chain_starts: AgreementDoc,
    breaks: BreakCounts<'a>,
    tokens_lost: u64,
    breaks_extra_cost_usd: f64,
    unpriced_models: &'a BTreeSet<String>,
    writes_priced_as_5m: u64,
    predictions_refused: u64,
}

impl<'a> TotalsFields<'a> {
    fn of(t: &'a Totals) -> TotalsFields<'a> {
        TotalsFields {
            requests: t.requests,
            recorded: UsageCost { usage: &t.recorded_usage, cost_usd: t.recorded_cost.usd() },
            predicted: UsageCost { usage: &t.predicted_usage, cost_usd: t.predicted_cost.usd() },
            agreement: ratio(t.agreement.predicted, t.agreement.requests),
            baseline_agreement: ratio(t.agreement.baseline, t.agreement.requests),
            on_breaks: AgreementDoc::of(&t.on_breaks),
            on_chain_starts: AgreementDoc::of(&t.on_chain_starts),
            breaks: BreakCounts(&t.breaks),
            tokens_lost: t.tokens_lost,
            breaks_extra_cost_usd: t.breaks_extra_cost.usd(),
            unpriced_models: &t.unpriced_models,
            writes_priced_as_5m: t.writes_assumed_5m,
            predictions_refused: t.predictions_refused,
        }
    }
}

#[derive(Serialize)]
struct UsageCost<'a> {
    usage: &'a Usage,
    cost_usd: f64,
}

#[derive(Serialize)]
struct AgreementDoc {
    requests: u64,
    agreement: f64,
    baseline_agreement: f64,
}

impl AgreementDoc {
    fn of(a: &Agreement) -> AgreementDoc {
        AgreementDoc {
            requests: a.requests,
            agreement: ratio(a.predicted, a.requests),
            baseline_agreement: ratio(a.baseline, a.requests),
        }
    }
}

/// Breaks by cause name, in the causes' order.
struct BreakCounts<'a>(&'a BTreeMap<BreakCause, u64>);

impl Serialize for BreakCounts<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(cause, n)| (cause.name(), n)))
    }
}

/// The import's totals: a session's fields, then what reading counted.
#[derive(Serialize)]
struct ImportTotals<'a> {
    #[serde(flatten)]
    totals: TotalsFields<'a>,
    skipped_lines: u64,
    unknown_line_kinds: &'a BTreeMap<String, u64>,
    unknown_usage_fields: &'a BTreeMap<String, u64>,
    unknown_fields: &'a BTreeMap<String, u64>,
    notes: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    trace_join: Option<TraceJoinDoc>,
}

impl<'a> ImportTotals<'a> {
    fn of(report: &'a ImportReport) -> ImportTotals<'a> {
        let read = &report.read;
        ImportTotals {
            totals: TotalsFields::of(&report.totals),
            skipped_lines: read.skipped_lines,
            unknown_line_kinds: &read.unknown_line_kinds,
            unknown_usage_fields: &read.unknown_usage_fields,
            unknown_fields: &read.unknown_fields,
            notes: &read.notes,
            trace_join: report.join.as_ref().map(|join| TraceJoinDoc {
                breaks_located: join.divergences.len(),
                breaks_unmatched: join.unmatched_breaks,
                skipped_lines: join.skipped_lines,
            }),
        }
    }
}

#[derive(Serialize)]
struct TraceJoinDoc {
    breaks_located: usize,
    breaks_unmatched: u64,
    skipped_lines: u64,
}

/// Real usage and cost per model or per day; the cost is null when a model in it is unpriced.
struct By<'a>(&'a BTreeMap<String, Totals>);

impl Serialize for By<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, t) in self.0 {
            let cost_usd = t.unpriced_models.is_empty().then(|| t.recorded_cost.usd());
            map.serialize_entry(key, &ByDoc { requests: t.requests, usage: &t.recorded_usage, cost_usd })?;
        }
        map.end()
    }
}

#[derive(Serialize)]
struct ByDoc<'a> {
    requests: u64,
    usage: &'a Usage,
    cost_usd: Option<f64>,
}

#[derive(Serialize)]
struct CompactionDoc<'a> {
    session_id: &'a str,
    chain: String,
    next_request_id: &'a str,
    pre_tokens: u64,
    estimated_cost_usd: Option<f64>,
    estimate: bool,
}

impl<'a> CompactionDoc<'a> {
    fn of(c: &'a super::CompactionEstimate) -> CompactionDoc<'a> {
        CompactionDoc {
            session_id: &c.session_id,
            chain: c.chain.name(),
            next_request_id: &c.next_request_id,
            pre_tokens: c.pre_tokens,
            estimated_cost_usd: usd(&c.cost),
            estimate: true,
        }
    }
}

#[derive(Serialize)]
struct WhatIfDoc {
    setting: String,
    delta_usd: f64,
    writes_usd: f64,
    reads_usd: f64,
    breaks_avoided: u64,
    breaks_added: u64,
}

impl WhatIfDoc {
    fn of(w: &WhatIfResult) -> WhatIfDoc {
        let delta = w.cost.total_nanousd() as i128 - w.baseline_cost.total_nanousd() as i128;
        WhatIfDoc {
            setting: w.setting.name(),
            delta_usd: delta as f64 / 1e9,
            writes_usd: (w.cost.write_5m_nanousd + w.cost.write_1h_nanousd) as f64 / 1e9,
            reads_usd: w.cost.read_nanousd as f64 / 1e9,
            breaks_avoided: w.breaks_avoided,
            breaks_added: w.breaks_added,
        }
    }
}

fn usd(cost: &Option<Cost>) -> Option<f64> {
    cost.map(|c| c.usd())
}
