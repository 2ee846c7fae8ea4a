//! DeepSeek's context cache on disk, as its KV-cache guide documents it for the V4 models: on
//! for every request, no parameter, no write premium, no storage fee. Each cached prefix is an
//! independent "cache prefix unit", and a request hits only a unit it **fully** matches. Units
//! are persisted at the end of each request's input, at a prefix two requests were found to
//! share ("`A+B` then `A+C` misses, after which `A` is persisted and `A+D` hits"), at the end of
//! the model's output, and at fixed intervals inside long inputs. Matching starts at token 0;
//! storage is in 64-token units and shorter content is not cached (the price table's
//! `min_cacheable_tokens` is 64).
//!
//! Modelled: the units at the end of a request's input and at the prefix it shares with the
//! closest earlier request, and the 64-token steps. Not modelled: the unit at the end of the
//! output (a forkcache request does not hold its reply's rendering, so the next turn of a chain
//! reads up to the previous request's input and pays its reply as a miss: fewer hits than the
//! real cache, by one reply per turn) and the fixed intervals (their length is not published).
//! Inferred: "once the cache is no longer in use, it will be automatically cleared, usually
//! within a few hours to a few days"; an entry is taken to be read while the idle gap is at most
//! 3 hours, the low end of "a few hours".

use super::CachePolicy;
use super::policy::Request;
use crate::prompt::{Breakpoint, Ttl};

/// Tokens per storage unit: reads are counted in whole units.
pub const UNIT_TOKENS: u64 = 64;

/// The assumed idle lifetime of a unit, in hours (an inference, see above).
pub const IDLE_LIFETIME_HOURS: u64 = 3;

/// The disk cache of whole prefix units.
pub struct DeepSeek;

impl CachePolicy for DeepSeek {
    fn name(&self) -> &'static str {
        "deepseek"
    }

    fn needs_breakpoints(&self) -> bool {
        false
    }

    // `find` is the automatic cache's: only units were written, so any readable entry is a
    // unit this request fully matches.

    /// The prefix shared with the closest earlier request, then the end of this request's input:
    /// each past the minimum and beyond what was read.
    fn writes(&self, request: &Request, read: u64) -> Vec<Breakpoint> {
        let prompt = request.prompt;
        let Some(last) = (prompt.len() as u32).checked_sub(1) else { return Vec::new() };
        let mut units: Vec<u32> = request.shared_to.filter(|&shared| shared < last).into_iter().collect();
        units.push(last);
        units
            .into_iter()
            .map(|index| Breakpoint::at(index, prompt.position(index), request.default_ttl))
            .filter(|unit| unit.tokens > read && unit.tokens >= request.min_tokens)
            .collect()
    }

    fn lifetime_ms(&self, _: &str, _: Ttl) -> u64 {
        IDLE_LIFETIME_HOURS * 60 * 60 * 1_000
    }

    fn read_step(&self, _: &str) -> u64 {
        UNIT_TOKENS
    }
}
