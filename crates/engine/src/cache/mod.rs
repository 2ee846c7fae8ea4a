//! The prefix cache: entries per scope (workspace × model), the lookup policies of each provider, TTL,
//! visibility, and the accounting that turns a lookup into the API's usage numbers.

pub mod deepseek;
mod diagnostics;
pub mod gemini;
mod history;
mod miss;
pub mod openai;
mod policy;
mod store;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

pub use deepseek::DeepSeek;
pub use diagnostics::{Fingerprint, Fingerprints, miss_reason_type, miss_type_of};
/// The API's diagnostics object, filled by [`Fingerprints`].
pub use forkcache_wire::{CacheMissReason, CacheMissType, Diagnostics};
pub use gemini::{GeminiExplicit, GeminiImplicit};
pub use history::{Closest, HISTORY_LIMIT, History, Summary};
pub use miss::{Miss, MissCause, describe_miss, layout_notes};
pub use openai::OpenAi;
pub use policy::{Anthropic, CachePolicy, LongestPrefix, Request as PolicyRequest};
pub use store::{Entry, EntryKey, EntryStore, ScopeId, StoreStats};

use crate::clock::{LatencyModel, SimTime, Visibility};
use crate::prompt::{Breakpoint, PromptRef, Ttl};

/// Which cache is simulated: a name for one of the [`CachePolicy`]s ([`Policy::rules`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// What the API documents: writes only at breakpoints, 20-position lookback per breakpoint,
    /// minimum cacheable length. Default.
    #[default]
    Anthropic,
    /// The seeds' idealised cache: every position is written, the longest cached prefix is read.
    LongestPrefix,
    /// OpenAI's automatic prefix cache ([`openai`]).
    Openai,
    /// Gemini's implicit cache ([`gemini`]).
    GeminiImplicit,
    /// Gemini's explicit cached objects ([`gemini`]).
    GeminiExplicit,
    /// DeepSeek's disk cache of whole prefix units ([`deepseek`]).
    Deepseek,
}

impl Policy {
    /// The policy's name as the command line spells it.
    pub fn name(self) -> &'static str {
        self.rules().name()
    }

    /// The rules this policy names.
    pub fn rules(self) -> &'static dyn CachePolicy {
        match self {
            Policy::Anthropic => &Anthropic,
            Policy::LongestPrefix => &LongestPrefix,
            Policy::Openai => &OpenAi,
            Policy::GeminiImplicit => &GeminiImplicit,
            Policy::GeminiExplicit => &GeminiExplicit,
            Policy::Deepseek => &DeepSeek,
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

/// Workspace × model → scope. Workspaces are numbered in first-seen order (so numbering is
/// deterministic), and each knows when it goes idle: when its last cache entry expires, and no
/// sooner than 5 minutes (the shortest TTL) after its last request. An idle workspace can be
/// dropped ([`PrefixCache::drop_idle`]); its number is not given to another workspace while any
/// other is using it, and a dropped workspace that returns starts afresh under a new number.
#[derive(Default)]
pub struct Scopes {
    by_name: BTreeMap<String, Workspace>,
    /// Workspace number → its name and when it goes idle.
    by_number: BTreeMap<u32, (String, SimTime)>,
    /// `(idle from, workspace number)`, earliest first.
    idle: BTreeSet<(SimTime, u32)>,
    next_number: u32,
}

/// One workspace's scopes.
struct Workspace {
    number: u32,
    /// Model → scope.
    models: BTreeMap<String, ScopeId>,
}

impl Scopes {
    /// The scope of `model` in `workspace` (a lookup that allocates only for a new scope).
    pub fn get(&mut self, workspace: &str, model: &str) -> ScopeId {
        if !self.by_name.contains_key(workspace) {
            self.open(workspace);
        }
        let Some(state) = self.by_name.get_mut(workspace) else { return ScopeId::UNSCOPED };
        if let Some(&scope) = state.models.get(model) {
            return scope;
        }
        // Models are never dropped one by one: a workspace would need 2^32 requests to run out.
        let scope = ScopeId::new(state.number, state.models.len() as u32);
        state.models.insert(model.to_string(), scope);
        scope
    }

    /// Numbers a new workspace: the next number no live workspace holds (`u32::MAX` is
    /// [`ScopeId::UNSCOPED`]'s). Numbers come round again only after 2^32 workspaces, long after
    /// the history of any dropped one is forgotten.
    fn open(&mut self, workspace: &str) {
        while self.next_number == u32::MAX || self.by_number.contains_key(&self.next_number) {
            self.next_number = self.next_number.wrapping_add(1);
        }
        let number = self.next_number;
        self.next_number = self.next_number.wrapping_add(1);
        self.by_number.insert(number, (workspace.to_string(), SimTime(0)));
        self.idle.insert((SimTime(0), number));
        self.by_name.insert(workspace.to_string(), Workspace { number, models: BTreeMap::new() });
    }

    /// The other scopes (models) of `scope`'s workspace, in model-name order.
    pub fn siblings(&self, scope: ScopeId) -> impl Iterator<Item = ScopeId> + '_ {
        let state = self.by_number.get(&scope.workspace()).and_then(|(name, _)| self.by_name.get(name));
        state
            .into_iter()
            .flat_map(|state| state.models.values().copied())
            .filter(move |&other| other != scope)
    }

    /// Whether `workspace` has scopes (it was seen and not dropped since).
    pub fn holds(&self, workspace: &str) -> bool {
        self.by_name.contains_key(workspace)
    }

    /// Workspaces held.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// Whether no workspace is held.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Records that workspace number `number` goes idle at `idle_from`.
    fn set_idle_from(&mut self, number: u32, idle_from: SimTime) {
        let Some((_, at)) = self.by_number.get_mut(&number) else { return };
        if *at != idle_from {
            self.idle.remove(&(*at, number));
            self.idle.insert((idle_from, number));
            *at = idle_from;
        }
    }

    /// Takes out the workspaces idle at `now` other than `keep`: their names and scopes.
    fn take_idle(&mut self, now: SimTime, keep: Option<&str>) -> Vec<(String, Vec<ScopeId>)> {
        let due: Vec<(SimTime, u32)> = self.idle.range(..=(now, u32::MAX)).copied().collect();
        let mut taken = Vec::new();
        for (at, number) in due {
            let Some((name, _)) = self.by_number.get(&number) else { continue };
            if Some(name.as_str()) == keep {
                continue;
            }
            self.idle.remove(&(at, number));
            let Some((name, _)) = self.by_number.remove(&number) else { continue };
            let scopes =
                self.by_name.remove(&name).map(|w| w.models.into_values().collect()).unwrap_or_default();
            taken.push((name, scopes));
        }
        taken
    }
}

/// One request as the cache needs it.
#[derive(Clone, Copy, Debug)]
pub struct Lookup<'p> {
    /// Workspace × model.
    pub scope: ScopeId,
    /// The model id as requested (rules of some policies depend on the model's generation).
    pub model: &'p str,
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
    pub fn at(index: u32, position: &crate::prompt::Position) -> Hit {
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
        self.scopes.get(workspace, model)
    }

    /// Whether `workspace` has cache state (it was seen, and not dropped since).
    pub fn holds_workspace(&self, workspace: &str) -> bool {
        self.scopes.holds(workspace)
    }

    /// Workspaces with cache state.
    pub fn workspaces(&self) -> usize {
        self.scopes.len()
    }

    /// Drops every workspace idle at `now` except `keep`: its entries, its scopes and what the
    /// history holds of it by scope. Returns their names, in workspace-number order.
    ///
    /// Usage never changes by it: an idle workspace's entries have all expired, so no later
    /// request could read them (nor would they keep a live entry from eviction: expired entries
    /// go first). The caller must not price a request starting before `now` afterwards (the
    /// server stamps arrivals in order). What changes is the diagnosis of a returning workspace:
    /// its first miss is diagnosed as if it were new (no `expired`, no earlier request named).
    /// `keep`, the workspace of the request being answered, is never dropped by it, so a single
    /// tenant coming back after a pause still sees its miss as `expired`.
    pub fn drop_idle(&mut self, now: SimTime, keep: Option<&str>) -> Vec<String> {
        let taken = self.scopes.take_idle(now, keep);
        taken
            .into_iter()
            .map(|(name, scopes)| {
                if let Some(first) = scopes.first() {
                    self.store.drop_tenant(first.workspace());
                }
                for scope in scopes {
                    self.history.forget_scope(scope);
                }
                name
            })
            .collect()
    }

    /// Entry counters.
    pub fn stats(&self) -> StoreStats {
        self.store.stats()
    }

    /// Looks a request up, accounts for it, refreshes what it read and writes what it cached.
    pub fn serve(&mut self, lookup: Lookup) -> Outcome {
        let prompt = lookup.prompt;
        let valid = self.valid_breakpoints(&lookup);
        let closest = self.history.closest(lookup.scope, prompt);
        let request = self.policy_request(&lookup, &valid, closest.shared_to);
        let rules = self.config.policy.rules();
        let hit = rules.find(&request, &mut |candidate| self.read(&lookup, candidate));
        let matched = hit.map_or(0, |h| h.tokens);
        let writes = rules.writes(&request, matched);
        let (read, write_1h, write_5m) = account(matched, rules.read_step(lookup.model), &writes);
        let uncached_for_latency = prompt.total_tokens() - read;
        let ttft_ms = self.config.latency.ttft_ms(uncached_for_latency);
        let visible_at = self.visible_at(&lookup, uncached_for_latency);
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
        self.mark_busy(&lookup);
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
        let request = self.policy_request(&lookup, &valid, None);
        let writes = self.config.policy.rules().writes(&request, 0);
        let (_, write_1h, write_5m) = account(0, 1, &writes);
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

    /// What the policy sees of `lookup`.
    fn policy_request<'a, 'p>(
        &self,
        lookup: &Lookup<'p>,
        valid: &'a [Breakpoint],
        shared_to: Option<u32>,
    ) -> PolicyRequest<'a, 'p> {
        PolicyRequest {
            model: lookup.model,
            prompt: lookup.prompt,
            valid,
            min_tokens: lookup.min_tokens,
            lookback: self.config.lookback_positions,
            shared_to,
            default_ttl: self.config.default_ttl,
        }
    }

    /// Breakpoints the policy may write and look up.
    fn valid_breakpoints(&self, lookup: &Lookup) -> Vec<Breakpoint> {
        let rules = self.config.policy.rules();
        let cacheable = |bp: &&Breakpoint| rules.cacheable(bp, lookup.min_tokens);
        lookup.prompt.breakpoints.iter().filter(cacheable).copied().collect()
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

    /// The lookup's workspace goes idle when its last entry expires, and no sooner than the
    /// shortest TTL after this request.
    fn mark_busy(&mut self, lookup: &Lookup) {
        let workspace = lookup.scope.workspace();
        let quiet_from = lookup.start.plus_ms(Ttl::FiveMinutes.ms());
        let idle_from = self.store.last_expiry(workspace).map_or(quiet_from, |last| last.max(quiet_from));
        self.scopes.set_idle_from(workspace, idle_from);
    }

    fn apply(&mut self, lookup: &Lookup, hit: Option<Hit>, writes: &[Breakpoint], visible_at: SimTime) {
        let key = |prefix: u128| EntryKey { scope: lookup.scope, prefix };
        let rules = self.config.policy.rules();
        if let Some(hit) = hit.filter(|_| rules.refreshed_by_reads()) {
            self.store.refresh(key(hit.key), lookup.start);
        }
        // Once per TTL, not per write: a policy may read the model's name to decide.
        let lifetimes = [Ttl::FiveMinutes, Ttl::OneHour].map(|ttl| rules.lifetime_ms(lookup.model, ttl));
        for write in writes {
            let lifetime_ms = lifetimes[usize::from(write.ttl == Ttl::OneHour)];
            self.store.write(key(write.key), write.tokens, lifetime_ms, lookup.start, visible_at);
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
/// (else A); 1h writes are `B − A`, 5m writes `C − B`. `matched` is A as the cache matched it;
/// the read reported (and returned first) is A in whole `read_step`s, the rest billed uncached.
fn account(matched: u64, read_step: u64, writes: &[Breakpoint]) -> (u64, u64, u64) {
    let b = writes
        .iter()
        .filter(|bp| bp.ttl == Ttl::OneHour)
        .map(|bp| bp.tokens)
        .max()
        .unwrap_or(matched)
        .max(matched);
    let c = writes.last().map_or(matched, |bp| bp.tokens).max(b);
    (matched / read_step * read_step, b - matched, c - b)
}
