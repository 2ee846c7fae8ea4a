//! The request's betas (`anthropic-beta`), and the models each beta forkcache models applies to.
//!
//! A request names its betas in the `anthropic-beta` header, comma-separated, in one header or
//! several. `serve` reads them at its HTTP edge, `serve` and `proxy` record them in the trace
//! envelope (`"betas": [...]`), and `replay` passes them on, so the endpoint prices a replayed
//! request as it priced it live.
//!
//! Betas forkcache models:
//! - [`MID_CONVERSATION_TOOL_CHANGES`]: "allows adding or removing tools mid-conversation while
//!   keeping the cache, on Fable 5, Mythos 5, Opus 4.8 and Opus 5" (release notes, 2026-07-24).
//!   **Decision on model ids:** a listed model's id and the ids that continue it after a `-`:
//!   `claude-fable-5*`, `claude-mythos-5*`, `claude-opus-4-8*`, `claude-opus-5*`. So the later
//!   point releases of those families count (Fable 5.1 / 5.2, Mythos 5.1 / 5.2, and Opus 5.5,
//!   `claude-opus-5-5`): no source withdraws the beta from them, and Claude Code 2.1.330 sends
//!   this beta with `claude-opus-5-5` (its captured requests). Sonnet 5 and every Haiku are not
//!   listed and keep the strict rule. How the prompt is rendered under it:
//!   the engine's `prompt` module doc.
//! - [`CONTEXT_1M`]: the 1M-token context window on the models whose price-table row offers it
//!   (Sonnet 4 and 4.5, until the beta's retirement on 2026-04-30), with legacy long-context
//!   pricing above 200K input: the window and the dates live in the table
//!   (the engine's `billing` module doc states what is inferred). Claude Code sends it with some
//!   models (its "[1m]" model suffix). On a model whose table window is already a million tokens
//!   it changes nothing.
//! - [`CACHE_DIAGNOSIS`]: cache diagnostics. The request opts in with its body's `diagnostics`
//!   field, which is what forkcache reads (a body asking for diagnostics is answered whether or
//!   not the header names the beta, so clients that omit the header still get them).

use serde::{Deserialize, Serialize};

/// Tools added or removed mid-conversation keep the cache (on the models
/// [`tool_changes_keep_cache`] lists).
pub const MID_CONVERSATION_TOOL_CHANGES: &str = "mid-conversation-tool-changes-2026-07-01";

/// The 1M-token context window (and legacy long-context pricing) on the models the price table
/// offers it for.
pub const CONTEXT_1M: &str = "context-1m-2025-08-07";

/// Cache diagnostics (`diagnostics` in the body, `diagnostics` in the response).
pub const CACHE_DIAGNOSIS: &str = "cache-diagnosis-2026-04-07";

/// The models on which [`MID_CONVERSATION_TOOL_CHANGES`] applies (see the module doc).
const TOOL_CHANGE_MODELS: [&str; 4] =
    ["claude-fable-5", "claude-mythos-5", "claude-opus-4-8", "claude-opus-5"];

/// The betas a request named, in the order first named, each once.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Betas(Vec<String>);

impl Betas {
    /// No betas.
    pub const NONE: &'static Betas = &Betas(Vec::new());

    /// The betas of `anthropic-beta` header values: each value comma-separated, names trimmed,
    /// empty names dropped, repeats kept once.
    pub fn from_header_values<'v>(values: impl IntoIterator<Item = &'v str>) -> Betas {
        Betas::from_names(values.into_iter().flat_map(|value| value.split(',')))
    }

    /// The betas named (trimmed, empty names dropped, repeats kept once).
    pub fn from_names<'n>(names: impl IntoIterator<Item = &'n str>) -> Betas {
        let mut betas = Vec::new();
        for name in names.into_iter().map(str::trim).filter(|name| !name.is_empty()) {
            if !betas.iter().any(|known: &String| known == name) {
                betas.push(name.to_string());
            }
        }
        Betas(betas)
    }

    /// Whether `name` is among them.
    pub fn has(&self, name: &str) -> bool {
        self.0.iter().any(|beta| beta == name)
    }

    /// The names.
    pub fn names(&self) -> &[String] {
        &self.0
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether a request to `model` with these betas keeps its cached system and messages when
    /// its tools change ([`MID_CONVERSATION_TOOL_CHANGES`] on a listed model).
    pub fn tool_changes_keep_cache(&self, model: &str) -> bool {
        self.has(MID_CONVERSATION_TOOL_CHANGES) && tool_changes_keep_cache(model)
    }
}

/// Whether `model` is one the [`MID_CONVERSATION_TOOL_CHANGES`] beta applies to: a listed id, or
/// one continuing it after a `-` (a point release or a dated id).
pub fn tool_changes_keep_cache(model: &str) -> bool {
    TOOL_CHANGE_MODELS
        .iter()
        .any(|family| model.strip_prefix(family).is_some_and(|rest| rest.is_empty() || rest.starts_with('-')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_split_on_commas_across_headers() {
        let betas = Betas::from_header_values([
            "claude-code-20250219, mid-conversation-tool-changes-2026-07-01",
            " effort-2025-11-24 ,,claude-code-20250219",
        ]);
        assert_eq!(
            betas.names(),
            ["claude-code-20250219", MID_CONVERSATION_TOOL_CHANGES, "effort-2025-11-24"]
        );
        assert!(betas.has(MID_CONVERSATION_TOOL_CHANGES));
        assert!(!betas.has(CACHE_DIAGNOSIS));
        assert!(Betas::from_header_values([" , "]).is_empty());
    }

    #[test]
    fn listed_models_and_their_point_releases_keep_the_cache_on_tool_changes() {
        for model in [
            "claude-fable-5",
            "claude-fable-5-2",
            "claude-mythos-5-1",
            "claude-opus-4-8",
            "claude-opus-5",
            "claude-opus-5-5",
        ] {
            assert!(tool_changes_keep_cache(model), "{model}");
        }
        for model in [
            "claude-sonnet-5",
            "claude-sonnet-5-5",
            "claude-haiku-5-5",
            "claude-opus-4-7",
            "claude-opus-4-6",
            "claude-opus-50",
            "claude-opus-4-80",
        ] {
            assert!(!tool_changes_keep_cache(model), "{model}");
        }
    }

    #[test]
    fn the_beta_applies_only_when_named() {
        let named = Betas::from_names([MID_CONVERSATION_TOOL_CHANGES]);
        assert!(named.tool_changes_keep_cache("claude-opus-5-5"));
        assert!(!named.tool_changes_keep_cache("claude-sonnet-5"));
        assert!(!Betas::NONE.tool_changes_keep_cache("claude-opus-5-5"));
    }
}
