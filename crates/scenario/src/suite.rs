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
