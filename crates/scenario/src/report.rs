//! What a scenario run reports: the run's records (`record`) with totals, overall and per role,
//! against the naive cost; JSON and a table.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use forkcache_engine::billing::{PriceTable, TokenEquivalents, Usage};
use forkcache_engine::cache::describe_miss;
use forkcache_engine::cache::{MissCause, layout_notes};
use forkcache_engine::provider::Provider;

use super::record::{GuardEvent, RequestRole, RunConfig, ScenarioRecord, SpawnReport};
use super::spec::{Launch, ScenarioSpec};
use crate::agent::RenderWork;

/// Sums over a set of requests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScenarioTotals {
    /// Requests.
    pub requests: u64,
    /// Usage summed.
    pub usage: Usage,
    /// Actual cost, nano-dollars.
    pub cost_nanousd: u64,
    /// Naive cost (every request alone), nano-dollars.
    pub naive_nanousd: u64,
    /// Actual token-equivalents (thousandths).
    pub token_equivalents: TokenEquivalents,
    /// Naive token-equivalents (thousandths).
    pub naive_token_equivalents: TokenEquivalents,
    /// The largest request's input tokens.
    pub largest_context_tokens: u64,
    /// Requests per miss cause.
    pub misses: BTreeMap<MissCause, u64>,
    /// Tokens missed, summed.
    pub tokens_missed: u64,
    /// Models the price table does not list (a named agent's or a teammate's `model`): their
    /// requests are simulated with default cache constants and cost nothing in the sums.
    pub unpriced_models: BTreeSet<String>,
}

impl ScenarioTotals {
    fn add(&mut self, record: &ScenarioRecord) {
        let r = &record.record;
        self.requests += 1;
        self.usage.add(&r.usage);
        self.cost_nanousd += r.cost.total_nanousd();
        self.naive_nanousd += record.naive_nanousd;
        self.token_equivalents.0 += r.token_equivalents.0;
        self.naive_token_equivalents.0 += record.naive_token_equivalents.0;
        self.largest_context_tokens = self.largest_context_tokens.max(r.usage.total_input_tokens());
        if let Some(miss) = &r.miss {
            *self.misses.entry(miss.cause).or_insert(0) += 1;
            self.tokens_missed += miss.tokens_missed;
        }
        if !r.priced {
            self.unpriced_models.insert(r.model.clone());
        }
    }

    /// Counts `record`, or leaves the totals as they were and returns false when a sum would pass
    /// 2^64 (the engine checks every request this way, so the report's sums, and any subset of
    /// them, cannot wrap).
    pub fn checked_add(&mut self, record: &ScenarioRecord) -> bool {
        let r = &record.record;
        let (mine, theirs) = (&self.usage, &r.usage);
        let pairs = [
            (mine.input_tokens, theirs.input_tokens),
            (mine.cache_creation_input_tokens, theirs.cache_creation_input_tokens),
            (mine.cache_read_input_tokens, theirs.cache_read_input_tokens),
            (mine.cache_creation.ephemeral_5m_input_tokens, theirs.cache_creation.ephemeral_5m_input_tokens),
            (mine.cache_creation.ephemeral_1h_input_tokens, theirs.cache_creation.ephemeral_1h_input_tokens),
            (mine.output_tokens, theirs.output_tokens),
            (mine.total_input_tokens(), theirs.total_input_tokens()),
            (self.cost_nanousd, r.cost.total_nanousd()),
            (self.naive_nanousd, record.naive_nanousd),
            (self.token_equivalents.0, r.token_equivalents.0),
            (self.naive_token_equivalents.0, record.naive_token_equivalents.0),
            (self.tokens_missed, r.miss.as_ref().map_or(0, |miss| miss.tokens_missed)),
        ];
        let fits = pairs.iter().all(|&(a, b)| a.checked_add(b).is_some());
        if fits {
            self.add(record);
        }
        fits
    }

    /// The totals as the JSON reports print them (`cost_usd`, API-shaped `usage`, savings).
    pub fn to_json_value(&self) -> serde_json::Value {
        totals_json(self)
    }

    /// 1 − actual ÷ naive (display only).
    pub fn savings(&self) -> f64 {
        if self.naive_nanousd == 0 { 0.0 } else { 1.0 - self.cost_nanousd as f64 / self.naive_nanousd as f64 }
    }

    /// Tokens read ÷ input tokens (display only).
    pub fn hit_rate(&self) -> f64 {
        let total = self.usage.total_input_tokens();
        if total == 0 { 0.0 } else { self.usage.cache_read_input_tokens as f64 / total as f64 }
    }

    /// Tokens written ÷ the largest context: how many times the context was written over.
    pub fn rewrite_factor(&self) -> f64 {
        if self.largest_context_tokens == 0 {
            0.0
        } else {
            self.usage.cache_creation_input_tokens as f64 / self.largest_context_tokens as f64
        }
    }
}

/// A whole run.
#[derive(Clone, Debug)]
pub struct ScenarioReport {
    /// The scenario's name.
    pub name: String,
    /// Its seed.
    pub seed: u64,
    /// The provider it ran on.
    pub provider: Provider,
    /// The main loop's model as sent (the provider's, on another provider).
    pub model: String,
    /// The settings used.
    pub config: RunConfig,
    /// The price table's date.
    pub prices_date: String,
    /// Every request, in start order.
    pub records: Vec<ScenarioRecord>,
    /// Every spawn.
    pub spawns: Vec<SpawnReport>,
    /// Every guard decision.
    pub guard: Vec<GuardEvent>,
    /// Sums over everything.
    pub totals: ScenarioTotals,
    /// Sums per role.
    pub by_role: BTreeMap<RequestRole, ScenarioTotals>,
    /// What rendering the requests took, counted (not in any output; for tests and benches).
    pub work: RenderWork,
}

impl ScenarioReport {
    pub(super) fn new(
        spec: &ScenarioSpec,
        config: &RunConfig,
        prices: &PriceTable,
        records: Vec<ScenarioRecord>,
        spawns: Vec<SpawnReport>,
        guard: Vec<GuardEvent>,
        work: RenderWork,
    ) -> ScenarioReport {
        let mut totals = ScenarioTotals::default();
        let mut by_role: BTreeMap<RequestRole, ScenarioTotals> = BTreeMap::new();
        for record in &records {
            totals.add(record);
            by_role.entry(record.role).or_default().add(record);
        }
        ScenarioReport {
            name: spec.name.clone(),
            seed: spec.seed,
            provider: spec.provider,
            model: spec.model.clone(),
            config: config.clone(),
            prices_date: prices.date.clone(),
            records,
            spawns,
            guard,
            totals,
            by_role,
            work,
        }
    }

    /// Totals of the requests `keep` picks.
    pub fn totals_of(&self, keep: impl Fn(&ScenarioRecord) -> bool) -> ScenarioTotals {
        let mut totals = ScenarioTotals::default();
        for record in self.records.iter().filter(|record| keep(record)) {
            totals.add(record);
        }
        totals
    }

    /// Totals of one role (empty when it sent nothing).
    pub fn role(&self, role: RequestRole) -> ScenarioTotals {
        self.by_role.get(&role).cloned().unwrap_or_default()
    }

    /// The `run --json` document (one line).
    #[allow(clippy::expect_used)] // the report is strings, integers and finite floats: serializing it cannot fail
    pub fn to_json(&self) -> String {
        let endpoint = &self.config.endpoint;
        let json = serde_json::json!({
            "scenario": {"name": self.name, "seed": self.seed, "provider": self.provider.name(),
                "model": self.model, "policy": endpoint.cache.policy.name(),
                "billing": endpoint.billing.name(), "identity": endpoint.prompt.identity.name(),
                "tokenizer": endpoint.tokenizer.name(), "visibility": endpoint.cache.visibility,
                "prices_date": self.prices_date},
            "requests": self.records.iter().map(record_json).collect::<Vec<_>>(),
            "spawns": self.spawns.iter().map(spawn_json).collect::<Vec<_>>(),
            "guard": self.guard,
            "totals": totals_json(&self.totals),
            "by_role": self.by_role.iter().map(|(role, t)| (role.name(), totals_json(t))).collect::<BTreeMap<_, _>>(),
        });
        serde_json::to_string(&json).expect("the report serializes")
    }

    /// A table for people.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let endpoint = &self.config.endpoint;
        let on_provider = match self.provider {
            Provider::Anthropic => String::new(),
            provider => format!(" · provider {provider} ({})", self.model),
        };
        let _ = writeln!(
            out,
            "scenario {} · seed {}{on_provider} · policy {} · billing {} · prices of {}\n",
            self.name,
            self.seed,
            endpoint.cache.policy.name(),
            endpoint.billing.name(),
            self.prices_date
        );
        let _ = writeln!(
            out,
            "{:>4} {:>9} {:<11} {:<30} {:>9} {:>9} {:>9} {:>11} {:>11}  miss",
            "#", "at_ms", "role", "agent", "read", "written", "uncached", "tok_equiv", "naive"
        );
        for r in &self.records {
            let u = &r.record.usage;
            let _ = writeln!(
                out,
                "{:>4} {:>9} {:<11} {:<30} {:>9} {:>9} {:>9} {:>11.1} {:>11.1}  {}",
                r.index,
                r.record.at.ms(),
                r.role.name(),
                truncate(&r.agent, 30),
                u.cache_read_input_tokens,
                u.cache_creation_input_tokens,
                u.input_tokens,
                r.record.token_equivalents.value(),
                r.naive_token_equivalents.value(),
                describe_miss(r.record.miss.as_ref())
            );
        }
        out.push_str(&layout_notes(
            self.records.iter().filter_map(|r| r.record.miss.as_ref().map(|m| m.cause)),
        ));
        self.spawn_lines(&mut out);
        self.guard_lines(&mut out);
        self.totals_lines(&mut out);
        out
    }

    fn spawn_lines(&self, out: &mut String) {
        for spawn in &self.spawns {
            let Some(check) = &spawn.verification else { continue };
            let _ = writeln!(
                out,
                "\nspawn {}: {} forks, {}, {} launch — {}, only the directive differs: {}, extends the parent: {}",
                spawn.spawn + 1,
                spawn.forks,
                spawn.variant.name(),
                launch_name(spawn.launch),
                check.identity_summary(),
                yes_no(check.only_directive),
                check.extends_parent.map_or("n/a", yes_no)
            );
            if let Some(d) = &check.first_divergence {
                let _ = writeln!(
                    out,
                    "  first divergence at byte {}: {} ({}, {})",
                    d.byte_offset,
                    d.path,
                    d.dimension.name(),
                    d.cause.name()
                );
            }
        }
    }

    fn guard_lines(&self, out: &mut String) {
        for event in &self.guard {
            let _ = writeln!(
                out,
                "\nguard: {} asked to fork on turn {}{}: query_source {}, tag scan {} → {}",
                event.agent,
                event.turn,
                if event.compacted { " after compaction" } else { "" },
                if event.verdict.by_query_source { "caught it" } else { "missed it" },
                if event.verdict.by_tag_scan { "caught it" } else { "missed it" },
                if event.verdict.refused() { "refused" } else { "ALLOWED" }
            );
        }
    }

    fn totals_lines(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "\n{:<11} {:>8} {:>14} {:>14} {:>9} {:>9} {:>9}",
            "role", "requests", "tok_equiv", "naive", "saves", "hit_rate", "rewrite"
        );
        let rows = self.by_role.iter().map(|(role, t)| (role.name(), t)).chain([("total", &self.totals)]);
        for (name, t) in rows {
            let _ = writeln!(
                out,
                "{:<11} {:>8} {:>14.1} {:>14.1} {:>8.1}% {:>8.1}% {:>8.2}x",
                name,
                t.requests,
                t.token_equivalents.value(),
                t.naive_token_equivalents.value(),
                t.savings() * 100.0,
                t.hit_rate() * 100.0,
                t.rewrite_factor()
            );
        }
        let t = &self.totals;
        let _ = writeln!(
            out,
            "\ncost ${:.6} vs naive ${:.6}; largest context {} tokens; token counts are estimates",
            t.cost_nanousd as f64 / 1e9,
            t.naive_nanousd as f64 / 1e9,
            t.largest_context_tokens
        );
        if !t.unpriced_models.is_empty() {
            let names: Vec<&str> = t.unpriced_models.iter().map(String::as_str).collect();
            let _ = writeln!(
                out,
                "UNPRICED: {} not in the price table; their requests cost 0 in these totals",
                names.join(", ")
            );
        }
    }
}

fn record_json(r: &ScenarioRecord) -> serde_json::Value {
    let mut value = serde_json::json!({
        "index": r.index, "role": r.role, "agent": r.agent, "spawn": r.spawn, "fork": r.fork,
        "at_ms": r.record.at.ms(), "model": r.record.model, "usage": r.record.usage,
        "cost_usd": r.record.cost.usd(), "cost_nanousd": r.record.cost.total_nanousd(),
        "token_equivalents": r.record.token_equivalents.value(),
        "naive_nanousd": r.naive_nanousd, "ttft_ms": r.record.ttft_ms, "miss": r.record.miss,
    });
    // Only when there is one, as in `replay --json`: a prompt past the window, within the margin.
    if let Some(warning) = r.record.context_warning {
        value["warnings"] = serde_json::json!([warning.to_string()]);
    }
    value
}

#[allow(clippy::expect_used)] // a spawn report is plain data: serializing it cannot fail
fn spawn_json(s: &SpawnReport) -> serde_json::Value {
    let mut value = serde_json::to_value(s).expect("a spawn serializes");
    if let Some(check) = &s.verification {
        // A fraction, as every share in JSON is (the table prints it as a percent).
        value["verification"]["identical"] = serde_json::json!(round6(check.identical_pct() / 100.0));
    }
    value
}

fn totals_json(t: &ScenarioTotals) -> serde_json::Value {
    let mut json = serde_json::json!({
        "requests": t.requests, "usage": t.usage, "total_input_tokens": t.usage.total_input_tokens(),
        "cost_usd": t.cost_nanousd as f64 / 1e9, "cost_nanousd": t.cost_nanousd, "naive_nanousd": t.naive_nanousd,
        "savings_nanousd": t.naive_nanousd.saturating_sub(t.cost_nanousd),
        "token_equivalents": t.token_equivalents.value(), "naive_token_equivalents": t.naive_token_equivalents.value(),
        "savings": round6(t.savings()), "hit_rate": round6(t.hit_rate()), "rewrite_factor": round6(t.rewrite_factor()),
        "largest_context_tokens": t.largest_context_tokens, "tokens_missed": t.tokens_missed,
        "misses": t.misses.iter().map(|(c, n)| (c.name(), *n)).collect::<BTreeMap<_, _>>(),
    });
    // Only when there are some, so the reports of fully priced runs keep their shape.
    if !t.unpriced_models.is_empty() {
        json["unpriced_models"] = serde_json::json!(t.unpriced_models);
    }
    json
}

fn launch_name(launch: Launch) -> &'static str {
    match launch {
        Launch::Parallel => "parallel",
        Launch::Staggered => "staggered",
        Launch::Sequential => "sequential",
    }
}

fn yes_no(value: bool) -> &'static str {
    if value { "yes" } else { "no" }
}

fn truncate(text: &str, width: usize) -> &str {
    match text.char_indices().nth(width) {
        Some((cut, _)) => &text[..cut],
        None => text,
    }
}

fn round6(value: f64) -> f64 {
    (value * 1e6).round() / 1e6
}
