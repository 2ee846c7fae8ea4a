//! The request body, read in one pass without building a JSON tree.
//!
//! Content blocks and tool definitions stay borrowed raw spans ([`RawJson`]): the prompt layer
//! hashes those bytes and only looks inside a block it has not seen before. Unknown top-level keys
//! are skipped (they stay in the caller's bytes), so real clients' `context_management`,
//! `metadata` and the like are accepted as sent.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::error::ApiError;
use super::raw::RawJson;

/// Who wrote a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// `user`.
    User,
    /// `assistant`.
    Assistant,
    /// `system` inside `messages` (mid-conversation system messages).
    System,
}

impl Role {
    /// The role as the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::System => "system",
        }
    }
}

impl<'de> Deserialize<'de> for Role {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let role = Cow::<str>::deserialize(deserializer)?;
        match &*role {
            "user" => Ok(Role::User),
            "assistant" => Ok(Role::Assistant),
            "system" => Ok(Role::System),
            other => Err(de::Error::custom(format_args!(
                "Input should be 'user', 'assistant' or 'system', got {other:?}"
            ))),
        }
    }
}

/// `system` or a message's `content`: a string (one text block) or an array of blocks.
#[derive(Debug)]
pub enum ContentView<'a> {
    /// A plain string, decoded.
    Text(Cow<'a, str>),
    /// Blocks, each the raw bytes as sent.
    Blocks(Vec<RawJson<'a>>),
}

impl<'de: 'a, 'a> Deserialize<'de> for ContentView<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ContentVisitor)
    }
}

struct ContentVisitor;

impl<'de> Visitor<'de> for ContentVisitor {
    type Value = ContentView<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string or an array of content blocks")
    }

    fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Self::Value, E> {
        Ok(ContentView::Text(Cow::Borrowed(text)))
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
        Ok(ContentView::Text(Cow::Owned(text.to_string())))
    }

    fn visit_string<E: de::Error>(self, text: String) -> Result<Self::Value, E> {
        Ok(ContentView::Text(Cow::Owned(text)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut blocks = Vec::with_capacity(seq.size_hint().unwrap_or(4));
        while let Some(block) = seq.next_element::<RawJson<'de>>()? {
            blocks.push(block);
        }
        Ok(ContentView::Blocks(blocks))
    }
}

/// One entry of `messages`.
#[derive(Debug, Deserialize)]
pub struct MessageView<'a> {
    /// The message's role.
    pub role: Role,
    /// Its content.
    #[serde(borrow)]
    pub content: ContentView<'a>,
}

/// `thinking`: only the parts rendered into the prompt are kept.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct Thinking {
    /// `enabled`, `disabled` or `adaptive`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The budget in extended (`enabled`) mode.
    #[serde(default)]
    pub budget_tokens: Option<u64>,
}

/// `tool_choice`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct ToolChoice {
    /// `auto`, `any`, `tool` or `none`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The forced tool, with `type: "tool"`.
    #[serde(default)]
    pub name: Option<String>,
    /// Whether parallel tool use is disabled.
    #[serde(default)]
    pub disable_parallel_tool_use: Option<bool>,
}

/// `output_config`.
#[derive(Debug, Default, Deserialize)]
pub struct OutputConfig<'a> {
    /// `low` … `max`.
    #[serde(default)]
    pub effort: Option<String>,
    /// Structured-output format, kept raw.
    #[serde(default, borrow)]
    pub format: Option<RawJson<'a>>,
}

/// `diagnostics` (beta `cache-diagnosis-2026-04-07`): opts in to cache diagnostics.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct DiagnosticsRequest {
    /// The previous response's id to compare with; `null` on a first turn.
    #[serde(default)]
    pub previous_message_id: Option<String>,
}

/// A `POST /v1/messages` (or `count_tokens`) body, borrowed from the bytes it was read from.
#[derive(Debug, Default)]
pub struct RequestView<'a> {
    /// `model`.
    pub model: Option<Cow<'a, str>>,
    /// `max_tokens`.
    pub max_tokens: Option<u64>,
    /// `messages`.
    pub messages: Option<Vec<MessageView<'a>>>,
    /// `system`.
    pub system: Option<ContentView<'a>>,
    /// `tools`, each definition raw.
    pub tools: Vec<RawJson<'a>>,
    /// `tool_choice`.
    pub tool_choice: Option<ToolChoice>,
    /// `thinking`.
    pub thinking: Option<Thinking>,
    /// `output_config`.
    pub output_config: Option<OutputConfig<'a>>,
    /// Top-level `cache_control` (automatic caching), raw until validated.
    pub cache_control: Option<RawJson<'a>>,
    /// `stream`.
    pub stream: bool,
    /// `speed` (fast mode).
    pub speed: Option<String>,
    /// `diagnostics`: present when the request asks for cache diagnostics.
    pub diagnostics: Option<DiagnosticsRequest>,
    /// `inference_geo` (data residency: `"us"` carries a premium on some models).
    pub inference_geo: Option<String>,
    /// `temperature` (checked, never priced).
    pub temperature: Option<f64>,
    /// `top_p` (checked, never priced).
    pub top_p: Option<f64>,
    /// `top_k` (checked, never priced).
    pub top_k: Option<u64>,
    /// `metadata` (checked, never priced).
    pub metadata: Option<Metadata<'a>>,
    /// `service_tier` (checked, never priced).
    pub service_tier: Option<Cow<'a, str>>,
}

/// `metadata`: only `user_id` is documented; its value is kept raw so that a wrong type is the
/// strict checks' error (naming the field), not a parse failure.
#[derive(Debug, Default, Deserialize)]
pub struct Metadata<'a> {
    /// `user_id`, raw.
    #[serde(default, borrow)]
    pub user_id: Option<RawJson<'a>>,
}

/// Where the value of an object's member is read from: a serde map (the one-pass read), or a
/// reader that parses each value at its own offset (`ingest::trace` does, to skip what a request
/// shares with an earlier one).
pub trait MemberValues<'de> {
    /// What a value that cannot be read is.
    type Error: de::Error;
    /// Reads the value of the member whose key was just read.
    fn next_value<T: Deserialize<'de>>(&mut self) -> Result<T, Self::Error>;
}

/// A serde map read as [`MemberValues`].
pub struct MapValues<'m, A>(pub &'m mut A);

impl<'de, A: MapAccess<'de>> MemberValues<'de> for MapValues<'_, A> {
    type Error = A::Error;

    fn next_value<T: Deserialize<'de>>(&mut self) -> Result<T, A::Error> {
        self.0.next_value()
    }
}

impl<'a> RequestView<'a> {
    /// Reads one member of the body; returns false (having consumed nothing) for a key the view
    /// does not know, so a caller reading a wider object can take it instead.
    pub fn read_member<'de: 'a, V: MemberValues<'de>>(
        &mut self,
        key: &str,
        map: &mut V,
    ) -> Result<bool, V::Error> {
        match key {
            "model" => self.model = map.next_value()?,
            "max_tokens" => self.max_tokens = map.next_value()?,
            "messages" => self.messages = map.next_value()?,
            "system" => self.system = map.next_value()?,
            "tools" => self.tools = map.next_value::<Option<Vec<_>>>()?.unwrap_or_default(),
            "tool_choice" => self.tool_choice = map.next_value()?,
            "thinking" => self.thinking = map.next_value()?,
            "output_config" => self.output_config = map.next_value()?,
            "cache_control" => self.cache_control = map.next_value()?,
            "stream" => self.stream = map.next_value::<Option<bool>>()?.unwrap_or(false),
            "speed" => self.speed = map.next_value()?,
            "diagnostics" => self.diagnostics = map.next_value()?,
            "inference_geo" => self.inference_geo = map.next_value()?,
            "temperature" => self.temperature = map.next_value()?,
            "top_p" => self.top_p = map.next_value()?,
            "top_k" => self.top_k = map.next_value()?,
            "metadata" => self.metadata = map.next_value()?,
            "service_tier" => self.service_tier = map.next_value()?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The messages, or the API's error when the field is missing.
    pub fn require_messages(&self) -> Result<&[MessageView<'a>], ApiError> {
        self.messages.as_deref().ok_or_else(|| ApiError::invalid("messages: Field required"))
    }

    /// The model id, or the API's error when the field is missing.
    pub fn require_model(&self) -> Result<&str, ApiError> {
        self.model.as_deref().ok_or_else(|| ApiError::invalid("model: Field required"))
    }

    /// Whether `output_config.format` is present (structured output).
    pub fn wants_format(&self) -> bool {
        self.output_config.as_ref().is_some_and(|config| config.format.is_some())
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for RequestView<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(RequestVisitor)
    }
}

struct RequestVisitor;

impl<'de> Visitor<'de> for RequestVisitor {
    type Value = RequestView<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object (the request body)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut view = RequestView::default();
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            if !view.read_member(&key, &mut MapValues(&mut map))? {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(view)
    }
}

/// Parses a request body, naming the field at fault when it is malformed.
pub fn parse_request(body: &[u8]) -> Result<RequestView<'_>, ApiError> {
    let text = std::str::from_utf8(body).map_err(|e| {
        ApiError::invalid(format!("request body is not valid UTF-8 (byte {})", e.valid_up_to()))
    })?;
    parse_request_str(text)
}

/// [`parse_request`] for a body already known to be UTF-8.
pub fn parse_request_str(text: &str) -> Result<RequestView<'_>, ApiError> {
    serde_json::from_str(text).map_err(|_| describe_parse_error(text))
}

/// Explains why `text` is not a valid body. Only called after a fast parse failed, so it may
/// re-read the body slowly to find the path of the offending field.
pub fn describe_parse_error(text: &str) -> ApiError {
    let de = &mut serde_json::Deserializer::from_str(text);
    match serde_path_to_error::deserialize::<_, RequestView<'_>>(de) {
        Ok(_) => ApiError::invalid("request body could not be read"),
        Err(err) => {
            let path = api_path(&err.path().to_string());
            let inner = err.into_inner();
            ApiError::invalid(describe_json_error(&path, &inner))
        }
    }
}

fn describe_json_error(path: &str, err: &serde_json::Error) -> String {
    use serde_json::error::Category;
    let at = format!("line {} column {}", err.line(), err.column());
    match err.classify() {
        Category::Syntax | Category::Eof => {
            format!("malformed JSON at {at}: {}", crate::json::without_position(err))
        }
        Category::Data if path == "." || path.is_empty() => {
            format!("request body: {}", crate::json::without_position(err))
        }
        Category::Data => {
            let message = crate::json::without_position(err);
            format!("{path}: {}", integer_words(&message).unwrap_or(message))
        }
        Category::Io => format!("request body could not be read: {err}"),
    }
}

/// serde reads an integer too large for 64 bits as a float, and then says it found a "floating
/// point"; the API, in pydantic's words, says what an integer field wants.
fn integer_words(message: &str) -> Option<String> {
    let rest = message.strip_prefix("invalid type: floating point `")?;
    let (number, expected) = rest.split_once("`, expected ")?;
    if !matches!(expected, "u64" | "u32" | "u16" | "i64" | "i32" | "usize" | "an integer") {
        return None;
    }
    let value: f64 = number.parse().ok()?;
    Some(if value.fract() == 0.0 {
        format!("Input should be a valid integer, got a number too large for one ({number})")
    } else {
        "Input should be a valid integer, got a number with a fractional part".to_string()
    })
}

/// `messages[3].content` → `messages.3.content`, the API's spelling of a field path.
pub fn api_path(serde_path: &str) -> String {
    serde_path.replace('[', ".").replace(']', "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_claude_code_shaped_body() {
        let body = br#"{"model":"claude-opus-4-8","messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]},{"role":"system","content":"skills"}],"system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=2.1.197.fa0;"}],"tools":[{"name":"Agent","description":"d","input_schema":{"type":"object"},"defer_loading":true}],"metadata":{"user_id":"u"},"max_tokens":64000,"thinking":{"type":"adaptive","display":"omitted"},"context_management":{"edits":[]},"output_config":{"effort":"high"},"stream":true}"#;
        let view = parse_request(body).unwrap();
        assert_eq!(view.require_model().unwrap(), "claude-opus-4-8");
        let messages = view.require_messages().unwrap();
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[1].role, Role::System);
        assert!(matches!(messages[1].content, ContentView::Text(_)));
        assert_eq!(view.tools.len(), 1);
        assert_eq!(view.thinking.unwrap().kind, "adaptive");
        assert!(view.stream);
    }

    #[test]
    fn wrong_type_names_the_field() {
        let err = parse_request(br#"{"model":"m","max_tokens":5,"messages":[{"role":"user","content":7}]}"#)
            .unwrap_err();
        assert_eq!(err.kind.status(), 400);
        assert!(err.message.starts_with("messages.0.content: invalid type: integer `7`"), "{}", err.message);
        // 2^64 is one more than u64 holds: serde reads it as a float.
        let huge = r#"{"model":"m","max_tokens":18446744073709551616,"messages":[]}"#;
        assert_eq!(
            parse_request_str(huge).unwrap_err().message,
            "max_tokens: Input should be a valid integer, got a number too large for one (1.8446744073709552e+19)"
        );
        let fraction = r#"{"model":"m","max_tokens":1.5,"messages":[]}"#;
        assert_eq!(
            parse_request_str(fraction).unwrap_err().message,
            "max_tokens: Input should be a valid integer, got a number with a fractional part"
        );
    }

    #[test]
    fn bad_role_names_the_field() {
        let err = parse_request(br#"{"messages":[{"role":"robot","content":"x"}]}"#).unwrap_err();
        assert!(err.message.starts_with("messages.0.role: Input should be"), "{}", err.message);
    }

    #[test]
    fn malformed_json_says_where() {
        let err = parse_request(br#"{"model":"m","messages":[}"#).unwrap_err();
        assert!(err.message.starts_with("malformed JSON at line 1 column 26"), "{}", err.message);
    }

    #[test]
    fn non_object_body_is_rejected() {
        let err = parse_request(b"[1,2]").unwrap_err();
        assert!(err.message.starts_with("request body: invalid type: sequence"), "{}", err.message);
    }

    #[test]
    fn invalid_utf8_is_rejected() {
        let err = parse_request(b"{\"model\":\"\xff\"}").unwrap_err();
        assert!(err.message.contains("not valid UTF-8"), "{}", err.message);
    }
}
