//! What the server has priced so far: totals per workspace (JSON for `GET /forkcache/stats`, a
//! table for the shutdown summary) and the one-line log of each request.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::Serialize;

use forkcache_engine::billing::Cost;
use forkcache_engine::cache::StoreStats;
use forkcache_engine::cache::describe_miss;
use forkcache_engine::endpoint::Record;
use forkcache_engine::prompt::RenderCounts;
use forkcache_ingest::replay::{Totals, TotalsJson};
use forkcache_wire::{ApiError, OpenAiUsage};

/// Sums over one workspace's Messages requests (the same sums `replay` reports).
pub type WorkspaceTotals = Totals;

/// Adds `other` into `into` (for the all-workspaces row).
fn merge(into: &mut WorkspaceTotals, other: &WorkspaceTotals) {
    into.requests += other.requests;
    into.rejected += other.rejected;
    into.usage.add(&other.usage);
    into.cost.add(&other.cost);
    into.token_equivalents.0 += other.token_equivalents.0;
    for (cause, count) in &other.misses {
        *into.misses.entry(*cause).or_insert(0) += count;
    }
    into.tokens_missed += other.tokens_missed;
    into.unpriced_models.extend(other.unpriced_models.iter().cloned());
    into.context_warnings += other.context_warnings;
}

/// Everything the server has counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServeStats {
    /// Per workspace, by name.
    pub workspaces: BTreeMap<String, WorkspaceTotals>,
    /// `count_tokens` requests answered.
    pub count_tokens_requests: u64,
    /// Trace lines that could not be written.
    pub trace_write_errors: u64,
    /// Requests per undocumented top-level field (at most `UNKNOWN_FIELD_NAMES` names; the
    /// rest are counted under `"…"`).
    pub unknown_fields: BTreeMap<String, u64>,
    /// The rows of workspaces dropped once idle, added up: `totals` stays the sum of every
    /// request while the per-workspace rows follow the workspaces in use.
    pub idle_dropped: WorkspaceTotals,
    /// Workspace rows folded into `idle_dropped` (a workspace that returns and goes idle again
    /// counts again).
    pub idle_dropped_rows: u64,
    /// The OpenAI routes' requests in OpenAI's usage fields (counted in the workspace rows
    /// too, in the Messages API's).
    pub openai: OpenAiTotals,
    /// Per workspace row: its last request's arrival, in milliseconds.
    last_seen: BTreeMap<String, u64>,
    /// `(last request, workspace)`, oldest first.
    by_last_seen: BTreeSet<(u64, String)>,
}

/// Sums over the requests answered on `/v1/responses` and `/v1/chat/completions`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpenAiTotals {
    /// Requests priced.
    pub requests: u64,
    /// Requests answered with an error.
    pub rejected: u64,
    /// The usage the responses carried, summed.
    pub usage: OpenAiUsage,
    /// What they cost at OpenAI's prices.
    pub cost: Cost,
}

impl OpenAiTotals {
    /// Counts a priced request's usage, as its response reported it, and its cost.
    pub fn priced(&mut self, usage: &OpenAiUsage, cost: &Cost) {
        self.requests += 1;
        let sum = &mut self.usage;
        sum.input_tokens += usage.input_tokens;
        sum.cached_tokens += usage.cached_tokens;
        // Summed whenever reported: a sum over models of both generations counts the writes of
        // those that report them.
        if let Some(written) = usage.cache_write_tokens {
            *sum.cache_write_tokens.get_or_insert(0) += written;
        }
        sum.output_tokens += usage.output_tokens;
        sum.reasoning_tokens += usage.reasoning_tokens;
        self.cost.add(cost);
    }
}

#[derive(Serialize)]
struct OpenAiTotalsJson {
    requests: u64,
    rejected: u64,
    input_tokens: u64,
    cached_tokens: u64,
    cache_write_tokens: u64,
    output_tokens: u64,
    reasoning_tokens: u64,
    total_tokens: u64,
    cost_usd: f64,
    cost_nanousd: u64,
}

impl From<&OpenAiTotals> for OpenAiTotalsJson {
    fn from(totals: &OpenAiTotals) -> OpenAiTotalsJson {
        let usage = &totals.usage;
        OpenAiTotalsJson {
            requests: totals.requests,
            rejected: totals.rejected,
            input_tokens: usage.input_tokens,
            cached_tokens: usage.cached_tokens,
            cache_write_tokens: usage.cache_write_tokens.unwrap_or(0),
            output_tokens: usage.output_tokens,
            reasoning_tokens: usage.reasoning_tokens,
            total_tokens: usage.total_tokens(),
            cost_usd: totals.cost.usd(),
            cost_nanousd: totals.cost.total_nanousd(),
        }
    }
}

/// How long a row whose workspace has no cache state (it only ever had requests rejected) is
/// kept after its last request, in milliseconds: the shortest TTL, as for a workspace that
/// cached nothing.
pub const QUIET_ROW_MS: u64 = 5 * 60 * 1000;

/// Distinct unknown field names the stats keep, so random names cannot grow them without end.
pub const UNKNOWN_FIELD_NAMES: usize = 256;

impl ServeStats {
    /// Counts a priced request.
    pub fn priced(&mut self, record: &Record) {
        self.workspaces.entry(record.workspace.clone()).or_default().add(record);
        self.seen(&record.workspace, record.at.ms());
    }

    /// Folds idle rows into [`ServeStats::idle_dropped`] at a request's arrival (`now_ms`): the
    /// rows of the workspaces the endpoint just `dropped`, and those of workspaces it does not
    /// hold (`holds` false: only rejected requests) whose last request is `QUIET_ROW_MS` (5
    /// minutes) old — never the row of `current`, the workspace of the request arriving.
    pub fn fold_idle(
        &mut self,
        now_ms: u64,
        current: &str,
        dropped: &[String],
        holds: impl Fn(&str) -> bool,
    ) {
        for name in dropped {
            self.fold(name);
        }
        while let Some((last, name)) = self.by_last_seen.first().cloned() {
            if last.saturating_add(QUIET_ROW_MS) > now_ms {
                break;
            }
            self.by_last_seen.pop_first();
            // A row the endpoint holds is folded when the endpoint drops its workspace; the
            // current row is stamped again as its request is counted.
            if name != current && !holds(&name) {
                self.fold(&name);
            }
        }
    }

    /// Moves `workspace`'s row into `idle_dropped`.
    fn fold(&mut self, workspace: &str) {
        if let Some(row) = self.workspaces.remove(workspace) {
            merge(&mut self.idle_dropped, &row);
            self.idle_dropped_rows += 1;
        }
        if let Some(last) = self.last_seen.remove(workspace) {
            self.by_last_seen.remove(&(last, workspace.to_string()));
        }
    }

    /// Stamps `workspace`'s row with a request arriving at `at_ms`.
    fn seen(&mut self, workspace: &str, at_ms: u64) {
        match self.last_seen.get_mut(workspace) {
            Some(last) if *last == at_ms => return,
            Some(last) => {
                self.by_last_seen.remove(&(*last, workspace.to_string()));
                *last = at_ms;
            }
            None => {
                self.last_seen.insert(workspace.to_string(), at_ms);
            }
        }
        self.by_last_seen.insert((at_ms, workspace.to_string()));
    }

    /// Counts a request's undocumented top-level fields.
    pub fn unknown_fields(&mut self, names: &[String]) {
        for name in names {
            let kept =
                self.unknown_fields.contains_key(name) || self.unknown_fields.len() < UNKNOWN_FIELD_NAMES;
            let name = if kept { name.as_str() } else { "…" };
            *self.unknown_fields.entry(name.to_string()).or_insert(0) += 1;
        }
    }

    /// Counts a request rejected at `at_ms`.
    pub fn rejected(&mut self, workspace: &str, at_ms: u64) {
        self.workspaces.entry(workspace.to_string()).or_default().rejected += 1;
        self.seen(workspace, at_ms);
    }

    /// All workspaces added up, the dropped ones included.
    pub fn totals(&self) -> WorkspaceTotals {
        let mut totals = self.idle_dropped.clone();
        for workspace in self.workspaces.values() {
            merge(&mut totals, workspace);
        }
        totals
    }

    /// Messages requests answered, priced or not.
    pub fn messages_requests(&self) -> u64 {
        let dropped = self.idle_dropped.requests + self.idle_dropped.rejected;
        dropped + self.workspaces.values().map(|w| w.requests + w.rejected).sum::<u64>()
    }

    /// The `GET /forkcache/stats` document (one line, ordered keys).
    pub fn to_json(&self, cache: &StoreStats, renders: RenderCounts) -> String {
        self.json(Some((cache, renders)))
    }

    /// What one tenant may see: its workspace's totals only, no server-wide counter.
    pub fn workspace_json(&self, workspace: &str) -> String {
        let mine = ServeStats {
            workspaces: self
                .workspaces
                .get(workspace)
                .map(|t| (workspace.to_string(), t.clone()))
                .into_iter()
                .collect(),
            ..ServeStats::default()
        };
        mine.json(None)
    }

    #[allow(clippy::expect_used)] // the stats are strings, integers and finite floats: serializing them cannot fail
    fn json(&self, server: Option<(&StoreStats, RenderCounts)>) -> String {
        let server_wide = server.is_some();
        let (cache, renders) = server.unzip();
        let json = StatsJson {
            workspaces: self
                .workspaces
                .iter()
                .map(|(name, totals)| (name.as_str(), TotalsJson::from(totals)))
                .collect(),
            totals: TotalsJson::from(&self.totals()),
            cache: cache.map(|cache| CacheJson {
                entries: cache.entries,
                writes: cache.writes,
                reads: cache.reads,
                evictions: cache.evictions,
            }),
            renders,
            idle_dropped: (server_wide && self.idle_dropped_rows > 0).then(|| IdleDroppedJson {
                workspaces: self.idle_dropped_rows,
                totals: TotalsJson::from(&self.idle_dropped),
            }),
            count_tokens_requests: server_wide.then_some(self.count_tokens_requests),
            trace_write_errors: server_wide.then_some(self.trace_write_errors),
            unknown_fields: (server_wide && !self.unknown_fields.is_empty()).then_some(&self.unknown_fields),
            openai: (server_wide && self.openai.requests + self.openai.rejected > 0)
                .then(|| OpenAiTotalsJson::from(&self.openai)),
        };
        serde_json::to_string(&json).expect("stats serialize")
    }

    /// The shutdown summary, for people.
    pub fn to_table(&self, cache: &StoreStats) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<24} {:>8} {:>8} {:>11} {:>11} {:>11} {:>9} {:>12} {:>8}",
            "workspace",
            "requests",
            "rejected",
            "read",
            "written",
            "uncached",
            "output",
            "cost_usd",
            "hit_rate"
        );
        let mut row = |name: &str, t: &WorkspaceTotals| {
            let _ = writeln!(
                out,
                "{:<24} {:>8} {:>8} {:>11} {:>11} {:>11} {:>9} {:>12.6} {:>7.1}%",
                name,
                t.requests,
                t.rejected,
                t.usage.cache_read_input_tokens,
                t.usage.cache_creation_input_tokens,
                t.usage.input_tokens,
                t.usage.output_tokens,
                t.cost.usd(),
                t.hit_rate() * 100.0
            );
        };
        for (name, totals) in &self.workspaces {
            row(name, totals);
        }
        let dropped = format!("(idle: {} dropped)", self.idle_dropped_rows);
        if self.idle_dropped_rows > 0 {
            row(&dropped, &self.idle_dropped);
        }
        if self.workspaces.len() + usize::from(self.idle_dropped_rows > 0) != 1 {
            row("(all)", &self.totals());
        }
        let _ = writeln!(
            out,
            "cache: {} entries, {} writes, {} reads, {} evictions · {} count_tokens requests",
            cache.entries, cache.writes, cache.reads, cache.evictions, self.count_tokens_requests
        );
        let openai = &self.openai;
        if openai.requests + openai.rejected > 0 {
            let u = &openai.usage;
            let _ = writeln!(
                out,
                "openai: {} requests, {} rejected · input {} (cached {}, written {}) · output {} · ${:.6}",
                openai.requests,
                openai.rejected,
                u.input_tokens,
                u.cached_tokens,
                u.cache_write_tokens.unwrap_or(0),
                u.output_tokens,
                openai.cost.usd()
            );
        }
        if self.trace_write_errors > 0 {
            let _ = writeln!(out, "warning: {} trace lines could not be written", self.trace_write_errors);
        }
        out
    }
}

/// One request, as the server logs it while it runs:
/// `#3 at 120ms key test claude-opus-4-8 stream: read 17403 · write 1900 · uncached 4 · out 9 · $0.012 · miss -`.
pub fn request_line(
    request_id: &str,
    at_ms: u64,
    workspace: &str,
    result: Result<&Record, &ApiError>,
) -> String {
    match result {
        Ok(r) => {
            let u = &r.usage;
            format!(
                "{request_id} at {at_ms}ms [{workspace}] {}{}: read {} · write {} (5m {}, 1h {}) · uncached {} · out {} · ${:.6} · miss {}",
                r.model,
                if r.stream { " stream" } else { "" },
                u.cache_read_input_tokens,
                u.cache_creation_input_tokens,
                u.cache_creation.ephemeral_5m_input_tokens,
                u.cache_creation.ephemeral_1h_input_tokens,
                u.input_tokens,
                u.output_tokens,
                r.cost.usd(),
                describe_miss(r.miss.as_ref())
            ) + &r.context_warning.map(|warning| format!(" · warning: {warning}")).unwrap_or_default()
        }
        Err(error) => format!("{request_id} at {at_ms}ms [{workspace}] rejected: {error}"),
    }
}

#[derive(Serialize)]
struct StatsJson<'s> {
    workspaces: BTreeMap<&'s str, TotalsJson>,
    totals: TotalsJson,
    /// Server-wide: left out of a tenant's view.
    #[serde(skip_serializing_if = "Option::is_none")]
    cache: Option<CacheJson>,
    /// Server-wide: how the prompts were rendered.
    #[serde(skip_serializing_if = "Option::is_none")]
    renders: Option<RenderCounts>,
    /// Server-wide, and only once a workspace was dropped.
    #[serde(skip_serializing_if = "Option::is_none")]
    idle_dropped: Option<IdleDroppedJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    count_tokens_requests: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    trace_write_errors: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    unknown_fields: Option<&'s BTreeMap<String, u64>>,
    /// Server-wide, once an OpenAI route was asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    openai: Option<OpenAiTotalsJson>,
}

#[derive(Serialize)]
struct IdleDroppedJson {
    workspaces: u64,
    totals: TotalsJson,
}

#[derive(Serialize)]
struct CacheJson {
    entries: u64,
    writes: u64,
    reads: u64,
    evictions: u64,
}
