//! The scenario file (`fixtures/scenarios/*.json`): plain data with defaults for everything but
//! the name and the timeline, so a program (a sweep) can build one from `ScenarioSpec::default()`
//! and override fields.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use forkcache_engine::billing::BillingProfile;
use forkcache_engine::cache::Policy;
use forkcache_engine::clock::Visibility;
use forkcache_engine::prompt::{IdentityMode, Ttl};
use forkcache_engine::provider::Provider;

use crate::agent::{ForkVariant, MemoryPosition, MemoryScope, NamedAgent, SectionKind, SidecarKind};

/// A whole scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScenarioSpec {
    /// Short name, used in reports.
    pub name: String,
    /// What it shows.
    pub description: String,
    /// The main loop's model id. Default `claude-sonnet-4-6`.
    pub model: String,
    /// Cache policy. Default `anthropic`.
    pub policy: Policy,
    /// The provider whose cache and prices it runs on. Default `anthropic`. Another provider's
    /// cache rules replace `policy` (Bedrock's are Anthropic's), and its model of the same tier
    /// stands in for each Claude model named ([`Provider::model_for`]).
    #[serde(skip_serializing_if = "is_anthropic")]
    pub provider: Provider,
    /// Billing profile. Default `anthropic`.
    pub billing: BillingProfile,
    /// Identity mode. Default `semantic`.
    pub identity: IdentityMode,
    /// When writes become readable. Default `first-token`.
    pub visibility: Visibility,
    /// TTL of every cache marker. Default `5m`.
    pub ttl: Ttl,
    /// The one seed every random draw derives from. Default 0.
    pub seed: u64,
    /// Bill output tokens (off reproduces the seeds' input-only arithmetic). Default true.
    pub bill_output: bool,
    /// The main loop's shape.
    pub agent: AgentSpec,
    /// The conversation before the timeline starts.
    pub history: HistorySpec,
    /// What happens, in order.
    pub timeline: Vec<EventSpec>,
    /// Common mistakes, each off by default.
    pub knobs: Knobs,
}

impl Default for ScenarioSpec {
    fn default() -> Self {
        ScenarioSpec {
            name: "scenario".into(),
            description: String::new(),
            model: "claude-sonnet-4-6".into(),
            policy: Policy::Anthropic,
            provider: Provider::Anthropic,
            billing: BillingProfile::Anthropic,
            identity: IdentityMode::Semantic,
            visibility: Visibility::FirstToken,
            ttl: Ttl::FiveMinutes,
            seed: 0,
            bill_output: true,
            agent: AgentSpec::default(),
            history: HistorySpec::default(),
            timeline: Vec::new(),
            knobs: Knobs::default(),
        }
    }
}

fn is_anthropic(provider: &Provider) -> bool {
    *provider == Provider::Anthropic
}

impl ScenarioSpec {
    /// The scenario as it runs on its provider: the provider's policy (unless Anthropic's rules
    /// are the provider's, when the spec's own stands) and the provider's model for the main
    /// loop's and Explore's. A named agent's model (the spawn's, its definition's or an alias)
    /// is mapped where it is resolved.
    pub fn on_provider(&self) -> ScenarioSpec {
        let provider = self.provider;
        let mut spec = self.clone();
        spec.policy = provider.policy_over(self.policy);
        spec.model = provider.model_for(&self.model);
        spec.agent.explore_model = provider.model_for(&self.agent.explore_model);
        spec
    }
}

/// One system-prompt section.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SectionSpec {
    /// What it is (named agents keep or drop sections by kind).
    pub kind: SectionKind,
    /// Declared size; counted from the text when absent.
    #[serde(default)]
    pub tokens: Option<u64>,
    /// The text; a stand-in naming the section when absent.
    #[serde(default)]
    pub text: Option<String>,
}

/// One tool definition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    /// Tool name.
    pub name: String,
    /// Declared size; counted from the definition when absent.
    #[serde(default)]
    pub tokens: Option<u64>,
    /// Explore and Plan keep only read-only tools. Default false.
    #[serde(default)]
    pub read_only: bool,
    /// Agents launched in the background keep it (the third filtering layer). Default true.
    #[serde(default = "yes")]
    pub async_safe: bool,
}

fn yes() -> bool {
    true
}

/// The main loop.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentSpec {
    /// System prompt sections, in order. Default: identity, main, project conventions, git
    /// status (100 / 4,900 / 2,000 / 1,000 tokens). Empty sends no `system`.
    pub system: Vec<SectionSpec>,
    /// Tools, in order. Default: Agent, Bash, Edit, Glob, Grep, Read, Write (12,000 tokens).
    pub tools: Vec<ToolSpec>,
    /// `max_tokens`. Default 32,000.
    pub max_tokens: u64,
    /// Extended thinking budget; none sends no `thinking`. Default none.
    pub thinking_budget_tokens: Option<u64>,
    /// Put a cache marker on the last system block. Default true.
    pub system_breakpoint: bool,
    /// Milliseconds tools take between a reply and the next request. Default 1,000.
    pub tool_ms: u64,
    /// A per-request reminder block (with the request's time) closing each main-loop request,
    /// this many tokens. Default none.
    pub reminder_tokens: Option<u64>,
    /// Auto-compaction when a main-loop request reaches this many input tokens. Default none.
    pub compaction_threshold_tokens: Option<u64>,
    /// Size of a compaction summary. Default 2,000.
    pub summary_tokens: u64,
    /// Tool results are stubbed out once the context reaches this size… Default none (never).
    pub replacement_context_tokens: Option<u64>,
    /// …and the result itself is at least this large. Default 2,000.
    pub replacement_min_result_tokens: u64,
    /// Model of the Explore agent. Default `claude-haiku-4-5`.
    pub explore_model: String,
    /// Size of a named agent's own instructions. Default 1,500.
    pub named_system_tokens: u64,
    /// Tools removed for every sub-agent (the first filtering layer). Default: Agent,
    /// AskUserQuestion, EnterPlanMode, ExitPlanMode, TaskOutput, TaskStop (Claude Code's list as
    /// read from its source; replace it with your version's).
    pub disallowed_for_agents: Vec<String>,
    /// Tools removed for custom agents on top (the second layer). Default none.
    pub disallowed_for_custom_agents: Vec<String>,
    /// Model aliases a custom agent's `model:` may use. Default haiku → `claude-haiku-4-5`,
    /// sonnet → `claude-sonnet-4-6`, opus → `claude-opus-4-6`.
    pub model_aliases: BTreeMap<String, String>,
}

impl Default for AgentSpec {
    fn default() -> Self {
        let section = |kind, tokens| SectionSpec { kind, tokens: Some(tokens), text: None };
        let tool = |name: &str, tokens, read_only| ToolSpec {
            name: name.into(),
            tokens: Some(tokens),
            read_only,
            async_safe: true,
        };
        let names = |names: &[&str]| names.iter().map(|name| name.to_string()).collect();
        let aliases =
            [("haiku", "claude-haiku-4-5"), ("sonnet", "claude-sonnet-4-6"), ("opus", "claude-opus-4-6")];
        AgentSpec {
            system: vec![
                section(SectionKind::Identity, 100),
                section(SectionKind::Main, 4_900),
                section(SectionKind::ProjectConventions, 2_000),
                section(SectionKind::GitStatus, 1_000),
            ],
            tools: vec![
                tool("Agent", 3_000, false),
                tool("Bash", 2_500, true),
                tool("Edit", 1_500, false),
                tool("Glob", 500, true),
                tool("Grep", 1_500, true),
                tool("Read", 1_500, true),
                tool("Write", 1_500, false),
            ],
            max_tokens: 32_000,
            thinking_budget_tokens: None,
            system_breakpoint: true,
            tool_ms: 1_000,
            reminder_tokens: None,
            compaction_threshold_tokens: None,
            summary_tokens: 2_000,
            replacement_context_tokens: None,
            replacement_min_result_tokens: 2_000,
            explore_model: "claude-haiku-4-5".into(),
            named_system_tokens: 1_500,
            disallowed_for_agents: names(&[
                "Agent",
                "AskUserQuestion",
                "EnterPlanMode",
                "ExitPlanMode",
                "TaskOutput",
                "TaskStop",
            ]),
            disallowed_for_custom_agents: Vec::new(),
            model_aliases: aliases.iter().map(|(alias, id)| (alias.to_string(), id.to_string())).collect(),
        }
    }
}

/// The conversation before the timeline: given literally, or generated. Default: generated
/// with [`GenerateSpec::default`]. With `messages`, `generate` only shapes the later turns.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HistorySpec {
    /// Messages as the API takes them (`{"role", "content"}`), blocks kept as given; the last
    /// one must be a user message. `cache_control` is not allowed (requests place markers).
    pub messages: Option<Vec<Value>>,
    /// Draw the history from the seed (without `messages`), and every later turn (always).
    pub generate: Option<GenerateSpec>,
    /// Draw main-loop steps until the history's blocks hold at least this many tokens, instead
    /// of `generate.turns` steps (not with `messages`). Default: none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_tokens: Option<u64>,
}

/// `[min, max]`, inclusive.
pub type Range = [u64; 2];

/// How generated turns are drawn. Every range is `[min, max]` tokens, inclusive.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GenerateSpec {
    /// Main-loop steps already in the history (each: a user message, then the assistant's reply).
    /// Default 10.
    pub turns: u32,
    /// A user prompt. Default [50, 400].
    pub user_tokens: Range,
    /// An assistant text block. Default [50, 600].
    pub assistant_tokens: Range,
    /// Tool calls per assistant message. Default [0, 3].
    pub tool_calls: Range,
    /// One `tool_use` block. Default [30, 120].
    pub tool_use_tokens: Range,
    /// One tool result. Default [100, 4,000].
    pub tool_result_tokens: Range,
    /// Relative weights of the tools called. Default Read 4, Grep 2, Bash 2, Edit 1, Glob 1.
    pub tool_mix: BTreeMap<String, u32>,
    /// Declare sizes (`declared`: tiny texts that say how many tokens they stand for) or write
    /// filler text of about that size (`filler`, for byte-level measurements). Default `declared`.
    pub content: ContentMode,
}

impl Default for GenerateSpec {
    fn default() -> Self {
        let mix = [("Read", 4), ("Grep", 2), ("Bash", 2), ("Edit", 1), ("Glob", 1)];
        GenerateSpec {
            turns: 10,
            user_tokens: [50, 400],
            assistant_tokens: [50, 600],
            tool_calls: [0, 3],
            tool_use_tokens: [30, 120],
            tool_result_tokens: [100, 4_000],
            tool_mix: mix.iter().map(|(name, weight)| (name.to_string(), *weight)).collect(),
            content: ContentMode::Declared,
        }
    }
}

/// How generated blocks get their size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ContentMode {
    /// `forkcache_tokens` on short texts. Default.
    #[default]
    Declared,
    /// Real text of about 4 bytes per token.
    Filler,
}

/// One timeline event. Events run in order on the virtual clock; background work (fork
/// children, sidecars) interleaves with them by start time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum EventSpec {
    /// Main-loop requests.
    Turn(TurnSpec),
    /// Nothing happens for a while.
    Idle(IdleSpec),
    /// A feature flag flips: the system prompt renders differently from now on.
    FlagFlip(FlagFlipSpec),
    /// The parent calls the Agent tool N times at once and N forks start.
    Fork(ForkSpec),
    /// The parent calls a named sub-agent.
    Named(NamedSpec),
    /// The parent resumes a named sub-agent from its sidechain transcript.
    Resume(ResumeSpec),
    /// The teaching sub-agent (seed 003, s06): the parent calls its `task` tool.
    Task(TaskSpec),
    /// A newer snapshot of an agent's memory.
    MemoryRefresh(MemoryRefreshSpec),
    /// The parent leads a team of teammates until every one is done.
    Team(TeamSpec),
    /// A side request from the last main-loop turn's snapshot.
    Sidecar(SidecarSpec),
    /// Compaction now, whatever the threshold.
    Compact(CompactSpec),
    /// The parent waits for its background agents (forks, background named agents) to end;
    /// their notifications reach its next turn.
    Wait(WaitSpec),
}

/// `turn`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TurnSpec {
    /// Main-loop requests. Default 1.
    pub count: u32,
    /// Blocks in each reply's tool-call message (more than 20 outruns a breakpoint's lookback).
    /// Default: drawn from the generator.
    pub blocks: Option<u32>,
}

impl Default for TurnSpec {
    fn default() -> Self {
        TurnSpec { count: 1, blocks: None }
    }
}

/// `idle`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdleSpec {
    /// How long, in milliseconds.
    pub ms: u64,
}

/// `flag_flip`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlagFlipSpec {}

/// `wait`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaitSpec {}

/// How a spawn's forks start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Launch {
    /// All at the parent's reply: later forks cannot see what the first is still writing.
    Parallel,
    /// The first at once, the rest at its first token. Default.
    #[default]
    Staggered,
    /// One after another, `gap_ms` apart.
    Sequential,
}

/// A count for each of several blocks: one number for all, or one per block.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Sizes {
    /// The same for every block.
    Each(u64),
    /// One per block, in order.
    List(Vec<u64>),
}

impl Sizes {
    /// The size of block `index` (a short list repeats its last entry).
    pub fn get(&self, index: usize) -> u64 {
        match self {
            Sizes::Each(tokens) => *tokens,
            Sizes::List(list) => list.get(index).or(list.last()).copied().unwrap_or(0),
        }
    }
}

/// `fork`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ForkSpec {
    /// One directive per fork.
    pub directives: Vec<String>,
    /// Or just how many forks (directives are then generated). Ignored when directives are given.
    pub count: Option<u32>,
    /// Which tool uses each fork keeps. Default `all-tool-uses`.
    pub variant: ForkVariant,
    /// Default `staggered`.
    pub launch: Launch,
    /// Spacing of `sequential` launches, in milliseconds. Default 30,000.
    pub gap_ms: u64,
    /// Whether the parent's request that called the Agent tool is part of the run (false: the
    /// history was never cached, as in the seeds' cold case). Default true.
    pub parent_turn: bool,
    /// Requests each fork child makes (its own loop). Default 1.
    pub child_turns: u32,
    /// Each fork works in its own git worktree (a note follows the directive). Default false.
    pub worktree: bool,
    /// Put a marker on the last placeholder too, so siblings can read what the first fork wrote
    /// under the `anthropic` policy. Default false (Claude Code marks only the last block).
    pub mark_placeholders: bool,
    /// Declared size of each `tool_use` in the parent's reply (counted when absent).
    pub tool_use_tokens: Option<Sizes>,
    /// Declared size of each placeholder result.
    pub placeholder_tokens: Option<Sizes>,
    /// Declared size of each directive block.
    pub directive_tokens: Option<u64>,
    /// Declared size of each fork's `<task-notification>` around its report (the report's own
    /// size is added). Default: counted from its text.
    pub notification_tokens: Option<u64>,
    /// A text block the parent writes before its tool calls, this many tokens. Default none.
    pub preamble_tokens: Option<u64>,
    /// On its second request each child asks to fork again (the guard must refuse).
    pub child_tries_to_fork: bool,
    /// …after its history was compacted (so only `query_source` still tells it is a fork).
    pub child_compacts_first: bool,
    /// Milliseconds each child's tools take between its requests. Default `agent.tool_ms`.
    pub tool_ms: Option<u64>,
}

impl Default for ForkSpec {
    fn default() -> Self {
        ForkSpec {
            directives: Vec::new(),
            count: None,
            variant: ForkVariant::AllToolUses,
            launch: Launch::Staggered,
            gap_ms: 30_000,
            parent_turn: true,
            child_turns: 1,
            worktree: false,
            mark_placeholders: false,
            tool_use_tokens: None,
            placeholder_tokens: None,
            directive_tokens: None,
            notification_tokens: None,
            preamble_tokens: None,
            child_tries_to_fork: false,
            child_compacts_first: false,
            tool_ms: None,
        }
    }
}

/// `named`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedSpec {
    /// Which agent type (`custom` needs `definition`).
    pub agent: NamedAgent,
    /// Its task.
    #[serde(default)]
    pub prompt: String,
    /// Declared size of the task prompt.
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    /// Requests it makes, at most its type's max turns (it is stopped there). Default 3.
    #[serde(default = "three")]
    pub turns: u32,
    /// Size of the report it returns to the parent. Default 500.
    #[serde(default = "five_hundred")]
    pub result_tokens: u64,
    /// A custom agent's `.claude/agents/NAME.md`, the file's whole text.
    #[serde(default)]
    pub definition: Option<String>,
    /// Or that file's path, relative to the scenario file: `forkcache run` reads it
    /// ([`ScenarioSpec::load_agent_files`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition_file: Option<String>,
    /// Its model, overriding the type's (Explore: `agent.explore_model`; others inherit).
    #[serde(default)]
    pub model: Option<String>,
    /// Its tool names (`*` for all), for types whose tools are configurable (verification,
    /// custom). Default: the type's own pool.
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    /// How it runs. Default `sync`.
    #[serde(default)]
    pub launch: NamedLaunch,
    /// It works in its own git worktree (a note follows its prompt). Default false.
    #[serde(default)]
    pub worktree: bool,
    /// Milliseconds its tools take between its requests. Default `agent.tool_ms`.
    #[serde(default)]
    pub tool_ms: Option<u64>,
    /// The `<task-notification>` a background agent's end puts in the parent's conversation
    /// (`{id}`, `{name}` and `{tool_use_id}` are filled in; `{result}` becomes the agent's final
    /// report, which the notification carries as Claude Code's does, and its size joins the
    /// notification's). The seeds give no template: replace it with the real text.
    #[serde(default = "notification_template")]
    pub notification: String,
    /// Declared size of that notification. Default: counted from its text.
    #[serde(default)]
    pub notification_tokens: Option<u64>,
    /// Its persistent memory, loaded into its prompt. Default none.
    #[serde(default)]
    pub memory: Option<MemorySpec>,
}

/// An agent's memory (seed 002).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemorySpec {
    /// Which scope. Default `project`.
    #[serde(default = "project_scope")]
    pub scope: MemoryScope,
    /// Where it sits in the prompt. Default `system-end`.
    #[serde(default)]
    pub position: MemoryPosition,
    /// Declared size of the loaded memory. Default: counted from the text.
    #[serde(default)]
    pub tokens: Option<u64>,
    /// The block's text (`{scope}`, `{path}`, `{snapshot}` filled in). The seeds give no
    /// template: replace it with the real text.
    #[serde(default = "memory_template")]
    pub template: String,
}

fn project_scope() -> MemoryScope {
    MemoryScope::Project
}

fn memory_template() -> String {
    "# Agent memory ({scope})\nContents of {path}MEMORY.md, snapshot {snapshot}:\n[the agent's notes from earlier runs]".into()
}

/// `memory_refresh`: a newer snapshot of an agent's memory appears (`checkAgentMemorySnapshot`
/// pulls it before the agent's next start).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryRefreshSpec {
    /// The agent's name (its type's, or a custom agent's `name`).
    pub agent: String,
    /// Which scope. Default `project`.
    #[serde(default = "project_scope")]
    pub scope: MemoryScope,
}

impl Default for NamedSpec {
    fn default() -> Self {
        NamedSpec {
            agent: NamedAgent::GeneralPurpose,
            prompt: String::new(),
            prompt_tokens: None,
            turns: three(),
            result_tokens: five_hundred(),
            definition: None,
            definition_file: None,
            model: None,
            tools: None,
            launch: NamedLaunch::Sync,
            worktree: false,
            tool_ms: None,
            notification: notification_template(),
            notification_tokens: None,
            memory: None,
        }
    }
}

pub(crate) fn notification_template() -> String {
    "<task-notification>\n<task-id>{id}</task-id>\n<tool-use-id>{tool_use_id}</tool-use-id>\n<status>completed</status>\n<summary>Agent \"{name}\" completed</summary>\n<result>{result}</result>\n</task-notification>".into()
}

/// How the Agent tool runs a named sub-agent (seed 004's control plane).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NamedLaunch {
    /// The parent waits for the report (its cache ages meanwhile). Default.
    #[default]
    Sync,
    /// The parent goes on; a `<task-notification>` reaches it when the agent ends. The agent's
    /// tools lose those not async-safe.
    Background,
    /// In another workspace: a background agent that shares no cache with the parent.
    Remote,
}

impl NamedLaunch {
    /// Kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            NamedLaunch::Sync => "sync",
            NamedLaunch::Background => "background",
            NamedLaunch::Remote => "remote",
        }
    }
}

/// `resume`: a named agent continues its own conversation (its sidechain transcript) with a new
/// prompt; the parent waits.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResumeSpec {
    /// Which named agent, 1-based in timeline order.
    pub named: usize,
    /// The new prompt.
    #[serde(default)]
    pub prompt: String,
    /// Its declared size.
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    /// Requests it makes (at most its type's max turns). Default 1.
    #[serde(default = "one")]
    pub turns: u32,
    /// Size of its new report. Default 500.
    #[serde(default = "five_hundred")]
    pub result_tokens: u64,
}

fn one() -> u32 {
    1
}

/// `task`: seed 003's teaching sub-agent. A fresh `messages[]` holding only the task, its own
/// system prompt, the parent's base tools (no `task`, no `todo_write`), `max_tokens` 8,000, no cache markers (the
/// seed's code sends none), at most 30 rounds; only its final text returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TaskSpec {
    /// The `description` the parent passes.
    pub description: String,
    /// Its declared size.
    pub description_tokens: Option<u64>,
    /// The sub-agent's system prompt (the seed's `SUB_SYSTEM`).
    pub system: String,
    /// Its declared size. Default: counted from the text.
    pub system_tokens: Option<u64>,
    /// Rounds it runs; the loop stops at 30 whatever this says. Default 3.
    pub rounds: u32,
    /// Size of the final text it returns. Default 300.
    pub result_tokens: u64,
    /// Mark the system prompt and the last block as named agents do (the seed does not).
    /// Default false.
    pub cache_markers: bool,
    /// Milliseconds its tools take between its rounds. Default `agent.tool_ms`.
    pub tool_ms: Option<u64>,
}

impl Default for TaskSpec {
    fn default() -> Self {
        TaskSpec {
            description: "Find what testing framework this project uses.".into(),
            description_tokens: None,
            system: "You are a coding subagent in the project's directory. Complete the given task, then summarize your findings.".into(),
            system_tokens: None,
            rounds: 3,
            result_tokens: 300,
            cache_markers: false,
            tool_ms: None,
        }
    }
}

fn three() -> u32 {
    3
}

fn five_hundred() -> u64 {
    500
}

/// `sidecar`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SidecarSpec {
    /// Which side request.
    pub kind: SidecarKind,
    /// The `/btw` question.
    #[serde(default)]
    pub question: String,
    /// Declared size of the sidecar's prompt.
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    /// Milliseconds after the end of the last turn. Default 0.
    #[serde(default)]
    pub delay_ms: u64,
}

/// `compact`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompactSpec {}

/// How a fork treats the parent's tool list.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ForkTools {
    /// The parent's array, as is. Default.
    #[default]
    Exact,
    /// Without the Agent tool (a fork may not fork, so why send it?).
    Filtered,
    /// Sorted by name.
    Reordered,
}

/// Anti-pattern knobs: each turns one correct decision into the common mistake.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Knobs {
    /// Forks re-render the system prompt (seeing flipped flags) instead of using the snapshot.
    pub rerender_system_in_forks: bool,
    /// What forks do to the tool list.
    pub fork_tools: ForkTools,
    /// Forks set their own `max_tokens`, which clamps the thinking budget.
    pub fork_max_output_tokens: Option<u64>,
    /// Forks start a fresh content-replacement state instead of cloning the parent's.
    pub fresh_replacement_state: bool,
    /// Forks put real, per-fork results where the constant placeholders go.
    pub real_results: bool,
    /// The system prompt carries the current time.
    pub timestamp_in_system: bool,
    /// A tool schema is serialized from an unordered map: its key order changes per request.
    pub unstable_schema_key_order: bool,
    /// Sidecars re-collect the system prompt instead of reading the snapshot.
    pub sidecar_recollects: bool,
    /// The main loop's last marker sits on the per-request reminder (needs `reminder_tokens`)
    /// instead of the block before it.
    pub breakpoint_on_varying_block: bool,
    /// No extra marker when a turn appends more blocks than a breakpoint looks back over.
    pub no_lookback_guard: bool,
}

/// `team` (seed 002): the parent is the leader; each teammate has its own name, prompt and
/// conversation (the parent's system prompt and tools, then a teammate addendum). Messages go
/// through a file mailbox and appear in the recipient's conversation as a new user turn when it
/// next wakes. A teammate's first wake asks the leader's permission for a tool (the leader's UI
/// polls every 500 ms and answers in a dialog, not in a model turn; the answer returns as the
/// tool's result); on Stop a
/// teammate goes idle and notifies the leader, who sends its next message after `idle_gap_ms`.
/// The last notifications reach the leader on its next turn after the team.
///
/// The seeds give no byte templates for these messages: each is a field here (`{name}`, `{id}`,
/// `{team}`, `{lead}` filled in) for the real text to replace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TeamSpec {
    /// The team's name (agent ids are `name@team`, the leader's `lead@team`: seed 002's
    /// `formatAgentId("lead", teamName)`). Default `team`.
    pub name: String,
    /// Teammates. Default 2.
    pub size: u32,
    /// Mailbox messages from the leader to each teammate after its first task. Default 1.
    pub messages: u32,
    /// From a teammate's idle notification to its next wake, in milliseconds. Default 60,000.
    pub idle_gap_ms: u64,
    /// The backend's start overhead (in-process 0, tmux about 200 for the shell's start, iTerm2
    /// a process fork). Default 0.
    pub start_overhead_ms: u64,
    /// Each teammate asks the leader's permission on its first wake. Default true.
    pub permission_request: bool,
    /// Direct messages each teammate sends the next teammate (the last one the first) when it
    /// finishes a task, before it goes idle: a `SendMessage` call, whose result is its
    /// `peer_message` reaching the other's mailbox. An idle teammate wakes for it. Default 0.
    pub peer_messages: u32,
    /// How often the leader reads its mailbox, in milliseconds. Default 500.
    pub poll_ms: u64,
    /// Declared size of each teammate's first task.
    pub prompt_tokens: Option<u64>,
    /// Declared size of the teammate addendum to the system prompt.
    pub addendum_tokens: Option<u64>,
    /// Declared size of each mailbox message.
    pub message_tokens: Option<u64>,
    /// Declared size of each idle notification.
    pub notification_tokens: Option<u64>,
    /// Declared size of each direct message between teammates.
    pub peer_message_tokens: Option<u64>,
    /// Size of the leader's reply to what it read. Default 100.
    pub leader_reply_tokens: u64,
    /// Size of a teammate's closing summary. Default 300.
    pub summary_tokens: u64,
    /// The teammate's system-prompt addendum.
    pub addendum: String,
    /// A teammate's first task.
    pub prompt: String,
    /// A mailbox message from the leader.
    pub message: String,
    /// The leader's answer (from its UI's dialog), as the teammate's tool result.
    pub permission_answer: String,
    /// A teammate's idle notification, with its last peer-DM summary.
    pub notification: String,
    /// A direct message as its recipient reads it (`{name}`, `{id}`: the sender's).
    pub peer_message: String,
}

impl Default for TeamSpec {
    fn default() -> Self {
        TeamSpec {
            name: "team".into(),
            size: 2,
            messages: 1,
            idle_gap_ms: 60_000,
            start_overhead_ms: 0,
            permission_request: true,
            peer_messages: 0,
            poll_ms: 500,
            prompt_tokens: None,
            addendum_tokens: None,
            message_tokens: None,
            notification_tokens: None,
            peer_message_tokens: None,
            leader_reply_tokens: 100,
            summary_tokens: 300,
            addendum: "# Agent teams\nYou are {name} ({id}), a teammate in team \"{team}\"; the team lead is {lead}. Messages from the lead and your teammates arrive as <teammate-message> turns; when you finish, stop and you will be woken for the next one.".into(),
            prompt: "You are {name}. Take the part of the plan the lead assigned to {name} and carry it out.".into(),
            message: "<teammate-message teammate_id=\"{lead}\">\n[the lead's next request for {name}]\n</teammate-message>".into(),
            permission_answer: "Permission granted by {lead}.".into(),
            notification: "<idle-notification teammate_id=\"{id}\">\n{name} is idle. Last peer DM summary: [what {name} told its teammates]\n</idle-notification>".into(),
            peer_message: "<teammate-message teammate_id=\"{id}\">\n[what {name} tells a teammate]\n</teammate-message>".into(),
        }
    }
}

impl TeamSpec {
    /// A template with a teammate's names filled in.
    pub fn fill(&self, template: &str, name: &str) -> String {
        template
            .replace("{name}", name)
            .replace("{id}", &format!("{name}@{}", self.name))
            .replace("{team}", &self.name)
            .replace("{lead}", &format!("lead@{}", self.name))
    }
}
