//! The prediction: each imported session re-run through the same [`MockEndpoint`] as `replay`,
//! built from what the transcript says about each request *before* its reply — never from its
//! own read/write split.
//!
//! Each chain is a request with Claude Code's marker layout: a system block holding the stable
//! prefix (system prompt and tools, one declared size) with a breakpoint, then the conversation,
//! one block per request holding that request's growth (`forkcache_tokens`), with the last block
//! marked. A request's total input is known from the transcript, so the block it adds is the
//! total minus what the chain already held. A compaction replaces the history by one summary
//! block; a turn in another working directory or at another effort level sends the whole
//! history anew (Claude Code's system prompt names the directory after the stable prefix, and
//! the API renders the effort ahead of the messages); a fork child starts from its parent's
//! context at the spawning request; a model switch changes the model and so the cache scope.
//!
//! The endpoint's read is the prediction; the rest of a request's input is split into uncached
//! and written where its last breakpoint lies. That place is the request's own uncached count:
//! what it sent after the breakpoint, a property of its bytes like its total input (the API
//! counts the same tail whether the prefix before it was read or written). So the split is the
//! one `replay` computes from the request's bytes, and an emitted trace replays to the import.
//!
//! **Betas: none.** Claude Code 2.1.330 sends `mid-conversation-tool-changes-2026-07-01` on
//! every request (transcripts carry no headers, but `version` names the build), and the
//! simulated requests could name it. They do not, because it would change no prediction: the
//! beta only changes how a request's tools section keys the cache, and the simulation has no
//! tools section (system prompt and tools are one declared-size stable block), nor does it
//! replay a tool change seen in a transcript (`tool_search_loaded`) as a prompt change.
//!
//! **The 1M-context beta** is the exception: a recorded request whose total input is past its
//! model's table window ran with a larger window (the API accepted it), which on a model whose
//! row offers the beta ([`forkcache_engine::billing`]: Sonnet 4 / 4.5 until 2026-04-30) is the
//! `context-1m-2025-08-07` beta. From that request on, its chain's simulated requests name the
//! beta, so the prediction is priced with the 1M window instead of refused; the decision uses
//! the request's total input only, never its read/write split. Each request is priced on its
//! own date, since the beta's window depends on it. (Claude Code sends the beta on every request
//! of a `[1m]` session; the earlier, smaller requests of the chain would not be priced
//! differently with it.) A request dated on or after the beta's retirement is still refused:
//! the simulation follows the table, and the refusal shows that the transcript contradicts it.
//! Its real cost is priced at the long-context rates all the same (the API accepted it).
//!
//! **Assumption: the account keeps its stable prefix warm** ([`crate::warmth`]). Other sessions
//! of the same account (and Claude Code's own side calls) send the same system prompt and tools.
//! After a compaction, an idle gap past the chain's TTL or a model switch, a main chain's stable
//! prefix becomes what the chain showed on that model where nothing of it was cached (its first
//! read, later reads after such a reset or after a break an event of the transcript explains,
//! such as a tool load; a switch to a model the chain never ran: the import's
//! latest such read on that model), pre-warmed before the request, and the rest of its history
//! is sent anew. A chain's first request starts from the smallest read earlier chain starts of
//! its kind showed on its model (what every session shared, so that a new turn is not predicted
//! as read), else cold. Sub-agents get no such help: an idle sub-agent reads 0 after its 5
//! minutes. A request's TTL is the one its own 5m/1h split asked for (never its amounts).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;

use serde_json::value::RawValue;

use forkcache_engine::billing::{InferenceGeo, Modifiers, PriceDate, PriceTable, Speed, Usage};
use forkcache_engine::cache::Miss;
use forkcache_engine::clock::{SimTime, Visibility};
use forkcache_engine::endpoint::{Call, EndpointConfig, MockEndpoint, Record, RenderedRequest};
use forkcache_engine::prompt::{
    BlockContext, BlockInfo, Breakpoint, Checkpoint, Position, PromptBuilder, PromptRef, SaltInputs, Salts,
    Ttl,
};
use forkcache_engine::tokenize::TokenizerUnavailable;
use forkcache_wire::{ApiError, Betas, CONTEXT_1M, RawJson, Reply, Role};

use super::transcript::{Chain, EpochMs, Event};
use super::warmth::{self, WarmPrefixes, Warmth};
use super::{ImportedSession, SessionRequest, breaks};
use crate::trace::{Envelope, envelope_line};

/// The stable prefix assumed before any earlier request shows one: the low end of the 12–30K
/// Claude Code's system prompt and tools take (transcript reference).
pub const DEFAULT_STABLE_TOKENS: u64 = 12_000;

/// A setting the prediction can be re-run under (`--what-if`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WhatIf {
    /// Every chain writes with this TTL.
    Ttl(Ttl),
    /// Sub-agent chains write 1-hour entries.
    SubagentTtl1h,
    /// Every chain keeps its first model.
    NoModelSwitch,
    /// Idle gaps longer than this are shortened to it, later times shifted.
    MaxIdleMs(u64),
}

impl WhatIf {
    /// Parses `ttl=1h`, `ttl=5m`, `subagent-ttl=1h`, `no-model-switch`, `max-idle=5m`.
    pub fn parse(text: &str) -> Result<WhatIf, String> {
        match text {
            "ttl=1h" => Ok(WhatIf::Ttl(Ttl::OneHour)),
            "ttl=5m" => Ok(WhatIf::Ttl(Ttl::FiveMinutes)),
            "subagent-ttl=1h" => Ok(WhatIf::SubagentTtl1h),
            "no-model-switch" => Ok(WhatIf::NoModelSwitch),
            _ => match text.strip_prefix("max-idle=").map(parse_duration_ms) {
                Some(Some(ms)) => Ok(WhatIf::MaxIdleMs(ms)),
                _ => Err(format!(
                    "unknown what-if {text:?} (expected ttl=1h, ttl=5m, subagent-ttl=1h, no-model-switch or max-idle=<N>s|m|h)"
                )),
            },
        }
    }

    /// The setting as the command line spells it.
    pub fn name(&self) -> String {
        match self {
            WhatIf::Ttl(Ttl::OneHour) => "ttl=1h".into(),
            WhatIf::Ttl(Ttl::FiveMinutes) => "ttl=5m".into(),
            WhatIf::SubagentTtl1h => "subagent-ttl=1h".into(),
            WhatIf::NoModelSwitch => "no-model-switch".into(),
            WhatIf::MaxIdleMs(ms) => format!("max-idle={}", format_duration(*ms)),
        }
    }
}

/// `90s`, `5m`, `1h` → milliseconds.
fn parse_duration_ms(text: &str) -> Option<u64> {
    let unit = match text.chars().last()? {
        's' => 1_000,
        'm' => 60_000,
        'h' => 3_600_000,
        _ => return None,
    };
    text[..text.len() - 1].parse::<u64>().ok().map(|n| n * unit)
}

fn format_duration(ms: u64) -> String {
    match ms {
        ms if ms % 3_600_000 == 0 => format!("{}h", ms / 3_600_000),
        ms if ms % 60_000 == 0 => format!("{}m", ms / 60_000),
        ms => format!("{}s", ms / 1_000),
    }
}

/// What the simulation says about one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Predicted {
    /// The usage the endpoint returned.
    pub usage: Usage,
    /// Why it read less than it could have.
    pub miss: Option<Miss>,
    /// The request time the simulation used (ms since the session's first request).
    pub at_ms: u64,
    /// The model simulated (the recorded one, unless a what-if kept an earlier one).
    pub model: String,
    /// Why the endpoint refused the simulated request (then `usage` is all zero and not a
    /// prediction): a transcript whose counts no real prompt could have.
    pub refused: Option<String>,
    /// Whether the prediction assumed the account's stable prefix warm, and on what evidence.
    pub warmth: Warmth,
}

/// Facts about the whole import the prediction of one request may use: only what started
/// before it.
#[derive(Clone, Debug, Default)]
pub struct AccountView {
    /// Per request id: the latest earlier start of a request of its kind on its model.
    previous_start: HashMap<String, EpochMs>,
    /// Per request id of a chain start: the smallest read earlier chain starts of its kind on its
    /// model showed (what every session of the account shared), when one did.
    start_prefix: HashMap<String, u64>,
    /// Per request id: the latest read an earlier chain start or break of its kind on its model
    /// showed (what a switch to that model finds warm).
    model_prefix: HashMap<String, u64>,
    /// Per request id: the stable prefix size and TTL to start its chain with.
    chain_starts: HashMap<String, ChainStart>,
    /// Per request id of a request whose prompt changed right after the stable prefix (a turn in
    /// another working directory, another effort level): the stable prefix size earlier requests
    /// of its kind showed, when they showed one.
    stable_prefix_resets: HashMap<String, u64>,
}

#[derive(Clone, Copy, Debug)]
struct ChainStart {
    stable_tokens: u64,
    ttl: Ttl,
}

impl AccountView {
    /// Scans every imported request in start order (ties by request id).
    pub fn of(sessions: &[ImportedSession]) -> AccountView {
        let mut all: Vec<&SessionRequest> = sessions.iter().flat_map(|s| s.requests.iter()).collect();
        all.sort_by(|a, b| (a.start_ms, &a.request.request_id).cmp(&(b.start_ms, &b.request.request_id)));
        let mut view = AccountView::default();
        let mut floor_read: BTreeMap<bool, u64> = BTreeMap::new();
        let mut smallest_total: BTreeMap<bool, u64> = BTreeMap::new();
        let mut last_ttl: BTreeMap<bool, Ttl> = BTreeMap::new();
        let mut last_start: BTreeMap<(bool, &str), EpochMs> = BTreeMap::new();
        let mut start_reads: BTreeMap<(bool, &str), u64> = BTreeMap::new();
        let mut reset_reads: BTreeMap<(bool, &str), u64> = BTreeMap::new();
        for request in all {
            let kind = request.is_agent();
            let usage = &request.request.recorded.usage;
            let id = &request.request.request_id;
            let key = (kind, request.request.model.as_str());
            if let Some(&start) = last_start.get(&key) {
                view.previous_start.insert(id.clone(), start);
            }
            last_start.insert(key, request.start_ms);
            if let Some(&read) = reset_reads.get(&key) {
                view.model_prefix.insert(id.clone(), read);
            }
            let read = usage.cache_read_input_tokens;
            if request.chain_index == 0 {
                if let Some(&smallest) = start_reads.get(&key) {
                    view.start_prefix.insert(id.clone(), smallest);
                }
                if read > 0 {
                    let smallest = start_reads.entry(key).or_insert(read);
                    *smallest = (*smallest).min(read);
                }
            }
            if (request.chain_index == 0 || request.observed_break()) && read > 0 {
                reset_reads.insert(key, read);
            }
            if request.chain_index == 0 {
                let stable_tokens = floor_read
                    .get(&kind)
                    .or(smallest_total.get(&kind))
                    .copied()
                    .unwrap_or(DEFAULT_STABLE_TOKENS);
                let ttl = last_ttl.get(&kind).copied().unwrap_or(Ttl::FiveMinutes);
                view.chain_starts
                    .insert(request.request.request_id.clone(), ChainStart { stable_tokens, ttl });
            }
            if request.request.events.iter().any(Event::resends_history) {
                if let Some(&stable_tokens) = floor_read.get(&kind) {
                    view.stable_prefix_resets.insert(request.request.request_id.clone(), stable_tokens);
                }
            }
            if (request.chain_index == 0 || request.observed_break()) && usage.cache_read_input_tokens > 0 {
                floor_read.insert(kind, usage.cache_read_input_tokens);
            }
            let smallest = smallest_total.entry(kind).or_insert(u64::MAX);
            *smallest = (*smallest).min(usage.total_input_tokens());
            if let Some(ttl) = written_ttl(usage) {
                last_ttl.insert(kind, ttl);
            }
        }
        view
    }

    /// The class of a request's prediction when its chain assumes the account's prefix warm.
    fn warmth(&self, request: &SessionRequest, ttl: Ttl) -> Warmth {
        let previous = self.previous_start.get(&request.request.request_id).copied();
        warmth::classify(previous, request.start_ms, breaks::ttl_ms(ttl))
    }
}

/// The TTL a request wrote with, if it wrote.
pub fn written_ttl(usage: &Usage) -> Option<Ttl> {
    if usage.cache_creation.ephemeral_1h_input_tokens > 0 {
        Some(Ttl::OneHour)
    } else if usage.cache_creation_input_tokens > 0 {
        Some(Ttl::FiveMinutes)
    } else {
        None
    }
}

/// One declared-size block of a simulated conversation.
#[derive(Clone, Debug)]
struct Block {
    /// Unique within the session: the rendering recognises blocks it already holds by it.
    id: u64,
    /// The block's text (`main turn 3`): names it in an emitted trace, and makes it distinct.
    text: Box<str>,
    tokens: u64,
}

/// `{"type":"text","text":…,"forkcache_tokens":N` (open: a marker may follow).
#[allow(clippy::expect_used)] // serializing a string cannot fail
fn text_block_json(text: &str, tokens: u64) -> String {
    let text = serde_json::to_string(text).expect("a string serializes");
    format!(r#"{{"type":"text","text":{text},"forkcache_tokens":{tokens}"#)
}

/// A block's facts as the endpoint's renderer reads them from the block's bytes (no marker:
/// a request's markers are placed as breakpoints).
fn block_info(
    endpoint: &mut MockEndpoint,
    text: &str,
    tokens: u64,
    context: BlockContext,
) -> Result<BlockInfo, ApiError> {
    let json = format!("{}}}", text_block_json(text, tokens));
    let raw = RawValue::from_string(json).map_err(|e| ApiError::invalid(format!("simulated block: {e}")))?;
    endpoint.block_info(RawJson::from(&*raw), context, "simulated block")
}

/// A chain's prompt as the endpoint prices it: the stable prefix and the history rendered once,
/// append-only, so a request is priced by [`MockEndpoint::handle_rendered`] without building,
/// parsing or hashing its body (the scenario engine's way; a test checks it prices exactly as
/// the bodies do).
#[derive(Clone, Debug)]
struct Rendering {
    /// What the positions were built for: a change of any starts over.
    model: String,
    stable: (Box<str>, u64),
    speed: Speed,
    salts: Salts,
    positions: Vec<Position>,
    /// The breakpoint a marker after each block would make: the stable prefix, then each
    /// history block.
    marks: Vec<Breakpoint>,
    /// The chain after the stable prefix and after each history block.
    checkpoints: Vec<Checkpoint>,
    /// Ids of the history blocks rendered.
    ids: Vec<u64>,
    first_after_tools: u32,
    first_message: u32,
}

/// A chain as the simulation holds it.
#[derive(Clone, Debug)]
struct ChainState {
    agent: bool,
    stable_text: Box<str>,
    stable_tokens: u64,
    history: Vec<Block>,
    /// The history block the request's last breakpoint is on.
    marker_at: usize,
    model: String,
    /// The request's fast mode and data residency, as its usage names them: the emitted body
    /// carries both, and fast mode salts the system prompt and messages, as the API does.
    modifiers: Modifiers,
    ttl: Ttl,
    turns: u64,
    rendering: Option<Rendering>,
    /// The betas its simulated requests name: the 1M-context beta once a request of the chain
    /// was past its model's table window.
    betas: Betas,
    /// The stable prefix sizes the chain's own requests showed, per model.
    prefixes: WarmPrefixes,
    /// Whether `stable_tokens` is a prefix the account is assumed to keep warm (each request is
    /// then preceded by the account's pre-warm of it).
    warm: bool,
    /// The simulated start of the chain's previous request.
    last_at_ms: Option<u64>,
}

impl ChainState {
    fn held_tokens(&self) -> u64 {
        self.stable_tokens + self.history.iter().map(|b| b.tokens).sum::<u64>()
    }

    /// Brings the history to `total` tokens: the growth as a new marked block followed by its
    /// unmarked `tail` (Claude Code can send content after its last breakpoint), or, when the
    /// prompt shrank, the longest prefix that fits and the rest as new blocks.
    fn grow_to(&mut self, total: u64, tail: u64, label: &str, ids: &mut u64) {
        let mut held = self.held_tokens();
        if total < held {
            while held > total && !self.history.is_empty() {
                held -= self.history.pop().map_or(0, |b| b.tokens);
            }
            if held > total {
                self.stable_tokens = total;
                held = total;
            }
        }
        if total == held && !self.history.is_empty() {
            self.marker_at = self.history.len() - 1;
            return;
        }
        let growth = total - held;
        let tail = tail.min(growth);
        self.turns += 1;
        self.marker_at = self.history.len();
        let mut push = |history: &mut Vec<Block>, text: String, tokens: u64| {
            *ids += 1;
            history.push(Block { id: *ids, text: text.into_boxed_str(), tokens });
        };
        push(&mut self.history, format!("{label} turn {}", self.turns), growth - tail);
        if tail > 0 {
            push(&mut self.history, format!("{label} turn {} after the marker", self.turns), tail);
        }
    }

    /// Brings the rendering up to the chain: kept where the model, the stable prefix and the
    /// blocks are the same, cut back to the first block that differs, then extended.
    fn render(&mut self, endpoint: &mut MockEndpoint) -> Result<&Rendering, ApiError> {
        let stable = (self.stable_text.clone(), self.stable_tokens);
        let speed = self.modifiers.speed;
        let current =
            self.rendering.take().filter(|r| r.model == self.model && r.stable == stable && r.speed == speed);
        let mut rendering = match current {
            Some(rendering) => rendering,
            None => start_rendering(endpoint, &self.model, stable, speed)?,
        };
        let kept = rendering.ids.iter().zip(&self.history).take_while(|(id, block)| **id == block.id).count();
        let checkpoint = rendering.checkpoints[kept];
        rendering.positions.truncate(checkpoint.len() as usize);
        rendering.marks.truncate(kept + 1);
        rendering.checkpoints.truncate(kept + 1);
        rendering.ids.truncate(kept);
        let mut builder = PromptBuilder::resume(&checkpoint);
        for (index, block) in self.history.iter().enumerate().skip(kept) {
            let info = block_info(endpoint, &block.text, block.tokens, BlockContext::Message)?;
            builder.message_block(0, index as u32, Role::User, index == 0, &info);
            rendering.marks.push(builder.breakpoint_here(Ttl::FiveMinutes));
            rendering.checkpoints.push(builder.checkpoint());
            rendering.ids.push(block.id);
        }
        rendering.positions.extend(builder.finish().positions);
        Ok(self.rendering.insert(rendering))
    }

    /// The body this request's rendering stands for (for `--emit-trace` only).
    fn body(&self) -> Vec<u8> {
        let marker = cache_control(self.ttl);
        let size = self.history.iter().map(|b| b.text.len() + 64).sum::<usize>() + 256;
        let mut body = String::with_capacity(size);
        self.open_body(&mut body, 1);
        for (index, block) in self.history.iter().enumerate() {
            if index > 0 {
                body.push(',');
            }
            body.push_str(&text_block_json(&block.text, block.tokens));
            if index == self.marker_at {
                body.push_str(marker);
            }
            body.push('}');
        }
        body.push_str("]}]}");
        body.into_bytes()
    }

    fn prewarm_body(&self) -> Vec<u8> {
        let mut body = String::new();
        self.open_body(&mut body, 0);
        body.push_str(&text_block_json(PREWARM_TEXT, 1));
        body.push_str("}]}]}");
        body.into_bytes()
    }

    /// Everything before the first message block: model, `max_tokens`, the marked stable
    /// prefix, and the opening of the one user message.
    #[allow(clippy::expect_used)] // serializing a string cannot fail
    fn open_body(&self, body: &mut String, max_tokens: u64) {
        let model = serde_json::to_string(&self.model).expect("a string serializes");
        let stable = text_block_json(&self.stable_text, self.stable_tokens);
        let marker = cache_control(self.ttl);
        let _ = write!(body, r#"{{"model":{model},"max_tokens":{max_tokens},"#);
        if self.modifiers.speed == Speed::Fast {
            body.push_str(r#""speed":"fast","#);
        }
        if self.modifiers.geo == InferenceGeo::Us {
            body.push_str(r#""inference_geo":"us","#);
        }
        let _ = write!(body, r#""system":[{stable}{marker}}}],"messages":[{{"role":"user","content":["#);
    }
}

/// The one-token message a pre-warm sends after the stable prefix.
const PREWARM_TEXT: &str = "prewarm";

/// A chain's rendering with its stable prefix only: salts as the renderer derives them for a
/// body with no tools, thinking or other setting, and the marked system block.
fn start_rendering(
    endpoint: &mut MockEndpoint,
    model: &str,
    stable: (Box<str>, u64),
    speed: Speed,
) -> Result<Rendering, ApiError> {
    let config = endpoint.config().prompt.clone();
    let price = endpoint.prices().resolve(model).price.clone();
    let speed_name = (speed == Speed::Fast).then_some("fast");
    let salts =
        SaltInputs { config_ahead: config.render_config_ahead, speed: speed_name, ..SaltInputs::default() }
            .salts(&price);
    let mut builder = PromptBuilder::new(salts, config.collapse_tool_runs);
    builder.system(0, &block_info(endpoint, &stable.0, stable.1, BlockContext::System)?);
    let marks = vec![builder.breakpoint_here(Ttl::FiveMinutes)];
    let checkpoints = vec![builder.checkpoint()];
    let prompt = builder.finish();
    Ok(Rendering {
        model: model.to_string(),
        stable,
        speed,
        salts,
        positions: prompt.positions,
        marks,
        checkpoints,
        ids: Vec::new(),
        first_after_tools: prompt.first_after_tools,
        first_message: prompt.first_message,
    })
}

impl Rendering {
    /// The prompt of a request: every position, marked at the stable prefix and after history
    /// block `marker_at` (none before the first block).
    fn prompt<'r>(&'r self, tail: &'r [Position], breakpoints: &'r [Breakpoint]) -> PromptRef<'r> {
        PromptRef {
            head: &self.positions,
            tail,
            breakpoints,
            salts: self.salts,
            first_after_tools: self.first_after_tools,
            first_message: self.first_message,
        }
    }

    fn breakpoints(&self, marker_at: Option<usize>, ttl: Ttl) -> Vec<Breakpoint> {
        let marked = std::iter::once(0).chain(marker_at.map(|at| at + 1));
        marked.filter_map(|index| self.marks.get(index)).map(|mark| Breakpoint { ttl, ..*mark }).collect()
    }
}

/// A breakpoint's `cache_control` member, with its leading comma.
fn cache_control(ttl: Ttl) -> &'static str {
    match ttl {
        Ttl::OneHour => r#","cache_control":{"type":"ephemeral","ttl":"1h"}"#,
        Ttl::FiveMinutes => r#","cache_control":{"type":"ephemeral","ttl":"5m"}"#,
    }
}

/// The endpoint settings of every prediction: the defaults, except that a write is readable from
/// the instant its request starts (transcripts hold no first-byte times, and the account's
/// pre-warm must be readable by the request it precedes).
pub fn endpoint_config() -> EndpointConfig {
    let mut config = EndpointConfig::default();
    config.cache.visibility = Visibility::Start;
    config
}

/// One session's simulation: its endpoint, its chains, and where fork children start from.
struct Simulation<'s> {
    endpoint: MockEndpoint,
    chains: BTreeMap<Chain, ChainState>,
    spawn_points: HashMap<&'s str, ChainState>,
    block_ids: u64,
    workspace: String,
    /// Requests that spawned a linked chain: their chain's state is kept for the child.
    spawning: &'s BTreeSet<String>,
}

/// Predicts every request of one session, in the session's order. A request whose simulated
/// prompt the endpoint refuses (past the model's context window, a block past
/// [`forkcache_engine::prompt::MAX_DECLARED_TOKENS`]) is not predicted: its [`Predicted::refused`] says why.
pub fn predict_session(
    session: &ImportedSession,
    account: &AccountView,
    what_if: Option<&WhatIf>,
    prices: &PriceTable,
    mut trace: Option<&mut Vec<String>>,
) -> Result<Vec<Predicted>, TokenizerUnavailable> {
    let mut simulation = Simulation {
        endpoint: MockEndpoint::new(endpoint_config(), prices.clone())?,
        chains: BTreeMap::new(),
        spawn_points: HashMap::new(),
        block_ids: 0,
        spawning: &session.spawning_requests,
        // In an emitted trace each session is its own workspace, named by its id.
        workspace: format!("session:{}", session.session_id),
    };
    let times = simulated_times(session, what_if);
    let mut predictions = Vec::with_capacity(session.requests.len());
    for (request, &at_ms) in session.requests.iter().zip(&times) {
        let predicted = simulation.request(request, account, what_if, at_ms, trace.as_deref_mut());
        predictions.push(predicted);
    }
    Ok(predictions)
}

impl<'s> Simulation<'s> {
    fn request(
        &mut self,
        request: &'s SessionRequest,
        account: &AccountView,
        what_if: Option<&WhatIf>,
        at_ms: u64,
        trace: Option<&mut Vec<String>>,
    ) -> Predicted {
        let state = match self.chains.get_mut(&request.request.chain) {
            Some(state) => state,
            None => {
                let state = start_chain(request, account, &self.spawn_points, what_if);
                self.chains.entry(request.request.chain.clone()).or_insert(state)
            }
        };
        let reset = advance(state, request, account, what_if, at_ms, &mut self.block_ids);
        if ran_with_context_1m(self.endpoint.prices(), &state.model, &request.request.recorded.usage) {
            state.betas = Betas::from_names([CONTEXT_1M]);
        }
        // Sub-agents get no help from the account: their system prompt is their own.
        let warm = state.warm && !state.agent;
        let warmth = if warm { account.warmth(request, state.ttl) } else { Warmth::Cold };
        let output = request.request.recorded.usage.output_tokens;
        self.endpoint.set_price_date(PriceDate::parse(&request.request.at).ok());
        let priced = price_request(&mut self.endpoint, state, warm, at_ms, output);
        if let Some(trace) = trace {
            let envelope = Envelope {
                at_ms: Some(at_ms),
                // The workspace by name: a trace never carries a key, and replay prices it there.
                workspace: Some(self.workspace.clone()),
                betas: state.betas.clone(),
                // The simulation makes writes readable from the request's start
                // (`Visibility::Start`); a first byte at the start does the same under replay's.
                first_byte_ms: Some(at_ms),
                ..Envelope::default()
            };
            if warm {
                let prewarm = Envelope { prewarm: Some(true), ..envelope.clone() };
                trace.push(envelope_line(&prewarm, &state.prewarm_body()));
            }
            // What the API really charged, so replay shows it beside its prediction (and bills
            // the real output).
            let usage = Some(Envelope::usage_of(&request.request.recorded.usage));
            trace.push(envelope_line(&Envelope { usage, ..envelope }, &state.body()));
        }
        state.last_at_ms = Some(at_ms);
        let explained_break = request.break_.is_some_and(|b| b.cause.read_only_the_stable_prefix());
        if reset || request.chain_index == 0 || explained_break {
            // Nothing of the chain was cached for this request, as the simulation or an event
            // of the transcript says (a tool load can grow the stable prefix for the rest of
            // the session): what it read is the account's.
            state.prefixes.learn(&state.model, request.request.recorded.usage.cache_read_input_tokens);
        }
        let predicted = match priced {
            Ok(record) => Predicted {
                usage: record.usage,
                miss: record.miss,
                at_ms,
                model: state.model.clone(),
                refused: None,
                warmth,
            },
            Err(refusal) => Predicted {
                usage: Usage::default(),
                miss: None,
                at_ms,
                model: state.model.clone(),
                refused: Some(refusal.message),
                warmth,
            },
        };
        if self.spawning.contains(request.request.request_id.as_str()) {
            self.spawn_points.insert(request.request.request_id.as_str(), state.clone());
        }
        predicted
    }
}

/// Whether a recorded request evidently ran with the 1M-context beta: its total input is past
/// the model's table window and the row offers the beta (the endpoint decides whether the beta
/// still existed on the request's date).
fn ran_with_context_1m(prices: &PriceTable, model: &str, usage: &Usage) -> bool {
    let row = prices.resolve(model);
    row.known && row.price.context_1m_evident(usage)
}

/// Prices one request of a chain (after the account's pre-warm of its stable prefix, when
/// `warm`) from the chain's rendering.
fn price_request(
    endpoint: &mut MockEndpoint,
    state: &mut ChainState,
    warm: bool,
    at_ms: u64,
    output: u64,
) -> Result<Record, ApiError> {
    let (model, ttl, marker_at) = (state.model.clone(), state.ttl, state.marker_at);
    let betas = state.betas.clone();
    let marked = (!state.history.is_empty()).then_some(marker_at);
    let rendering = state.render(endpoint)?;
    if warm {
        let stable_only = &rendering.positions[..rendering.checkpoints[0].len() as usize];
        let mut builder = PromptBuilder::resume(&rendering.checkpoints[0]);
        let info = block_info(endpoint, PREWARM_TEXT, 1, BlockContext::Message)?;
        builder.message_block(0, 0, Role::User, true, &info);
        let tail = builder.finish().positions;
        let breakpoints = rendering.breakpoints(None, ttl);
        let prompt = PromptRef { head: stable_only, ..rendering.prompt(&tail, &breakpoints) };
        let prewarm = RenderedRequest { model: &model, prompt, stream: false, max_tokens: 0 };
        let call = Call { betas: &betas, ..Call::new(&[], SimTime(at_ms)) };
        endpoint.handle_rendered(&prewarm, &call)?;
    }
    let breakpoints = rendering.breakpoints(marked, ttl);
    let request = RenderedRequest {
        model: &model,
        prompt: rendering.prompt(&[], &breakpoints),
        stream: false,
        max_tokens: 1,
    };
    let reply = Reply { output_tokens: Some(output), ..Reply::input_only() };
    let call = Call { reply, betas: &betas, ..Call::new(&[], SimTime(at_ms)) };
    Ok(endpoint.handle_rendered(&request, &call)?.record)
}

/// The chain's state before its first request: its parent's context for a fork child (a child
/// whose first prompt is at least its parent's at the spawn), else a fresh stable prefix.
fn start_chain(
    request: &SessionRequest,
    account: &AccountView,
    spawn_points: &HashMap<&str, ChainState>,
    what_if: Option<&WhatIf>,
) -> ChainState {
    let agent = request.is_agent();
    let usage = &request.request.recorded.usage;
    // The TTL the request asked for, visible in its own 5m/1h split: its read and write amounts
    // are not used, only which TTL it wrote with.
    let asked = written_ttl(usage).or(request.ttl_before);
    let ttl = chain_ttl(agent, asked.unwrap_or(Ttl::FiveMinutes), what_if);
    let total = usage.total_input_tokens();
    if let Some(parent) = request.parent.as_ref().and_then(|p| spawn_points.get(p.request_id.as_str())) {
        if total >= parent.held_tokens() {
            return ChainState {
                agent,
                ttl,
                turns: 0,
                model: request.request.model.clone(),
                ..parent.clone()
            };
        }
    }
    let start = account.chain_starts.get(&request.request.request_id);
    let known = account.start_prefix.get(&request.request.request_id).copied();
    let fallback = start.map_or(DEFAULT_STABLE_TOKENS, |s| s.stable_tokens);
    let stable_tokens = stable_within(known.unwrap_or(fallback), total);
    let ttl = match (asked, start) {
        (None, Some(start)) => chain_ttl(agent, start.ttl, what_if),
        _ => ttl,
    };
    ChainState {
        agent,
        stable_text: if agent { "stable prefix: sub-agent" } else { "stable prefix: main" }.into(),
        stable_tokens,
        history: Vec::new(),
        marker_at: 0,
        model: request.request.model.clone(),
        modifiers: request.request.recorded.modifiers,
        ttl,
        turns: 0,
        rendering: None,
        betas: Betas::default(),
        prefixes: WarmPrefixes::default(),
        warm: known.is_some(),
        last_at_ms: None,
    }
}

/// A stable prefix of `tokens`, kept below a request of `total` input tokens (at least one token
/// of it follows the prefix).
fn stable_within(tokens: u64, total: u64) -> u64 {
    tokens.min(total.saturating_sub(1))
}

/// Applies what the transcript says happened before this request: a compaction, or a turn in
/// another working directory or at another effort level (the history sent anew after the stable
/// prefix), a model switch, an idle gap past the chain's TTL, the chain's current TTL, then the
/// growth to this request's total input. Returns whether the chain lost its own cache
/// ([`warmth`]): then its stable prefix is the one the account keeps warm on the model, as the
/// chain (else the import) showed it earlier, and nothing else is readable.
fn advance(
    state: &mut ChainState,
    request: &SessionRequest,
    account: &AccountView,
    what_if: Option<&WhatIf>,
    at_ms: u64,
    block_ids: &mut u64,
) -> bool {
    let usage = &request.request.recorded.usage;
    // What the chain had sent, measured before a compaction clears its history below.
    let sent_before = state.held_tokens();
    let compacted = request.request.events.iter().any(|e| matches!(e, Event::Compacted { .. }));
    let expired = state.last_at_ms.is_some_and(|last| at_ms.saturating_sub(last) > breaks::ttl_ms(state.ttl));
    let switched = what_if != Some(&WhatIf::NoModelSwitch) && state.model != request.request.model;
    if compacted {
        // The summary replaces the history: the growth below is the summary.
        state.history.clear();
    } else if request.request.events.iter().any(Event::resends_history) {
        // The prompt changed after the stable prefix (the system prompt's working directory, an
        // effort level rendered ahead of the messages): every block after it is sent anew,
        // so the growth below is the whole conversation as one new block. What stays is the
        // stable prefix, as large as earlier requests showed it.
        state.history.clear();
        if let Some(&stable_tokens) = account.stable_prefix_resets.get(&request.request.request_id) {
            state.stable_tokens = stable_within(stable_tokens, usage.total_input_tokens());
            // Earlier requests showed it read: the account keeps it warm.
            state.warm = true;
        }
    }
    if switched {
        state.model = request.request.model.clone();
    }
    state.modifiers = request.request.recorded.modifiers;
    let reset = compacted || expired || switched;
    if reset {
        rest_on_account_prefix(state, request, account, switched, sent_before);
    }
    if let Some(ttl) = written_ttl(usage).or(request.ttl_before) {
        state.ttl = chain_ttl(state.agent, ttl, what_if);
    }
    state.grow_to(usage.total_input_tokens(), usage.input_tokens, &request.request.chain.name(), block_ids);
    reset
}

/// After the chain lost its cache: the stable prefix becomes what the chain showed on its model
/// (a switch to a model it never ran: what the import showed on that model), capped below what
/// the chain sent before the request (`sent_before`: never the request's new content), and the
/// rest of the history is sent anew. With no prefix shown on the model, a switch starts cold.
fn rest_on_account_prefix(
    state: &mut ChainState,
    request: &SessionRequest,
    account: &AccountView,
    switched: bool,
    sent_before: u64,
) {
    let shown = state.prefixes.on(&state.model).or_else(|| {
        if switched { account.model_prefix.get(&request.request.request_id).copied() } else { None }
    });
    match shown {
        Some(tokens) => {
            let total = request.request.recorded.usage.total_input_tokens();
            state.stable_tokens = stable_within(tokens.min(sent_before), total);
            state.history.clear();
            state.warm = true;
        }
        None if switched => state.warm = false,
        None => {}
    }
}

fn chain_ttl(agent: bool, observed: Ttl, what_if: Option<&WhatIf>) -> Ttl {
    match what_if {
        Some(WhatIf::Ttl(ttl)) => *ttl,
        Some(WhatIf::SubagentTtl1h) if agent => Ttl::OneHour,
        _ => observed,
    }
}

/// Start times in ms since the session's first request; under `max-idle`, each longer gap in
/// the session is shortened to it and everything after shifts.
fn simulated_times(session: &ImportedSession, what_if: Option<&WhatIf>) -> Vec<u64> {
    let first = session.requests.first().map_or(0, |r| r.start_ms);
    let max_idle = match what_if {
        Some(WhatIf::MaxIdleMs(ms)) => Some(*ms as i64),
        _ => None,
    };
    let mut removed = 0i64;
    let mut previous = first;
    session
        .requests
        .iter()
        .map(|request| {
            let gap = request.start_ms - previous;
            if let Some(max) = max_idle {
                removed += (gap - max).max(0);
            }
            previous = request.start_ms;
            (request.start_ms - first - removed).max(0) as u64
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(model: &str, stable_tokens: u64, ttl: Ttl) -> ChainState {
        ChainState {
            agent: false,
            stable_text: "stable prefix: main".into(),
            stable_tokens,
            history: Vec::new(),
            marker_at: 0,
            model: model.to_string(),
            modifiers: Modifiers::default(),
            ttl,
            turns: 0,
            rendering: None,
            betas: Betas::default(),
            prefixes: WarmPrefixes::default(),
            warm: true,
            last_at_ms: None,
        }
    }

    /// The rendered path must price every step exactly as the bodies it stands for: growth, a
    /// tail after the marker, a shrink, a compaction, a model switch, a TTL change, a pre-warm.
    #[test]
    fn rendered_requests_price_exactly_as_their_bodies() {
        let prices = PriceTable::builtin();
        let mut by_bytes = MockEndpoint::new(endpoint_config(), prices.clone()).unwrap();
        let mut by_rendering = MockEndpoint::new(endpoint_config(), prices).unwrap();
        let mut state = chain("claude-sonnet-4-6", 12_000, Ttl::OneHour);
        let mut ids = 0;
        // (at_ms, total input, uncached tail, pre-warm first, change before the request)
        let steps: &[(u64, u64, u64, bool, &str)] = &[
            (0, 20_000, 3, false, ""),
            (1_000, 26_000, 3, false, ""),
            (2_000, 31_000, 2_500, true, ""),
            (3_000, 31_000, 0, false, ""),
            (4_000, 29_000, 3, false, ""),
            (5_000, 17_000, 3, false, "compact"),
            (6_000, 19_000, 3, true, "model"),
            (7_000, 21_000, 3, false, "ttl"),
            (8_000_000, 22_000, 3, true, ""),
            (8_001_000, 5_000, 3, false, ""),
        ];
        let mut reads = 0;
        for &(at_ms, total, tail, warm, change) in steps {
            match change {
                "compact" => state.history.clear(),
                "model" => state.model = "claude-opus-4-6".to_string(),
                "ttl" => state.ttl = Ttl::FiveMinutes,
                _ => {}
            }
            state.grow_to(total, tail, "main", &mut ids);
            if warm {
                by_bytes.handle(Call::new(&state.prewarm_body(), SimTime(at_ms))).unwrap();
            }
            let reply = Reply { output_tokens: Some(7), ..Reply::input_only() };
            let body = state.body();
            let call = Call { reply, ..Call::new(&body, SimTime(at_ms)) };
            let expected = by_bytes.handle(call).unwrap().record;
            let got = price_request(&mut by_rendering, &mut state, warm, at_ms, 7).unwrap();
            assert_eq!((got.usage, got.miss), (expected.usage, expected.miss), "at {at_ms} ms");
            reads += expected.usage.cache_read_input_tokens;
        }
        // The steps do read from the cache (the comparison is not of all-zero usage).
        assert!(reads > 100_000, "{reads}");
    }

    #[test]
    fn a_prompt_past_the_context_window_is_refused_not_a_panic() {
        let mut endpoint = MockEndpoint::new(endpoint_config(), PriceTable::builtin()).unwrap();
        let mut state = chain("claude-sonnet-4-6", 12_000, Ttl::OneHour);
        state.grow_to(900_000_000, 3, "main", &mut 0);
        let refusal = price_request(&mut endpoint, &mut state, true, 0, 1).unwrap_err();
        assert!(refusal.message.contains("prompt is too long"), "{}", refusal.message);
    }

    #[test]
    fn what_ifs_parse_and_print_back() {
        for text in ["ttl=1h", "ttl=5m", "subagent-ttl=1h", "no-model-switch", "max-idle=5m", "max-idle=90s"]
        {
            assert_eq!(WhatIf::parse(text).unwrap().name(), text);
        }
        assert_eq!(WhatIf::parse("max-idle=5m"), Ok(WhatIf::MaxIdleMs(300_000)));
        assert!(WhatIf::parse("ttl=2h").unwrap_err().contains("ttl=2h"));
    }
}
