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

use serde_json::{Value, json};

use forkcache_engine::Dimension;
use forkcache_engine::endpoint::EndpointConfig;
use forkcache_engine::prompt::{ImageRule, PromptConfig};

use crate::support::{Body, Client, SONNET, U, assistant, bp, text, tool, u, user};

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
    let client = Client::with_config(EndpointConfig { prompt: config, ..Default::default() });
    check_on(client, before, after, expect, field);
}

fn check_on(
    mut client: Client,
    before: &[(&str, Value)],
    after: &[(&str, Value)],
    expect: U,
    field: Option<&str>,
) {
    assert_eq!(U::of(&client.send(&layout(before), 0)), AHEAD, "first request writes everything");
    let record = client.send(&layout(after), 10_000);
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
    // The layout's sizes are Sonnet 4.6's; the shipped table gives it no fast mode (the API
    // would refuse `speed: "fast"`), so this table lends it Opus 4.6's fast rates.
    let mut table: Value =
        serde_json::from_str(forkcache_engine::billing::BUILTIN_PRICES_JSON).expect("JSON");
    let models = table["models"].as_array_mut().expect("models");
    let sonnet = models.iter_mut().find(|m| m["ids"][0] == SONNET).expect("Sonnet 4.6");
    sonnet["fast"] =
        json!({"input": 30, "cache_write_5m": 37.5, "cache_write_1h": 60, "cache_read": 3, "output": 150});
    let prices = forkcache_engine::PriceTable::from_json(&table.to_string()).expect("a valid table");
    let endpoint =
        forkcache_engine::endpoint::MockEndpoint::new(EndpointConfig::default(), prices).expect("bytes4");
    check_on(Client { endpoint }, &[], &[("speed", json!("fast"))], SYSTEM, Some("speed"));
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

/// The layout, then the same with an image appended after U2 (its own 1,000 tokens, marked).
fn image_appended(config: PromptConfig) -> forkcache_engine::endpoint::Record {
    let image = json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}, "forkcache_tokens": 1_000});
    let mut client = Client::with_config(EndpointConfig { prompt: config, ..Default::default() });
    client.send(&layout(&[]), 0);
    let mut body = layout(&[]);
    body.0["messages"].as_array_mut().unwrap().push(user(vec![bp(image)]));
    client.send(&body, 10_000)
}

#[test]
fn under_the_documented_image_rule_an_image_anywhere_invalidates_messages() {
    // With the image salt, S (3,997) is the last intact entry, and the writes run to the image:
    // 7,497 − 3,997 = 3,500.
    let record = image_appended(PromptConfig { image_rule: ImageRule::Documented, ..default() });
    assert_eq!(U::of(&record), u(3_997, 3_500, 0, 0));
    assert_eq!(record.miss.map(|m| m.path), Some("images".to_string()));
}

#[test]
fn an_image_added_after_the_cached_prefix_leaves_it_readable() {
    // What the real API did (docs/fidelity.md): the earlier request's 6,497 tokens are read,
    // and only the image's 1,000 are written: 7,497 − 6,497.
    let record = image_appended(default());
    assert_eq!(U::of(&record), u(6_497, 1_000, 0, 0));
}

#[test]
fn citations_invalidate_system_but_not_tools() {
    // The second request appends a document with citations enabled (1,000, marked): the toggle
    // joins before the system level, so only T1 (1,500) is read; the writes run to the document:
    // 7,497 − 1,500 = 5,997.
    let document = json!({"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "a report"}, "citations": {"enabled": true}, "forkcache_tokens": 1_000});
    let mut client = Client::new();
    client.send(&layout(&[]), 0);
    let mut body = layout(&[]);
    body.0["messages"].as_array_mut().unwrap().push(user(vec![bp(document)]));
    let record = client.send(&body, 10_000);
    assert_eq!(U::of(&record), u(1_500, 5_997, 0, 0));
    assert_eq!(record.miss.map(|m| m.path), Some("citations".to_string()));
}

/// Reference §6 G5/G6 conversations on Sonnet 4.5: `system` (G5) or the first user block (G6)
/// holds the marked document; each turn appends the reply and a new question; the thinking
/// budget is 4,000, 4,000, then 8,000. Sizes are chosen so the references' own numbers come out.
fn thinking_turn(turn: usize, document_in_system: bool) -> Body {
    // (reply, question) sizes per turn: G5 needs in = 44, 386, 811; G6 in = 17, 303, 747.
    let sizes: [(u64, u64); 3] =
        if document_in_system { [(0, 44), (300, 42), (400, 25)] } else { [(0, 17), (200, 86), (400, 44)] };
    let mut messages = Vec::new();
    for (k, &(reply, question)) in sizes.iter().enumerate().take(turn + 1) {
        if k > 0 {
            messages.push(assistant(vec![text(&format!("reply {k}"), reply)]));
        }
        messages.push(user(vec![text(&format!("question {k}"), question)]));
    }
    let budget = if turn == 2 { 8_000 } else { 4_000 };
    let body = |messages| {
        Body::new("claude-sonnet-4-5", messages)
            .with("thinking", json!({"type": "enabled", "budget_tokens": budget}))
    };
    if document_in_system {
        body(messages).with("system", json!([text("instruction", 15), bp(text("large text", 1_350))]))
    } else {
        // The document is the first block of the first user message.
        let first = messages[0]["content"].as_array_mut().unwrap();
        first.insert(0, bp(text("large text", 1_370)));
        body(messages)
    }
}

fn thinking_conversation(document_in_system: bool) -> Vec<forkcache_engine::Record> {
    let mut client = Client::new();
    (0..3).map(|turn| client.send(&thinking_turn(turn, document_in_system), turn as u64 * 60_000)).collect()
}

#[test]
fn g5_a_system_breakpoint_survives_a_budget_change() {
    // T at the system breakpoint = 15 + 1,350 = 1,365. Uncached: the messages, 44, then
    // 44 + 300 + 42 = 386, then 386 + 400 + 25 = 811; the budget change leaves system intact.
    let usages: Vec<U> = thinking_conversation(true).iter().map(U::of).collect();
    assert_eq!(usages, [u(0, 1_365, 0, 44), u(1_365, 0, 0, 386), u(1_365, 0, 0, 811)]);
}

#[test]
fn g6_a_message_breakpoint_is_rewritten_after_a_budget_change() {
    // The document (1,370, marked) opens the messages: the budget change re-renders it.
    // Uncached: 17, then 17 + 200 + 86 = 303, then 303 + 400 + 44 = 747.
    let usages: Vec<U> = thinking_conversation(false).iter().map(U::of).collect();
    assert_eq!(usages, [u(0, 1_370, 0, 17), u(1_370, 0, 0, 303), u(0, 1_370, 0, 747)]);
}

#[test]
fn g6_the_budget_change_is_the_reported_miss() {
    // The third request sends the very blocks the second read from the cache; only the rendered
    // thinking budget before them changed. The 1,370 tokens it rewrote are a miss: the prefix
    // changed in its config (`thinking`), not new content.
    let third = thinking_conversation(false).pop().unwrap();
    let miss = third.miss.expect("1,370 cached tokens were lost to the budget change");
    assert_eq!(miss.cause, forkcache_engine::MissCause::PrefixChanged);
    assert_eq!((miss.dimension, miss.path.as_str()), (Some(Dimension::Config), "thinking"));
    assert_eq!(miss.tokens_missed, 1_370);
}

#[test]
fn a_tool_choice_change_at_the_cached_block_is_the_reported_miss() {
    // System S (2,000, marked) and one user block U1 (1,000, marked). tool_choice auto → none
    // keeps S (read 2,000) and re-renders U1 (written again, 1,000). U1 is the same block the
    // first request cached; the change is the rendered tool_choice in front of it.
    let body = |choice: &str| {
        Body::blocks(vec![bp(text("U1", 1_000))])
            .with("system", json!([bp(text("S", 2_000))]))
            .with("tool_choice", json!({"type": choice}))
    };
    let mut client = Client::new();
    client.send(&body("auto"), 0);
    let record = client.send(&body("none"), 10_000);
    assert_eq!(U::of(&record), u(2_000, 1_000, 0, 0));
    let miss = record.miss.expect("1,000 cached tokens were lost to the tool_choice change");
    assert_eq!(
        (miss.cause, miss.dimension),
        (forkcache_engine::MissCause::PrefixChanged, Some(Dimension::Config))
    );
    assert_eq!((miss.path.as_str(), miss.tokens_missed), ("tool_choice", 1_000));
}
