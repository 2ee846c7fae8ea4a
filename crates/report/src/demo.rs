//! The seed articles' worked example (docs/design.md §2.5) as request traces, replayed under both
//! policies and both billing profiles.
//!
//! Parent history 100,000 tokens; the parent's assistant message with 3 `tool_use` blocks = 500
//! tokens; 3 placeholder results = 200 tokens; each directive = 100 tokens. Blocks declare their
//! sizes (`forkcache_tokens`), so the arithmetic is exact. The parent's request marks the end of
//! the history; each fork marks its directive (as Claude Code does). Forks run one after another,
//! 30 s apart.

use serde_json::{Value, json};

use forkcache_engine::billing::{BillingProfile, PriceTable, TokenEquivalents};
use forkcache_engine::cache::Policy;
use forkcache_engine::endpoint::EndpointConfig;
use forkcache_ingest::replay::{ReplayConfig, ReplayError, ReplayReport, replay};

/// The model the example runs on (token-equivalents do not depend on it).
pub const SEED_MODEL: &str = "claude-sonnet-4-6";
/// The constant placeholder every fork puts in every `tool_result`.
pub const FORK_PLACEHOLDER: &str = "Fork started - processing in background";
/// Forks in the example.
pub const SEED_FORKS: usize = 3;
/// Milliseconds between consecutive requests.
pub const SEED_GAP_MS: u64 = 30_000;

/// Which variant of the example.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum SeedCase {
    /// The parent's turn already cached the history; then the forks.
    Warm,
    /// Nothing cached; the forks alone.
    Cold,
    /// No sharing: every fork in its own workspace.
    Naive,
}

impl SeedCase {
    /// All three, in table order.
    pub const ALL: [SeedCase; 3] = [SeedCase::Warm, SeedCase::Cold, SeedCase::Naive];

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            SeedCase::Warm => "warm",
            SeedCase::Cold => "cold",
            SeedCase::Naive => "naive",
        }
    }
}

fn text(text: &str, tokens: u64) -> Value {
    json!({"type": "text", "text": text, "forkcache_tokens": tokens})
}

fn marked(mut block: Value) -> Value {
    block["cache_control"] = json!({"type": "ephemeral"});
    block
}

fn history() -> Value {
    text("<parent conversation history>", 100_000)
}

fn parent_request() -> Value {
    json!({
        "model": SEED_MODEL,
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": [marked(history())]}],
    })
}

/// 500 tokens over three `tool_use` blocks, 200 over three placeholder results.
const TOOL_USE_TOKENS: [u64; 3] = [166, 167, 167];
const PLACEHOLDER_TOKENS: [u64; 3] = [66, 67, 67];

fn fork_request(fork: usize) -> Value {
    let tool_uses: Vec<Value> = (0..SEED_FORKS)
        .map(|i| {
            json!({"type": "tool_use", "id": format!("toolu_seed{i}"), "name": "Agent",
                   "input": {"prompt": format!("directive {}", i + 1)}, "forkcache_tokens": TOOL_USE_TOKENS[i]})
        })
        .collect();
    let mut results: Vec<Value> = (0..SEED_FORKS)
        .map(|i| {
            json!({"type": "tool_result", "tool_use_id": format!("toolu_seed{i}"),
                   "content": FORK_PLACEHOLDER, "forkcache_tokens": PLACEHOLDER_TOKENS[i]})
        })
        .collect();
    let directive = format!("<fork-boilerplate>Your directive: directive {}</fork-boilerplate>", fork + 1);
    results.push(marked(text(&directive, 100)));
    json!({
        "model": SEED_MODEL,
        "max_tokens": 1024,
        "messages": [
            {"role": "user", "content": [history()]},
            {"role": "assistant", "content": tool_uses},
            {"role": "user", "content": results},
        ],
    })
}

/// The example as a JSONL trace of envelopes.
pub fn seed_example_trace(case: SeedCase) -> String {
    let mut lines = Vec::new();
    if case == SeedCase::Warm {
        lines.push(json!({"at_ms": 0, "body": parent_request()}));
    }
    for fork in 0..SEED_FORKS {
        let at_ms = (lines.len() as u64) * SEED_GAP_MS;
        let mut line = json!({"at_ms": at_ms, "body": fork_request(fork)});
        if case == SeedCase::Naive {
            line["api_key"] = json!(format!("naive-fork-{}", fork + 1));
        }
        lines.push(line);
    }
    lines.iter().map(|line| line.to_string() + "\n").collect()
}

/// One cell of the comparison: a case under a policy and a billing profile.
#[derive(Clone, Debug)]
pub struct SeedRun {
    /// Which case.
    pub case: SeedCase,
    /// Cache policy.
    pub policy: Policy,
    /// Billing profile.
    pub billing: BillingProfile,
    /// The forks' token-equivalents (the parent's own turn excluded, as in the article).
    pub forks: TokenEquivalents,
    /// The whole replay.
    pub report: ReplayReport,
}

/// Every case under every policy × billing combination, in a fixed order.
pub fn seed_example(prices: &PriceTable) -> Result<Vec<SeedRun>, ReplayError> {
    let mut runs = Vec::new();
    for policy in [Policy::LongestPrefix, Policy::Anthropic] {
        for billing in [BillingProfile::Seed, BillingProfile::Anthropic] {
            for case in SeedCase::ALL {
                let mut endpoint = EndpointConfig { billing, ..EndpointConfig::default() };
                endpoint.cache.policy = policy;
                let config = ReplayConfig { endpoint, ..ReplayConfig::default() };
                let report = replay(&config, prices.clone(), &seed_example_trace(case))?;
                let forks = fork_total(&report);
                runs.push(SeedRun { case, policy, billing, forks, report });
            }
        }
    }
    Ok(runs)
}

fn fork_total(report: &ReplayReport) -> TokenEquivalents {
    let forks = report.records.iter().rev().take(SEED_FORKS);
    TokenEquivalents(forks.filter_map(|r| r.result.as_ref().ok()).map(|r| r.token_equivalents.0).sum())
}

/// The naive case's total under the same policy and billing as `run`.
fn naive_of<'r>(runs: &'r [SeedRun], run: &SeedRun) -> Option<&'r SeedRun> {
    runs.iter().find(|r| r.case == SeedCase::Naive && r.policy == run.policy && r.billing == run.billing)
}

/// `1 − forks ÷ naive forks`: a fraction (tables print it as a percent).
fn savings(run: &SeedRun, naive: Option<&SeedRun>) -> f64 {
    match naive {
        Some(naive) if naive.forks.0 > 0 => 1.0 - run.forks.0 as f64 / naive.forks.0 as f64,
        _ => 0.0,
    }
}

/// The comparison as a table: one row per policy × billing, token-equivalents of the forks.
pub fn seed_example_table(runs: &[SeedRun], prices_date: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Seed worked example: {SEED_FORKS} forks of a 100,000-token parent (docs/design.md §2.5)"
    );
    let _ = writeln!(out, "token-equivalents of the forks' requests (cost ÷ base input price)\n");
    let _ = writeln!(
        out,
        "{:<16} {:<10} {:>12} {:>12} {:>12} {:>14}",
        "policy", "billing", "warm", "cold", "naive", "warm saves"
    );
    for warm in runs.iter().filter(|r| r.case == SeedCase::Warm) {
        let cell = |case: SeedCase| {
            runs.iter()
                .find(|r| r.case == case && r.policy == warm.policy && r.billing == warm.billing)
                .map_or(0.0, |r| r.forks.value())
        };
        let _ = writeln!(
            out,
            "{:<16} {:<10} {:>12.1} {:>12.1} {:>12.1} {:>13.1}%",
            warm.policy.name(),
            warm.billing.name(),
            cell(SeedCase::Warm),
            cell(SeedCase::Cold),
            cell(SeedCase::Naive),
            100.0 * savings(warm, naive_of(runs, warm))
        );
    }
    let _ = writeln!(out, "\nprices of {prices_date}; token counts declared by the example's blocks");
    out
}

#[derive(serde::Serialize)]
struct SeedRow {
    case: &'static str,
    policy: &'static str,
    billing: &'static str,
    requests: usize,
    read_tokens: u64,
    write_tokens: u64,
    uncached_tokens: u64,
    forks_token_equivalents: String,
    naive_token_equivalents: String,
    savings: String,
}

/// The comparison as CSV, one row per case × policy × billing.
#[allow(clippy::expect_used)] // CSV written from UTF-8 strings is UTF-8
pub fn seed_example_csv(runs: &[SeedRun]) -> Result<String, csv::Error> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    for run in runs {
        let naive = naive_of(runs, run);
        let usage = run.report.totals.usage;
        writer.serialize(SeedRow {
            case: run.case.name(),
            policy: run.policy.name(),
            billing: run.billing.name(),
            requests: run.report.records.len(),
            read_tokens: usage.cache_read_input_tokens,
            write_tokens: usage.cache_creation_input_tokens,
            uncached_tokens: usage.input_tokens,
            forks_token_equivalents: format!("{:.3}", run.forks.value()),
            naive_token_equivalents: format!("{:.3}", naive.map_or(0.0, |n| n.forks.value())),
            savings: format!("{:.4}", savings(run, naive)),
        })?;
    }
    let bytes = writer.into_inner().map_err(|e| e.into_error())?;
    Ok(String::from_utf8(bytes).expect("csv output is UTF-8"))
}

/// The `demo --json` document: the seed example, the scenario suite and the mistakes, with the
/// files written (`files`, as given). Usage objects have the API's keys, money is `cost_usd`,
/// savings are fractions.
#[allow(clippy::expect_used)] // strings, integers and finite floats: serializing cannot fail
pub fn demo_json(runs: &[SeedRun], suite: &[forkcache_scenario::SuiteRun], files: &[String]) -> String {
    let json = json!({
        "seed_example": runs.iter().map(|run| seed_run_json(runs, run)).collect::<Vec<_>>(),
        "scenarios": suite.iter().map(suite_run_json).collect::<Vec<_>>(),
        "mistakes": forkcache_scenario::MISTAKES.iter().filter_map(|m| mistake_json(suite, m)).collect::<Vec<_>>(),
        "files": files,
    });
    serde_json::to_string(&json).expect("the demo serializes")
}

fn seed_run_json(runs: &[SeedRun], run: &SeedRun) -> Value {
    let naive = naive_of(runs, run);
    json!({
        "case": run.case.name(), "policy": run.policy.name(), "billing": run.billing.name(),
        "requests": run.report.records.len(), "usage": run.report.totals.usage,
        "cost_usd": run.report.totals.cost.usd(),
        "forks_token_equivalents": run.forks.value(),
        "naive_token_equivalents": naive.map_or(0.0, |n| n.forks.value()),
        "savings": round6(savings(run, naive)),
    })
}

fn suite_run_json(run: &forkcache_scenario::SuiteRun) -> Value {
    let t = &run.report.totals;
    json!({
        "scenario": run.fixture.name, "seed": run.report.seed, "requests": t.requests, "usage": t.usage,
        "cost_usd": usd(t.cost_nanousd), "naive_cost_usd": usd(t.naive_nanousd),
        "token_equivalents": t.token_equivalents.value(), "savings": round6(t.savings()),
        "hit_rate": round6(t.hit_rate()),
    })
}

fn mistake_json(suite: &[forkcache_scenario::SuiteRun], m: &forkcache_scenario::Mistake) -> Option<Value> {
    let totals = |name: &str| suite.iter().find(|run| run.fixture.name == name).map(|run| &run.report.totals);
    let (bad, good) = (totals(m.mistake)?, totals(m.correct)?);
    Some(json!({
        "mistake": m.name, "what": m.what, "mistake_scenario": m.mistake, "correct_scenario": m.correct,
        "mistake_cost_usd": usd(bad.cost_nanousd), "correct_cost_usd": usd(good.cost_nanousd),
        "multiplier": if good.cost_nanousd > 0 { round6(bad.cost_nanousd as f64 / good.cost_nanousd as f64) } else { 0.0 },
    }))
}

/// Nano-dollars as dollars (display and JSON only; sums stay integers).
fn usd(nanousd: u64) -> f64 {
    nanousd as f64 / 1e9
}

fn round6(value: f64) -> f64 {
    (value * 1e6).round() / 1e6
}
