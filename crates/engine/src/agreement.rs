//! Real usage beside predicted usage: reading the API's `usage` object as recorded, and whether a
//! prediction agrees with it.
//!
//! Real Claude token counts differ from forkcache's estimate (`bytes4`) by 20–30%, so agreement
//! compares the *cached share* — tokens read ÷ total input tokens — not raw token counts: the
//! prediction agrees when its share is within 2 percentage points of the recorded share, or when
//! its read, rescaled by recorded total ÷ predicted total, is within 1,000 tokens of the recorded
//! read. Both tests are exact integer arithmetic.

use serde::Serialize;

use crate::billing::{RecordedUsage, Usage};

/// Shares may differ by this many hundredths (2 percentage points).
const SHARE_TOLERANCE_PER_100: u128 = 2;

/// A rescaled read may differ from the recorded read by this many tokens.
const READ_TOLERANCE_TOKENS: u128 = 1_000;

/// Reads a `usage` object from its JSON text as the API returned it; `None` when it is not an
/// object of counts.
pub fn read_recorded(raw: &str) -> Option<RecordedUsage> {
    recorded_of(serde_json::from_str(raw).ok()?)
}

/// [`read_recorded`] for a usage already parsed.
pub fn recorded_of(value: serde_json::Value) -> Option<RecordedUsage> {
    // Checked first: a usage is an object, and reading counts from anything else finds zeros.
    if !value.is_object() {
        return None;
    }
    RecordedUsage::from_value(value).ok()
}

/// How a prediction compares with the recorded usage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Agreement {
    /// Within tolerance (see the module docs).
    pub agrees: bool,
    /// Predicted read ÷ predicted total input, in millionths.
    pub predicted_share_ppm: u64,
    /// Recorded read ÷ recorded total input, in millionths.
    pub recorded_share_ppm: u64,
}

/// Compares a predicted usage with the recorded one.
pub fn agreement(predicted: &Usage, recorded: &Usage) -> Agreement {
    let (p_read, p_total) =
        (predicted.cache_read_input_tokens as u128, predicted.total_input_tokens() as u128);
    let (r_read, r_total) = (recorded.cache_read_input_tokens as u128, recorded.total_input_tokens() as u128);
    let agrees = match (p_total, r_total) {
        (0, 0) => true,
        (0, _) => r_read <= READ_TOLERANCE_TOKENS || r_read * 100 <= SHARE_TOLERANCE_PER_100 * r_total,
        (_, 0) => true,
        _ => {
            // |p_read/p_total − r_read/r_total| scaled by p_total·r_total.
            let gap = (p_read * r_total).abs_diff(r_read * p_total);
            gap * 100 <= SHARE_TOLERANCE_PER_100 * p_total * r_total || gap <= READ_TOLERANCE_TOKENS * p_total
        }
    };
    Agreement {
        agrees,
        predicted_share_ppm: share_ppm(p_read, p_total),
        recorded_share_ppm: share_ppm(r_read, r_total),
    }
}

fn share_ppm(read: u128, total: u128) -> u64 {
    (read * 1_000_000).checked_div(total).map_or(0, |ppm| ppm as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(read: u64, write: u64, uncached: u64) -> Usage {
        Usage::new(uncached, read, write, 0, 0)
    }

    #[test]
    fn shares_within_two_points_agree() {
        // Predicted 8,000 / 10,000 = 80%; recorded 10,300 / 13,000 = 79.23%: 0.77 points apart.
        assert!(agreement(&usage(8_000, 1_000, 1_000), &usage(10_300, 2_000, 700)).agrees);
        // Recorded 100,000 / 130,000 = 76.92%: 3.08 points apart, and the rescaled read
        // 80% × 130,000 = 104,000 is 4,000 tokens off.
        assert!(!agreement(&usage(8_000, 1_000, 1_000), &usage(100_000, 29_000, 1_000)).agrees);
    }

    #[test]
    fn small_prompts_agree_within_a_thousand_tokens() {
        // Predicted 0 of 3,000 read; recorded 900 of 4,000 (22.5 points apart), but the rescaled
        // read 0 is 900 tokens from 900.
        let agreement = agreement(&usage(0, 3_000, 0), &usage(900, 3_000, 100));
        assert!(agreement.agrees);
        assert_eq!((agreement.predicted_share_ppm, agreement.recorded_share_ppm), (0, 225_000));
        // Recorded 1,100 of 4,000: 1,100 tokens off and 27.5 points apart.
        assert!(!super::agreement(&usage(0, 3_000, 0), &usage(1_100, 2_800, 100)).agrees);
    }

    #[test]
    fn recorded_usage_is_an_object_of_counts() {
        let raw = r#"{"input_tokens":4,"cache_creation_input_tokens":1900,"cache_read_input_tokens":17403,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":1900},"output_tokens":9,"service_tier":"priority","inference_geo":"us"}"#;
        assert_eq!(read_recorded(raw).map(|r| r.usage.total_input_tokens()), Some(4 + 17_403 + 1_900));
        let old = r#"{"input_tokens":42,"cache_read_input_tokens":0,"cache_creation_input_tokens":41850,"output_tokens":210}"#;
        assert_eq!(read_recorded(old).map(|r| r.usage), Some(Usage::new(42, 0, 41_850, 0, 210)));
        assert_eq!(read_recorded("[1]"), None);
    }
}
