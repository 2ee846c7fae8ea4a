//! One block looked at closely: its identity key, token count, cache marker and the facts the
//! prompt needs from it. This runs once per distinct block (see [`super::memo`]), so it may build
//! a JSON tree.

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use forkcache_wire::RawJson;

use super::hash::{content_hash, namespaced_hash};
use super::{IdentityMode, Ttl};
use crate::tokenize::Tokenizer;

/// Where a block sits, which decides what it may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BlockContext {
    /// A tool definition.
    Tool,
    /// A `system` block.
    System,
    /// A message content block.
    Message,
}

impl BlockContext {
    fn namespace(self) -> u64 {
        match self {
            BlockContext::Tool => 1,
            BlockContext::System => 2,
            BlockContext::Message => 3,
        }
    }
}

/// What kind of block it is, as far as caching cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BlockKind {
    /// `text`.
    Text,
    /// `tool_use` (runs collapse into one position).
    ToolUse,
    /// `tool_result` (runs collapse into one position).
    ToolResult,
    /// `thinking`.
    Thinking,
    /// `redacted_thinking`.
    RedactedThinking,
    /// `image`.
    Image,
    /// `document`.
    Document,
    /// A tool definition.
    ToolDefinition,
    /// Anything else (server-tool blocks, search results, …): cached like any block.
    Other,
}

/// What the prompt needs to know about one block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockInfo {
    /// Identity key under the run's [`IdentityMode`]; never includes `cache_control`.
    pub key: u128,
    /// Token count (declared, or counted by the tokenizer).
    pub tokens: u64,
    /// `tokens` is the tokenizer's estimate, not a [`DECLARED_TOKENS_KEY`] the block declared.
    pub estimated: bool,
    /// Block kind.
    pub kind: BlockKind,
    /// The block's own cache breakpoint (or one moved up from its last inner block).
    pub marker: Option<Ttl>,
    /// An image is in the block.
    pub has_image: bool,
    /// Citations are enabled on the block.
    pub has_citations: bool,
    /// A web-search server tool definition.
    pub web_search_tool: bool,
    /// A system block dropped by an ignored prefix: no position, no tokens.
    pub ignored: bool,
    /// A tool definition with `defer_loading: true`: not part of the prompt until tool search
    /// loads it (see [`super::DeferredTools`]).
    pub deferred: bool,
    /// Automatic caching may put its breakpoint here.
    pub auto_eligible: bool,
}

/// Why a block is rejected; rendered with the block's path by [`BlockProblem::message`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BlockProblem {
    /// A problem inside the block: `{block path}{suffix}: {message}`.
    At {
        /// Field path below the block, e.g. `.cache_control.ttl`.
        suffix: String,
        /// What is wrong.
        message: String,
    },
    /// Empty text without a marker: the API words this for the whole level.
    EmptyText,
}

impl BlockProblem {
    fn at(suffix: impl Into<String>, message: impl Into<String>) -> BlockProblem {
        BlockProblem::At { suffix: suffix.into(), message: message.into() }
    }

    /// The API's message for a block at `block_path` (dot notation) in `level`.
    pub fn message(&self, block_path: &str, level: &str) -> String {
        match self {
            BlockProblem::At { suffix, message } => format!("{block_path}{suffix}: {message}"),
            BlockProblem::EmptyText => format!("{level}: text content blocks must be non-empty"),
        }
    }
}

/// Settings that decide a block's key and count.
pub struct InspectConfig<'c> {
    /// How identity is compared.
    pub identity: IdentityMode,
    /// System blocks whose text starts with one of these are dropped.
    pub ignored_system_prefixes: &'c [String],
    /// Counts tokens.
    pub tokenizer: &'c dyn Tokenizer,
}

/// Members whose values are the user's own JSON: compared with key order, never reordered.
const USER_JSON_KEYS: [&str; 3] = ["input_schema", "input", "input_examples"];

/// The member that declares a synthetic block's token count instead of counting it.
pub const DECLARED_TOKENS_KEY: &str = "forkcache_tokens";

/// The largest token count a block may declare (and a trace may log as output): far above any
/// context window, and low enough that no request's sums can overflow (32 MB of blocks, each at
/// this size, stay below 2^64 tokens and nano-dollars).
pub const MAX_DECLARED_TOKENS: u64 = 1_000_000_000;

/// The memo key of a raw block: its bytes, namespaced by where it sits.
pub fn raw_memo_key(context: BlockContext, raw: &str) -> u128 {
    namespaced_hash(context.namespace(), raw.as_bytes())
}

/// The memo key of string content (`"content": "…"`), distinct from any raw block.
pub fn text_memo_key(context: BlockContext, text: &str) -> u128 {
    namespaced_hash(context.namespace() | 0x100, text.as_bytes())
}

/// Inspects a raw block.
pub fn inspect_raw(
    raw: RawJson,
    context: BlockContext,
    config: &InspectConfig,
) -> Result<BlockInfo, BlockProblem> {
    // A raw block is valid JSON, but it was read without a depth limit: a block nested past
    // serde_json's recursion limit is refused here, as the API refuses it, never a panic.
    let value: Value = serde_json::from_str(raw.get()).map_err(|err| {
        BlockProblem::at(
            "",
            format!("the block could not be read: {}", forkcache_wire::json::without_position(&err)),
        )
    })?;
    let Value::Object(block) = &value else {
        return Err(BlockProblem::at("", "Input should be an object"));
    };
    let wire_key = || content_hash(&without_own_marker(raw.get()));
    inspect_object(block, context, config, wire_key)
}

/// Inspects string content, which is one text block holding the string.
pub fn inspect_text(
    text: &str,
    context: BlockContext,
    config: &InspectConfig,
) -> Result<BlockInfo, BlockProblem> {
    let mut block = Map::new();
    block.insert("type".into(), Value::String("text".into()));
    block.insert("text".into(), Value::String(text.into()));
    // As sent, the block is the string literal itself.
    let wire_key = || text_memo_key(context, text);
    inspect_object(&block, context, config, wire_key)
}

fn inspect_object(
    block: &Map<String, Value>,
    context: BlockContext,
    config: &InspectConfig,
    wire_key: impl FnOnce() -> u128,
) -> Result<BlockInfo, BlockProblem> {
    let kind = block_kind(block, context)?;
    let text = block.get("text").and_then(Value::as_str);
    let empty_text = kind == BlockKind::Text && text.is_none_or(str::is_empty);
    let marker = marker_of(block, kind, empty_text)?;
    if empty_text && context != BlockContext::Tool {
        return Err(match text {
            None => BlockProblem::at(".text", "Field required"),
            Some(_) => BlockProblem::EmptyText,
        });
    }
    let ignored = context == BlockContext::System
        && text.is_some_and(|t| config.ignored_system_prefixes.iter().any(|p| t.starts_with(p.as_str())));
    let key = match config.identity {
        IdentityMode::Semantic => content_hash(&canonical(block, true)),
        IdentityMode::Wire => wire_key(),
    };
    Ok(BlockInfo {
        key,
        tokens: tokens_of(block, kind, config.tokenizer)?,
        estimated: !block.contains_key(DECLARED_TOKENS_KEY),
        kind,
        marker,
        has_image: contains_image(block, kind),
        has_citations: citations_enabled(block),
        web_search_tool: kind == BlockKind::ToolDefinition
            && type_of(block).is_some_and(|t| t.starts_with("web_search")),
        ignored,
        deferred: kind == BlockKind::ToolDefinition && block.get("defer_loading") == Some(&Value::Bool(true)),
        auto_eligible: !matches!(kind, BlockKind::Thinking | BlockKind::RedactedThinking) && !ignored,
    })
}

fn type_of(block: &Map<String, Value>) -> Option<&str> {
    block.get("type").and_then(Value::as_str)
}

fn block_kind(block: &Map<String, Value>, context: BlockContext) -> Result<BlockKind, BlockProblem> {
    if context == BlockContext::Tool {
        return Ok(BlockKind::ToolDefinition);
    }
    let Some(kind) = type_of(block) else {
        return Err(BlockProblem::at(".type", "Field required"));
    };
    if context == BlockContext::System && kind != "text" {
        return Err(BlockProblem::at(".type", format!("Input should be 'text', got {kind:?}")));
    }
    Ok(match kind {
        "text" => BlockKind::Text,
        "tool_use" => BlockKind::ToolUse,
        "tool_result" => BlockKind::ToolResult,
        "thinking" => BlockKind::Thinking,
        "redacted_thinking" => BlockKind::RedactedThinking,
        "image" => BlockKind::Image,
        "document" => BlockKind::Document,
        _ => BlockKind::Other,
    })
}

/// The block's breakpoint, after moving a marker up from the last inner block of a
/// `tool_result` or `document` (the API does this since 2025-05-01).
fn marker_of(
    block: &Map<String, Value>,
    kind: BlockKind,
    empty_text: bool,
) -> Result<Option<Ttl>, BlockProblem> {
    let own = match block.get("cache_control") {
        None | Some(Value::Null) => None,
        Some(_) if matches!(kind, BlockKind::Thinking | BlockKind::RedactedThinking) => {
            return Err(BlockProblem::at(".cache_control", "Extra inputs are not permitted"));
        }
        Some(_) if empty_text => {
            return Err(BlockProblem::at(".text", "cache_control cannot be set for empty text blocks"));
        }
        Some(marker) => Some(parse_marker(marker, ".cache_control")?),
    };
    let inner = inner_marker(block, kind)?;
    Ok(own.or(inner))
}

/// The marker moved up from the last inner block of a `tool_result`'s `content` or a
/// `document`'s `source.content`. A block kind the engine does not know may have either (the
/// first it has moves). The other kinds it knows have neither member: the API refuses a marker
/// there (as any member they do not have), and so does the engine, rather than price a
/// breakpoint the API would never set.
fn inner_marker(block: &Map<String, Value>, kind: BlockKind) -> Result<Option<Ttl>, BlockProblem> {
    let content = block.get("content").and_then(Value::as_array);
    let source_content = block.get("source").and_then(|s| s.get("content")).and_then(Value::as_array);
    let members = [(".content", content), (".source.content", source_content)];
    let moving = match kind {
        BlockKind::ToolResult => Some(".content"),
        BlockKind::Document => Some(".source.content"),
        BlockKind::Other => members.iter().find(|(_, items)| items.is_some()).map(|(suffix, _)| *suffix),
        _ => None,
    };
    let mut moved = None;
    for (suffix, items) in members {
        let Some(items) = items else { continue };
        if Some(suffix) == moving {
            moved = moved_marker(items, suffix)?;
        } else if kind != BlockKind::Other
            && items.iter().any(|item| item.get("cache_control").is_some_and(|m| !m.is_null()))
        {
            return Err(BlockProblem::at(suffix, "Extra inputs are not permitted"));
        }
    }
    Ok(moved)
}

/// The marker on the last of `items` (under `suffix`), refusing one on any other item.
fn moved_marker(items: &[Value], suffix: &str) -> Result<Option<Ttl>, BlockProblem> {
    let mut moved = None;
    for (index, item) in items.iter().enumerate() {
        let Some(marker) = item.get("cache_control").filter(|m| !m.is_null()) else { continue };
        let at = format!("{suffix}.{index}.cache_control");
        if index + 1 != items.len() {
            return Err(BlockProblem::at(
                at,
                "cache_control may only be set on the last inner block; set it on the parent block instead",
            ));
        }
        moved = Some(parse_marker(marker, &at)?);
    }
    Ok(moved)
}

fn parse_marker(marker: &Value, at: &str) -> Result<Ttl, BlockProblem> {
    let Value::Object(fields) = marker else {
        return Err(BlockProblem::at(at, "Input should be an object"));
    };
    match fields.get("type").and_then(Value::as_str) {
        Some("ephemeral") => {}
        _ => return Err(BlockProblem::at(format!("{at}.type"), "Input should be 'ephemeral'")),
    }
    match fields.get("ttl") {
        None | Some(Value::Null) => Ok(Ttl::FiveMinutes),
        Some(Value::String(ttl)) if ttl == "5m" => Ok(Ttl::FiveMinutes),
        Some(Value::String(ttl)) if ttl == "1h" => Ok(Ttl::OneHour),
        Some(_) => Err(BlockProblem::at(format!("{at}.ttl"), "Input should be '5m' or '1h'")),
    }
}

fn tokens_of(
    block: &Map<String, Value>,
    kind: BlockKind,
    tokenizer: &dyn Tokenizer,
) -> Result<u64, BlockProblem> {
    match block.get(DECLARED_TOKENS_KEY) {
        None if contains_image(block, kind) => Ok(tokens_with_images(block, tokenizer)),
        None => Ok(tokenizer.count(&canonical(block, false))),
        Some(declared) => match declared.as_u64() {
            Some(tokens) if tokens <= MAX_DECLARED_TOKENS => Ok(tokens),
            Some(_) => Err(BlockProblem::at(
                format!(".{DECLARED_TOKENS_KEY}"),
                format!("Input should be less than or equal to {MAX_DECLARED_TOKENS}"),
            )),
            None => Err(BlockProblem::at(
                format!(".{DECLARED_TOKENS_KEY}"),
                "Input should be a non-negative integer",
            )),
        },
    }
}

/// The tokenizer's count of the block with every image whose header gives its size counted by
/// its pixels instead of its base64 (see [`super::image`]).
fn tokens_with_images(block: &Map<String, Value>, tokenizer: &dyn Tokenizer) -> u64 {
    let mut without_data = block.clone();
    let pixels = take_sized_image_data(&mut without_data);
    tokenizer.count(&canonical(&without_data, false)) + pixels
}

/// Empties the data of the block's sized images (itself, or those in its `content`, as a tool
/// result holds them) and returns what they cost.
fn take_sized_image_data(block: &mut Map<String, Value>) -> u64 {
    let mut tokens = 0;
    if block.get("type").and_then(Value::as_str) == Some("image") {
        tokens += take_base64_source(block).unwrap_or(0);
    }
    for item in block.get_mut("content").and_then(Value::as_array_mut).into_iter().flatten() {
        if let Value::Object(item) = item {
            tokens += take_sized_image_data(item);
        }
    }
    tokens
}

/// An image block's base64 data emptied and its cost, when its header gives its size.
fn take_base64_source(image: &mut Map<String, Value>) -> Option<u64> {
    let source = image.get_mut("source")?.as_object_mut()?;
    if source.get("type")?.as_str()? != "base64" {
        return None;
    }
    let Value::String(data) = source.get_mut("data")? else { return None };
    let tokens = super::image::image_size(data)?.tokens();
    data.clear();
    Some(tokens)
}

fn contains_image(block: &Map<String, Value>, kind: BlockKind) -> bool {
    kind == BlockKind::Image
        || block.get("content").and_then(Value::as_array).is_some_and(|items| {
            items.iter().any(|item| item.get("type").and_then(Value::as_str) == Some("image"))
        })
}

fn citations_enabled(block: &Map<String, Value>) -> bool {
    block.get("citations").and_then(|c| c.get("enabled")).and_then(Value::as_bool) == Some(true)
}

/// Compact JSON of a block without `cache_control`. With `sort_protocol_keys` the API's own
/// objects have their keys sorted (semantic identity); the user's JSON (`input_schema`, tool
/// `input`) always keeps the order it was sent in.
pub fn canonical(block: &Map<String, Value>, sort_protocol_keys: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write_protocol_object(block, sort_protocol_keys, &mut out);
    out
}

fn write_protocol_object(object: &Map<String, Value>, sort: bool, out: &mut Vec<u8>) {
    let mut members: Vec<(&String, &Value)> =
        object.iter().filter(|(key, _)| key.as_str() != "cache_control").collect();
    if sort {
        members.sort_by(|a, b| a.0.cmp(b.0));
    }
    // A tool result's string content is one text block, as a message's is.
    let result_text = object.get("type").and_then(Value::as_str) == Some("tool_result");
    out.push(b'{');
    for (index, (key, value)) in members.into_iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        write_string(key, out);
        out.push(b':');
        match value {
            _ if USER_JSON_KEYS.contains(&key.as_str()) => write_user_value(value, out),
            Value::String(text) if result_text && key == "content" => write_text_block_list(text, sort, out),
            _ => write_protocol_value(value, sort, out),
        }
    }
    out.push(b'}');
}

fn write_text_block_list(text: &str, sort: bool, out: &mut Vec<u8>) {
    out.extend_from_slice(if sort { b"[{\"text\":" } else { b"[{\"type\":\"text\",\"text\":" });
    write_string(text, out);
    out.extend_from_slice(if sort { b",\"type\":\"text\"}]" } else { b"}]" });
}

fn write_protocol_value(value: &Value, sort: bool, out: &mut Vec<u8>) {
    match value {
        Value::Object(object) => write_protocol_object(object, sort, out),
        Value::Array(items) => write_array(items, out, |item, out| write_protocol_value(item, sort, out)),
        scalar => write_scalar(scalar, out),
    }
}

fn write_user_value(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(object) => {
            out.push(b'{');
            for (index, (key, value)) in object.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write_string(key, out);
                out.push(b':');
                write_user_value(value, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => write_array(items, out, write_user_value),
        scalar => write_scalar(scalar, out),
    }
}

fn write_array(items: &[Value], out: &mut Vec<u8>, mut write: impl FnMut(&Value, &mut Vec<u8>)) {
    out.push(b'[');
    for (index, item) in items.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        write(item, out);
    }
    out.push(b']');
}

#[allow(clippy::expect_used)] // writing JSON to a Vec cannot fail
fn write_scalar(value: &Value, out: &mut Vec<u8>) {
    serde_json::to_writer(&mut *out, value).expect("writing to a Vec cannot fail");
}

#[allow(clippy::expect_used)] // writing JSON to a Vec cannot fail
fn write_string(text: &str, out: &mut Vec<u8>) {
    serde_json::to_writer(&mut *out, text).expect("writing to a Vec cannot fail");
}

/// The block's bytes as sent with its own top-level `cache_control` member cut out (wire
/// identity). Whitespace and key order are kept.
pub fn without_own_marker(raw: &str) -> Vec<u8> {
    match marker_member_span(raw) {
        Some((start, end)) => [&raw.as_bytes()[..start], &raw.as_bytes()[end..]].concat(),
        None => raw.as_bytes().to_vec(),
    }
}

/// Byte range of the top-level `cache_control` member with one adjoining comma, if present.
fn marker_member_span(raw: &str) -> Option<(usize, usize)> {
    let members: Vec<(String, &RawValue)> = serde_json::from_str(raw).ok().map(|m: Members| m.0)?;
    let base = raw.as_ptr() as usize;
    let end_of = |value: &RawValue| value.get().as_ptr() as usize - base + value.get().len();
    let index = members.iter().position(|(key, _)| key == "cache_control")?;
    let marker_end = end_of(members[index].1);
    if index > 0 {
        // Cut from the end of the previous value: `,"cache_control":{…}`.
        return Some((end_of(members[index - 1].1), marker_end));
    }
    let open = raw.find('{')? + 1;
    match raw[marker_end..].find(',') {
        // First of several: cut through the following comma.
        Some(comma) if members.len() > 1 => Some((open, marker_end + comma + 1)),
        _ => Some((open, marker_end)),
    }
}

/// An object's members in order, values raw (so their byte offsets are known).
struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for Members<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MembersVisitor;
        impl<'de> serde::de::Visitor<'de> for MembersVisitor {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, &'de RawValue>()? {
                    members.push((key, value));
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(MembersVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenize::Bytes4;

    fn config(identity: IdentityMode) -> InspectConfig<'static> {
        static PREFIXES: std::sync::LazyLock<Vec<String>> =
            std::sync::LazyLock::new(|| vec!["x-anthropic-billing-header:".to_string()]);
        InspectConfig { identity, ignored_system_prefixes: &PREFIXES, tokenizer: &Bytes4 }
    }

    fn inspect(json: &str, context: BlockContext, identity: IdentityMode) -> Result<BlockInfo, BlockProblem> {
        let raw: Box<RawValue> = serde_json::from_str(json).unwrap();
        inspect_raw(RawJson::from(&*raw), context, &config(identity))
    }

    fn key(json: &str, identity: IdentityMode) -> u128 {
        inspect(json, BlockContext::Message, identity).unwrap().key
    }

    /// A 1,269 × 299 px PNG (its 24-byte header and 24 bytes of pixels, 64 base64 characters): 506 tokens
    /// for its pixels (379,431 / 750, rounded up), plus the block without its data by bytes/4.
    #[test]
    fn an_image_is_counted_by_its_pixels_and_an_unreadable_one_by_its_bytes() {
        let data = "iVBORw0KGgoAAAANSUhEUgAABPUAAAErAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
        let block = |data: &str| {
            format!(
                r#"{{"type":"image","source":{{"type":"base64","media_type":"image/png","data":"{data}"}}}}"#
            )
        };
        let tokens = |json: &str| inspect(json, BlockContext::Message, IdentityMode::Wire).unwrap().tokens;
        // Without its data the block is 78 bytes: 20 tokens.
        assert_eq!(block("").len(), 78);
        assert_eq!(tokens(&block(data)), 20 + 506);
        // In a tool result the image is counted the same way; the wrapper adds its own bytes.
        let result = format!(r#"{{"type":"tool_result","tool_use_id":"t","content":[{}]}}"#, block(data));
        let wrapper = result.len() - block(data).len() + block("").len();
        assert_eq!(tokens(&result), (wrapper as u64).div_ceil(4) + 506);
        // "aGk=" ("hi") is no image: 82 bytes by bytes/4, 21 tokens.
        assert_eq!(tokens(&block("aGk=")), 21);
    }

    #[test]
    fn marker_never_joins_the_key() {
        for identity in [IdentityMode::Semantic, IdentityMode::Wire] {
            let plain = key(r#"{"type":"text","text":"hi"}"#, identity);
            let marked = key(r#"{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}"#, identity);
            let first = key(r#"{"cache_control":{"type":"ephemeral"},"type":"text","text":"hi"}"#, identity);
            assert_eq!(plain, marked, "{identity:?}");
            assert_eq!(plain, first, "{identity:?}");
        }
    }

    #[test]
    fn semantic_ignores_protocol_key_order_and_whitespace_wire_does_not() {
        let a = r#"{"type":"text","text":"hi"}"#;
        let b = r#"{ "text": "hi", "type": "text" }"#;
        assert_eq!(key(a, IdentityMode::Semantic), key(b, IdentityMode::Semantic));
        assert_ne!(key(a, IdentityMode::Wire), key(b, IdentityMode::Wire));
    }

    #[test]
    fn user_json_key_order_matters_in_both_modes() {
        let a = r#"{"type":"tool_use","id":"t1","name":"f","input":{"a":1,"b":2}}"#;
        let b = r#"{"type":"tool_use","id":"t1","name":"f","input":{"b":2,"a":1}}"#;
        assert_ne!(key(a, IdentityMode::Semantic), key(b, IdentityMode::Semantic));
        assert_ne!(key(a, IdentityMode::Wire), key(b, IdentityMode::Wire));
    }

    #[test]
    fn string_content_equals_one_text_block_semantically() {
        let text = inspect_text("hi", BlockContext::Message, &config(IdentityMode::Semantic)).unwrap();
        assert_eq!(text.key, key(r#"{"type":"text","text":"hi"}"#, IdentityMode::Semantic));
        // {"type":"text","text":"hi"} is 27 bytes → 7 tokens either way.
        assert_eq!(text.tokens, 7);
        let wire = inspect_text("hi", BlockContext::Message, &config(IdentityMode::Wire)).unwrap();
        assert_ne!(wire.key, key(r#"{"type":"text","text":"hi"}"#, IdentityMode::Wire));
    }

    #[test]
    fn tool_result_string_content_equals_one_text_block_semantically() {
        let string = r#"{"type":"tool_result","tool_use_id":"t","content":"ok"}"#;
        let blocks = r#"{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"ok"}]}"#;
        assert_eq!(key(string, IdentityMode::Semantic), key(blocks, IdentityMode::Semantic));
        assert_ne!(key(string, IdentityMode::Wire), key(blocks, IdentityMode::Wire));
        // Both count as the expanded form: 80 bytes → 20 tokens.
        let tokens = |json| inspect(json, BlockContext::Message, IdentityMode::Wire).unwrap().tokens;
        assert_eq!(blocks.len(), 80);
        assert_eq!((tokens(string), tokens(blocks)), (20, 20));
    }

    #[test]
    fn tokens_count_compact_json_without_the_marker() {
        // `{ "type": "text", "text": "hello" }` compacts to {"type":"text","text":"hello"}:
        // 30 bytes → 8 tokens; the marker adds nothing.
        let info = inspect(
            r#"{ "type": "text", "text": "hello", "cache_control": {"type": "ephemeral", "ttl": "1h"} }"#,
            BlockContext::Message,
            IdentityMode::Semantic,
        )
        .unwrap();
        assert_eq!(info.tokens, 8);
        assert_eq!(info.marker, Some(Ttl::OneHour));
    }

    #[test]
    fn declared_tokens_replace_the_count() {
        let info = inspect(
            r#"{"type":"text","text":"history","forkcache_tokens":100000}"#,
            BlockContext::Message,
            IdentityMode::Semantic,
        )
        .unwrap();
        assert_eq!(info.tokens, 100_000);
    }

    #[test]
    fn invalid_markers_are_rejected_with_their_field() {
        let err = inspect(
            r#"{"type":"text","text":"","cache_control":{"type":"ephemeral"}}"#,
            BlockContext::Message,
            IdentityMode::Semantic,
        )
        .unwrap_err();
        assert_eq!(
            err.message("messages.3.content.1", "messages"),
            "messages.3.content.1.text: cache_control cannot be set for empty text blocks"
        );
        let err = inspect(
            r#"{"type":"thinking","thinking":"t","signature":"s","cache_control":{"type":"ephemeral"}}"#,
            BlockContext::Message,
            IdentityMode::Semantic,
        )
        .unwrap_err();
        assert_eq!(
            err.message("messages.1.content.0", "messages"),
            "messages.1.content.0.cache_control: Extra inputs are not permitted"
        );
        let err = inspect(
            r#"{"type":"text","text":"x","cache_control":{"type":"ephemeral","ttl":"2h"}}"#,
            BlockContext::Message,
            IdentityMode::Semantic,
        )
        .unwrap_err();
        assert_eq!(
            err.message("messages.0.content.0", "messages"),
            "messages.0.content.0.cache_control.ttl: Input should be '5m' or '1h'"
        );
        let err = inspect(r#"{"type":"text","text":""}"#, BlockContext::Message, IdentityMode::Semantic)
            .unwrap_err();
        assert_eq!(
            err.message("messages.0.content.0", "messages"),
            "messages: text content blocks must be non-empty"
        );
    }

    #[test]
    fn last_inner_marker_moves_to_the_tool_result() {
        let info = inspect(r#"{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"a"},{"type":"text","text":"b","cache_control":{"type":"ephemeral"}}]}"#,
            BlockContext::Message, IdentityMode::Semantic).unwrap();
        assert_eq!(info.marker, Some(Ttl::FiveMinutes));
        let err = inspect(r#"{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}},{"type":"text","text":"b"}]}"#,
            BlockContext::Message, IdentityMode::Semantic).unwrap_err();
        assert!(
            err.message("messages.2.content.0", "messages")
                .starts_with("messages.2.content.0.content.0.cache_control: ")
        );
    }

    /// The API moves a marker up from a `tool_result`'s `content` and a `document`'s
    /// `source.content` only. The kinds it defines without such a member refuse a marker there,
    /// a thinking block included (it takes no marker at all); a kind the engine does not know
    /// (a search result here) moves it up.
    #[test]
    fn inner_markers_move_up_only_where_the_api_moves_them() {
        let marked_last = r#"[{"type":"text","text":"a"},{"type":"text","text":"b","cache_control":{"type":"ephemeral","ttl":"1h"}}]"#;
        let document =
            format!(r#"{{"type":"document","source":{{"type":"content","content":{marked_last}}}}}"#);
        let search_result =
            format!(r#"{{"type":"search_result","source":"s","title":"t","content":{marked_last}}}"#);
        for moved in [document, search_result] {
            let info = inspect(&moved, BlockContext::Message, IdentityMode::Semantic).unwrap();
            assert_eq!(info.marker, Some(Ttl::OneHour), "{moved}");
        }
        let refused = [
            (
                format!(r#"{{"type":"thinking","thinking":"t","signature":"s","content":{marked_last}}}"#),
                ".content",
            ),
            (format!(r#"{{"type":"redacted_thinking","data":"d","content":{marked_last}}}"#), ".content"),
            (format!(r#"{{"type":"text","text":"x","content":{marked_last}}}"#), ".content"),
            (
                format!(
                    r#"{{"type":"document","source":{{"type":"text","data":"x"}},"content":{marked_last}}}"#
                ),
                ".content",
            ),
            (
                format!(r#"{{"type":"tool_result","tool_use_id":"t","source":{{"content":{marked_last}}}}}"#),
                ".source.content",
            ),
        ];
        for (block, member) in refused {
            let err = inspect(&block, BlockContext::Message, IdentityMode::Semantic).unwrap_err();
            assert_eq!(
                err.message("messages.1.content.0", "messages"),
                format!("messages.1.content.0{member}: Extra inputs are not permitted"),
                "{block}"
            );
        }
        // Without a marker in it, the member is the block's own content, as before.
        let unmarked =
            r#"{"type":"thinking","thinking":"t","signature":"s","content":[{"type":"text","text":"a"}]}"#;
        assert_eq!(inspect(unmarked, BlockContext::Message, IdentityMode::Semantic).unwrap().marker, None);
    }

    #[test]
    fn billing_header_is_ignored_in_system_only() {
        let text = r#"{"type":"text","text":"x-anthropic-billing-header: cc_version=2.1.197.fa0;"}"#;
        assert!(inspect(text, BlockContext::System, IdentityMode::Semantic).unwrap().ignored);
        assert!(!inspect(text, BlockContext::Message, IdentityMode::Semantic).unwrap().ignored);
    }

    #[test]
    fn wire_cut_keeps_everything_but_the_marker() {
        assert_eq!(
            without_own_marker(r#"{"a":1,"cache_control":{"type":"ephemeral"},"b":2}"#),
            br#"{"a":1,"b":2}"#
        );
        assert_eq!(without_own_marker(r#"{"cache_control":{"type":"ephemeral"}, "b":2}"#), br#"{ "b":2}"#);
        assert_eq!(without_own_marker(r#"{"a":1,"cache_control":{"type":"ephemeral"}}"#), br#"{"a":1}"#);
        assert_eq!(without_own_marker(r#"{"a":"cache_control"}"#), br#"{"a":"cache_control"}"#);
    }
}
