//! The API's `usage` object and the request settings it reports.

use serde::{Deserialize, Serialize};

/// `speed`: fast mode bills at its own rates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Speed {
    /// The default.
    #[default]
    Standard,
    /// `speed: "fast"`.
    Fast,
}

/// `inference_geo`: where the request may be served.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InferenceGeo {
    /// Anywhere (the default).
    #[default]
    Global,
    /// US only: a premium on the models that offer it.
    Us,
}

/// Always "standard": the mock has one service tier.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StandardTier;

impl Serialize for StandardTier {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str("standard")
    }
}

impl<'de> Deserialize<'de> for StandardTier {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(deserializer)?;
        Ok(StandardTier)
    }
}

/// `usage.cache_creation`: writes split by TTL.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheCreation {
    /// Tokens written with the 5-minute TTL.
    pub ephemeral_5m_input_tokens: u64,
    /// Tokens written with the 1-hour TTL.
    pub ephemeral_1h_input_tokens: u64,
}

/// The API's `usage` object, field for field.
///
/// `input_tokens` counts only tokens neither read from nor written to the cache; the total input
/// is the sum of the three input fields. `speed` and `inference_geo` appear when the request set
/// them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Uncached input: the tail after the last cache breakpoint.
    pub input_tokens: u64,
    /// Tokens written to the cache (= 5m + 1h).
    pub cache_creation_input_tokens: u64,
    /// Tokens read from the cache.
    pub cache_read_input_tokens: u64,
    /// Writes split by TTL.
    pub cache_creation: CacheCreation,
    /// Output tokens.
    pub output_tokens: u64,
    /// Always "standard".
    #[serde(default)]
    pub service_tier: StandardTier,
    /// The request's `speed`, when it named one.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "lenient")]
    pub speed: Option<Speed>,
    /// The request's `inference_geo`, when it named one.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "lenient")]
    pub inference_geo: Option<InferenceGeo>,
}

/// A value the API may spell in ways forkcache does not model (`"not_available"`) reads as absent.
fn lenient<'de, D: serde::Deserializer<'de>, T: serde::de::DeserializeOwned>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    let value = serde_json::Value::deserialize(deserializer)?;
    Ok(serde_json::from_value(value).ok())
}

impl Usage {
    /// Builds a usage object from its parts, keeping `creation = 5m + 1h` true by construction.
    pub fn new(uncached: u64, read: u64, write_5m: u64, write_1h: u64, output: u64) -> Usage {
        Usage {
            input_tokens: uncached,
            cache_creation_input_tokens: write_5m + write_1h,
            cache_read_input_tokens: read,
            cache_creation: CacheCreation {
                ephemeral_5m_input_tokens: write_5m,
                ephemeral_1h_input_tokens: write_1h,
            },
            output_tokens: output,
            ..Usage::default()
        }
    }

    /// read + creation + uncached.
    pub fn total_input_tokens(&self) -> u64 {
        self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens
    }

    /// Adds another usage into this one (for totals; `speed` and `inference_geo` are per
    /// request and are not summed).
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.cache_creation_input_tokens += other.cache_creation_input_tokens;
        self.cache_read_input_tokens += other.cache_read_input_tokens;
        self.cache_creation.ephemeral_5m_input_tokens += other.cache_creation.ephemeral_5m_input_tokens;
        self.cache_creation.ephemeral_1h_input_tokens += other.cache_creation.ephemeral_1h_input_tokens;
        self.output_tokens += other.output_tokens;
    }
}
