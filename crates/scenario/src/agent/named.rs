//! Named sub-agents (every type of seed 002's table, and custom ones) and sidecar prompts.
//!
//! A named sub-agent shares nothing with the parent on purpose: its own system prompt, a trimmed
//! tool set, often a cheaper model, fresh messages. It saves by carrying less context, not by
//! reading the parent's cache.

use serde::{Deserialize, Serialize};

use super::block::{Block, BlockRef};

/// A part of the main loop's system prompt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SectionKind {
    /// "You are Claude Code…".
    Identity,
    /// The main instructions.
    Main,
    /// Project conventions (CLAUDE.md).
    ProjectConventions,
    /// `gitStatus`, collected at session start.
    GitStatus,
    /// Anything else.
    Other,
}

/// A tool definition and whether it only reads.
#[derive(Clone, Debug)]
pub struct Tool {
    /// Tool name.
    pub name: String,
    /// Read-only tools are the ones Plan keeps (Explore keeps seed 000's four by name).
    pub read_only: bool,
    /// Allowed for agents launched in the background (the third filtering layer drops the rest).
    pub async_safe: bool,
    /// The definition as serialized.
    pub block: BlockRef,
}

/// The named sub-agent types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NamedAgent {
    /// Read-only search on a cheaper model, without project conventions or git status.
    Explore,
    /// Read-only planning on the parent's model, without git status.
    Plan,
    /// Every tool but `Agent`, the parent's model, its own system prompt.
    GeneralPurpose,
    /// Documentation Q&A: Glob, Grep, Read, WebFetch, WebSearch.
    ClaudeCodeGuide,
    /// Status line configuration: Read and Edit.
    StatuslineSetup,
    /// Result verification: tools configurable (all by default).
    Verification,
    /// A user's agent from `.claude/agents/*.md` (its definition gives prompt, tools, model).
    Custom,
}

impl NamedAgent {
    /// Kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            NamedAgent::Explore => "explore",
            NamedAgent::Plan => "plan",
            NamedAgent::GeneralPurpose => "general-purpose",
            NamedAgent::ClaudeCodeGuide => "claude-code-guide",
            NamedAgent::StatuslineSetup => "statusline-setup",
            NamedAgent::Verification => "verification",
            NamedAgent::Custom => "custom",
        }
    }

    /// The most requests the agent makes before it is stopped (seed 002's table; a custom agent
    /// without `maxTurns` gets general-purpose's limit).
    pub fn max_turns(self) -> u32 {
        match self {
            NamedAgent::GeneralPurpose | NamedAgent::Custom => 200,
            NamedAgent::Explore | NamedAgent::Plan => 50,
            NamedAgent::ClaudeCodeGuide => 30,
            NamedAgent::Verification => 20,
            NamedAgent::StatuslineSetup => 10,
        }
    }

    /// Whether the agent keeps a section of the parent's system prompt. The seeds say which
    /// sections Explore and Plan drop; the newer types are assumed to keep what general-purpose
    /// keeps when they work on the project (verification, custom) and nothing when they do not.
    fn keeps(self, section: SectionKind) -> bool {
        match section {
            SectionKind::Identity | SectionKind::Main => false,
            SectionKind::ProjectConventions => self.works_on_project() && self != NamedAgent::Explore,
            SectionKind::GitStatus => self.works_on_project() && !self.read_only(),
            SectionKind::Other => true,
        }
    }

    fn works_on_project(self) -> bool {
        !matches!(self, NamedAgent::ClaudeCodeGuide | NamedAgent::StatuslineSetup)
    }

    fn read_only(self) -> bool {
        matches!(self, NamedAgent::Explore | NamedAgent::Plan)
    }

    /// The agent's own instructions (a custom agent's come from its definition's body).
    pub fn instructions(self) -> &'static str {
        match self {
            NamedAgent::Explore => {
                "You are a file search specialist. Find files and code with Glob, Grep and Read; never modify anything. Report paths and findings concisely."
            }
            NamedAgent::Plan => {
                "You are a software architect. Explore the codebase read-only and return a step-by-step implementation plan with the files to change."
            }
            NamedAgent::GeneralPurpose | NamedAgent::Custom => {
                "You are an agent for a coding assistant. Complete the task you are given fully, using the tools available, then report back."
            }
            NamedAgent::ClaudeCodeGuide => {
                "You are the Claude Code guide. Answer questions about Claude Code from its documentation, citing the pages you read."
            }
            NamedAgent::StatuslineSetup => {
                "You configure the user's Claude Code status line. Read their shell configuration and write the statusLine setting."
            }
            NamedAgent::Verification => {
                "You verify another agent's result. Check the claims against the code and the tests, and report what holds and what does not."
            }
        }
    }
}

/// The agent's system prompt: its own `instructions` (`own_tokens` declared, else counted), then the parent's
/// sections it keeps, byte for byte.
pub fn named_system(
    agent: NamedAgent,
    instructions: &str,
    sections: &[(SectionKind, BlockRef)],
    own_tokens: Option<u64>,
) -> Vec<BlockRef> {
    let mut system = vec![Block::text(instructions, own_tokens)];
    system.extend(sections.iter().filter(|(kind, _)| agent.keeps(*kind)).map(|(_, block)| block.clone()));
    system
}

/// The side requests made after a main-loop turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SidecarKind {
    /// Session-memory extraction.
    SessionMemory,
    /// Prompt suggestion.
    PromptSuggestion,
    /// A `/btw` side question.
    Btw,
}

impl SidecarKind {
    /// Kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            SidecarKind::SessionMemory => "session-memory",
            SidecarKind::PromptSuggestion => "prompt-suggestion",
            SidecarKind::Btw => "btw",
        }
    }
}

/// The user message a sidecar appends; `question` is the `/btw` text.
pub fn sidecar_prompt(kind: SidecarKind, question: &str, tokens: Option<u64>) -> BlockRef {
    let text = match kind {
        SidecarKind::SessionMemory => {
            "[SESSION MEMORY] Extract the facts from this conversation worth remembering in later sessions, as short notes.".to_string()
        }
        SidecarKind::PromptSuggestion => {
            "[SUGGESTION MODE: Suggest what the user might naturally type next. Reply with the suggestion only.]"
                .to_string()
        }
        SidecarKind::Btw => format!("/btw {question}"),
    };
    Block::text(&text, tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sections() -> Vec<(SectionKind, BlockRef)> {
        [SectionKind::Identity, SectionKind::Main, SectionKind::ProjectConventions, SectionKind::GitStatus]
            .into_iter()
            .map(|kind| (kind, Block::text(&format!("{kind:?}"), Some(10))))
            .collect()
    }

    #[test]
    fn named_agents_keep_only_the_sections_they_need() {
        let kept = |agent| {
            named_system(agent, agent.instructions(), &sections(), Some(5))
                .iter()
                .skip(1)
                .map(|b| b.json().to_string())
                .collect::<Vec<_>>()
        };
        // Own instructions replace identity and main; Explore drops conventions and git status,
        // Plan drops git status, general-purpose keeps both.
        assert!(kept(NamedAgent::Explore).is_empty());
        assert_eq!(kept(NamedAgent::Plan).len(), 1);
        assert!(kept(NamedAgent::Plan)[0].contains("ProjectConventions"));
        assert_eq!(kept(NamedAgent::GeneralPurpose).len(), 2);
    }
}
