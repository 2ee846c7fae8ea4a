//! The prediction: each imported session re-run through the same [`MockEndpoint`] as `replay`,
//! built from what the transcript says about each request *before* its reply — never from its
//! own read/write split.
//!
//! Each chain is a request with Claude Code's marker layout: a system block holding the stable
//! prefix (system prompt and tools, one declared size) with a breakpoint, then the conversation,
//! one block per request holding that request's growth (`forkcache_tokens`), with the last block
//! marked. A request's total input is known from the transcript, so the block it adds is the
//! total minus what the chain already held. A compaction replaces the history by one summary
//! block; a fork child starts from its parent's context at the spawning request; a model switch
//! changes the model and so the cache scope.
//!
//! **Assumption: the account keeps its stable prefix warm.** Other sessions of the same account
//! (and Claude Code's own side calls) send the same system prompt and tools, so after an idle
//! hour the main chain still reads them (~12–15K). The simulation models this by pre-warming the
//! main chain's stable prefix before every main-chain request once the import has seen a
//! main-chain request on that model start earlier. Sub-agents get no such help: an idle
//! sub-agent reads 0 after its 5 minutes. The stable prefix's size is the last read seen at a
//! chain start or after a break in an earlier request of that kind, else the smallest earlier
//! total input, else [`DEFAULT_STABLE_TOKENS`].

// A listed exception to the crate's unwrap/expect lint: this module's `expect`s are on its own
// serializations and on bodies it builds from transcript usage (within the token caps).
#![allow(clippy::expect_used)]

use std::collections::{BTreeMap, HashMap};

use std::fmt::Write as _;

use crate::billing::{PriceTable, Usage};
use crate::cache::Miss;
use crate::clock::{SimTime, Visibility};
use crate::endpoint::{Call, EndpointConfig, MockEndpoint};
use crate::ingest::trace::{Envelope, envelope_line};
use crate::prompt::Ttl;
use crate::tokenize::TokenizerUnavailable;
use crate::wire::{Betas, Reply};

use super::transcript::{Chain, EpochMs, Event};
use super::{ImportedSession, SessionRequest};

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
}

/// Facts about the whole import the prediction of one request may use: only what started
/// before it.
#[derive(Clone, Debug, Default)]
pub struct AccountView {
    /// (chain kind, model) → start of the import's first request of that kind on that model.
    first_seen: BTreeMap<(bool, String), EpochMs>,
    /// Per request id: the stable prefix size and TTL to start its chain with.
    chain_starts: HashMap<String, ChainStart>,
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
        for request in all {
            let kind = request.is_agent();
            let usage = &request.request.recorded.usage;
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
            view.first_seen.entry((kind, request.request.model.clone())).or_insert(request.start_ms);
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

    fn warm(&self, agent: bool, model: &str, start_ms: EpochMs) -> bool {
        !agent && self.first_seen.get(&(agent, model.to_string())).is_some_and(|&first| first < start_ms)
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
    /// The block's JSON up to (not including) its closing brace, serialized once: a request
    /// repeats every earlier block, so its body is these fragments joined.
    json: String,
    tokens: u64,
}

impl Block {
    fn new(text: &str, tokens: u64) -> Block {
        Block { json: text_block_json(text, tokens), tokens }
    }
}

/// `{"type":"text","text":…,"forkcache_tokens":N` (open: a marker may follow).
#[allow(clippy::expect_used)] // serializing a string cannot fail
fn text_block_json(text: &str, tokens: u64) -> String {
    let text = serde_json::to_string(text).expect("a string serializes");
    format!(r#"{{"type":"text","text":{text},"forkcache_tokens":{tokens}"#)
}

/// A chain as the simulation holds it.
#[derive(Clone, Debug)]
struct ChainState {
    agent: bool,
    stable_text: String,
    stable_tokens: u64,
    history: Vec<Block>,
    /// The history block the request's last breakpoint is on.
    marker_at: usize,
    /// Uncached tokens of the chain's previous request (what it sent after its breakpoint).
    last_tail: u64,
    model: String,
    ttl: Ttl,
    turns: u64,
}

impl ChainState {
    fn held_tokens(&self) -> u64 {
        self.stable_tokens + self.history.iter().map(|b| b.tokens).sum::<u64>()
    }

    /// Brings the history to `total` tokens: the growth as a new marked block followed by its
    /// unmarked `tail` (Claude Code can send content after its last breakpoint), or, when the
    /// prompt shrank, the longest prefix that fits and the rest as new blocks.
    fn grow_to(&mut self, total: u64, tail: u64, label: &str) {
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
        self.history.push(Block::new(&format!("{label} turn {}", self.turns), growth - tail));
        if tail > 0 {
            self.history.push(Block::new(&format!("{label} turn {} after the marker", self.turns), tail));
        }
    }

    fn body(&self) -> Vec<u8> {
        let marker = cache_control(self.ttl);
        let size = self.history.iter().map(|b| b.json.len() + 1).sum::<usize>() + 256;
        let mut body = String::with_capacity(size);
        self.open_body(&mut body, 1);
        for (index, block) in self.history.iter().enumerate() {
            if index > 0 {
                body.push(',');
            }
            body.push_str(&block.json);
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
        body.push_str(&text_block_json("prewarm", 1));
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
        let _ = write!(
            body,
            r#"{{"model":{model},"max_tokens":{max_tokens},"system":[{stable}{marker}}}],"messages":[{{"role":"user","content":["#
        );
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

/// Predicts every request of one session, in the session's order.
#[allow(clippy::expect_used)] // bodies built from transcript usage stay within the token caps and context windows; a transcript with absurd counts would fail here (to become an error: follow-up)
pub fn predict_session(
    session: &ImportedSession,
    account: &AccountView,
    what_if: Option<&WhatIf>,
    prices: &PriceTable,
    mut trace: Option<&mut Vec<String>>,
) -> Result<Vec<Predicted>, TokenizerUnavailable> {
    // In an emitted trace each session is its own workspace, named by its id.
    let workspace = format!("session:{}", session.session_id);
    let mut endpoint = MockEndpoint::new(endpoint_config(), prices.clone())?;
    let times = simulated_times(session, what_if);
    let mut chains: BTreeMap<Chain, ChainState> = BTreeMap::new();
    let mut spawn_points: HashMap<&str, ChainState> = HashMap::new();
    let mut predictions = Vec::with_capacity(session.requests.len());
    for (request, &at_ms) in session.requests.iter().zip(&times) {
        let state = match chains.get_mut(&request.request.chain) {
            Some(state) => state,
            None => {
                let state = start_chain(request, account, &spawn_points, what_if);
                chains.entry(request.request.chain.clone()).or_insert(state)
            }
        };
        advance(state, request, what_if);
        if account.warm(state.agent, &state.model, request.start_ms) {
            let body = state.prewarm_body();
            endpoint.handle(Call::new(&body, SimTime(at_ms))).expect("a pre-warm body is valid");
            emit(trace.as_deref_mut(), &workspace, at_ms, &body);
        }
        let output = request.request.recorded.usage.output_tokens;
        let reply = Reply { output_tokens: Some(output), ..Reply::input_only() };
        let call = Call {
            body: &[],
            api_key: None,
            workspace: None,
            betas: Betas::NONE,
            at: SimTime(at_ms),
            first_byte: None,
            reply,
        };
        let body = state.body();
        let record =
            endpoint.handle(Call { body: &body, ..call }).expect("simulated bodies are valid").record;
        emit(trace.as_deref_mut(), &workspace, at_ms, &body);
        let guessed_tail = state.last_tail;
        state.last_tail = request.request.recorded.usage.input_tokens;
        predictions.push(Predicted {
            usage: with_guessed_tail(record.usage, guessed_tail, state.ttl),
            miss: record.miss,
            at_ms,
            model: state.model.clone(),
        });
        if session.spawning_requests.contains(request.request.request_id.as_str()) {
            spawn_points.insert(request.request.request_id.as_str(), state.clone());
        }
    }
    Ok(predictions)
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
    let ttl = chain_ttl(agent, request.ttl_before.unwrap_or(Ttl::FiveMinutes), what_if);
    let total = request.request.recorded.usage.total_input_tokens();
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
    let stable_tokens = start.map_or(DEFAULT_STABLE_TOKENS, |s| s.stable_tokens).min(total.saturating_sub(1));
    let ttl = match (request.ttl_before, start) {
        (None, Some(start)) => chain_ttl(agent, start.ttl, what_if),
        _ => ttl,
    };
    ChainState {
        agent,
        stable_text: if agent { "stable prefix: sub-agent" } else { "stable prefix: main" }.to_string(),
        stable_tokens,
        history: Vec::new(),
        marker_at: 0,
        last_tail: 0,
        model: request.request.model.clone(),
        ttl,
        turns: 0,
    }
}

/// Applies what the transcript says happened before this request: a compaction, a model
/// switch, the chain's current TTL, then the growth to this request's total input.
fn advance(state: &mut ChainState, request: &SessionRequest, what_if: Option<&WhatIf>) {
    let usage = &request.request.recorded.usage;
    if request.request.events.iter().any(|e| matches!(e, Event::Compacted { .. })) {
        // The summary replaces the history: the growth below is the summary.
        state.history.clear();
    }
    if what_if != Some(&WhatIf::NoModelSwitch) {
        state.model = request.request.model.clone();
    }
    if let Some(ttl) = request.ttl_before {
        state.ttl = chain_ttl(state.agent, ttl, what_if);
    }
    state.grow_to(usage.total_input_tokens(), usage.input_tokens, &request.request.chain.name());
}

/// The predicted usage as reported: the endpoint's read, and the rest split into uncached and
/// written as the chain's previous request split it (`guessed_tail` uncached). The request's own
/// uncached count only places its cache entry for later requests; it moves neither its
/// predicted read (entries lie before its new blocks, whatever their split) nor this split.
fn with_guessed_tail(usage: Usage, guessed_tail: u64, ttl: Ttl) -> Usage {
    let read = usage.cache_read_input_tokens;
    let rest = usage.total_input_tokens() - read;
    let uncached = guessed_tail.min(rest);
    let written = rest - uncached;
    let one_hour = match written_ttl(&usage) {
        Some(written_with) => written_with == Ttl::OneHour,
        None => ttl == Ttl::OneHour,
    };
    let (write_5m, write_1h) = if one_hour { (0, written) } else { (written, 0) };
    Usage::new(uncached, read, write_5m, write_1h, usage.output_tokens)
}

fn chain_ttl(agent: bool, observed: Ttl, what_if: Option<&WhatIf>) -> Ttl {
    match what_if {
        Some(WhatIf::Ttl(ttl)) => *ttl,
        Some(WhatIf::SubagentTtl1h) if agent => Ttl::OneHour,
        _ => observed,
    }
}

/// Appends a simulated request to the trace `--emit-trace` writes.
fn emit(trace: Option<&mut Vec<String>>, workspace: &str, at_ms: u64, body: &[u8]) {
    if let Some(trace) = trace {
        // The workspace by name: a trace never carries a key, and replay prices it in that workspace.
        let envelope =
            Envelope { at_ms: Some(at_ms), workspace: Some(workspace.to_string()), ..Envelope::default() };
        trace.push(envelope_line(&envelope, body));
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
