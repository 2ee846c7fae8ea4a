//! Blocks serialized once, shared by every request that carries them.
//!
//! An agent resends its whole history on every request, and every fork resends the parent's. A
//! block is therefore turned into compact JSON exactly once, and requests hold `Arc`s to it; the
//! only per-request bytes are the few marked copies (a block with `cache_control` appended),
//! which are built lazily and kept with the block.

use std::sync::{Arc, OnceLock};

use serde_json::value::RawValue;
use serde_json::{Value, json};

use forkcache_engine::prompt::{DECLARED_TOKENS_KEY, Ttl};
use forkcache_wire::{RawJson, Role};

/// What a block is, as the agent runtime cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockKind {
    /// A `text` block.
    Text,
    /// A `tool_use` block.
    ToolUse,
    /// A `tool_result` block.
    ToolResult,
    /// A tool definition.
    Tool,
    /// Anything else, kept as given.
    Other,
}

/// One content block, system block or tool definition, serialized once.
#[derive(Debug)]
pub struct Block {
    raw: Box<RawValue>,
    marked: [OnceLock<Box<RawValue>>; 2],
    /// What it is.
    pub kind: BlockKind,
    /// Its size: declared (`forkcache_tokens`), or estimated as ⌈bytes ÷ 4⌉.
    pub tokens: u64,
    /// For a full `tool_result` the content-replacement budget may stub out: the stub.
    pub stub: Option<BlockRef>,
}

/// A shared block.
pub type BlockRef = Arc<Block>;

impl Block {
    /// A block from a JSON object (compact, key order kept). `cache_control` must not be in it:
    /// requests decide where their markers go.
    #[allow(clippy::expect_used)] // the agent serializes its own JSON values, which always form valid JSON
    pub fn from_value(value: &Value) -> BlockRef {
        // Serialized straight into its raw form: the bytes are serde_json's own, so they need no
        // second pass to check them.
        let raw = serde_json::value::to_raw_value(value).expect("a JSON value serializes");
        let declared = value.get(DECLARED_TOKENS_KEY).and_then(Value::as_u64);
        Block::from_raw(raw, kind_of(value), declared)
    }

    /// A text block; `tokens` declares its size instead of counting it. The same bytes as
    /// [`Block::from_value`] of `{"type":"text","text":…}` with the declared size appended, built
    /// without a JSON tree (sweeps build thousands per cell).
    #[allow(clippy::expect_used)] // a struct of strings and an integer always serializes
    pub fn text(text: &str, tokens: Option<u64>) -> BlockRef {
        #[derive(serde::Serialize)]
        struct TextBlock<'a> {
            #[serde(rename = "type")]
            kind: &'static str,
            text: &'a str,
            #[serde(rename = "forkcache_tokens", skip_serializing_if = "Option::is_none")]
            tokens: Option<u64>,
        }
        let block = TextBlock { kind: "text", text, tokens };
        let raw = serde_json::value::to_raw_value(&block).expect("a text block serializes");
        Block::from_raw(raw, BlockKind::Text, tokens)
    }

    fn from_raw(raw: Box<RawValue>, kind: BlockKind, declared: Option<u64>) -> BlockRef {
        let tokens = declared.unwrap_or_else(|| (raw.get().len() as u64).div_ceil(4));
        Arc::new(Block { raw, marked: Default::default(), kind, tokens, stub: None })
    }

    /// The same block with a stub the content-replacement budget may use instead.
    pub fn with_stub(block: BlockRef, stub: BlockRef) -> BlockRef {
        let block = Arc::try_unwrap(block).unwrap_or_else(|shared| shared.duplicate());
        Arc::new(Block { stub: Some(stub), ..block })
    }

    fn duplicate(&self) -> Block {
        Block {
            raw: self.raw.clone(),
            marked: Default::default(),
            kind: self.kind,
            tokens: self.tokens,
            stub: self.stub.clone(),
        }
    }

    /// The block's JSON, without a marker.
    pub fn json(&self) -> &str {
        self.raw.get()
    }

    /// The block as sent: with `cache_control` appended when `marker` is set.
    pub fn raw(&self, marker: Option<Ttl>) -> RawJson<'_> {
        let raw: &RawValue = match marker {
            None => &self.raw,
            Some(ttl) => {
                let slot = &self.marked[usize::from(ttl == Ttl::OneHour)];
                slot.get_or_init(|| marked_copy(self.raw.get(), ttl))
            }
        };
        raw.into()
    }

    /// Whether its text contains `needle` (a cheap byte search over the serialized block).
    pub fn contains(&self, needle: &str) -> bool {
        self.raw.get().contains(needle)
    }
}

/// Adds `forkcache_tokens` to a block when a size is declared.
pub fn with_tokens(mut block: Value, tokens: Option<u64>) -> Value {
    if let Some(tokens) = tokens {
        block[DECLARED_TOKENS_KEY] = json!(tokens);
    }
    block
}

fn kind_of(value: &Value) -> BlockKind {
    match value.get("type").and_then(Value::as_str) {
        Some("text") => BlockKind::Text,
        Some("tool_use") => BlockKind::ToolUse,
        Some("tool_result") => BlockKind::ToolResult,
        _ if value.get("input_schema").is_some() => BlockKind::Tool,
        _ => BlockKind::Other,
    }
}

/// `{…}` → `{…,"cache_control":{"type":"ephemeral"}}`.
#[allow(clippy::expect_used)] // the agent marks blocks it serialized itself: always one JSON object
fn marked_copy(raw: &str, ttl: Ttl) -> Box<RawValue> {
    let marker = match ttl {
        Ttl::FiveMinutes => r#""cache_control":{"type":"ephemeral"}"#,
        Ttl::OneHour => r#""cache_control":{"type":"ephemeral","ttl":"1h"}"#,
    };
    let body = raw.strip_suffix('}').expect("a block is a JSON object");
    let separator = if body.trim_end().ends_with('{') { "" } else { "," };
    RawValue::from_string(format!("{body}{separator}{marker}}}")).expect("a marked object is valid JSON")
}

/// One message: a role and its blocks.
#[derive(Clone, Debug)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Its content blocks.
    pub blocks: Vec<BlockRef>,
}

impl Message {
    /// A user message.
    pub fn user(blocks: Vec<BlockRef>) -> Message {
        Message { role: Role::User, blocks }
    }

    /// An assistant message.
    pub fn assistant(blocks: Vec<BlockRef>) -> Message {
        Message { role: Role::Assistant, blocks }
    }

    /// Declared or estimated tokens of its blocks.
    pub fn tokens(&self) -> u64 {
        self.blocks.iter().map(|b| b.tokens).sum()
    }
}

/// The text of a text block (`None` for any other block).
pub fn block_text(block: &BlockRef) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(block.json()).ok()?;
    value.get("text").and_then(serde_json::Value::as_str).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marked_copy_appends_the_marker_and_keeps_the_rest() {
        let block = Block::text("hi", Some(7));
        assert_eq!(block.json(), r#"{"type":"text","text":"hi","forkcache_tokens":7}"#);
        assert_eq!(
            block.raw(Some(Ttl::FiveMinutes)).get(),
            r#"{"type":"text","text":"hi","forkcache_tokens":7,"cache_control":{"type":"ephemeral"}}"#
        );
        assert!(block.raw(Some(Ttl::OneHour)).get().ends_with(r#""ttl":"1h"}}"#));
        assert_eq!(block.tokens, 7);
    }

    #[test]
    fn undeclared_size_is_a_bytes_over_four_estimate() {
        // {"type":"text","text":"abcd"} is 29 bytes → ⌈29 / 4⌉ = 8.
        assert_eq!(Block::text("abcd", None).tokens, 8);
    }

    #[test]
    fn a_text_block_has_the_bytes_of_its_json_value() {
        // Quotes, a newline, a control character and non-ASCII text, with and without a size.
        for text in ["plain", "say \"hi\"\nthen \u{1} go", "naïve — ok", ""] {
            for tokens in [None, Some(12)] {
                let value = with_tokens(json!({"type": "text", "text": text}), tokens);
                assert_eq!(Block::text(text, tokens).json(), Block::from_value(&value).json());
            }
        }
        assert_eq!(DECLARED_TOKENS_KEY, "forkcache_tokens", "the name TextBlock serializes");
    }
}
