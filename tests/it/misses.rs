//! The two miss causes not met elsewhere (issue 2 item 7): `cold` — the shared prefix was sent
//! before but never cached — and `no_breakpoint` — a readable entry, but no breakpoint at or
//! after it. Plus: new content is never a miss.

use forkcache::cache::MissCause::{Cold, NoBreakpoint};

use crate::support::{Body, Client, bp, check_steps, step, text, u};

#[test]
fn a_prefix_sent_but_never_cached_is_cold() {
    // The first request marks nothing (2,000 uncached); the second shares its 2,000 tokens,
    // marks its question, and reads nothing.
    let records = check_steps(
        &mut Client::new(),
        &[
            step("unmarked", Body::blocks(vec![text("doc", 2_000)]), 0, u(0, 0, 0, 2_000), None),
            step(
                "marked",
                Body::blocks(vec![text("doc", 2_000), bp(text("q", 100))]),
                10_000,
                u(0, 2_100, 0, 0),
                Some(Cold),
            ),
        ],
    );
    let miss = records[1].miss.clone().unwrap();
    assert_eq!((miss.path.as_str(), miss.tokens_missed), ("messages[0].content[0]", 2_000));
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
