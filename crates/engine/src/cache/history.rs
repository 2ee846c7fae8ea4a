//! What earlier requests sent, independent of what was cached: the ground truth the miss
//! diagnosis compares against ("this prefix was sent before, by request R").
//!
//! Bounded by two generations: prefixes go into the current one; when it holds
//! [`HISTORY_LIMIT`]` / 2` it becomes the previous one and the one before is dropped, with the
//! summaries only it named. So at most [`HISTORY_LIMIT`] prefixes (about 50 bytes each, plus the
//! hash table's slack) are remembered, and every prefix among the last `HISTORY_LIMIT / 2` new
//! ones sent is. The effect of forgetting: a later request that misses on a prefix forgotten is
//! diagnosed as if that prefix had never been sent (its miss names no earlier request). Only what
//! the diagnosis says changes, never a usage or a cost: the cache itself is not the history.

use std::collections::{HashMap, HashSet};

use super::store::ScopeId;
use crate::prompt::{BuildPassThrough, PromptRef, Salts};

/// Distinct sent prefixes remembered at most (two generations of half as many; the current one
/// alone covers a full cache at the default capacity of 2^20 entries).
pub const HISTORY_LIMIT: usize = 2 << 20;

/// What the diagnosis needs to know about an earlier request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Summary {
    /// Its salts, to tell a config change from a content change.
    pub salts: Salts,
    /// The highest of its positions left cached after it ran (read or written), and `T` there.
    pub cached_to: Option<(u32, u64)>,
    /// Where its own content began (past what it shared with the past), when that is a
    /// `tool_use`: a fork child's own tool call.
    pub own_tool_use_at: Option<u32>,
}

/// Prefixes sent so far, per scope.
///
/// Each scope keeps its own maps, so what one tenant looks up never walks what others sent: a
/// new key's first request searches an empty map however many tenants sent the same prefix.
pub struct History {
    /// Prefixes remembered at most ([`HISTORY_LIMIT`]; smaller in tests).
    limit: usize,
    // Point lookups only; iterated only to rotate generations and to find live summaries.
    scopes: HashMap<ScopeId, ScopeHistory, BuildPassThrough>,
    /// Prefixes in every scope's current generation, and in every scope's previous one.
    current_len: usize,
    before_len: usize,
    summaries: HashMap<u64, Summary, BuildPassThrough>,
}

/// One scope's prefixes, each naming the request that sent it, in two generations.
#[derive(Default)]
struct ScopeHistory {
    sent: HashMap<u128, u64, BuildPassThrough>,
    sent_before: HashMap<u128, u64, BuildPassThrough>,
    /// The request this scope sent last.
    last: Option<u64>,
}

impl ScopeHistory {
    fn sender_of(&self, prefix: u128) -> Option<u64> {
        self.sent.get(&prefix).or_else(|| self.sent_before.get(&prefix)).copied()
    }

    fn requests_named(&self) -> impl Iterator<Item = u64> + '_ {
        self.sent.values().chain(self.sent_before.values()).chain(self.last.iter()).copied()
    }
}

impl Default for History {
    fn default() -> Self {
        History::with_limit(HISTORY_LIMIT)
    }
}

/// The earlier request this one shares the most with.
#[derive(Clone, Copy, Debug)]
pub struct Closest {
    /// The last shared position, if any is shared.
    pub shared_to: Option<u32>,
    /// The request (the most recent one in scope when nothing is shared).
    pub request: Option<u64>,
}

impl History {
    /// An empty history remembering at most `limit` prefixes.
    fn with_limit(limit: usize) -> History {
        History {
            limit,
            scopes: HashMap::default(),
            current_len: 0,
            before_len: 0,
            summaries: HashMap::default(),
        }
    }

    /// Forgets everything `scope` sent (its workspace was dropped). Scope numbers are not reused
    /// while they can be remembered, so nothing could have found its prefixes again anyway.
    pub fn forget_scope(&mut self, scope: ScopeId) {
        if let Some(gone) = self.scopes.remove(&scope) {
            self.current_len -= gone.sent.len();
            self.before_len -= gone.sent_before.len();
        }
    }

    /// The earlier request in `scope` sharing the longest prefix with `prompt`.
    pub fn closest(&self, scope: ScopeId, prompt: PromptRef) -> Closest {
        let Some(history) = self.scopes.get(&scope) else {
            return Closest { shared_to: None, request: None };
        };
        for index in (0..prompt.len() as u32).rev() {
            if let Some(request) = history.sender_of(prompt.position(index).hash) {
                return Closest { shared_to: Some(index), request: Some(request) };
            }
        }
        Closest { shared_to: None, request: history.last }
    }

    /// What is known of an earlier request.
    pub fn summary(&self, request: u64) -> Option<&Summary> {
        self.summaries.get(&request)
    }

    /// Records request number `request`, which shared `closest.shared_to` with the past.
    pub fn record(
        &mut self,
        scope: ScopeId,
        prompt: PromptRef,
        request: u64,
        closest: Closest,
        summary: Summary,
    ) {
        if self.current_len >= self.limit / 2 {
            self.start_generation();
        }
        let fresh_from = closest.shared_to.unwrap_or(0);
        // The shared prefix's last position names whichever of its senders cached deeper (the
        // one whose entry a later divergence there would lose); everything after it is new.
        let keep_earlier = closest.request.and_then(|r| self.summaries.get(&r)).is_some_and(|earlier| {
            closest.shared_to.is_some() && cached_tokens(earlier) > cached_tokens(&summary)
        });
        let history = self.scopes.entry(scope).or_default();
        for index in fresh_from + u32::from(keep_earlier)..prompt.len() as u32 {
            if history.sent.insert(prompt.position(index).hash, request).is_none() {
                self.current_len += 1;
            }
        }
        history.last = Some(request);
        self.summaries.insert(request, summary);
        self.forget_unreachable_summaries();
    }

    /// The current generation becomes the previous one, and the one before is dropped. A scope
    /// left with no prefix keeps only which request it sent last.
    fn start_generation(&mut self) {
        for history in self.scopes.values_mut() {
            history.sent_before = std::mem::take(&mut history.sent);
        }
        self.before_len = std::mem::take(&mut self.current_len);
    }

    /// Summaries are only looked up through the prefixes and each scope's last request; a
    /// request none of them names any more can never be asked about again. A run that repeats
    /// its requests (a server under steady load) would otherwise add one summary per request
    /// forever while the prefixes stay few. Pruning once they outnumber the reachable ones twice
    /// over keeps the cost amortized O(1).
    fn forget_unreachable_summaries(&mut self) {
        let reachable = self.current_len + self.before_len + self.scopes.len();
        if self.summaries.len() <= 2 * reachable + SUMMARY_SLACK {
            return;
        }
        // Point lookups only.
        let live: HashSet<u64> = self.scopes.values().flat_map(ScopeHistory::requests_named).collect();
        self.summaries.retain(|request, _| live.contains(request));
    }
}

fn cached_tokens(summary: &Summary) -> u64 {
    summary.cached_to.map_or(0, |(_, tokens)| tokens)
}

/// Unreachable summaries tolerated before pruning (so small runs never prune).
const SUMMARY_SLACK: usize = 1024;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::system_prompt_of as prompt;

    #[test]
    fn repeating_the_same_requests_keeps_the_history_bounded() {
        let mut history = History::default();
        let scope = ScopeId(0);
        let prompts = [prompt(&[1, 2, 3]), prompt(&[1, 2, 4])];
        let summary = Summary { salts: Salts::default(), cached_to: None, own_tool_use_at: None };
        for request in 0..20_000u64 {
            let prompt = &prompts[(request % 2) as usize];
            let closest = history.closest(scope, prompt.as_ref());
            history.record(scope, prompt.as_ref(), request, closest, summary);
        }
        // 4 distinct prefixes and 1 scope: at most 2 × 5 + 1,024 summaries are kept, not 20,000.
        assert_eq!((history.current_len, history.before_len), (4, 0));
        assert!(history.summaries.len() <= 2 * 5 + SUMMARY_SLACK, "{}", history.summaries.len());
        // What the diagnosis can still reach is still there: the latest sender of each prefix.
        let closest = history.closest(scope, prompts[1].as_ref());
        assert_eq!(closest.request, Some(19_999));
        assert!(history.summary(19_999).is_some() && history.summary(19_998).is_some());
    }

    #[test]
    fn a_prefix_is_remembered_for_half_the_limit_of_new_ones_and_forgotten_after_the_limit() {
        let limit = 2_000;
        let mut history = History::with_limit(limit);
        let scope = ScopeId(0);
        let summary = Summary { salts: Salts::default(), cached_to: None, own_tool_use_at: None };
        let first = prompt(&[u128::MAX]);
        let closest = history.closest(scope, first.as_ref());
        history.record(scope, first.as_ref(), 0, closest, summary);
        let send = |history: &mut History, from: u64, to: u64| {
            for request in from..to {
                let other = prompt(&[u128::from(request)]);
                let closest = history.closest(scope, other.as_ref());
                history.record(scope, other.as_ref(), request, closest, summary);
            }
        };
        let half = (limit / 2) as u64;
        send(&mut history, 1, half);
        assert_eq!(history.closest(scope, first.as_ref()).shared_to, Some(0), "still in reach");
        send(&mut history, half, 2 * half + 1);
        assert!(history.current_len + history.before_len <= limit + 1);
        let forgotten = history.closest(scope, first.as_ref());
        assert_eq!(forgotten.shared_to, None, "never sent, as far as the diagnosis can tell");
    }
}
