//! OpenAI's automatic prompt cache, as its prompt-caching guide documents it: the structural
//! rules (any message end past the minimum is an implicit breakpoint; the longest cached one is
//! read) behind [`CachePolicy`], and the rules that depend on the model generation and the
//! request's settings: the 128-token read granularity, retention, the write premium.
//!
//! Documented (guide, late-2026 copy): minimum 1,024 tokens; `cached_tokens` rounded down to a
//! multiple of 128 through GPT-5.5; no write premium through GPT-5.5; from GPT-5.6 writes at
//! 1.25x input, reads at 0.1x, a minimum lifetime of 30 minutes refreshed by each reuse;
//! `prompt_cache_retention` `in_memory` ("around 5 to 10 minutes of inactivity, up to one
//! hour") or `24h` ("around 30 minutes", "up to 24 hours"), `24h` the default where a model
//! offers both (organizations without zero data retention), the only value on GPT-5.5.
//! Inferred (no page states a deterministic lifetime): an entry is readable while the idle gap
//! is at most the *typical* figure the guide gives (10 minutes `in_memory`, 30 minutes `24h`
//! and GPT-5.6+).

use super::CachePolicy;
use crate::prompt::Ttl;

/// The minimum cacheable prefix, in tokens ("the long-standing public figure").
pub const MIN_CACHEABLE_TOKENS: u64 = 1_024;

/// Cached counts are reported in steps of this many tokens.
pub const READ_STEP_TOKENS: u64 = 128;

/// The automatic prefix cache: no marks needed, every message end past the minimum an implicit
/// breakpoint, the longest cached one read, every new one written; entries live for the idle
/// limit of the model's default retention. From GPT-5.6 the implicit breakpoint is the end of
/// the latest eligible message and lookups walk back over earlier message endings: in agent
/// traffic (each request ends in a user turn, and its predecessors' ends were written) that
/// reads and writes the same tokens, and the read is exact rather than in 128-token steps.
pub struct OpenAi;

impl CachePolicy for OpenAi {
    fn name(&self) -> &'static str {
        "openai"
    }

    fn needs_breakpoints(&self) -> bool {
        false
    }

    fn lifetime_ms(&self, model: &str, _: Ttl) -> u64 {
        Retention::default_for(model).idle_limit_seconds() * 1_000
    }

    fn read_step(&self, model: &str) -> u64 {
        match Generation::of(model) {
            Generation::Implicit => READ_STEP_TOKENS,
            Generation::Breakpoints => 1,
        }
    }
}

/// Which of OpenAI's two cache disciplines a model follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Generation {
    /// Through GPT-5.5: implicit breakpoints only, free writes, `prompt_cache_retention`.
    Implicit,
    /// GPT-5.6 and later: breakpoint-exact matching, 1.25x writes, a 30-minute minimum lifetime.
    Breakpoints,
}

impl Generation {
    /// The generation of a model slug: `gpt-5.6…`, `gpt-6…` and later are [`Generation::Breakpoints`].
    pub fn of(model: &str) -> Generation {
        match gpt_version(model) {
            Some((major, minor)) if (major, minor) >= (5, 6) => Generation::Breakpoints,
            _ => Generation::Implicit,
        }
    }

    /// A cache write's price relative to uncached input, in thousandths.
    pub fn write_permille(self) -> u64 {
        match self {
            Generation::Implicit => 1_000,
            Generation::Breakpoints => 1_250,
        }
    }
}

/// `prompt_cache_retention` (and, from GPT-5.6, the `ttl: "30m"` floor).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Retention {
    /// `in_memory`: around 5 to 10 minutes of inactivity.
    InMemory,
    /// `24h`: around 30 minutes typical, up to 24 hours; GPT-5.6's 30-minute floor behaves alike.
    Extended,
}

/// Models the guide lists as accepting `24h` (through GPT-5.5).
const EXTENDED_RETENTION_MODELS: &[&str] = &[
    "gpt-5.5",
    "gpt-5.5-pro",
    "gpt-5.4",
    "gpt-5.2",
    "gpt-5.1-codex-max",
    "gpt-5.1",
    "gpt-5.1-codex",
    "gpt-5.1-codex-mini",
    "gpt-5.1-chat-latest",
    "gpt-5",
    "gpt-5-codex",
    "gpt-4.1",
];

impl Retention {
    /// What a request that names no retention gets: `24h` where the model offers it (the
    /// default for organizations without zero data retention; the only value on GPT-5.5), the
    /// 30-minute floor from GPT-5.6, else `in_memory`.
    pub fn default_for(model: &str) -> Retention {
        if Generation::of(model) == Generation::Breakpoints || Retention::offers_extended(model) {
            Retention::Extended
        } else {
            Retention::InMemory
        }
    }

    /// Whether the model accepts `24h` (or has the 30-minute floor).
    pub fn offers_extended(model: &str) -> bool {
        EXTENDED_RETENTION_MODELS.contains(&model) || Generation::of(model) == Generation::Breakpoints
    }

    /// The longest idle gap, in seconds, after which an entry is still read: the typical figure
    /// the guide gives (an inference: the guide promises ranges, not a deterministic lifetime).
    pub fn idle_limit_seconds(self) -> u64 {
        match self {
            Retention::InMemory => 10 * 60,
            Retention::Extended => 30 * 60,
        }
    }

    /// The name the API spells.
    pub fn name(self) -> &'static str {
        match self {
            Retention::InMemory => "in_memory",
            Retention::Extended => "24h",
        }
    }
}

/// What the API reports as read when `matched` prompt tokens are cached: nothing below the
/// minimum, else rounded down to a multiple of 128.
pub fn reported_read(matched: u64) -> u64 {
    if matched < MIN_CACHEABLE_TOKENS {
        return 0;
    }
    matched / READ_STEP_TOKENS * READ_STEP_TOKENS
}

/// Above this many input tokens the whole request pays 2x input, cached and write rates and
/// 1.5x output (pricing page, gpt-5.4 and later).
pub const LONG_CONTEXT_TOKENS: u64 = 272_000;

/// Whether the long-context rates apply to a model at all (gpt-5.4 and later).
pub fn has_long_context_rates(model: &str) -> bool {
    gpt_version(model).is_some_and(|version| version >= (5, 4))
}

/// `(major, minor)` of a `gpt-M[.N]…` slug; `None` for other names (o3, custom ids).
fn gpt_version(model: &str) -> Option<(u32, u32)> {
    let rest = model.strip_prefix("gpt-")?;
    let end = rest.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(rest.len());
    let mut parts = rest[..end].split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next().filter(|part| !part.is_empty()).map_or(Some(0), |part| part.parse().ok())?;
    Some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_follow_the_minimum_and_the_128_token_steps() {
        // Below 1,024 nothing is cached; the guide's `cached_tokens` are multiples of 128.
        assert_eq!(reported_read(1_023), 0);
        assert_eq!(reported_read(1_024), 1_024); // 8 x 128
        // 1,500 = 11 x 128 + 92 -> 1,408.
        assert_eq!(reported_read(1_500), 1_408);
        // FORMAT.md's total 23,453,568 = 183,231 x 128 stays as it is.
        assert_eq!(reported_read(23_453_568), 23_453_568);
    }

    #[test]
    fn generations_split_at_gpt_5_6() {
        assert_eq!(Generation::of("gpt-5.5"), Generation::Implicit);
        assert_eq!(Generation::of("gpt-5.3-codex-spark"), Generation::Implicit);
        assert_eq!(Generation::of("gpt-4.1"), Generation::Implicit);
        assert_eq!(Generation::of("o3"), Generation::Implicit);
        assert_eq!(Generation::of("gpt-5.6-terra"), Generation::Breakpoints);
        assert_eq!(Generation::of("gpt-6.1-terra"), Generation::Breakpoints);
        assert_eq!(Generation::of("gpt-6"), Generation::Breakpoints);
    }

    #[test]
    fn the_guides_worked_example_one_write_and_one_reuse_cost_1_35x() {
        // GPT-5.6: a write at 1.25x then a full reuse at 0.1x = 1.35x the uncached cost of one
        // request, against 2x for two uncached requests.
        let write = Generation::Breakpoints.write_permille();
        let read = 100; // 0.1x in thousandths
        assert_eq!(write + read, 1_350);
        assert_eq!(Generation::Implicit.write_permille(), 1_000);
    }

    #[test]
    fn retention_defaults_follow_the_guides_model_list() {
        assert_eq!(Retention::default_for("gpt-5.5"), Retention::Extended);
        assert_eq!(Retention::default_for("gpt-5.4"), Retention::Extended);
        // Not in the `24h` list: in_memory.
        assert_eq!(Retention::default_for("gpt-5.3-codex-spark"), Retention::InMemory);
        assert_eq!(Retention::default_for("gpt-5.6-luna"), Retention::Extended);
        assert_eq!(Retention::InMemory.idle_limit_seconds(), 600);
        assert_eq!(Retention::Extended.idle_limit_seconds(), 1_800);
    }
}
