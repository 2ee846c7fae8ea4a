//! Builds a [`Prompt`] block by block: positions, collapsed runs, salts and the hash chain.
//!
//! The renderer feeds it blocks read from request bytes; a caller that already knows its blocks'
//! facts (the scenario engine) can feed it directly and get the identical prompt.

use forkcache_wire::Role;

use super::hash::chain;
use super::{BlockInfo, BlockKind, Breakpoint, Position, Prompt, SaltLevel, Salts, Slot, Ttl};

// Tags keep the different things that are chained from ever colliding.
const TAG_BLOCK: u8 = 1;
const TAG_SALT: u8 = 2;
const TAG_KEY: u8 = 3;

const SEED_TOOL: u128 = 0x746f_6f6c;
const SEED_TOOL_PROMPT: u128 = 0x0074_6f6f_6c5f_7072_6f6d_7074;
const SEED_TOOL_CHOICE_PROMPT: u128 = 0x0063_686f_6963_655f_7072_6f6d_7074;
const SEED_SYSTEM: u128 = 0x7379_7374_656d;
const SEED_DETACHED_TOOLS: u128 = 0x6465_7461_6368_6564_5f74_6f6f_6c73;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    Tools,
    System,
    Messages,
}

/// A `tool_use` or `tool_result` run still open to more blocks. The hash chain advances block
/// by block either way; a run only decides how many positions the lookback walk counts.
struct OpenRun {
    kind: BlockKind,
    message: u32,
    first_block: u32,
    blocks: u32,
}

/// Incremental [`Prompt`] construction.
///
/// The hash chain advances once per block, so a prefix's identity depends on its blocks alone —
/// never on where the markers sit or how blocks are grouped into positions. A breakpoint records
/// the hash and `T` right after its own block, even inside a run.
///
/// The finished prompt of a builder made with [`PromptBuilder::new`] holds every position; one
/// made with [`PromptBuilder::resume`] holds only its own.
pub struct PromptBuilder {
    prompt: Prompt,
    hash: u128,
    tokens: u64,
    // Of `tokens`, those the tokenizer estimated.
    estimated: u32,
    stage: Stage,
    run: Option<OpenRun>,
    collapse_runs: bool,
    // Positions before this builder's own (a resumed builder numbers after its head).
    offset: u32,
    // Hidden-prompt tokens that depend on tool_choice, rendered where messages begin.
    tool_choice_prompt: u64,
}

/// Where a builder stood after some blocks: enough to continue the same hash chain in another
/// request that shares those blocks, without building them again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    hash: u128,
    tokens: u64,
    estimated: u32,
    stage: Stage,
    len: u32,
    first_after_tools: u32,
    first_message: u32,
    salts: Salts,
    collapse_runs: bool,
    tool_choice_prompt: u64,
}

impl Checkpoint {
    /// Positions built before the checkpoint.
    pub fn len(&self) -> u32 {
        self.len
    }

    /// Whether nothing was built before the checkpoint.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl PromptBuilder {
    /// Starts a prompt; `collapse_runs` makes runs of `tool_use`/`tool_result` one position.
    pub fn new(salts: Salts, collapse_runs: bool) -> PromptBuilder {
        let prompt = Prompt { salts, ..Prompt::default() };
        PromptBuilder {
            hash: salts.key(SaltLevel::Ahead),
            prompt,
            tokens: 0,
            estimated: 0,
            stage: Stage::Tools,
            run: None,
            collapse_runs,
            offset: 0,
            tool_choice_prompt: 0,
        }
    }

    /// Continues a chain from a checkpoint. The prompt it finishes holds only the new positions,
    /// numbered after the checkpoint's; read it as the tail of a [`super::PromptRef`] whose head
    /// is the checkpointed positions.
    pub fn resume(from: &Checkpoint) -> PromptBuilder {
        let prompt = Prompt {
            salts: from.salts,
            first_after_tools: from.first_after_tools,
            first_message: from.first_message,
            ..Prompt::default()
        };
        PromptBuilder {
            prompt,
            hash: from.hash,
            tokens: from.tokens,
            estimated: from.estimated,
            stage: from.stage,
            run: None,
            collapse_runs: from.collapse_runs,
            offset: from.len,
            tool_choice_prompt: from.tool_choice_prompt,
        }
    }

    /// The state after everything added so far (an open `tool_use`/`tool_result` run is closed:
    /// take checkpoints at message boundaries).
    pub fn checkpoint(&mut self) -> Checkpoint {
        self.close_run();
        Checkpoint {
            hash: self.hash,
            tokens: self.tokens,
            estimated: self.estimated,
            stage: self.stage,
            len: self.next_index(),
            first_after_tools: self.prompt.first_after_tools,
            first_message: self.prompt.first_message,
            salts: self.prompt.salts,
            collapse_runs: self.collapse_runs,
            tool_choice_prompt: self.tool_choice_prompt,
        }
    }

    /// The breakpoint a marker with `ttl` on the block just added would make (callers that
    /// place markers themselves record this after every block).
    pub fn breakpoint_here(&self, ttl: Ttl) -> Breakpoint {
        let position =
            if self.run.is_some() { self.next_index() } else { self.next_index().saturating_sub(1) };
        Breakpoint { position, ttl, key: self.hash, tokens: self.tokens }
    }

    /// Positions so far, the head's included.
    pub fn len(&self) -> u32 {
        self.next_index()
    }

    /// Whether nothing has been added (and nothing precedes).
    pub fn is_empty(&self) -> bool {
        self.next_index() == 0
    }

    fn next_index(&self) -> u32 {
        self.offset + self.prompt.positions.len() as u32
    }

    /// Adds `tools[index]`.
    pub fn tool(&mut self, index: u32, info: &BlockInfo) {
        self.advance(chain(SEED_TOOL, info.key, TAG_KEY), info);
        self.mark(info.marker, self.next_index());
        self.push(Slot::Tool(index), false);
    }

    /// Adds the hidden tool-use system prompt the API renders when `tools` is non-empty:
    /// `tokens` right after the tools (its size under `tool_choice` auto/none), and `extra` where
    /// the messages begin (what `any`/`tool` add), since a `tool_choice` change leaves the tools
    /// and system cached and invalidates only the messages.
    pub fn tool_prompt(&mut self, tokens: u64, extra: u64) {
        if tokens > 0 {
            self.advance_exact(SEED_TOOL_PROMPT, tokens);
            self.push(Slot::ToolPrompt, false);
        }
        self.tool_choice_prompt = extra;
    }

    /// Ends the tools section of a request whose tool changes keep the cache
    /// ([`super::ToolChanges::KeepCache`]): what follows chains on from a key that does not
    /// depend on the tools, so system and messages keep their hashes whatever tools are sent.
    /// The tools' own positions (and a marker on them) still key by their content, and their
    /// tokens still count in every `T` after them.
    pub fn detach_tools(&mut self) {
        self.hash = chain(self.prompt.salts.key(SaltLevel::Ahead), SEED_DETACHED_TOOLS, TAG_KEY);
    }

    /// Adds `system[index]`.
    pub fn system(&mut self, index: u32, info: &BlockInfo) {
        self.enter(Stage::System);
        self.advance(chain(SEED_SYSTEM, info.key, TAG_KEY), info);
        self.mark(info.marker, self.next_index());
        self.push(Slot::System(index), false);
    }

    /// Adds `messages[message].content[block]`; `opens` says it is the message's first block.
    pub fn message_block(&mut self, message: u32, block: u32, role: Role, opens: bool, info: &BlockInfo) {
        self.enter(Stage::Messages);
        let runs = self.collapse_runs && matches!(info.kind, BlockKind::ToolUse | BlockKind::ToolResult);
        let continues =
            runs && self.run.as_ref().is_some_and(|run| run.kind == info.kind && run.message == message);
        if !continues {
            self.close_run();
        }
        self.advance(chain(message_seed(role, opens), info.key, TAG_KEY), info);
        // A run's position is pushed when it closes, at the index it will have then.
        self.mark(info.marker, self.next_index());
        match &mut self.run {
            Some(run) if continues => run.blocks += 1,
            _ if runs => self.run = Some(OpenRun { kind: info.kind, message, first_block: block, blocks: 1 }),
            _ => self.push(Slot::Message { message, block, run: 1 }, info.kind == BlockKind::ToolUse),
        }
    }

    /// The finished prompt.
    pub fn finish(mut self) -> Prompt {
        self.close_run();
        let end = self.next_index();
        if self.stage < Stage::System {
            self.prompt.first_after_tools = end;
        }
        if self.stage < Stage::Messages {
            self.prompt.first_message = end;
        }
        self.prompt
    }

    fn enter(&mut self, stage: Stage) {
        if stage <= self.stage {
            return;
        }
        let salts = self.prompt.salts;
        let here = self.next_index();
        if self.stage < Stage::System {
            self.hash = chain(self.hash, salts.key(SaltLevel::System), TAG_SALT);
            self.prompt.first_after_tools = here;
        }
        if stage == Stage::Messages {
            self.hash = chain(self.hash, salts.key(SaltLevel::Messages), TAG_SALT);
            self.prompt.first_message = here;
        }
        self.stage = stage;
        if stage == Stage::Messages && self.tool_choice_prompt > 0 {
            let tokens = std::mem::take(&mut self.tool_choice_prompt);
            self.advance_exact(SEED_TOOL_CHOICE_PROMPT, tokens);
            self.push(Slot::ToolChoicePrompt, false);
        }
    }

    fn close_run(&mut self) {
        if let Some(run) = self.run.take() {
            let slot = Slot::Message { message: run.message, block: run.first_block, run: run.blocks };
            self.push(slot, run.kind == BlockKind::ToolUse);
        }
    }

    /// One more block in the chain.
    fn advance(&mut self, key: u128, info: &BlockInfo) {
        self.advance_exact(key, info.tokens);
        if info.estimated {
            let tokens = u32::try_from(info.tokens).unwrap_or(u32::MAX);
            self.estimated = self.estimated.saturating_add(tokens);
        }
    }

    /// One more block whose size is known exactly (the hidden tool-use prompt: the API's
    /// documented sizes, not an estimate).
    fn advance_exact(&mut self, key: u128, tokens: u64) {
        self.hash = chain(self.hash, key, TAG_BLOCK);
        self.tokens += tokens;
    }

    /// A breakpoint right after the block just added, in the position numbered `position`.
    fn mark(&mut self, marker: Option<Ttl>, position: u32) {
        if let Some(ttl) = marker {
            self.prompt.breakpoints.push(Breakpoint { position, ttl, key: self.hash, tokens: self.tokens });
        }
    }

    /// A position ending at the block just added; `tool_use` when its first block is one.
    fn push(&mut self, slot: Slot, tool_use: bool) {
        self.prompt.positions.push(Position {
            hash: self.hash,
            tokens_end: self.tokens,
            estimated_end: self.estimated,
            slot,
            tool_use,
        });
    }
}

/// The seed of a message block's key: the same text under another role, or across a message
/// boundary, is another prefix.
fn message_seed(role: Role, opens: bool) -> u128 {
    let role = match role {
        Role::User => 1u128,
        Role::Assistant => 2,
        Role::System => 3,
    };
    0x6d73_6700_0000 | (role << 4) | u128::from(opens)
}
