//! The documented caps on a scenario's sizes (docs/conventions.md, "Limits"), checked before anything runs:
//! a typo such as `tool_calls: [0, 4000000000]` or a turn count of 4e9 is an error naming the
//! field, never 22 GB of allocations or a run that does not end. Every token count is also capped
//! so no sum over a run can pass 2^64.

use forkcache_engine::prompt::MAX_DECLARED_TOKENS;

use super::ScenarioError;
use super::spec::{EventSpec, GenerateSpec, ScenarioSpec, Sizes, TeamSpec};

/// Any one token size (a section, a tool, a generated block, `max_tokens`, a budget).
pub const MAX_TOKENS: u64 = MAX_DECLARED_TOKENS;
/// Tool calls in one assistant message.
pub const MAX_TOOL_CALLS: u64 = 1_000;
/// A tool's weight in `tool_mix` (their sum must fit the draw).
pub const MAX_TOOL_WEIGHT: u32 = 1_000_000;
/// Requests one event asks for (`turn.count`, `fork.child_turns`, `named.turns`).
pub const MAX_EVENT_REQUESTS: u32 = 100_000;
/// Requests the whole timeline may plan (each fork child's turns counted).
pub const MAX_PLANNED_REQUESTS: u64 = 1_000_000;
/// Any one duration, in milliseconds (about 31 years).
pub const MAX_MS: u64 = 1_000_000_000_000;

/// Checks every size of `spec` against the caps; the error names the first field past one.
pub fn check(spec: &ScenarioSpec) -> Result<(), ScenarioError> {
    check_agent(spec)?;
    if let Some(generate) = &spec.history.generate {
        check_generate(generate)?;
    }
    let mut planned: u64 = 0;
    for (index, event) in spec.timeline.iter().enumerate() {
        planned = planned.saturating_add(check_event(index, event)?);
    }
    if planned > MAX_PLANNED_REQUESTS {
        return Err(over(
            "timeline",
            format!("plans {planned} requests; expected at most {MAX_PLANNED_REQUESTS}"),
        ));
    }
    Ok(())
}

fn over(path: impl Into<String>, message: impl Into<String>) -> ScenarioError {
    ScenarioError::spec(path, message)
}

/// `value` ≤ `max`, or an error naming `path`.
fn at_most(path: impl Fn() -> String, value: u64, max: u64) -> Result<(), ScenarioError> {
    if value > max {
        return Err(over(path(), format!("expected at most {max}, got {value}")));
    }
    Ok(())
}

fn tokens(path: impl Fn() -> String, value: Option<u64>) -> Result<(), ScenarioError> {
    at_most(path, value.unwrap_or(0), MAX_TOKENS)
}

fn check_agent(spec: &ScenarioSpec) -> Result<(), ScenarioError> {
    let agent = &spec.agent;
    for (index, section) in agent.system.iter().enumerate() {
        tokens(|| format!("agent.system[{index}].tokens"), section.tokens)?;
    }
    for (index, tool) in agent.tools.iter().enumerate() {
        tokens(|| format!("agent.tools[{index}].tokens"), tool.tokens)?;
    }
    for (name, value) in [
        ("max_tokens", Some(agent.max_tokens)),
        ("thinking_budget_tokens", agent.thinking_budget_tokens),
        ("reminder_tokens", agent.reminder_tokens),
        ("compaction_threshold_tokens", agent.compaction_threshold_tokens),
        ("summary_tokens", Some(agent.summary_tokens)),
        ("replacement_context_tokens", agent.replacement_context_tokens),
        ("replacement_min_result_tokens", Some(agent.replacement_min_result_tokens)),
        ("named_system_tokens", Some(agent.named_system_tokens)),
    ] {
        tokens(|| format!("agent.{name}"), value)?;
    }
    at_most(|| "agent.tool_ms".into(), agent.tool_ms, MAX_MS)?;
    tokens(|| "knobs.fork_max_output_tokens".into(), spec.knobs.fork_max_output_tokens)
}

fn check_generate(generate: &GenerateSpec) -> Result<(), ScenarioError> {
    for (name, range) in [
        ("user_tokens", generate.user_tokens),
        ("assistant_tokens", generate.assistant_tokens),
        ("tool_use_tokens", generate.tool_use_tokens),
        ("tool_result_tokens", generate.tool_result_tokens),
    ] {
        at_most(|| format!("history.generate.{name}"), range[1], MAX_TOKENS)?;
    }
    at_most(|| "history.generate.tool_calls".into(), generate.tool_calls[1], MAX_TOOL_CALLS)?;
    for (name, &weight) in &generate.tool_mix {
        at_most(|| format!("history.generate.tool_mix.{name}"), weight.into(), MAX_TOOL_WEIGHT.into())?;
    }
    Ok(())
}

/// Checks one event; returns how many requests it plans (at least).
fn check_event(index: usize, event: &EventSpec) -> Result<u64, ScenarioError> {
    let path = |field: &str| format!("timeline[{index}].{field}");
    let requests = |field: &str, count: u32| at_most(|| path(field), count.into(), MAX_EVENT_REQUESTS.into());
    match event {
        EventSpec::Turn(turn) => {
            requests("turn.count", turn.count)?;
            Ok(turn.count.into())
        }
        EventSpec::Idle(idle) => at_most(|| path("idle.ms"), idle.ms, MAX_MS).map(|()| 0),
        EventSpec::Fork(fork) => {
            requests("fork.child_turns", fork.child_turns)?;
            at_most(|| path("fork.gap_ms"), fork.gap_ms, MAX_MS)?;
            for (field, sizes) in
                [("tool_use_tokens", &fork.tool_use_tokens), ("placeholder_tokens", &fork.placeholder_tokens)]
            {
                check_sizes(|| path(&format!("fork.{field}")), sizes.as_ref())?;
            }
            tokens(|| path("fork.directive_tokens"), fork.directive_tokens)?;
            tokens(|| path("fork.preamble_tokens"), fork.preamble_tokens)?;
            let forks = if fork.directives.is_empty() {
                fork.count.unwrap_or(0)
            } else {
                fork.directives.len() as u32
            };
            Ok(u64::from(forks) * u64::from(fork.child_turns) + 1)
        }
        EventSpec::Named(named) => {
            requests("named.turns", named.turns)?;
            tokens(|| path("named.prompt_tokens"), named.prompt_tokens)?;
            tokens(|| path("named.result_tokens"), Some(named.result_tokens))?;
            at_most(|| path("named.tool_ms"), named.tool_ms.unwrap_or(0), MAX_MS)?;
            Ok(u64::from(named.turns) + 1)
        }
        EventSpec::Resume(resume) => {
            requests("resume.turns", resume.turns)?;
            tokens(|| path("resume.prompt_tokens"), resume.prompt_tokens)?;
            tokens(|| path("resume.result_tokens"), Some(resume.result_tokens))?;
            Ok(u64::from(resume.turns) + 1)
        }
        EventSpec::Task(task) => {
            requests("task.rounds", task.rounds)?;
            tokens(|| path("task.description_tokens"), task.description_tokens)?;
            tokens(|| path("task.system_tokens"), task.system_tokens)?;
            tokens(|| path("task.result_tokens"), Some(task.result_tokens))?;
            at_most(|| path("task.tool_ms"), task.tool_ms.unwrap_or(0), MAX_MS)?;
            Ok(u64::from(task.rounds) + 1)
        }
        EventSpec::MemoryRefresh(_) => Ok(0),
        EventSpec::Team(team) => check_team(index, team),
        EventSpec::Sidecar(sidecar) => {
            tokens(|| path("sidecar.prompt_tokens"), sidecar.prompt_tokens)?;
            at_most(|| path("sidecar.delay_ms"), sidecar.delay_ms, MAX_MS).map(|()| 1)
        }
        EventSpec::FlagFlip(_) | EventSpec::Wait(_) => Ok(0),
        EventSpec::Compact(_) => Ok(1),
    }
}

/// A team: its durations (its size, messages and token sizes are checked with the team's other
/// rules, in `validate_team`). Plans a request per teammate message and a leader read of each.
fn check_team(index: usize, team: &TeamSpec) -> Result<u64, ScenarioError> {
    let path = |field: &str| format!("timeline[{index}].team.{field}");
    for (field, ms) in [
        ("idle_gap_ms", team.idle_gap_ms),
        ("start_overhead_ms", team.start_overhead_ms),
        ("poll_ms", team.poll_ms),
    ] {
        at_most(|| path(field), ms, MAX_MS)?;
    }
    Ok(u64::from(team.size) * (u64::from(team.messages) + 1) * 2)
}

fn check_sizes(path: impl Fn() -> String, sizes: Option<&Sizes>) -> Result<(), ScenarioError> {
    match sizes {
        None => Ok(()),
        Some(Sizes::Each(size)) => at_most(path, *size, MAX_TOKENS),
        Some(Sizes::List(list)) => {
            for (index, &size) in list.iter().enumerate() {
                at_most(|| format!("{}[{index}]", path()), size, MAX_TOKENS)?;
            }
            Ok(())
        }
    }
}
