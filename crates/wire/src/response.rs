//! What the endpoint answers: the message object, and the reply a caller scripts into it.

use serde::Serialize;
use serde_json::Value;

use crate::{Diagnostics, Usage};

/// Why generation stopped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished its turn.
    #[default]
    EndTurn,
    /// The model asked for tools.
    ToolUse,
    /// `max_tokens` was reached (or was 0: a cache pre-warm).
    MaxTokens,
    /// A stop sequence matched.
    StopSequence,
}

/// A block of the answer, before the endpoint assigns ids.
#[derive(Clone, Debug, PartialEq)]
pub enum ReplyContent {
    /// Text.
    Text(String),
    /// A tool call; the endpoint gives it a deterministic `toolu_…` id.
    ToolUse {
        /// Tool name.
        name: String,
        /// Tool input (key order kept).
        input: Value,
    },
}

/// The answer a caller wants for one request.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reply {
    /// The content blocks.
    pub content: Vec<ReplyContent>,
    /// Stop reason; by default `tool_use` when a tool is called, else `end_turn`.
    pub stop_reason: Option<StopReason>,
    /// Output tokens to bill; by default counted from the content with the run's tokenizer.
    pub output_tokens: Option<u64>,
}

impl Reply {
    /// The mock's answer when nothing else is scripted.
    pub fn default_text() -> Reply {
        Reply::text("forkcache mock reply.")
    }

    /// One text block.
    pub fn text(text: impl Into<String>) -> Reply {
        Reply { content: vec![ReplyContent::Text(text.into())], ..Reply::default() }
    }

    /// No content and no output tokens: prices only the input side (what `replay` does when the
    /// trace does not say what the response was).
    pub fn input_only() -> Reply {
        Reply { content: Vec::new(), stop_reason: None, output_tokens: Some(0) }
    }

    /// The stop reason the response will carry.
    pub fn resolved_stop_reason(&self) -> StopReason {
        self.stop_reason.unwrap_or_else(|| {
            let calls_tool = self.content.iter().any(|c| matches!(c, ReplyContent::ToolUse { .. }));
            if calls_tool { StopReason::ToolUse } else { StopReason::EndTurn }
        })
    }
}

/// One content block of a response.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResponseBlock {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// A tool call.
    ToolUse {
        /// `toolu_…`.
        id: String,
        /// Tool name.
        name: String,
        /// Tool input.
        input: Value,
    },
}

/// A `type: "message"` response.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MessageResponse {
    /// `msg_…`, deterministic.
    pub id: String,
    /// Always "message".
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Always "assistant".
    pub role: &'static str,
    /// The answer.
    pub content: Vec<ResponseBlock>,
    /// The model id as requested.
    pub model: String,
    /// Why generation stopped.
    pub stop_reason: StopReason,
    /// Always null.
    pub stop_sequence: Option<String>,
    /// The computed usage.
    pub usage: Usage,
    /// Cache diagnostics: absent unless the request asked (`diagnostics` in its body); then
    /// `null` when nothing diverged, else the reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<Option<Diagnostics>>,
}

impl MessageResponse {
    /// The JSON body.
    #[allow(clippy::expect_used)] // a response is plain data: serializing it cannot fail
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a response always serializes")
    }
}
