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
use forkcache_engine::endpoint::{EndpointConfig, Record};
use forkcache_ingest::replay::{ReplayConfig, ReplayError, ReplayReport, replay};

use crate::format;

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
    /// What the forks' requests cost, in nano-dollars (the parent's own turn excluded).
    pub forks_nanousd: u64,
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
                let forks_nanousd = fork_cost_nanousd(&report);
                runs.push(SeedRun { case, policy, billing, forks, forks_nanousd, report });
            }
        }
    }
    Ok(runs)
}

/// The forks' priced requests: the trace's last [`SEED_FORKS`] (the parent's own turn comes first).
fn fork_records(report: &ReplayReport) -> impl Iterator<Item = &Record> {
    report.records.iter().rev().take(SEED_FORKS).filter_map(|r| r.result.as_ref().ok())
}

fn fork_total(report: &ReplayReport) -> TokenEquivalents {
    TokenEquivalents(fork_records(report).map(|r| r.token_equivalents.0).sum())
}

fn fork_cost_nanousd(report: &ReplayReport) -> u64 {
    fork_records(report).map(|r| r.cost.total_nanousd()).sum()
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

/// The cache rules in words, as the table's first column says them.
fn policy_words(policy: Policy) -> &'static str {
    match policy {
        Policy::LongestPrefix => "idealised",
        Policy::Anthropic => "documented",
        Policy::Openai => "OpenAI's",
        Policy::GeminiImplicit => "Gemini's implicit",
        Policy::GeminiExplicit => "Gemini's explicit",
        Policy::Deepseek => "DeepSeek's",
    }
}

/// What a cache write costs under a billing profile, as a multiple of the input price.
fn write_price_words(billing: BillingProfile) -> &'static str {
    match billing {
        BillingProfile::Seed => "1x input",
        BillingProfile::Anthropic => "1.25x input",
    }
}

/// The comparison as a table for people: one row per cache rules × write price, what the forks
/// cost in dollars.
pub fn seed_example_table(runs: &[SeedRun], prices_date: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "The design's worked example (docs/design.md §2.5): {SEED_FORKS} forks of a 100,000-token parent"
    );
    let _ = writeln!(
        out,
        "what the forks' requests cost, in dollars ({SEED_MODEL}, prices of {prices_date}; cache reads cost 0.1x input)\n"
    );
    let _ = writeln!(
        out,
        "{:<12}  {:<18}  {:>13}  {:>14}  {:>10}  {:>23}",
        "cache rules",
        "cache writes cost",
        "parent cached",
        "nothing cached",
        "no sharing",
        "the cached parent saves"
    );
    for warm in runs.iter().filter(|r| r.case == SeedCase::Warm) {
        let cost = |case: SeedCase| {
            runs.iter()
                .find(|r| r.case == case && r.policy == warm.policy && r.billing == warm.billing)
                .map_or(0, |r| r.forks_nanousd)
        };
        let _ = writeln!(
            out,
            "{:<12}  {:<18}  {:>13}  {:>14}  {:>10}  {:>22.1}%",
            policy_words(warm.policy),
            write_price_words(warm.billing),
            format::dollars(cost(SeedCase::Warm)),
            format::dollars(cost(SeedCase::Cold)),
            format::dollars(cost(SeedCase::Naive)),
            100.0 * savings(warm, naive_of(runs, warm))
        );
    }
    out.push_str(concat!(
        "\nidealised: every prefix is cached and the longest one read (the design's model); documented: the\n",
        "API's rules, writes only at cache markers. Writes at 1x input are the design's arithmetic, 1.25x\n",
        "the API's 5-minute price. Token counts are declared by the example's blocks.\n",
    ));
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

/// A percentage floored to two decimals: 99.98% must not print as 100%, which would claim the
/// forks are the same bytes.
fn floored_pct(pct: f64) -> String {
    format!("{:.2}%", (pct * 100.0).floor() / 100.0)
}

/// Per spawn, the share of bytes its forks have in common; "not measured" where the scenario
/// declares its blocks' sizes (the bytes are stand-in text, so their share says nothing).
fn forks_in_common(report: &forkcache_scenario::ScenarioReport) -> String {
    let checks: Vec<_> = report.spawns.iter().filter_map(|s| s.verification.as_ref()).collect();
    let declared = checks.iter().filter(|c| c.declared_sizes).count();
    match (checks.len(), declared) {
        (0, _) => "-".to_string(),
        (1, 1) => "not measured".to_string(),
        (n, d) if n == d => format!("not measured ({n} spawns)"),
        _ => {
            checks
                .iter()
                .map(|c| {
                    if c.declared_sizes { "not measured".to_string() } else { floored_pct(c.identical_pct()) }
                })
                .collect::<Vec<_>>()
                .join(", ")
        }
    }
}

/// One line per fixture scenario: what it costs with the cache and without, for people.
pub fn suite_table(runs: &[forkcache_scenario::SuiteRun]) -> String {
    use std::fmt::Write as _;
    let mut out = String::from(
        "Scenario suite (fixtures/scenarios): what all of each scenario's requests cost, in dollars\n\n",
    );
    let _ = writeln!(
        out,
        "{:<36} {:>8}  {:>9}  {:>15}  {:>6}  {:>15}  {:>15}  forks' bytes in common",
        "scenario", "requests", "cost", "without sharing", "saved", "read from cache", "context written"
    );
    for run in runs {
        let t = &run.report.totals;
        let _ = writeln!(
            out,
            "{:<36} {:>8}  {:>9}  {:>15}  {:>5.1}%  {:>14.1}%  {:>14.2}x  {}",
            run.fixture.name,
            t.requests,
            format::dollars(t.cost_nanousd),
            format::dollars(t.naive_nanousd),
            t.savings() * 100.0,
            t.hit_rate() * 100.0,
            t.rewrite_factor(),
            forks_in_common(&run.report)
        );
    }
    out.push_str(concat!(
        "\nwithout sharing: every request priced alone, nothing cached. read from cache: the share of input\n",
        "tokens read from the cache. context written: tokens written to the cache ÷ the largest context\n",
        "(1.00x: written once). forks' bytes in common: per spawn, the forks' common byte prefix ÷ the\n",
        "longest fork; not measured where the scenario declares its blocks' sizes, since those bytes are\n",
        "stand-in text, not the tokens priced.\n",
    ));
    out
}

/// One line per anti-pattern: the whole scenario's cost against its correct twin's, and the
/// cache misses it causes.
pub fn mistakes_table(runs: &[forkcache_scenario::SuiteRun]) -> String {
    use std::fmt::Write as _;
    let mut out = String::from(
        "What each mistake costs: the whole scenario in dollars, done right and with the mistake\n\n",
    );
    let _ = writeln!(
        out,
        "{:<20} {:>10}  {:>16}  {:>7}  {:<56} cache misses, why",
        "mistake", "done right", "with the mistake", "extra", "what"
    );
    let report_of = |name: &str| runs.iter().find(|run| run.fixture.name == name).map(|run| &run.report);
    for m in forkcache_scenario::MISTAKES {
        let (Some(bad), Some(good)) = (report_of(m.mistake), report_of(m.correct)) else {
            continue;
        };
        let (bad_cost, good_cost) = (bad.totals.cost_nanousd, good.totals.cost_nanousd);
        let extra = if good_cost > 0 { 100.0 * (bad_cost as f64 / good_cost as f64 - 1.0) } else { 0.0 };
        let misses = bad.totals.misses.iter().map(|(cause, n)| format!("{n} {}", cause.plain()));
        let _ = writeln!(
            out,
            "{:<20} {:>10}  {:>16}  {:>6.1}%  {:<56} {}",
            m.name,
            format::dollars(good_cost),
            format::dollars(bad_cost),
            extra,
            m.what,
            misses.collect::<Vec<_>>().join(", ")
        );
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_is_floored_never_rounded_up_to_a_hundred() {
        // 6,885 of 6,888 bytes = 99.956…%: rounding to one decimal would print 100.0%.
        assert_eq!(floored_pct(100.0 * 6_885.0 / 6_888.0), "99.95%");
        assert_eq!(floored_pct(100.0), "100.00%");
        assert_eq!(floored_pct(99.999), "99.99%");
    }

    #[test]
    fn the_printed_tables_speak_dollars_and_plain_words() {
        let prices = PriceTable::builtin();
        let seed = seed_example_table(&seed_example(&prices).unwrap(), &prices.date);
        let suite = forkcache_scenario::run_suite(&prices).unwrap();
        let printed = [seed.as_str(), &suite_table(&suite), &mistakes_table(&suite)].concat();
        // Dollars, not token-equivalents; words, not the CLI's profile names or column codes.
        for jargon in [
            "token-equivalent",
            "Seed ",
            " seed ",
            "rewrite",
            "naive",
            "declared declared",
            "forks identical",
            "prefix_changed",
            "not_yet_visible",
            "lookback_exceeded",
        ] {
            assert!(!printed.contains(jargon), "{jargon:?} in:\n{printed}");
        }
        assert!(printed.contains("cache writes cost") && printed.contains("1.25x input"));
        // The warm example's forks under the documented rules and the API's prices: 33,000
        // token-equivalents at Sonnet 4.6's $3 per million input tokens.
        assert!(seed.contains("$0.0990"));
        assert!(printed.contains("not measured"));
    }
}
