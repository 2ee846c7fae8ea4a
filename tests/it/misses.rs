//! The miss causes not met elsewhere: `not_written` — the shared prefix was sent before but no
//! marker covered it; `cold` — it was cached, and the entry is gone; `no_breakpoint` — a readable
//! entry, but no breakpoint at or after it. Plus the one definition of a miss — tokens that could
//! have been read and were not: new content (a compaction summary, sibling forks' own
//! `tool_use`) and the tokens after a request's last marker are never one, and the server's log
//! line names the cause.

use forkcache_engine::cache::MissCause::{self, Cold, NoBreakpoint, NotWritten, PrefixChanged};
use forkcache_engine::endpoint::EndpointConfig;
use forkcache_net::serve::request_line;

use crate::support::{Body, Client, SONNET, assistant, bp, check_steps, step, text, tool_use, u, user};

#[test]
fn a_prefix_sent_but_never_marked_is_not_written() {
    // The first request marks nothing (2,000 uncached); the second shares its 2,000 tokens,
    // marks its question, and reads nothing: a marker on the document would have saved 2,000.
    let records = check_steps(
        &mut Client::new(),
        &[
            step("unmarked", Body::blocks(vec![text("doc", 2_000)]), 0, u(0, 0, 0, 2_000), None),
            step(
                "marked",
                Body::blocks(vec![text("doc", 2_000), bp(text("q", 100))]),
                10_000,
                u(0, 2_100, 0, 0),
                Some(NotWritten),
            ),
        ],
    );
    let miss = records[1].miss.clone().unwrap();
    assert_eq!((miss.path.as_str(), miss.tokens_missed), ("messages[0].content[0]", 2_000));
}

/// The parent's request: a marked document, then its last turn unmarked (300 + 200 tokens).
fn parent() -> Vec<serde_json::Value> {
    vec![
        user(vec![bp(text("doc", 2_000))]),
        assistant(vec![text("reply", 300)]),
        user(vec![text("follow-up", 200)]),
    ]
}

#[test]
fn a_fork_reading_the_parents_unmarked_turn_is_not_written_and_the_log_says_so() {
    // The parent writes 2,000 and leaves 500 uncached. Its fork repeats all 2,500, adds its
    // own tool_use (50) and a marked directive (100): it reads the 2,000, and the 500 the
    // parent sent without a marker are not_written — a marker on the follow-up saves 500.
    let mut fork = parent();
    fork.push(assistant(vec![tool_use("fork_1", 50)]));
    fork.push(user(vec![bp(text("directive", 100))]));
    let records = check_steps(
        &mut Client::new(),
        &[
            step("parent", Body::new(SONNET, parent()), 0, u(0, 2_000, 0, 500), None),
            step("fork", Body::new(SONNET, fork), 10_000, u(2_000, 650, 0, 0), Some(NotWritten)),
        ],
    );
    let miss = records[1].miss.clone().unwrap();
    assert_eq!((miss.path.as_str(), miss.tokens_missed), ("messages[1].content[0]", 500));
    // It read everything there was to read; the log line names the cause, not `cold`.
    let line = request_line("req_2", 10_000, "default", Ok(&records[1]));
    assert!(line.ends_with("miss not_written at messages[1].content[0]: 500 tokens"), "{line}");
}

#[test]
fn a_cached_prefix_whose_entry_was_evicted_is_cold() {
    // A store of one entry: document B's write evicts document A's, so A's second request finds
    // nothing although its first one cached all 2,000 tokens.
    let mut config = EndpointConfig::default();
    config.cache.capacity_entries = 1;
    let a = || bp(text("doc A", 2_000));
    let records = check_steps(
        &mut Client::with_config(config),
        &[
            step("A", Body::blocks(vec![a()]), 0, u(0, 2_000, 0, 0), None),
            step("B", Body::blocks(vec![bp(text("doc B", 2_000))]), 1_000, u(0, 2_000, 0, 0), None),
            step(
                "A again",
                Body::blocks(vec![a(), bp(text("q", 100))]),
                2_000,
                u(0, 2_100, 0, 0),
                Some(Cold),
            ),
        ],
    );
    assert_eq!(records[2].miss.as_ref().unwrap().tokens_missed, 2_000);
}

/// A marked 2,000-token system prompt and these messages.
fn with_system(messages: Vec<serde_json::Value>) -> Body {
    Body::new(SONNET, messages).with("system", serde_json::json!([bp(text("system", 2_000))]))
}

#[test]
fn a_summary_replacing_the_history_is_not_a_miss() {
    // 2,000 system + 5,000 history + 100 question, cached to 7,100. The compacted request keeps
    // the system prompt and replaces the history with a 500-token summary: it reads the 2,000,
    // writes the 500, and nothing else could have been read.
    let history = || vec![user(vec![text("history", 5_000), bp(text("q", 100))])];
    let records = check_steps(
        &mut Client::new(),
        &[
            step("long", with_system(history()), 0, u(0, 7_100, 0, 0), None),
            step(
                "compacted",
                with_system(vec![user(vec![bp(text("summary", 500))])]),
                10_000,
                u(2_000, 500, 0, 0),
                None,
            ),
        ],
    );
    assert_eq!(records[1].miss, None);
}

#[test]
fn an_edit_in_place_of_the_first_message_is_still_prefix_changed() {
    // Same length as before (the history re-rendered, 5,000 tokens again): an edit. The earlier
    // entry held 7,100; 2,000 were read → 5,100 missed.
    let records = check_steps(
        &mut Client::new(),
        &[
            step(
                "first",
                with_system(vec![user(vec![text("history", 5_000), bp(text("q", 100))])]),
                0,
                u(0, 7_100, 0, 0),
                None,
            ),
            step(
                "edited",
                with_system(vec![user(vec![text("history, re-rendered", 5_000), bp(text("q", 100))])]),
                10_000,
                u(2_000, 5_100, 0, 0),
                Some(PrefixChanged),
            ),
        ],
    );
    assert_eq!(records[1].miss.as_ref().unwrap().tokens_missed, 5_100);
}

#[test]
fn the_log_line_of_a_request_without_a_miss_says_so() {
    let mut client = Client::new();
    let record = client.send(&Body::blocks(vec![bp(text("doc", 2_000))]), 0);
    let line = request_line("req_1", 0, "default", Ok(&record));
    assert!(line.ends_with("· miss -"), "{line}");
}

#[test]
fn a_readable_entry_without_a_breakpoint_is_no_breakpoint() {
    // The second request drops every marker: the entry at the document is readable, but nothing
    // looks it up.
    let records = check_steps(
        &mut Client::new(),
        &[
            step("marked", Body::blocks(vec![bp(text("doc", 2_000))]), 0, u(0, 2_000, 0, 0), None),
            step(
                "unmarked",
                Body::blocks(vec![text("doc", 2_000), text("q", 100)]),
                10_000,
                u(0, 0, 0, 2_100),
                Some(NoBreakpoint),
            ),
        ],
    );
    assert_eq!(records[1].miss.as_ref().unwrap().tokens_missed, 2_000);
}

#[test]
fn new_content_is_never_a_miss() {
    // A first request, then one that reads all of it and appends new blocks.
    check_steps(
        &mut Client::new(),
        &[
            step("first", Body::blocks(vec![bp(text("doc", 2_000))]), 0, u(0, 2_000, 0, 0), None),
            step(
                "grown",
                Body::blocks(vec![text("doc", 2_000), bp(text("q", 100))]),
                10_000,
                u(2_000, 100, 0, 0),
                None,
            ),
        ],
    );
}

#[test]
fn a_short_sibling_sent_since_does_not_hide_the_entry_an_edit_loses() {
    // The first request caches 5,100 (system 2,000 + document 3,000 + question 100). A short
    // request then shares only the system prompt (2,500 in all: to the cache, a history replaced
    // by something shorter, as a compaction does). The third edits the document
    // in place: it reads the system prompt's 2,000, and of the first request's 5,100 it could
    // have read the 3,100 past them — not the 500 the short request held there.
    let doc = |label: &str| with_system(vec![user(vec![text(label, 3_000), bp(text("q", 100))])]);
    let records = check_steps(
        &mut Client::new(),
        &[
            step("long", doc("document"), 0, u(0, 5_100, 0, 0), None),
            step(
                "short",
                with_system(vec![user(vec![bp(text("other", 500))])]),
                1_000,
                u(2_000, 500, 0, 0),
                None,
            ),
            step("edited", doc("document, edited"), 2_000, u(2_000, 3_100, 0, 0), Some(PrefixChanged)),
        ],
    );
    let miss = records[2].miss.clone().unwrap();
    assert_eq!((miss.path.as_str(), miss.tokens_missed), ("messages[0].content[0]", 3_100));
}

#[test]
fn sibling_forks_keeping_their_own_tool_use_miss_nothing() {
    // A parent writes its 2,000-token history; three forks each add their own 50-token tool_use,
    // its 30-token result and a marked 100-token directive. Fork 1 reads the history; forks 2
    // and 3 part from the fork before them at their own tool_use: the layout, not an edit. Each
    // reads the 2,000 it shares, and its own 180 were never sent before: nothing is missed.
    let fork = |n: u32| {
        let id = format!("toolu_{n}");
        Body::new(
            SONNET,
            vec![
                user(vec![bp(text("history", 2_000))]),
                assistant(vec![tool_use(&id, 50)]),
                user(vec![crate::support::tool_result(&id, 30), bp(text(&format!("directive {n}"), 100))]),
            ],
        )
    };
    let bodies = [Body::new(SONNET, vec![user(vec![bp(text("history", 2_000))])]), fork(1), fork(2), fork(3)];
    let trace: String = bodies.iter().map(|body| format!("{}\n", body.0)).collect();
    let report = forkcache_ingest::replay::replay(
        &forkcache_ingest::replay::ReplayConfig::default(),
        forkcache_engine::PriceTable::builtin(),
        &trace,
    )
    .unwrap();
    let causes: Vec<Option<MissCause>> =
        report.records.iter().map(|r| r.result.as_ref().unwrap().miss.as_ref().map(|m| m.cause)).collect();
    assert_eq!(causes, [None, None, None, None]);
    let reads: Vec<u64> =
        report.records.iter().map(|r| r.result.as_ref().unwrap().usage.cache_read_input_tokens).collect();
    assert_eq!(reads, [0, 2_000, 2_000, 2_000]);
    assert!(!report.to_table().contains("own_tool_use"));
}

#[test]
fn a_perfect_repeat_misses_nothing_and_the_log_says_so() {
    // A marked 2,000-token document, then 7 tokens after the marker. Sent twice: the repeat
    // reads the 2,000; the 7 after its own last marker can be read by no request, so they are
    // sent uncached and are not a miss.
    let body = || Body::blocks(vec![bp(text("doc", 2_000)), text("tail", 7)]);
    let records = check_steps(
        &mut Client::new(),
        &[
            step("first", body(), 0, u(0, 2_000, 0, 7), None),
            step("repeat", body(), 10_000, u(2_000, 0, 0, 7), None),
        ],
    );
    let line = request_line("req_2", 10_000, "default", Ok(&records[1]));
    assert!(line.ends_with("· miss -"), "{line}");
}
