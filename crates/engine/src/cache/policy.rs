//! What distinguishes one provider's prompt cache from another, behind one interface: which
//! breakpoints are worth writing, where a lookup may read from, and what a request writes. The
//! rest — entries per scope, TTLs and refreshes, visibility, the history behind a miss's
//! diagnosis — is the same for every policy and lives in [`PrefixCache`](super::PrefixCache).

use super::{Hit, Policy};
use crate::prompt::{Breakpoint, PromptRef, Ttl};

/// One provider's cache rules.
pub trait CachePolicy: Sync {
    /// The policy's name as the command line spells it.
    fn name(&self) -> &'static str;

    /// Whether caching needs breakpoints the request marks: a request without any reads and
    /// writes nothing, and one whose every breakpoint is below the minimum is `below_minimum`.
    fn needs_breakpoints(&self) -> bool;

    /// Whether `breakpoint` may be written and looked up, given the model's minimum cacheable
    /// length in tokens.
    fn cacheable(&self, breakpoint: &Breakpoint, min_tokens: u64) -> bool;

    /// The longest prefix this request may read. `readable` answers for one candidate (the
    /// entry at that position, if one is readable at the request's start); `valid` are the
    /// request's cacheable breakpoints; `lookback` the positions each breakpoint checks.
    fn find(
        &self,
        prompt: PromptRef,
        valid: &[Breakpoint],
        lookback: u32,
        readable: &mut dyn FnMut(Hit) -> Option<Hit>,
    ) -> Option<Hit>;

    /// The entries the request writes, given that it read `read` tokens; `default_ttl` is the
    /// TTL of writes the request did not mark.
    fn writes(&self, prompt: PromptRef, valid: &[Breakpoint], read: u64, default_ttl: Ttl)
    -> Vec<Breakpoint>;
}

impl Policy {
    /// The rules this policy names.
    pub fn rules(self) -> &'static dyn CachePolicy {
        match self {
            Policy::Anthropic => &Anthropic,
            Policy::LongestPrefix => &LongestPrefix,
        }
    }
}

/// What Anthropic documents: writes only at breakpoints, each breakpoint checking its own prefix
/// and the positions before it within the lookback window, the model's minimum cacheable length.
pub struct Anthropic;

impl CachePolicy for Anthropic {
    fn name(&self) -> &'static str {
        "anthropic"
    }

    fn needs_breakpoints(&self) -> bool {
        true
    }

    fn cacheable(&self, breakpoint: &Breakpoint, min_tokens: u64) -> bool {
        breakpoint.tokens >= min_tokens
    }

    /// Last breakpoint first, each checking its own prefix and then the positions before its
    /// own; the first hit is the longest.
    fn find(
        &self,
        prompt: PromptRef,
        valid: &[Breakpoint],
        lookback: u32,
        readable: &mut dyn FnMut(Hit) -> Option<Hit>,
    ) -> Option<Hit> {
        let window = lookback.max(1);
        valid.iter().rev().find_map(|bp| {
            let own = Hit { position: bp.position, key: bp.key, tokens: bp.tokens };
            if let Some(hit) = readable(own) {
                return Some(hit);
            }
            let lowest = bp.position.saturating_sub(window - 1);
            (lowest..bp.position).rev().find_map(|p| readable(Hit::at(p, prompt.position(p))))
        })
    }

    fn writes(&self, _: PromptRef, valid: &[Breakpoint], read: u64, _: Ttl) -> Vec<Breakpoint> {
        valid.iter().filter(|bp| bp.tokens > read).copied().collect()
    }
}

/// The seeds' idealised cache (an inference engine's radix or block cache): every position is
/// written, the longest cached prefix is read, with no minimum and no lookback limit.
pub struct LongestPrefix;

impl CachePolicy for LongestPrefix {
    fn name(&self) -> &'static str {
        "longest-prefix"
    }

    fn needs_breakpoints(&self) -> bool {
        false
    }

    fn cacheable(&self, _: &Breakpoint, _: u64) -> bool {
        true
    }

    fn find(
        &self,
        prompt: PromptRef,
        _: &[Breakpoint],
        _: u32,
        readable: &mut dyn FnMut(Hit) -> Option<Hit>,
    ) -> Option<Hit> {
        (0..prompt.len() as u32).rev().find_map(|p| readable(Hit::at(p, prompt.position(p))))
    }

    /// Every position beyond what was read, at the longest TTL the request marked (else the
    /// default).
    fn writes(&self, prompt: PromptRef, _: &[Breakpoint], read: u64, default_ttl: Ttl) -> Vec<Breakpoint> {
        let ttl = prompt.breakpoints.iter().map(|bp| bp.ttl).max().unwrap_or(default_ttl);
        (0..prompt.len() as u32)
            .map(|index| Breakpoint::at(index, prompt.position(index), ttl))
            .filter(|bp| bp.tokens > read)
            .collect()
    }
}
