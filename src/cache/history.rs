//! What earlier requests sent, independent of what was cached: the ground truth the miss
//! diagnosis compares against ("this prefix was sent before, by request R").

use std::collections::HashMap;

use super::store::{EntryKey, ScopeId};
use crate::prompt::{BuildPassThrough, PromptRef, Salts};

/// Distinct sent prefixes remembered before the history starts over (bounds memory).
pub const HISTORY_LIMIT: usize = 4 << 20;

/// What the diagnosis needs to know about an earlier request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Summary {
    /// Its salts, to tell a config change from a content change.
    pub salts: Salts,
    /// The highest of its positions left cached after it ran (read or written), and `T` there.
    pub cached_to: Option<(u32, u64)>,
}

/// Prefixes sent so far, per scope.
#[derive(Default)]
pub struct History {
    // Point lookups only.
    sent: HashMap<EntryKey, u64, BuildPassThrough>,
    summaries: HashMap<u64, Summary, BuildPassThrough>,
    last_in_scope: HashMap<ScopeId, u64, BuildPassThrough>,
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
    /// The earlier request in `scope` sharing the longest prefix with `prompt`.
    pub fn closest(&self, scope: ScopeId, prompt: PromptRef) -> Closest {
        for index in (0..prompt.len() as u32).rev() {
            let prefix = prompt.position(index).hash;
            if let Some(&request) = self.sent.get(&EntryKey { scope, prefix }) {
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
        if self.sent.len() >= HISTORY_LIMIT {
            self.sent.clear();
            self.summaries.clear();
        }
        let fresh_from = closest.shared_to.unwrap_or(0);
        // The shared prefix's last position now names this request as its most recent sender;
        // everything after it is new.
        for index in fresh_from..prompt.len() as u32 {
            self.sent.insert(EntryKey { scope, prefix: prompt.position(index).hash }, request);
        }
        self.summaries.insert(request, summary);
        self.last_in_scope.insert(scope, request);
    }
}
