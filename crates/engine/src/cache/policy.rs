//! What distinguishes one provider's prompt cache from another, behind one interface: which
//! breakpoints are worth writing, where a lookup may read from, what a request writes, how long
//! an entry lives and in what steps a read is counted. The rest — entries per scope, refreshes,
//! visibility, the history behind a miss's diagnosis — is the same for every policy and lives in
//! [`PrefixCache`](super::PrefixCache).

use super::Hit;
use crate::prompt::{Breakpoint, PromptRef, Ttl};

/// What a policy sees of one request.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a, 'p> {
    /// The model id as requested.
    pub model: &'p str,
    /// The rendered request.
    pub prompt: PromptRef<'p>,
    /// Its breakpoints the policy found cacheable ([`CachePolicy::cacheable`]).
    pub valid: &'a [Breakpoint],
    /// The model's minimum cacheable length, in tokens.
    pub min_tokens: u64,
    /// Positions each breakpoint checks, itself included.
    pub lookback: u32,
    /// The last position this request shares with an earlier request of its scope, if any.
    pub shared_to: Option<u32>,
    /// The TTL of writes the request did not mark.
    pub default_ttl: Ttl,
}

/// One provider's cache rules.
pub trait CachePolicy: Sync {
    /// The policy's name as the command line spells it.
    fn name(&self) -> &'static str;

    /// Whether caching needs breakpoints the request marks: a request without any reads and
    /// writes nothing, and one whose every breakpoint is below the minimum is `below_minimum`.
    fn needs_breakpoints(&self) -> bool;

    /// Whether `breakpoint` may be written and looked up, given the model's minimum cacheable
    /// length in tokens. By default, when it reaches the minimum.
    fn cacheable(&self, breakpoint: &Breakpoint, min_tokens: u64) -> bool {
        breakpoint.tokens >= min_tokens
    }

    /// The longest prefix this request may read. `readable` answers for one candidate (the
    /// entry at that position, if one is readable at the request's start). By default an
    /// automatic cache's: the longest readable position past the minimum.
    fn find(&self, request: &Request, readable: &mut dyn FnMut(Hit) -> Option<Hit>) -> Option<Hit> {
        positions_past_minimum(request, request.min_tokens).find_map(readable)
    }

    /// The entries the request writes, given that it read `read` tokens. By default an
    /// automatic cache's: every position past the minimum beyond what was read.
    fn writes(&self, request: &Request, read: u64) -> Vec<Breakpoint> {
        writes_past(request, read)
    }

    /// How long an entry `model` wrote with `ttl` lives after its write or its last read, in
    /// milliseconds. By default the TTL itself.
    fn lifetime_ms(&self, _model: &str, ttl: Ttl) -> u64 {
        ttl.ms()
    }

    /// Whether a read renews the entry's lifetime (a cached object with a fixed TTL is not).
    fn refreshed_by_reads(&self) -> bool {
        true
    }

    /// `model`'s reads are counted in whole steps of this many tokens (the rest of a matched
    /// prefix is billed as uncached input). By default 1: every token.
    fn read_step(&self, _model: &str) -> u64 {
        1
    }
}

/// Every position from the first past `min_tokens`, last first: the candidates of an automatic
/// prefix cache, which needs no marks.
pub fn positions_past_minimum<'a>(request: &'a Request, min_tokens: u64) -> impl Iterator<Item = Hit> + 'a {
    let prompt = request.prompt;
    (0..prompt.len() as u32)
        .rev()
        .map(move |p| Hit::at(p, prompt.position(p)))
        .filter(move |hit| hit.tokens >= min_tokens)
}

/// Every position past the request's minimum and beyond `read`, in order, at the default TTL:
/// what an automatic prefix cache writes.
pub fn writes_past(request: &Request, read: u64) -> Vec<Breakpoint> {
    let prompt = request.prompt;
    (0..prompt.len() as u32)
        .map(|index| Breakpoint::at(index, prompt.position(index), request.default_ttl))
        .filter(|bp| bp.tokens > read && bp.tokens >= request.min_tokens)
        .collect()
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

    /// Last breakpoint first, each checking its own prefix and then the positions before its
    /// own; the first hit is the longest.
    fn find(&self, request: &Request, readable: &mut dyn FnMut(Hit) -> Option<Hit>) -> Option<Hit> {
        breakpoint_lookup(request, readable)
    }

    fn writes(&self, request: &Request, read: u64) -> Vec<Breakpoint> {
        request.valid.iter().filter(|bp| bp.tokens > read).copied().collect()
    }
}

/// The longest readable entry at a breakpoint or within its lookback, last breakpoint first:
/// Anthropic's lookup, which Gemini's explicit objects share.
pub fn breakpoint_lookup(request: &Request, readable: &mut dyn FnMut(Hit) -> Option<Hit>) -> Option<Hit> {
    let (prompt, window) = (request.prompt, request.lookback.max(1));
    request.valid.iter().rev().find_map(|bp| {
        let own = Hit { position: bp.position, key: bp.key, tokens: bp.tokens };
        if let Some(hit) = readable(own) {
            return Some(hit);
        }
        let lowest = bp.position.saturating_sub(window - 1);
        (lowest..bp.position).rev().find_map(|p| readable(Hit::at(p, prompt.position(p))))
    })
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

    fn find(&self, request: &Request, readable: &mut dyn FnMut(Hit) -> Option<Hit>) -> Option<Hit> {
        positions_past_minimum(request, 0).find_map(readable)
    }

    /// Every position beyond what was read, at the longest TTL the request marked (else the
    /// default).
    fn writes(&self, request: &Request, read: u64) -> Vec<Breakpoint> {
        let prompt = request.prompt;
        let ttl = prompt.breakpoints.iter().map(|bp| bp.ttl).max().unwrap_or(request.default_ttl);
        (0..prompt.len() as u32)
            .map(|index| Breakpoint::at(index, prompt.position(index), ttl))
            .filter(|bp| bp.tokens > read)
            .collect()
    }
}
