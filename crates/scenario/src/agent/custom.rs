//! Custom agents in Claude Code's own format: a Markdown file under `.claude/agents/` whose YAML
//! front matter names the agent and its settings and whose body is its system prompt.
//!
//! ```text
//! ---
//! name: code-reviewer
//! description: Reviews a change for correctness and style.
//! tools: Read, Grep, Glob
//! model: haiku
//! ---
//! You are a senior reviewer. …
//! ```
//!
//! `tools` and `disallowedTools` are a comma-separated string (as Claude Code writes it) or a
//! YAML list; absent `tools` means every tool. `model` is `inherit` (the default), an alias or a
//! model id. `background: true` launches the agent in the background; `isolation` is `worktree`
//! (a note follows its prompt) or `remote` (another workspace). Keys whose effect on the bytes
//! the seeds do not document (`effort`, `permissionMode`, `mcpServers`, `skills`, `hooks`,
//! `color`, …; see the not-modelled rows of docs/run.md) are accepted and ignored, since real files
//! carry them.

use serde::Deserialize;

/// Why a definition could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct DefinitionError {
    /// The front-matter key, or `front matter` for the file's shape.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

fn error(field: &str, message: impl Into<String>) -> DefinitionError {
    DefinitionError { field: field.into(), message: message.into() }
}

/// The most turns a custom agent may ask for (general-purpose's limit).
pub const MAX_CUSTOM_TURNS: u32 = 200;

/// A custom agent's definition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentDefinition {
    /// `name`.
    pub name: String,
    /// `description`.
    pub description: String,
    /// `tools`: the names it may use; `None` for all.
    pub tools: Option<Vec<String>>,
    /// `model`: `None` inherits the parent's.
    pub model: Option<String>,
    /// `maxTurns`, when given.
    pub max_turns: Option<u32>,
    /// `disallowedTools`: removed from its pool after `tools` (seed 004: "tool allowlists or
    /// deny lists").
    pub disallowed_tools: Vec<String>,
    /// `background: true`: launched in the background even when the call does not ask
    /// (seed 004's "background preference").
    pub background: bool,
    /// `isolation` (seed 004's "isolation mode", the Agent tool's `worktree` or `remote`).
    pub isolation: Option<Isolation>,
    /// The body: the agent's system prompt.
    pub prompt: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FrontMatter {
    name: Option<String>,
    description: Option<String>,
    tools: Option<ToolList>,
    model: Option<String>,
    max_turns: Option<u32>,
    disallowed_tools: Option<ToolList>,
    background: Option<bool>,
    isolation: Option<String>,
}

/// Where a custom agent works, apart from the parent's checkout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isolation {
    /// Its own git worktree: a note follows its prompt.
    Worktree,
    /// Another machine: a background agent in another workspace.
    Remote,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ToolList {
    Commas(String),
    List(Vec<String>),
}

impl ToolList {
    fn names(self) -> Vec<String> {
        match self {
            ToolList::Commas(text) => {
                text.split(',').map(str::trim).filter(|n| !n.is_empty()).map(String::from).collect()
            }
            ToolList::List(list) => list,
        }
    }
}

impl AgentDefinition {
    /// Reads a `.claude/agents/*.md` file's text.
    pub fn from_markdown(text: &str) -> Result<AgentDefinition, DefinitionError> {
        let (yaml, body) = split_front_matter(text)?;
        let front: FrontMatter =
            yaml_serde::from_str(yaml).map_err(|e| error("front matter", format!("not valid YAML: {e}")))?;
        let required = |value: Option<String>, field: &str| match value {
            Some(text) if !text.trim().is_empty() => Ok(text),
            _ => Err(error(field, "required")),
        };
        let max_turns = match front.max_turns {
            Some(0) => return Err(error("maxTurns", "expected at least 1")),
            Some(turns) if turns > MAX_CUSTOM_TURNS => {
                return Err(error("maxTurns", format!("expected at most {MAX_CUSTOM_TURNS}, got {turns}")));
            }
            turns => turns,
        };
        let isolation = match front.isolation.as_deref() {
            None => None,
            Some("worktree") => Some(Isolation::Worktree),
            Some("remote") => Some(Isolation::Remote),
            Some(other) => {
                return Err(error("isolation", format!("expected `worktree` or `remote`, got `{other}`")));
            }
        };
        Ok(AgentDefinition {
            name: required(front.name, "name")?,
            description: required(front.description, "description")?,
            tools: front.tools.map(ToolList::names),
            model: front.model.filter(|model| model != "inherit"),
            max_turns,
            disallowed_tools: front.disallowed_tools.map(ToolList::names).unwrap_or_default(),
            background: front.background.unwrap_or(false),
            isolation,
            prompt: body.trim().to_string(),
        })
    }
}

/// `(yaml, body)` of a file that opens with a `---` line and closes its front matter with another.
fn split_front_matter(text: &str) -> Result<(&str, &str), DefinitionError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
        .ok_or_else(|| error("front matter", "the file must start with a `---` line"))?;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Ok((&rest[..offset], &rest[offset + line.len()..]));
        }
        offset += line.len();
    }
    Err(error("front matter", "no closing `---` line"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_claude_codes_format() {
        let text = "---\nname: code-reviewer\ndescription: Reviews a change.\ntools: Read, Grep,Glob\nmodel: haiku\ncolor: blue\n---\nYou review code.\n";
        let definition = AgentDefinition::from_markdown(text).unwrap();
        assert_eq!(definition.name, "code-reviewer");
        assert_eq!(
            definition.tools.as_deref(),
            Some(&["Read".to_string(), "Grep".into(), "Glob".into()][..])
        );
        assert_eq!(definition.model.as_deref(), Some("haiku"));
        assert_eq!(definition.prompt, "You review code.");
        let listed =
            "---\nname: a\ndescription: b\ntools: [Read, Edit]\nmodel: inherit\nmaxTurns: 5\n---\nbody";
        let definition = AgentDefinition::from_markdown(listed).unwrap();
        assert_eq!(definition.tools.unwrap(), ["Read", "Edit"]);
        assert_eq!((definition.model, definition.max_turns), (None, Some(5)));
    }

    #[test]
    fn bad_files_name_what_is_wrong() {
        let field = |text: &str| AgentDefinition::from_markdown(text).unwrap_err().field;
        assert_eq!(field("name: x\n"), "front matter");
        assert_eq!(field("---\nname: x\n"), "front matter");
        assert_eq!(field("---\ndescription: d\n---\n"), "name");
        assert_eq!(field("---\nname: x\n---\n"), "description");
        assert_eq!(field("---\nname: x\ndescription: d\nmaxTurns: 500\n---\n"), "maxTurns");
        assert_eq!(field("---\nname: [x\n---\n"), "front matter");
        assert_eq!(field("---\nname: x\ndescription: d\nisolation: cloud\n---\n"), "isolation");
    }
}
