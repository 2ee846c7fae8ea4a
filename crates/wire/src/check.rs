//! The API's own checks of a request body, one function per rule: what the real API refuses
//! with a 400 (or a 404) before it prices anything. Each error names the field path as the API
//! spells it (`messages.3.content.0`).
//!
//! Wording: where the reference (`anthropic-prompt-caching.md`, the API reference) or observed
//! API answers give the text, it is used verbatim and the rule says so; the API's validation
//! layer answers in pydantic's phrasing (`Field required`, `Input should be …`, `Input tag …`,
//! as the observed `Extra inputs are not permitted` and `model: Field required` are), so rules
//! whose exact text is not documented use that phrasing and say "wording not known".
//!
//! Accepted on purpose (real traffic the API answered has them): a top-level `cache_control`,
//! `role: "system"` messages, and the engine's documented extension field `forkcache_tokens`
//! on any block (these checks never refuse a field they do not know inside a block).

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};

use serde::Deserialize;

use super::beta::Betas;
use super::error::{ApiError, ErrorKind};
use super::raw::RawJson;
use super::request::{ContentView, MessageView, RequestView, Role};

/// The content block types the API accepts in a message, from the Python SDK's
/// `content_block_param.py` and the beta params (`beta_content_block_param.py`), as listed in
/// the reference §4.2 and §4.3 (2026-08), plus the beta MCP connector's `mcp_tool_use` and
/// `mcp_tool_result` (`beta_mcp_tool_use_block_param.py`). Kept sorted: the error lists them.
pub const MESSAGE_BLOCK_TYPES: &[&str] = &[
    "bash_code_execution_tool_result",
    "code_execution_tool_result",
    "container_upload",
    "document",
    "image",
    "mcp_tool_result",
    "mcp_tool_use",
    "mid_conv_system",
    "redacted_thinking",
    "search_result",
    "server_tool_use",
    "text",
    "text_editor_code_execution_tool_result",
    "thinking",
    "tool_reference",
    "tool_result",
    "tool_search_tool_result",
    "tool_use",
    "web_fetch_tool_result",
    "web_search_tool_result",
];

/// The block types a `tool_result`'s `content` array may hold (reference §4.2, SDK
/// `tool_result_block_param.py`, 2026-08).
pub const TOOL_RESULT_BLOCK_TYPES: &[&str] =
    &["document", "image", "search_result", "text", "tool_reference"];

/// `tool_choice.type` values (reference §4.2).
const TOOL_CHOICE_TYPES: &[&str] = &["any", "auto", "none", "tool"];

/// `service_tier` values (reference §4.2).
const SERVICE_TIERS: &[&str] = &["auto", "standard_only"];

/// The smallest extended-thinking budget (reference §3.1: N ≥ 1024).
pub const MIN_THINKING_BUDGET: u64 = 1024;

/// The beta under which a thinking budget may exceed `max_tokens` (reference §3.1: "except with
/// interleaved thinking").
const INTERLEAVED_THINKING: &str = "interleaved-thinking-2025-05-14";

/// Models that refuse a non-default `temperature`, `top_p` or `top_k` (reference §4.2, from the
/// release notes: "On Opus 4.7 and 4.8 … returns 400").
const FIXED_SAMPLING_MODELS: &[&str] = &["claude-opus-4-7", "claude-opus-4-8"];

/// Every rule of a `POST /v1/messages` body, in the order the API reports them: the top-level
/// parameters, then the tools, then the messages.
pub fn check_request(view: &RequestView, betas: &Betas) -> Result<(), ApiError> {
    check_all(view, betas, None)
}

/// The memo keys of a request's tools, system blocks and message blocks, in order (one per
/// block, one per string content): the engine's `BlockKeys`, which hash each block's bytes.
#[derive(Clone, Copy, Debug, Default)]
pub struct CheckKeys<'k> {
    /// One per tool definition.
    pub tools: &'k [u128],
    /// One per system block (one for a string system prompt).
    pub system: &'k [u128],
    /// One per message block (one per message whose content is a string).
    pub messages: &'k [u128],
}

/// [`check_request`], remembering in `memo` the tools, system blocks and message blocks that
/// passed, by their memo keys, so that the same bytes in a later request are not read again: an
/// agent resends its tools, system prompt and whole conversation with every request. The answer
/// is [`check_request`]'s.
pub fn check_request_remembering(
    view: &RequestView,
    betas: &Betas,
    keys: CheckKeys,
    memo: &CheckMemo,
) -> Result<(), ApiError> {
    check_all(view, betas, Some((keys, memo)))
}

fn check_all(
    view: &RequestView,
    betas: &Betas,
    memo: Option<(CheckKeys, &CheckMemo)>,
) -> Result<(), ApiError> {
    check_sampling_ranges(view)?;
    check_fixed_sampling(view)?;
    check_thinking_budget(view, betas)?;
    check_tool_choice(view)?;
    check_metadata(view)?;
    check_service_tier(view)?;
    check_cache_control("cache_control", view.cache_control)?;
    check_tools(view, memo.map(|(keys, memo)| (keys.tools, memo)))?;
    check_system(view, memo.map(|(keys, memo)| (keys.system, memo)))?;
    check_messages(view, memo.map(|(keys, memo)| (keys.messages, memo)))
}

/// A memo and the keys of the blocks being checked against it.
type Remembering<'m> = Option<(&'m [u128], &'m CheckMemo)>;

/// The memo's entry for block `index`, when it knows it passed.
fn known(memo: Remembering, index: usize) -> Option<Known> {
    memo.and_then(|(keys, memo)| memo.known(*keys.get(index)?))
}

/// Notes in the memo that block `index` passed.
fn remember(memo: Remembering, index: usize, known: Known) {
    if let Some((keys, memo)) = memo {
        if let Some(&key) = keys.get(index) {
            memo.remember(key, known);
        }
    }
}

/// Tools, system blocks and message blocks that passed every rule of their own, by memo key,
/// with what the later rules need of them (a tool's name, a call's or a result's id). At most
/// [`CHECK_MEMO_BLOCKS`]; full, it starts over. Clones share one memo: a replay's workers read
/// alternate lines of one conversation, a server's workers its connections' requests.
#[derive(Clone, Debug, Default)]
pub struct CheckMemo {
    blocks: Arc<RwLock<HashMap<u128, Known>>>,
}

/// The blocks a [`CheckMemo`] holds before it starts over (a few tens of MB at most).
pub const CHECK_MEMO_BLOCKS: usize = 1 << 18;

/// What the later rules need of a block that passed its own: a tool's name (names are unique),
/// a call's or a result's id (calls pair with results).
#[derive(Clone, Debug)]
enum Known {
    Tool(Box<str>),
    ToolUse(Box<str>),
    ToolResult(Box<str>),
    Other,
}

impl Known {
    fn of(block: &BlockHead) -> Known {
        match block.kind.as_deref() {
            Some("tool_use") => Known::ToolUse(block.id.as_deref().unwrap_or_default().into()),
            Some("tool_result") => Known::ToolResult(block.tool_use_id.as_deref().unwrap_or_default().into()),
            _ => Known::Other,
        }
    }
}

impl CheckMemo {
    fn known(&self, key: u128) -> Option<Known> {
        self.blocks.read().unwrap_or_else(PoisonError::into_inner).get(&key).cloned()
    }

    fn remember(&self, key: u128, known: Known) {
        let mut blocks = self.blocks.write().unwrap_or_else(PoisonError::into_inner);
        if blocks.len() >= CHECK_MEMO_BLOCKS {
            blocks.clear();
        }
        blocks.insert(key, known);
    }
}

/// `POST /v1/messages/count_tokens`: the body's rules, plus a non-empty `messages`. The model's
/// 404 is the caller's, which knows the price table ([`unknown_model`]).
pub fn check_count_tokens(view: &RequestView) -> Result<(), ApiError> {
    if view.require_messages()?.is_empty() {
        return Err(ApiError::invalid("messages: at least one message is required"));
    }
    check_request(view, Betas::NONE)
}

/// The 404 for a model the API does not serve: `model: <id>`, the text the serve path already
/// answers for `/v1/messages`.
pub fn unknown_model(model: &str) -> ApiError {
    ApiError::new(ErrorKind::NotFound, format!("model: {model}"))
}

/// `temperature` and `top_p` within [0, 1]. Wording not known (pydantic's bound messages).
fn check_sampling_ranges(view: &RequestView) -> Result<(), ApiError> {
    for (field, value) in [("temperature", view.temperature), ("top_p", view.top_p)] {
        match value {
            Some(v) if v < 0.0 => {
                return Err(ApiError::invalid(format!(
                    "{field}: Input should be greater than or equal to 0"
                )));
            }
            Some(v) if v > 1.0 => {
                return Err(ApiError::invalid(format!("{field}: Input should be less than or equal to 1")));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Opus 4.7 and 4.8 refuse sampling parameters other than the defaults (temperature 1; `top_p`
/// and `top_k` have no documented default there, so any value is refused). Wording not known.
fn check_fixed_sampling(view: &RequestView) -> Result<(), ApiError> {
    let model = view.model.as_deref().unwrap_or_default();
    if !FIXED_SAMPLING_MODELS.iter().any(|family| model.starts_with(family)) {
        return Ok(());
    }
    let set = [
        ("temperature", view.temperature.is_some_and(|t| t != 1.0)),
        ("top_p", view.top_p.is_some()),
        ("top_k", view.top_k.is_some()),
    ];
    match set.iter().find(|(_, non_default)| *non_default) {
        Some((field, _)) => {
            Err(ApiError::invalid(format!("{field}: only the default value is supported for {model}")))
        }
        None => Ok(()),
    }
}

/// Extended thinking: `budget_tokens` present, at least 1,024, and below `max_tokens` (unless
/// interleaved thinking, or a `max_tokens: 0` pre-warm, which generates nothing). The first two
/// in pydantic's wording; the third is the API's observed text.
fn check_thinking_budget(view: &RequestView, betas: &Betas) -> Result<(), ApiError> {
    let Some(thinking) = view.thinking.as_ref().filter(|t| t.kind == "enabled") else {
        return Ok(());
    };
    let Some(budget) = thinking.budget_tokens else {
        return Err(ApiError::invalid("thinking.enabled.budget_tokens: Field required"));
    };
    if budget < MIN_THINKING_BUDGET {
        return Err(ApiError::invalid(format!(
            "thinking.enabled.budget_tokens: Input should be greater than or equal to {MIN_THINKING_BUDGET}"
        )));
    }
    let max_tokens = view.max_tokens.unwrap_or(0);
    if max_tokens > 0 && budget >= max_tokens && !betas.has(INTERLEAVED_THINKING) {
        return Err(ApiError::invalid(
            "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size",
        ));
    }
    Ok(())
}

/// `tool_choice.type` is one of the four documented. pydantic's wording for a tagged union.
fn check_tool_choice(view: &RequestView) -> Result<(), ApiError> {
    match &view.tool_choice {
        Some(choice) if !TOOL_CHOICE_TYPES.contains(&choice.kind.as_str()) => {
            Err(ApiError::invalid(unknown_tag("tool_choice", &choice.kind, TOOL_CHOICE_TYPES)))
        }
        _ => Ok(()),
    }
}

/// `metadata.user_id` is a string (or null). pydantic's wording.
fn check_metadata(view: &RequestView) -> Result<(), ApiError> {
    let user_id = view.metadata.as_ref().and_then(|m| m.user_id);
    match user_id {
        Some(raw) if !raw.get().starts_with('"') && raw.get() != "null" => {
            Err(ApiError::invalid("metadata.user_id: Input should be a valid string"))
        }
        _ => Ok(()),
    }
}

/// `service_tier` is `auto` or `standard_only`. pydantic's wording for a literal.
fn check_service_tier(view: &RequestView) -> Result<(), ApiError> {
    match view.service_tier.as_deref() {
        Some(tier) if !SERVICE_TIERS.contains(&tier) => {
            Err(ApiError::invalid("service_tier: Input should be 'auto' or 'standard_only'"))
        }
        _ => Ok(()),
    }
}

/// A `cache_control` at `path` is `{"type": "ephemeral", "ttl"?}`: `{}` lacks its tag. The
/// engine's marker validation refused `{}` before these checks, in the same words (kept, so
/// that strict and lenient answer one way).
fn check_cache_control(path: &str, raw: Option<RawJson>) -> Result<(), ApiError> {
    let Some(raw) = raw.filter(|raw| raw.get() != "null") else {
        return Ok(());
    };
    #[derive(Deserialize)]
    struct Marker<'a> {
        #[serde(rename = "type", borrow)]
        kind: Option<Cow<'a, str>>,
    }
    let marker: Marker = serde_json::from_str(raw.get())
        .map_err(|_| ApiError::invalid(format!("{path}: Input should be a valid dictionary")))?;
    match marker.kind.as_deref() {
        None => Err(ApiError::invalid(format!("{path}.type: Input should be 'ephemeral'"))),
        Some("ephemeral") => Ok(()),
        Some(other) => Err(ApiError::invalid(unknown_tag(path, other, &["ephemeral"]))),
    }
}

/// What these checks read of a tool definition.
#[derive(Deserialize)]
struct ToolHead<'a> {
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    cache_control: Option<RawJson<'a>>,
}

/// Every tool has a name, no two the same name. The duplicate's text is the API's observed
/// "Tool names must be unique."; the missing name's is pydantic's.
fn check_tools(view: &RequestView, memo: Remembering) -> Result<(), ApiError> {
    let mut names = BTreeSet::new();
    for (index, raw) in view.tools.iter().enumerate() {
        // A tool the memo knows passed its own rules; else its head, read.
        let (name, fresh) = match known(memo, index) {
            Some(Known::Tool(name)) => (Cow::Owned(name.into()), None),
            _ => {
                let tool: ToolHead = serde_json::from_str(raw.get()).map_err(|_| {
                    ApiError::invalid(format!("tools.{index}: Input should be a valid dictionary"))
                })?;
                let Some(name) = tool.name else {
                    return Err(ApiError::invalid(format!("tools.{index}.name: Field required")));
                };
                (name, Some(tool.cache_control))
            }
        };
        if names.contains(&name) {
            return Err(ApiError::invalid("tools: Tool names must be unique."));
        }
        if let Some(cache_control) = fresh {
            check_cache_control(&format!("tools.{index}.cache_control"), cache_control)?;
            remember(memo, index, Known::Tool(name.as_ref().into()));
        }
        names.insert(name);
    }
    Ok(())
}

/// What these checks read of a content block; every other field is left alone.
#[derive(Deserialize)]
struct BlockHead<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    tool_use_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    cache_control: Option<RawJson<'a>>,
    #[serde(default, borrow)]
    source: Option<RawJson<'a>>,
    #[serde(default, borrow)]
    content: Option<RawJson<'a>>,
}

/// Where a block is, as an error names it: written out only for an error, since every block of
/// every request is read.
#[derive(Clone, Copy, Debug)]
enum BlockPath {
    /// `system.{index}`.
    System(usize),
    /// `messages.{message}.content.{block}`.
    Message(usize, usize),
    /// `messages.{message}.content.{block}.content.{index}`: a block of a tool result's content.
    InResult(usize, usize, usize),
}

impl fmt::Display for BlockPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BlockPath::System(index) => write!(f, "system.{index}"),
            BlockPath::Message(message, block) => write!(f, "messages.{message}.content.{block}"),
            BlockPath::InResult(message, block, index) => {
                write!(f, "messages.{message}.content.{block}.content.{index}")
            }
        }
    }
}

/// Reads the head of the block at `path`, checking its type against `allowed`, its
/// `cache_control`, and an image's base64 data.
fn read_block<'a>(path: BlockPath, raw: RawJson<'a>, allowed: &[&str]) -> Result<BlockHead<'a>, ApiError> {
    let block: BlockHead = serde_json::from_str(raw.get())
        .map_err(|_| ApiError::invalid(format!("{path}: Input should be a valid dictionary")))?;
    let Some(kind) = block.kind.as_deref() else {
        return Err(ApiError::invalid(format!("{path}.type: Field required")));
    };
    if !allowed.contains(&kind) {
        return Err(ApiError::invalid(unknown_tag(&path.to_string(), kind, allowed)));
    }
    if block.cache_control.is_some() {
        check_cache_control(&format!("{path}.cache_control"), block.cache_control)?;
    }
    if kind == "image" {
        check_image_source(&path.to_string(), block.source)?;
    }
    Ok(block)
}

/// `system`'s blocks are text blocks (reference §4.2).
fn check_system(view: &RequestView, memo: Remembering) -> Result<(), ApiError> {
    if let Some(ContentView::Blocks(blocks)) = &view.system {
        for (index, raw) in blocks.iter().enumerate() {
            if known(memo, index).is_none() {
                read_block(BlockPath::System(index), *raw, &["text"])?;
                remember(memo, index, Known::Other);
            }
        }
    }
    Ok(())
}

/// A `tool_use` id, where it was found.
struct ToolUse<'a> {
    id: Cow<'a, str>,
    path: BlockPath,
}

/// A turn as the API sees it: consecutive messages of one role merged (reference §4.2:
/// "Consecutive turns with the same role are merged"), `role: "system"` messages set aside (they
/// carry no tool calls, and real traffic places them between a turn's calls and results).
struct Turn<'a> {
    role: Role,
    /// `tool_use` blocks, in order.
    tool_uses: Vec<ToolUse<'a>>,
    /// `tool_result` blocks that come first in the turn: their `tool_use_id` and path.
    tool_results: Vec<ToolUse<'a>>,
    /// `tool_result` blocks after another block of the turn (text, an image): the API answers
    /// only results that come first, so their calls count as unanswered.
    late_results: Vec<ToolUse<'a>>,
    /// Whether a block other than a `tool_result` was seen in the turn.
    saw_other: bool,
}

/// Every message block's type, cache marker and image data; then the pairing of tool calls
/// and results between consecutive turns.
fn check_messages(view: &RequestView, memo: Remembering) -> Result<(), ApiError> {
    let Some(messages) = view.messages.as_deref() else {
        return Ok(());
    };
    let turns = read_turns(messages, memo)?;
    if let Some(stray) =
        turns.first().and_then(|first| first.tool_results.first().or(first.late_results.first()))
    {
        return Err(stray_result(stray));
    }
    for pair in turns.windows(2) {
        check_results_follow(&pair[0], &pair[1])?;
    }
    Ok(())
}

/// The messages as turns, each block checked on the way (a block `memo` knows passed is not
/// read again).
fn read_turns<'a>(messages: &[MessageView<'a>], memo: Remembering) -> Result<Vec<Turn<'a>>, ApiError> {
    let mut turns: Vec<Turn> = Vec::new();
    // The memo key of the message's first block: a string content has one key, as a block.
    let mut first_key = 0;
    for (index, message) in messages.iter().enumerate() {
        let ContentView::Blocks(blocks) = &message.content else {
            first_key += 1;
            if message.role != Role::System {
                push_turn(&mut turns, message.role);
                if let Some(turn) = turns.last_mut() {
                    turn.saw_other = true;
                }
            }
            continue;
        };
        if message.role != Role::System {
            push_turn(&mut turns, message.role);
        }
        for (position, raw) in blocks.iter().enumerate() {
            let path = BlockPath::Message(index, position);
            // A tool's entry is a tool's (its key hashes another context), never a block's.
            let known = known(memo, first_key + position).filter(|known| !matches!(known, Known::Tool(_)));
            let block = match known {
                Some(_) => None,
                None => Some(read_block(path, *raw, MESSAGE_BLOCK_TYPES)?),
            };
            let turn = match (message.role, turns.last_mut()) {
                (Role::System, _) | (_, None) => continue,
                (_, Some(turn)) => turn,
            };
            match (known, block) {
                (Some(known), _) => note_known(turn, known, path),
                (None, Some(block)) => {
                    let known = Known::of(&block);
                    note_tool_block(turn, block, path)?;
                    remember(memo, first_key + position, known);
                }
                (None, None) => {}
            }
        }
        first_key += blocks.len();
    }
    Ok(turns)
}

/// Records a block whose own rules passed in an earlier request.
fn note_known(turn: &mut Turn, known: Known, path: BlockPath) {
    match known {
        Known::ToolUse(id) => turn.tool_uses.push(ToolUse { id: Cow::Owned(id.into()), path }),
        Known::ToolResult(id) => {
            let results = if turn.saw_other { &mut turn.late_results } else { &mut turn.tool_results };
            results.push(ToolUse { id: Cow::Owned(id.into()), path });
        }
        Known::Other | Known::Tool(_) => turn.saw_other = true,
    }
}

/// Starts a turn for a message of `role` unless it continues the last one.
fn push_turn(turns: &mut Vec<Turn>, role: Role) {
    if turns.last().is_none_or(|turn| turn.role != role) {
        turns.push(Turn {
            role,
            tool_uses: Vec::new(),
            tool_results: Vec::new(),
            late_results: Vec::new(),
            saw_other: false,
        });
    }
}

/// Records a `tool_use` or `tool_result` block of `turn`, and checks a result's own blocks.
fn note_tool_block<'a>(turn: &mut Turn<'a>, block: BlockHead<'a>, path: BlockPath) -> Result<(), ApiError> {
    match block.kind.as_deref() {
        Some("tool_use") => {
            let id = block.id.ok_or_else(|| ApiError::invalid(format!("{path}.id: Field required")))?;
            turn.tool_uses.push(ToolUse { id, path });
        }
        Some("tool_result") => {
            let id = block
                .tool_use_id
                .ok_or_else(|| ApiError::invalid(format!("{path}.tool_use_id: Field required")))?;
            check_result_content(path, block.content)?;
            let results = if turn.saw_other { &mut turn.late_results } else { &mut turn.tool_results };
            results.push(ToolUse { id, path });
        }
        _ => turn.saw_other = true,
    }
    Ok(())
}

/// A `tool_result`'s `content`, when an array, holds only the types a result may hold.
fn check_result_content(path: BlockPath, content: Option<RawJson>) -> Result<(), ApiError> {
    let Some(raw) = content.filter(|raw| raw.get().starts_with('[')) else {
        return Ok(());
    };
    let blocks: Vec<RawJson> = serde_json::from_str(raw.get())
        .map_err(|_| ApiError::invalid(format!("{path}.content: Input should be a valid list")))?;
    let BlockPath::Message(message, position) = path else {
        return Ok(());
    };
    for (index, block) in blocks.into_iter().enumerate() {
        read_block(BlockPath::InResult(message, position, index), block, TOOL_RESULT_BLOCK_TYPES)?;
    }
    Ok(())
}

/// An assistant turn's `tool_use` ids each have a `tool_result` at the start of the next (user)
/// turn, and every `tool_result` there answers one of them. Both texts are the API's observed
/// ones. A result after text or an image leaves its call unanswered: Anthropic's tool-use guide
/// ("Implement tool use") says tool_result blocks must come first in the user message's
/// content, any text after them, or the request is refused with this 400. That the message
/// is the same one in that case is the guide's account, not observed here.
fn check_results_follow(before: &Turn, after: &Turn) -> Result<(), ApiError> {
    let answered: BTreeSet<&str> = after.tool_results.iter().map(|r| r.id.as_ref()).collect();
    let missing: Vec<&ToolUse> =
        before.tool_uses.iter().filter(|u| !answered.contains(u.id.as_ref())).collect();
    if let Some(first) = missing.first() {
        let ids: Vec<&str> = missing.iter().map(|u| u.id.as_ref()).collect();
        return Err(ApiError::invalid(format!(
            "{}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
            first.path,
            ids.join(", ")
        )));
    }
    let called: BTreeSet<&str> = before.tool_uses.iter().map(|u| u.id.as_ref()).collect();
    let results = after.tool_results.iter().chain(&after.late_results);
    if let Some(stray) = results.into_iter().find(|r| !called.contains(r.id.as_ref())) {
        return Err(stray_result(stray));
    }
    Ok(())
}

fn stray_result(result: &ToolUse) -> ApiError {
    ApiError::invalid(format!(
        "{}: unexpected `tool_use_id` found in `tool_result` blocks: {}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.",
        result.path, result.id
    ))
}

/// An image's `source`: base64 data must decode. Wording not known.
fn check_image_source(path: &str, source: Option<RawJson>) -> Result<(), ApiError> {
    #[derive(Deserialize)]
    struct Source<'a> {
        #[serde(rename = "type", borrow)]
        kind: Option<Cow<'a, str>>,
        #[serde(default, borrow)]
        data: Option<Cow<'a, str>>,
    }
    let Some(raw) = source else {
        return Err(ApiError::invalid(format!("{path}.source: Field required")));
    };
    let source: Source = serde_json::from_str(raw.get())
        .map_err(|_| ApiError::invalid(format!("{path}.source: Input should be a valid dictionary")))?;
    if source.kind.as_deref() != Some("base64") {
        return Ok(());
    }
    match source.data.as_deref() {
        Some(data) if is_base64(data) => Ok(()),
        Some(_) => Err(ApiError::invalid(format!("{path}.source.data: invalid base64 data"))),
        None => Err(ApiError::invalid(format!("{path}.source.data: Field required"))),
    }
}

/// Standard base64 (RFC 4648 §4) with padding: groups of four alphabet characters, `=` only
/// at the end (at most two).
pub fn is_base64(data: &str) -> bool {
    let bytes = data.as_bytes();
    if bytes.is_empty() || bytes.len() % 4 != 0 {
        return false;
    }
    let padding = bytes.iter().rev().take_while(|&&b| b == b'=').count();
    let body = &bytes[..bytes.len() - padding];
    padding <= 2 && body.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

/// pydantic's text for a tagged union given a tag it does not know.
fn unknown_tag(path: &str, tag: &str, expected: &[&str]) -> String {
    let list: Vec<String> = expected.iter().map(|t| format!("'{t}'")).collect();
    format!(
        "{path}: Input tag '{tag}' found using 'type' does not match any of the expected tags: {}",
        list.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_request_str;

    /// The message of the check's error for `body`, or `None` when it passes.
    fn refusal(body: &str) -> Option<String> {
        let view = parse_request_str(body).unwrap();
        check_request(&view, Betas::NONE).err().map(|e| e.message)
    }

    fn with(extra: &str, messages: &str) -> String {
        format!(r#"{{"model":"claude-sonnet-4-6","max_tokens":4096{extra},"messages":{messages}}}"#)
    }

    const HI: &str = r#"[{"role":"user","content":"hi"}]"#;

    /// A memo key from a block's bytes and where it stands, as the engine's `BlockKeys` hash them.
    fn key(context: &str, text: &str) -> u128 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (context, text).hash(&mut hasher);
        u128::from(hasher.finish())
    }

    /// A key per message block (or string content).
    fn message_keys(view: &RequestView) -> Vec<u128> {
        let mut keys = Vec::new();
        for message in view.messages.iter().flatten() {
            match &message.content {
                ContentView::Text(text) => keys.push(key("message", text)),
                ContentView::Blocks(blocks) => {
                    keys.extend(blocks.iter().map(|raw| key("message", raw.get())))
                }
            }
        }
        keys
    }

    #[test]
    fn remembering_tools_and_system_gives_the_same_answers() {
        let read = r#"{"name":"Read","input_schema":{"type":"object"}}"#;
        let edit = r#"{"name":"Edit","input_schema":{"type":"object"}}"#;
        let bad_marker =
            r#"{"name":"Bash","input_schema":{"type":"object"},"cache_control":{"type":"forever"}}"#;
        let prompt = r#"{"type":"text","text":"You are an agent."}"#;
        let image = r#"{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}"#;
        let memo = CheckMemo::default();
        // Requests that resend remembered tools and system blocks: a duplicate of a remembered
        // name, a bad marker at two indexes, a block a system prompt may not hold.
        let bodies = [
            format!(r#"{{"tools":[{read},{edit}],"system":[{prompt}],"#),
            format!(r#"{{"tools":[{read},{edit},{read}],"system":[{prompt}],"#),
            format!(r#"{{"tools":[{bad_marker}],"system":[{prompt}],"#),
            format!(r#"{{"tools":[{read},{bad_marker}],"system":[{prompt}],"#),
            format!(r#"{{"tools":[{edit},{read}],"system":[{prompt},{image}],"#),
            format!(r#"{{"tools":[{edit},{read}],"system":[{prompt},{prompt}],"#),
        ];
        let mut refused = 0;
        for head in &bodies {
            let body = format!(r#"{head}"model":"claude-sonnet-4-6","max_tokens":4096,"messages":{HI}}}"#);
            let view = parse_request_str(&body).unwrap();
            let tools: Vec<u128> = view.tools.iter().map(|raw| key("tool", raw.get())).collect();
            let system: Vec<u128> = match &view.system {
                Some(ContentView::Blocks(blocks)) => {
                    blocks.iter().map(|raw| key("system", raw.get())).collect()
                }
                _ => Vec::new(),
            };
            let messages = message_keys(&view);
            let keys = CheckKeys { tools: &tools, system: &system, messages: &messages };
            let remembered = check_request_remembering(&view, Betas::NONE, keys, &memo);
            assert_eq!(remembered, check_request(&view, Betas::NONE), "{head}");
            refused += usize::from(remembered.is_err());
        }
        // The duplicate name, the bad marker twice, the image in the system prompt.
        assert_eq!(refused, 4);
    }

    #[test]
    fn remembering_blocks_gives_the_same_answers() {
        let call =
            r#"{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Read","input":{}}]}"#;
        let result = r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"ok"}]}]}"#;
        let bad_result = r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"nope"}]}]}"#;
        let turn = |text: &str| format!(r#"{{"role":"user","content":[{{"type":"text","text":"{text}"}}]}}"#);
        let memo = CheckMemo::default();
        // A conversation growing as an agent sends it, then requests that reuse remembered blocks
        // in places where the pairing fails, and a block whose own content fails at another index.
        let conversations = [
            format!("[{}]", turn("a")),
            format!("[{},{call},{result}]", turn("a")),
            format!("[{},{call},{result},{call}]", turn("a")),
            format!("[{result},{call}]"),
            format!("[{},{call},{}]", turn("a"), turn("b")),
            format!("[{},{call},{bad_result}]", turn("a")),
            format!("[{},{},{call},{bad_result}]", turn("a"), turn("c")),
            format!("[{},{call},{result},{call},{result}]", turn("a")),
        ];
        let mut refused = 0;
        for messages in &conversations {
            let body = with("", messages);
            let view = parse_request_str(&body).unwrap();
            let keys = message_keys(&view);
            let keys = CheckKeys { messages: &keys, ..CheckKeys::default() };
            let remembered = check_request_remembering(&view, Betas::NONE, keys, &memo);
            assert_eq!(remembered, check_request(&view, Betas::NONE), "{messages}");
            refused += usize::from(remembered.is_err());
        }
        // The stray result, the text in place of a result, and the bad result content (twice,
        // named at its own index each time); a call ending the conversation needs no result.
        assert_eq!(refused, 4);
        assert!(!memo.blocks.read().unwrap().is_empty());
    }

    #[test]
    fn a_plain_body_passes() {
        assert_eq!(refusal(&with("", HI)), None);
        assert_eq!(
            refusal(&with(r#","cache_control":{"type":"ephemeral"},"temperature":1,"top_p":0"#, HI)),
            None
        );
    }

    #[test]
    fn sampling_outside_zero_to_one_is_refused() {
        assert_eq!(
            refusal(&with(r#","temperature":1.5"#, HI)).unwrap(),
            "temperature: Input should be less than or equal to 1"
        );
        assert_eq!(
            refusal(&with(r#","top_p":-0.1"#, HI)).unwrap(),
            "top_p: Input should be greater than or equal to 0"
        );
    }

    #[test]
    fn opus_4_7_and_4_8_refuse_non_default_sampling() {
        let opus = |extra: &str, model: &str| {
            refusal(&format!(r#"{{"model":"{model}","max_tokens":5{extra},"messages":{HI}}}"#))
        };
        assert_eq!(opus(r#","temperature":1"#, "claude-opus-4-8"), None);
        assert!(opus(r#","temperature":0.5"#, "claude-opus-4-7").unwrap().starts_with("temperature: "));
        assert!(opus(r#","top_k":5"#, "claude-opus-4-8").unwrap().starts_with("top_k: "));
        assert_eq!(opus(r#","top_k":5"#, "claude-opus-4-6"), None);
    }

    #[test]
    fn thinking_budget_bounds() {
        let budget = |n: u64| with(&format!(r#","thinking":{{"type":"enabled","budget_tokens":{n}}}"#), HI);
        assert_eq!(refusal(&budget(1024)), None);
        assert_eq!(
            refusal(&budget(1023)).unwrap(),
            "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
        );
        // max_tokens is 4096 in `with`: a budget of 4096 is not below it.
        assert!(refusal(&budget(4096)).unwrap().starts_with("`max_tokens` must be greater than"));
        let interleaved = budget(4096);
        let view = parse_request_str(&interleaved).unwrap();
        let betas = Betas::from_names([INTERLEAVED_THINKING]);
        assert_eq!(check_request(&view, &betas), Ok(()));
    }

    #[test]
    fn tool_calls_and_results_must_pair() {
        let called =
            r#"{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Read","input":{}}]}"#;
        let unanswered =
            format!(r#"[{{"role":"user","content":"go"}},{called},{{"role":"user","content":"more"}}]"#);
        assert_eq!(
            refusal(&with("", &unanswered)).unwrap(),
            "messages.1.content.0: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1. Each `tool_use` block must have a corresponding `tool_result` block in the next message."
        );
        let answered = format!(
            r#"[{{"role":"user","content":"go"}},{called},{{"role":"system","content":"note"}},{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"toolu_1","content":[{{"type":"text","text":"x"}}]}}]}}]"#
        );
        assert_eq!(refusal(&with("", &answered)), None);
        let stray =
            r#"[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_9","content":"x"}]}]"#;
        assert!(refusal(&with("", stray)).unwrap().starts_with(
            "messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_9."
        ));
        // The conversation may end on the call: nothing follows it yet.
        let last = format!(r#"[{{"role":"user","content":"go"}},{called}]"#);
        assert_eq!(refusal(&with("", &last)), None);
    }

    #[test]
    fn tool_results_come_first_in_their_turn() {
        let called =
            r#"{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Read","input":{}}]}"#;
        let result = r#"{"type":"tool_result","tool_use_id":"toolu_1","content":"x"}"#;
        let text = r#"{"type":"text","text":"and then"}"#;
        let turn = |content: &str| format!(r#"[{{"role":"user","content":"go"}},{called},{content}]"#);
        // Text after the results is how clients add a note to a tool turn.
        let after = turn(&format!(r#"{{"role":"user","content":[{result},{text}]}}"#));
        assert_eq!(refusal(&with("", &after)), None);
        let unanswered = "messages.1.content.0: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1.";
        // Text before the result, in the same message or in an earlier one the API merges in.
        let before = turn(&format!(r#"{{"role":"user","content":[{text},{result}]}}"#));
        assert!(refusal(&with("", &before)).unwrap().starts_with(unanswered));
        let merged =
            turn(&format!(r#"{{"role":"user","content":"first"}},{{"role":"user","content":[{result}]}}"#));
        assert!(refusal(&with("", &merged)).unwrap().starts_with(unanswered));
    }

    #[test]
    fn unknown_block_types_are_refused_with_the_path() {
        let odd = r#"[{"role":"user","content":[{"type":"text","text":"a"},{"type":"video","url":"x"}]}]"#;
        assert!(
            refusal(&with("", odd))
                .unwrap()
                .starts_with("messages.0.content.1: Input tag 'video' found using 'type' does not match")
        );
        let nested = r#"[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"tool_use"}]}]}]"#;
        assert!(
            refusal(&with("", nested))
                .unwrap()
                .starts_with("messages.0.content.0.content.0: Input tag 'tool_use'")
        );
    }

    #[test]
    fn tools_need_unique_names() {
        let tools = |list: &str| with(&format!(r#","tools":{list}"#), HI);
        assert_eq!(refusal(&tools(r#"[{"input_schema":{}}]"#)).unwrap(), "tools.0.name: Field required");
        assert_eq!(
            refusal(&tools(r#"[{"name":"a","input_schema":{}},{"name":"a","input_schema":{}}]"#)).unwrap(),
            "tools: Tool names must be unique."
        );
    }

    #[test]
    fn parameters_of_the_wrong_kind_are_refused() {
        assert!(
            refusal(&with(r#","tool_choice":{"type":"sometimes"}"#, HI))
                .unwrap()
                .starts_with("tool_choice: Input tag 'sometimes'")
        );
        assert_eq!(
            refusal(&with(r#","cache_control":{}"#, HI)).unwrap(),
            "cache_control.type: Input should be 'ephemeral'"
        );
        let marked = r#"[{"role":"user","content":[{"type":"text","text":"a","cache_control":{}}]}]"#;
        assert_eq!(
            refusal(&with("", marked)).unwrap(),
            "messages.0.content.0.cache_control.type: Input should be 'ephemeral'"
        );
        assert_eq!(
            refusal(&with(r#","metadata":{"user_id":7}"#, HI)).unwrap(),
            "metadata.user_id: Input should be a valid string"
        );
        assert_eq!(refusal(&with(r#","metadata":{"user_id":"u"}"#, HI)), None);
        assert_eq!(
            refusal(&with(r#","service_tier":"priority""#, HI)).unwrap(),
            "service_tier: Input should be 'auto' or 'standard_only'"
        );
    }

    #[test]
    fn image_data_must_be_base64() {
        let image = |data: &str| {
            with(
                "",
                &format!(
                    r#"[{{"role":"user","content":[{{"type":"image","source":{{"type":"base64","media_type":"image/png","data":"{data}"}}}}]}}]"#
                ),
            )
        };
        // "aGk=" is base64 of "hi" (h=0x68, i=0x69 → 011010 000110 1001(00) → a G k =).
        assert_eq!(refusal(&image("aGk=")), None);
        assert_eq!(
            refusal(&image("not base64!")).unwrap(),
            "messages.0.content.0.source.data: invalid base64 data"
        );
    }

    #[test]
    fn count_tokens_needs_messages() {
        let view = parse_request_str(r#"{"model":"m","messages":[]}"#).unwrap();
        assert_eq!(
            check_count_tokens(&view).unwrap_err().message,
            "messages: at least one message is required"
        );
    }
}
