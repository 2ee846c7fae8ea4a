//! Why a request read less than it could have: ground truth from the cache's own state, not a
//! guess from the usage numbers.
//!
//! A request *misses* when tokens it shares with the past were not read. Three sources are
//! checked, most concrete first:
//! 1. an entry exists at one of its unread positions, but was expired, not yet visible, or out of
//!    every breakpoint's reach;
//! 2. an earlier request in scope sent a longer common prefix (or had cached past the point where
//!    this request diverges from it), but nothing was cached inside the shared part;
//! 3. the same prefix is cached under another model of the workspace.
//!
//! New content — what no earlier request sent — is never a miss, so the first request of a
//! conversation, and the directive that makes a fork differ from its siblings, have `miss: null`.

use serde::Serialize;

use super::history::{Closest, History, Summary};
use super::store::{EntryKey, EntryStore, ScopeId};
use super::{Policy, Scopes};
use crate::clock::SimTime;
use crate::prompt::{Breakpoint, Dimension, PromptRef};

/// The reason a request read less than it could have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MissCause {
    /// The shared prefix was sent before but never cached at any of its positions.
    Cold,
    /// The request diverges from the closest earlier request at a block (or a rendered
    /// parameter) before the point where that request's cache entry lay.
    PrefixChanged,
    /// The prefix is cached under another model; the cache is per model.
    ModelChanged,
    /// The request's breakpoints were all shorter than the model's minimum cacheable length.
    BelowMinimum,
    /// A readable entry existed, but more than 20 positions before every breakpoint.
    LookbackExceeded,
    /// The entry had expired.
    Expired,
    /// The entry's writer had not begun its response yet (parallel launch).
    NotYetVisible,
    /// The request has no breakpoint at or after a readable entry.
    NoBreakpoint,
}

impl MissCause {
    /// The cause as it is spelled in output.
    pub fn name(self) -> &'static str {
        match self {
            MissCause::Cold => "cold",
            MissCause::PrefixChanged => "prefix_changed",
            MissCause::ModelChanged => "model_changed",
            MissCause::BelowMinimum => "below_minimum",
            MissCause::LookbackExceeded => "lookback_exceeded",
            MissCause::Expired => "expired",
            MissCause::NotYetVisible => "not_yet_visible",
            MissCause::NoBreakpoint => "no_breakpoint",
        }
    }
}

/// A diagnosed miss.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Miss {
    /// Why.
    pub cause: MissCause,
    /// For `prefix_changed`: which part of the prompt changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dimension: Option<Dimension>,
    /// The position concerned: the unread entry's, or the first divergent one.
    pub position: u32,
    /// Its JSON path (`messages[14].content[3]`), or the request field for a config change.
    pub path: String,
    /// Tokens that could have been read and were not.
    pub tokens_missed: u64,
}

/// Everything the diagnosis looks at.
pub(super) struct Inputs<'a> {
    pub store: &'a EntryStore,
    pub history: &'a History,
    pub scopes: &'a Scopes,
    pub policy: Policy,
    pub scope: ScopeId,
    pub prompt: PromptRef<'a>,
    /// Breakpoints long enough to be cached.
    pub valid: &'a [Breakpoint],
    /// The position read from, if any.
    pub hit: Option<u32>,
    pub closest: Closest,
    pub start: SimTime,
}

impl Inputs<'_> {
    fn read_tokens(&self) -> u64 {
        self.hit.map_or(0, |p| self.prompt.tokens_at(p))
    }

    fn first_unread(&self) -> u32 {
        self.hit.map_or(0, |p| p + 1)
    }
}

/// The miss, if the request missed anything.
pub(super) fn diagnose(inputs: &Inputs) -> Option<Miss> {
    unread_entry(inputs).or_else(|| unread_shared_prefix(inputs)).or_else(|| other_model(inputs))
}

/// 1. The highest position above the hit where an entry exists.
fn unread_entry(inputs: &Inputs) -> Option<Miss> {
    let read = inputs.read_tokens();
    let prompt = inputs.prompt;
    let (index, entry) = (inputs.first_unread()..prompt.len() as u32).rev().find_map(|index| {
        let position = prompt.position(index);
        let key = EntryKey { scope: inputs.scope, prefix: position.hash };
        inputs.store.peek(&key).filter(|_| position.tokens_end > read).map(|entry| (index, entry))
    })?;
    let cause = if entry.expires_at <= inputs.start {
        MissCause::Expired
    } else if entry.visible_at > inputs.start {
        MissCause::NotYetVisible
    } else {
        unreached_cause(inputs, index)
    };
    Some(miss_at(inputs.prompt, cause, index, inputs.prompt.tokens_at(index) - read))
}

/// Why a readable entry at `index` was not read.
fn unreached_cause(inputs: &Inputs, index: u32) -> MissCause {
    let reaches = |bp: &Breakpoint| bp.position >= index;
    if !inputs.prompt.breakpoints.iter().any(reaches) {
        MissCause::NoBreakpoint
    } else if !inputs.valid.iter().any(reaches) {
        MissCause::BelowMinimum
    } else {
        MissCause::LookbackExceeded
    }
}

/// 2. A prefix shared with the closest earlier request that was not read.
fn unread_shared_prefix(inputs: &Inputs) -> Option<Miss> {
    let prompt = inputs.prompt;
    let read = inputs.read_tokens();
    let shared = inputs.closest.shared_to.map_or(0, |p| prompt.tokens_at(p));
    let diverges_at = inputs.closest.shared_to.map_or(0, |p| p + 1);
    let earlier: Option<&Summary> = inputs.closest.request.and_then(|r| inputs.history.summary(r));
    let earlier_cached_to = earlier.and_then(|s| s.cached_to);
    let diverges = (diverges_at as usize) < prompt.len();
    // The earlier request had cached at or past the block where this one diverges from it.
    let lost_by_change = diverges && earlier_cached_to.is_some_and(|(position, _)| position >= diverges_at);
    let lost_beyond = diverges && earlier_cached_to.is_some_and(|(position, _)| position > diverges_at);
    if shared <= read && !lost_beyond {
        return None;
    }
    if lost_by_change {
        let earlier = earlier.expect("cached_to came from a summary");
        let (_, earlier_tokens) = earlier_cached_to.expect("checked above");
        let reachable =
            if lost_beyond { earlier_tokens.min(prompt.total_tokens()).max(shared) } else { shared };
        return Some(changed_at(prompt, diverges_at, earlier, reachable.saturating_sub(read)))
            .filter(|miss| miss.tokens_missed > 0);
    }
    let cause = match inputs.policy {
        Policy::Anthropic if prompt.breakpoints.is_empty() => MissCause::NoBreakpoint,
        Policy::Anthropic if inputs.valid.is_empty() => MissCause::BelowMinimum,
        _ => MissCause::Cold,
    };
    Some(miss_at(prompt, cause, inputs.first_unread(), shared - read))
}

fn changed_at(prompt: PromptRef, position: u32, earlier: &Summary, tokens_missed: u64) -> Miss {
    let (dimension, path) = match prompt.salt_difference_before(position, &earlier.salts) {
        Some(field) => (Dimension::Config, field.to_string()),
        None => {
            let slot = prompt.position(position).slot;
            (slot.dimension(), slot.path())
        }
    };
    Miss { cause: MissCause::PrefixChanged, dimension: Some(dimension), position, path, tokens_missed }
}

/// 3. Nothing shared in this scope, but the prefix is cached under another model.
fn other_model(inputs: &Inputs) -> Option<Miss> {
    if inputs.hit.is_some() || inputs.closest.shared_to.is_some() {
        return None;
    }
    let prompt = inputs.prompt;
    let index = inputs
        .scopes
        .siblings(inputs.scope)
        .filter_map(|scope| {
            (0..prompt.len() as u32).rev().find(|&index| {
                inputs.store.peek(&EntryKey { scope, prefix: prompt.position(index).hash }).is_some()
            })
        })
        .max()?;
    Some(miss_at(inputs.prompt, MissCause::ModelChanged, index, inputs.prompt.tokens_at(index)))
        .filter(|miss| miss.tokens_missed > 0)
}

fn miss_at(prompt: PromptRef, cause: MissCause, position: u32, tokens_missed: u64) -> Miss {
    let position = position.min(prompt.len().saturating_sub(1) as u32);
    Miss { cause, dimension: None, position, path: prompt.path(position), tokens_missed }
}
