//! What a set of Codex threads cost, where their cache broke and why, and what OpenAI's cache
//! rules predict beside the naive baseline, with the what-ifs re-priced.
//!
//! A thread is one chain (its `prompt_cache_key` is the thread id, so sub-agents never share a
//! parent's entries). Rules applied: the documented ones of [`openai`] (minimum, 128-token
//! steps, retention per model, the GPT-5.6 write premium); prefix sizes come from the recorded
//! counts, since rollouts hold no request bodies.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;

use forkcache_engine::PriceTable;
use forkcache_engine::billing::{Cost, ModelPrice, NeutralUsage, PriceDate};
use forkcache_engine::cache::openai::{self, Generation, Retention};

use super::rollout::{CodexRequest, CodexThread, Compaction};

/// A break: cached input more than this many tokens below the previous request's input (the
/// minimum cacheable prefix); also the agreement tolerance's floor.
pub const BREAK_THRESHOLD_TOKENS: u64 = openai::MIN_CACHEABLE_TOKENS;

/// A predicted read agrees with the real one within max(1,024 tokens, 2% of the real read).
pub fn agrees(predicted: u64, real: u64) -> bool {
    predicted.abs_diff(real) <= (real / 50).max(BREAK_THRESHOLD_TOKENS)
}

/// A changed setting the prediction is re-run under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CodexWhatIf {
    /// Every request with `prompt_cache_retention: "24h"`.
    #[serde(rename = "retention=24h")]
    Retention24h,
    /// Every request of a thread on the thread's first model.
    NoModelSwitch,
}

impl CodexWhatIf {
    /// Parses `retention=24h` or `no-model-switch`.
    pub fn parse(text: &str) -> Result<CodexWhatIf, String> {
        match text {
            "retention=24h" => Ok(CodexWhatIf::Retention24h),
            "no-model-switch" => Ok(CodexWhatIf::NoModelSwitch),
            other => Err(format!("unknown what-if {other:?}: expected retention=24h or no-model-switch")),
        }
    }

    /// The name the command line spells.
    pub fn name(self) -> &'static str {
        match self {
            CodexWhatIf::Retention24h => "retention=24h",
            CodexWhatIf::NoModelSwitch => "no-model-switch",
        }
    }
}

/// What the analysis is asked for.
#[derive(Clone, Debug)]
pub struct CodexOptions {
    /// What-ifs to re-price.
    pub what_ifs: Vec<CodexWhatIf>,
    /// `model_provider` names priced at OpenAI's list prices (`openai` by default); other
    /// providers' requests have no cost.
    pub priced_providers: Vec<String>,
}

impl Default for CodexOptions {
    fn default() -> CodexOptions {
        CodexOptions { what_ifs: Vec::new(), priced_providers: vec!["openai".to_string()] }
    }
}

/// Why the cache broke (or why the prediction expects it to).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BreakCause {
    /// A local compaction (a summarising request) replaced the history.
    LocalCompaction,
    /// A remote compaction replaced the history.
    RemoteCompaction,
    /// The model changed: caches are per model.
    ModelSwitch,
    /// Idle longer than the retention's typical lifetime.
    IdlePastRetention,
    /// None of the above.
    Unexplained,
}

impl BreakCause {
    /// The cause as output spells it.
    pub fn name(self) -> &'static str {
        match self {
            BreakCause::LocalCompaction => "local_compaction",
            BreakCause::RemoteCompaction => "remote_compaction",
            BreakCause::ModelSwitch => "model_switch",
            BreakCause::IdlePastRetention => "idle_past_retention",
            BreakCause::Unexplained => "unexplained",
        }
    }
}

/// The rollout's usage and its provider-neutral summary.
#[derive(Clone, Debug, Serialize)]
pub struct Recorded {
    /// `last_token_usage` as the rollout wrote it (`input_tokens` includes cached tokens).
    pub usage: Value,
    /// Read, written, uncached, output: what reports and charts use. Through GPT-5.5 nothing
    /// is counted as written (writes are free and unreported); from GPT-5.6 the uncached part
    /// is counted as written (an upper bound: the file has no write count).
    pub neutral: NeutralUsage,
    /// Reasoning tokens (inside `neutral.output`).
    pub reasoning: u64,
}

/// A predicted read and its cost.
#[derive(Clone, Debug, Serialize)]
pub struct Predicted {
    /// Tokens read.
    pub read: u64,
    /// What the request costs with that read (`None`: unpriced).
    pub cost_nanousd: Option<u64>,
    /// Why the prediction expects no read (`None`: it expects the previous prefix).
    pub reset: Option<BreakCause>,
}

/// One request's row.
#[derive(Clone, Debug, Serialize)]
pub struct RequestRow {
    /// Line of the `token_count` record.
    pub line: usize,
    /// Its timestamp (`None`: the record is missing and the usage inferred from the totals).
    pub time: Option<String>,
    /// The turn's model.
    pub model: Option<String>,
    /// The usage was inferred from the totals.
    pub inferred: bool,
    /// The history was replaced just before.
    pub after_compaction: Option<Compaction>,
    /// What the rollout recorded.
    pub recorded: Recorded,
    /// The recorded cost (`None`: the model or provider has no row).
    pub cost_nanousd: Option<u64>,
    /// OpenAI's rules' prediction.
    pub predicted: Predicted,
    /// The naive baseline: the previous request's input, capped at this one's, 0 at a chain's
    /// start.
    pub baseline_read: u64,
    /// The prediction within tolerance.
    pub agreement: bool,
    /// The baseline within tolerance.
    pub baseline_agreement: bool,
}

/// An observed break.
#[derive(Clone, Debug, Serialize)]
pub struct BreakRow {
    /// Line of the request's record.
    pub line: usize,
    /// Its time.
    pub time: Option<String>,
    /// Its model.
    pub model: Option<String>,
    /// What it could have read: the previous request's input, capped at its own.
    pub expected_read: u64,
    /// What it read.
    pub read: u64,
    /// `expected_read − read`.
    pub lost: u64,
    /// Why.
    pub cause: BreakCause,
}

/// Work whose usage the rollout does not hold.
#[derive(Clone, Debug, Serialize)]
pub struct Unbilled {
    /// When.
    pub time: String,
    /// What (`remote_compaction`).
    pub kind: &'static str,
}

/// Agreement counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Agreement {
    /// Requests counted.
    pub requests: u64,
    /// The prediction agreed.
    pub predicted: u64,
    /// The baseline agreed.
    pub baseline: u64,
}

/// Sums over a set of requests.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Requests.
    pub requests: u64,
    /// Input tokens (cached included).
    pub input: u64,
    /// Cached input tokens.
    pub cached: u64,
    /// Output tokens (reasoning included).
    pub output: u64,
    /// Reasoning tokens.
    pub reasoning: u64,
    /// Recorded cost of the priced requests.
    pub cost_nanousd: u64,
    /// Requests without a price (model or provider without a row).
    pub unpriced_requests: u64,
    /// Predicted cost of the priced requests.
    pub predicted_cost_nanousd: u64,
    /// Observed breaks by cause.
    pub breaks: BTreeMap<BreakCause, u64>,
    /// Agreement with the recorded reads.
    pub agreement: Agreement,
}

impl Summary {
    fn add_row(&mut self, row: &RequestRow) {
        let usage = &row.recorded.neutral;
        self.requests += 1;
        self.input += usage.total_input();
        self.cached += usage.read;
        self.output += usage.output;
        self.reasoning += row.recorded.reasoning;
        match row.cost_nanousd {
            Some(cost) => self.cost_nanousd += cost,
            None => self.unpriced_requests += 1,
        }
        self.predicted_cost_nanousd += row.predicted.cost_nanousd.unwrap_or(0);
        self.agreement.requests += 1;
        self.agreement.predicted += u64::from(row.agreement);
        self.agreement.baseline += u64::from(row.baseline_agreement);
    }

    fn add(&mut self, other: &Summary) {
        self.requests += other.requests;
        self.input += other.input;
        self.cached += other.cached;
        self.output += other.output;
        self.reasoning += other.reasoning;
        self.cost_nanousd += other.cost_nanousd;
        self.unpriced_requests += other.unpriced_requests;
        self.predicted_cost_nanousd += other.predicted_cost_nanousd;
        for (cause, count) in &other.breaks {
            *self.breaks.entry(*cause).or_default() += count;
        }
        self.agreement.requests += other.agreement.requests;
        self.agreement.predicted += other.agreement.predicted;
        self.agreement.baseline += other.agreement.baseline;
    }
}

/// One thread's report.
#[derive(Clone, Debug, Serialize)]
pub struct SessionReport {
    /// The rollout file.
    pub file: String,
    /// The thread id (its `prompt_cache_key`).
    pub thread: String,
    /// A sub-agent's parent thread.
    pub parent: Option<String>,
    /// The thread whose history a forked file copies (subtracted).
    pub forked_from: Option<String>,
    /// `model_provider`.
    pub provider: String,
    /// `originator`.
    pub originator: String,
    /// `cli_version`.
    pub cli_version: String,
    /// Models in order of first use.
    pub models: Vec<String>,
    /// The retention each model's requests were predicted with.
    pub retention: BTreeMap<String, &'static str>,
    /// Requests.
    pub requests: Vec<RequestRow>,
    /// Observed breaks.
    pub breaks: Vec<BreakRow>,
    /// Work without recorded usage.
    pub unbilled: Vec<Unbilled>,
    /// Sums.
    pub totals: Summary,
}

/// A what-if's effect.
#[derive(Clone, Debug, Serialize)]
pub struct WhatIfResult {
    /// The setting.
    pub setting: CodexWhatIf,
    /// Predicted cost under it minus the predicted cost as run, per thread, in nano-dollars
    /// (threads with an unpriced request under either setting are left out).
    pub delta_nanousd_by_thread: BTreeMap<String, i64>,
    /// The same summed.
    pub delta_nanousd: i64,
}

/// The prices a report used.
#[derive(Clone, Debug, Serialize)]
pub struct PricesUsed {
    /// The table's date.
    pub date: String,
    /// Its source.
    pub source: String,
}

/// `import codex`'s report.
#[derive(Clone, Debug, Serialize)]
pub struct CodexReport {
    /// Prices used.
    pub prices: PricesUsed,
    /// One per thread, in input order.
    pub sessions: Vec<SessionReport>,
    /// Sums over every thread.
    pub totals: Summary,
    /// What-ifs asked for.
    pub what_ifs: Vec<WhatIfResult>,
}

/// The settings one prediction runs under.
#[derive(Clone, Copy, Default)]
struct Setting {
    retention_24h: bool,
    no_model_switch: bool,
}

struct Pricing<'t> {
    table: &'t PriceTable,
    priced_provider: bool,
}

impl Pricing<'_> {
    fn row(&self, model: Option<&str>) -> Option<&ModelPrice> {
        if !self.priced_provider {
            return None;
        }
        self.table.row(model?)
    }
}

/// What `input` tokens with `cached` read and `output` generated cost on `model`'s row: the
/// uncached part at the input rate through GPT-5.5, at the write rate from GPT-5.6 (an upper
/// bound: rollouts have no write count); 2x input rates and 1.5x output above 272K input where
/// the model has long-context rates.
pub fn bill(
    price: &ModelPrice,
    model: &str,
    date: Option<PriceDate>,
    input: u64,
    cached: u64,
    output: u64,
) -> Cost {
    let rates = price.rates_on(date);
    let uncached = input.saturating_sub(cached);
    let written = Generation::of(model) == Generation::Breakpoints;
    let cost = Cost {
        uncached_nanousd: if written { 0 } else { uncached * rates.input },
        write_5m_nanousd: if written { uncached * rates.write_5m } else { 0 },
        write_1h_nanousd: 0,
        read_nanousd: cached * rates.read,
        output_nanousd: output * rates.output,
    };
    if input <= openai::LONG_CONTEXT_TOKENS || !openai::has_long_context_rates(model) {
        return cost;
    }
    let doubled = cost.scaled(2, 1);
    Cost { output_nanousd: cost.scaled(3, 2).output_nanousd, ..doubled }
}

fn neutral(model: Option<&str>, input: u64, cached: u64, output: u64) -> NeutralUsage {
    let uncached = input.saturating_sub(cached);
    let written = model.is_some_and(|model| Generation::of(model) == Generation::Breakpoints);
    NeutralUsage {
        read: cached,
        written: if written { uncached } else { 0 },
        uncached: if written { 0 } else { uncached },
        output,
    }
}

fn day_of(time: Option<&str>) -> Option<PriceDate> {
    PriceDate::parse(time?.get(..10)?).ok()
}

/// The retention a request runs with under `setting`.
fn retention(model: Option<&str>, setting: Setting) -> Retention {
    if setting.retention_24h {
        return Retention::Extended;
    }
    model.map_or(Retention::InMemory, Retention::default_for)
}

/// Why nothing of the previous prefix can be read, if anything says so.
fn reset_cause(
    previous: &CodexRequest,
    request: &CodexRequest,
    models: (Option<&str>, Option<&str>),
    setting: Setting,
) -> Option<BreakCause> {
    match request.after_compaction {
        Some(Compaction::Local) => return Some(BreakCause::LocalCompaction),
        Some(Compaction::Remote) => return Some(BreakCause::RemoteCompaction),
        None => {}
    }
    if models.0 != models.1 {
        return Some(BreakCause::ModelSwitch);
    }
    let idle_ms = match (previous.end_ms, request.start_ms) {
        (Some(end), Some(start)) => start.saturating_sub(end).max(0) as u64,
        _ => 0,
    };
    let limit_ms = retention(models.1, setting).idle_limit_seconds() * 1_000;
    (idle_ms > limit_ms).then_some(BreakCause::IdlePastRetention)
}

/// The read OpenAI's rules predict, and why it is zero when a rule says so.
///
/// After a reset the request still reads the prefix every thread of the client shares (base
/// instructions and tools, cached organization-wide on the same model); its size is taken from
/// the counts: what the thread's first request read, when it ran on the same model.
fn predict(
    previous: Option<&CodexRequest>,
    request: &CodexRequest,
    models: (Option<&str>, Option<&str>),
    setting: Setting,
    shared: (Option<&str>, u64),
) -> (u64, Option<BreakCause>) {
    let Some(previous) = previous else { return (0, None) };
    if let Some(cause) = reset_cause(previous, request, models, setting) {
        let stable = if shared.0 == models.1 { shared.1.min(request.tokens.input_tokens) } else { 0 };
        return (openai::reported_read(stable), Some(cause));
    }
    let shared = previous.tokens.input_tokens.min(request.tokens.input_tokens);
    (openai::reported_read(shared), None)
}

/// What the thread's first request read: the prefix its client shares with other threads.
fn shared_read(thread: &CodexThread) -> u64 {
    thread.requests.first().map_or(0, |first| first.tokens.cached_input_tokens)
}

/// The model a request is predicted on under `setting`.
fn model_under<'r>(request: &'r CodexRequest, first: Option<&'r str>, setting: Setting) -> Option<&'r str> {
    if setting.no_model_switch { first } else { request.model.as_deref() }
}

/// Dates of requests; a request whose record is missing is dated by the next record (same turn).
fn dates(thread: &CodexThread) -> Vec<Option<String>> {
    let mut next: Option<String> = None;
    let mut out: Vec<Option<String>> = thread
        .requests
        .iter()
        .rev()
        .map(|request| {
            if let Some(time) = &request.timestamp {
                next = Some(time.clone());
            }
            request.timestamp.clone().or_else(|| next.clone())
        })
        .collect();
    out.reverse();
    out
}

/// The predicted cost of a thread under `setting`; `None` when some request has no price.
fn predicted_cost(thread: &CodexThread, pricing: &Pricing, setting: Setting) -> Option<u64> {
    let first = thread.requests.iter().find_map(|r| r.model.as_deref());
    let dates = dates(thread);
    let mut total = 0;
    for (index, request) in thread.requests.iter().enumerate() {
        let previous = index.checked_sub(1).map(|i| &thread.requests[i]);
        let model = model_under(request, first, setting);
        let previous_model = previous.and_then(|p| model_under(p, first, setting));
        let shared =
            (thread.requests.first().and_then(|r| model_under(r, first, setting)), shared_read(thread));
        let (read, _) = predict(previous, request, (previous_model, model), setting, shared);
        let (price, model) = (pricing.row(model)?, model?);
        let t = &request.tokens;
        total += bill(price, model, day_of(dates[index].as_deref()), t.input_tokens, read, t.output_tokens)
            .total_nanousd();
    }
    Some(total)
}

fn session(thread: &CodexThread, pricing: &Pricing) -> SessionReport {
    let dates = dates(thread);
    let mut models: Vec<String> = Vec::new();
    let mut rows = Vec::new();
    let mut breaks = Vec::new();
    let mut totals = Summary::default();
    for (index, request) in thread.requests.iter().enumerate() {
        let previous = index.checked_sub(1).map(|i| &thread.requests[i]);
        let model = request.model.as_deref();
        if let Some(model) = model.filter(|m| !models.iter().any(|known| known == m)) {
            models.push(model.to_string());
        }
        let t = &request.tokens;
        let date = day_of(dates[index].as_deref());
        let previous_model = previous.and_then(|p| p.model.as_deref());
        let shared = (thread.requests.first().and_then(|r| r.model.as_deref()), shared_read(thread));
        let (read, reset) = predict(previous, request, (previous_model, model), Setting::default(), shared);
        let price = pricing.row(model);
        let cost_of = |cached: u64| {
            price.zip(model).map(|(price, model)| {
                bill(price, model, date, t.input_tokens, cached, t.output_tokens).total_nanousd()
            })
        };
        let expected = previous.map_or(0, |p| p.tokens.input_tokens.min(t.input_tokens));
        if previous.is_some() && t.cached_input_tokens + BREAK_THRESHOLD_TOKENS < expected {
            let cause = previous
                .and_then(|p| reset_cause(p, request, (previous_model, model), Setting::default()))
                .unwrap_or(BreakCause::Unexplained);
            *totals.breaks.entry(cause).or_default() += 1;
            breaks.push(BreakRow {
                line: request.line,
                time: request.timestamp.clone(),
                model: request.model.clone(),
                expected_read: expected,
                read: t.cached_input_tokens,
                lost: expected - t.cached_input_tokens,
                cause,
            });
        }
        let row = RequestRow {
            line: request.line,
            time: request.timestamp.clone(),
            model: request.model.clone(),
            inferred: request.inferred,
            after_compaction: request.after_compaction,
            recorded: Recorded {
                usage: request.usage.clone(),
                neutral: neutral(model, t.input_tokens, t.cached_input_tokens, t.output_tokens),
                reasoning: t.reasoning_output_tokens,
            },
            cost_nanousd: cost_of(t.cached_input_tokens),
            predicted: Predicted { read, cost_nanousd: cost_of(read), reset },
            baseline_read: expected,
            agreement: agrees(read, t.cached_input_tokens),
            baseline_agreement: agrees(expected, t.cached_input_tokens),
        };
        totals.add_row(&row);
        rows.push(row);
    }
    let retention = models
        .iter()
        .map(|model| (model.clone(), retention(Some(model), Setting::default()).name()))
        .collect();
    SessionReport {
        file: thread.file.clone(),
        thread: thread.id.clone(),
        parent: thread.parent.clone(),
        forked_from: thread.forked_from.clone(),
        provider: thread.provider.clone(),
        originator: thread.originator.clone(),
        cli_version: thread.cli_version.clone(),
        models,
        retention,
        requests: rows,
        breaks,
        unbilled: thread
            .remote_compactions
            .iter()
            .map(|time| Unbilled { time: time.clone(), kind: "remote_compaction" })
            .collect(),
        totals,
    }
}

/// Prices, explains and predicts every thread.
pub fn analyse(threads: &[CodexThread], options: &CodexOptions, table: &PriceTable) -> CodexReport {
    let pricing_of = |thread: &CodexThread| Pricing {
        table,
        priced_provider: options.priced_providers.contains(&thread.provider),
    };
    let sessions: Vec<SessionReport> =
        threads.iter().map(|thread| session(thread, &pricing_of(thread))).collect();
    let mut totals = Summary::default();
    for session in &sessions {
        totals.add(&session.totals);
    }
    let what_ifs = options
        .what_ifs
        .iter()
        .map(|&setting| {
            let changed = Setting {
                retention_24h: setting == CodexWhatIf::Retention24h,
                no_model_switch: setting == CodexWhatIf::NoModelSwitch,
            };
            let delta_nanousd_by_thread: BTreeMap<String, i64> = threads
                .iter()
                .filter_map(|thread| {
                    let pricing = pricing_of(thread);
                    let base = predicted_cost(thread, &pricing, Setting::default())? as i64;
                    Some((thread.id.clone(), predicted_cost(thread, &pricing, changed)? as i64 - base))
                })
                .collect();
            let delta_nanousd = delta_nanousd_by_thread.values().sum();
            WhatIfResult { setting, delta_nanousd_by_thread, delta_nanousd }
        })
        .collect();
    CodexReport {
        prices: PricesUsed { date: table.date.clone(), source: table.source.clone() },
        sessions,
        totals,
        what_ifs,
    }
}

fn usd(nanousd: u64) -> String {
    format!("${:.2}", nanousd as f64 / 1e9)
}

fn percent(part: u64, whole: u64) -> String {
    if whole == 0 { "-".to_string() } else { format!("{:.1}%", part as f64 * 100.0 / whole as f64) }
}

impl CodexReport {
    /// A table for people: a line per thread, the totals, the what-ifs.
    pub fn to_table(&self) -> String {
        let mut out = format!("Codex sessions priced with OpenAI's prices of {}\n\n", self.prices.date);
        let _ = writeln!(
            out,
            "{:<44} {:>5} {:>12} {:>7} {:>10} {:>6} {:>9} {:>9}",
            "thread (file)", "req", "input", "hit", "cost", "breaks", "predicted", "baseline"
        );
        let mut line = |name: &str, s: &Summary| {
            let cost = if s.unpriced_requests == s.requests && s.requests > 0 {
                "n/a".to_string()
            } else {
                usd(s.cost_nanousd)
            };
            let _ = writeln!(
                out,
                "{:<44} {:>5} {:>12} {:>7} {:>10} {:>6} {:>9} {:>9}",
                name,
                s.requests,
                s.input,
                percent(s.cached, s.input),
                cost,
                s.breaks.values().sum::<u64>(),
                percent(s.agreement.predicted, s.agreement.requests),
                percent(s.agreement.baseline, s.agreement.requests),
            );
        };
        for session in &self.sessions {
            let file = std::path::Path::new(&session.file)
                .file_name()
                .map_or(session.file.clone(), |f| f.to_string_lossy().into_owned());
            line(&file.chars().take(44).collect::<String>(), &session.totals);
        }
        line("total", &self.totals);
        let _ = writeln!(out, "\nBreaks by cause:");
        for (cause, count) in &self.totals.breaks {
            let _ = writeln!(out, "  {:<22} {count}", cause.name());
        }
        for what_if in &self.what_ifs {
            let sign = if what_if.delta_nanousd < 0 { "-" } else { "+" };
            let _ = writeln!(
                out,
                "what-if {}: {sign}{}",
                what_if.setting.name(),
                usd(what_if.delta_nanousd.unsigned_abs())
            );
        }
        out
    }

    /// `requests.csv` and `breaks.csv`.
    pub fn to_csv(&self) -> Result<(Vec<u8>, Vec<u8>), csv::Error> {
        let mut requests = csv::Writer::from_writer(Vec::new());
        requests.write_record([
            "file",
            "thread",
            "line",
            "time",
            "model",
            "inferred",
            "input",
            "cached",
            "output",
            "reasoning",
            "read",
            "written",
            "uncached",
            "cost_usd",
            "predicted_read",
            "baseline_read",
            "agreement",
            "baseline_agreement",
        ])?;
        let mut breaks = csv::Writer::from_writer(Vec::new());
        breaks.write_record([
            "file",
            "thread",
            "line",
            "time",
            "model",
            "expected_read",
            "read",
            "lost",
            "cause",
        ])?;
        let text = |value: Option<&str>| value.unwrap_or("").to_string();
        for session in &self.sessions {
            for row in &session.requests {
                let n = &row.recorded.neutral;
                requests.write_record([
                    session.file.clone(),
                    session.thread.clone(),
                    row.line.to_string(),
                    text(row.time.as_deref()),
                    text(row.model.as_deref()),
                    row.inferred.to_string(),
                    n.total_input().to_string(),
                    n.read.to_string(),
                    n.output.to_string(),
                    row.recorded.reasoning.to_string(),
                    n.read.to_string(),
                    n.written.to_string(),
                    n.uncached.to_string(),
                    row.cost_nanousd.map_or(String::new(), |c| format!("{:.9}", c as f64 / 1e9)),
                    row.predicted.read.to_string(),
                    row.baseline_read.to_string(),
                    row.agreement.to_string(),
                    row.baseline_agreement.to_string(),
                ])?;
            }
            for row in &session.breaks {
                breaks.write_record([
                    session.file.clone(),
                    session.thread.clone(),
                    row.line.to_string(),
                    text(row.time.as_deref()),
                    text(row.model.as_deref()),
                    row.expected_read.to_string(),
                    row.read.to_string(),
                    row.lost.to_string(),
                    row.cause.name().to_string(),
                ])?;
            }
        }
        let finish =
            |writer: csv::Writer<Vec<u8>>| writer.into_inner().map_err(|e| csv::Error::from(e.into_error()));
        Ok((finish(requests)?, finish(breaks)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bill_on(model: &str, day: &str, input: u64, cached: u64, output: u64) -> u64 {
        let table = PriceTable::builtin_openai();
        let price = table.row(model).unwrap();
        bill(price, model, PriceDate::parse(day).ok(), input, cached, output).total_nanousd()
    }

    #[test]
    fn terra_after_the_july_30_price_change() {
        // $2.00 / $0.20 / write $2.50 / $12: 1,000 written x 2,500 + 9,000 x 200 + 100 x 12,000
        // = 2,500,000 + 1,800,000 + 1,200,000.
        assert_eq!(bill_on("gpt-5.6-terra", "2026-08-01", 10_000, 9_000, 100), 5_500_000);
        // The launch price the day before: 1,000 x 3,125 + 9,000 x 250 + 100 x 15,000.
        assert_eq!(bill_on("gpt-5.6-terra", "2026-07-29", 10_000, 9_000, 100), 6_875_000);
    }

    #[test]
    fn above_272k_input_the_whole_request_pays_the_long_context_rates() {
        // gpt-5.5, 300,000 input (200,000 cached), 1,000 output: 100,000 x 5,000 x 2 +
        // 200,000 x 500 x 2 + 1,000 x 30,000 x 1.5 = 1,000,000,000 + 200,000,000 + 45,000,000.
        assert_eq!(bill_on("gpt-5.5", "2026-07-01", 300_000, 200_000, 1_000), 1_245_000_000);
        // gpt-5.2 has no long-context rates: 100,000 x 1,750 + 200,000 x 175 + 1,000 x 14,000.
        assert_eq!(bill_on("gpt-5.2", "2026-07-01", 300_000, 200_000, 1_000), 224_000_000);
    }

    #[test]
    fn the_tolerance_is_the_larger_of_1024_and_two_percent() {
        assert!(agrees(1_024, 0));
        assert!(!agrees(1_025, 0));
        // 2% of 100,000 = 2,000.
        assert!(agrees(98_000, 100_000));
        assert!(!agrees(97_999, 100_000));
    }
}
