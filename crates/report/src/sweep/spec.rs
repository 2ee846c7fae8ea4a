//! The sweep file (`fixtures/sweeps/*.json`): a base scenario, the fork or named sub-agent each
//! cell spawns, and the grid. Every axis left out holds the base's value, so
//! `{"grid": {"forks": [1, 2, 4]}}` is a complete sweep.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use forkcache_engine::billing::BillingProfile;
use forkcache_engine::cache::Policy;
use forkcache_engine::prompt::Ttl;
use forkcache_engine::provider::Provider;
use forkcache_scenario::agent::{ForkVariant, NamedAgent};
use forkcache_scenario::{EventSpec, ForkSpec, IdleSpec, Launch, NamedSpec, ScenarioSpec, TurnSpec};

use super::SweepError;

/// A whole sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SweepSpec {
    /// Short name, used in reports. Default `sweep`.
    pub name: String,
    /// What it shows.
    pub description: String,
    /// What every cell starts from: model, agent, seed, `bill_output`, `history.generate` (the
    /// shape of the parent's turn). The grid sets `policy`, `billing`, `ttl`, the history and the
    /// timeline; an axis left out of the grid takes its one value from here.
    pub scenario: ScenarioSpec,
    /// The spawn of a `fork` cell; the grid sets `count`, `variant`, `launch` and
    /// `mark_placeholders`.
    pub fork: ForkSpec,
    /// What a `named` cell calls once per sub-agent (the grid's `forks` is how many).
    /// Default: general-purpose, a 1,000-token brief, one request, a 500-token report.
    pub named: NamedSpec,
    /// The axes.
    pub grid: Grid,
}

impl Default for SweepSpec {
    fn default() -> Self {
        SweepSpec {
            name: "sweep".into(),
            description: String::new(),
            scenario: ScenarioSpec::default(),
            fork: ForkSpec::default(),
            named: NamedSpec {
                agent: NamedAgent::GeneralPurpose,
                prompt: "Carry out this part of the plan and report back.".into(),
                prompt_tokens: Some(1_000),
                turns: 1,
                result_tokens: 500,
                ..NamedSpec::default()
            },
            grid: Grid::default(),
        }
    }
}

/// How the parent delegates in a cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Subagents {
    /// N forks that inherit the parent's context and share its cache prefix.
    Fork,
    /// N named sub-agents, one after another, each with fresh messages and its own prompt.
    Named,
}

impl Subagents {
    /// Kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            Subagents::Fork => "fork",
            Subagents::Named => "named",
        }
    }
}

/// The grid's axes, each a list of values; an axis left out holds one default value. Cells are
/// the cartesian product, enumerated with the last axis (`idle_ms`) fastest. A `named` cell
/// ignores `variant`, `launch` and `mark_placeholders`, so it appears once, under their first
/// values.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Grid {
    /// Tokens of conversation history before the parent's turn (system and tools come on top).
    /// Default `[100000]`.
    pub history_tokens: Option<Vec<u64>>,
    /// Sub-agents spawned (forks, or named sub-agents). Default `[3]`.
    pub forks: Option<Vec<u32>>,
    /// `fork` or `named`. Default `["fork"]`.
    pub subagents: Option<Vec<Subagents>>,
    /// The provider whose cache, prices and models a cell runs on. Default: the base
    /// scenario's. A provider with rules of its own sets the policy, so with one of those the
    /// `policy` axis may hold one value only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<Vec<Provider>>,
    /// Cache policy. Default: the base scenario's.
    pub policy: Option<Vec<Policy>>,
    /// Billing profile. Default: the base scenario's.
    pub billing: Option<Vec<BillingProfile>>,
    /// Which tool uses each fork keeps. Default: the fork template's.
    pub variant: Option<Vec<ForkVariant>>,
    /// How forks start. Default: the fork template's.
    pub launch: Option<Vec<Launch>>,
    /// A marker on the last placeholder too. Default: the fork template's.
    pub mark_placeholders: Option<Vec<bool>>,
    /// Every marker's TTL. Default: the base scenario's.
    pub ttl: Option<Vec<Ttl>>,
    /// Idle milliseconds between the parent's first turn and the spawn. Default `[0]`.
    pub idle_ms: Option<Vec<u64>>,
}

/// The grid with every axis resolved to a non-empty list.
#[derive(Clone, Debug, PartialEq)]
pub struct Axes {
    /// See [`Grid::history_tokens`].
    pub history_tokens: Vec<u64>,
    /// See [`Grid::forks`].
    pub forks: Vec<u32>,
    /// See [`Grid::subagents`].
    pub subagents: Vec<Subagents>,
    /// See [`Grid::provider`].
    pub provider: Vec<Provider>,
    /// See [`Grid::policy`].
    pub policy: Vec<Policy>,
    /// See [`Grid::billing`].
    pub billing: Vec<BillingProfile>,
    /// See [`Grid::variant`].
    pub variant: Vec<ForkVariant>,
    /// See [`Grid::launch`].
    pub launch: Vec<Launch>,
    /// See [`Grid::mark_placeholders`].
    pub mark_placeholders: Vec<bool>,
    /// See [`Grid::ttl`].
    pub ttl: Vec<Ttl>,
    /// See [`Grid::idle_ms`].
    pub idle_ms: Vec<u64>,
}

/// Number of axes, in enumeration order.
const AXES: usize = 11;

impl Axes {
    fn lengths(&self) -> [usize; AXES] {
        [
            self.history_tokens.len(),
            self.forks.len(),
            self.subagents.len(),
            self.provider.len(),
            self.policy.len(),
            self.billing.len(),
            self.variant.len(),
            self.launch.len(),
            self.mark_placeholders.len(),
            self.ttl.len(),
            self.idle_ms.len(),
        ]
    }

    /// The cell at one position of the odometer; `None` for the duplicates a `named` cell would
    /// make over the fork-only axes.
    fn cell(&self, at: &[usize; AXES], index: usize) -> Option<SweepCell> {
        let subagents = self.subagents[at[2]];
        let forked = subagents == Subagents::Fork;
        if !forked && (at[6] > 0 || at[7] > 0 || at[8] > 0) {
            return None;
        }
        Some(SweepCell {
            index,
            history_tokens: self.history_tokens[at[0]],
            forks: self.forks[at[1]],
            subagents,
            provider: self.provider[at[3]],
            policy: self.provider[at[3]].policy_over(self.policy[at[4]]),
            billing: self.billing[at[5]],
            variant: forked.then(|| self.variant[at[6]]),
            launch: forked.then(|| self.launch[at[7]]),
            mark_placeholders: forked.then(|| self.mark_placeholders[at[8]]),
            ttl: self.ttl[at[9]],
            idle_ms: self.idle_ms[at[10]],
        })
    }
}

/// Turns the odometer one step (last axis fastest); false once every cell was visited.
fn advance(at: &mut [usize; AXES], lengths: &[usize; AXES]) -> bool {
    for axis in (0..AXES).rev() {
        at[axis] += 1;
        if at[axis] < lengths[axis] {
            return true;
        }
        at[axis] = 0;
    }
    false
}

/// One point of the grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SweepCell {
    /// 0-based position in the whole grid (shards keep it).
    pub index: usize,
    /// Tokens of history before the parent's turn.
    pub history_tokens: u64,
    /// Sub-agents spawned.
    pub forks: u32,
    /// Forks or named sub-agents.
    pub subagents: Subagents,
    /// The provider.
    pub provider: Provider,
    /// Cache policy (the provider's, when it has rules of its own).
    pub policy: Policy,
    /// Billing profile.
    pub billing: BillingProfile,
    /// Fork variant (`None` for named sub-agents).
    pub variant: Option<ForkVariant>,
    /// Fork launch (`None` for named sub-agents).
    pub launch: Option<Launch>,
    /// Marker on the last placeholder (`None` for named sub-agents).
    pub mark_placeholders: Option<bool>,
    /// Marker TTL.
    pub ttl: Ttl,
    /// Idle milliseconds before the spawn.
    pub idle_ms: u64,
}

impl SweepCell {
    /// The same cell on `provider`: its policy too, when the provider has rules of its own.
    pub fn on_provider(self, provider: Provider) -> SweepCell {
        SweepCell { provider, policy: provider.policy_over(self.policy), ..self }
    }
}

/// History is written as alternating user and assistant messages of at most this many tokens
/// each (declared sizes, so the total is exact at any scale).
pub const HISTORY_BLOCK_TOKENS: u64 = 10_000;

/// Limits that keep a typo from asking for more work than any machine can do.
const MAX_CELLS: usize = 1_000_000;
const MAX_FORKS: u32 = 1_024;
const MAX_HISTORY_TOKENS: u64 = 100_000_000;

impl SweepSpec {
    /// The default grid (`fixtures/sweeps/default.json`), compiled in.
    #[allow(clippy::expect_used)] // the compiled-in default grid is checked by the tests
    pub fn default_grid() -> SweepSpec {
        SweepSpec::from_json(DEFAULT_SWEEP_JSON).expect("the default sweep is valid")
    }

    /// The cost-curve grid (`fixtures/sweeps/cost-curves.json`), compiled in.
    #[allow(clippy::expect_used)] // the compiled-in cost-curve grid is checked by the tests
    pub fn cost_curves() -> SweepSpec {
        SweepSpec::from_json(COST_CURVES_SWEEP_JSON).expect("the cost-curve sweep is valid")
    }

    /// The providers grid (`fixtures/sweeps/providers.json`), compiled in.
    #[allow(clippy::expect_used)] // the compiled-in providers grid is checked by the tests
    pub fn providers() -> SweepSpec {
        SweepSpec::from_json(PROVIDERS_SWEEP_JSON).expect("the providers sweep is valid")
    }

    /// Parses a sweep file; errors name the field path and what was expected.
    pub fn from_json(text: &str) -> Result<SweepSpec, SweepError> {
        let spec: SweepSpec = forkcache_wire::json::read_object(text, "sweep")
            .map_err(|err| SweepError::spec(err.path.clone(), err.message_at()))?;
        spec.validate()?;
        Ok(spec)
    }

    /// Checks what serde cannot: what the grid owns is left to it, axes are non-empty and
    /// distinct, sizes are within limits.
    pub fn validate(&self) -> Result<(), SweepError> {
        self.validate_base()?;
        self.validate_axes()?;
        let cells = self.axes().lengths().iter().product::<usize>();
        if cells > MAX_CELLS {
            return Err(SweepError::spec("grid", format!("{cells} cells; expected at most {MAX_CELLS}")));
        }
        Ok(())
    }

    fn validate_base(&self) -> Result<(), SweepError> {
        let owned = |field: &str, what: &str| {
            SweepError::spec(field, format!("the grid sets {what}; leave this field out"))
        };
        if self.scenario.history.messages.is_some() {
            return Err(owned("scenario.history.messages", "the history (`grid.history_tokens`)"));
        }
        if self.scenario.history.target_tokens.is_some() {
            return Err(owned(
                "scenario.history.target_tokens",
                "the history's size (`grid.history_tokens`)",
            ));
        }
        if !self.scenario.timeline.is_empty() {
            return Err(owned("scenario.timeline", "the timeline (a turn, an idle gap, the spawn)"));
        }
        if !self.fork.directives.is_empty() {
            return Err(owned("fork.directives", "how many forks (`grid.forks`)"));
        }
        if self.fork.count.is_some() {
            return Err(owned("fork.count", "how many forks (`grid.forks`)"));
        }
        if self.fork.child_turns == 0 {
            return Err(SweepError::spec("fork.child_turns", "expected at least 1"));
        }
        if self.named.turns == 0 {
            return Err(SweepError::spec("named.turns", "expected at least 1"));
        }
        self.scenario.validate().map_err(|err| match err {
            forkcache_scenario::ScenarioError::Spec { path, message } => {
                SweepError::spec(format!("scenario.{path}"), message)
            }
            other => SweepError::spec("scenario", other.to_string()),
        })
    }

    fn validate_axes(&self) -> Result<(), SweepError> {
        let g = &self.grid;
        check_axis("grid.history_tokens", g.history_tokens.as_deref(), |&t| {
            (1..=MAX_HISTORY_TOKENS)
                .contains(&t)
                .then_some(())
                .ok_or(format!("expected token counts from 1 to {MAX_HISTORY_TOKENS}, got {t}"))
        })?;
        check_axis("grid.forks", g.forks.as_deref(), |&n| {
            (1..=MAX_FORKS)
                .contains(&n)
                .then_some(())
                .ok_or(format!("expected 1 to {MAX_FORKS} forks, got {n}"))
        })?;
        check_axis("grid.subagents", g.subagents.as_deref(), any)?;
        check_axis("grid.provider", g.provider.as_deref(), any)?;
        check_axis("grid.policy", g.policy.as_deref(), any)?;
        self.check_provider_sets_policy()?;
        check_axis("grid.billing", g.billing.as_deref(), any)?;
        check_axis("grid.variant", g.variant.as_deref(), any)?;
        check_axis("grid.launch", g.launch.as_deref(), any)?;
        check_axis("grid.mark_placeholders", g.mark_placeholders.as_deref(), any)?;
        check_axis("grid.ttl", g.ttl.as_deref(), any)?;
        check_axis("grid.idle_ms", g.idle_ms.as_deref(), any)
    }

    /// A provider with cache rules of its own decides the policy: a `policy` axis beside it
    /// would run the same cells twice under one name.
    fn check_provider_sets_policy(&self) -> Result<(), SweepError> {
        let axes = self.axes();
        let own_rules = axes.provider.iter().find(|provider| provider.policy() != Policy::Anthropic);
        match own_rules {
            Some(provider) if axes.policy.len() > 1 => Err(SweepError::spec(
                "grid.policy",
                format!(
                    "the provider {provider} (in grid.provider) brings its own cache rules; give one \
                     policy, or run the providers with Anthropic's rules (anthropic, bedrock) alone"
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Every axis resolved: the grid's list, or the one value the base holds.
    pub fn axes(&self) -> Axes {
        let g = &self.grid;
        Axes {
            history_tokens: g.history_tokens.clone().unwrap_or_else(|| vec![100_000]),
            forks: g.forks.clone().unwrap_or_else(|| vec![3]),
            subagents: g.subagents.clone().unwrap_or_else(|| vec![Subagents::Fork]),
            provider: g.provider.clone().unwrap_or_else(|| vec![self.scenario.provider]),
            policy: g.policy.clone().unwrap_or_else(|| vec![self.scenario.policy]),
            billing: g.billing.clone().unwrap_or_else(|| vec![self.scenario.billing]),
            variant: g.variant.clone().unwrap_or_else(|| vec![self.fork.variant]),
            launch: g.launch.clone().unwrap_or_else(|| vec![self.fork.launch]),
            mark_placeholders: g
                .mark_placeholders
                .clone()
                .unwrap_or_else(|| vec![self.fork.mark_placeholders]),
            ttl: g.ttl.clone().unwrap_or_else(|| vec![self.scenario.ttl]),
            idle_ms: g.idle_ms.clone().unwrap_or_else(|| vec![0]),
        }
    }

    /// Every cell, in grid order.
    pub fn cells(&self) -> Vec<SweepCell> {
        let axes = self.axes();
        let lengths = axes.lengths();
        let mut at = [0usize; AXES];
        let mut cells = Vec::new();
        loop {
            if let Some(cell) = axes.cell(&at, cells.len()) {
                cells.push(cell);
            }
            if !advance(&mut at, &lengths) {
                return cells;
            }
        }
    }

    /// The scenario one cell runs: the base with the cell's settings, a history of exactly
    /// `history_tokens`, and the timeline turn → idle gap → spawn.
    pub fn scenario_for(&self, cell: &SweepCell) -> ScenarioSpec {
        let mut spec = self.scenario.clone();
        spec.name = format!("{} cell {}", self.name, cell.index);
        spec.provider = cell.provider;
        spec.policy = cell.policy;
        spec.billing = cell.billing;
        spec.ttl = cell.ttl;
        spec.history.messages = Some(history_messages(cell.history_tokens));
        spec.timeline = self.timeline(cell);
        spec
    }

    fn timeline(&self, cell: &SweepCell) -> Vec<EventSpec> {
        let mut events = vec![EventSpec::Turn(TurnSpec::default())];
        if cell.idle_ms > 0 {
            events.push(EventSpec::Idle(IdleSpec { ms: cell.idle_ms }));
        }
        match cell.subagents {
            Subagents::Fork => events.push(EventSpec::Fork(ForkSpec {
                count: Some(cell.forks),
                variant: cell.variant.unwrap_or(self.fork.variant),
                launch: cell.launch.unwrap_or(self.fork.launch),
                mark_placeholders: cell.mark_placeholders.unwrap_or(self.fork.mark_placeholders),
                ..self.fork.clone()
            })),
            Subagents::Named => events.extend((0..cell.forks).map(|task| {
                // Distinct tasks: identical prompts would read each other's whole request.
                let prompt = format!("Task {} of {}: {}", task + 1, cell.forks, self.named.prompt);
                EventSpec::Named(NamedSpec { prompt, ..self.named.clone() })
            })),
        }
        events
    }
}

const DEFAULT_SWEEP_JSON: &str = include_str!("../../../../fixtures/sweeps/default.json");
const COST_CURVES_SWEEP_JSON: &str = include_str!("../../../../fixtures/sweeps/cost-curves.json");
const PROVIDERS_SWEEP_JSON: &str = include_str!("../../../../fixtures/sweeps/providers.json");

/// Every value of a categorical axis is acceptable (serde already checked the spelling).
fn any<T>(_: &T) -> Result<(), String> {
    Ok(())
}

/// An axis given must be non-empty, its values distinct and each acceptable.
fn check_axis<T: PartialEq + Serialize>(
    path: &str,
    values: Option<&[T]>,
    acceptable: impl Fn(&T) -> Result<(), String>,
) -> Result<(), SweepError> {
    let Some(values) = values else { return Ok(()) };
    if values.is_empty() {
        return Err(SweepError::spec(
            path,
            "expected at least one value (leave the axis out for its default)",
        ));
    }
    for (index, value) in values.iter().enumerate() {
        acceptable(value).map_err(|message| SweepError::spec(format!("{path}[{index}]"), message))?;
        if values[..index].contains(value) {
            return Err(SweepError::spec(
                format!("{path}[{index}]"),
                format!("{} is listed twice", serde_json::to_string(value).unwrap_or_default()),
            ));
        }
    }
    Ok(())
}

/// `tokens` of history as alternating user and assistant text messages (odd in number, so the
/// last is the user's), each at most [`HISTORY_BLOCK_TOKENS`], sizes declared.
pub fn history_messages(tokens: u64) -> Vec<Value> {
    let mut parts = tokens.div_ceil(HISTORY_BLOCK_TOKENS).max(1);
    if parts % 2 == 0 {
        parts += 1;
    }
    (0..parts)
        .map(|part| {
            let size = tokens / parts + u64::from(part < tokens % parts);
            let role = if part % 2 == 0 { "user" } else { "assistant" };
            let text = format!("<history part {} of {parts}>", part + 1);
            json!({"role": role, "content": [{"type": "text", "text": text, "forkcache_tokens": size}]})
        })
        .collect()
}
