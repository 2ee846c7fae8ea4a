//! Named sub-agents (Explore, Plan, general-purpose) and sidecar prompts.
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
    /// Read-only tools are the ones Explore and Plan keep.
    pub read_only: bool,
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
}

impl NamedAgent {
    /// Kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            NamedAgent::Explore => "explore",
            NamedAgent::Plan => "plan",
            NamedAgent::GeneralPurpose => "general-purpose",
        }
    }

    fn keeps(self, section: SectionKind) -> bool {
        match section {
            SectionKind::Identity | SectionKind::Main => false,
            SectionKind::ProjectConventions => self != NamedAgent::Explore,
            SectionKind::GitStatus => self == NamedAgent::GeneralPurpose,
            SectionKind::Other => true,
        }
    }

    fn instructions(self) -> &'static str {
        match self {
            NamedAgent::Explore => {
                "You are a file search specialist. Find files and code with Glob, Grep and Read; never modify anything. Report paths and findings concisely."
            }
            NamedAgent::Plan => {
                "You are a software architect. Explore the codebase read-only and return a step-by-step implementation plan with the files to change."
            }
            NamedAgent::GeneralPurpose => {
                "You are an agent for a coding assistant. Complete the task you are given fully, using the tools available, then report back."
            }
        }
    }
}

/// The agent's system prompt: its own instructions (`own_tokens` declared), then the parent's
/// sections it keeps, byte for byte.
pub fn named_system(
    agent: NamedAgent,
    sections: &[(SectionKind, BlockRef)],
    own_tokens: u64,
) -> Vec<BlockRef> {
    let mut system = vec![Block::text(agent.instructions(), Some(own_tokens))];
    system.extend(sections.iter().filter(|(kind, _)| agent.keeps(*kind)).map(|(_, block)| block.clone()));
    system
}

/// The agent's tools: read-only ones for Explore and Plan, all but `Agent` for general-purpose.
pub fn named_tools(agent: NamedAgent, tools: &[Tool]) -> Vec<BlockRef> {
    let keep = |tool: &&Tool| match agent {
        NamedAgent::Explore | NamedAgent::Plan => tool.read_only,
        NamedAgent::GeneralPurpose => tool.name != "Agent",
    };
    tools.iter().filter(keep).map(|tool| tool.block.clone()).collect()
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
            named_system(agent, &sections(), 5)
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

    #[test]
    fn explore_and_plan_get_read_only_tools_general_purpose_all_but_agent() {
        let tool =
            |name: &str, read_only| Tool { name: name.into(), read_only, block: Block::text(name, None) };
        let tools = [tool("Agent", false), tool("Read", true), tool("Edit", false), tool("Grep", true)];
        assert_eq!(named_tools(NamedAgent::Explore, &tools).len(), 2);
        assert_eq!(named_tools(NamedAgent::Plan, &tools).len(), 2);
        let general = named_tools(NamedAgent::GeneralPurpose, &tools);
        assert_eq!(general.len(), 3);
        assert!(general.iter().all(|b| !b.json().contains("Agent")));
    }
}
