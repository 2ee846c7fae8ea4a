//! Gemini's implicit cache, as the Gemini API's caching page documents it: on by default from
//! Gemini 2.5, keyed on the prompt prefix, a minimum per model (4,096 tokens on Gemini 3.x and
//! 3.1 Pro, 2,048 on 2.5: the price table's `min_cacheable_tokens`), reads at the cached-input
//! rate, no write premium and no storage charge (Vertex's overview says so; the price rows
//! carry it).
//!
//! Not published, so inferred and named here: the granularity (every position past the minimum
//! may be read, as in OpenAI's cache) and the lifetime. Vertex says entries expire within 24
//! hours of creation, "most sooner", with "no cost saving guarantee"; an entry is taken to be
//! read while the idle gap is at most 5 minutes, the shortest lifetime any provider documents
//! for an in-memory prefix cache (OpenAI `in_memory`: "around 5 to 10 minutes").

use super::policy::{Request, positions_past_minimum, writes_past};
use super::{CachePolicy, Hit};
use crate::prompt::{Breakpoint, Ttl};

/// The assumed idle lifetime of an implicit entry, in minutes (an inference, see above).
pub const IDLE_LIFETIME_MINUTES: u64 = 5;

/// The implicit prefix cache: no marks, the longest cached prefix past the minimum read, every
/// new position past it written at the input rate.
pub struct GeminiImplicit;

impl CachePolicy for GeminiImplicit {
    fn name(&self) -> &'static str {
        "gemini-implicit"
    }

    fn needs_breakpoints(&self) -> bool {
        false
    }

    fn cacheable(&self, breakpoint: &Breakpoint, min_tokens: u64) -> bool {
        breakpoint.tokens >= min_tokens
    }

    fn find(&self, request: &Request, readable: &mut dyn FnMut(Hit) -> Option<Hit>) -> Option<Hit> {
        positions_past_minimum(request, request.min_tokens).find_map(readable)
    }

    fn writes(&self, request: &Request, read: u64) -> Vec<Breakpoint> {
        writes_past(request, read)
    }

    fn lifetime_ms(&self, _: &str, _: Ttl) -> u64 {
        IDLE_LIFETIME_MINUTES * 60 * 1_000
    }
}
