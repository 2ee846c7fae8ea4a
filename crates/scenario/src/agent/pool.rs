//! Which tools a sub-agent gets (seed 002, `resolveAgentTools`): the agent type's own pool, then
//! three filtering layers — tools disallowed for every agent, tools disallowed for custom agents,
//! and, for an agent launched in the background, every tool that is not async-safe.
//!
//! The fork path never comes here: a fork keeps the parent's tool array exactly.

use super::block::BlockRef;
use super::named::{NamedAgent, Tool};

/// The three filtering layers' settings.
#[derive(Clone, Copy, Debug)]
pub struct ToolRules<'a> {
    /// Layer 1: removed for every agent (Claude Code's `ALL_AGENT_DISALLOWED_TOOLS`).
    pub disallowed_for_all: &'a [String],
    /// Layer 2: removed for custom agents (`CUSTOM_AGENT_DISALLOWED_TOOLS`).
    pub disallowed_for_custom: &'a [String],
    /// Layer 3: the agent runs in the background, so tools not marked async-safe go.
    pub background: bool,
    /// A custom agent's own deny list (its definition's `disallowedTools`).
    pub disallowed_by_definition: &'a [String],
}

/// The tools the agent type may use before the layers apply: a configured list (`*` for all)
/// wins; otherwise the type's own pool.
fn in_own_pool(agent: NamedAgent, configured: Option<&[String]>, tool: &Tool) -> bool {
    if let Some(names) = configured {
        return names.iter().any(|name| name == "*" || *name == tool.name);
    }
    let named = |names: &[&str]| names.contains(&tool.name.as_str());
    match agent {
        // Seed 000: Explore "retains only read-only tools (Glob, Grep, Read, Bash)" — Bash
        // included, though it can write; Plan keeps the tools marked read-only.
        NamedAgent::Explore => named(&["Glob", "Grep", "Read", "Bash"]),
        NamedAgent::Plan => tool.read_only,
        NamedAgent::ClaudeCodeGuide => named(&["Glob", "Grep", "Read", "WebFetch", "WebSearch"]),
        NamedAgent::StatuslineSetup => named(&["Read", "Edit"]),
        NamedAgent::GeneralPurpose | NamedAgent::Verification | NamedAgent::Custom => true,
    }
}

/// Whether `tool` survives the three layers for `agent`.
fn allowed_by_layers(agent: NamedAgent, rules: &ToolRules<'_>, tool: &Tool) -> bool {
    let disallowed_for_all = rules.disallowed_for_all.contains(&tool.name);
    let disallowed_for_custom =
        agent == NamedAgent::Custom && rules.disallowed_for_custom.contains(&tool.name);
    let not_async = rules.background && !tool.async_safe;
    let denied = rules.disallowed_by_definition.contains(&tool.name);
    !(disallowed_for_all || disallowed_for_custom || not_async || denied)
}

/// The agent's tool definitions, in the parent's order (the blocks are the parent's, byte for
/// byte). `configured` is a custom or verification agent's own list.
pub fn agent_tools(
    agent: NamedAgent,
    configured: Option<&[String]>,
    rules: &ToolRules<'_>,
    tools: &[Tool],
) -> Vec<BlockRef> {
    tools
        .iter()
        .filter(|tool| in_own_pool(agent, configured, tool) && allowed_by_layers(agent, rules, tool))
        .map(|tool| tool.block.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::Block;

    fn tool(name: &str, read_only: bool, async_safe: bool) -> Tool {
        Tool { name: name.into(), read_only, async_safe, block: Block::text(name, None) }
    }

    fn names(blocks: &[BlockRef]) -> Vec<String> {
        blocks
            .iter()
            .map(|b| {
                serde_json::from_str::<serde_json::Value>(b.json()).unwrap()["text"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    }

    fn tools() -> Vec<Tool> {
        vec![
            tool("Agent", false, true),
            tool("AskUserQuestion", true, false),
            tool("Bash", false, true),
            tool("Edit", false, true),
            tool("Glob", true, true),
            tool("Read", true, true),
            tool("WebFetch", true, true),
        ]
    }

    #[test]
    fn each_type_has_its_pool_and_the_layers_apply_in_order() {
        let all = ["Agent".to_string()];
        let custom = ["Bash".to_string()];
        let rules = ToolRules {
            disallowed_for_all: &all,
            disallowed_for_custom: &custom,
            background: false,
            disallowed_by_definition: &[],
        };
        let pool = |agent, configured: Option<&[String]>, rules: &ToolRules<'_>| {
            names(&agent_tools(agent, configured, rules, &tools()))
        };
        // Layer 1 drops Agent from every pool.
        assert_eq!(
            pool(NamedAgent::GeneralPurpose, None, &rules),
            ["AskUserQuestion", "Bash", "Edit", "Glob", "Read", "WebFetch"]
        );
        // Explore: seed 000's Glob, Grep, Read, Bash (no Grep in this pool); Plan: read-only.
        assert_eq!(pool(NamedAgent::Explore, None, &rules), ["Bash", "Glob", "Read"]);
        assert_eq!(pool(NamedAgent::Plan, None, &rules), ["AskUserQuestion", "Glob", "Read", "WebFetch"]);
        assert_eq!(pool(NamedAgent::ClaudeCodeGuide, None, &rules), ["Glob", "Read", "WebFetch"]);
        assert_eq!(pool(NamedAgent::StatuslineSetup, None, &rules), ["Edit", "Read"]);
        // Layer 2 only for custom agents: Bash goes for them, not for verification.
        let wanted = ["Bash".to_string(), "Read".to_string(), "Agent".to_string()];
        assert_eq!(pool(NamedAgent::Custom, Some(&wanted), &rules), ["Read"]);
        assert_eq!(pool(NamedAgent::Verification, Some(&wanted), &rules), ["Bash", "Read"]);
        // Layer 3 in the background: AskUserQuestion is not async-safe.
        let background = ToolRules { background: true, ..rules };
        assert_eq!(
            pool(NamedAgent::GeneralPurpose, None, &background),
            ["Bash", "Edit", "Glob", "Read", "WebFetch"]
        );
        // `*` configures everything back in (before the layers).
        let star = ["*".to_string()];
        assert_eq!(pool(NamedAgent::Custom, Some(&star), &background), ["Edit", "Glob", "Read", "WebFetch"]);
    }
}
