//! The built-in fixture suite (`fixtures/scenarios/`), compiled in so `demo` and the tests run
//! from anywhere.

/// One fixture file.
#[derive(Clone, Copy, Debug)]
pub struct Fixture {
    /// File stem.
    pub name: &'static str,
    /// The file's text.
    pub json: &'static str,
}

macro_rules! fixtures {
    ($($name:literal),* $(,)?) => {
        /// Every fixture, in demo order.
        pub const FIXTURES: &[Fixture] = &[
            $(Fixture { name: $name, json: include_str!(concat!("../../../fixtures/scenarios/", $name, ".json")) }),*
        ];
    };
}

fixtures![
    "seed-warm",
    "seed-cold",
    "session",
    "readme-example",
    "recursion-guard",
    "claim-all-tool-uses",
    "claim-own-tool-use",
    "forks",
    "forks-own-tool-use",
    "forks-thinking",
    "forks-replacement",
    "forks-after-flag-flip",
    "main-loop",
    "sidecar",
    "reminder",
    "idle-within-ttl",
    "wide-turn",
    "agent-types",
    "launch-sync",
    "launch-sync-past-ttl",
    "launch-background",
    "launch-remote",
    "launch-resume",
    "launch-worktree",
    "teaching-subagent",
    "agent-memory-system-start",
    "agent-memory-system-end",
    "agent-memory-first-message",
    "team",
    "team-idle-past-ttl",
    "mistake-rerender-system-in-forks",
    "mistake-fork-tools-filtered",
    "mistake-fork-tools-reordered",
    "mistake-fork-max-output-tokens",
    "mistake-fresh-replacement-state",
    "mistake-real-results",
    "mistake-timestamp-in-system",
    "mistake-unstable-schema-key-order",
    "mistake-sidecar-recollects",
    "mistake-breakpoint-on-varying-block",
    "mistake-parallel-launch",
    "mistake-idle-past-ttl",
    "mistake-no-lookback-guard",
];

/// An anti-pattern: its fixture beside the correct twin.
#[derive(Clone, Copy, Debug)]
pub struct Mistake {
    /// Short name.
    pub name: &'static str,
    /// What goes wrong.
    pub what: &'static str,
    /// The fixture with the mistake.
    pub mistake: &'static str,
    /// The fixture doing it right.
    pub correct: &'static str,
}

const fn mistake(
    name: &'static str,
    what: &'static str,
    mistake: &'static str,
    correct: &'static str,
) -> Mistake {
    Mistake { name, what, mistake, correct }
}

/// Every anti-pattern pair, in DESIGN §3's order.
pub const MISTAKES: &[Mistake] = &[
    mistake(
        "rerender-system",
        "forks re-render the system prompt after a flag flip",
        "mistake-rerender-system-in-forks",
        "forks-after-flag-flip",
    ),
    mistake("tools-filtered", "forks drop the Agent tool", "mistake-fork-tools-filtered", "forks"),
    mistake("tools-reordered", "forks reorder the tools", "mistake-fork-tools-reordered", "forks"),
    mistake(
        "max-output-tokens",
        "forks set max_tokens, clamping the thinking budget",
        "mistake-fork-max-output-tokens",
        "forks-thinking",
    ),
    mistake(
        "fresh-replacement",
        "forks decide tool-result replacement afresh",
        "mistake-fresh-replacement-state",
        "forks-replacement",
    ),
    mistake(
        "real-results",
        "forks send real results instead of placeholders",
        "mistake-real-results",
        "forks",
    ),
    mistake("timestamp", "the system prompt carries the time", "mistake-timestamp-in-system", "main-loop"),
    mistake(
        "schema-key-order",
        "a tool schema's key order changes per request",
        "mistake-unstable-schema-key-order",
        "main-loop",
    ),
    mistake(
        "sidecar-recollects",
        "a sidecar re-collects its parameters after a flag flip",
        "mistake-sidecar-recollects",
        "sidecar",
    ),
    mistake(
        "varying-breakpoint",
        "the marker sits on a block that varies per request",
        "mistake-breakpoint-on-varying-block",
        "reminder",
    ),
    mistake("parallel-launch", "forks launch in parallel", "mistake-parallel-launch", "forks"),
    mistake(
        "idle-past-ttl",
        "an idle gap outlasts the 5-minute TTL",
        "mistake-idle-past-ttl",
        "idle-within-ttl",
    ),
    mistake(
        "lookback",
        "more than 20 blocks appended in one turn, no extra marker",
        "mistake-no-lookback-guard",
        "wide-turn",
    ),
];

/// The fixture named `name`.
pub fn fixture(name: &str) -> Option<&'static Fixture> {
    FIXTURES.iter().find(|f| f.name == name)
}

/// One fixture's run.
#[derive(Clone, Debug)]
pub struct SuiteRun {
    /// Which fixture.
    pub fixture: &'static Fixture,
    /// What it gave.
    pub report: super::ScenarioReport,
}

/// Runs every fixture with its own settings.
pub fn run_suite(
    prices: &forkcache_engine::billing::PriceTable,
) -> Result<Vec<SuiteRun>, super::ScenarioError> {
    run_suite_seeded(prices, None)
}

/// Runs every fixture with its own settings, but every one on `seed` when given (`--seed`).
pub fn run_suite_seeded(
    prices: &forkcache_engine::billing::PriceTable,
    seed: Option<u64>,
) -> Result<Vec<SuiteRun>, super::ScenarioError> {
    FIXTURES
        .iter()
        .map(|fixture| {
            let mut spec =
                super::ScenarioSpec::from_json(fixture.json).map_err(|e| in_fixture(fixture, e))?;
            spec.seed = seed.unwrap_or(spec.seed);
            let report = super::run(&spec, &super::RunConfig::for_spec(&spec), prices)
                .map_err(|e| in_fixture(fixture, e))?;
            Ok(SuiteRun { fixture, report })
        })
        .collect()
}

fn in_fixture(fixture: &Fixture, error: super::ScenarioError) -> super::ScenarioError {
    super::ScenarioError::Spec {
        path: format!("fixtures/scenarios/{}.json", fixture.name),
        message: error.to_string(),
    }
}

fn report_of<'r>(runs: &'r [SuiteRun], name: &str) -> Option<&'r super::ScenarioReport> {
    runs.iter().find(|run| run.fixture.name == name).map(|run| &run.report)
}

/// A percentage floored to two decimals: 99.98% must not print as 100%, which would claim the
/// forks are the same bytes.
fn floored_pct(pct: f64) -> String {
    format!("{:.2}%", (pct * 100.0).floor() / 100.0)
}

/// One line per fixture: what sharing saves.
pub fn suite_table(runs: &[SuiteRun]) -> String {
    use std::fmt::Write as _;
    let mut out = String::from("Scenario suite (fixtures/scenarios): token-equivalents of every request\n\n");
    let _ = writeln!(
        out,
        "{:<36} {:>5} {:>12} {:>12} {:>7} {:>8} {:>8}  forks identical",
        "scenario", "reqs", "actual", "naive", "saves", "hit", "rewrite"
    );
    for run in runs {
        let t = &run.report.totals;
        let identical = run
            .report
            .spawns
            .iter()
            .filter_map(|s| s.verification.as_ref())
            .map(|c| if c.declared_sizes { "declared".to_string() } else { floored_pct(c.identical_pct()) })
            .collect::<Vec<_>>()
            .join(" ");
        let _ = writeln!(
            out,
            "{:<36} {:>5} {:>12.1} {:>12.1} {:>6.1}% {:>7.1}% {:>7.2}x  {}",
            run.fixture.name,
            t.requests,
            t.token_equivalents.value(),
            t.naive_token_equivalents.value(),
            t.savings() * 100.0,
            t.hit_rate() * 100.0,
            t.rewrite_factor(),
            if identical.is_empty() { "-".to_string() } else { identical }
        );
    }
    out.push_str(
        "\nforks identical: per spawn, the forks' common byte prefix ÷ the longest fork; `declared` where block\nsizes are declared, since those bytes are stand-in text, not the tokens priced.\n",
    );
    out
}

/// One line per anti-pattern: its cost against the correct twin's, and the misses it causes.
pub fn mistakes_table(runs: &[SuiteRun]) -> String {
    use std::fmt::Write as _;
    let mut out =
        String::from("What each mistake costs (token-equivalents, whole scenario, vs its correct twin)\n\n");
    let _ = writeln!(
        out,
        "{:<20} {:>12} {:>12} {:>8}  {:<54} misses",
        "mistake", "correct", "mistake", "extra", "what"
    );
    for m in MISTAKES {
        let (Some(bad), Some(good)) = (report_of(runs, m.mistake), report_of(runs, m.correct)) else {
            continue;
        };
        let (bad_te, good_te) = (bad.totals.token_equivalents.value(), good.totals.token_equivalents.value());
        let misses = bad
            .totals
            .misses
            .iter()
            .map(|(cause, n)| format!("{}×{}", n, cause.name()))
            .collect::<Vec<_>>()
            .join(" ");
        let _ = writeln!(
            out,
            "{:<20} {:>12.1} {:>12.1} {:>7.1}%  {:<54} {}",
            m.name,
            good_te,
            bad_te,
            if good_te > 0.0 { 100.0 * (bad_te / good_te - 1.0) } else { 0.0 },
            m.what,
            misses
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::floored_pct;

    #[test]
    fn identity_is_floored_never_rounded_up_to_a_hundred() {
        // 6,885 of 6,888 bytes = 99.956…%: rounding to one decimal would print 100.0%.
        assert_eq!(floored_pct(100.0 * 6_885.0 / 6_888.0), "99.95%");
        assert_eq!(floored_pct(100.0), "100.00%");
        assert_eq!(floored_pct(99.999), "99.99%");
    }
}
