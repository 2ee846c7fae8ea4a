//! Delegation that is not a fork: named sub-agents of every type under each launch mode
//! (sync, background, remote), resuming one from its transcript, and the s06 teaching
//! sub-agent. Each starts with a parent request whose reply calls a tool; the child runs on the
//! queue; its report comes back as that call's result (sync) or as a `<task-notification>` in
//! the parent's conversation once it ends (background, remote).

use std::sync::Arc;

use serde_json::{Value, json};

use forkcache_engine::clock::SimTime;

use super::{Engine, Sent, extended};
use crate::ScenarioError;
use crate::agent::{
    AgentDefinition, AgentRequest, Block, BlockRef, Isolation, Mark, MemoryPosition, Message, NamedAgent,
    SectionKind, ToolRules, agent_tools, memory_block, named_system, with_tokens, worktree_note_at,
};
use crate::record::{RequestRole, Who};
use crate::spec::{NamedLaunch, NamedSpec, ResumeSpec, TaskSpec};

/// The API key a remote agent's requests carry: another workspace, so another cache.
pub(super) const REMOTE_API_KEY: &str = "remote-workspace";

/// The seed's safety limit on the teaching sub-agent's loop.
pub const TASK_MAX_ROUNDS: u32 = 30;

/// The parent's tools the teaching sub-agent does not get. The seed: "it has
/// bash/read/write/edit/glob, but no task" — its `sub_tools` are the base tools, so neither
/// `task` (no recursion) nor s05's `todo_write` (the parent's planning tool).
const TASK_CHILD_LEAVES_OUT: [&str; 2] = ["task", "todo_write"];

/// `max_tokens` of the teaching sub-agent's requests (the seed's code).
const TASK_MAX_TOKENS: u64 = 8_000;

/// A background agent's notification, waiting for the agent to end. Its text holds
/// `{result}` where the agent's final report goes once it is written.
pub(super) struct Notice {
    pub(super) child: usize,
    pub(super) text: String,
    /// Declared size of the notification around the report (counted from its text when unset).
    pub(super) tokens: Option<u64>,
}

/// A background launch's notification: its template (`{id}`, `{name}`, `{tool_use_id}` and
/// `{result}` filled in), the name it gives the agent, its declared size.
struct Launch<'t> {
    template: &'t str,
    name: &'t str,
    tokens: Option<u64>,
}

impl Notice {
    /// The notification as the parent reads it: the frame with the agent's report inside, its
    /// size the frame's plus the report's (seed 000: results reach the parent as notifications).
    fn block(&self, report: Option<&BlockRef>) -> BlockRef {
        let report_text = report.and_then(crate::agent::block_text).unwrap_or_default();
        let frame =
            self.tokens.unwrap_or_else(|| Block::text(&self.text.replace("{result}", ""), None).tokens);
        let size = frame + report.map_or(0, |r| r.tokens);
        Block::text(&self.text.replace("{result}", &report_text), Some(size))
    }
}

impl Engine<'_> {
    pub(super) fn named(&mut self, index: usize, spec: &NamedSpec) -> Result<(), ScenarioError> {
        let asked = spec.launch;
        let definition = custom_definition(index, spec)?;
        let forced;
        let spec = match self.launch_override(spec, definition.as_ref()) {
            Some(overridden) => {
                forced = overridden;
                &forced
            }
            None => spec,
        };
        self.drain(Some(self.now))?;
        self.named_count += 1;
        let number = self.named_count;
        let name = definition.as_ref().map_or(spec.agent.name(), |d| d.name.as_str()).to_string();
        let id = format!("toolu_named{number}");
        let mut input = json!({"description": name, "prompt": spec.prompt, "subagent_type": name});
        if asked != NamedLaunch::Sync {
            input["run_in_background"] = json!(true);
        }
        let (call, sent) = self.parent_calls(&id, "Agent", input, &name)?;
        let child = self.named_child(spec, definition.as_ref(), &name, number);
        self.named_children.push(child);
        match spec.launch {
            NamedLaunch::Sync => {
                let done = self.run_to_end(child, sent.completes_at)?;
                self.parent_gets(call, &id, format!("{name} report"), spec.result_tokens, done);
            }
            NamedLaunch::Background | NamedLaunch::Remote => {
                self.children[child].remote = spec.launch == NamedLaunch::Remote;
                let notice =
                    Launch { template: &spec.notification, name: &name, tokens: spec.notification_tokens };
                self.run_in_background(call, &id, child, sent.completes_at, notice);
            }
        }
        Ok(())
    }

    /// The child runs from `at` on the queue; the parent gets the launch receipt as the call's
    /// result and goes on, and the child's report reaches it later in its notification.
    fn run_in_background(&mut self, call: Message, id: &str, child: usize, at: SimTime, notice: Launch) {
        self.schedule(at, child);
        let label = self.children[child].label.clone();
        let receipt = format!("Async agent launched successfully. agentId: {label}");
        self.parent_gets(call, id, receipt, 0, at.plus_ms(self.spec.agent.tool_ms));
        let text = notice
            .template
            .replace("{id}", &label)
            .replace("{name}", notice.name)
            .replace("{tool_use_id}", id);
        self.notices.push(Notice { child, text, tokens: notice.tokens });
    }

    /// Seed 000: "Enabling forks also changes the overall behavior of the Agent tool: all agent
    /// spawns become asynchronous, using a unified task-notification interaction model." With
    /// forking on (the scenario forks), a named agent asked to run synchronously runs in the
    /// background instead: the parent gets the launch receipt and, later, the notification with
    /// the report; the agent's tools lose those not async-safe, as any async agent's do. The
    /// model did not ask for the background, so the call's input has no `run_in_background`.
    /// A custom agent's `background: true` or `isolation: remote` launches it so as well
    /// (seed 004: the runtime "checks … background settings, and isolation settings");
    /// `isolation: worktree` gives it the worktree note.
    fn launch_override(&self, spec: &NamedSpec, definition: Option<&AgentDefinition>) -> Option<NamedSpec> {
        let isolation = definition.and_then(|d| d.isolation);
        let mut launch = spec.launch;
        if isolation == Some(Isolation::Remote) {
            launch = NamedLaunch::Remote;
        } else if launch == NamedLaunch::Sync && (self.forking || definition.is_some_and(|d| d.background)) {
            launch = NamedLaunch::Background;
        }
        let worktree = spec.worktree || isolation == Some(Isolation::Worktree);
        (launch != spec.launch || worktree != spec.worktree).then(|| NamedSpec {
            launch,
            worktree,
            ..spec.clone()
        })
    }

    /// The parent's request whose reply is one call of `tool`; the snapshot is saved as for any
    /// main-loop turn.
    pub(super) fn parent_calls(
        &mut self,
        id: &str,
        tool: &str,
        input: Value,
        what: &str,
    ) -> Result<(Message, Sent), ScenarioError> {
        let call = Message::assistant(vec![Block::from_value(
            &json!({"type": "tool_use", "id": id, "name": tool, "input": input}),
        )]);
        let request = self.main_request();
        let who = Who::new(RequestRole::Parent, format!("parent {} (calls {what})", self.parent_turns + 1));
        let sent = self.send(&request, who, self.now, call.tokens())?;
        self.after_main_request(request, call.clone(), &sent);
        Ok((call, sent))
    }

    /// The call and its result join the parent's conversation; the parent goes on at `at`.
    /// A result of 0 tokens is counted from its text.
    pub(super) fn parent_gets(&mut self, call: Message, id: &str, content: String, tokens: u64, at: SimTime) {
        let declared = (tokens > 0).then_some(tokens);
        let result = Block::from_value(&with_tokens(
            json!({"type": "tool_result", "tool_use_id": id, "content": content}),
            declared,
        ));
        let results = Message::user(vec![result]);
        self.snapshot.last_results = Some(results.clone());
        let pending = Arc::make_mut(&mut self.pending);
        pending.push(call);
        pending.push(results);
        self.now = at;
    }

    /// Runs the queue (other background agents included, in start order) until `child`, queued
    /// at `at`, has sent its last request; returns when that request completes.
    #[allow(clippy::expect_used)] // the child stays queued until it finishes
    fn run_to_end(&mut self, child: usize, at: SimTime) -> Result<SimTime, ScenarioError> {
        self.schedule(at, child);
        while self.children[child].finished_at.is_none() {
            let (&(at, seq), &next) =
                self.queue.iter().next().expect("the child is queued until it finishes");
            self.queue.remove(&(at, seq));
            self.child_step(next, at)?;
        }
        Ok(self.children[child].finished_at.expect("checked by the loop"))
    }

    fn named_child(
        &mut self,
        spec: &NamedSpec,
        definition: Option<&AgentDefinition>,
        name: &str,
        number: usize,
    ) -> usize {
        let sections: Vec<(SectionKind, BlockRef)> = self
            .sections
            .iter()
            .map(|(kind, text, tokens)| {
                (*kind, Block::text(&self.render_section(*kind, text, self.now), *tokens))
            })
            .collect();
        let agent = spec.agent;
        let (instructions, own_tokens) = match definition {
            Some(d) => (d.prompt.as_str(), None),
            None => (agent.instructions(), Some(self.spec.agent.named_system_tokens)),
        };
        let rules = ToolRules {
            disallowed_for_all: &self.spec.agent.disallowed_for_agents,
            disallowed_for_custom: &self.spec.agent.disallowed_for_custom_agents,
            background: spec.launch != NamedLaunch::Sync,
            disallowed_by_definition: definition.map_or(&[], |d| d.disallowed_tools.as_slice()),
        };
        let configured = definition.and_then(|d| d.tools.as_deref()).or(spec.tools.as_deref());
        let label = format!("{name} {number}");
        let mut prompt = vec![Block::text(&spec.prompt, spec.prompt_tokens)];
        if spec.worktree {
            prompt.push(worktree_note_at(&format!("agent-{number}")));
        }
        let mut system = named_system(agent, instructions, &sections, own_tokens);
        if let Some(memory) = &spec.memory {
            let snapshot = self.memory_snapshots.get(&(name.to_string(), memory.scope)).copied().unwrap_or(1);
            let block = memory_block(&memory.template, memory.scope, name, snapshot, memory.tokens);
            match memory.position {
                MemoryPosition::SystemStart => system.insert(0, block),
                MemoryPosition::SystemEnd => system.push(block),
                MemoryPosition::FirstMessage => prompt.insert(0, block),
            }
        }
        let mut next = AgentRequest {
            model: self.named_model(spec, definition),
            max_tokens: self.spec.agent.max_tokens,
            thinking: None,
            system: Arc::new(system),
            tools: Arc::new(agent_tools(agent, configured, &rules, &self.tools)),
            head: Arc::new(vec![Message::user(prompt)]),
            tail: Vec::new(),
            marks: vec![Mark::System(0)],
            ttl: self.spec.ttl,
        };
        next.mark_last_block();
        let max_turns = definition.and_then(|d| d.max_turns).unwrap_or(agent.max_turns());
        let child =
            self.push_child(RequestRole::Named, label, next, spec.turns.min(max_turns), spec.result_tokens);
        let c = &mut self.children[child];
        c.max_turns = max_turns;
        if let Some(ms) = spec.tool_ms {
            c.tool_ms = ms;
        }
        child
    }

    /// The spec's model, else the definition's (an alias or an id), else Explore's own, else the
    /// parent's.
    fn named_model(&self, spec: &NamedSpec, definition: Option<&AgentDefinition>) -> String {
        let aliased = |model: &String| {
            self.spec.provider.model_for(self.spec.agent.model_aliases.get(model).unwrap_or(model))
        };
        if let Some(model) = spec.model.as_ref().or(definition.and_then(|d| d.model.as_ref())) {
            return aliased(model);
        }
        match spec.agent {
            NamedAgent::Explore => self.spec.agent.explore_model.clone(),
            _ => self.spec.model.clone(),
        }
    }

    /// The parent sends a named agent a new prompt; it continues its own transcript. The parent
    /// waits for its report, except with forking on: then, as every spawn (seed 000: "all agent
    /// spawns become asynchronous"), the parent gets the launch receipt and goes on, and the
    /// report reaches it later in a `<task-notification>`.
    #[allow(clippy::expect_used)] // an unfinished child is always queued (validate_resume checked the index)
    pub(super) fn resume(&mut self, spec: &ResumeSpec) -> Result<(), ScenarioError> {
        self.drain(Some(self.now))?;
        let child = self.named_children[spec.named - 1];
        let done = match self.children[child].finished_at {
            Some(done) => done,
            None => {
                // Still running in the background: the parent waits for it first.
                let (at, seq) = self.queued_step_of(child).expect("an unfinished child is queued");
                self.queue.remove(&(at, seq));
                self.run_to_end(child, at)?
            }
        };
        if self.forking {
            // The parent resumes an agent once its notification arrived: the notice pending
            // now carries this run's report, not the resumed one's.
            self.now = self.now.max(done);
        }
        let label = self.children[child].label.clone();
        let id = format!("toolu_resume{}_{}", spec.named, self.children[child].turn);
        let input = json!({"resume": label, "prompt": spec.prompt});
        let (call, sent) = self.parent_calls(&id, "Agent", input, &format!("resume of {label}"))?;
        let c = &mut self.children[child];
        let prompt = Message::user(vec![Block::text(&spec.prompt, spec.prompt_tokens)]);
        c.next = extended(&c.next, vec![prompt]);
        c.turns_left = spec.turns.min(c.max_turns);
        c.finished_at = None;
        c.report_tokens = spec.result_tokens;
        if self.forking {
            let template = crate::spec::notification_template();
            let notice = Launch { template: &template, name: &label, tokens: None };
            self.run_in_background(call, &id, child, sent.completes_at, notice);
        } else {
            let done = self.run_to_end(child, sent.completes_at)?;
            self.parent_gets(call, &id, format!("{label} report"), spec.result_tokens, done);
        }
        Ok(())
    }

    fn queued_step_of(&self, child: usize) -> Option<(SimTime, u64)> {
        self.queue.iter().find(|(_, queued)| **queued == child).map(|(key, _)| *key)
    }

    /// Seed 003's `spawn_subagent`: fresh messages, its own system prompt, the parent's base
    /// tools (without `task` and `todo_write`), at most 30 rounds; only its final text returns.
    pub(super) fn task(&mut self, spec: &TaskSpec) -> Result<(), ScenarioError> {
        self.drain(Some(self.now))?;
        self.task_count += 1;
        let number = self.task_count;
        let id = format!("toolu_task{number}");
        let (call, sent) =
            self.parent_calls(&id, "task", json!({"description": spec.description}), "task")?;
        let tools = self
            .tools
            .iter()
            .filter(|t| !TASK_CHILD_LEAVES_OUT.contains(&t.name.as_str()))
            .map(|t| t.block.clone())
            .collect();
        let mut next = AgentRequest {
            model: self.spec.model.clone(),
            max_tokens: TASK_MAX_TOKENS,
            thinking: None,
            system: Arc::new(vec![Block::text(&spec.system, spec.system_tokens)]),
            tools: Arc::new(tools),
            head: Arc::new(vec![Message::user(vec![Block::text(
                &spec.description,
                spec.description_tokens,
            )])]),
            tail: Vec::new(),
            marks: Vec::new(),
            ttl: self.spec.ttl,
        };
        if spec.cache_markers {
            next.marks.push(Mark::System(0));
            next.mark_last_block();
        }
        let rounds = spec.rounds.min(TASK_MAX_ROUNDS);
        let child =
            self.push_child(RequestRole::Task, format!("task {number}"), next, rounds, spec.result_tokens);
        let c = &mut self.children[child];
        c.marks_last = spec.cache_markers;
        c.tool_ms = spec.tool_ms.unwrap_or(c.tool_ms);
        let done = self.run_to_end(child, sent.completes_at)?;
        self.parent_gets(call, &id, "[the sub-agent's final text]".into(), spec.result_tokens, done);
        Ok(())
    }

    /// The parent waits until every background agent whose notification it has not seen has
    /// ended; the clock moves to the last end.
    #[allow(clippy::expect_used)] // an unfinished child is always queued
    pub(super) fn wait_for_background(&mut self) -> Result<(), ScenarioError> {
        let waited: Vec<usize> = self.notices.iter().map(|notice| notice.child).collect();
        for child in waited {
            if self.children[child].finished_at.is_none() {
                let (at, seq) = self.queued_step_of(child).expect("an unfinished child is queued");
                self.queue.remove(&(at, seq));
                self.run_to_end(child, at)?;
            }
            let ended = self.children[child].finished_at.expect("run to its end");
            self.now = self.now.max(ended);
        }
        Ok(())
    }

    /// Background agents that have ended by now: their notifications join the parent's last
    /// (not yet sent) user message, after its tool results.
    pub(super) fn deliver_notices(&mut self) {
        let now = self.now;
        let ended = |notice: &Notice| self.children[notice.child].finished_at.is_some_and(|at| at <= now);
        let (ready, waiting): (Vec<Notice>, Vec<Notice>) =
            std::mem::take(&mut self.notices).into_iter().partition(ended);
        self.notices = waiting;
        let blocks: Vec<BlockRef> =
            ready.iter().map(|notice| notice.block(self.children[notice.child].report.as_ref())).collect();
        let pending = Arc::make_mut(&mut self.pending);
        if let Some(last) = pending.last_mut() {
            last.blocks.extend(blocks);
        }
    }
}

/// A custom agent's parsed definition (validation has checked it parses).
fn custom_definition(index: usize, spec: &NamedSpec) -> Result<Option<AgentDefinition>, ScenarioError> {
    if spec.definition.is_none() && spec.definition_file.is_some() {
        return Err(ScenarioError::spec(
            format!("timeline[{index}].named.definition_file"),
            "not read yet: load it with ScenarioSpec::load_agent_files (`forkcache run` does)",
        ));
    }
    spec.definition
        .as_deref()
        .map(|text| {
            AgentDefinition::from_markdown(text).map_err(|e| {
                ScenarioError::spec(format!("timeline[{index}].named.definition"), e.to_string())
            })
        })
        .transpose()
}
