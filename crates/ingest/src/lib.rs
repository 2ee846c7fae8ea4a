//! forkcache-ingest: real traffic in — traces, transcripts, proxy joins, prediction, replay.
//! It may import the wire and the engine; it must never import agents, reports or the network.
//!
//! Real traffic in: the recorded sources forkcache reads, turned into one request stream that is
//! priced as recorded and predicted through the same [`MockEndpoint`](forkcache_engine::endpoint::MockEndpoint) as
//! `replay`.
//!
//! Sources: JSONL traces ([`trace`]: bodies or envelopes, what `serve` writes) and Claude
//! Code session transcripts ([`transcript`]: real usage, chains and events, but no bodies). A
//! transcript import groups requests into [`ImportedSession`]s of chains, finds the observed
//! cache breaks ([`breaks`]), re-runs each session through the endpoint ([`predict`]) and reports
//! the real bill beside the prediction ([`report`]), as JSON, tables or CSV (the reports crate
//! draws its charts and HTML page). [`replay()`](replay::replay) prices a trace request by
//! request; [`calibrate`] and [`explain`] read one more than once.
#![deny(missing_docs)]
// Input-derived data is never unwrapped: a bad input is an error naming it, never a panic. The
// few sites that cannot fail carry an `allow` saying why.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod breaks;
pub mod calibrate;
pub mod codex;
pub mod compact;
pub mod explain;
pub mod files;
pub mod predict;
pub mod proxy;
pub mod replay;
pub mod report;
pub mod trace;
pub mod transcript;
pub mod warmth;

use std::collections::{BTreeMap, BTreeSet};

use breaks::{ObservedBreak, Turn};
use transcript::{Chain, EpochMs, TranscriptRequest, Transcripts};

use forkcache_engine::prompt::Ttl;

/// A chain's link to the request that spawned it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParentLink {
    /// The parent's chain.
    pub chain: Chain,
    /// The spawning request.
    pub request_id: String,
}

/// One request in its session, with what its chain's earlier requests say about it.
#[derive(Clone, Debug)]
pub struct SessionRequest {
    /// As read.
    pub request: TranscriptRequest,
    /// Start, ms since the epoch.
    pub start_ms: EpochMs,
    /// 0-based position in its chain.
    pub chain_index: usize,
    /// The TTL the chain last wrote with before this request (`None`: it has not written).
    pub ttl_before: Option<Ttl>,
    /// For a chain's first request: the request that spawned the chain, when known.
    pub parent: Option<ParentLink>,
    /// The break, when there is one.
    pub break_: Option<ObservedBreak>,
}

impl SessionRequest {
    /// Whether the real usage shows a break against the chain's previous request.
    pub fn observed_break(&self) -> bool {
        self.break_.is_some()
    }

    /// True for a sub-agent's chain.
    pub fn is_agent(&self) -> bool {
        matches!(self.request.chain, Chain::Agent(_))
    }
}

/// A session's chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainInfo {
    /// `main` or `agent:<id>`.
    pub chain: Chain,
    /// What spawned it, when known.
    pub parent: Option<ParentLink>,
}

/// One session: every chain's requests in start order.
#[derive(Clone, Debug)]
pub struct ImportedSession {
    /// `sessionId`.
    pub session_id: String,
    /// Requests ordered by start (ties: first line, then request id).
    pub requests: Vec<SessionRequest>,
    /// Its chains, `main` first, then in order of first request.
    pub chains: Vec<ChainInfo>,
    /// Requests that spawned a linked chain.
    pub spawning_requests: BTreeSet<String>,
}

/// Imports transcripts already read: sessions, breaks, prices, prediction, what-ifs.
pub fn import(
    transcripts: Transcripts,
    options: &report::ImportOptions,
    prices: &forkcache_engine::billing::PriceTable,
) -> Result<report::ImportReport, forkcache_engine::tokenize::TokenizerUnavailable> {
    let read = transcripts.stats.clone();
    report::analyse(sessions_of(transcripts), read, options, prices)
}

/// Groups the requests read into sessions and chains, links sub-agent chains to their spawning
/// request and finds the observed breaks.
pub fn sessions_of(transcripts: Transcripts) -> Vec<ImportedSession> {
    let mut by_session: BTreeMap<String, Vec<TranscriptRequest>> = BTreeMap::new();
    for request in transcripts.requests {
        by_session.entry(request.session_id.clone()).or_default().push(request);
    }
    by_session.into_iter().map(|(id, requests)| session(id, requests, &transcripts.spawns)).collect()
}

fn session(
    session_id: String,
    mut requests: Vec<TranscriptRequest>,
    spawns: &BTreeMap<(String, String), transcript::Spawn>,
) -> ImportedSession {
    requests.sort_by(|a, b| {
        (a.start_ms, a.first_line_ms, &a.request_id).cmp(&(b.start_ms, b.first_line_ms, &b.request_id))
    });
    let chain_of_request: BTreeMap<&str, &Chain> =
        requests.iter().map(|r| (r.request_id.as_str(), &r.chain)).collect();
    let mut parents: BTreeMap<Chain, ParentLink> = BTreeMap::new();
    for ((spawn_session, agent_id), spawn) in spawns {
        if *spawn_session == session_id {
            if let Some(chain) = chain_of_request.get(spawn.request_id.as_str()) {
                let link = ParentLink { chain: (*chain).clone(), request_id: spawn.request_id.clone() };
                parents.insert(Chain::Agent(agent_id.clone()), link);
            }
        }
    }
    let mut chains: Vec<ChainInfo> = Vec::new();
    let mut last: BTreeMap<Chain, Previous> = BTreeMap::new();
    let mut out = Vec::with_capacity(requests.len());
    for request in requests {
        let usage = request.recorded.usage;
        let this = Turn {
            model: &request.model,
            start_ms: request.start_ms,
            read: usage.cache_read_input_tokens,
            creation: usage.cache_creation_input_tokens,
            total_input: usage.total_input_tokens(),
        };
        let (chain_index, ttl_before, break_) = match last.get(&request.chain) {
            None => {
                chains.push(ChainInfo {
                    chain: request.chain.clone(),
                    parent: parents.get(&request.chain).cloned(),
                });
                (0, None, None)
            }
            Some(previous) => {
                let ttl = previous.ttl.unwrap_or(Ttl::FiveMinutes);
                (
                    previous.index + 1,
                    previous.ttl,
                    breaks::observe(&previous.turn(), &this, ttl, &request.events),
                )
            }
        };
        let ttl = predict::written_ttl(&usage).or(ttl_before);
        let previous = Previous {
            index: chain_index,
            ttl,
            model: request.model.clone(),
            start_ms: request.start_ms,
            read: this.read,
            creation: this.creation,
        };
        last.insert(request.chain.clone(), previous);
        let parent = if chain_index == 0 { parents.get(&request.chain).cloned() } else { None };
        out.push(SessionRequest {
            start_ms: request.start_ms,
            request,
            chain_index,
            ttl_before,
            parent,
            break_,
        });
    }
    chains.sort_by_key(|c| c.chain != Chain::Main);
    let spawning_requests = parents.values().map(|p| p.request_id.clone()).collect();
    ImportedSession { session_id, requests: out, chains, spawning_requests }
}

/// What break detection keeps of a chain's latest request.
struct Previous {
    index: usize,
    ttl: Option<Ttl>,
    model: String,
    start_ms: EpochMs,
    read: u64,
    creation: u64,
}

impl Previous {
    fn turn(&self) -> Turn<'_> {
        Turn {
            model: &self.model,
            start_ms: self.start_ms,
            read: self.read,
            creation: self.creation,
            total_input: 0,
        }
    }
}
