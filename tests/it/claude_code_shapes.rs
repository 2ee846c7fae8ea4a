//! What Claude Code 2.1.330 sends, first-class: its parent request as captured by the harness
//! (`fixtures/clients/claude-code-2.1.330-parent.json`, paths and device id scrubbed), a
//! mid-conversation `role: "system"` message carrying a cache marker, tools with
//! `defer_loading: true` (its `DeferredToolPlaceholder`) and the `tool_reference` blocks that
//! load them — the documented rule by default, the observed break as a switch — and the
//! model-specific parameter rules the API enforces, with its own error text.

use serde_json::{Value, json};

use forkcache_engine::cache::MissCause;
use forkcache_engine::endpoint::EndpointConfig;
use forkcache_engine::prompt::{DeferredTools, Dimension};

use crate::support::{Body, Client, SONNET, assistant, bp, text, tool, u, user};

const PARENT: &str = include_str!("../../fixtures/clients/claude-code-2.1.330-parent.json");

fn parent() -> Value {
    serde_json::from_str(PARENT).unwrap()
}

fn bytes(body: &Value) -> Vec<u8> {
    body.to_string().into_bytes()
}

#[test]
fn the_captured_parent_request_renders_its_system_message_marker_and_drops_the_deferred_placeholder() {
    let body = parent();
    assert_eq!(body["model"], "claude-opus-5-5");
    assert_eq!(body["messages"][1]["role"], "system");
    assert!(body["messages"][1]["content"][0]["cache_control"].is_object());
    let tools = body["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 12);
    assert_eq!(tools[10]["name"], "DeferredToolPlaceholder");
    assert_eq!(tools[10]["defer_loading"], true);

    let record = Client::new().send_bytes(&bytes(&body), 0);
    // Positions: 11 tools (the deferred placeholder is not in the prompt; Opus 5.5's hidden
    // tool prompt is not known to the price table, so it has none) + system[1..=2] (system[0],
    // the billing header, is dropped) + messages[0]'s two text blocks + the system message = 16.
    // Breakpoints: system[1], system[2], messages[1].
    assert_eq!((record.positions, record.breakpoints), (16, 3));
    // The last block is marked: everything is written, nothing left uncached.
    assert_eq!(record.usage.input_tokens, 0);
}

#[test]
fn the_deferred_placeholder_costs_nothing_and_removing_it_keeps_the_cache() {
    let with = parent();
    let mut without = parent();
    without["tools"].as_array_mut().unwrap().remove(10);
    let mut client = Client::new();
    let first = client.send_bytes(&bytes(&with), 0);
    let second = client.send_bytes(&bytes(&without), 1_000);
    let written = first.usage.cache_creation_input_tokens;
    assert_eq!(second.usage.cache_read_input_tokens, written, "the same prefix, read whole");
    assert_eq!((second.usage.cache_creation_input_tokens, second.usage.input_tokens), (0, 0));
    assert_eq!(second.miss, None);
}

#[test]
fn a_mid_conversation_system_message_adds_an_instruction_without_invalidating_the_cache() {
    let mut next = parent();
    let messages = next["messages"].as_array_mut().unwrap();
    messages.push(assistant(vec![text("Forking now.", 40)]));
    messages.push(json!({"role": "system", "content": [bp(text("effort: high from here on", 20))]}));
    let mut client = Client::new();
    let first = client.send_bytes(&bytes(&parent()), 0);
    let second = client.send_bytes(&bytes(&next), 1_000);
    // Everything the first request wrote is read; only the 40 + 20 new tokens are written.
    assert_eq!(second.usage.cache_read_input_tokens, first.usage.cache_creation_input_tokens);
    assert_eq!((second.usage.cache_creation_input_tokens, second.usage.input_tokens), (60, 0));
}

/// Read (1,000) and Bash (1,000), then Grep (500) deferred; a marked 2,000-token system prompt.
fn tools_with_deferred() -> Value {
    let mut grep = tool("Grep", 500);
    grep["defer_loading"] = json!(true);
    json!([tool("Read", 1_000), tool("Bash", 1_000), grep])
}

fn search_body(messages: Vec<Value>) -> Body {
    Body::new(SONNET, messages)
        .with("tools", tools_with_deferred())
        .with("system", json!([bp(text("system", 2_000))]))
}

/// The question, then tool search loading Grep: a 50-token `tool_use` and a marked 30-token
/// `tool_result` holding the `tool_reference`.
fn search_turns() -> (Body, Body) {
    let question = || user(vec![bp(text("q", 100))]);
    let search = json!({"type": "tool_use", "id": "toolu_1", "name": "ToolSearch",
                        "input": {"query": "select:Grep"}, "forkcache_tokens": 50});
    let loaded = bp(json!({"type": "tool_result", "tool_use_id": "toolu_1",
                           "content": [{"type": "tool_reference", "tool_name": "Grep"}],
                           "forkcache_tokens": 30}));
    let before = search_body(vec![question()]);
    let after = search_body(vec![question(), assistant(vec![search]), user(vec![loaded])]);
    (before, after)
}

#[test]
fn loading_a_deferred_tool_keeps_the_prefix_under_the_documented_rule() {
    // Tools 2,000 + hidden tool prompt 497 + system 2,000 + question 100 = 4,597 written; the
    // search turn reads all of it and writes its 80 tokens.
    let (before, after) = search_turns();
    let mut client = Client::new();
    assert_eq!(crate::support::U::of(&client.send(&before, 0)), u(0, 4_597, 0, 0));
    let record = client.send(&after, 1_000);
    assert_eq!(crate::support::U::of(&record), u(4_597, 80, 0, 0));
    assert_eq!(record.miss, None);
}

#[test]
fn loading_a_deferred_tool_breaks_the_prefix_under_the_observed_switch() {
    // Before the search Grep is not rendered (4,597 as above). Once a tool_reference loads it,
    // it enters the tools at tools[2]: 500 more tokens there, and every entry after tools[1]
    // is a new prefix — nothing is read, 4,597 + 500 + 80 = 5,177 are written.
    let mut config = EndpointConfig::default();
    config.prompt.deferred_tools = DeferredTools::Observed;
    let (before, after) = search_turns();
    let mut client = Client::with_config(config);
    assert_eq!(crate::support::U::of(&client.send(&before, 0)), u(0, 4_597, 0, 0));
    let record = client.send(&after, 1_000);
    assert_eq!(crate::support::U::of(&record), u(0, 5_177, 0, 0));
    let miss = record.miss.unwrap();
    assert_eq!(
        (miss.cause, miss.dimension, miss.path.as_str()),
        (MissCause::PrefixChanged, Some(Dimension::Tools), "tools[2]")
    );
}

#[test]
fn thinking_cannot_be_disabled_on_an_always_thinking_model() {
    let body = Body::blocks(vec![text("q", 10)]).with("thinking", json!({"type": "disabled"}));
    let mut client = Client::new();
    for model in ["claude-fable-5", "claude-fable-5-1"] {
        let error = client.reject(&body.clone().with("model", json!(model)), 0);
        assert_eq!(error.kind.status(), 400);
        assert_eq!(error.message, "\"thinking.type.disabled\" is not supported for this model.", "{model}");
    }
    // Sonnet 4.6 may turn it off.
    client.send(&body, 0);
}

#[test]
fn thinking_with_a_forced_tool_choice_is_refused() {
    let body = Body::blocks(vec![text("q", 10)])
        .with("tools", json!([tool("Read", 100)]))
        .with("max_tokens", json!(4_096))
        .with("thinking", json!({"type": "enabled", "budget_tokens": 2_000}));
    let mut client = Client::new();
    for choice in [json!({"type": "any"}), json!({"type": "tool", "name": "Read"})] {
        let error = client.reject(&body.clone().with("tool_choice", choice.clone()), 0);
        assert_eq!(
            error.message, "Thinking may not be enabled when tool_choice forces tool use.",
            "{choice}"
        );
    }
    let adaptive = body
        .clone()
        .with("thinking", json!({"type": "adaptive"}))
        .with("tool_choice", json!({"type": "any"}));
    assert_eq!(
        client.reject(&adaptive, 0).message,
        "Thinking may not be enabled when tool_choice forces tool use."
    );
    // `auto` leaves the choice to the model: accepted.
    client.send(&body.with("tool_choice", json!({"type": "auto"})), 0);
}

/// A whole 2.1.330 run through the harness (`FORK_ENV=0`: forks launched without
/// `CLAUDE_CODE_FORK_SUBAGENT`), paths and device id replaced by strings of the same length so
/// every block keeps its size: the parent, two fork children, the parent after the tool
/// results, and the parent once the forks reported.
const FORKS_TRACE: &str = include_str!("../../fixtures/clients/claude-code-2.1.330-forks.jsonl");

#[test]
fn a_captured_2_1_330_run_replays_to_claude_codes_own_bill() {
    let report = forkcache_ingest::replay::replay(
        &forkcache_ingest::replay::ReplayConfig::default(),
        forkcache_engine::PriceTable::builtin(),
        FORKS_TRACE,
    )
    .unwrap();
    let causes: Vec<Option<MissCause>> =
        report.records.iter().map(|r| r.result.as_ref().unwrap().miss.as_ref().map(|m| m.cause)).collect();
    // Fork 1 reads the parent; fork 2 and the parent's next request part from fork 1 at their
    // own tool_use: the layout, new content, so not a miss — each read everything it shared.
    assert_eq!(causes, [None, None, None, None, None]);
    // Claude Code's own modelUsage for the run: 49,026 read, 14,101 written (5m), 139 output,
    // costUSD 0.0830902. At Opus 5.5's $5 write / $0.20 read / $20 output per MTok:
    // 14,101 × 5,000 + 49,026 × 200 + 139 × 20,000 = 70,505,000 + 9,805,200 + 2,780,000
    // = 83,090,200 nano-dollars.
    let totals = &report.totals;
    assert_eq!(
        (
            totals.usage.cache_read_input_tokens,
            totals.usage.cache_creation_input_tokens,
            totals.usage.output_tokens
        ),
        (49_026, 14_101, 139)
    );
    assert_eq!(totals.cost.total_nanousd(), 83_090_200);
}
