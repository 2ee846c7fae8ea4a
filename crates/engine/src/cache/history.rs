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

use super::store::{EntryKey, ScopeId};
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
pub struct History {
    /// Prefixes remembered at most ([`HISTORY_LIMIT`]; smaller in tests).
    limit: usize,
    // Point lookups only (the values are iterated into a set, never into output).
    sent: HashMap<EntryKey, u64, BuildPassThrough>,
    sent_before: HashMap<EntryKey, u64, BuildPassThrough>,
    summaries: HashMap<u64, Summary, BuildPassThrough>,
    last_in_scope: HashMap<ScopeId, u64, BuildPassThrough>,
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
            sent: HashMap::default(),
            sent_before: HashMap::default(),
            summaries: HashMap::default(),
            last_in_scope: HashMap::default(),
        }
    }

    /// Forgets which request `scope` sent last (its workspace was dropped). Its prefixes stay
    /// until their generation is dropped: scope numbers are not reused while they can be
    /// remembered, so nothing can find them.
    pub fn forget_scope(&mut self, scope: ScopeId) {
        self.last_in_scope.remove(&scope);
    }

    /// The earlier request in `scope` sharing the longest prefix with `prompt`.
    pub fn closest(&self, scope: ScopeId, prompt: PromptRef) -> Closest {
        for index in (0..prompt.len() as u32).rev() {
            let prefix = prompt.position(index).hash;
            let key = EntryKey { scope, prefix };
            if let Some(&request) = self.sent.get(&key).or_else(|| self.sent_before.get(&key)) {
                return Closest { shared_to: Some(index), request: Some(request) };
            }
        }
        Closest { shared_to: None, request: self.last_in_scope.get(&scope).copied() }
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
        if self.sent.len() >= self.limit / 2 {
            self.sent_before = std::mem::take(&mut self.sent);
        }
        let fresh_from = closest.shared_to.unwrap_or(0);
        // The shared prefix's last position names whichever of its senders cached deeper (the
        // one whose entry a later divergence there would lose); everything after it is new.
        let keep_earlier = closest.request.and_then(|r| self.summaries.get(&r)).is_some_and(|earlier| {
            closest.shared_to.is_some() && cached_tokens(earlier) > cached_tokens(&summary)
        });
        for index in fresh_from + u32::from(keep_earlier)..prompt.len() as u32 {
            self.sent.insert(EntryKey { scope, prefix: prompt.position(index).hash }, request);
        }
        self.summaries.insert(request, summary);
        self.last_in_scope.insert(scope, request);
        self.forget_unreachable_summaries();
    }

    /// Summaries are only looked up through `sent` and `last_in_scope`; a request no prefix names
    /// any more can never be asked about again. A run that repeats its requests (a server under
    /// steady load) would otherwise add one summary per request forever while `sent` stays small.
    /// Pruning once they outnumber the reachable ones twice over keeps the cost amortized O(1).
    fn forget_unreachable_summaries(&mut self) {
        let reachable = self.sent.len() + self.sent_before.len() + self.last_in_scope.len();
        if self.summaries.len() <= 2 * reachable + SUMMARY_SLACK {
            return;
        }
        // Point lookups only.
        let live: HashSet<u64> = self
            .sent
            .values()
            .chain(self.sent_before.values())
            .chain(self.last_in_scope.values())
            .copied()
            .collect();
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
        assert_eq!(history.sent.len(), 4);
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
        assert!(history.sent.len() + history.sent_before.len() <= limit + 1);
        let forgotten = history.closest(scope, first.as_ref());
        assert_eq!(forgotten.shared_to, None, "never sent, as far as the diagnosis can tell");
    }
}
