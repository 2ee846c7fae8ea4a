//! Agent memory (seed 002): persistent notes per agent type in one of four scopes, loaded into
//! the agent's prompt when it starts. A newer snapshot (`checkAgentMemorySnapshot`) changes those
//! bytes, so where the memory sits in the prompt decides how much of the cached prefix a refresh
//! throws away.

use serde::{Deserialize, Serialize};

use super::block::{Block, BlockRef};

/// Where an agent's memory lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MemoryScope {
    /// `~/.claude/agent-memory/<type>/`, not committed.
    User,
    /// `.claude/agent-memory/<type>/`, committable.
    Project,
    /// `.claude/agent-memory-local/<type>/`, not committed.
    Local,
    /// `$CLAUDE_CODE_REMOTE_MEMORY_DIR/<project>/<type>/`, a remote mount.
    Remote,
}

impl MemoryScope {
    /// Kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            MemoryScope::User => "user",
            MemoryScope::Project => "project",
            MemoryScope::Local => "local",
            MemoryScope::Remote => "remote",
        }
    }

    /// The directory of `agent`'s memory in this scope (seed 002's table).
    pub fn path(self, agent: &str) -> String {
        match self {
            MemoryScope::User => format!("~/.claude/agent-memory/{agent}/"),
            MemoryScope::Project => format!(".claude/agent-memory/{agent}/"),
            MemoryScope::Local => format!(".claude/agent-memory-local/{agent}/"),
            MemoryScope::Remote => format!("$CLAUDE_CODE_REMOTE_MEMORY_DIR/project/{agent}/"),
        }
    }
}

/// Where the memory block goes in the agent's prompt.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MemoryPosition {
    /// The first system block, before the agent's instructions.
    SystemStart,
    /// The last system block. Default.
    #[default]
    SystemEnd,
    /// The first block of the first user message, before the task.
    FirstMessage,
}

/// The memory block: `template` with `{scope}`, `{path}` and `{snapshot}` filled in.
pub fn memory_block(
    template: &str,
    scope: MemoryScope,
    agent: &str,
    snapshot: u32,
    tokens: Option<u64>,
) -> BlockRef {
    let text = template
        .replace("{scope}", scope.name())
        .replace("{path}", &scope.path(agent))
        .replace("{snapshot}", &snapshot.to_string());
    Block::text(&text, tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_snapshot_and_scope_change_the_bytes() {
        let block =
            |scope, snapshot| memory_block("{scope} {path} #{snapshot}", scope, "explore", snapshot, None);
        assert!(block(MemoryScope::Project, 1).json().contains("project .claude/agent-memory/explore/ #1"));
        assert_ne!(block(MemoryScope::Project, 1).json(), block(MemoryScope::Project, 2).json());
        assert_ne!(block(MemoryScope::User, 1).json(), block(MemoryScope::Local, 1).json());
    }
}
