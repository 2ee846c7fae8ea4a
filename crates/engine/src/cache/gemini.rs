//! Gemini's two caches, as the Gemini API's caching page documents them.
//!
//! **Implicit**: on by default from
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
//!
//! **Explicit**: a cached object (`cachedContents`) holds a prompt prefix for one model; it is
//! immutable but for its TTL (default 1 hour, not renewed by use), and a request names one object
//! and sends the rest. Creating it bills its tokens at the input rate, plus storage per million
//! tokens per hour for the TTL; a request that uses it pays its tokens at the cached rate.
//! Documented: all of that. The strategy is a builder's, so it is stated here: a marker asks
//! for an object of the prefix up to it, with the marker's TTL; a request uses the longest live
//! object at one of its markers or within the lookback before one; when none is live it creates
//! one at its last marker, billed whole (objects do not build on one another). An object is not
//! extended as the conversation grows: what lies past it is paid at the input rate until it
//! expires. Creation and storage are priced as the write: the table's write rate is input +
//! cached + storage for the TTL (`fixtures/pricing-gemini-explicit.json`), since the creating
//! request uses the object at once.

use super::policy::{Request, breakpoint_lookup};
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

    fn lifetime_ms(&self, _: &str, _: Ttl) -> u64 {
        IDLE_LIFETIME_MINUTES * 60 * 1_000
    }
}

/// Explicit cached objects, created at markers.
pub struct GeminiExplicit;

impl CachePolicy for GeminiExplicit {
    fn name(&self) -> &'static str {
        "gemini-explicit"
    }

    fn needs_breakpoints(&self) -> bool {
        true
    }

    fn find(&self, request: &Request, readable: &mut dyn FnMut(Hit) -> Option<Hit>) -> Option<Hit> {
        breakpoint_lookup(request, readable)
    }

    /// Nothing when an object was used; else one object, the whole prefix up to the last marker.
    fn writes(&self, request: &Request, read: u64) -> Vec<Breakpoint> {
        match request.valid.last() {
            Some(&last) if read == 0 => vec![last],
            _ => Vec::new(),
        }
    }

    fn refreshed_by_reads(&self) -> bool {
        false
    }
}
