//! The fork builder (`build_forked_messages`) and the recursion guard.
//!
//! A fork's messages are the parent's last request, the parent's assistant message, and one user
//! message with a placeholder `tool_result` per `tool_use` followed by the directive wrapped in
//! the fixed boilerplate. With [`ForkVariant::AllToolUses`] every sibling carries every
//! `tool_use` and every placeholder, so siblings differ only inside the directive block.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::block::{Block, BlockKind, BlockRef, Message, with_tokens};

/// The constant text of every placeholder result.
pub const FORK_PLACEHOLDER: &str = "Fork started - processing in background";
/// The tag the directive is wrapped in (and the guard's fallback scans for): the one the
/// verifier recognizes as the directive.
pub use forkcache_engine::verify::FORK_BOILERPLATE_TAG;
/// The `query_source` option a fork child runs with (the guard's first layer).
pub const FORK_QUERY_SOURCE: &str = "agent:builtin:fork";
/// The fixed instructions every directive block starts with.
pub const FORK_TEMPLATE: &str = "You are a forked worker process. You inherit the conversation above. Do not spawn sub-agents and do not fork. Do not converse: use your tools to carry out the directive below, then report what you did in a few sentences.";

/// Which `tool_use` blocks a fork keeps (DESIGN §3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ForkVariant {
    /// Every fork keeps every `tool_use` and every placeholder (the seeds' design). Default.
    #[default]
    AllToolUses,
    /// Each fork keeps only its own `tool_use` (what Claude Code 2.1 sends).
    OwnToolUse,
}

impl ForkVariant {
    /// Kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            ForkVariant::AllToolUses => "all-tool-uses",
            ForkVariant::OwnToolUse => "own-tool-use",
        }
    }
}

/// The directive block's text: the shared template first, the fork's own task last.
pub fn directive_text(directive: &str) -> String {
    format!(
        "<{FORK_BOILERPLATE_TAG}>\n{FORK_TEMPLATE}\n\nYour directive: {directive}\n</{FORK_BOILERPLATE_TAG}>"
    )
}

/// The note a fork in its own worktree gets, after the directive.
pub fn worktree_note(fork: usize) -> BlockRef {
    worktree_note_at(&format!("fork-{fork}"))
}

/// The worktree note for any agent working in `.worktrees/{directory}`.
pub fn worktree_note_at(directory: &str) -> BlockRef {
    Block::text(
        &format!(
            "You are working in an isolated git worktree at .worktrees/{directory}. Paths inherited from the conversation refer to the parent's working directory: translate them to the worktree root, and re-read files before editing them, since the parent may have changed them."
        ),
        None,
    )
}

/// A placeholder `tool_result` answering `tool_use`.
pub fn placeholder_result(tool_use: &BlockRef, tokens: Option<u64>) -> BlockRef {
    let id = tool_use_id(tool_use).unwrap_or_default();
    Block::from_value(&with_tokens(
        json!({"type": "tool_result", "tool_use_id": id, "content": FORK_PLACEHOLDER}),
        tokens,
    ))
}

/// The `tool_use_id` a `tool_result` block answers.
pub fn tool_result_id(block: &BlockRef) -> Option<String> {
    ids_of(block)?.tool_use_id.map(Cow::into_owned)
}

/// The `id` of a `tool_use` block.
pub fn tool_use_id(block: &BlockRef) -> Option<String> {
    ids_of(block)?.id.map(Cow::into_owned)
}

/// A block's two id fields, read without building the rest of it (a fork's request looks up
/// every `tool_use` of the spawning message, whose inputs can be long).
#[derive(Deserialize)]
struct BlockIds<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    tool_use_id: Option<Cow<'a, str>>,
}

fn ids_of(block: &BlockRef) -> Option<BlockIds<'_>> {
    serde_json::from_str(block.json()).ok()
}

/// The two messages a fork appends to the parent's last request.
///
/// `results[j]` answers the assistant's `j`-th `tool_use` (placeholders, in the correct design);
/// `own` is the index of this fork's `tool_use`; `after` holds blocks that follow the directive
/// (the worktree note), which leave the shared prefix alone.
pub fn build_forked_messages(
    assistant: &Message,
    own: usize,
    results: &[BlockRef],
    directive: BlockRef,
    after: Vec<BlockRef>,
    variant: ForkVariant,
) -> [Message; 2] {
    let tool_uses: Vec<usize> =
        (0..assistant.blocks.len()).filter(|&i| assistant.blocks[i].kind == BlockKind::ToolUse).collect();
    let kept_uses: Vec<usize> = match variant {
        ForkVariant::AllToolUses => tool_uses.clone(),
        ForkVariant::OwnToolUse => tool_uses.get(own).copied().into_iter().collect(),
    };
    let assistant_blocks = match variant {
        ForkVariant::AllToolUses => assistant.blocks.clone(),
        ForkVariant::OwnToolUse => kept_uses.iter().map(|&i| assistant.blocks[i].clone()).collect(),
    };
    let mut user_blocks: Vec<BlockRef> = match variant {
        ForkVariant::AllToolUses => results.to_vec(),
        ForkVariant::OwnToolUse => results.get(own).cloned().into_iter().collect(),
    };
    user_blocks.push(directive);
    user_blocks.extend(after);
    [Message::assistant(assistant_blocks), Message::user(user_blocks)]
}

/// The recursion guard's two layers, each reported on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct GuardVerdict {
    /// The `query_source` option says this is a fork child (survives compaction).
    pub by_query_source: bool,
    /// The history still holds a boilerplate tag (lost when compaction rewrites it).
    pub by_tag_scan: bool,
}

impl GuardVerdict {
    /// Whether a fork request from this agent is refused.
    pub fn refused(self) -> bool {
        self.by_query_source || self.by_tag_scan
    }
}

/// Checks whether an agent is a fork child, both ways.
pub fn fork_guard<'m>(
    query_source: Option<&str>,
    messages: impl IntoIterator<Item = &'m Message>,
) -> GuardVerdict {
    let tag = format!("<{FORK_BOILERPLATE_TAG}>");
    let by_tag_scan = messages.into_iter().any(|m| m.blocks.iter().any(|b| b.contains(&tag)));
    GuardVerdict { by_query_source: query_source == Some(FORK_QUERY_SOURCE), by_tag_scan }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool_use(i: usize) -> BlockRef {
        Block::from_value(
            &json!({"type": "tool_use", "id": format!("toolu_{i}"), "name": "Agent", "input": {"prompt": i}}),
        )
    }

    #[test]
    fn own_tool_use_keeps_only_its_own_call_and_result() {
        let assistant = Message::assistant(vec![Block::text("Forking.", None), tool_use(0), tool_use(1)]);
        let results: Vec<BlockRef> = (1..3).map(|i| placeholder_result(&assistant.blocks[i], None)).collect();
        let directive = Block::text(&directive_text("b"), None);
        let [a, u] = build_forked_messages(
            &assistant,
            1,
            &results,
            directive.clone(),
            vec![],
            ForkVariant::OwnToolUse,
        );
        assert_eq!(a.blocks.len(), 1);
        assert!(a.blocks[0].json().contains("toolu_1"));
        assert_eq!(u.blocks.len(), 2);
        assert!(u.blocks[0].json().contains(r#""tool_use_id":"toolu_1""#));
        let [a, u] =
            build_forked_messages(&assistant, 1, &results, directive, vec![], ForkVariant::AllToolUses);
        assert_eq!((a.blocks.len(), u.blocks.len()), (3, 3));
    }

    #[test]
    fn guard_layers_are_independent() {
        let tagged = vec![Message::user(vec![Block::text(&directive_text("x"), None)])];
        let plain = vec![Message::user(vec![Block::text("summary", None)])];
        let both = fork_guard(Some(FORK_QUERY_SOURCE), &tagged);
        assert!(both.by_query_source && both.by_tag_scan);
        let after_compaction = fork_guard(Some(FORK_QUERY_SOURCE), &plain);
        assert!(
            after_compaction.by_query_source && !after_compaction.by_tag_scan && after_compaction.refused()
        );
        assert!(!fork_guard(Some("repl_main_thread"), &plain).refused());
    }
}
