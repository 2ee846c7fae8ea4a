//! A request as the cache sees it: ordered positions `tools → system → messages`, each with a
//! cumulative token count and a chained hash, plus the request's breakpoints.
//!
//! A position is one block, except that a run of consecutive `tool_use` blocks (or of
//! `tool_result` blocks) in one message is one position. Request parameters that the API renders
//! into the prompt ("salts") join the hash chain at the level where they take effect, so changing
//! one invalidates that level and everything after it.
//!
//! **Tool changes under the beta `mid-conversation-tool-changes-2026-07-01`** (on the models
//! [`forkcache_wire::tool_changes_keep_cache`] lists; [`ToolChanges::KeepCache`]). The release note
//! says only that adding or removing tools mid-conversation keeps the cache; no source says where
//! the API renders the changed tools. forkcache's model, an **inference**: the tools section's
//! identity is the one the cached entry was written with — system and messages hash without the
//! tools, so a request whose tools changed still reads the entry its system and messages match.
//! It reads no more than that entry holds: when the tools section grew (tools added), the added
//! tokens were never cached and are billed as new input, like the tokens of a `tool_reference`
//! block (written where the request writes past what it read, else uncached); when it shrank
//! (tools removed), the entry is read up to this request's own length. The tools section is
//! accounted by size: a request that adds and removes tools in one change bills only the net
//! growth as new input. A marker on the tools themselves still keys by their content. The beta's
//! presence is itself part of the prefix (the diagnostics doc lists the set of active betas among
//! the prompt-affecting parameters): a request naming it does not read what a request without it
//! wrote, so a conversation names it from its first request on, as Claude Code does. Without the
//! beta, or on another model, the strict rule holds: a tools change is a prefix change.

mod block;
mod builder;
mod hash;
pub mod image;
mod memo;
mod render;

use serde::{Deserialize, Serialize};

pub use block::{
    BlockContext, BlockInfo, BlockKind, BlockProblem, DECLARED_TOKENS_KEY, InspectConfig,
    MAX_DECLARED_TOKENS, canonical, inspect_raw, inspect_text, raw_memo_key, text_memo_key,
    without_own_marker,
};
pub use builder::{Checkpoint, PromptBuilder};
pub use hash::{BuildPassThrough, PassThrough, chain, content_hash, namespaced_hash, salt_hash};
pub use memo::{BlockMemo, MEMO_LIMIT};
pub use render::{
    BILLING_HEADER_PREFIX, BlockKeys, DeferredTools, ImageRule, KeptBlocks, MAX_BREAKPOINTS, PromptConfig,
    RenderCounts, RenderSketch, Renderer, SaltInputs, ToolChanges, ToolPromptSize, tool_prompt_size,
    validate_breakpoints,
};
pub use render::{content_keys, tool_keys};

/// What "the same bytes" means when comparing blocks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IdentityMode {
    /// The API's own objects compare structurally (key order and whitespace ignored, string
    /// content ≡ one text block); the user's JSON and all text must match exactly. Default.
    #[default]
    Semantic,
    /// The block's bytes as sent, minus `cache_control` (the seeds' model).
    Wire,
}

impl IdentityMode {
    /// The mode's name as the command line spells it.
    pub fn name(self) -> &'static str {
        match self {
            IdentityMode::Semantic => "semantic",
            IdentityMode::Wire => "wire",
        }
    }
}

/// A cache entry's lifetime.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Ttl {
    /// `"5m"` (also a bare `{"type":"ephemeral"}`).
    #[serde(rename = "5m")]
    FiveMinutes,
    /// `"1h"`.
    #[serde(rename = "1h")]
    OneHour,
}

impl Ttl {
    /// The lifetime in milliseconds.
    pub fn ms(self) -> u64 {
        match self {
            Ttl::FiveMinutes => 5 * 60 * 1000,
            Ttl::OneHour => 60 * 60 * 1000,
        }
    }

    /// `5m` or `1h`.
    pub fn name(self) -> &'static str {
        match self {
            Ttl::FiveMinutes => "5m",
            Ttl::OneHour => "1h",
        }
    }
}

/// The part of the prompt a position or a change belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dimension {
    /// Tool definitions (and the hidden tool-use prompt).
    Tools,
    /// `system`.
    System,
    /// `messages`.
    Messages,
    /// A request parameter rendered into the prompt (thinking, effort, tool_choice, …).
    Config,
}

impl Dimension {
    /// The dimension as it is spelled in output.
    pub fn name(self) -> &'static str {
        match self {
            Dimension::Tools => "tools",
            Dimension::System => "system",
            Dimension::Messages => "messages",
            Dimension::Config => "config",
        }
    }
}

/// Which block (or run of blocks) a position stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Slot {
    /// `tools[i]`.
    Tool(u32),
    /// The hidden tool-use system prompt the API adds after the tools.
    ToolPrompt,
    /// The part of the hidden tool-use prompt that `tool_choice` `any`/`tool` adds, rendered
    /// where the messages begin.
    ToolChoicePrompt,
    /// `system[i]` (index as sent, ignored blocks included).
    System(u32),
    /// `messages[message].content[block]`, and `run` blocks from there on.
    Message {
        /// Message index.
        message: u32,
        /// First block's index (0 for string content).
        block: u32,
        /// Blocks in the position (more than 1 for a collapsed `tool_use`/`tool_result` run).
        run: u32,
    },
}

impl Slot {
    /// The dimension the slot belongs to.
    pub fn dimension(self) -> Dimension {
        match self {
            Slot::Tool(_) | Slot::ToolPrompt => Dimension::Tools,
            Slot::ToolChoicePrompt => Dimension::Config,
            Slot::System(_) => Dimension::System,
            Slot::Message { .. } => Dimension::Messages,
        }
    }

    /// A JSON path such as `messages[14].content[3]`.
    pub fn path(self) -> String {
        match self {
            Slot::Tool(index) => format!("tools[{index}]"),
            Slot::ToolPrompt => "tools (hidden tool-use prompt)".to_string(),
            Slot::ToolChoicePrompt => "tool_choice (hidden tool-use prompt)".to_string(),
            Slot::System(index) => format!("system[{index}]"),
            Slot::Message { message, block, run } if run > 1 => {
                format!("messages[{message}].content[{block}..{}]", block + run)
            }
            Slot::Message { message, block, .. } => format!("messages[{message}].content[{block}]"),
        }
    }
}

/// One position of the prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Position {
    /// `H[i]`: the hash of the whole prefix up to and including this position (and the salts
    /// before it). Scope (workspace × model) is not part of it.
    pub hash: u128,
    /// `T[i]`: cumulative tokens up to and including this position.
    pub tokens_end: u64,
    /// How many of `T[i]` are the tokenizer's estimates rather than declared sizes (saturating:
    /// a prompt past 2³² estimated tokens is far past every context window anyway).
    pub estimated_end: u32,
    /// The block(s) it stands for.
    pub slot: Slot,
    /// Its first block is a `tool_use` (how a fork's own tool call is told apart from other
    /// content when diagnosing sibling forks).
    pub tool_use: bool,
}

/// A cache breakpoint: a marked block, or the automatic one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Breakpoint {
    /// The position holding the marked block (the first of the 20 its lookback checks).
    pub position: u32,
    /// The entry's lifetime.
    pub ttl: Ttl,
    /// The hash of the prefix through the marked block: the entry's key. Equal to the
    /// position's hash unless the block sits inside a `tool_use`/`tool_result` run.
    pub key: u128,
    /// `T` through the marked block.
    pub tokens: u64,
}

impl Breakpoint {
    /// A breakpoint on the last block of `position` (numbered `index`).
    pub fn at(index: u32, position: &Position, ttl: Ttl) -> Breakpoint {
        Breakpoint { position: index, ttl, key: position.hash, tokens: position.tokens_end }
    }
}

/// Request parameters rendered into the prompt, each as a short hash of its canonical value
/// (defaults spelled out, so an explicit default equals an omitted field).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Salts {
    /// `thinking` mode and budget.
    pub thinking: u64,
    /// `output_config.effort`.
    pub effort: u64,
    /// `tool_choice`.
    pub tool_choice: u64,
    /// `tool_choice.disable_parallel_tool_use`.
    pub disable_parallel_tool_use: u64,
    /// Whether any image is present.
    pub images: u64,
    /// Web search enabled.
    pub web_search: u64,
    /// Citations enabled.
    pub citations: u64,
    /// `speed`.
    pub speed: u64,
    /// Thinking and effort join ahead of the tools instead of at the messages level.
    pub config_ahead: bool,
}

/// Where a salt joins the chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaltLevel {
    /// Before the first tool.
    Ahead,
    /// Before the first system position.
    System,
    /// Before the first message position.
    Messages,
}

impl Salts {
    /// The salts joining at `level`, with the request field each stands for.
    pub fn at(&self, level: SaltLevel) -> Vec<(&'static str, u64)> {
        let config = [("thinking", self.thinking), ("output_config.effort", self.effort)];
        match level {
            SaltLevel::Ahead if self.config_ahead => config.to_vec(),
            SaltLevel::Ahead => Vec::new(),
            SaltLevel::System => {
                vec![("web_search", self.web_search), ("citations", self.citations), ("speed", self.speed)]
            }
            SaltLevel::Messages => {
                let mut salts = if self.config_ahead { Vec::new() } else { config.to_vec() };
                salts.extend([
                    ("tool_choice", self.tool_choice),
                    ("tool_choice.disable_parallel_tool_use", self.disable_parallel_tool_use),
                    ("images", self.images),
                ]);
                salts
            }
        }
    }

    /// The hash key the salts at `level` add to the chain.
    pub fn key(&self, level: SaltLevel) -> u128 {
        let mut bytes = Vec::with_capacity(48);
        for (_, value) in self.at(level) {
            bytes.extend_from_slice(&value.to_le_bytes());
        }
        content_hash(&bytes)
    }

    /// The first request field at `level` whose salt differs from `other`'s.
    pub fn first_difference(&self, other: &Salts, level: SaltLevel) -> Option<&'static str> {
        let theirs = other.at(level);
        let differs = |&(name, value): &(&'static str, u64)| !theirs.contains(&(name, value));
        self.at(level).into_iter().find(differs).map(|(name, _)| name)
    }
}

/// A request rendered for the cache.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Prompt {
    /// Positions in cache order.
    pub positions: Vec<Position>,
    /// Breakpoints in cache order (at most 4, validated).
    pub breakpoints: Vec<Breakpoint>,
    /// The salts.
    pub salts: Salts,
    /// Index of the first position after the tools (where system salts have joined).
    pub first_after_tools: u32,
    /// Index of the first message position (where message salts have joined).
    pub first_message: u32,
}

impl Prompt {
    /// The prompt as the cache reads it.
    pub fn as_ref(&self) -> PromptRef<'_> {
        PromptRef {
            head: &self.positions,
            tail: &[],
            breakpoints: &self.breakpoints,
            salts: self.salts,
            first_after_tools: self.first_after_tools,
            first_message: self.first_message,
        }
    }

    /// Total input tokens.
    pub fn total_tokens(&self) -> u64 {
        self.as_ref().total_tokens()
    }

    /// `T[position]`.
    pub fn tokens_at(&self, position: u32) -> u64 {
        self.positions[position as usize].tokens_end
    }

    /// The JSON path of a position.
    pub fn path(&self, position: u32) -> String {
        self.positions[position as usize].slot.path()
    }
}

/// A prompt as the cache reads it: positions shared with other requests (`head`, such as a
/// conversation's history that a fork inherits) followed by the request's own (`tail`). Reading
/// through a reference, instead of copying the shared positions into every request, keeps a
/// request's cost proportional to what is new in it.
#[derive(Clone, Copy, Debug)]
pub struct PromptRef<'a> {
    /// The shared positions.
    pub head: &'a [Position],
    /// This request's own positions, continuing the head's hash chain and numbering.
    pub tail: &'a [Position],
    /// Breakpoints in cache order, indices over head and tail together.
    pub breakpoints: &'a [Breakpoint],
    /// The salts.
    pub salts: Salts,
    /// Index of the first position after the tools.
    pub first_after_tools: u32,
    /// Index of the first message position.
    pub first_message: u32,
}

impl<'a> PromptRef<'a> {
    /// Number of positions.
    pub fn len(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    /// Whether there are no positions.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Position `index`.
    pub fn position(&self, index: u32) -> &'a Position {
        let index = index as usize;
        match index.checked_sub(self.head.len()) {
            None => &self.head[index],
            Some(own) => &self.tail[own],
        }
    }

    /// The last position.
    pub fn last(&self) -> Option<&'a Position> {
        self.tail.last().or(self.head.last())
    }

    /// Total input tokens.
    pub fn total_tokens(&self) -> u64 {
        self.last().map_or(0, |p| p.tokens_end)
    }

    /// How many of the input tokens are the tokenizer's estimates (the rest were declared).
    pub fn estimated_tokens(&self) -> u64 {
        self.last().map_or(0, |p| u64::from(p.estimated_end))
    }

    /// `T[position]`.
    pub fn tokens_at(&self, position: u32) -> u64 {
        self.position(position).tokens_end
    }

    /// The JSON path of a position.
    pub fn path(&self, position: u32) -> String {
        self.position(position).slot.path()
    }

    /// The first request parameter whose salt joins right before `position` and differs from
    /// `other`'s: the config change that would explain a divergence there.
    pub fn salt_difference_before(&self, position: u32, other: &Salts) -> Option<&'static str> {
        let mut levels = Vec::with_capacity(3);
        if position == 0 {
            levels.push(SaltLevel::Ahead);
        }
        if position == self.first_after_tools {
            levels.push(SaltLevel::System);
        }
        if position == self.first_message {
            levels.push(SaltLevel::Messages);
        }
        levels.into_iter().find_map(|level| self.salts.first_difference(other, level))
    }
}

/// A prompt of system positions with these hashes, 10 tokens each (for tests of what reads
/// prompts).
#[cfg(test)]
pub(crate) fn system_prompt_of(hashes: &[u128]) -> Prompt {
    let positions = hashes
        .iter()
        .enumerate()
        .map(|(i, &hash)| Position {
            hash,
            tokens_end: 10 * (i as u64 + 1),
            estimated_end: 10 * (i as u32 + 1),
            slot: Slot::System(i as u32),
            tool_use: false,
        })
        .collect();
    Prompt {
        positions,
        breakpoints: Vec::new(),
        salts: Salts::default(),
        first_after_tools: 0,
        first_message: 0,
    }
}

/// How many first items (bytes, block keys) `a` and `b` share, compared a chunk at a time first:
/// memcmp speed, for the long prefixes a trace's requests share.
pub fn common_len<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    const CHUNK: usize = 256;
    let len = a.len().min(b.len());
    let mut shared = 0;
    while shared + CHUNK <= len && a[shared..shared + CHUNK] == b[shared..shared + CHUNK] {
        shared += CHUNK;
    }
    shared + a[shared..len].iter().zip(&b[shared..len]).take_while(|(x, y)| x == y).count()
}
