//! Parameter rules the API enforces per model, with the API's own error text: a request that
//! breaks one is a 400, never priced.
//!
//! Not enforced, for want of a documented error: mid-conversation `role: "system"` messages. The
//! prompt-caching docs (2026-08) say they keep the cache "on Fable 5.x, Mythos 5, Opus 4.8 and
//! Opus 5" and are "not available on Sonnet 5", but give no error text and do not say the API
//! refuses them there (it might ignore or merge them); nothing documents Haiku either way. They
//! are accepted and priced as message content on every model until a source gives the error.

use super::error::ApiError;
use super::request::RequestView;

/// Models whose thinking is always on: `{"type": "disabled"}` is refused. Fable 5 is observed
/// refusing it (the error text below); Mythos 5 shares its generation and is assumed to.
const THINKING_ALWAYS_ON: [&str; 2] = ["claude-fable-5", "claude-mythos-5"];

/// Checks the model-specific rules for a request to `model`.
pub fn check_model_rules(view: &RequestView, model: &str) -> Result<(), ApiError> {
    let thinking = view.thinking.as_ref().map(|t| t.kind.as_str());
    if thinking == Some("disabled") && always_thinks(model) {
        return Err(ApiError::invalid("\"thinking.type.disabled\" is not supported for this model."));
    }
    let forced = view.tool_choice.as_ref().is_some_and(|c| c.kind == "any" || c.kind == "tool");
    if forced && matches!(thinking, Some("enabled" | "adaptive")) {
        return Err(ApiError::invalid("Thinking may not be enabled when tool_choice forces tool use."));
    }
    Ok(())
}

/// Whether `model` (an id or a dated/suffixed variant of one) always thinks.
fn always_thinks(model: &str) -> bool {
    THINKING_ALWAYS_ON.iter().any(|family| model.starts_with(family))
}
