//! The prefix cache: entries per scope (workspace × model), the two lookup policies, TTL,
//! visibility, and the accounting that turns a lookup into the API's usage numbers.

mod diagnostics;
mod history;
mod miss;
mod store;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use diagnostics::{
    CacheMissReason, CacheMissType, Diagnostics, Fingerprint, Fingerprints, miss_reason_type,
};
pub use history::{Closest, HISTORY_LIMIT, History, Summary};
pub use miss::{Miss, MissCause, layout_notes};
pub use store::{Entry, EntryKey, EntryStore, ScopeId, StoreStats};

use crate::clock::{LatencyModel, SimTime, Visibility};
use crate::prompt::{Breakpoint, PromptRef, Ttl};

/// Which cache is simulated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// What the API documents: writes only at breakpoints, 20-position lookback per breakpoint,
    /// minimum cacheable length. Default.
    #[default]
    Anthropic,
    /// The seeds' idealised cache: every position is written, the longest cached prefix is read.
    LongestPrefix,
}

impl Policy {
    /// The policy's name as the command line spells it.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Anthropic => "anthropic",
            Policy::LongestPrefix => "longest-prefix",
        }
    }
}

/// How the cache behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    /// Lookup policy. Default [`Policy::Anthropic`].
    pub policy: Policy,
    /// When written entries become readable. Default [`Visibility::FirstToken`].
    pub visibility: Visibility,
    /// Response timing, for visibility and timelines.
    pub latency: LatencyModel,
    /// Positions each breakpoint checks, itself included. Default 20.
    pub lookback_positions: u32,
    /// Entries each workspace may hold before eviction (its expired first, then its least
    /// recently used; never another workspace's). Default 2²⁰.
    pub capacity_entries: usize,
    /// TTL of `longest-prefix` writes in a request without markers. Default 5m.
    pub default_ttl: Ttl,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            policy: Policy::Anthropic,
            visibility: Visibility::FirstToken,
            latency: LatencyModel::default(),
            lookback_positions: 20,
            capacity_entries: 1 << 20,
            default_ttl: Ttl::FiveMinutes,
        }
    }
}

/// Workspace × model → scope, numbered in first-seen order (so numbering is deterministic).
#[derive(Default)]
pub struct Scopes {
    workspaces: BTreeMap<String, u32>,
    /// Per workspace id: model → scope.
    models: Vec<BTreeMap<String, ScopeId>>,
    workspace_of: Vec<u32>,
}

impl Scopes {
    /// The scope of `model` in `workspace` (a lookup that allocates only for a new scope).
    pub fn get(&mut self, workspace: &str, model: &str) -> ScopeId {
        let workspace_id = match self.workspaces.get(workspace) {
            Some(&id) => id,
            None => {
                let id = self.models.len() as u32;
                self.workspaces.insert(workspace.to_string(), id);
                self.models.push(BTreeMap::new());
                id
            }
        };
        if let Some(&scope) = self.models[workspace_id as usize].get(model) {
            return scope;
        }
        let scope = ScopeId(self.workspace_of.len() as u32);
        self.workspace_of.push(workspace_id);
        self.models[workspace_id as usize].insert(model.to_string(), scope);
        scope
    }

    /// The other scopes (models) of `scope`'s workspace, in model-name order.
    pub fn siblings(&self, scope: ScopeId) -> impl Iterator<Item = ScopeId> + '_ {
        let workspace = self.workspace_of[scope.0 as usize];
        self.models[workspace as usize].values().copied().filter(move |&other| other != scope)
    }
}

/// One request as the cache needs it.
#[derive(Clone, Copy, Debug)]
pub struct Lookup<'p> {
    /// Workspace × model.
    pub scope: ScopeId,
    /// The rendered request.
    pub prompt: PromptRef<'p>,
    /// The model's minimum cacheable length.
    pub min_tokens: u64,
    /// When the request starts.
    pub start: SimTime,
    /// Output tokens, for [`Visibility::Complete`].
    pub output_tokens: u64,
    /// When its response really began, if known (a trace, or the HTTP server): then visibility
    /// follows that event instead of the latency model.
    pub first_byte: Option<SimTime>,
}

/// What the cache did with one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// `cache_read_input_tokens` (A).
    pub read: u64,
    /// `ephemeral_1h_input_tokens` (B − A).
    pub write_1h: u64,
    /// `ephemeral_5m_input_tokens` (C − B).
    pub write_5m: u64,
    /// `input_tokens` (total − C).
    pub uncached: u64,
    /// Where it read from.
    pub hit: Option<Hit>,
    /// Breakpoints dropped for being below the minimum length.
    pub breakpoints_dropped: u32,
    /// Modelled time to first token.
    pub ttft_ms: u64,
    /// When this request's writes become readable.
    pub visible_at: SimTime,
    /// Why it read less than it could have, if it did.
    pub miss: Option<Miss>,
}

/// Where a request read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hit {
    /// The position holding the read prefix's last block.
    pub position: u32,
    /// The entry's key.
    pub key: u128,
    /// `A`: the tokens read.
    pub tokens: u64,
}

impl Hit {
    /// A hit on a whole position.
    fn at(index: u32, position: &crate::prompt::Position) -> Hit {
        Hit { position: index, key: position.hash, tokens: position.tokens_end }
    }
}

/// The prefix cache of a whole run (every workspace and model).
pub struct PrefixCache {
    config: CacheConfig,
    scopes: Scopes,
    store: EntryStore,
    history: History,
    requests: u64,
}

impl PrefixCache {
    /// An empty cache.
    pub fn new(config: CacheConfig) -> PrefixCache {
        PrefixCache {
            store: EntryStore::new(config.capacity_entries),
            config,
            scopes: Scopes::default(),
            history: History::default(),
            requests: 0,
        }
    }

    /// The settings.
    pub fn config(&self) -> &CacheConfig {
        &self.config
    }

    /// The scope of `model` in `workspace`; its entries count against the workspace's capacity.
    pub fn scope(&mut self, workspace: &str, model: &str) -> ScopeId {
        let scope = self.scopes.get(workspace, model);
        self.store.set_tenant(scope, self.scopes.workspace_of[scope.0 as usize]);
        scope
    }

    /// Entry counters.
    pub fn stats(&self) -> StoreStats {
        self.store.stats()
    }

    /// Looks a request up, accounts for it, refreshes what it read and writes what it cached.
    pub fn serve(&mut self, lookup: Lookup) -> Outcome {
        let prompt = lookup.prompt;
        let valid = self.valid_breakpoints(&lookup);
        let hit = match self.config.policy {
            Policy::Anthropic => self.find_in_windows(&lookup, &valid),
            Policy::LongestPrefix => self.find_longest(&lookup),
        };
        let read = hit.map_or(0, |h| h.tokens);
        let writes = self.planned_writes(&lookup, &valid, read);
        let (write_1h, write_5m) = account(read, &writes);
        let uncached_for_latency = prompt.total_tokens() - read;
        let ttft_ms = self.config.latency.ttft_ms(uncached_for_latency);
        let visible_at = self.visible_at(&lookup, uncached_for_latency);
        let closest = self.history.closest(lookup.scope, prompt);
        let miss = (!prompt.is_empty()).then(|| {
            miss::diagnose(&miss::Inputs {
                store: &self.store,
                history: &self.history,
                scopes: &self.scopes,
                policy: self.config.policy,
                scope: lookup.scope,
                prompt,
                valid: &valid,
                hit,
                closest,
                start: lookup.start,
            })
        });
        self.apply(&lookup, hit, &writes, visible_at);
        let cached_to = writes.last().map(|w| (w.position, w.tokens)).or(hit.map(|h| (h.position, h.tokens)));
        self.requests += 1;
        self.history.record(
            lookup.scope,
            prompt,
            self.requests,
            closest,
            Summary { salts: prompt.salts, cached_to, own_tool_use_at: own_tool_use_at(prompt, closest) },
        );
        Outcome {
            read,
            write_1h,
            write_5m,
            uncached: prompt.total_tokens() - read - write_1h - write_5m,
            hit,
            breakpoints_dropped: (prompt.breakpoints.len() - valid.len()) as u32,
            ttft_ms,
            visible_at,
            miss: miss.flatten(),
        }
    }

    /// What the request would read and write in an empty cache, touching nothing: the price of
    /// sending it with no sharing at all.
    pub fn price_alone(&self, lookup: Lookup) -> Outcome {
        let prompt = lookup.prompt;
        let valid = self.valid_breakpoints(&lookup);
        let writes = self.planned_writes(&lookup, &valid, 0);
        let (write_1h, write_5m) = account(0, &writes);
        let total = prompt.total_tokens();
        Outcome {
            read: 0,
            write_1h,
            write_5m,
            uncached: total - write_1h - write_5m,
            hit: None,
            breakpoints_dropped: (prompt.breakpoints.len() - valid.len()) as u32,
            ttft_ms: self.config.latency.ttft_ms(total),
            visible_at: self.visible_at(&lookup, total),
            miss: None,
        }
    }

    /// Breakpoints long enough to cache (the `longest-prefix` policy has no minimum).
    fn valid_breakpoints(&self, lookup: &Lookup) -> Vec<Breakpoint> {
        let long_enough =
            |bp: &&Breakpoint| self.config.policy == Policy::LongestPrefix || bp.tokens >= lookup.min_tokens;
        lookup.prompt.breakpoints.iter().filter(long_enough).copied().collect()
    }

    /// `candidate`, if its entry is readable, reading no more than the entry holds. The two
    /// differ only when system and messages hash without the tools (the mid-conversation
    /// tool-changes beta, see [`crate::prompt`]): tokens of tools added since the entry was
    /// written were never cached.
    fn read(&self, lookup: &Lookup, candidate: Hit) -> Option<Hit> {
        let key = EntryKey { scope: lookup.scope, prefix: candidate.key };
        let entry = self.store.peek(&key).filter(|entry| entry.readable_at(lookup.start))?;
        Some(Hit { tokens: candidate.tokens.min(entry.tokens), ..candidate })
    }

    /// Last breakpoint first, each checking its own prefix and then the 19 positions before its
    /// own; the first hit is the longest.
    fn find_in_windows(&self, lookup: &Lookup, valid: &[Breakpoint]) -> Option<Hit> {
        let window = self.config.lookback_positions.max(1);
        let prompt = lookup.prompt;
        valid.iter().rev().find_map(|bp| {
            let own = Hit { position: bp.position, key: bp.key, tokens: bp.tokens };
            if let Some(hit) = self.read(lookup, own) {
                return Some(hit);
            }
            let lowest = bp.position.saturating_sub(window - 1);
            (lowest..bp.position).rev().find_map(|p| self.read(lookup, Hit::at(p, prompt.position(p))))
        })
    }

    fn find_longest(&self, lookup: &Lookup) -> Option<Hit> {
        let prompt = lookup.prompt;
        (0..prompt.len() as u32).rev().find_map(|p| self.read(lookup, Hit::at(p, prompt.position(p))))
    }

    /// The entries this request writes: those whose `T` is beyond what it read.
    fn planned_writes(&self, lookup: &Lookup, valid: &[Breakpoint], read: u64) -> Vec<Breakpoint> {
        match self.config.policy {
            Policy::Anthropic => valid.iter().filter(|bp| bp.tokens > read).copied().collect(),
            Policy::LongestPrefix => {
                let prompt = lookup.prompt;
                let ttl = prompt.breakpoints.iter().map(|bp| bp.ttl).max().unwrap_or(self.config.default_ttl);
                (0..prompt.len() as u32)
                    .map(|index| Breakpoint::at(index, prompt.position(index), ttl))
                    .filter(|bp| bp.tokens > read)
                    .collect()
            }
        }
    }

    fn visible_at(&self, lookup: &Lookup, uncached: u64) -> SimTime {
        let latency = &self.config.latency;
        match (self.config.visibility, lookup.first_byte) {
            (crate::clock::Visibility::Start, _) => lookup.start,
            (crate::clock::Visibility::FirstToken, Some(first_byte)) => first_byte,
            (crate::clock::Visibility::Complete, Some(first_byte)) => {
                first_byte.plus_ms(latency.generation_ms(lookup.output_tokens))
            }
            (visibility, None) => {
                latency.visible_at(visibility, lookup.start, uncached, lookup.output_tokens)
            }
        }
    }

    fn apply(&mut self, lookup: &Lookup, hit: Option<Hit>, writes: &[Breakpoint], visible_at: SimTime) {
        let key = |prefix: u128| EntryKey { scope: lookup.scope, prefix };
        if let Some(hit) = hit {
            self.store.refresh(key(hit.key), lookup.start);
        }
        for write in writes {
            self.store.write(key(write.key), write.tokens, write.ttl, lookup.start, visible_at);
        }
    }
}

/// Where `prompt`'s own content begins (past what it shares with `closest`), if it begins with a
/// `tool_use`.
fn own_tool_use_at(prompt: PromptRef, closest: Closest) -> Option<u32> {
    let fresh = closest.shared_to.map_or(0, |p| p + 1);
    ((fresh as usize) < prompt.len() && prompt.position(fresh).tool_use).then_some(fresh)
}

/// The API's arithmetic: `B` = largest `T` over 1h writes (else A), `C` = `T` at the last write
/// (else A); 1h writes are `B − A`, 5m writes `C − B`.
fn account(read: u64, writes: &[Breakpoint]) -> (u64, u64) {
    let b =
        writes.iter().filter(|bp| bp.ttl == Ttl::OneHour).map(|bp| bp.tokens).max().unwrap_or(read).max(read);
    let c = writes.last().map_or(read, |bp| bp.tokens).max(b);
    (b - read, c - b)
}
