//! Positions (DESIGN §1, §2.1.1, §2.3): each tool, then the hidden tool-use prompt (one position
//! after the last tool, sized per model and `tool_choice`), each system block, each message
//! block — except that a run of `tool_use` (or `tool_result`) blocks is one position, and a
//! marked block ends its run.

use serde_json::{Value, json};

use forkcache_engine::cache::MissCause::LookbackExceeded;
use forkcache_engine::endpoint::EndpointConfig;
use forkcache_engine::prompt::PromptConfig;
use forkcache_engine::{Policy, cache::CacheConfig};

use crate::support::{Body, Client, SONNET, U, assistant, bp, text, tool, tool_result, tool_use, u, user};

#[test]
fn the_hidden_tool_prompt_is_sized_per_model_and_tool_choice() {
    // One 1,000-token tool and a 100-token question, nothing marked: all uncached.
    // (model, tool_choice, hidden prompt per reference §2.5)
    let cases = [
        ("claude-sonnet-4-6", None, 497),
        ("claude-sonnet-4-6", Some("auto"), 497),
        ("claude-sonnet-4-6", Some("none"), 497),
        ("claude-sonnet-4-6", Some("any"), 589),
        ("claude-opus-5", None, 286),
        ("claude-opus-5", Some("any"), 406),
        ("claude-haiku-4-5", None, 496),
        ("claude-opus-4-8", Some("any"), 410),
    ];
    for (model, choice, hidden) in cases {
        let mut body =
            Body::new(model, vec![user(vec![text("q", 100)])]).with("tools", json!([tool("t", 1_000)]));
        if let Some(choice) = choice {
            body = body.with("tool_choice", json!({"type": choice}));
        }
        let record = Client::new().send(&body, 0);
        assert_eq!(U::of(&record), u(0, 0, 0, 1_000 + hidden + 100), "{model} {choice:?}");
    }
    // No tools: no hidden prompt.
    let record = Client::new().send(&Body::blocks(vec![text("q", 100)]), 0);
    assert_eq!(U::of(&record), u(0, 0, 0, 100));
}

/// A 1,100-token tool (marked in the first request only), `system_blocks` 10-token system
/// blocks, a marked question.
fn tool_then_system(system_blocks: usize) -> Body {
    let system: Vec<Value> = (0..system_blocks).map(|k| text(&format!("s{k}"), 10)).collect();
    let tool = tool("t", 1_100);
    let tool = if system_blocks == 0 { bp(tool) } else { tool };
    Body::blocks(vec![bp(text("q", 10))]).with("tools", json!([tool])).with("system", json!(system))
}

#[test]
fn the_hidden_tool_prompt_is_one_position_of_the_walk() {
    // Positions: tool 0, hidden prompt 1, system 2..=k+1, question k+2. The first request (no
    // system) writes at the tool (1,100) and at the question; later ones mark the question only.
    // 17 system blocks: the question is position 19; its window 19..0 reaches the tool's entry.
    // T = 1,100 + 497 + 170 + 10 = 1,777: read 1,100, write 677.
    let mut client = Client::new();
    client.send(&tool_then_system(0), 0);
    assert_eq!(U::of(&client.send(&tool_then_system(17), 10_000)), u(1_100, 677, 0, 0));
    // 18 system blocks: the question is position 20; its window 20..1 misses position 0.
    // T = 1,100 + 497 + 180 + 10 = 1,787, all written again.
    let mut client = Client::new();
    client.send(&tool_then_system(0), 0);
    let record = client.send(&tool_then_system(18), 10_000);
    assert_eq!(U::of(&record), u(0, 1_787, 0, 0));
    assert_eq!(record.miss.map(|m| (m.cause, m.path)), Some((LookbackExceeded, "tools[0]".to_string())));
}

/// A 2,000-token document, then an assistant turn of `n` tool calls and a user turn of their `n`
/// results (10 tokens each), the last result marked.
fn tool_round(n: usize) -> Body {
    let uses = (0..n).map(|k| tool_use(&format!("toolu_{k}"), 10)).collect();
    let mut results: Vec<Value> = (0..n).map(|k| tool_result(&format!("toolu_{k}"), 10)).collect();
    let last = results.pop().expect("n > 0");
    results.push(bp(last));
    Body::new(SONNET, vec![user(vec![text("document", 2_000)]), assistant(uses), user(results)])
}

fn collapse(on: bool) -> EndpointConfig {
    EndpointConfig {
        prompt: PromptConfig { collapse_tool_runs: on, ..PromptConfig::default() },
        ..Default::default()
    }
}

#[test]
fn a_run_of_tool_calls_and_one_of_results_are_one_position_each() {
    // The first request writes the document. Then 25 calls + 25 results: 2 positions after the
    // document, so the last result's window reaches it: read 2,000, write 500.
    let first = Body::new(SONNET, vec![user(vec![bp(text("document", 2_000))])]);
    let mut client = Client::with_config(collapse(true));
    client.send(&first, 0);
    assert_eq!(U::of(&client.send(&tool_round(25), 10_000)), u(2_000, 500, 0, 0));
    // Without the collapse they are 50 positions: the window (positions 50..31) misses the
    // document at 0, and all 2,500 are written again.
    let mut client = Client::with_config(collapse(false));
    client.send(&first, 0);
    let record = client.send(&tool_round(25), 10_000);
    assert_eq!(U::of(&record), u(0, 2_500, 0, 0));
    assert_eq!(record.miss.map(|m| m.cause), Some(LookbackExceeded));
}

/// Document (2,000), two tool calls (100 each), four results (100 each) with markers on the
/// results listed in `marked` (0-based).
fn results_marked(marked: &[usize]) -> Body {
    let results = (0..4)
        .map(|k| {
            let block = tool_result(&format!("toolu_{k}"), 100);
            if marked.contains(&k) { bp(block) } else { block }
        })
        .collect();
    let uses = vec![tool_use("toolu_0", 100), tool_use("toolu_1", 100)];
    Body::new(SONNET, vec![user(vec![text("document", 2_000)]), assistant(uses), user(results)])
}

#[test]
fn a_marked_block_ends_its_run() {
    // The marker on the second result closes the run there: the entry covers 2,000 + 200 + 200
    // = 2,400; the two results after it are uncached.
    assert_eq!(U::of(&Client::new().send(&results_marked(&[1]), 0)), u(0, 2_400, 0, 200));
}

#[test]
fn a_marker_inside_a_run_does_not_change_what_the_prefix_is() {
    // DESIGN §2.1.1: a block's key is its JSON *without* cache_control, and an entry is the
    // prefix ending at its breakpoint. The first request marks results 2 and 4 and writes the
    // prefix through result 4 (T = 2,000 + 200 + 400 = 2,600). The second sends the same bytes
    // with a marker on result 4 only: its breakpoint's prefix is the very same prefix, so it
    // reads all 2,600.
    let mut client = Client::new();
    assert_eq!(U::of(&client.send(&results_marked(&[1, 3]), 0)), u(0, 2_600, 0, 0));
    assert_eq!(U::of(&client.send(&results_marked(&[3]), 10_000)), u(2_600, 0, 0, 0));
}

#[test]
fn longest_prefix_reads_the_same_bytes_whatever_the_markers() {
    // Under longest-prefix every position boundary is written. The first request marks result 1
    // (so its results are two positions: [1], [2..4]) and writes everything: 2,600. The second
    // sends the same blocks without markers: the prefix through result 4 was written, read 2,600.
    let config = EndpointConfig {
        cache: CacheConfig { policy: Policy::LongestPrefix, ..CacheConfig::default() },
        ..Default::default()
    };
    let mut client = Client::with_config(config);
    assert_eq!(U::of(&client.send(&results_marked(&[0]), 0)), u(0, 2_600, 0, 0));
    assert_eq!(U::of(&client.send(&results_marked(&[]), 10_000)), u(2_600, 0, 0, 0));
}
