//! Why a request read less than it could have: ground truth from the cache's own state, not a
//! guess from the usage numbers.
//!
//! One definition, used by every table, JSON document, `explain` and the server's log: a *miss*
//! is tokens that could have been read and were not — tokens this request shares with what was
//! sent before, up to its last breakpoint where the policy reads only at breakpoints. Three
//! sources are checked, most concrete first:
//! 1. an entry exists at one of its unread positions, but was expired, not yet visible, or out of
//!    every breakpoint's reach;
//! 2. an earlier request in scope sent a longer common prefix (or had cached past the point where
//!    this request diverges from it), but nothing was cached inside the shared part: either no
//!    marker of that request covered it (`not_written`) or its entry is gone (`cold`);
//! 3. the same prefix is cached under another model of the workspace.
//!
//! New content — what no earlier request sent — is never a miss, so the first request of a
//! conversation, and the directive that makes a fork differ from its siblings, have `miss: null`.
//! Two divergences are new content by design, not an edit of what was cached: a compaction
//! summary that replaces the history, and sibling forks that each keep only their own
//! `tool_use` (they part at the assistant message, so one fork cannot read another's turn).
//! Only the shared part before them can be missed. Nor are the few tokens a request sends after
//! its last breakpoint: a repeat of the request does not read them either.
//!
//! `tokens_missed` counts what could have been read. For `prefix_changed` when an earlier
//! request had cached beyond the changed block, that is what the deepest such entry held beyond
//! the divergence (up to this request's length), plus the shared part before it that was not
//! read — assuming the blocks after the changed one are the same, true of an edit in place (a
//! timestamp, a re-rendered section, a reordered schema). The earlier request compared with is
//! the one that cached deepest past the shared prefix, not merely the latest to send it: a
//! short sibling sent since must not hide the entry the change lost. The comparison holds
//! hashes, not the earlier request's blocks, so it cannot check the assumption; the cause,
//! position and path are exact either way.

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
    /// The shared prefix was sent and cached before, but its entry is gone (evicted).
    Cold,
    /// The shared prefix was sent before, but no marker of the request that sent it covered it,
    /// so it was never written (a fork reading the parent's reply that the parent's last request
    /// did not mark). `tokens_missed` is what a marker there would have saved.
    NotWritten,
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
            MissCause::NotWritten => "not_written",
            MissCause::PrefixChanged => "prefix_changed",
            MissCause::ModelChanged => "model_changed",
            MissCause::BelowMinimum => "below_minimum",
            MissCause::LookbackExceeded => "lookback_exceeded",
            MissCause::Expired => "expired",
            MissCause::NotYetVisible => "not_yet_visible",
            MissCause::NoBreakpoint => "no_breakpoint",
        }
    }

    /// The cause in a few plain words, for tables read by people rather than programs.
    pub fn plain(self) -> &'static str {
        match self {
            MissCause::Cold => "evicted",
            MissCause::NotWritten => "never written",
            MissCause::PrefixChanged => "prompt changed",
            MissCause::ModelChanged => "other model",
            MissCause::BelowMinimum => "under the minimum",
            MissCause::LookbackExceeded => "beyond the 20-block lookback",
            MissCause::Expired => "expired",
            MissCause::NotYetVisible => "not written yet",
            MissCause::NoBreakpoint => "no marker",
        }
    }
}

impl MissCause {
    /// For the causes that are a layout rather than a mistake in one request, what the layout
    /// is: reports print it once, under the requests that show it.
    pub fn layout_note(self) -> Option<&'static str> {
        match self {
            MissCause::NotWritten => Some(
                "the shared content was sent before, but no marker of that request covered it; \
                 a marker on its last block would have cached it",
            ),
            _ => None,
        }
    }
}

/// One line per distinct cause among `causes` that is a layout rather than a mistake
/// (`cause: note`), in cause order: what reports print once, under the requests.
pub fn layout_notes(causes: impl IntoIterator<Item = MissCause>) -> String {
    let causes: std::collections::BTreeSet<MissCause> = causes.into_iter().collect();
    causes
        .into_iter()
        .filter_map(|cause| cause.layout_note().map(|note| format!("{}: {note}\n", cause.name())))
        .collect()
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
    /// Where it read from, if anywhere.
    pub hit: Option<super::Hit>,
    pub closest: Closest,
    pub start: SimTime,
}

impl Inputs<'_> {
    /// What the request read, as far as a miss is concerned: a hit on a whole position counts
    /// as reaching its end even when the entry held less (tools added under the
    /// mid-conversation tool-changes beta: new content, never cached, so not a miss).
    fn read_tokens(&self) -> u64 {
        self.hit.map_or(0, |h| match self.whole_position(h) {
            true => self.prompt.tokens_at(h.position).max(h.tokens),
            false => h.tokens,
        })
    }

    /// The first position holding unread tokens (the hit's own, when it ended inside a run).
    fn first_unread(&self) -> u32 {
        self.hit.map_or(0, |h| {
            let inside_run = !self.whole_position(h) && self.prompt.tokens_at(h.position) > h.tokens;
            if inside_run { h.position } else { h.position + 1 }
        })
    }

    /// Whether the hit's entry is its position's whole prefix (not a block inside a run).
    fn whole_position(&self, hit: super::Hit) -> bool {
        self.prompt.position(hit.position).hash == hit.key
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

/// The most a request can read of what it shares with earlier ones: where the policy reads
/// only at breakpoints, nothing past its last one, whatever was sent before (the few tokens a
/// request sends after its last marker are read by no one, a repeat of it included).
fn reachable_tokens(inputs: &Inputs) -> u64 {
    let prompt = inputs.prompt;
    match prompt.breakpoints.iter().map(|bp| bp.tokens).max() {
        Some(tokens) if inputs.policy.rules().needs_breakpoints() => tokens,
        _ => prompt.total_tokens(),
    }
}

/// 2. A prefix shared with the closest earlier request that was not read.
fn unread_shared_prefix(inputs: &Inputs) -> Option<Miss> {
    let prompt = inputs.prompt;
    let read = inputs.read_tokens();
    let reachable = reachable_tokens(inputs);
    let shared = inputs.closest.shared_to.map_or(0, |p| prompt.tokens_at(p)).min(reachable);
    let diverges_at = inputs.closest.shared_to.map_or(0, |p| p + 1);
    let earlier: Option<&Summary> = inputs.closest.request.and_then(|r| inputs.history.summary(r));
    let diverges = (diverges_at as usize) < prompt.len();
    let lost = earlier
        .filter(|earlier| diverges && !new_content_at(prompt, diverges_at, earlier))
        .and_then(|earlier| lost_entry(prompt, diverges_at, earlier));
    if let Some((earlier, lost_tokens)) = lost {
        let missed = lost_tokens.min(reachable).max(shared).saturating_sub(read);
        return Some(changed_at(prompt, diverges_at, earlier, missed)).filter(|miss| miss.tokens_missed > 0);
    }
    if shared <= read {
        return None;
    }
    let needs_breakpoints = inputs.policy.rules().needs_breakpoints();
    let cause = if needs_breakpoints && prompt.breakpoints.is_empty() {
        MissCause::NoBreakpoint
    } else if needs_breakpoints && inputs.valid.is_empty() {
        MissCause::BelowMinimum
    } else if never_written(earlier, inputs.closest.shared_to) {
        MissCause::NotWritten
    } else {
        MissCause::Cold
    };
    Some(miss_at(prompt, cause, inputs.first_unread(), shared - read))
}

/// Whether the earlier request that sent the shared prefix (up to `shared_to`) left nothing
/// cached that far: its markers stopped short of the shared part, so it was never written.
fn never_written(earlier: Option<&Summary>, shared_to: Option<u32>) -> bool {
    match (earlier, shared_to) {
        (Some(earlier), Some(shared_to)) => {
            earlier.cached_to.is_none_or(|(position, _)| position < shared_to)
        }
        _ => false,
    }
}

/// The tokens of the earlier request's entry that the change at `diverges_at` put out of reach,
/// if it had cached there or beyond. A different block at the entry's own position is new
/// content (the entry covered a block this request does not have): only the shared part before
/// it is lost. A block beyond the divergence, or a rendered parameter that changed right before
/// the entry's block, loses the whole entry (up to this request's length: no request can read
/// more than it sends).
fn lost_entry<'s>(prompt: PromptRef, diverges_at: u32, earlier: &'s Summary) -> Option<(&'s Summary, u64)> {
    let (cached_position, cached_tokens) = earlier.cached_to?;
    if cached_position < diverges_at {
        return None;
    }
    let config_changed = prompt.salt_difference_before(diverges_at, &earlier.salts).is_some();
    let whole_entry = cached_position > diverges_at || config_changed;
    let lost = if whole_entry { cached_tokens.min(prompt.total_tokens()) } else { 0 };
    Some((earlier, lost))
}

/// Whether the request parts from `earlier` at `position` with content of its own by design
/// rather than an edit: a compaction summary that replaced the history, or sibling forks that
/// each keep their own `tool_use` (either side's own content begins there with its tool call).
/// Nothing past the shared part could have been read then.
fn new_content_at(prompt: PromptRef, position: u32, earlier: &Summary) -> bool {
    let in_messages = prompt.salt_difference_before(position, &earlier.salts).is_none()
        && prompt.position(position).slot.dimension() == Dimension::Messages;
    let own_tool_use = prompt.position(position).tool_use || earlier.own_tool_use_at == Some(position);
    in_messages && (is_compaction(prompt, position, earlier) || own_tool_use)
}

/// The miss of a request that edited what `earlier` had cached past `position`.
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

/// The history was replaced from its first message by something shorter than what the earlier
/// request had cached: a compaction summary, not an edit.
fn is_compaction(prompt: PromptRef, position: u32, earlier: &Summary) -> bool {
    let shorter = earlier.cached_to.is_some_and(|(_, tokens)| prompt.total_tokens() < tokens);
    position == prompt.first_message && shorter
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

/// A miss in one line, or `-`: `prefix_changed (messages) at messages[2].content[3]: 700 tokens`.
pub fn describe_miss(miss: Option<&Miss>) -> String {
    let Some(miss) = miss else { return "-".to_string() };
    let dimension = miss.dimension.map(|d| format!(" ({})", d.name())).unwrap_or_default();
    format!("{}{} at {}: {} tokens", miss.cause.name(), dimension, miss.path, miss.tokens_missed)
}
