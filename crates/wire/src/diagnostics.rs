//! The API's cache-diagnostics object (beta `cache-diagnosis-2026-04-07`), as a response carries
//! it. What fills it is the engine's.

use serde::Serialize;

/// `diagnostics.cache_miss_reason.type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheMissType {
    /// The requests name different models (the cache is per model).
    ModelChanged,
    /// They part inside `system`.
    SystemChanged,
    /// They part inside `tools`.
    ToolsChanged,
    /// They part inside `messages`.
    MessagesChanged,
    /// No fingerprint is kept under `previous_message_id`.
    PreviousMessageNotFound,
    /// A prompt-affecting parameter changed (`thinking`, `tool_choice`, effort, …): the prefix
    /// is not comparable block by block.
    Unavailable,
}

impl CacheMissType {
    /// The type as the API spells it.
    pub fn name(self) -> &'static str {
        match self {
            CacheMissType::ModelChanged => "model_changed",
            CacheMissType::SystemChanged => "system_changed",
            CacheMissType::ToolsChanged => "tools_changed",
            CacheMissType::MessagesChanged => "messages_changed",
            CacheMissType::PreviousMessageNotFound => "previous_message_not_found",
            CacheMissType::Unavailable => "unavailable",
        }
    }
}

/// `diagnostics.cache_miss_reason`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct CacheMissReason {
    /// What changed.
    #[serde(rename = "type")]
    pub kind: CacheMissType,
    /// Tokens after the divergence point; only for the `*_changed` types (else `null`).
    pub cache_missed_input_tokens: Option<u64>,
}

impl CacheMissReason {
    /// A `*_changed` reason with the tokens after the divergence.
    pub fn changed(kind: CacheMissType, tokens: u64) -> CacheMissReason {
        CacheMissReason { kind, cache_missed_input_tokens: Some(tokens) }
    }

    /// A reason without a token count (`null`).
    pub fn without_tokens(kind: CacheMissType) -> CacheMissReason {
        CacheMissReason { kind, cache_missed_input_tokens: None }
    }
}

/// The `diagnostics` object of a response that asked for it: `null` when nothing diverged
/// (or on a first turn), else the reason. forkcache compares synchronously, so the API's
/// "still pending" state (`cache_miss_reason: null`) never occurs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Diagnostics {
    /// Why the prefix of the previous request could not be fully reused.
    pub cache_miss_reason: CacheMissReason,
}
