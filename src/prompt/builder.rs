//! Builds a [`Prompt`] block by block: positions, collapsed runs, salts and the hash chain.
//!
//! The renderer feeds it blocks read from request bytes; a caller that already knows its blocks'
//! facts (the scenario engine) can feed it directly and get the identical prompt.

use super::hash::chain;
use super::{BlockInfo, BlockKind, Breakpoint, Position, Prompt, SaltLevel, Salts, Slot, Ttl};
use crate::wire::Role;

// Tags keep the different things that are chained from ever colliding.
const TAG_POSITION: u8 = 1;
const TAG_SALT: u8 = 2;
const TAG_BLOCK: u8 = 3;
const TAG_RUN: u8 = 4;

const SEED_TOOL: u128 = 0x746f_6f6c;
const SEED_TOOL_PROMPT: u128 = 0x0074_6f6f_6c5f_7072_6f6d_7074;
const SEED_SYSTEM: u128 = 0x7379_7374_656d;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    Tools,
    System,
    Messages,
}

/// A `tool_use` or `tool_result` run still open to more blocks.
struct OpenRun {
    kind: BlockKind,
    message: u32,
    first_block: u32,
    blocks: u32,
    key: u128,
    tokens: u64,
}

/// Incremental [`Prompt`] construction.
///
/// The finished prompt of a builder made with [`PromptBuilder::new`] holds every position; one
/// made with [`PromptBuilder::resume`] holds only its own.
pub struct PromptBuilder {
    prompt: Prompt,
    hash: u128,
    tokens: u64,
    stage: Stage,
    run: Option<OpenRun>,
    collapse_runs: bool,
    // Positions before this builder's own (a resumed builder numbers after its head).
    offset: u32,
}

/// Where a builder stood after some blocks: enough to continue the same hash chain in another
/// request that shares those blocks, without building them again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    hash: u128,
    tokens: u64,
    stage: Stage,
    len: u32,
    first_after_tools: u32,
    first_message: u32,
    salts: Salts,
    collapse_runs: bool,
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

    /// Tokens up to the checkpoint.
    pub fn tokens(&self) -> u64 {
        self.tokens
    }

    /// The salts the chain was built with (a request with other salts cannot continue it past
    /// the level where they join).
    pub fn salts(&self) -> Salts {
        self.salts
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
            stage: Stage::Tools,
            run: None,
            collapse_runs,
            offset: 0,
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
            stage: from.stage,
            run: None,
            collapse_runs: from.collapse_runs,
            offset: from.len,
        }
    }

    /// The state after everything added so far (an open `tool_use`/`tool_result` run is closed:
    /// take checkpoints at message boundaries).
    pub fn checkpoint(&mut self) -> Checkpoint {
        self.close_run();
        Checkpoint {
            hash: self.hash,
            tokens: self.tokens,
            stage: self.stage,
            len: self.next_index(),
            first_after_tools: self.prompt.first_after_tools,
            first_message: self.prompt.first_message,
            salts: self.prompt.salts,
            collapse_runs: self.collapse_runs,
        }
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
        self.push(chain(SEED_TOOL, info.key, TAG_BLOCK), info.tokens, Slot::Tool(index), info.marker);
    }

    /// Adds the hidden tool-use prompt (after the last tool).
    pub fn tool_prompt(&mut self, tokens: u64) {
        self.push(SEED_TOOL_PROMPT, tokens, Slot::ToolPrompt, None);
    }

    /// Adds `system[index]`.
    pub fn system(&mut self, index: u32, info: &BlockInfo) {
        self.enter(Stage::System);
        self.push(chain(SEED_SYSTEM, info.key, TAG_BLOCK), info.tokens, Slot::System(index), info.marker);
    }

    /// Adds `messages[message].content[block]`; `opens` says it is the message's first block.
    pub fn message_block(&mut self, message: u32, block: u32, role: Role, opens: bool, info: &BlockInfo) {
        self.enter(Stage::Messages);
        let runs = self.collapse_runs && matches!(info.kind, BlockKind::ToolUse | BlockKind::ToolResult);
        if !runs {
            self.close_run();
            let key = chain(message_seed(role, opens), info.key, TAG_BLOCK);
            let slot = Slot::Message { message, block, run: 1 };
            self.push(key, info.tokens, slot, info.marker);
            return;
        }
        match &mut self.run {
            Some(run) if run.kind == info.kind && run.message == message => {
                run.key = chain(run.key, info.key, TAG_RUN);
                run.tokens += info.tokens;
                run.blocks += 1;
            }
            _ => {
                self.close_run();
                let key = chain(message_seed(role, opens), info.key, TAG_RUN);
                self.run = Some(OpenRun {
                    kind: info.kind,
                    message,
                    first_block: block,
                    blocks: 1,
                    key,
                    tokens: info.tokens,
                });
            }
        }
        // A marked block ends its run: the entry it writes covers exactly the prefix through it.
        if let Some(ttl) = info.marker {
            self.close_run_with(Some(ttl));
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
    }

    fn close_run(&mut self) {
        self.close_run_with(None);
    }

    fn close_run_with(&mut self, marker: Option<Ttl>) {
        if let Some(run) = self.run.take() {
            let slot = Slot::Message { message: run.message, block: run.first_block, run: run.blocks };
            self.push(run.key, run.tokens, slot, marker);
        }
    }

    fn push(&mut self, key: u128, tokens: u64, slot: Slot, marker: Option<Ttl>) {
        self.hash = chain(self.hash, key, TAG_POSITION);
        self.tokens += tokens;
        let position = self.next_index();
        self.prompt.positions.push(Position { hash: self.hash, tokens_end: self.tokens, slot });
        if let Some(ttl) = marker {
            self.prompt.breakpoints.push(Breakpoint { position, ttl });
        }
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
