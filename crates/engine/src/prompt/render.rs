//! Request view → [`Prompt`]: looks up every block in the memo, validates the cache markers
//! exactly as the API does, computes the salts, and builds the positions.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use forkcache_wire::check::CheckKeys;
use forkcache_wire::{ApiError, ContentView, RawJson, RequestView, Role, Thinking, ToolChoice};

use super::block::{
    BlockContext, BlockInfo, BlockProblem, InspectConfig, inspect_raw, inspect_text, raw_memo_key,
    text_memo_key,
};
use super::hash::{content_hash, salt_hash};
use super::memo::BlockMemo;
use super::{IdentityMode, Prompt, PromptBuilder, Salts, Slot, Ttl};
use crate::billing::ModelPrice;
use crate::tokenize::Tokenizer;

mod resume;

pub use resume::RenderSketch;
use resume::{EndLog, Frame, Keep, shapes_of};

/// The documented maximum of breakpoints per request.
pub const MAX_BREAKPOINTS: usize = 4;

/// How requests are turned into prompts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PromptConfig {
    /// What "the same bytes" means. Default [`IdentityMode::Semantic`].
    pub identity: IdentityMode,
    /// Collapse runs of `tool_use` (and of `tool_result`) blocks into one position, as the
    /// newest API docs say. Default true.
    pub collapse_tool_runs: bool,
    /// System blocks whose text starts with one of these are dropped: no position, no tokens.
    /// Default: `x-anthropic-billing-header:` (Claude Code's per-request billing line).
    pub ignored_system_prefixes: Vec<String>,
    /// Render thinking and effort ahead of the tools (invalidating tools and system when they
    /// change), instead of at the messages level. Default false.
    pub render_config_ahead: bool,
    /// How tools with `defer_loading: true` enter the prompt. Default
    /// [`DeferredTools::Documented`].
    pub deferred_tools: DeferredTools,
    /// What an image does to the messages' cache. Default [`ImageRule::Observed`].
    pub image_rule: ImageRule,
}

/// What an image in the messages does to the cached prefix.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ImageRule {
    /// What the real API did (docs/fidelity.md): an image is content of its block like any
    /// other, so an image added after the cached prefix leaves that prefix readable.
    #[default]
    Observed,
    /// The documentation's table read literally: an image anywhere in the request invalidates
    /// the messages level, so the first image salts every message position.
    Documented,
}

impl ImageRule {
    /// The rule as the command line spells it.
    pub fn name(self) -> &'static str {
        match self {
            ImageRule::Observed => "observed",
            ImageRule::Documented => "documented",
        }
    }
}

/// Tools with `defer_loading: true` (tool search) and the `tool_reference` blocks that load them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeferredTools {
    /// The documented rule: a deferred tool is not in the prompt, and loading it through a
    /// `tool_reference` block does not change the prefix (the block is ordinary message content).
    #[default]
    Documented,
    /// What real Claude Code transcripts show — the cache breaks right after a tool search: a
    /// deferred tool that a `tool_reference` in the messages loads is rendered among the tools,
    /// so loading it changes the tools part of the prefix. Applies to request bodies; the
    /// scenario engine's agents use no tool search.
    Observed,
}

impl DeferredTools {
    /// The rule as the command line spells it.
    pub fn name(self) -> &'static str {
        match self {
            DeferredTools::Documented => "documented",
            DeferredTools::Observed => "observed",
        }
    }
}

/// How Claude Code's per-request billing line starts: a system block the API leaves out of the
/// cache (see [`PromptConfig::ignored_system_prefixes`]).
pub const BILLING_HEADER_PREFIX: &str = "x-anthropic-billing-header:";

impl Default for PromptConfig {
    fn default() -> Self {
        PromptConfig {
            identity: IdentityMode::Semantic,
            collapse_tool_runs: true,
            ignored_system_prefixes: vec![BILLING_HEADER_PREFIX.to_string()],
            render_config_ahead: false,
            deferred_tools: DeferredTools::Documented,
            image_rule: ImageRule::Observed,
        }
    }
}

/// What a change of `tools` does to the cached prefix.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ToolChanges {
    /// The documented default: tools come first in the prefix, so changing them invalidates
    /// everything after them.
    #[default]
    Invalidate,
    /// The beta `mid-conversation-tool-changes-2026-07-01` on a model it applies to: system and
    /// messages hash without the tools, so adding or removing a tool keeps them cached (see the
    /// module doc of [`crate::prompt`] for how that is modelled).
    KeepCache,
}

/// One block on its way into the prompt.
#[derive(Clone, Copy)]
struct Item {
    slot: Slot,
    role: Role,
    opens: bool,
    info: BlockInfo,
    /// Its marker is the one a top-level `cache_control` added.
    automatic: bool,
}

impl Item {
    /// A block's item as collected (a message's role and opening are set after).
    fn new(slot: Slot, info: BlockInfo) -> Item {
        Item { slot, role: Role::System, opens: false, info, automatic: false }
    }
}

/// How a renderer's prompts were built: `resumed` from a request a [`RenderSketch`] kept
/// ([`Renderer::render_resumed`]), `whole` block by block (refused requests included: the whole
/// render is what refuses them). Answers are the same either way, so this is where a resume that
/// stopped working shows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RenderCounts {
    /// Rendered block by block.
    pub whole: u64,
    /// Rendered from where the request parts from a kept one.
    pub resumed: u64,
}

impl std::ops::AddAssign for RenderCounts {
    fn add_assign(&mut self, other: RenderCounts) {
        self.whole += other.whole;
        self.resumed += other.resumed;
    }
}

/// The block facts one renderer gathered, tagged with the settings they were computed under:
/// runs that render the same blocks one after another (a sweep's cells on one worker) inspect
/// each block once instead of once per run. Results never depend on it.
pub struct KeptBlocks {
    fingerprint: u128,
    memo: BlockMemo,
}

/// Turns request views into prompts, remembering every block it has seen.
pub struct Renderer {
    config: PromptConfig,
    tokenizer: Box<dyn Tokenizer>,
    memo: BlockMemo,
    items: Vec<Item>,
    counts: RenderCounts,
    /// The settings and tokenizer, hashed: a [`RenderSketch`] resumes only the renderer that
    /// wrote it, or one that renders alike.
    fingerprint: u128,
}

impl Renderer {
    /// A renderer with an empty memo.
    pub fn new(config: PromptConfig, tokenizer: Box<dyn Tokenizer>) -> Renderer {
        let fingerprint = content_hash(format!("{config:?}/{}", tokenizer.name()).as_bytes());
        let (memo, items, counts) = (BlockMemo::default(), Vec::new(), RenderCounts::default());
        Renderer { config, tokenizer, memo, items, counts, fingerprint }
    }

    /// Hands over the facts of every block seen so far, to a renderer of another run
    /// ([`Renderer::adopt_blocks`]); this one starts over with an empty memo.
    pub fn keep_blocks(&mut self) -> KeptBlocks {
        KeptBlocks { fingerprint: self.fingerprint, memo: std::mem::take(&mut self.memo) }
    }

    /// Takes over the facts `kept` holds when they were computed under the same settings and
    /// tokenizer (a block's facts depend on nothing else); otherwise keeps its own memo.
    pub fn adopt_blocks(&mut self, kept: KeptBlocks) {
        if kept.fingerprint == self.fingerprint {
            self.memo = kept.memo;
        }
    }

    /// How the prompts rendered so far were built.
    pub fn counts(&self) -> RenderCounts {
        self.counts
    }

    /// The settings.
    pub fn config(&self) -> &PromptConfig {
        &self.config
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &dyn Tokenizer {
        self.tokenizer.as_ref()
    }

    /// Renders a request for `model`; rejects it as the API would.
    pub fn render(
        &mut self,
        request: &RequestView,
        model: &ModelPrice,
        tool_changes: ToolChanges,
    ) -> Result<Prompt, ApiError> {
        self.render_keyed(request, None, model, tool_changes)
    }

    /// [`Renderer::render`] with the request's [`BlockKeys`] already computed (on another
    /// thread): the same prompt, without hashing the blocks' bytes here.
    pub fn render_keyed(
        &mut self,
        request: &RequestView,
        keys: Option<&BlockKeys>,
        model: &ModelPrice,
        tool_changes: ToolChanges,
    ) -> Result<Prompt, ApiError> {
        self.render_whole(request, keys, model, tool_changes, None)
    }

    /// [`Renderer::render_keyed`] from where `request` parts from the request kept in `sketch`
    /// that it shares the most whole messages with (one client's last requests): the blocks they
    /// share are neither looked up nor chained again. The same prompt, or the same error, as
    /// [`Renderer::render_keyed`]. A request that renders is kept, in place of the one it resumed
    /// from (or of the oldest), unless the messages choose its tools (a deferred tool under
    /// [`DeferredTools::Observed`]) or `keys` miss some of its blocks; a refused one leaves the
    /// sketch as it was. A request kept by a renderer of other settings, or with a tokenizer of
    /// another name, is never resumed from.
    pub fn render_resumed(
        &mut self,
        request: &RequestView,
        keys: &BlockKeys,
        sketch: &mut RenderSketch,
        model: &ModelPrice,
        tool_changes: ToolChanges,
    ) -> Result<Prompt, ApiError> {
        let frame = Frame::of(self, request, model, tool_changes);
        let shapes = shapes_of(request, frame.head_keys());
        if let Some(prompt) = self.resume(request, keys, sketch, &frame, &shapes, model) {
            self.counts.resumed += 1;
            return Ok(prompt);
        }
        let keep = Keep { sketch, frame, shapes: &shapes, keys };
        self.render_whole(request, Some(keys), model, tool_changes, Some(keep))
    }

    /// Renders every block of `request`; with a sketch to keep it in, keeps the request there,
    /// with where the builder stood at each message's end.
    fn render_whole(
        &mut self,
        request: &RequestView,
        keys: Option<&BlockKeys>,
        model: &ModelPrice,
        tool_changes: ToolChanges,
        keep: Option<Keep>,
    ) -> Result<Prompt, ApiError> {
        self.counts.whole += 1;
        let mut items = std::mem::take(&mut self.items);
        items.clear();
        let mut feed = KeyFeed(keys.map_or(&[][..], |keys| &keys.0).iter());
        let collected = self.collect(request, &mut feed, &mut items);
        let layout = self.layout(tool_changes);
        let prompt = collected.and_then(|observed| {
            apply_automatic_marker(request, &mut items)?;
            validate_markers(&items)?;
            let mut log = keep.as_ref().map(|_| EndLog::new(&items));
            let prompt = build(request, model, &items, layout, log.as_mut());
            // A prompt whose tools the messages choose is never resumed from: a new message may
            // load a tool.
            if let (Some(keep), Some(log), false) = (keep, log, observed) {
                keep.sketch.keep(keep.frame, keep.shapes, keep.keys, log, &prompt);
            }
            Ok(prompt)
        });
        self.items = items;
        prompt
    }

    fn layout(&self, tool_changes: ToolChanges) -> Layout {
        Layout {
            collapse_runs: self.config.collapse_tool_runs,
            config_ahead: self.config.render_config_ahead,
            tool_changes,
            images_salt: self.config.image_rule == ImageRule::Documented,
        }
    }

    /// The facts of one raw block (memoized), for callers that assemble prompts themselves.
    /// `path` names the block in an error (`messages.3.content.1`).
    pub fn block_info(
        &mut self,
        raw: RawJson,
        context: BlockContext,
        path: &str,
    ) -> Result<BlockInfo, ApiError> {
        let level = match context {
            BlockContext::Tool => "tools",
            BlockContext::System => "system",
            BlockContext::Message => "messages",
        };
        self.raw_info(raw, context, &mut KeyFeed([].iter()), || path.to_string(), level)
    }

    /// Every block's item, in cache order. True when which tools are in the prompt depends on
    /// the messages (a deferred tool under [`DeferredTools::Observed`]): such a prompt is never
    /// resumed, since a new message may load a tool.
    fn collect(
        &mut self,
        request: &RequestView,
        keys: &mut KeyFeed,
        items: &mut Vec<Item>,
    ) -> Result<bool, ApiError> {
        self.collect_head(request, keys, items)?;
        self.collect_messages(request, 0, keys, items)?;
        let observed = self.config.deferred_tools == DeferredTools::Observed
            && items.iter().any(|item| item.info.deferred);
        let loaded = if observed { loaded_tools(request) } else { BTreeSet::new() };
        items.retain(|item| {
            let unloaded = item.info.deferred
                && !matches!(item.slot, Slot::Tool(index) if loaded.contains(&tool_name(request.tools[index as usize])));
            !item.info.ignored && !unloaded
        });
        Ok(observed)
    }

    /// The items of the tools and the system blocks.
    fn collect_head(
        &mut self,
        request: &RequestView,
        keys: &mut KeyFeed,
        items: &mut Vec<Item>,
    ) -> Result<(), ApiError> {
        for (index, raw) in request.tools.iter().enumerate() {
            let info = self.raw_info(*raw, BlockContext::Tool, keys, || format!("tools.{index}"), "tools")?;
            items.push(Item::new(Slot::Tool(index as u32), info));
        }
        if let Some(system) = &request.system {
            self.collect_content(system, BlockContext::System, keys, items, Slot::System, "system")?;
        }
        Ok(())
    }

    /// The items of the messages from `messages[first]` on.
    fn collect_messages(
        &mut self,
        request: &RequestView,
        first: usize,
        keys: &mut KeyFeed,
        items: &mut Vec<Item>,
    ) -> Result<(), ApiError> {
        for (index, message) in request.require_messages()?.iter().enumerate().skip(first) {
            let start = items.len();
            let level = format!("messages.{index}.content");
            self.collect_content(
                &message.content,
                BlockContext::Message,
                keys,
                items,
                |block| Slot::Message { message: index as u32, block, run: 1 },
                &level,
            )?;
            for (offset, item) in items[start..].iter_mut().enumerate() {
                item.role = message.role;
                item.opens = offset == 0;
            }
        }
        Ok(())
    }

    fn collect_content(
        &mut self,
        content: &ContentView,
        context: BlockContext,
        keys: &mut KeyFeed,
        items: &mut Vec<Item>,
        slot: impl Fn(u32) -> Slot,
        path: &str,
    ) -> Result<(), ApiError> {
        let level = if context == BlockContext::System { "system" } else { "messages" };
        match content {
            ContentView::Text(text) => {
                let info = self.text_info(text, context, keys, || path.to_string(), level)?;
                items.push(Item::new(slot(0), info));
            }
            ContentView::Blocks(blocks) => {
                for (index, raw) in blocks.iter().enumerate() {
                    let info = self.raw_info(*raw, context, keys, || format!("{path}.{index}"), level)?;
                    items.push(Item::new(slot(index as u32), info));
                }
            }
        }
        Ok(())
    }

    fn raw_info(
        &mut self,
        raw: RawJson,
        context: BlockContext,
        keys: &mut KeyFeed,
        path: impl FnOnce() -> String,
        level: &str,
    ) -> Result<BlockInfo, ApiError> {
        let key = keys.next_or(|| raw_memo_key(context, raw.get()));
        self.memoized(key, path, level, |config| inspect_raw(raw, context, config))
    }

    fn text_info(
        &mut self,
        text: &str,
        context: BlockContext,
        keys: &mut KeyFeed,
        path: impl FnOnce() -> String,
        level: &str,
    ) -> Result<BlockInfo, ApiError> {
        let key = keys.next_or(|| text_memo_key(context, text));
        self.memoized(key, path, level, |config| inspect_text(text, context, config))
    }

    /// The memo's facts for `key`, inspecting the block the first time; a problem becomes the
    /// API's error at `path`.
    fn memoized(
        &mut self,
        key: u128,
        path: impl FnOnce() -> String,
        level: &str,
        inspect: impl FnOnce(&InspectConfig) -> Result<BlockInfo, BlockProblem>,
    ) -> Result<BlockInfo, ApiError> {
        let config = InspectConfig {
            identity: self.config.identity,
            ignored_system_prefixes: &self.config.ignored_system_prefixes,
            tokenizer: self.tokenizer.as_ref(),
        };
        self.memo
            .get_or_inspect(key, || inspect(&config))
            .map_err(|problem| problem_error(&problem, &path(), level))
    }
}

/// The memo keys of a request's blocks, in the order [`Renderer::render`] reads them: tools,
/// system, then each message's content. They depend on the blocks' bytes alone, so a replay
/// computes them on the thread that parsed the request and the renderer only looks them up.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlockKeys(Vec<u128>);

impl BlockKeys {
    /// The keys of every block of `request` (those of a request the renderer will refuse
    /// included: it stops at the refusal).
    pub fn of(request: &RequestView) -> BlockKeys {
        let mut keys = Vec::with_capacity(request.tools.len() + 4);
        tool_keys(&request.tools, &mut keys);
        if let Some(system) = &request.system {
            content_keys(system, BlockContext::System, &mut keys);
        }
        for message in request.messages.iter().flatten() {
            content_keys(&message.content, BlockContext::Message, &mut keys);
        }
        BlockKeys(keys)
    }

    /// The keys of `request`'s tools, system blocks and messages' content, apart (one per
    /// block, one per string content), as the API's checks take them.
    pub fn check_keys(&self, request: &RequestView) -> CheckKeys<'_> {
        let system = match &request.system {
            None => 0,
            Some(ContentView::Text(_)) => 1,
            Some(ContentView::Blocks(blocks)) => blocks.len(),
        };
        let tools = request.tools.len().min(self.0.len());
        let (tools, rest) = self.0.split_at(tools);
        let (system, messages) = rest.split_at(system.min(rest.len()));
        CheckKeys { tools, system, messages }
    }

    /// The keys of a request whose tools', system's and messages' keys were gathered elsewhere
    /// (a trace reader that read some blocks from an earlier request's sketch).
    pub fn from_parts(tools: &[u128], system: &[u128], messages: &[u128]) -> BlockKeys {
        BlockKeys([tools, system, messages].concat())
    }
}

/// Appends the memo keys of tool definitions, in render order.
pub fn tool_keys(tools: &[RawJson], keys: &mut Vec<u128>) {
    keys.extend(tools.iter().map(|raw| raw_memo_key(BlockContext::Tool, raw.get())));
}

/// Appends the memo keys of `content`'s blocks, in render order.
pub fn content_keys(content: &ContentView, context: BlockContext, keys: &mut Vec<u128>) {
    match content {
        ContentView::Text(text) => keys.push(text_memo_key(context, text)),
        ContentView::Blocks(blocks) => {
            keys.extend(blocks.iter().map(|raw| raw_memo_key(context, raw.get())));
        }
    }
}

/// The next block's memo key: the precomputed one when there is one, else hashed here.
struct KeyFeed<'k>(std::slice::Iter<'k, u128>);

impl KeyFeed<'_> {
    fn next_or(&mut self, hash: impl FnOnce() -> u128) -> u128 {
        self.0.next().copied().unwrap_or_else(hash)
    }
}

/// The names of the tools that `tool_reference` blocks in the messages load (only read under
/// [`DeferredTools::Observed`], and only when a tool is deferred).
fn loaded_tools(request: &RequestView) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let blocks = request.messages.iter().flatten().filter_map(|message| match &message.content {
        ContentView::Blocks(blocks) => Some(blocks),
        ContentView::Text(_) => None,
    });
    for raw in blocks.flatten().filter(|raw| raw.get().contains("\"tool_reference\"")) {
        if let Ok(block) = serde_json::from_str::<serde_json::Value>(raw.get()) {
            collect_references(&block, &mut names);
        }
    }
    names
}

/// Every `{"type": "tool_reference", "tool_name": …}` inside `value`.
fn collect_references(value: &serde_json::Value, names: &mut BTreeSet<String>) {
    match value {
        serde_json::Value::Object(map) => {
            if map.get("type").and_then(serde_json::Value::as_str) == Some("tool_reference")
                && let Some(name) = map.get("tool_name").and_then(serde_json::Value::as_str)
            {
                names.insert(name.to_string());
            }
            map.values().for_each(|inner| collect_references(inner, names));
        }
        serde_json::Value::Array(items) => items.iter().for_each(|inner| collect_references(inner, names)),
        _ => {}
    }
}

/// A tool definition's `name` (empty when it has none).
fn tool_name(raw: RawJson) -> String {
    #[derive(Deserialize)]
    struct Named {
        #[serde(default)]
        name: String,
    }
    serde_json::from_str::<Named>(raw.get()).map(|named| named.name).unwrap_or_default()
}

fn problem_error(problem: &BlockProblem, path: &str, level: &str) -> ApiError {
    ApiError::invalid(problem.message(path, level))
}

/// The API path of an item (`messages.3.content.1`), as error messages spell it.
fn api_path(slot: Slot) -> String {
    match slot {
        Slot::Tool(index) => format!("tools.{index}"),
        Slot::ToolPrompt | Slot::ToolChoicePrompt => "tools".to_string(),
        Slot::System(index) => format!("system.{index}"),
        Slot::Message { message, block, .. } => format!("messages.{message}.content.{block}"),
    }
}

/// A top-level `cache_control` puts a breakpoint on the last eligible block (walking back past
/// thinking blocks); a no-op when that block already has one with the same TTL. The item it
/// gave a breakpoint is marked `automatic`.
fn apply_automatic_marker(request: &RequestView, items: &mut [Item]) -> Result<(), ApiError> {
    let Some(raw) = request.cache_control else { return Ok(()) };
    let Some(ttl) = automatic_ttl(raw)? else { return Ok(()) };
    let Some(last) = items.iter_mut().rev().find(|item| item.info.auto_eligible) else {
        return Ok(());
    };
    match last.info.marker {
        None => {
            last.info.marker = Some(ttl);
            last.automatic = true;
            Ok(())
        }
        Some(existing) if existing == ttl => Ok(()),
        Some(existing) => Err(ApiError::invalid(format!(
            "cache_control: the top-level cache_control ttl='{}' conflicts with the ttl='{}' cache_control already on {}, the last cacheable block",
            ttl.name(),
            existing.name(),
            api_path(last.slot)
        ))),
    }
}

fn automatic_ttl(raw: RawJson) -> Result<Option<Ttl>, ApiError> {
    #[derive(Deserialize)]
    struct TopLevelMarker {
        #[serde(rename = "type")]
        kind: Option<String>,
        ttl: Option<String>,
    }
    let marker: Option<TopLevelMarker> = serde_json::from_str(raw.get())
        .map_err(|_| ApiError::invalid("cache_control: Input should be an object"))?;
    let Some(marker) = marker else { return Ok(None) };
    if marker.kind.as_deref() != Some("ephemeral") {
        return Err(ApiError::invalid("cache_control.type: Input should be 'ephemeral'"));
    }
    match marker.ttl.as_deref() {
        None | Some("5m") => Ok(Some(Ttl::FiveMinutes)),
        Some("1h") => Ok(Some(Ttl::OneHour)),
        Some(_) => Err(ApiError::invalid("cache_control.ttl: Input should be '5m' or '1h'")),
    }
}

/// At most 4 breakpoints, and no 1h breakpoint after a 5m one.
fn validate_markers(items: &[Item]) -> Result<(), ApiError> {
    let marked = items.iter().filter_map(|item| item.info.marker.map(|ttl| (item.slot, ttl)));
    validate_breakpoints(marked)
}

/// The API's two rules on breakpoints, over `(slot, ttl)` in cache order.
pub fn validate_breakpoints(marked: impl Iterator<Item = (Slot, Ttl)>) -> Result<(), ApiError> {
    let marked: Vec<(Slot, Ttl)> = marked.collect();
    if marked.len() > MAX_BREAKPOINTS {
        return Err(ApiError::invalid(format!(
            "A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {}.",
            marked.len()
        )));
    }
    let first_short = marked.iter().position(|(_, ttl)| *ttl == Ttl::FiveMinutes);
    let long_after_short =
        first_short.and_then(|short| marked[short..].iter().find(|(_, ttl)| *ttl == Ttl::OneHour));
    match long_after_short {
        Some((slot, _)) => Err(ApiError::invalid(format!(
            "{}.cache_control.ttl: a ttl='1h' cache_control block must not come after a ttl='5m' cache_control block. Note that blocks are processed in the following order: `tools`, `system`, `messages`.",
            api_path(*slot)
        ))),
        None => Ok(()),
    }
}

/// How the positions are laid out, beyond the blocks themselves.
#[derive(Clone, Copy)]
struct Layout {
    collapse_runs: bool,
    config_ahead: bool,
    tool_changes: ToolChanges,
    /// Whether an image salts the messages ([`ImageRule::Documented`]).
    images_salt: bool,
}

fn build(
    request: &RequestView,
    model: &ModelPrice,
    items: &[Item],
    layout: Layout,
    log: Option<&mut EndLog>,
) -> Prompt {
    let facts = SaltFacts::of(items);
    let facts = SaltFacts { images: facts.images && layout.images_salt, ..facts };
    let salts = salts(request, model, facts, layout.config_ahead);
    let mut builder = PromptBuilder::new(salts, layout.collapse_runs);
    let tool_count = items.iter().take_while(|item| matches!(item.slot, Slot::Tool(_))).count();
    for item in &items[..tool_count] {
        if let Slot::Tool(index) = item.slot {
            builder.tool(index, &item.info);
        }
    }
    if tool_count > 0 {
        let size = tool_prompt_size(request.tool_choice.as_ref(), model);
        builder.tool_prompt(size.auto, size.extra);
    }
    if layout.tool_changes == ToolChanges::KeepCache {
        builder.detach_tools();
    }
    let system_count =
        items[tool_count..].iter().take_while(|item| matches!(item.slot, Slot::System(_))).count();
    for item in &items[tool_count..tool_count + system_count] {
        if let Slot::System(index) = item.slot {
            builder.system(index, &item.info);
        }
    }
    let messages = request.messages.as_ref().map_or(0, Vec::len);
    build_messages(&mut builder, &items[tool_count + system_count..], messages, log);
    builder.finish()
}

/// Adds message items (all of them from one message on) to `builder`; with a log, notes where
/// the builder stands at the end of each message up to `messages`.
fn build_messages(
    builder: &mut PromptBuilder,
    items: &[Item],
    messages: usize,
    mut log: Option<&mut EndLog>,
) {
    for item in items {
        let Slot::Message { message, block, .. } = item.slot else {
            unreachable!("tools and system come first")
        };
        if let Some(log) = log.as_deref_mut() {
            log.end_messages_before(message as usize, builder);
            log.note(item);
        }
        builder.message_block(message, block, item.role, item.opens, &item.info);
    }
    if let Some(log) = log {
        log.end_messages_before(messages, builder);
    }
}

/// The hidden tool-use prompt's size, split where it is rendered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ToolPromptSize {
    /// After the tools: the size with `tool_choice` auto/none.
    pub auto: u64,
    /// Where the messages begin: what `any`/`tool` add on top.
    pub extra: u64,
}

/// The hidden tool-use prompt's size for a `tool_choice`; zero where the table has no number.
pub fn tool_prompt_size(tool_choice: Option<&ToolChoice>, model: &ModelPrice) -> ToolPromptSize {
    let Some(sizes) = model.tool_prompt_tokens else { return ToolPromptSize::default() };
    let forced = tool_choice.is_some_and(|choice| choice.kind == "any" || choice.kind == "tool");
    let extra = if forced { sizes.any.saturating_sub(sizes.auto) } else { 0 };
    ToolPromptSize { auto: sizes.auto, extra }
}

fn salts(request: &RequestView, model: &ModelPrice, facts: SaltFacts, config_ahead: bool) -> Salts {
    SaltInputs {
        thinking: request.thinking.as_ref(),
        effort: request.output_config.as_ref().and_then(|config| config.effort.as_deref()),
        tool_choice: request.tool_choice.as_ref(),
        speed: request.speed.as_deref(),
        images: facts.images,
        web_search: facts.web_search,
        citations: facts.citations,
        config_ahead,
    }
    .salts(model)
}

/// What the blocks tell the salts: whether any holds an image, is a web-search tool, or enables
/// citations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct SaltFacts {
    images: bool,
    web_search: bool,
    citations: bool,
}

impl SaltFacts {
    fn of(items: &[Item]) -> SaltFacts {
        items.iter().fold(SaltFacts::default(), |facts, item| facts.with(&item.info))
    }

    fn with(self, info: &BlockInfo) -> SaltFacts {
        SaltFacts {
            images: self.images || info.has_image,
            web_search: self.web_search || info.web_search_tool,
            citations: self.citations || info.has_citations,
        }
    }
}

/// The request facts salts are made of.
#[derive(Clone, Copy, Debug, Default)]
pub struct SaltInputs<'a> {
    /// `thinking`.
    pub thinking: Option<&'a Thinking>,
    /// `output_config.effort`.
    pub effort: Option<&'a str>,
    /// `tool_choice`.
    pub tool_choice: Option<&'a ToolChoice>,
    /// `speed`.
    pub speed: Option<&'a str>,
    /// Any image block present.
    pub images: bool,
    /// A web-search tool present.
    pub web_search: bool,
    /// Citations enabled on any block.
    pub citations: bool,
    /// [`PromptConfig::render_config_ahead`].
    pub config_ahead: bool,
}

impl SaltInputs<'_> {
    /// The salts, with defaults spelled out (an explicit default equals an omitted field).
    pub fn salts(&self, model: &ModelPrice) -> Salts {
        let thinking = match self.thinking {
            None => "disabled".to_string(),
            Some(t) if t.kind == "enabled" => format!("enabled:{}", t.budget_tokens.unwrap_or(0)),
            Some(t) => t.kind.clone(),
        };
        let tool_choice = match self.tool_choice {
            None => "auto".to_string(),
            Some(choice) if choice.kind == "tool" => format!("tool:{}", choice.name.as_deref().unwrap_or("")),
            Some(choice) => choice.kind.clone(),
        };
        let disable_parallel = self.tool_choice.and_then(|c| c.disable_parallel_tool_use).unwrap_or(false);
        let flag = |on: bool| salt_hash(if on { "on" } else { "off" });
        Salts {
            thinking: salt_hash(&thinking),
            effort: salt_hash(self.effort.unwrap_or(&model.effort_default)),
            tool_choice: salt_hash(&tool_choice),
            disable_parallel_tool_use: flag(disable_parallel),
            images: flag(self.images),
            web_search: flag(self.web_search),
            citations: flag(self.citations),
            speed: salt_hash(self.speed.unwrap_or("standard")),
            config_ahead: self.config_ahead,
        }
    }
}
