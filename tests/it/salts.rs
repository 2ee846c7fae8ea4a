//! Request parameters rendered into the prompt (DESIGN §2.1.3, reference §1.9): each joins the
//! key at its level, so a change invalidates that level and everything after it.
//!
//! Layout on Sonnet 4.6 (hidden tool prompt 497 for tool_choice auto/none), T cumulative:
//!   tool T1 1,500 ◀ → 1,500 | tool prompt 497 → 1,997 | system S 2,000 ◀ → 3,997 |
//!   user U1 1,000 → 4,997 | assistant A1 500 → 5,497 | user U2 1,000 ◀ → 6,497.
//! The first request writes 6,497. A second one at +10 s reads up to the last level the change
//! left intact, and writes the rest up to U2:
//!   nothing changed        → read 6,497;
//!   messages-level change  → read 3,997 (S), write 6,497 − 3,997 = 2,500;
//!   system-level change    → read 1,500 (T1), write 6,497 − 1,500 = 4,997;
//!   change ahead of tools  → read 0, write 6,497.

use forkcache::Dimension;
use forkcache::endpoint::EndpointConfig;
use forkcache::prompt::PromptConfig;
use serde_json::{Value, json};

use crate::support::{Body, SONNET, Session, U, assistant, bp, text, tool, u, user};

const ALL: U = u(6_497, 0, 0, 0);
const MESSAGES: U = u(3_997, 2_500, 0, 0);
const SYSTEM: U = u(1_500, 4_997, 0, 0);
const AHEAD: U = u(0, 6_497, 0, 0);

fn layout(params: &[(&str, Value)]) -> Body {
    let messages = vec![
        user(vec![text("U1", 1_000)]),
        assistant(vec![text("A1", 500)]),
        user(vec![bp(text("U2", 1_000))]),
    ];
    let body = Body::new(SONNET, messages)
        .with("tools", json!([bp(tool("T1", 1_500))]))
        .with("system", json!([bp(text("S", 2_000))]));
    params.iter().fold(body, |body, (key, value)| body.with(key, value.clone()))
}

/// First request with `before`, second with `after`; the second's usage and, when the change
/// cost anything, the request field the miss names.
fn check(
    config: PromptConfig,
    before: &[(&str, Value)],
    after: &[(&str, Value)],
    expect: U,
    field: Option<&str>,
) {
    let mut session = Session::with_config(EndpointConfig { prompt: config, ..Default::default() });
    assert_eq!(U::of(&session.send(&layout(before), 0)), AHEAD, "first request writes everything");
    let record = session.send(&layout(after), 10_000);
    assert_eq!(U::of(&record), expect, "{before:?} → {after:?}");
    let miss = record.miss.map(|m| (m.dimension, m.path));
    assert_eq!(miss, field.map(|f| (Some(Dimension::Config), f.to_string())), "{before:?} → {after:?}");
}

fn default() -> PromptConfig {
    PromptConfig::default()
}

fn ahead() -> PromptConfig {
    PromptConfig { render_config_ahead: true, ..PromptConfig::default() }
}

fn thinking(budget: u64) -> (&'static str, Value) {
    ("thinking", json!({"type": "enabled", "budget_tokens": budget}))
}

#[test]
fn tool_choice_invalidates_messages_but_not_system() {
    let auto = ("tool_choice", json!({"type": "auto"}));
    let none = ("tool_choice", json!({"type": "none"}));
    check(default(), std::slice::from_ref(&auto), &[none], MESSAGES, Some("tool_choice"));
    let serial = ("tool_choice", json!({"type": "auto", "disable_parallel_tool_use": true}));
    check(
        default(),
        std::slice::from_ref(&auto),
        &[serial],
        MESSAGES,
        Some("tool_choice.disable_parallel_tool_use"),
    );
    // Omitted equals the default.
    check(default(), &[], &[auto], ALL, None);
}

#[test]
fn thinking_budget_invalidates_messages_but_not_system() {
    // Reference §6 G5/G6: the system breakpoint still hits, the message breakpoint is rewritten.
    check(default(), &[thinking(4_000)], &[thinking(8_000)], MESSAGES, Some("thinking"));
    check(default(), &[], &[thinking(4_000)], MESSAGES, Some("thinking"));
    check(default(), &[thinking(4_000)], &[thinking(4_000)], ALL, None);
}

#[test]
fn effort_invalidates_messages_and_its_default_equals_omitting_it() {
    let effort = |level: &str| ("output_config", json!({"effort": level}));
    check(default(), &[], &[effort("low")], MESSAGES, Some("output_config.effort"));
    check(default(), &[], &[effort("high")], ALL, None);
}

#[test]
fn speed_invalidates_system_but_not_tools() {
    check(default(), &[], &[("speed", json!("fast"))], SYSTEM, Some("speed"));
}

#[test]
fn parameters_outside_the_key_change_nothing() {
    let after = [
        ("max_tokens", json!(7)),
        ("temperature", json!(0.2)),
        ("stop_sequences", json!(["END"])),
        ("metadata", json!({"user_id": "u-1"})),
        ("stream", json!(true)),
    ];
    check(default(), &[], &after, ALL, None);
}

#[test]
fn rendered_ahead_thinking_invalidates_tools_too() {
    check(ahead(), &[thinking(4_000)], &[thinking(8_000)], AHEAD, Some("thinking"));
    check(ahead(), &[], &[("output_config", json!({"effort": "low"}))], AHEAD, Some("output_config.effort"));
    // tool_choice stays at the messages level.
    check(ahead(), &[], &[("tool_choice", json!({"type": "none"}))], MESSAGES, Some("tool_choice"));
}

#[test]
fn an_image_anywhere_invalidates_messages() {
    // The second request appends an image after U2 (its own 1,000 tokens, marked): without the
    // image salt it would read 6,497; with it, S (3,997) is the last intact entry, and the writes
    // run to the image: 7,497 − 3,997 = 3,500.
    let image = json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}, "forkcache_tokens": 1_000});
    let mut session = Session::new();
    session.send(&layout(&[]), 0);
    let mut body = layout(&[]);
    body.0["messages"].as_array_mut().unwrap().push(user(vec![bp(image)]));
    let record = session.send(&body, 10_000);
    assert_eq!(U::of(&record), u(3_997, 3_500, 0, 0));
    assert_eq!(record.miss.map(|m| m.path), Some("images".to_string()));
}
