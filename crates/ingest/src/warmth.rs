//! The account model of warmth: what a chain can still read after it lost its own cache (a
//! compaction, an expiry past its TTL, a switch to another model).
//!
//! Every session of an account sends the same stable prefix first (Claude Code's system prompt
//! and tools), and the account's other traffic — other sessions, side calls the import never
//! sees — keeps it cached. Its size is what the chain's own requests showed where nothing of the
//! chain was cached yet: its first read, later reads after a reset or after a break an event
//! of the transcript explains (a tool load can grow the prefix for the rest of a session), per
//! model. When the import
//! saw a request of the same kind on the same model within the chain's TTL, the prefix is warm
//! for certain ([`Warmth::Seen`]); otherwise the chain's earlier read stands for the account's
//! unseen activity ([`Warmth::UnseenActivity`]), reported as its own class because it rests on
//! traffic nobody recorded. Without any earlier read on the model the chain starts
//! [`Warmth::Cold`].
//!
//! Only counts from *earlier* requests are used: a request's own read never sizes its prefix.

use std::collections::BTreeMap;

use serde::Serialize;

/// On what the prediction of a request's stable-prefix read rests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Warmth {
    /// Nothing outside the chain's own cache was assumed warm.
    #[default]
    Cold,
    /// A request seen in the import touched the prefix within the chain's TTL.
    Seen,
    /// The prefix is assumed warm from the chain's earlier read alone: the account's traffic
    /// the import does not hold.
    UnseenActivity,
}

impl Warmth {
    /// The class as output spells it.
    pub fn name(self) -> &'static str {
        match self {
            Warmth::Cold => "cold",
            Warmth::Seen => "seen",
            Warmth::UnseenActivity => "unseen_activity",
        }
    }
}

/// The stable prefix sizes a chain has shown, per model.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WarmPrefixes {
    by_model: BTreeMap<String, u64>,
}

impl WarmPrefixes {
    /// The prefix last shown on `model`.
    pub fn on(&self, model: &str) -> Option<u64> {
        self.by_model.get(model).copied()
    }

    /// Learns from a read taken where nothing of the chain was cached: a read of 0 shows no
    /// prefix and leaves what was known.
    pub fn learn(&mut self, model: &str, read: u64) {
        if read > 0 {
            self.by_model.insert(model.to_string(), read);
        }
    }
}

/// The class of a prediction that assumed a prefix of the account warm: seen when the import's
/// latest earlier request of the same kind on the same model started within `ttl_ms`.
pub fn classify(previous_start_ms: Option<i64>, start_ms: i64, ttl_ms: u64) -> Warmth {
    match previous_start_ms {
        Some(previous) if (start_ms - previous).max(0) as u64 <= ttl_ms => Warmth::Seen,
        _ => Warmth::UnseenActivity,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_is_learned_per_model_and_a_zero_read_teaches_nothing() {
        let mut prefixes = WarmPrefixes::default();
        prefixes.learn("opus", 18_528);
        prefixes.learn("opus", 0);
        prefixes.learn("sonnet", 9_000);
        assert_eq!(
            (prefixes.on("opus"), prefixes.on("sonnet"), prefixes.on("haiku")),
            (Some(18_528), Some(9_000), None)
        );
    }

    #[test]
    fn seen_within_the_ttl_else_unseen_activity() {
        // A 1-hour TTL is 3,600,000 ms: a request 3,600,000 ms earlier still touched the prefix.
        assert_eq!(classify(Some(0), 3_600_000, 3_600_000), Warmth::Seen);
        assert_eq!(classify(Some(0), 3_600_001, 3_600_000), Warmth::UnseenActivity);
        assert_eq!(classify(None, 10, 3_600_000), Warmth::UnseenActivity);
    }
}
