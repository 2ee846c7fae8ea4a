//! forkcache-scenario: the agent runtimes' request builders and the scenario engine that drives
//! them. It may import the wire and the engine; it must never import traces, reports or the network.
//!
//! Scenarios: a spec (JSON), a seeded history generator, and an event engine on the virtual
//! clock that drives the [`crate::agent`] builders and prices every request through the
//! [`MockEndpoint`](forkcache_engine::endpoint::MockEndpoint).
//!
//! The entry point is [`run`]: `run(&spec, &RunConfig::for_spec(&spec), &prices)` → a
//! [`ScenarioReport`]. A sweep builds specs programmatically (every field has a default) and
//! calls it per grid point. [`agent`] holds the request builders of the agent runtimes (forks,
//! named agents, sidecars, memory); [`synth`] seeded synthetic conversations.
#![deny(missing_docs)]
// Input-derived data is never unwrapped: a bad input is an error naming it, never a panic. The
// few sites that cannot fail carry an `allow` saying why.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod agent;
mod delegation;
mod engine;
mod generate;
pub mod limits;
mod record;
mod report;
mod spec;
mod suite;
pub mod synth;

pub use delegation::{REPORT_TOKENS, TASK_TOKENS, WAYS, Way, baseline_spec, delegation_spec};
pub use engine::TASK_MAX_ROUNDS;
pub use engine::{run, run_with_blocks};
pub use generate::{Generator, stream, tool_mix};
pub use record::{GuardEvent, RequestRole, RunConfig, ScenarioRecord, SpawnReport};
pub use report::{ScenarioReport, ScenarioTotals};
pub use spec::{
    AgentSpec, CompactSpec, ContentMode, EventSpec, FlagFlipSpec, ForkSpec, ForkTools, GenerateSpec,
    HistorySpec, IdleSpec, Knobs, Launch, MemoryRefreshSpec, MemorySpec, NamedLaunch, NamedSpec, Range,
    ResumeSpec, ScenarioSpec, SectionSpec, SidecarSpec, Sizes, TaskSpec, TeamSpec, ToolSpec, TurnSpec,
    WaitSpec,
};
pub use suite::{FIXTURES, Fixture, MISTAKES, Mistake, SuiteRun, fixture, run_suite, run_suite_seeded};

use forkcache_engine::tokenize::TokenizerUnavailable;

use crate::agent::{AgentDefinition, NamedAgent};

/// Why a scenario could not run.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file is not a valid scenario: where, and what was expected.
    #[error("{path}: {message}")]
    Spec {
        /// The field, e.g. `timeline[2].fork.launch`.
        path: String,
        /// What is wrong with it.
        message: String,
    },
    /// The configured tokenizer is not compiled in.
    #[error(transparent)]
    Tokenizer(#[from] TokenizerUnavailable),
    /// The endpoint rejected a request the scenario built (literal history blocks the API would
    /// refuse, for instance).
    #[error("request {index} ({agent}) was rejected: {message}")]
    Rejected {
        /// 0-based request index.
        index: usize,
        /// Which agent sent it.
        agent: String,
        /// The API's error message.
        message: String,
    },
}

impl ScenarioError {
    fn spec(path: impl Into<String>, message: impl Into<String>) -> ScenarioError {
        ScenarioError::Spec { path: path.into(), message: message.into() }
    }
}

impl ScenarioSpec {
    /// Parses a scenario file; errors name the field path and what was expected.
    pub fn from_json(text: &str) -> Result<ScenarioSpec, ScenarioError> {
        let spec: ScenarioSpec = forkcache_wire::json::read_object(text, "scenario")
            .map_err(|err| ScenarioError::spec(err.path.clone(), err.message_at()))?;
        spec.validate()?;
        Ok(spec)
    }

    /// Reads every `named.definition_file` (a path relative to `base`, the scenario file's
    /// directory) into `definition`; errors name the event and the file.
    pub fn load_agent_files(&mut self, base: &std::path::Path) -> Result<(), ScenarioError> {
        for (index, event) in self.timeline.iter_mut().enumerate() {
            let EventSpec::Named(named) = event else { continue };
            let Some(file) = named.definition_file.take() else { continue };
            let at = format!("timeline[{index}].named.definition_file");
            let text = std::fs::read_to_string(base.join(&file))
                .map_err(|e| ScenarioError::spec(&at, format!("cannot read {file}: {e}")))?;
            AgentDefinition::from_markdown(&text)
                .map_err(|e| ScenarioError::spec(&at, format!("{file}: {e}")))?;
            named.definition = Some(text);
        }
        Ok(())
    }

    /// Checks what serde cannot: ranges, the history's shape, knobs that need a setting.
    pub fn validate(&self) -> Result<(), ScenarioError> {
        validate_history(&self.history)?;
        if self.knobs.breakpoint_on_varying_block && self.agent.reminder_tokens.is_none() {
            return Err(ScenarioError::spec(
                "knobs.breakpoint_on_varying_block",
                "needs agent.reminder_tokens: the varying block is the per-request reminder",
            ));
        }
        let mut named_so_far = 0;
        for (index, event) in self.timeline.iter().enumerate() {
            validate_event(index, event)?;
            match event {
                EventSpec::Named(named) => {
                    validate_named(index, named)?;
                    named_so_far += 1;
                }
                EventSpec::Resume(resume) => validate_resume(index, resume, named_so_far)?,
                EventSpec::Task(task) => validate_task(index, task)?,
                EventSpec::Team(team) => validate_team(index, team)?,
                _ => {}
            }
        }
        limits::check(self)
    }
}

/// Limits that keep a typo from asking for more memory than any machine has.
const MAX_FORKS: u32 = 4_096;
/// The largest declared size of one block in the runtimes' fields (prompts, reports,
/// notifications, system prompts): a million tokens is beyond any context window.
pub const MAX_BLOCK_TOKENS: u64 = 1_000_000;
const MAX_GENERATED_TURNS: u32 = 100_000;
const MAX_FILLER_TOKENS: u64 = 10_000_000;

fn validate_history(history: &HistorySpec) -> Result<(), ScenarioError> {
    if history.target_tokens.is_some() && history.messages.is_some() {
        return Err(ScenarioError::spec(
            "history.target_tokens",
            "a target is for a generated history: give `messages` or `target_tokens`, not both",
        ));
    }
    if let Some(target) = history.target_tokens.filter(|&t| t > crate::limits::MAX_TOKENS) {
        return Err(ScenarioError::spec(
            "history.target_tokens",
            format!("expected at most {}, got {target}", crate::limits::MAX_TOKENS),
        ));
    }
    if let Some(generate) = &history.generate {
        if generate.turns > MAX_GENERATED_TURNS {
            return Err(ScenarioError::spec(
                "history.generate.turns",
                format!("expected at most {MAX_GENERATED_TURNS}, got {}", generate.turns),
            ));
        }
        let largest = [generate.user_tokens, generate.assistant_tokens, generate.tool_result_tokens]
            .iter()
            .map(|range| range[1])
            .max()
            .unwrap_or(0);
        if generate.content == ContentMode::Filler && largest > MAX_FILLER_TOKENS {
            return Err(ScenarioError::spec(
                "history.generate.content",
                format!(
                    "filler blocks are written out: keep ranges under {MAX_FILLER_TOKENS} tokens, or use `declared`"
                ),
            ));
        }
        for (name, range) in [
            ("user_tokens", generate.user_tokens),
            ("assistant_tokens", generate.assistant_tokens),
            ("tool_calls", generate.tool_calls),
            ("tool_use_tokens", generate.tool_use_tokens),
            ("tool_result_tokens", generate.tool_result_tokens),
        ] {
            if range[0] > range[1] {
                return Err(ScenarioError::spec(
                    format!("history.generate.{name}"),
                    format!("expected [min, max] with min ≤ max, got [{}, {}]", range[0], range[1]),
                ));
            }
        }
    }
    Ok(())
}

fn validate_event(index: usize, event: &EventSpec) -> Result<(), ScenarioError> {
    match event {
        EventSpec::Fork(fork) if fork.directives.is_empty() && fork.count.unwrap_or(0) == 0 => {
            Err(ScenarioError::spec(
                format!("timeline[{index}].fork"),
                "expected `directives` (a non-empty list) or `count` ≥ 1",
            ))
        }
        EventSpec::Fork(fork)
            if fork.directives.len() as u64 > u64::from(MAX_FORKS) || fork.count.unwrap_or(0) > MAX_FORKS =>
        {
            Err(ScenarioError::spec(
                format!("timeline[{index}].fork"),
                format!("expected at most {MAX_FORKS} forks"),
            ))
        }
        EventSpec::Turn(turn) if turn.blocks.unwrap_or(0) > MAX_GENERATED_TURNS => Err(ScenarioError::spec(
            format!("timeline[{index}].turn.blocks"),
            format!("expected at most {MAX_GENERATED_TURNS}"),
        )),
        EventSpec::Fork(fork) if fork.child_turns == 0 => {
            Err(ScenarioError::spec(format!("timeline[{index}].fork.child_turns"), "expected at least 1"))
        }
        EventSpec::Named(named) if named.turns == 0 => {
            Err(ScenarioError::spec(format!("timeline[{index}].named.turns"), "expected at least 1"))
        }
        _ => Ok(()),
    }
}

fn check_block_tokens(path: String, tokens: Option<u64>) -> Result<(), ScenarioError> {
    match tokens {
        Some(tokens) if tokens > MAX_BLOCK_TOKENS => Err(ScenarioError::spec(
            path,
            format!("expected at most {MAX_BLOCK_TOKENS} tokens, got {tokens}"),
        )),
        _ => Ok(()),
    }
}

fn validate_named(index: usize, named: &NamedSpec) -> Result<(), ScenarioError> {
    let at = |field: &str| format!("timeline[{index}].named.{field}");
    if named.definition.is_some() && named.definition_file.is_some() {
        return Err(ScenarioError::spec(
            at("definition_file"),
            "give `definition` or `definition_file`, not both",
        ));
    }
    if named.definition_file.is_some() && named.agent != NamedAgent::Custom {
        return Err(ScenarioError::spec(at("definition_file"), "only a `custom` agent takes a definition"));
    }
    match (&named.definition, named.agent) {
        // Read later, relative to the scenario file (`load_agent_files`).
        (None, NamedAgent::Custom) if named.definition_file.is_some() => {}
        (None, NamedAgent::Custom) => {
            return Err(ScenarioError::spec(
                at("definition"),
                "a custom agent needs its `.claude/agents/*.md` text (or `definition_file`)",
            ));
        }
        (Some(_), agent) if agent != NamedAgent::Custom => {
            return Err(ScenarioError::spec(at("definition"), "only a `custom` agent takes a definition"));
        }
        (Some(text), _) => {
            AgentDefinition::from_markdown(text)
                .map_err(|e| ScenarioError::spec(at("definition"), e.to_string()))?;
        }
        (None, _) => {}
    }
    if named.tools.is_some() && !matches!(named.agent, NamedAgent::Verification | NamedAgent::Custom) {
        return Err(ScenarioError::spec(
            at("tools"),
            "only verification and custom agents have configurable tools",
        ));
    }
    check_block_tokens(at("prompt_tokens"), named.prompt_tokens)?;
    check_block_tokens(at("result_tokens"), Some(named.result_tokens))?;
    check_block_tokens(at("notification_tokens"), named.notification_tokens)?;
    check_block_tokens(at("memory.tokens"), named.memory.as_ref().and_then(|m| m.tokens))
}

fn validate_resume(index: usize, resume: &ResumeSpec, named_so_far: usize) -> Result<(), ScenarioError> {
    let at = |field: &str| format!("timeline[{index}].resume.{field}");
    if resume.named == 0 || resume.named > named_so_far {
        return Err(ScenarioError::spec(
            at("named"),
            format!("expected a `named` event before this one, 1 to {named_so_far}, got {}", resume.named),
        ));
    }
    if resume.turns == 0 {
        return Err(ScenarioError::spec(at("turns"), "expected at least 1"));
    }
    check_block_tokens(at("prompt_tokens"), resume.prompt_tokens)?;
    check_block_tokens(at("result_tokens"), Some(resume.result_tokens))
}

fn validate_task(index: usize, task: &TaskSpec) -> Result<(), ScenarioError> {
    let at = |field: &str| format!("timeline[{index}].task.{field}");
    if task.rounds == 0 {
        return Err(ScenarioError::spec(at("rounds"), "expected at least 1"));
    }
    check_block_tokens(at("description_tokens"), task.description_tokens)?;
    check_block_tokens(at("system_tokens"), task.system_tokens)?;
    check_block_tokens(at("result_tokens"), Some(task.result_tokens))
}

/// The most teammates in one team.
pub const MAX_TEAMMATES: u32 = 64;
/// The most mailbox messages (from the leader, or to a peer) per teammate.
pub const MAX_TEAM_MESSAGES: u32 = 1_000;

fn validate_team(index: usize, team: &TeamSpec) -> Result<(), ScenarioError> {
    let at = |field: &str| format!("timeline[{index}].team.{field}");
    if team.size == 0 || team.size > MAX_TEAMMATES {
        return Err(ScenarioError::spec(
            at("size"),
            format!("expected 1 to {MAX_TEAMMATES}, got {}", team.size),
        ));
    }
    if team.messages > MAX_TEAM_MESSAGES {
        return Err(ScenarioError::spec(
            at("messages"),
            format!("expected at most {MAX_TEAM_MESSAGES}, got {}", team.messages),
        ));
    }
    if team.peer_messages > MAX_TEAM_MESSAGES {
        return Err(ScenarioError::spec(
            at("peer_messages"),
            format!("expected at most {MAX_TEAM_MESSAGES}, got {}", team.peer_messages),
        ));
    }
    if team.poll_ms == 0 {
        return Err(ScenarioError::spec(at("poll_ms"), "expected at least 1"));
    }
    for (field, tokens) in [
        ("prompt_tokens", team.prompt_tokens),
        ("addendum_tokens", team.addendum_tokens),
        ("message_tokens", team.message_tokens),
        ("notification_tokens", team.notification_tokens),
        ("peer_message_tokens", team.peer_message_tokens),
        ("leader_reply_tokens", Some(team.leader_reply_tokens)),
        ("summary_tokens", Some(team.summary_tokens)),
    ] {
        check_block_tokens(at(field), tokens)?;
    }
    Ok(())
}
