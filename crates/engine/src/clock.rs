//! Virtual time and the latency model.
//!
//! The library never reads a wall clock: every time is a [`SimTime`] handed in by the caller (a
//! trace line, the scenario engine, or the HTTP server's edge), and every duration the cache needs
//! (when a response begins, when it ends) comes from the deterministic [`LatencyModel`].

use serde::{Deserialize, Serialize};

/// A point on the virtual clock, in whole milliseconds since the start of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SimTime(pub u64);

impl SimTime {
    /// The start of a run.
    pub const ZERO: SimTime = SimTime(0);

    /// Milliseconds since the start of the run.
    pub fn ms(self) -> u64 {
        self.0
    }

    /// This time plus `ms` milliseconds (saturating: the clock never wraps).
    pub fn plus_ms(self, ms: u64) -> SimTime {
        SimTime(self.0.saturating_add(ms))
    }
}

impl std::fmt::Display for SimTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}ms", self.0)
    }
}

/// When an entry written by a request becomes readable by other requests.
///
/// The documented rule is "once the response begins" ([`Visibility::FirstToken`]); the other two
/// bound the parallel-fork race from either side.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Visibility {
    /// Readable from the instant the writing request starts (an optimistic cache).
    Start,
    /// Readable once the writer's response has begun: start + time to first token (default).
    #[default]
    FirstToken,
    /// Readable only once the writer's response has finished.
    Complete,
}

/// Deterministic response timing: how long until the first token, and until the last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatencyModel {
    /// Fixed time to first token, in milliseconds. Default 400.
    pub base_ms: u64,
    /// Extra time to first token per uncached input token (input − read), in microseconds.
    /// Default 20.
    pub per_uncached_token_us: u64,
    /// Time per output token once generation has begun, in microseconds. Default 20,000
    /// (50 tokens per second).
    pub per_output_token_us: u64,
}

impl Default for LatencyModel {
    fn default() -> Self {
        LatencyModel { base_ms: 400, per_uncached_token_us: 20, per_output_token_us: 20_000 }
    }
}

impl LatencyModel {
    /// Time to first token for a request that had to process `uncached_tokens` fresh tokens.
    pub fn ttft_ms(&self, uncached_tokens: u64) -> u64 {
        self.base_ms.saturating_add(us_to_ms_ceil(uncached_tokens, self.per_uncached_token_us))
    }

    /// Time from the first to the last output token.
    pub fn generation_ms(&self, output_tokens: u64) -> u64 {
        us_to_ms_ceil(output_tokens, self.per_output_token_us)
    }

    /// When a request started at `start` makes its entries visible under `visibility`.
    pub fn visible_at(
        &self,
        visibility: Visibility,
        start: SimTime,
        uncached_tokens: u64,
        output_tokens: u64,
    ) -> SimTime {
        match visibility {
            Visibility::Start => start,
            Visibility::FirstToken => start.plus_ms(self.ttft_ms(uncached_tokens)),
            Visibility::Complete => {
                start.plus_ms(self.ttft_ms(uncached_tokens)).plus_ms(self.generation_ms(output_tokens))
            }
        }
    }
}

fn us_to_ms_ceil(count: u64, us_each: u64) -> u64 {
    count.saturating_mul(us_each).div_ceil(1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_ttft_is_400ms_plus_20us_per_uncached_token() {
        let model = LatencyModel::default();
        // 100,000 uncached tokens × 20 µs = 2,000 ms, plus the 400 ms base.
        assert_eq!(model.ttft_ms(100_000), 2_400);
        // 1 token × 20 µs rounds up to a whole millisecond.
        assert_eq!(model.ttft_ms(1), 401);
        assert_eq!(model.ttft_ms(0), 400);
    }

    #[test]
    fn visibility_modes_order_start_first_token_complete() {
        let model = LatencyModel::default();
        let t0 = SimTime(1_000);
        assert_eq!(model.visible_at(Visibility::Start, t0, 50_000, 100), SimTime(1_000));
        // 400 + 50,000 × 0.02 = 1,400 ms after the start.
        assert_eq!(model.visible_at(Visibility::FirstToken, t0, 50_000, 100), SimTime(2_400));
        // plus 100 output tokens × 20 ms = 2,000 ms of generation.
        assert_eq!(model.visible_at(Visibility::Complete, t0, 50_000, 100), SimTime(4_400));
    }
}
