//! The lookback walks of reference §1.4 (DESIGN §2.1.6): each breakpoint checks itself and the
//! 19 positions before it for an entry an earlier request wrote.
//!
//! Every block is a 1,000-token text block in one user message on Sonnet 4.6 (minimum 1,024), so
//! block k is position k−1 and `T[k] = 1,000 × k`. Requests are 10 s apart: well past every
//! writer's time to first token (at most 400 ms + 35,000 × 20 µs = 1.1 s) and well inside 5m.

use forkcache_engine::Dimension;
use forkcache_engine::cache::MissCause::{LookbackExceeded, PrefixChanged};

use crate::support::{Body, Client, Step, bp, check_steps, step, text, u};

const BLOCK: u64 = 1_000;

/// Blocks 1..=n; those in `edited` carry other text, those in `marked` a 5m breakpoint.
fn blocks(n: u64, edited: &[u64], marked: &[u64]) -> Body {
    let block = |k: u64| {
        let label = if edited.contains(&k) { format!("block {k}, edited") } else { format!("block {k}") };
        let block = text(&label, BLOCK);
        if marked.contains(&k) { bp(block) } else { block }
    };
    Body::blocks((1..=n).map(block).collect())
}

/// The writes the 30-block example presumes: entries at blocks 4, 24 and 30.
fn thirty_block_history() -> Vec<Step> {
    vec![
        // Cold: writes T[4] = 4,000.
        step("write at 4", blocks(4, &[], &[4]), 0, u(0, 4_000, 0, 0), None),
        // Breakpoint 24 checks 24..5 (nothing); breakpoint 4 finds its entry: read 4,000,
        // write T[24] − 4,000 = 20,000.
        step("write at 24", blocks(24, &[], &[4, 24]), 10_000, u(4_000, 20_000, 0, 0), None),
        // Breakpoint 30 checks 30, 29, …, 24 → hit: read 24,000, write 30,000 − 24,000 = 6,000.
        step("write at 30", blocks(30, &[], &[30]), 20_000, u(24_000, 6_000, 0, 0), None),
    ]
}

/// Runs the history, then `probe`; returns the probe's record.
fn check_after_history(probe: Step) -> forkcache_engine::Record {
    let mut steps = thirty_block_history();
    steps.push(probe);
    check_steps(&mut Client::new(), &steps).pop().expect("the probe ran")
}

#[test]
fn thirty_blocks_send_block_31_hits_at_30() {
    // Breakpoint moved to 31: its window 31..12 finds 30 → read 30,000, write 1,000.
    check_after_history(step("31, marked", blocks(31, &[], &[31]), 30_000, u(30_000, 1_000, 0, 0), None));
}

#[test]
fn thirty_blocks_send_block_31_with_the_breakpoint_still_on_30() {
    // Breakpoint 30 hits itself → read 30,000; block 31 is after every breakpoint: uncached.
    check_after_history(step("31, 30 marked", blocks(31, &[], &[30]), 30_000, u(30_000, 0, 0, 1_000), None));
}

#[test]
fn thirty_blocks_modify_25_hits_at_24() {
    // Walk 30 → 25 (no match: the prefix changed at 25), 24 matches → read 24,000; write
    // T[30] − 24,000 = 6,000 at the breakpoint.
    let record = check_after_history(step(
        "edit 25",
        blocks(30, &[25], &[30]),
        30_000,
        u(24_000, 6_000, 0, 0),
        Some(PrefixChanged),
    ));
    let miss = record.miss.expect("the edit lost the entry at 30");
    assert_eq!(miss.dimension, Some(Dimension::Messages));
    assert_eq!(miss.path, "messages[0].content[24]", "block 25 is where it diverges");
    assert_eq!(miss.position, 24);
}

#[test]
fn thirty_blocks_modify_5_walks_20_positions_and_stops() {
    // Walk 30, 29, …, 11 (the 20th check) and stop: the entry at 4 is out of reach. No hit;
    // everything is written again at 30: 30,000.
    let record = check_after_history(step(
        "edit 5",
        blocks(30, &[5], &[30]),
        30_000,
        u(0, 30_000, 0, 0),
        Some(LookbackExceeded),
    ));
    let miss = record.miss.expect("the entry at 4 was readable");
    assert_eq!(miss.path, "messages[0].content[3]", "block 4 holds the unread entry");
    assert_eq!(miss.position, 3);
    assert_eq!(miss.tokens_missed, 4_000, "T[4] could have been read");
}

#[test]
fn thirty_blocks_modify_5_with_an_extra_breakpoint_on_5_hits_at_4() {
    // Breakpoint 30's window (30..11) finds nothing; breakpoint 5's window checks 5 (edited: no)
    // then 4 → hit: read 4,000. Both breakpoints are beyond A: C = T[30] = 30,000, so the 5m
    // writes are 30,000 − 4,000 = 26,000.
    let record = check_after_history(step(
        "edit 5, mark 5",
        blocks(30, &[5], &[5, 30]),
        30_000,
        u(4_000, 26_000, 0, 0),
        Some(PrefixChanged),
    ));
    assert_eq!(record.miss.expect("diverged").path, "messages[0].content[4]");
}

#[test]
fn growing_conversation_10_15_35() {
    let history = || {
        vec![
            // Turn 1: writes at 10.
            step("turn 1", blocks(10, &[], &[10]), 0, u(0, 10_000, 0, 0), None),
            // Turn 2: 15 (no entry) → … → 10 hit: read 10,000, write 5,000 at 15.
            step("turn 2", blocks(15, &[], &[15]), 10_000, u(10_000, 5_000, 0, 0), None),
        ]
    };
    // Turn 3: checks 35..16 and finds nothing; the entry at 15 is one position outside the
    // window. Writes 35,000.
    let mut steps = history();
    steps.push(step("turn 3", blocks(35, &[], &[35]), 20_000, u(0, 35_000, 0, 0), Some(LookbackExceeded)));
    let records = check_steps(&mut Client::new(), &steps);
    let miss = records[2].miss.clone().expect("the entry at 15 was readable");
    assert_eq!((miss.position, miss.tokens_missed), (14, 15_000));
    assert_eq!(miss.path, "messages[0].content[14]");

    // A second breakpoint at 15 finds it: read 15,000, write 35,000 − 15,000 = 20,000.
    let mut steps = history();
    steps.push(step("turn 3, 15 marked", blocks(35, &[], &[15, 35]), 20_000, u(15_000, 20_000, 0, 0), None));
    check_steps(&mut Client::new(), &steps);
}

#[test]
fn a_turn_adding_19_blocks_still_hits_and_20_does_not() {
    // "The final block works as long as each turn adds fewer than 20 blocks": from 15 to 34
    // the window 34..15 ends exactly on the entry (the 20th check).
    let turn_1 = || step("turn 1", blocks(15, &[], &[15]), 0, u(0, 15_000, 0, 0), None);
    check_steps(
        &mut Client::new(),
        &[turn_1(), step("+19", blocks(34, &[], &[34]), 10_000, u(15_000, 19_000, 0, 0), None)],
    );
    check_steps(
        &mut Client::new(),
        &[turn_1(), step("+20", blocks(35, &[], &[35]), 10_000, u(0, 35_000, 0, 0), Some(LookbackExceeded))],
    );
}

/// Blocks 1–5 are static (1,000 each); block 6 carries a timestamp (100 tokens).
fn with_timestamp(minute: u64, marked: bool) -> Body {
    let mut content: Vec<_> = (1..=5).map(|k| text(&format!("block {k}"), BLOCK)).collect();
    let stamp = text(&format!("now: 12:{minute:02}"), 100);
    content.push(if marked { bp(stamp) } else { stamp });
    Body::blocks(content)
}

#[test]
fn breakpoint_on_a_varying_block_never_reads() {
    // Every request writes a fresh entry at 6 (T = 5,100) and never reads: nothing was ever
    // written at 1–5. From the second request on, the prefix differs at block 6 from the
    // request before, whose entry lay there.
    let steps: Vec<Step> = (0..3)
        .map(|minute| {
            let miss = (minute > 0).then_some(PrefixChanged);
            step("timestamp", with_timestamp(minute, true), minute * 60_000, u(0, 5_100, 0, 0), miss)
        })
        .collect();
    let records = check_steps(&mut Client::new(), &steps);
    assert_eq!(records[2].miss.as_ref().unwrap().path, "messages[0].content[5]");
}

#[test]
fn automatic_caching_falls_into_the_same_trap() {
    // A top-level cache_control marks the last block, the timestamp: the same numbers.
    let steps: Vec<Step> = (0..3)
        .map(|minute| {
            let body =
                with_timestamp(minute, false).with("cache_control", serde_json::json!({"type": "ephemeral"}));
            let miss = (minute > 0).then_some(PrefixChanged);
            step("automatic", body, minute * 60_000, u(0, 5_100, 0, 0), miss)
        })
        .collect();
    check_steps(&mut Client::new(), &steps);
}
