//! The live comparison: each exchange's recorded usage beside the endpoint's prediction (one line
//! per exchange), and the totals per workspace behind `GET /forkcache/stats`.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use forkcache_engine::agreement::{Agreement, agreement};
use forkcache_engine::billing::{Cost, Usage};
use forkcache_engine::cache::describe_miss;
use forkcache_engine::endpoint::Record;
use forkcache_engine::prompt::RenderCounts;
use forkcache_engine::verify::Divergence;
use forkcache_ingest::replay::{Totals, TotalsJson};
use forkcache_ingest::trace::LoggedError;

/// One exchange, recorded beside predicted.
#[derive(Clone, Debug)]
pub struct Comparison {
    /// The workspace (API id or key fingerprint).
    pub workspace: String,
    /// The usage the upstream billed, when it returned one.
    pub recorded: Option<Usage>,
    /// Its cost at the endpoint's prices.
    pub recorded_cost: Option<Cost>,
    /// The endpoint's prediction, when the request was priced.
    pub predicted: Option<Record>,
    /// Cached shares compared, when both exist.
    pub agreement: Option<Agreement>,
    /// The upstream's (or the proxy's) error.
    pub error: Option<LoggedError>,
    /// The response ended early.
    pub incomplete: bool,
    /// Not predicted: the prediction queue was full (see [`super::PREDICTION_QUEUE_BYTES`]).
    pub skipped: bool,
    /// For a disagreement: where this request first leaves the recent one it shares the longest
    /// prefix with, and that request's id.
    pub divergence: Option<(Option<String>, Divergence)>,
}

impl Comparison {
    /// Compares `recorded` (priced at `recorded_cost`) with `predicted`.
    pub fn new(
        workspace: String,
        recorded: Option<(Usage, Option<Cost>)>,
        predicted: Option<Record>,
        error: Option<LoggedError>,
        incomplete: bool,
    ) -> Comparison {
        let agreement = match (&recorded, &predicted) {
            (Some((recorded, _)), Some(predicted)) => Some(agreement(&predicted.usage, recorded)),
            _ => None,
        };
        Comparison {
            workspace,
            recorded: recorded.map(|(usage, _)| usage),
            recorded_cost: recorded.and_then(|(_, cost)| cost),
            predicted,
            agreement,
            error,
            incomplete,
            skipped: false,
            divergence: None,
        }
    }

    /// `req_… at 120ms [wrkspc_…] claude-…: recorded read 17403 write 1900 uncached 4 · predicted
    /// read 17000 write 1800 uncached 4 · agrees (cached 90.1% / 90.4%)`; a disagreement adds the
    /// predicted miss.
    pub fn line(&self, at_ms: u64, request_id: Option<&str>) -> String {
        let head = format!("{} at {at_ms}ms [{}]", request_id.unwrap_or("-"), self.workspace);
        let incomplete = if self.incomplete { " (incomplete)" } else { "" };
        if let Some(error) = &self.error {
            if self.recorded.is_none() {
                return format!(
                    "{head} error {} {}: {}{incomplete}",
                    error.status, error.kind, error.message
                );
            }
        }
        let model = self.predicted.as_ref().map_or("?", |r| r.model.as_str());
        let mut line = format!("{head} {model}{incomplete}: recorded {}", counts(self.recorded.as_ref()));
        if self.skipped {
            line.push_str(" · prediction skipped (the prediction queue was full; replay the trace for it)");
            return line;
        }
        line.push_str(&format!(" · predicted {}", counts(self.predicted.as_ref().map(|r| &r.usage))));
        if let Some(agreement) = &self.agreement {
            let shares = format!(
                "cached {:.1}% recorded, {:.1}% predicted",
                agreement.recorded_share_ppm as f64 / 1e4,
                agreement.predicted_share_ppm as f64 / 1e4
            );
            if agreement.agrees {
                line.push_str(&format!(" · agrees ({shares})"));
            } else {
                let miss = describe_miss(self.predicted.as_ref().and_then(|r| r.miss.as_ref()));
                line.push_str(&format!(" · differs ({shares}); predicted miss {miss}"));
                if let Some((id, divergence)) = &self.divergence {
                    line.push_str(&format!(
                        "; first divergence from {}: {} ({}, {}) at byte {}",
                        id.as_deref().unwrap_or("an earlier request"),
                        divergence.path,
                        divergence.dimension.name(),
                        divergence.cause.name(),
                        divergence.byte_offset
                    ));
                }
            }
        }
        line
    }
}

fn counts(usage: Option<&Usage>) -> String {
    match usage {
        Some(u) => format!(
            "read {} write {} uncached {}",
            u.cache_read_input_tokens, u.cache_creation_input_tokens, u.input_tokens
        ),
        None => "-".to_string(),
    }
}

/// Recorded and predicted totals of one workspace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkspaceComparison {
    /// Messages exchanges seen.
    pub exchanges: u64,
    /// Exchanges answered with an error.
    pub errors: u64,
    /// Exchanges that ended early.
    pub incomplete: u64,
    /// Recorded usage summed.
    pub recorded_usage: Usage,
    /// Recorded cost summed.
    pub recorded_cost: Cost,
    /// The endpoint's totals.
    pub predicted: Totals,
    /// Exchanges with both a recorded and a predicted usage.
    pub compared: u64,
    /// Of those, the ones that agree.
    pub agreed: u64,
    /// Exchanges not predicted because the prediction queue was full.
    pub skipped: u64,
}

/// Everything the proxy has counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProxyStats {
    /// Per workspace, by name.
    pub workspaces: BTreeMap<String, WorkspaceComparison>,
    /// Trace lines that could not be written.
    pub trace_write_errors: u64,
    /// Requests sent to the upstream a second time because the connection closed before any
    /// byte of an answer (an upstream closing a kept-alive connection as the request went out).
    pub upstream_retries: u64,
    /// Response copies not read for their usage, by why: `received past 64 MiB`, `decodes past N
    /// bytes` (the decode limit: a bomb, or a response larger than the limit), `unknown
    /// content-encoding …`. The client got each as sent.
    pub copies_unread: BTreeMap<String, u64>,
    /// Exchanges written to the trace whose prediction has not run yet: how far the prediction
    /// lags behind forwarding. An exchange's recorded side is counted in `workspaces` once
    /// written; its predicted side and recorded cost once predicted (or skipped).
    pub predictions_pending: u64,
    /// Per key fingerprint, the workspaces its exchanges were counted in (the API's workspace id
    /// when the upstream named one): what that key may see of the stats.
    pub key_workspaces: BTreeMap<String, BTreeSet<String>>,
    /// Messages responses by `content-encoding` as received (`identity` for none): whether a
    /// client and its upstream compressed, which the copy had to decode.
    pub content_encodings: BTreeMap<String, u64>,
    /// How the prediction's prompts were rendered so far: whole, or resumed from one of the last
    /// few requests (a speed device that never changes a prediction).
    pub renders: RenderCounts,
}

impl ProxyStats {
    /// Counts one exchange's recorded side, as soon as it is written: the exchange, its error,
    /// whether it ended early, the usage the upstream billed.
    pub fn add_recorded(&mut self, workspace: &str, recorded: Option<&Usage>, error: bool, incomplete: bool) {
        let totals = self.workspaces.entry(workspace.to_string()).or_default();
        totals.exchanges += 1;
        totals.errors += u64::from(error);
        totals.incomplete += u64::from(incomplete);
        if let Some(usage) = recorded {
            totals.recorded_usage.add(usage);
        }
    }

    /// Counts one exchange's prediction once it ran or was skipped, and the recorded cost (priced
    /// with the model the prediction read, else the one the response named).
    pub fn add_predicted(&mut self, comparison: &Comparison) {
        let totals = self.workspaces.entry(comparison.workspace.clone()).or_default();
        totals.skipped += u64::from(comparison.skipped);
        if let Some(cost) = &comparison.recorded_cost {
            totals.recorded_cost.add(cost);
        }
        if let Some(record) = &comparison.predicted {
            totals.predicted.add(record);
        }
        if let Some(agreement) = &comparison.agreement {
            totals.compared += 1;
            totals.agreed += u64::from(agreement.agrees);
        }
    }

    /// Notes that the key fingerprinted `key` sent an exchange counted in `workspace`.
    pub fn key_used(&mut self, key: &str, workspace: &str) {
        self.key_workspaces.entry(key.to_string()).or_default().insert(workspace.to_string());
    }

    /// Messages exchanges seen, in every workspace.
    pub fn exchanges(&self) -> u64 {
        self.workspaces.values().map(|w| w.exchanges).sum()
    }

    /// The `GET /forkcache/stats` document (one line, ordered keys).
    pub fn to_json(&self) -> String {
        let proxy_wide = ProxyWide {
            trace_write_errors: self.trace_write_errors,
            upstream_retries: self.upstream_retries,
            copies_unread: self.copies_unread.clone(),
            predictions_pending: self.predictions_pending,
            renders: self.renders,
        };
        self.json(|_| true, Some(proxy_wide))
    }

    /// The stats document as the key fingerprinted `key` sees it: its own workspaces alone, and
    /// nothing proxy-wide.
    pub fn key_json(&self, key: &str) -> String {
        let mine = self.key_workspaces.get(key);
        self.json(|workspace| mine.is_some_and(|mine| mine.contains(workspace)), None)
    }

    #[allow(clippy::expect_used)] // strings, integers and finite floats: serializing cannot fail
    /// `proxy_wide` is shown only to whoever sees every workspace.
    fn json(&self, shown: impl Fn(&str) -> bool, proxy_wide: Option<ProxyWide>) -> String {
        let workspaces: BTreeMap<&str, WorkspaceJson> = self
            .workspaces
            .iter()
            .filter(|(name, _)| shown(name))
            .map(|(name, totals)| (name.as_str(), WorkspaceJson::from(totals)))
            .collect();
        let json = StatsJson { workspaces, proxy_wide };
        serde_json::to_string(&json).expect("stats serialize")
    }
}

#[derive(Serialize)]
struct StatsJson<'s> {
    workspaces: BTreeMap<&'s str, WorkspaceJson>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    proxy_wide: Option<ProxyWide>,
}

/// What the stats say of the whole proxy rather than of a workspace.
#[derive(Serialize)]
struct ProxyWide {
    trace_write_errors: u64,
    upstream_retries: u64,
    copies_unread: BTreeMap<String, u64>,
    predictions_pending: u64,
    renders: RenderCounts,
}

#[derive(Serialize)]
struct WorkspaceJson {
    exchanges: u64,
    errors: u64,
    incomplete: u64,
    recorded: RecordedJson,
    predicted: TotalsJson,
    agreement: AgreementJson,
    predictions_skipped: u64,
}

#[derive(Serialize)]
struct RecordedJson {
    usage: Usage,
    cost_usd: f64,
    cost_nanousd: u64,
}

#[derive(Serialize)]
struct AgreementJson {
    compared: u64,
    agreed: u64,
}

impl From<&WorkspaceComparison> for WorkspaceJson {
    fn from(totals: &WorkspaceComparison) -> WorkspaceJson {
        WorkspaceJson {
            exchanges: totals.exchanges,
            errors: totals.errors,
            incomplete: totals.incomplete,
            recorded: RecordedJson {
                usage: totals.recorded_usage,
                cost_usd: totals.recorded_cost.usd(),
                cost_nanousd: totals.recorded_cost.total_nanousd(),
            },
            predicted: TotalsJson::from(&totals.predicted),
            agreement: AgreementJson { compared: totals.compared, agreed: totals.agreed },
            predictions_skipped: totals.skipped,
        }
    }
}

impl ProxyStats {
    /// The shutdown summary, for people: recorded beside predicted, per workspace.
    pub fn to_table(&self) -> String {
        let mut out = format!(
            "{:<24} {:>9} {:>6} {:>11} {:>11} {:>11} {:>11} {:>12} {:>12} {:>9}\n",
            "workspace",
            "exchanges",
            "errors",
            "read",
            "read_pred",
            "written",
            "writ_pred",
            "cost_usd",
            "cost_pred",
            "agreement"
        );
        for (name, t) in &self.workspaces {
            let agreement =
                if t.compared == 0 { "-".to_string() } else { format!("{}/{}", t.agreed, t.compared) };
            out.push_str(&format!(
                "{:<24} {:>9} {:>6} {:>11} {:>11} {:>11} {:>11} {:>12.6} {:>12.6} {:>9}\n",
                name,
                t.exchanges,
                t.errors,
                t.recorded_usage.cache_read_input_tokens,
                t.predicted.usage.cache_read_input_tokens,
                t.recorded_usage.cache_creation_input_tokens,
                t.predicted.usage.cache_creation_input_tokens,
                t.recorded_cost.usd(),
                t.predicted.cost.usd(),
                agreement
            ));
        }
        if !self.content_encodings.is_empty() {
            let counts: Vec<String> =
                self.content_encodings.iter().map(|(name, n)| format!("{name} {n}")).collect();
            out.push_str(&format!("responses by content-encoding: {}\n", counts.join(", ")));
        }
        let skipped: u64 = self.workspaces.values().map(|w| w.skipped).sum();
        if skipped > 0 {
            out.push_str(&format!(
                "warning: {skipped} exchanges were not predicted (the prediction queue was full); replay the trace for them\n"
            ));
        }
        if self.trace_write_errors > 0 {
            out.push_str(&format!("warning: {} trace lines could not be written\n", self.trace_write_errors));
        }
        out
    }
}
