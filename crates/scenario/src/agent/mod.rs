//! The agent runtime the scenario engine drives (DESIGN §3): how requests for forks, named
//! sub-agents, sidecars and compaction are built from the parent's state.
//!
//! Everything here builds [`AgentRequest`]s from shared, once-serialized blocks; nothing sends
//! them. The fork path reuses the parent's rendered system, tools, model and thinking config
//! exactly (the [`CacheSafeParams`] snapshot), so a fork's request is a strict extension of the
//! parent's last one and siblings differ only in their directive.

mod block;
mod custom;
mod fork;
mod memory;
mod named;
mod pool;
mod render;
mod request;

pub use block::{Block, BlockKind, BlockRef, Message, block_text, with_tokens};
pub use custom::{AgentDefinition, DefinitionError, Isolation, MAX_CUSTOM_TURNS};
pub use fork::{
    FORK_BOILERPLATE_TAG, FORK_PLACEHOLDER, FORK_QUERY_SOURCE, FORK_TEMPLATE, ForkVariant, GuardVerdict,
    build_forked_messages, directive_text, fork_guard, placeholder_result, tool_result_id, tool_use_id,
    worktree_note, worktree_note_at,
};
pub use memory::{MemoryPosition, MemoryScope, memory_block};
pub use named::{NamedAgent, SectionKind, SidecarKind, Tool, named_system, sidecar_prompt};
pub use pool::{ToolRules, agent_tools};
pub use render::{RenderWork, Rendered, RequestRenderer};
pub use request::{AgentRequest, Mark, ThinkingConfig};

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;

use forkcache_engine::prompt::Ttl;

/// The cache-safe snapshot saved after each main-loop turn: the rendered bytes every fork and
/// sidecar builds from, so none of them re-collects (and re-renders) a thing.
#[derive(Clone, Debug)]
pub struct CacheSafeParams {
    /// Model id.
    pub model: String,
    /// `max_tokens` of the main loop.
    pub max_tokens: u64,
    /// The main loop's thinking config.
    pub thinking: Option<ThinkingConfig>,
    /// Rendered system blocks.
    pub system: Arc<Vec<BlockRef>>,
    /// Tool definitions, in the main loop's order.
    pub tools: Arc<Vec<BlockRef>>,
    /// The messages of the last main-loop request.
    pub messages: Arc<Vec<Message>>,
    /// That request's answer, once known.
    pub last_reply: Option<Message>,
    /// The results of that answer's tool calls, once they are in (the user message after it).
    pub last_results: Option<Message>,
    /// Marker on the last system block.
    pub mark_system: bool,
    /// Marker TTL.
    pub ttl: Ttl,
}

impl CacheSafeParams {
    /// A request on the snapshot: its messages followed by `tail`, the last block marked.
    pub fn request(&self, tail: Vec<Message>) -> AgentRequest {
        let mut request = AgentRequest {
            model: self.model.clone(),
            max_tokens: self.max_tokens,
            thinking: self.thinking,
            system: Arc::clone(&self.system),
            tools: Arc::clone(&self.tools),
            head: Arc::clone(&self.messages),
            tail,
            marks: Vec::new(),
            ttl: self.ttl,
        };
        if self.mark_system && !self.system.is_empty() {
            request.marks.push(Mark::System(self.system.len() as u32 - 1));
        }
        request.mark_last_block();
        request
    }

    /// A sidecar's request: the last main-loop request, its answer, then one user message.
    ///
    /// Sidecars run in the stop hooks, at the end of the turn (seed 000): by then every
    /// `tool_use` of the answer has its result, so the user message holds those results first
    /// and the sidecar's prompt after them. A snapshot taken mid-turn (calls without results)
    /// is a body the API refuses.
    pub fn sidecar_request(&self, prompt: BlockRef) -> AgentRequest {
        let mut tail: Vec<Message> = self.last_reply.iter().cloned().collect();
        let calls = tail.iter().any(|reply| reply.blocks.iter().any(|b| b.kind == BlockKind::ToolUse));
        let mut closing = match (&self.last_results, calls) {
            (Some(results), true) => results.blocks.clone(),
            _ => Vec::new(),
        };
        closing.push(prompt);
        tail.push(Message::user(closing));
        self.request(tail)
    }
}

/// When the content-replacement budget stubs a tool result out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplacementPolicy {
    /// A result is replaced only when the context is at least this large when it is decided.
    pub context_tokens: u64,
    /// …and the result itself at least this large.
    pub min_result_tokens: u64,
}

/// Content-replacement decisions, made once per `tool_use_id` and then frozen.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplacementState {
    decisions: BTreeMap<String, bool>,
}

impl ReplacementState {
    /// Decides (once) whether result `id` is replaced, at a context of `context_tokens`.
    pub fn decide(
        &mut self,
        id: &str,
        block: &BlockRef,
        context_tokens: u64,
        policy: &ReplacementPolicy,
    ) -> BlockRef {
        let replace = *self.decisions.entry(id.to_string()).or_insert_with(|| {
            block.stub.is_some()
                && context_tokens >= policy.context_tokens
                && block.tokens >= policy.min_result_tokens
        });
        match (&block.stub, replace) {
            (Some(stub), true) => Arc::clone(stub),
            _ => Arc::clone(block),
        }
    }

    /// How many results were decided.
    pub fn len(&self) -> usize {
        self.decisions.len()
    }

    /// Whether nothing was decided yet.
    pub fn is_empty(&self) -> bool {
        self.decisions.is_empty()
    }
}

/// What a *fresh* replacement state does with inherited messages: it has seen none of them, so
/// it decides every result again at today's context size, where the parent decided each when it
/// arrived. Results the parent kept can now be stubbed, and the bytes diverge there.
pub fn redecide_fresh(messages: &[Message], context_tokens: u64, policy: &ReplacementPolicy) -> Vec<Message> {
    let mut fresh = ReplacementState::default();
    let mut counter = 0usize;
    messages
        .iter()
        .map(|message| {
            let blocks = message
                .blocks
                .iter()
                .map(|block| {
                    counter += 1;
                    fresh.decide(&format!("fresh-{counter}"), block, context_tokens, policy)
                })
                .collect();
            Message { role: message.role, blocks }
        })
        .collect()
}

/// The stub a replaced result becomes.
pub fn result_stub(tool_use_id: &str, tokens: u64) -> BlockRef {
    Block::from_value(&with_tokens(
        json!({"type": "tool_result", "tool_use_id": tool_use_id,
               "content": "[Output too large; saved to disk. Re-run the tool with a narrower query to see it.]"}),
        Some(tokens),
    ))
}

/// A compaction summary replaces the whole history: one user message holding the summary.
pub fn compacted_history(summary_text: &str, summary_tokens: u64) -> Vec<Message> {
    let text = format!(
        "This session is being continued from a previous conversation that ran out of context. The conversation is summarized below:\n{summary_text}"
    );
    vec![Message::user(vec![Block::text(&text, Some(summary_tokens))])]
}

/// The instruction the compaction sidecar appends.
pub fn compaction_prompt() -> BlockRef {
    Block::text(
        "Your task is to create a detailed summary of the conversation so far, paying close attention to the user's explicit requests and your previous actions.",
        None,
    )
}
