//! One unit of delegated work, five ways: the same parent history, the same task, three requests
//! of work and a 500-token report, handed to a fork, a named agent (sync), a teammate, a
//! background agent and seed 003's teaching sub-agent. [`delegation_spec`] builds each as a
//! scenario; the report runs them across history sizes and across the idle gap between the
//! delegate's requests (its tools' time; a teammate's wait for the leader's next message).

use serde::Serialize;
use serde_json::json;

use super::spec::{
    EventSpec, ForkSpec, GenerateSpec, IdleSpec, NamedLaunch, NamedSpec, ScenarioSpec, TaskSpec, TeamSpec,
    TurnSpec,
};
use crate::agent::NamedAgent;

/// A way to delegate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Way {
    /// A fork: the parent's context and cache prefix, three requests.
    Fork,
    /// A general-purpose agent the parent waits for.
    Named,
    /// A teammate: asks a permission, finishes, gets one more message.
    Teammate,
    /// A general-purpose agent in the background.
    Background,
    /// Seed 003's `task` sub-agent: fresh messages, no cache markers.
    Subagent,
}

/// Every way, in the report's order.
pub const WAYS: [Way; 5] = [Way::Fork, Way::Named, Way::Teammate, Way::Background, Way::Subagent];

/// Tokens of the task handed over (directive, prompt or description).
pub const TASK_TOKENS: u64 = 1_000;
/// Tokens of the report that comes back.
pub const REPORT_TOKENS: u64 = 500;

impl Way {
    /// Kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            Way::Fork => "fork",
            Way::Named => "named",
            Way::Teammate => "teammate",
            Way::Background => "background",
            Way::Subagent => "subagent",
        }
    }

    /// The event that delegates the work, `gap_ms` between the delegate's requests.
    fn event(self, gap_ms: u64) -> EventSpec {
        let task = "Trace the failing test's call chain and report the cause.";
        let named = |launch| NamedSpec {
            agent: NamedAgent::GeneralPurpose,
            prompt: task.into(),
            prompt_tokens: Some(TASK_TOKENS),
            turns: 3,
            result_tokens: REPORT_TOKENS,
            launch,
            tool_ms: Some(gap_ms),
            ..NamedSpec::default()
        };
        match self {
            Way::Fork => EventSpec::Fork(ForkSpec {
                directives: vec![task.into()],
                directive_tokens: Some(TASK_TOKENS),
                child_turns: 3,
                tool_ms: Some(gap_ms),
                ..ForkSpec::default()
            }),
            Way::Named => EventSpec::Named(named(NamedLaunch::Sync)),
            Way::Background => EventSpec::Named(named(NamedLaunch::Background)),
            // Three wakes, each a finished piece of work, the leader's next message between them.
            Way::Teammate => EventSpec::Team(TeamSpec {
                size: 1,
                messages: 2,
                permission_request: false,
                idle_gap_ms: gap_ms,
                prompt_tokens: Some(TASK_TOKENS),
                summary_tokens: REPORT_TOKENS,
                ..TeamSpec::default()
            }),
            Way::Subagent => EventSpec::Task(TaskSpec {
                description: task.into(),
                description_tokens: Some(TASK_TOKENS),
                result_tokens: REPORT_TOKENS,
                tool_ms: Some(gap_ms),
                ..TaskSpec::default()
            }),
        }
    }
}

/// The scenario: a history of `history_tokens` (one declared user message), the default agent's
/// system prompt and tools, a main-loop turn, the delegation (`gap_ms` between the delegate's
/// requests), then two more turns 30 s apart (so a background agent's notification lands).
pub fn delegation_spec(way: Way, history_tokens: u64, gap_ms: u64) -> ScenarioSpec {
    session(way.name(), Some(way.event(gap_ms)), history_tokens)
}

/// The same session without the delegation: what the parent's own turns cost, so the
/// difference is what delegating cost.
pub fn baseline_spec(history_tokens: u64) -> ScenarioSpec {
    session("none", None, history_tokens)
}

fn session(name: &str, delegation: Option<EventSpec>, history_tokens: u64) -> ScenarioSpec {
    let mut spec = ScenarioSpec {
        name: format!("delegation-{name}"),
        description: "one unit of delegated work".into(),
        bill_output: false,
        ..ScenarioSpec::default()
    };
    let history = json!({"role": "user", "content": [{"type": "text", "text": "<the task and the files read so far>", "forkcache_tokens": history_tokens}]});
    spec.history.messages = Some(vec![history]);
    spec.history.generate = Some(GenerateSpec {
        turns: 0,
        user_tokens: [100, 100],
        assistant_tokens: [200, 200],
        tool_calls: [1, 1],
        tool_use_tokens: [100, 100],
        tool_result_tokens: [1_000, 1_000],
        ..GenerateSpec::default()
    });
    let mut timeline = vec![EventSpec::Turn(TurnSpec::default())];
    timeline.extend(delegation);
    timeline.extend([
        EventSpec::Turn(TurnSpec::default()),
        EventSpec::Idle(IdleSpec { ms: 30_000 }),
        EventSpec::Turn(TurnSpec::default()),
    ]);
    spec.timeline = timeline;
    spec
}
