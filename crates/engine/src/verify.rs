//! Byte identity in cache order: where two requests' cache prefixes first differ, and how much
//! of a spawn's sibling requests is identical.
//!
//! A request is laid out as the cache reads it — model, tools, system, rendered config, then
//! each message's role and blocks — each piece as sent minus its own `cache_control`. Raw body
//! order says little (Claude Code sends `messages` before `system` and `tools`), and a marker that
//! moves is not a difference in the prefix.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;

use forkcache_wire::{ApiError, ContentView, RequestView, parse_request};

use crate::prompt::{common_len, without_own_marker};

/// The part of the prompt a piece belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    /// `model` (the cache is per model).
    Model,
    /// `tools`.
    Tools,
    /// `system`.
    System,
    /// Rendered parameters: `thinking`, `output_config.effort`, `tool_choice`.
    Config,
    /// `messages`.
    Messages,
}

impl Part {
    /// Snake-case name.
    pub fn name(self) -> &'static str {
        match self {
            Part::Model => "model",
            Part::Tools => "tools",
            Part::System => "system",
            Part::Config => "config",
            Part::Messages => "messages",
        }
    }
}

/// Where a piece of a request sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loc {
    /// `model`.
    Model,
    /// `tools[i]`.
    Tool(u32),
    /// `system[i]`.
    System(u32),
    /// The rendered parameters (`thinking`, effort, tool choice).
    Config,
    /// `messages[m].role`.
    Role(u32),
    /// `messages[m].content[b]`.
    Block(u32, u32),
}

impl Loc {
    /// `tools[3]`, `messages[14].content[2]`, `messages[14].role`, `thinking`, `model`.
    pub fn path(self) -> String {
        match self {
            Loc::Model => "model".into(),
            Loc::Tool(i) => format!("tools[{i}]"),
            Loc::System(i) => format!("system[{i}]"),
            Loc::Config => "thinking".into(),
            Loc::Role(m) => format!("messages[{m}].role"),
            Loc::Block(m, b) => format!("messages[{m}].content[{b}]"),
        }
    }

    /// The part of the prompt.
    pub fn part(self) -> Part {
        match self {
            Loc::Model => Part::Model,
            Loc::Tool(_) => Part::Tools,
            Loc::System(_) => Part::System,
            Loc::Config => Part::Config,
            Loc::Role(_) | Loc::Block(..) => Part::Messages,
        }
    }

    fn message(self) -> Option<u32> {
        match self {
            Loc::Role(m) | Loc::Block(m, _) => Some(m),
            _ => None,
        }
    }
}

/// The tag Claude Code wraps a fork's directive in: a divergence inside it is the directive,
/// the one place sibling forks are meant to differ.
pub const FORK_BOILERPLATE_TAG: &str = "fork-boilerplate";

/// One piece of a request in cache order: borrowed from shared blocks where it can be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment<'a> {
    /// Where it sits.
    pub loc: Loc,
    /// The bytes compared (JSON, without `cache_control`).
    pub bytes: Cow<'a, str>,
}

impl Segment<'_> {
    /// The same piece: same place, same bytes (shared blocks compare by address first).
    fn same(&self, other: &Segment) -> bool {
        let (a, b) = (self.bytes.as_ref(), other.bytes.as_ref());
        self.loc == other.loc && (std::ptr::eq(a, b) || a == b)
    }
}

/// What kind of difference the first divergence is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DivergenceCause {
    /// Another model.
    Model,
    /// A rendered parameter (thinking budget, effort, tool choice).
    Config,
    /// A tool definition differs, or a tool is missing or added.
    ToolDefinition,
    /// System prompt text.
    SystemText,
    /// A message's role.
    Role,
    /// Inside a fork directive block (the intended difference).
    Directive,
    /// Other text.
    Text,
    /// A `tool_use` block.
    ToolUse,
    /// A `tool_result` block.
    ToolResult,
    /// The same JSON with its keys in another order.
    KeyOrder,
    /// The same JSON, written differently (whitespace, escapes).
    Formatting,
    /// Blocks of different types.
    BlockType,
    /// One request ends where the other goes on (it extends it).
    Extension,
}

impl DivergenceCause {
    /// Snake-case name.
    pub fn name(self) -> &'static str {
        match self {
            DivergenceCause::Model => "model",
            DivergenceCause::Config => "config",
            DivergenceCause::ToolDefinition => "tool_definition",
            DivergenceCause::SystemText => "system_text",
            DivergenceCause::Role => "role",
            DivergenceCause::Directive => "directive",
            DivergenceCause::Text => "text",
            DivergenceCause::ToolUse => "tool_use",
            DivergenceCause::ToolResult => "tool_result",
            DivergenceCause::KeyOrder => "key_order",
            DivergenceCause::Formatting => "formatting",
            DivergenceCause::BlockType => "block_type",
            DivergenceCause::Extension => "extension",
        }
    }
}

/// Where B's cache prefix first leaves A's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Divergence {
    /// Offset into the cache-order bytes (= the common prefix length).
    pub byte_offset: u64,
    /// JSON path down to the differing value: `messages[14].content[3].text`.
    pub path: String,
    /// Which part of the prompt.
    pub dimension: Part,
    /// What kind of difference.
    pub cause: DivergenceCause,
    /// Up to [`CONTEXT_BYTES`] shared bytes before the divergence.
    pub before: String,
    /// A's bytes from the divergence on (a few).
    pub a: String,
    /// B's bytes from the divergence on (a few).
    pub b: String,
}

/// Bytes of context shown on each side of a divergence.
pub const CONTEXT_BYTES: usize = 32;

/// A request body in cache order.
pub fn cache_order(body: &str) -> Result<Vec<Segment<'static>>, ApiError> {
    let view = parse_request(body.as_bytes())?;
    Ok(segments(&view))
}

/// A parsed request in cache order.
pub fn segments(view: &RequestView) -> Vec<Segment<'static>> {
    let owned = |loc, bytes: String| Segment { loc, bytes: Cow::Owned(bytes) };
    let mut out = vec![owned(Loc::Model, json_string(view.model.as_deref().unwrap_or("")))];
    for (index, tool) in view.tools.iter().enumerate() {
        out.push(owned(Loc::Tool(index as u32), unmarked(tool.get())));
    }
    if let Some(system) = &view.system {
        content_segments(system, &mut out, Loc::System);
    }
    out.push(owned(Loc::Config, config_text(view.thinking.as_ref(), view)));
    for (index, message) in view.messages.iter().flatten().enumerate() {
        let m = index as u32;
        out.push(owned(Loc::Role(m), json_string(message.role.as_str())));
        content_segments(&message.content, &mut out, |b| Loc::Block(m, b));
    }
    out
}

fn content_segments(content: &ContentView, out: &mut Vec<Segment<'static>>, loc: impl Fn(u32) -> Loc) {
    match content {
        ContentView::Text(text) => {
            let block = serde_json::json!({"type": "text", "text": text});
            out.push(Segment { loc: loc(0), bytes: Cow::Owned(block.to_string()) });
        }
        ContentView::Blocks(blocks) => {
            for (index, block) in blocks.iter().enumerate() {
                out.push(Segment { loc: loc(index as u32), bytes: Cow::Owned(unmarked(block.get())) });
            }
        }
    }
}

fn unmarked(raw: &str) -> String {
    // Cutting a member cuts at ASCII bytes, so valid UTF-8 stays valid (lossy never changes it).
    String::from_utf8_lossy(&without_own_marker(raw)).into_owned()
}

impl<'a> Segment<'a> {
    /// The model, as the first segment of a request in cache order.
    pub fn model(model: &str) -> Segment<'static> {
        Segment { loc: Loc::Model, bytes: Cow::Owned(json_string(model)) }
    }

    /// The parameters that join the cache key (thinking, effort, tool choice), as one segment.
    pub fn config(thinking: Option<&forkcache_wire::Thinking>, view: &RequestView) -> Segment<'static> {
        Segment { loc: Loc::Config, bytes: Cow::Owned(config_text(thinking, view)) }
    }

    /// Message `index`'s role.
    pub fn role(index: u32, role: &str) -> Segment<'static> {
        Segment { loc: Loc::Role(index), bytes: Cow::Owned(json_string(role)) }
    }

    /// A block's bytes (without its marker), borrowed.
    pub fn borrowed(loc: Loc, json: &'a str) -> Segment<'a> {
        Segment { loc, bytes: Cow::Borrowed(json) }
    }
}

fn config_text(thinking: Option<&forkcache_wire::Thinking>, view: &RequestView) -> String {
    let thinking = thinking.map_or("none".to_string(), |t| match t.budget_tokens {
        Some(budget) => format!("{}:{budget}", t.kind),
        None => t.kind.clone(),
    });
    let effort = view.output_config.as_ref().and_then(|c| c.effort.clone()).unwrap_or_default();
    let choice = view.tool_choice.as_ref().map_or("auto".to_string(), |c| c.kind.clone());
    format!("thinking={thinking};effort={effort};tool_choice={choice}")
}

#[allow(clippy::expect_used)] // serializing a string cannot fail
fn json_string(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}

/// Total bytes of a request in cache order.
pub fn total_bytes(segments: &[Segment]) -> u64 {
    segments.iter().map(|s| s.bytes.len() as u64).sum()
}

/// Bytes A and B share from the start, in cache order.
pub fn common_prefix_bytes(a: &[Segment], b: &[Segment]) -> u64 {
    let mut shared = 0u64;
    for (x, y) in a.iter().zip(b) {
        if x.same(y) {
            shared += x.bytes.len() as u64;
            continue;
        }
        let common = common_len(x.bytes.as_bytes(), y.bytes.as_bytes());
        shared += common as u64;
        if x.loc != y.loc || common < x.bytes.len() || x.bytes.len() != y.bytes.len() {
            break;
        }
    }
    shared
}

/// The first place B's cache prefix leaves A's; `None` when they are identical. B is the later
/// request, the one being explained: where the two part at different blocks (a block added or
/// removed before the same content), the path is B's block, so it names a place in the request
/// the reader is looking at — for an added tool, that tool.
#[allow(clippy::expect_used)] // past the shorter list one side still has segments
pub fn first_divergence(a: &[Segment], b: &[Segment]) -> Option<Divergence> {
    let mut offset = 0u64;
    for index in 0..a.len().max(b.len()) {
        let (Some(x), Some(y)) = (a.get(index), b.get(index)) else {
            let longer = a.get(index).or(b.get(index)).expect("one side goes on");
            return Some(extension(offset, longer, a.get(index).is_some()));
        };
        if x.same(y) {
            offset += x.bytes.len() as u64;
            continue;
        }
        return Some(diverge_in(offset, x, y));
    }
    None
}

fn extension(offset: u64, longer: &Segment, a_is_longer: bool) -> Divergence {
    let more = snippet(&longer.bytes, 0);
    let (a, b) = if a_is_longer { (more, String::new()) } else { (String::new(), more) };
    Divergence {
        byte_offset: offset,
        path: longer.loc.path(),
        dimension: longer.loc.part(),
        cause: DivergenceCause::Extension,
        before: String::new(),
        a,
        b,
    }
}

fn diverge_in(offset: u64, x: &Segment, y: &Segment) -> Divergence {
    let common = floor_char(&x.bytes, common_len(x.bytes.as_bytes(), y.bytes.as_bytes()));
    let inner = inner_path(&x.bytes, &y.bytes);
    let path = if x.loc == y.loc { format!("{}{inner}", y.loc.path()) } else { y.loc.path() };
    let start = floor_char(&x.bytes, common.saturating_sub(CONTEXT_BYTES));
    Divergence {
        byte_offset: offset + common as u64,
        path,
        dimension: x.loc.part().min(y.loc.part()),
        cause: classify(x, y),
        before: x.bytes[start..common].to_string(),
        a: snippet(&x.bytes, common),
        b: snippet(&y.bytes, common),
    }
}

fn floor_char(text: &str, mut index: usize) -> usize {
    index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

fn snippet(text: &str, from: usize) -> String {
    let end = floor_char(text, from + CONTEXT_BYTES);
    text[from..end].to_string()
}

fn classify(x: &Segment, y: &Segment) -> DivergenceCause {
    let (a, b) = (serde_json::from_str::<Value>(&x.bytes).ok(), serde_json::from_str::<Value>(&y.bytes).ok());
    if let (Some(a), Some(b)) = (&a, &b) {
        if a == b {
            return if keys_in_order(a) == keys_in_order(b) {
                DivergenceCause::Formatting
            } else {
                DivergenceCause::KeyOrder
            };
        }
        let blocks = matches!((x.loc, y.loc), (Loc::Block(..), Loc::Block(..)));
        if blocks && a.get("type") != b.get("type") {
            return DivergenceCause::BlockType;
        }
    }
    match x.loc.part().min(y.loc.part()) {
        Part::Model => DivergenceCause::Model,
        Part::Config => DivergenceCause::Config,
        Part::Tools => DivergenceCause::ToolDefinition,
        Part::System => DivergenceCause::SystemText,
        Part::Messages => message_cause(x, a.as_ref()),
    }
}

fn message_cause(x: &Segment, a: Option<&Value>) -> DivergenceCause {
    if matches!(x.loc, Loc::Role(_)) {
        return DivergenceCause::Role;
    }
    match a.and_then(|v| v.get("type")).and_then(Value::as_str) {
        Some("tool_use") => DivergenceCause::ToolUse,
        Some("tool_result") => DivergenceCause::ToolResult,
        Some("text") if x.bytes.contains(&format!("<{FORK_BOILERPLATE_TAG}>")) => DivergenceCause::Directive,
        _ => DivergenceCause::Text,
    }
}

/// Every key of a JSON value, depth first, in the order written.
fn keys_in_order(value: &Value) -> Vec<String> {
    let mut keys = Vec::new();
    collect_keys(value, &mut keys);
    keys
}

fn collect_keys(value: &Value, keys: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                keys.push(key.clone());
                collect_keys(inner, keys);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| collect_keys(item, keys)),
        _ => {}
    }
}

/// `.text`, `.input.prompt`, `.content[1]`: where inside two blocks the first difference lies.
fn inner_path(a: &str, b: &str) -> String {
    match (serde_json::from_str::<Value>(a), serde_json::from_str::<Value>(b)) {
        (Ok(a), Ok(b)) => {
            let mut path = String::new();
            walk(&a, &b, &mut path);
            path
        }
        _ => String::new(),
    }
}

fn walk(a: &Value, b: &Value, path: &mut String) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for ((kx, vx), (ky, vy)) in x.iter().zip(y.iter()) {
                if kx != ky {
                    path.push_str(&format!(".{kx}"));
                    return;
                }
                if vx != vy {
                    path.push_str(&format!(".{kx}"));
                    return walk(vx, vy, path);
                }
            }
            if let Some(extra) = x.keys().nth(y.len()).or(y.keys().nth(x.len())) {
                path.push_str(&format!(".{extra}"));
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            if let Some(index) = (0..x.len().max(y.len())).find(|&i| x.get(i) != y.get(i)) {
                path.push_str(&format!("[{index}]"));
                if let (Some(vx), Some(vy)) = (x.get(index), y.get(index)) {
                    walk(vx, vy, path);
                }
            }
        }
        _ => {}
    }
}

/// Byte identity across one spawn's sibling requests.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SiblingCheck {
    /// Requests compared.
    pub siblings: usize,
    /// Bytes every sibling shares from the start, in cache order.
    pub common_prefix_bytes: u64,
    /// The longest sibling's size.
    pub longest_bytes: u64,
    /// The earliest place any sibling leaves the first one.
    pub first_divergence: Option<Divergence>,
    /// Blocks that differ from the first sibling's, in any sibling (sorted, distinct).
    pub differing_blocks: Vec<String>,
    /// Every difference lies in a directive block or after it in the last message.
    pub only_directive: bool,
    /// Every sibling is a strict extension of the parent's last request (ignoring markers).
    pub extends_parent: Option<bool>,
    /// Some message block declares its size (`forkcache_tokens`): its bytes are stand-in text,
    /// so the share of bytes in common says nothing about the tokens priced.
    pub declared_sizes: bool,
}

impl SiblingCheck {
    /// Common prefix ÷ longest sibling, in percent (display only).
    pub fn identical_pct(&self) -> f64 {
        if self.longest_bytes == 0 {
            100.0
        } else {
            100.0 * self.common_prefix_bytes as f64 / self.longest_bytes as f64
        }
    }

    /// What was compared, for people: the byte share when the bytes are the content, the byte
    /// counts alone (no percentage) when block sizes are declared.
    pub fn identity_summary(&self) -> String {
        let (common, longest) = (self.common_prefix_bytes, self.longest_bytes);
        if self.declared_sizes {
            format!(
                "{common} of {longest} body bytes in common (block sizes are declared, so the bytes are stand-in text: no share of what is priced)"
            )
        } else {
            format!("{:.2}% byte-identical ({common} of {longest} bytes)", self.identical_pct())
        }
    }
}

/// Checks sibling request bodies against each other and against the parent's last request.
pub fn check_sibling_bodies(bodies: &[String], parent: Option<&str>) -> Result<SiblingCheck, ApiError> {
    let laid: Vec<Vec<Segment>> = bodies.iter().map(|b| cache_order(b)).collect::<Result<_, _>>()?;
    let parent = parent.map(cache_order).transpose()?;
    Ok(check_siblings(&laid, parent.as_deref()))
}

/// Checks siblings (in cache order) against each other and against the parent's last request.
pub fn check_siblings(laid: &[Vec<Segment>], parent: Option<&[Segment]>) -> SiblingCheck {
    let first = laid.first().map(Vec::as_slice).unwrap_or(&[]);
    let common = laid.iter().map(|s| common_prefix_bytes(first, s)).min().unwrap_or(0);
    let divergence =
        laid.iter().skip(1).filter_map(|s| first_divergence(first, s)).min_by_key(|d| d.byte_offset);
    let mut differing: Vec<String> = laid.iter().skip(1).flat_map(|s| differing_paths(first, s)).collect();
    differing.sort();
    differing.dedup();
    let only_directive =
        laid.iter().all(|s| s.len() == first.len()) && differing_blocks_after_directive(first, &differing);
    let extends_parent = parent.map(|parent| laid.iter().all(|s| strict_extension(parent, s)));
    let declared = format!("\"{}\":", crate::prompt::DECLARED_TOKENS_KEY);
    // Stand-in system and tools are the same for every sibling; messages are what they share.
    let declared_sizes = laid
        .iter()
        .flatten()
        .any(|segment| matches!(segment.loc, Loc::Block(..)) && segment.bytes.contains(declared.as_str()));
    SiblingCheck {
        siblings: laid.len(),
        common_prefix_bytes: common,
        longest_bytes: laid.iter().map(|s| total_bytes(s)).max().unwrap_or(0),
        first_divergence: divergence,
        differing_blocks: differing,
        only_directive,
        extends_parent,
        declared_sizes,
    }
}

#[allow(clippy::expect_used)] // the index is below the longer length
fn differing_paths(a: &[Segment], b: &[Segment]) -> Vec<String> {
    let count = a.len().max(b.len());
    let same = |i: usize| matches!((a.get(i), b.get(i)), (Some(x), Some(y)) if x.same(y));
    (0..count)
        .filter(|&i| !same(i))
        .map(|i| a.get(i).or(b.get(i)).expect("index below the longer length").loc.path())
        .collect()
}

/// True when the first differing block is a directive and every other one follows it in the
/// same (last) message.
fn differing_blocks_after_directive(first: &[Segment], differing: &[String]) -> bool {
    let Some(directive) = first.iter().position(|s| s.bytes.contains(&format!("<{FORK_BOILERPLATE_TAG}>")))
    else {
        return differing.is_empty();
    };
    let directive_message = first[directive].loc.message();
    differing.iter().all(|path| {
        let index = first.iter().position(|s| &s.loc.path() == path);
        index.is_some_and(|i| i >= directive && first[i].loc.message() == directive_message)
    })
}

/// Whether `longer` starts with every piece of `prefix` and goes on.
pub fn strict_extension(prefix: &[Segment], longer: &[Segment]) -> bool {
    longer.len() > prefix.len() && prefix.iter().zip(longer).all(|(a, b)| a.same(b))
}

/// `explain A B`: how B's cache prefix relates to A's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Explanation {
    /// A's size in cache order.
    pub a_bytes: u64,
    /// B's size in cache order.
    pub b_bytes: u64,
    /// Bytes they share from the start.
    pub common_prefix_bytes: u64,
    /// Where they part; `None` when identical (markers aside).
    pub divergence: Option<Divergence>,
}

/// Compares two request bodies in cache order.
pub fn explain(a: &str, b: &str) -> Result<Explanation, ApiError> {
    let (a, b) = (cache_order(a)?, cache_order(b)?);
    Ok(Explanation {
        a_bytes: total_bytes(&a),
        b_bytes: total_bytes(&b),
        common_prefix_bytes: common_prefix_bytes(&a, &b),
        divergence: first_divergence(&a, &b),
    })
}

impl Explanation {
    /// A few lines for people.
    pub fn to_text(&self) -> String {
        let share = if self.b_bytes == 0 {
            100.0
        } else {
            100.0 * self.common_prefix_bytes as f64 / self.b_bytes as f64
        };
        let mut out = format!(
            "A: {} bytes, B: {} bytes in cache order (tools → system → messages, cache_control ignored)\ncommon prefix: {} bytes ({share:.2}% of B)\n",
            self.a_bytes, self.b_bytes, self.common_prefix_bytes
        );
        match &self.divergence {
            None => out.push_str("identical: B reads everything A cached\n"),
            Some(d) => {
                out.push_str(&format!(
                    "first divergence at byte {}: {} (dimension {}, cause {})\n  before: …{}\n  A:      {}…\n  B:      {}…\n",
                    d.byte_offset,
                    d.path,
                    d.dimension.name(),
                    d.cause.name(),
                    d.before,
                    d.a,
                    d.b
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(messages: &str) -> String {
        format!(r#"{{"model":"m","max_tokens":5,"messages":{messages}}}"#)
    }

    #[test]
    fn a_percentage_only_when_the_bytes_are_the_content() {
        let text = |t: &str| format!(r#"[{{"role":"user","content":[{{"type":"text","text":"{t}"}}]}}]"#);
        let declared = |t: &str| {
            format!(
                r#"[{{"role":"user","content":[{{"type":"text","text":"{t}","forkcache_tokens":9000}}]}}]"#
            )
        };
        let check = |bodies: [String; 2]| check_sibling_bodies(&bodies, None).unwrap();
        let plain = check([body(&text("same start, then a")), body(&text("same start, then b"))]);
        assert!(!plain.declared_sizes);
        assert!(plain.identity_summary().contains("% byte-identical"), "{}", plain.identity_summary());
        let stand_in = check([body(&declared("<history a>")), body(&declared("<history b>"))]);
        assert!(stand_in.declared_sizes);
        let summary = stand_in.identity_summary();
        assert!(!summary.contains('%') && summary.contains("block sizes are declared"), "{summary}");
    }

    #[test]
    fn names_the_json_path_and_offset_of_a_text_change() {
        let a = cache_order(&body(r#"[{"role":"user","content":[{"type":"text","text":"hello world"}]}]"#))
            .unwrap();
        let b = cache_order(&body(r#"[{"role":"user","content":[{"type":"text","text":"hello there"}]}]"#))
            .unwrap();
        let d = first_divergence(&a, &b).unwrap();
        assert_eq!(d.path, "messages[0].content[0].text");
        assert_eq!(d.cause, DivergenceCause::Text);
        // "m" (3 bytes) + config "thinking=none;effort=;tool_choice=auto" (38) + "user" (6)
        // + {"type":"text","text":"hello  (29) = 76.
        assert_eq!(d.byte_offset, 3 + 38 + 6 + 29);
        assert_eq!(d.a, "world\"}");
        assert_eq!(d.b, "there\"}");
    }

    #[test]
    fn a_block_added_before_the_same_content_is_named_on_the_later_requests_side() {
        let tool = |name: &str| format!(r#"{{"name":"{name}","input_schema":{{"type":"object"}}}}"#);
        let with_tools = |tools: &[&str]| {
            let tools: Vec<String> = tools.iter().map(|name| tool(name)).collect();
            format!(
                r#"{{"model":"m","max_tokens":5,"tools":[{}],"system":"s","messages":[{{"role":"user","content":"hi"}}]}}"#,
                tools.join(",")
            )
        };
        let earlier = cache_order(&with_tools(&["Read"])).unwrap();
        let later = cache_order(&with_tools(&["Read", "Grep"])).unwrap();
        // The earlier request has `system` where the later one has its new tool: the later
        // request's path names the tool it added.
        let added = first_divergence(&earlier, &later).unwrap();
        assert_eq!((added.path.as_str(), added.dimension), ("tools[1]", Part::Tools));
        // Read the other way, the request that dropped the tool goes on with its system prompt.
        let removed = first_divergence(&later, &earlier).unwrap();
        assert_eq!(removed.path, "system[0]");
    }

    #[test]
    fn key_order_and_markers() {
        let a = cache_order(&body(r#"[{"role":"user","content":[{"type":"text","text":"x","cache_control":{"type":"ephemeral"}}]}]"#)).unwrap();
        let b = cache_order(&body(r#"[{"role":"user","content":[{"type":"text","text":"x"}]}]"#)).unwrap();
        assert_eq!(first_divergence(&a, &b), None, "markers are not part of the prefix");
        let c = cache_order(&body(r#"[{"role":"user","content":[{"text":"x","type":"text"}]}]"#)).unwrap();
        assert_eq!(first_divergence(&b, &c).unwrap().cause, DivergenceCause::KeyOrder);
    }
}
