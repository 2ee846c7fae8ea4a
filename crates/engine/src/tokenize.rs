//! Token counting.
//!
//! Claude's tokenizer is not public, so every count forkcache reports is an estimate. A tokenizer
//! counts one block at a time, given the block's compact JSON (keys in the order sent,
//! `cache_control` removed, string content expanded to one text block).

use serde::{Deserialize, Serialize};

/// Counts the tokens of one block.
pub trait Tokenizer: Send + Sync {
    /// The tokenizer's name as the command line spells it.
    fn name(&self) -> &'static str;
    /// Tokens in a block whose compact JSON is `compact_json`.
    fn count(&self, compact_json: &[u8]) -> u64;
}

/// `ceil(bytes / 4)`: the default estimate.
#[derive(Clone, Copy, Debug, Default)]
pub struct Bytes4;

impl Tokenizer for Bytes4 {
    fn name(&self) -> &'static str {
        "bytes4"
    }

    fn count(&self, compact_json: &[u8]) -> u64 {
        (compact_json.len() as u64).div_ceil(4)
    }
}

/// OpenAI's o200k vocabulary (bundled with `tiktoken-rs`, no network): a closer estimate for
/// natural-language text than bytes/4, still not Claude's tokenizer.
#[cfg(feature = "o200k")]
pub struct O200k {
    bpe: tiktoken_rs::CoreBPE,
}

#[cfg(feature = "o200k")]
impl O200k {
    /// Loads the bundled vocabulary.
    pub fn new() -> O200k {
        O200k { bpe: tiktoken_rs::o200k_base().expect("the bundled o200k vocabulary loads") }
    }
}

#[cfg(feature = "o200k")]
impl Default for O200k {
    fn default() -> Self {
        O200k::new()
    }
}

#[cfg(feature = "o200k")]
impl Tokenizer for O200k {
    fn name(&self) -> &'static str {
        "o200k"
    }

    fn count(&self, compact_json: &[u8]) -> u64 {
        let text = String::from_utf8_lossy(compact_json);
        self.bpe.encode_ordinary(&text).len() as u64
    }
}

/// Which tokenizer a run uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TokenizerKind {
    /// [`Bytes4`] (default).
    #[default]
    Bytes4,
    /// OpenAI's o200k vocabulary (needs the `o200k` cargo feature).
    O200k,
}

/// A tokenizer that was asked for but is not compiled in.
#[derive(Debug, thiserror::Error)]
#[error("tokenizer {0:?} is not built into this binary; rebuild with `cargo build --features o200k`")]
pub struct TokenizerUnavailable(pub &'static str);

impl TokenizerKind {
    /// The tokenizer's name as the command line spells it.
    pub fn name(self) -> &'static str {
        match self {
            TokenizerKind::Bytes4 => "bytes4",
            TokenizerKind::O200k => "o200k",
        }
    }

    /// Builds the tokenizer.
    pub fn build(self) -> Result<Box<dyn Tokenizer>, TokenizerUnavailable> {
        match self {
            TokenizerKind::Bytes4 => Ok(Box::new(Bytes4)),
            #[cfg(feature = "o200k")]
            TokenizerKind::O200k => Ok(Box::new(O200k::new())),
            #[cfg(not(feature = "o200k"))]
            TokenizerKind::O200k => Err(TokenizerUnavailable("o200k")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes4_rounds_up() {
        assert_eq!(Bytes4.count(b""), 0);
        assert_eq!(Bytes4.count(b"abcd"), 1);
        assert_eq!(Bytes4.count(b"abcde"), 2);
        // {"type":"text","text":"hello"} is 30 bytes → 8 tokens.
        assert_eq!(Bytes4.count(br#"{"type":"text","text":"hello"}"#), 8);
    }

    #[cfg(feature = "o200k")]
    #[test]
    fn o200k_counts_words() {
        let tokens = O200k::new().count(b"hello world");
        assert_eq!(tokens, 2);
    }
}
