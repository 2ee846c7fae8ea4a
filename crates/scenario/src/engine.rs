//! The event engine: the timeline runs in order on the parent's clock; background agents (fork
//! children, sidecars) sit in a queue keyed by (start time, sequence number) and run whenever
//! their time comes before the next thing the parent does. Requests therefore reach the endpoint
//! in start-time order, which is what its cache assumes.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

mod delegate;
mod team;

pub use delegate::TASK_MAX_ROUNDS;

use forkcache_engine::billing::PriceTable;
use forkcache_engine::clock::SimTime;
use forkcache_engine::endpoint::{Call, MockEndpoint};
use forkcache_engine::prompt::KeptBlocks;
use forkcache_engine::prompt::Ttl;
use forkcache_engine::provider::Provider;
use forkcache_engine::verify::{SiblingCheck, check_siblings};
use forkcache_wire::{Betas, Reply, Role};

use super::ScenarioError;
use super::generate::Generator;
use super::record::{GuardEvent, RequestRole, RunConfig, ScenarioRecord, SpawnReport, Who};
use super::report::ScenarioReport;
use super::spec::{EventSpec, ForkSpec, ForkTools, GenerateSpec, Launch, ScenarioSpec, SidecarSpec};
use crate::agent::{
    AgentRequest, Block, BlockRef, CacheSafeParams, FORK_QUERY_SOURCE, Mark, MemoryScope, Message,
    ReplacementPolicy, ReplacementState, RequestRenderer, SectionKind, ThinkingConfig, Tool,
    build_forked_messages, compacted_history, compaction_prompt, directive_text, fork_guard,
    placeholder_result, redecide_fresh, sidecar_prompt, with_tokens, worktree_note,
};

/// Runs a scenario.
pub fn run(
    spec: &ScenarioSpec,
    config: &RunConfig,
    prices: &PriceTable,
) -> Result<ScenarioReport, ScenarioError> {
    run_with_blocks(spec, config, prices, &mut None)
}

/// Runs a scenario starting from the block facts an earlier run left in `blocks`, and leaves
/// its own there (on success) for the next: runs that send the same blocks inspect each once.
/// The report is the same as [`run`]'s.
pub fn run_with_blocks(
    spec: &ScenarioSpec,
    config: &RunConfig,
    prices: &PriceTable,
    blocks: &mut Option<KeptBlocks>,
) -> Result<ScenarioReport, ScenarioError> {
    // On another provider the scenario runs mapped (its models, its policy), whatever policy the
    // caller's endpoint settings name.
    let (mapped, on_provider);
    let (spec, config) = if spec.provider == Provider::Anthropic {
        (spec, config)
    } else {
        mapped = spec.on_provider();
        let mut config = config.clone();
        config.endpoint.cache.policy = mapped.policy;
        on_provider = config;
        (&mapped, &on_provider)
    };
    spec.validate()?;
    if !prices.resolve(&spec.model).known {
        return Err(ScenarioError::spec("model", format!("{:?} is not in the price table", spec.model)));
    }
    let mut engine = Engine::new(spec, config, prices)?;
    if let Some(kept) = blocks.take() {
        engine.endpoint.adopt_blocks(kept);
    }
    if spec.timeline.is_empty() {
        return Err(ScenarioError::spec(
            "timeline",
            "expected at least one event: a scenario without a timeline sends no request",
        ));
    }
    for (index, event) in spec.timeline.iter().enumerate() {
        engine.event(index, event)?;
    }
    engine.drain(None)?;
    *blocks = Some(engine.endpoint.keep_blocks());
    Ok(engine.finish(prices))
}

/// Upper bound on requests per run: every loop in the engine is bounded by the spec, this
/// catches a spec that asks for an absurd amount of work.
const MAX_REQUESTS: usize = 2_000_000;

/// Size of a fork child's final report (its reply's output tokens).
const FORK_REPORT_TOKENS: u64 = 200;
/// Size of a sidecar's answer.
const SIDECAR_REPLY_TOKENS: u64 = 100;

/// A background agent: a fork child, a sidecar, or a named sub-agent.
struct Child {
    role: RequestRole,
    label: String,
    spawn: Option<usize>,
    fork: Option<usize>,
    next: AgentRequest,
    turns_left: u32,
    turn: u32,
    generator: Generator,
    query_source: Option<&'static str>,
    tries_to_fork: bool,
    compacts_first: bool,
    report_tokens: u64,
    finished_at: Option<SimTime>,
    /// Milliseconds its tools take between its requests.
    tool_ms: u64,
    /// Whether each request marks its last block (the s06 sub-agent sends no markers).
    marks_last: bool,
    /// Sends from another workspace (a remote agent).
    remote: bool,
    /// Its type's limit on requests per run (a resume is a new run).
    max_turns: u32,
    /// Its last final report, once written: what its notification carries.
    report: Option<BlockRef>,
}

/// What sending one request gave.
struct Sent {
    total_tokens: u64,
    first_token_at: SimTime,
    completes_at: SimTime,
}

struct Engine<'s> {
    spec: &'s ScenarioSpec,
    config: &'s RunConfig,
    endpoint: MockEndpoint,
    renderer: RequestRenderer,
    now: SimTime,
    queue: BTreeMap<(SimTime, u64), usize>,
    seq: u64,
    children: Vec<Child>,
    records: Vec<ScenarioRecord>,
    /// The records' sums so far, checked as each is added: an overflow is an error naming the
    /// request, never a wrapped total.
    sums: super::report::ScenarioTotals,
    spawns: Vec<SpawnReport>,
    guard: Vec<GuardEvent>,
    // The main loop.
    pending: Arc<Vec<Message>>,
    snapshot: CacheSafeParams,
    replacement: ReplacementState,
    parent_turns: u32,
    parent_generator: Generator,
    /// The model's context window (the price table's `context_window`), when it lists one.
    context_window: Option<u64>,
    last_context: u64,
    last_marked_block: Option<usize>,
    flags: u32,
    sections: Vec<(SectionKind, String, Option<u64>)>,
    tools: Vec<Tool>,
    tools_arc: Arc<Vec<BlockRef>>,
    schema_renders: u64,
    named_count: usize,
    /// The child of each `named` event, in timeline order (what `resume` refers to).
    named_children: Vec<usize>,
    /// Background agents whose `<task-notification>` the parent has not seen yet.
    notices: Vec<delegate::Notice>,
    task_count: usize,
    /// The newest memory snapshot per (agent name, scope); 1 until a refresh.
    memory_snapshots: BTreeMap<(String, MemoryScope), u32>,
    /// The fork gate is on (the scenario forks): every Agent spawn is asynchronous (seed 000).
    forking: bool,
}

fn generate_spec(spec: &ScenarioSpec) -> GenerateSpec {
    spec.history.generate.clone().unwrap_or_default()
}

fn stub_threshold(spec: &ScenarioSpec) -> Option<u64> {
    spec.agent.replacement_context_tokens.map(|_| spec.agent.replacement_min_result_tokens)
}

impl<'s> Engine<'s> {
    fn new(
        spec: &'s ScenarioSpec,
        config: &'s RunConfig,
        prices: &PriceTable,
    ) -> Result<Engine<'s>, ScenarioError> {
        let endpoint = MockEndpoint::new(config.endpoint.clone(), prices.clone())?;
        let context_window = prices.resolve(&spec.model).price.context_window;
        check_target_fits(spec, context_window)?;
        let generate = generate_spec(spec);
        let mut history_generator = Generator::new(&generate, spec.seed, "history", stub_threshold(spec));
        let history = initial_history(spec, &mut history_generator)?;
        let tools = build_tools(spec);
        let tools_arc = Arc::new(tools.iter().map(|t| t.block.clone()).collect());
        let sections = spec
            .agent
            .system
            .iter()
            .map(|s| (s.kind, s.text.clone().unwrap_or_else(|| section_stand_in(s.kind)), s.tokens))
            .collect();
        let mut engine = Engine {
            spec,
            config,
            endpoint,
            renderer: RequestRenderer::default(),
            now: SimTime::ZERO,
            queue: BTreeMap::new(),
            seq: 0,
            children: Vec::new(),
            records: Vec::new(),
            sums: super::report::ScenarioTotals::default(),
            spawns: Vec::new(),
            guard: Vec::new(),
            pending: Arc::new(history),
            snapshot: placeholder_snapshot(spec),
            replacement: ReplacementState::default(),
            parent_turns: 0,
            parent_generator: Generator::new(&generate, spec.seed, "parent", stub_threshold(spec)),
            context_window,
            last_context: 0,
            last_marked_block: None,
            flags: 0,
            sections,
            tools,
            tools_arc,
            schema_renders: 0,
            named_count: 0,
            named_children: Vec::new(),
            notices: Vec::new(),
            task_count: 0,
            memory_snapshots: BTreeMap::new(),
            forking: spec.timeline.iter().any(|event| matches!(event, EventSpec::Fork(_))),
        };
        engine.snapshot = engine.params_now(Arc::clone(&engine.pending), None);
        Ok(engine)
    }

    fn event(&mut self, index: usize, event: &EventSpec) -> Result<(), ScenarioError> {
        match event {
            EventSpec::Turn(turn) => {
                for _ in 0..turn.count {
                    self.drain(Some(self.now))?;
                    self.parent_turn(turn.blocks)?;
                }
                Ok(())
            }
            EventSpec::Idle(idle) => {
                self.now = self.now.plus_ms(idle.ms);
                Ok(())
            }
            EventSpec::FlagFlip(_) => {
                self.flags += 1;
                Ok(())
            }
            EventSpec::Fork(fork) => self.fork(index, fork),
            EventSpec::Named(named) => self.named(index, named),
            EventSpec::Resume(resume) => self.resume(resume),
            EventSpec::Task(task) => self.task(task),
            EventSpec::Team(team) => self.team(team),
            EventSpec::MemoryRefresh(refresh) => {
                *self.memory_snapshots.entry((refresh.agent.clone(), refresh.scope)).or_insert(1) += 1;
                Ok(())
            }
            EventSpec::Sidecar(sidecar) => self.sidecar(sidecar),
            EventSpec::Compact(_) => self.compact_parent(),
            EventSpec::Wait(_) => self.wait_for_background(),
        }
    }

    // ---- the endpoint ----

    fn send(
        &mut self,
        request: &AgentRequest,
        who: Who,
        at: SimTime,
        reply_tokens: u64,
    ) -> Result<Sent, ScenarioError> {
        if self.records.len() >= MAX_REQUESTS {
            return Err(ScenarioError::spec("timeline", format!("more than {MAX_REQUESTS} requests")));
        }
        let output_tokens = if self.spec.bill_output { reply_tokens } else { 0 };
        let reply = Reply { content: Vec::new(), stop_reason: None, output_tokens: Some(output_tokens) };
        // A remote agent works in another workspace, named directly (as a trace's `workspace`).
        let workspace = who.remote.then_some(delegate::REMOTE_API_KEY);
        let call = Call {
            body: &[],
            api_key: None,
            workspace,
            betas: Betas::NONE,
            at,
            first_byte: None,
            reply,
            checked: None,
        };
        let index = self.records.len();
        let (spec, window) = (self.spec, self.context_window);
        let rejected = |e: forkcache_wire::ApiError| match window {
            Some(window) if e.message.starts_with(forkcache_engine::endpoint::PROMPT_TOO_LONG) => {
                past_the_window(spec, index, &e.message, window)
            }
            _ => ScenarioError::Rejected { index, agent: who.label.clone(), message: e.message },
        };
        let (record, naive) = match self.renderer.render(&mut self.endpoint, request).map_err(rejected)? {
            Some(rendered) => {
                let rendered = rendered.request(request.max_tokens);
                let naive = self.config.naive.then(|| self.endpoint.price_alone(&rendered, &call));
                (self.endpoint.handle_rendered(&rendered, &call).map_err(rejected)?.record, naive)
            }
            None => {
                let view = request.view();
                let naive = match self.config.naive {
                    true => Some(self.endpoint.price_view_alone(&view, &call).map_err(rejected)?),
                    false => None,
                };
                (self.endpoint.handle_view(&view, &call).map_err(rejected)?.record, naive)
            }
        };
        let latency = &self.config.endpoint.cache.latency;
        let first_token_at = at.plus_ms(record.ttft_ms);
        let completes_at = first_token_at.plus_ms(latency.generation_ms(record.usage.output_tokens));
        let total_tokens = record.usage.total_input_tokens();
        let mut record = ScenarioRecord::new(index, who, record, naive.as_ref());
        record.body = self.config.keep_bodies.then(|| request.body());
        if !self.sums.checked_add(&record) {
            return Err(ScenarioError::Rejected {
                index,
                agent: record.agent,
                message: "the run's token or cost totals would pass 2^64 (sizes too large)".into(),
            });
        }
        self.records.push(record);
        Ok(Sent { total_tokens, first_token_at, completes_at })
    }

    /// Runs queued background steps that start no later than `until` (all of them for `None`).
    fn drain(&mut self, until: Option<SimTime>) -> Result<(), ScenarioError> {
        while let Some((&(at, seq), &child)) = self.queue.iter().next() {
            if until.is_some_and(|limit| at > limit) {
                break;
            }
            self.queue.remove(&(at, seq));
            self.child_step(child, at)?;
        }
        Ok(())
    }

    fn schedule(&mut self, at: SimTime, child: usize) {
        self.seq += 1;
        self.queue.insert((at, self.seq), child);
    }

    // ---- rendering the main loop's parameters ----

    fn system_now(&self, at: SimTime) -> Arc<Vec<BlockRef>> {
        let blocks = self
            .sections
            .iter()
            .map(|(kind, text, tokens)| Block::text(&self.render_section(*kind, text, at), *tokens))
            .collect();
        Arc::new(blocks)
    }

    fn render_section(&self, kind: SectionKind, text: &str, at: SimTime) -> String {
        if kind != SectionKind::Main {
            return text.to_string();
        }
        let flags = format!("{text}\n# Enabled features\nfeature set {}", self.flags);
        if self.spec.knobs.timestamp_in_system {
            format!("{flags}\nCurrent time: {}", clock_text(at))
        } else {
            format!("{flags}\nToday's date: 2026-11-22")
        }
    }

    fn tools_now(&mut self) -> Arc<Vec<BlockRef>> {
        if !self.spec.knobs.unstable_schema_key_order {
            return Arc::clone(&self.tools_arc);
        }
        // An unordered map iterates in a different order from one process (or request) to the
        // next; rotating the properties on every render is the deterministic worst case of that.
        self.schema_renders += 1;
        let rotation = self.schema_renders as usize;
        let tools = self.tools.iter().enumerate().map(|(index, tool)| {
            if index == 0 { rotated_schema(tool, rotation) } else { tool.block.clone() }
        });
        Arc::new(tools.collect())
    }

    fn thinking(&self) -> Option<ThinkingConfig> {
        self.spec.agent.thinking_budget_tokens.map(|budget_tokens| ThinkingConfig::Enabled { budget_tokens })
    }

    fn params_now(&mut self, messages: Arc<Vec<Message>>, last_reply: Option<Message>) -> CacheSafeParams {
        CacheSafeParams {
            model: self.spec.model.clone(),
            max_tokens: self.spec.agent.max_tokens,
            thinking: self.thinking(),
            system: self.system_now(self.now),
            tools: self.tools_now(),
            messages,
            last_reply,
            last_results: None,
            mark_system: self.spec.agent.system_breakpoint,
            ttl: self.spec.ttl,
        }
    }

    /// The main loop's next request, its markers placed as the agent (or a knob) decides.
    fn main_request(&mut self) -> AgentRequest {
        self.deliver_notices();
        let params = self.params_now(Arc::clone(&self.pending), None);
        let mut request = params.request(Vec::new());
        if let Some(tokens) = self.spec.agent.reminder_tokens {
            let reminder = Block::text(
                &format!("<system-reminder>Time: {}</system-reminder>", clock_text(self.now)),
                Some(tokens),
            );
            request.tail.push(Message::user(vec![reminder]));
            request.marks.retain(|m| matches!(m, Mark::System(_)));
            if self.spec.knobs.breakpoint_on_varying_block {
                request.mark_last_block();
            } else {
                self.mark_history_end(&mut request);
            }
        }
        self.add_lookback_guard(&mut request);
        request
    }

    fn mark_history_end(&self, request: &mut AgentRequest) {
        let last = self.pending.len().saturating_sub(1);
        if let Some(message) = self.pending.last().filter(|m| !m.blocks.is_empty()) {
            request.marks.push(Mark::Message(last as u32, message.blocks.len() as u32 - 1));
            request.marks.sort();
        }
    }

    /// When more blocks than a breakpoint looks back over were appended since the last
    /// request's marker, an extra marker 19 blocks on keeps that entry within reach.
    fn add_lookback_guard(&mut self, request: &mut AgentRequest) {
        let window = self.config.endpoint.cache.lookback_positions.max(1) as usize;
        let flat = flat_blocks(&self.pending);
        let history_end = flat.len().saturating_sub(1);
        if !self.spec.knobs.no_lookback_guard
            && let Some(previous) = self.last_marked_block
            && history_end >= previous + window
        {
            let guard = previous + window - 1;
            let (message, block) = flat[guard];
            request.marks.push(Mark::Message(message as u32, block as u32));
            request.marks.sort();
            request.marks.dedup();
        }
        self.last_marked_block = Some(history_end);
    }

    // ---- the main loop ----

    fn parent_turn(&mut self, blocks: Option<u32>) -> Result<(), ScenarioError> {
        let request = self.main_request();
        let reply = self.parent_generator.reply(blocks);
        let who = Who::new(RequestRole::Parent, format!("parent {}", self.parent_turns + 1));
        let sent = self.send(&request, who, self.now, reply.tokens())?;
        let answer = self.parent_generator.answer(&reply);
        let answer = self.decide_results(answer, sent.total_tokens);
        self.after_main_request(request, reply.clone(), &sent);
        self.snapshot.last_results = Some(answer.clone());
        let pending = Arc::make_mut(&mut self.pending);
        pending.push(reply);
        pending.push(answer);
        self.now = sent.completes_at.plus_ms(self.spec.agent.tool_ms);
        self.auto_compact(sent.total_tokens)
    }

    /// Saves the cache-safe snapshot: only main-loop requests write it.
    fn after_main_request(&mut self, request: AgentRequest, reply: Message, sent: &Sent) {
        self.parent_turns += 1;
        self.last_context = sent.total_tokens;
        self.snapshot = CacheSafeParams {
            model: request.model,
            max_tokens: request.max_tokens,
            thinking: request.thinking,
            system: request.system,
            tools: request.tools,
            messages: request.head,
            last_reply: Some(reply),
            last_results: None,
            mark_system: self.spec.agent.system_breakpoint,
            ttl: self.spec.ttl,
        };
    }

    fn decide_results(&mut self, answer: Message, context_tokens: u64) -> Message {
        let Some(policy) = self.replacement_policy() else { return answer };
        let blocks = answer
            .blocks
            .iter()
            .map(|block| {
                let id = crate::agent::tool_result_id(block).unwrap_or_default();
                self.replacement.decide(&id, block, context_tokens, &policy)
            })
            .collect();
        Message { role: answer.role, blocks }
    }

    fn replacement_policy(&self) -> Option<ReplacementPolicy> {
        self.spec.agent.replacement_context_tokens.map(|context_tokens| ReplacementPolicy {
            context_tokens,
            min_result_tokens: self.spec.agent.replacement_min_result_tokens,
        })
    }

    /// Compacts once the context reaches the threshold, or [`WINDOW_COMPACTION_PERCENT`] of the
    /// model's context window when that is smaller: the summary request reads the whole history
    /// and the turn just answered, and a declared prompt one token past the window is refused
    /// (see [`past_the_window`]), so compaction cannot wait for the window itself.
    fn auto_compact(&mut self, context_tokens: u64) -> Result<(), ScenarioError> {
        let window = self.context_window.map_or(u64::MAX, |w| w / 100 * WINDOW_COMPACTION_PERCENT);
        match self.spec.agent.compaction_threshold_tokens {
            Some(threshold) if context_tokens >= threshold.min(window) => self.compact_parent(),
            _ => Ok(()),
        }
    }

    /// The summary sidecar reads the whole conversation; then the history is the summary.
    fn compact_parent(&mut self) -> Result<(), ScenarioError> {
        // Background steps that start before the summary request are sent first: requests reach
        // the endpoint in start order.
        self.drain(Some(self.now))?;
        // Built like any sidecar: the snapshot's system, tools and config, the whole history.
        let mut params = self.snapshot.clone();
        params.messages = Arc::clone(&self.pending);
        let request = params.request(vec![Message::user(vec![compaction_prompt()])]);
        let summary_tokens = self.spec.agent.summary_tokens;
        let who = Who::new(RequestRole::Compaction, format!("compaction after parent {}", self.parent_turns));
        let sent = self.send(&request, who, self.now, summary_tokens)?;
        self.pending = Arc::new(compacted_history("[summary of the session so far]", summary_tokens));
        self.last_marked_block = None;
        self.now = sent.completes_at;
        Ok(())
    }

    // ---- forks ----

    fn fork(&mut self, index: usize, spec: &ForkSpec) -> Result<(), ScenarioError> {
        self.drain(Some(self.now))?;
        let spawn = self.spawns.len();
        let directives = directives_of(spec);
        let assistant = self.spawn_message(spawn, spec, &directives);
        let mut context_tokens = None;
        let launch_at = if spec.parent_turn {
            let request = self.main_request();
            let who = Who::new(
                RequestRole::Parent,
                format!("parent {} (spawns {})", self.parent_turns + 1, spawn + 1),
            );
            let sent = self.send(&request, who, self.now, assistant.tokens())?;
            self.after_main_request(request, assistant.clone(), &sent);
            context_tokens = Some(sent.total_tokens);
            sent.completes_at
        } else {
            // The spawn follows the history as it stands; system, tools and config stay those of
            // the last main-loop turn (the snapshot), never re-collected.
            self.snapshot.messages = Arc::clone(&self.pending);
            self.snapshot.last_reply = Some(assistant.clone());
            self.snapshot.last_results = None;
            self.now
        };
        // The constant placeholders are built once and shared by every fork of the spawn.
        let placeholders = placeholders(spec, &assistant);
        let requests: Vec<AgentRequest> = (0..directives.len())
            .map(|fork| self.fork_request(spec, &assistant, &placeholders, &directives, fork, launch_at))
            .collect();
        let verification = self.config.verify.then(|| self.verify_spawn(&requests));
        self.launch(spawn, spec, requests, launch_at)?;
        self.spawns.push(SpawnReport::new(index, spawn, spec, directives.len(), verification));
        self.parent_after_spawn(assistant, &directives, launch_at);
        // The spawning request is a main-loop turn: the context threshold applies to it too.
        match context_tokens {
            Some(tokens) => self.auto_compact(tokens),
            None => Ok(()),
        }
    }

    /// Byte identity across the siblings, and against the parent's last request.
    fn verify_spawn(&self, requests: &[AgentRequest]) -> SiblingCheck {
        let parent = self.snapshot.request(Vec::new());
        let laid: Vec<_> = requests.iter().map(AgentRequest::segments).collect();
        check_siblings(&laid, Some(&parent.segments()))
    }

    /// The parent's reply that spawns the forks: one Agent `tool_use` per directive.
    fn spawn_message(&mut self, spawn: usize, spec: &ForkSpec, directives: &[String]) -> Message {
        let mut blocks: Vec<BlockRef> = spec
            .preamble_tokens
            .map(|tokens| Block::text("I'll split this into parallel forks.", Some(tokens)))
            .into_iter()
            .collect();
        for (fork, directive) in directives.iter().enumerate() {
            let tokens = spec.tool_use_tokens.as_ref().map(|sizes| sizes.get(fork));
            let input = json!({"description": format!("fork {}", fork + 1), "prompt": directive, "subagent_type": "fork"});
            let id = format!("toolu_spawn{}_fork{}", spawn + 1, fork + 1);
            blocks.push(Block::from_value(&with_tokens(
                json!({"type": "tool_use", "id": id, "name": "Agent", "input": input}),
                tokens,
            )));
        }
        Message::assistant(blocks)
    }

    fn fork_request(
        &mut self,
        spec: &ForkSpec,
        assistant: &Message,
        placeholders: &[BlockRef],
        directives: &[String],
        fork: usize,
        at: SimTime,
    ) -> AgentRequest {
        let results: Vec<BlockRef> = if self.spec.knobs.real_results {
            tool_uses(assistant)
                .enumerate()
                .map(|(j, tool_use)| {
                    let tokens = spec.placeholder_tokens.as_ref().map(|sizes| sizes.get(j));
                    real_result(tool_use, j == fork, &directives[j], tokens)
                })
                .collect()
        } else {
            placeholders.to_vec()
        };
        let directive = Block::text(&directive_text(&directives[fork]), spec.directive_tokens);
        let after = if spec.worktree { vec![worktree_note(fork + 1)] } else { Vec::new() };
        let tail = build_forked_messages(assistant, fork, &results, directive, after, spec.variant).to_vec();
        let mut params = self.snapshot.clone();
        self.apply_fork_knobs(&mut params, at);
        let mut request = params.request(tail);
        if spec.mark_placeholders {
            let user = request.message_count() as u32 - 1;
            let last_result =
                request.tail[1].blocks.iter().rposition(|b| b.kind == crate::agent::BlockKind::ToolResult);
            if let Some(block) = last_result {
                request.marks.push(Mark::Message(user, block as u32));
                request.marks.sort();
            }
        }
        request
    }

    /// The knobs that make a fork deviate from the parent's snapshot.
    fn apply_fork_knobs(&mut self, params: &mut CacheSafeParams, at: SimTime) {
        let knobs = &self.spec.knobs;
        if knobs.rerender_system_in_forks {
            params.system = self.system_now(at);
        }
        match knobs.fork_tools {
            ForkTools::Exact => {}
            ForkTools::Filtered => {
                params.tools = Arc::new(
                    self.tools.iter().filter(|t| t.name != "Agent").map(|t| t.block.clone()).collect(),
                );
            }
            ForkTools::Reordered => {
                let mut sorted: Vec<&Tool> = self.tools.iter().collect();
                sorted.sort_by(|a, b| b.name.cmp(&a.name));
                params.tools = Arc::new(sorted.into_iter().map(|t| t.block.clone()).collect());
            }
        }
        if let Some(max_tokens) = knobs.fork_max_output_tokens {
            params.max_tokens = max_tokens;
            params.thinking = params.thinking.map(|t| t.clamped_to(max_tokens));
        }
        if knobs.fresh_replacement_state
            && let Some(policy) = self.replacement_policy()
        {
            params.messages = Arc::new(redecide_fresh(&params.messages, self.last_context, &policy));
        }
    }

    fn launch(
        &mut self,
        spawn: usize,
        spec: &ForkSpec,
        requests: Vec<AgentRequest>,
        launch_at: SimTime,
    ) -> Result<(), ScenarioError> {
        let mut first_token_at = launch_at;
        for (fork, request) in requests.into_iter().enumerate() {
            let child = self.children.len();
            self.children.push(Child {
                role: RequestRole::Fork,
                label: format!("fork {}.{}", spawn + 1, fork + 1),
                spawn: Some(spawn),
                fork: Some(fork),
                next: request,
                turns_left: spec.child_turns,
                turn: 0,
                generator: Generator::new(
                    &generate_spec(self.spec),
                    self.spec.seed,
                    &format!("fork {}.{}", spawn + 1, fork + 1),
                    None,
                ),
                query_source: Some(FORK_QUERY_SOURCE),
                tries_to_fork: spec.child_tries_to_fork,
                compacts_first: spec.child_compacts_first,
                report_tokens: 0,
                finished_at: None,
                tool_ms: spec.tool_ms.unwrap_or(self.spec.agent.tool_ms),
                marks_last: true,
                remote: false,
                max_turns: spec.child_turns,
                report: None,
            });
            let at = match spec.launch {
                Launch::Parallel => launch_at,
                Launch::Staggered if fork == 0 => launch_at,
                Launch::Staggered => first_token_at,
                Launch::Sequential => launch_at.plus_ms(spec.gap_ms * fork as u64),
            };
            self.notices.push(delegate::Notice {
                child,
                text: fork_notification(spawn, fork),
                tokens: spec.notification_tokens,
            });
            if fork == 0 {
                self.drain(Some(at))?;
                first_token_at = self.child_step(child, at)?;
            } else {
                self.schedule(at, child);
            }
        }
        Ok(())
    }

    /// The parent goes on: its reply, then the launch receipts as tool results.
    fn parent_after_spawn(&mut self, assistant: Message, directives: &[String], launch_at: SimTime) {
        let results = assistant
            .blocks
            .iter()
            .filter(|b| b.kind == crate::agent::BlockKind::ToolUse)
            .zip(directives)
            .enumerate()
            .map(|(fork, (tool_use, _))| {
                let id = crate::agent::tool_use_id(tool_use).unwrap_or_default();
                Block::from_value(&json!({"type": "tool_result", "tool_use_id": id,
                    "content": format!("Async agent launched successfully. agentId: fork-{}", fork + 1)}))
            })
            .collect();
        let results = Message::user(results);
        self.snapshot.last_results = Some(results.clone());
        let pending = Arc::make_mut(&mut self.pending);
        pending.push(assistant);
        pending.push(results);
        self.now = launch_at.plus_ms(self.spec.agent.tool_ms);
    }

    // ---- background agents ----

    /// Sends a child's next request at `at`; schedules its next turn. Returns its first token.
    fn child_step(&mut self, child: usize, at: SimTime) -> Result<SimTime, ScenarioError> {
        let (request, who) = {
            let c = &mut self.children[child];
            c.turn += 1;
            c.turns_left -= 1;
            let who = Who {
                role: c.role,
                label: format!("{} turn {}", c.label, c.turn),
                spawn: c.spawn,
                fork: c.fork,
                remote: c.remote,
            };
            (c.next.clone(), who)
        };
        let last = self.children[child].turns_left == 0;
        let reply = if last {
            self.final_reply(child)
        } else if self.wants_fork(child) {
            agent_call(child)
        } else {
            self.children[child].generator.reply(Some(2))
        };
        let sent = self.send(&request, who, at, reply.tokens())?;
        if last {
            // The final reply stays in its transcript: a resume continues from it.
            let c = &mut self.children[child];
            c.finished_at = Some(sent.completes_at);
            c.report = reply.blocks.first().cloned();
            c.next = extended_with(&c.next, vec![reply], c.marks_last);
            return Ok(sent.first_token_at);
        }
        let answer = self.child_answer(child, &reply, sent.completes_at)?;
        let c = &mut self.children[child];
        c.next = extended_with(&c.next, vec![reply, answer], c.marks_last);
        let next_at = sent.completes_at.plus_ms(c.tool_ms);
        self.schedule(next_at, child);
        Ok(sent.first_token_at)
    }

    fn final_reply(&mut self, child: usize) -> Message {
        let c = &mut self.children[child];
        let tokens = if c.report_tokens > 0 { c.report_tokens } else { FORK_REPORT_TOKENS };
        Message::assistant(vec![c.generator.text("report", tokens)])
    }

    /// The tool results a child gets back; a fork child that asks to fork is refused here.
    fn child_answer(&mut self, child: usize, reply: &Message, at: SimTime) -> Result<Message, ScenarioError> {
        if !self.wants_fork(child) {
            return Ok(self.children[child].generator.answer(reply));
        }
        if self.children[child].compacts_first {
            self.compact_child(child, at)?;
        }
        let c = &self.children[child];
        let verdict = fork_guard(c.query_source, c.next.messages());
        self.guard.push(GuardEvent {
            agent: c.label.clone(),
            turn: c.turn,
            compacted: c.compacts_first,
            verdict,
        });
        let text = if verdict.refused() {
            "Error: forked workers cannot fork."
        } else {
            "Async agent launched successfully."
        };
        let ids: Vec<String> = reply.blocks.iter().filter_map(crate::agent::tool_use_id).collect();
        let results = ids
            .iter()
            .map(|id| Block::from_value(&json!({"type": "tool_result", "tool_use_id": id, "content": text, "is_error": verdict.refused()})))
            .collect();
        Ok(Message::user(results))
    }

    /// A fork child that tries to fork does so in its first reply.
    fn wants_fork(&self, child: usize) -> bool {
        self.children[child].tries_to_fork && self.children[child].turn == 1
    }

    fn compact_child(&mut self, child: usize, at: SimTime) -> Result<(), ScenarioError> {
        let c = &self.children[child];
        let request = extended(&c.next, vec![Message::user(vec![compaction_prompt()])]);
        let who = Who {
            role: RequestRole::Compaction,
            label: format!("{} compaction", c.label),
            spawn: c.spawn,
            fork: c.fork,
            remote: c.remote,
        };
        self.send(&request, who, at, self.spec.agent.summary_tokens)?;
        let c = &mut self.children[child];
        // Each child summarises its own work (its directive, its turns), so siblings' summaries
        // are different bytes: one compacted child never reads another's summary.
        let summary = format!("[summary of {}'s work so far]", c.label);
        c.next.head = Arc::new(compacted_history(&summary, self.spec.agent.summary_tokens));
        c.next.tail.clear();
        Ok(())
    }

    fn push_child(
        &mut self,
        role: RequestRole,
        label: String,
        next: AgentRequest,
        turns: u32,
        report_tokens: u64,
    ) -> usize {
        let generator = Generator::new(&generate_spec(self.spec), self.spec.seed, &label, None);
        self.children.push(Child {
            role,
            label,
            spawn: None,
            fork: None,
            next,
            turns_left: turns,
            turn: 0,
            generator,
            query_source: None,
            tries_to_fork: false,
            compacts_first: false,
            report_tokens,
            finished_at: None,
            tool_ms: self.spec.agent.tool_ms,
            marks_last: true,
            remote: false,
            max_turns: turns,
            report: None,
        });
        self.children.len() - 1
    }

    fn sidecar(&mut self, spec: &SidecarSpec) -> Result<(), ScenarioError> {
        let at = self.now.plus_ms(spec.delay_ms);
        let mut params = self.snapshot.clone();
        if self.spec.knobs.sidecar_recollects {
            params.system = self.system_now(at);
        }
        let request = params.sidecar_request(sidecar_prompt(spec.kind, &spec.question, spec.prompt_tokens));
        let label = format!("{} after parent {}", spec.kind.name(), self.parent_turns);
        let child = self.push_child(RequestRole::Sidecar, label, request, 1, SIDECAR_REPLY_TOKENS);
        self.schedule(at, child);
        Ok(())
    }

    fn finish(self, prices: &PriceTable) -> ScenarioReport {
        let work = self.renderer.work();
        ScenarioReport::new(self.spec, self.config, prices, self.records, self.spawns, self.guard, work)
    }
}

/// The assistant message's `tool_use` blocks.
fn tool_uses(assistant: &Message) -> impl Iterator<Item = &BlockRef> {
    assistant.blocks.iter().filter(|b| b.kind == crate::agent::BlockKind::ToolUse)
}

/// One constant placeholder result per `tool_use` of the spawning message.
fn placeholders(spec: &ForkSpec, assistant: &Message) -> Vec<BlockRef> {
    tool_uses(assistant)
        .enumerate()
        .map(|(j, tool_use)| {
            placeholder_result(tool_use, spec.placeholder_tokens.as_ref().map(|sizes| sizes.get(j)))
        })
        .collect()
}

/// `request` followed by `messages`: system markers kept, the last block marked.
fn extended(request: &AgentRequest, messages: Vec<Message>) -> AgentRequest {
    extended_with(request, messages, true)
}

/// `request` followed by `messages`: system markers kept, the last block marked when `mark_last`.
fn extended_with(request: &AgentRequest, messages: Vec<Message>, mark_last: bool) -> AgentRequest {
    let mut next = request.clone();
    next.tail.extend(messages);
    next.marks.retain(|m| matches!(m, Mark::System(_)));
    if mark_last {
        next.mark_last_block();
    }
    next
}

/// The `<task-notification>` a fork's end puts in the parent's next user turn, shaped as Claude
/// Code 2.1's (`fixtures/clients/claude-code-2.1.330-forks.jsonl`, line 5): with forking on every
/// spawn is asynchronous and its result reaches the parent this way (seed 000). `{result}` is
/// the fork's final report.
fn fork_notification(spawn: usize, fork: usize) -> String {
    let (spawn, fork) = (spawn + 1, fork + 1);
    format!(
        "<task-notification>\n<task-id>fork {spawn}.{fork}</task-id>\n<tool-use-id>toolu_spawn{spawn}_fork{fork}</tool-use-id>\n<status>completed</status>\n<summary>Agent \"fork {fork}\" finished</summary>\n<result>{{result}}</result>\n</task-notification>"
    )
}

/// A reply calling the Agent tool with `subagent_type: "fork"`.
fn agent_call(child: usize) -> Message {
    let input =
        json!({"description": "nested fork", "prompt": "Split this further.", "subagent_type": "fork"});
    let id = format!("toolu_nested_fork_{child}");
    Message::assistant(vec![Block::from_value(
        &json!({"type": "tool_use", "id": id, "name": "Agent", "input": input}),
    )])
}

/// `(message, block)` of every block, in order.
fn flat_blocks(messages: &[Message]) -> Vec<(usize, usize)> {
    messages
        .iter()
        .enumerate()
        .flat_map(|(m, message)| (0..message.blocks.len()).map(move |b| (m, b)))
        .collect()
}

fn directives_of(spec: &ForkSpec) -> Vec<String> {
    if !spec.directives.is_empty() {
        return spec.directives.clone();
    }
    (1..=spec.count.unwrap_or(0))
        .map(|i| format!("Carry out part {i} of the plan and report back."))
        .collect()
}

/// A per-fork result in place of the constant placeholder (the mistake).
fn real_result(tool_use: &BlockRef, own: bool, directive: &str, tokens: Option<u64>) -> BlockRef {
    let id = crate::agent::tool_use_id(tool_use).unwrap_or_default();
    let content =
        if own { format!("Running: {directive}") } else { "Queued behind another fork.".to_string() };
    Block::from_value(&with_tokens(
        json!({"type": "tool_result", "tool_use_id": id, "content": content}),
        tokens,
    ))
}

fn clock_text(at: SimTime) -> String {
    let seconds = at.ms() / 1000;
    format!("2026-11-22T{:02}:{:02}:{:02}Z", 9 + seconds / 3600 % 15, seconds / 60 % 60, seconds % 60)
}

fn section_stand_in(kind: SectionKind) -> String {
    match kind {
        SectionKind::Identity => "You are Claude Code, Anthropic's official CLI for Claude.".into(),
        SectionKind::Main => "# Instructions\nHelp the user with software engineering tasks.".into(),
        SectionKind::ProjectConventions => {
            "# Project conventions (CLAUDE.md)\nRun the tests before committing.".into()
        }
        SectionKind::GitStatus => "gitStatus: branch main, clean".into(),
        SectionKind::Other => "# Other context".into(),
    }
}

fn build_tools(spec: &ScenarioSpec) -> Vec<Tool> {
    spec.agent
        .tools
        .iter()
        .map(|tool| {
            let definition = json!({"name": tool.name, "description": format!("The {} tool.", tool.name),
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}, "query": {"type": "string"},
                    "limit": {"type": "integer"}, "offset": {"type": "integer"}}, "required": ["path"]}});
            Tool { name: tool.name.clone(), read_only: tool.read_only, async_safe: tool.async_safe, block: Block::from_value(&with_tokens(definition, tool.tokens)) }
        })
        .collect()
}

/// The tool's definition with its schema's properties rotated, as a serializer over an
/// unordered map may write them.
#[allow(clippy::expect_used)] // a tool block is JSON the scenario serialized itself
fn rotated_schema(tool: &Tool, rotation: usize) -> BlockRef {
    let mut value: Value = serde_json::from_str(tool.block.json()).expect("a tool block is JSON");
    if let Some(Value::Object(properties)) = value.pointer_mut("/input_schema/properties") {
        let mut entries: Vec<(String, Value)> = std::mem::take(properties).into_iter().collect();
        let len = entries.len().max(1);
        entries.rotate_left(rotation % len);
        properties.extend(entries);
    }
    Block::from_value(&value)
}

fn placeholder_snapshot(spec: &ScenarioSpec) -> CacheSafeParams {
    CacheSafeParams {
        model: spec.model.clone(),
        max_tokens: spec.agent.max_tokens,
        thinking: None,
        system: Arc::new(Vec::new()),
        tools: Arc::new(Vec::new()),
        messages: Arc::new(Vec::new()),
        last_reply: None,
        last_results: None,
        mark_system: false,
        ttl: Ttl::FiveMinutes,
    }
}

/// Where auto-compaction starts at the latest, in percent of the model's context window: room
/// for the summary request, which reads the whole history plus the last turn.
const WINDOW_COMPACTION_PERCENT: u64 = 90;

/// A generated history past the model's context window could never be sent.
fn check_target_fits(spec: &ScenarioSpec, window: Option<u64>) -> Result<(), ScenarioError> {
    match (spec.history.target_tokens, window) {
        (Some(target), Some(window)) if target >= window => Err(ScenarioError::spec(
            "history.target_tokens",
            format!(
                "{target} tokens do not fit {}'s context window of {window} tokens (the price \
                 table's `context_window`); expected a smaller target",
                spec.model
            ),
        )),
        _ => Ok(()),
    }
}

/// A request the endpoint refused as past the model's context window: with compaction off, the
/// scenario's fix is a threshold (with it on, the history alone is too long).
fn past_the_window(spec: &ScenarioSpec, index: usize, refusal: &str, window: u64) -> ScenarioError {
    let fix = match spec.agent.compaction_threshold_tokens {
        None => format!("expected compaction before the window, e.g. a threshold of {}", window / 100 * 80),
        Some(_) => "expected a shorter history: compaction cannot shrink what the first request holds".into(),
    };
    ScenarioError::spec(
        "agent.compaction_threshold_tokens",
        format!(
            "request {index} was refused ({refusal}): past {}'s context window of {window} tokens \
             (the price table's `context_window`); {fix}",
            spec.model
        ),
    )
}

/// Steps `history.target_tokens` may draw (as many as `history.generate.turns` may ask for).
const MAX_TARGET_TURNS: u32 = 100_000;

fn initial_history(spec: &ScenarioSpec, generator: &mut Generator) -> Result<Vec<Message>, ScenarioError> {
    let messages = match (&spec.history.messages, spec.history.target_tokens) {
        (Some(literal), _) => literal_history(literal, stub_threshold(spec))?,
        (None, Some(target)) => generator.history_to(target, MAX_TARGET_TURNS).ok_or_else(|| {
            ScenarioError::spec(
                "history.target_tokens",
                format!(
                    "{target} tokens not reached in {MAX_TARGET_TURNS} generated steps; raise \
                     history.generate's token ranges or lower the target"
                ),
            )
        })?,
        (None, None) => generator.history(generate_spec(spec).turns),
    };
    match messages.last() {
        Some(last) if last.role == Role::User => Ok(messages),
        Some(_) => Err(ScenarioError::spec("history.messages", "the last message must have role \"user\"")),
        None => Err(ScenarioError::spec("history.messages", "expected at least one message")),
    }
}

fn literal_history(messages: &[Value], stub_from: Option<u64>) -> Result<Vec<Message>, ScenarioError> {
    messages.iter().enumerate().map(|(index, message)| literal_message(index, message, stub_from)).collect()
}

fn literal_message(index: usize, message: &Value, stub_from: Option<u64>) -> Result<Message, ScenarioError> {
    let at = |field: &str| format!("history.messages[{index}]{field}");
    let role = match message.get("role").and_then(Value::as_str) {
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some("system") => Role::System,
        _ => return Err(ScenarioError::spec(at(".role"), "expected \"user\", \"assistant\" or \"system\"")),
    };
    let blocks = match message.get("content") {
        Some(Value::String(text)) => vec![Block::text(text, None)],
        Some(Value::Array(blocks)) => literal_blocks(blocks, &at(".content"), stub_from)?,
        _ => {
            return Err(ScenarioError::spec(
                at(".content"),
                "expected a string or an array of content blocks",
            ));
        }
    };
    Ok(Message { role, blocks })
}

fn literal_blocks(
    blocks: &[Value],
    path: &str,
    stub_from: Option<u64>,
) -> Result<Vec<BlockRef>, ScenarioError> {
    blocks
        .iter()
        .enumerate()
        .map(|(index, block)| {
            let at = format!("{path}[{index}]");
            if !block.is_object() {
                return Err(ScenarioError::spec(at, "expected a content block object"));
            }
            if block.get("cache_control").is_some() {
                return Err(ScenarioError::spec(
                    format!("{at}.cache_control"),
                    "not allowed: the agent places the markers",
                ));
            }
            Ok(with_literal_stub(Block::from_value(block), stub_from))
        })
        .collect()
}

/// A large literal tool result can be stubbed out by the replacement budget like a generated one.
fn with_literal_stub(block: BlockRef, stub_from: Option<u64>) -> BlockRef {
    match (stub_from, crate::agent::tool_result_id(&block)) {
        (Some(min), Some(id)) if block.kind == crate::agent::BlockKind::ToolResult && block.tokens >= min => {
            Block::with_stub(block, crate::agent::result_stub(&id, 60))
        }
        _ => block,
    }
}
