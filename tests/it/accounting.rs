//! The API's accounting (DESIGN §2.1.7, reference §1.6): A = tokens at the highest hit, B = the
//! largest T over 1h breakpoints beyond A (else A), C = T at the last breakpoint (else A);
//! read = A, 1h = B − A, 5m = C − B, uncached = total − C. Then cost, and the cookbook's
//! growing conversation (reference §6 G8).

use serde_json::{Value, json};

use forkcache_engine::cache::MissCause::Expired;
use forkcache_engine::endpoint::EndpointConfig;
use forkcache_engine::{BillingProfile, TokenEquivalents};

use crate::support::{Body, Client, Opts, U, assistant, bp, bp_1h, text, u, user};

/// Which blocks of the layout carry a marker, and with which TTL.
#[derive(Clone, Copy)]
enum M {
    No,
    Five,
    Hour,
}

fn mark(block: Value, marker: M) -> Value {
    match marker {
        M::No => block,
        M::Five => bp(block),
        M::Hour => bp_1h(block),
    }
}

/// System S (2,000) → user U1 (1,000) → user U2 (1,000) → tail (500), on Sonnet 4.6.
/// T: S 2,000; U1 3,000; U2 4,000; total 4,500. `edit` names blocks sent with other text.
fn layout(markers: [M; 3], edit: &[&str]) -> Body {
    let block = |name: &str, tokens, marker| {
        let label = if edit.contains(&name) { format!("{name}, edited") } else { name.to_string() };
        mark(text(&label, tokens), marker)
    };
    Body::blocks(vec![block("U1", 1_000, markers[1]), block("U2", 1_000, markers[2]), text("tail", 500)])
        .with("system", json!([block("S", 2_000, markers[0])]))
}

/// Sends `first` at 0, then `second` at `at_ms`; checks both usages.
fn check(first: (Body, U), second: (Body, u64, U)) -> forkcache_engine::Record {
    let mut client = Client::new();
    assert_eq!(U::of(&client.send(&first.0, 0)), first.1, "first request");
    let record = client.send(&second.0, second.1);
    assert_eq!(U::of(&record), second.2, "second request");
    record
}

#[test]
fn cold_request_with_a_1h_then_a_5m_breakpoint() {
    // A = 0; B = T[S] = 2,000 (the 1h breakpoint); C = T[U2] = 4,000.
    // 1h = 2,000 − 0; 5m = 4,000 − 2,000; uncached = 4,500 − 4,000.
    let record = Client::new().send(&layout([M::Hour, M::No, M::Five], &[]), 0);
    assert_eq!(U::of(&record), u(0, 2_000, 2_000, 500));
}

#[test]
fn a_hit_at_the_1h_breakpoint_leaves_only_5m_writes() {
    // U1 edited: U2's window finds S's entry → A = 2,000. No 1h breakpoint lies beyond A, so
    // B = A; C = 4,000: 5m = 2,000.
    let layout_1h_5m = |edit| layout([M::Hour, M::No, M::Five], edit);
    check(
        (layout_1h_5m(&[]), u(0, 2_000, 2_000, 500)),
        (layout_1h_5m(&["U1"]), 10_000, u(2_000, 2_000, 0, 500)),
    );
}

#[test]
fn hits_between_two_1h_breakpoints_and_a_5m_one() {
    // 1h on S and U1, 5m on U2. Cold: B = T[U1] = 3,000, C = 4,000 → 1h 3,000, 5m 1,000.
    let body = |edit| layout([M::Hour, M::Hour, M::Five], edit);
    let cold = (body(&[]), u(0, 1_000, 3_000, 500));
    // U1 edited → hit at S (A = 2,000); B = T[U1] = 3,000 (1h beyond A): 1h 1,000; 5m 1,000.
    check(cold.clone(), (body(&["U1"]), 10_000, u(2_000, 1_000, 1_000, 500)));
    // U2 edited → hit at U1 (A = 3,000); no 1h beyond A: B = A; 5m = 4,000 − 3,000.
    check(cold.clone(), (body(&["U2"]), 10_000, u(3_000, 1_000, 0, 500)));
    // Nothing edited → hit at U2: read 4,000, nothing written.
    check(cold, (body(&[]), 10_000, u(4_000, 0, 0, 500)));
}

#[test]
fn after_the_5m_entry_expires_the_1h_entry_still_reads() {
    // At 10 minutes U2's 5m entry has expired, S's 1h entry has not: A = 2,000, B = A,
    // C = 4,000 → 5m rewrite of 2,000.
    let body = || layout([M::Hour, M::No, M::Five], &[]);
    let record = check((body(), u(0, 2_000, 2_000, 500)), (body(), 10 * 60_000, u(2_000, 2_000, 0, 500)));
    assert_eq!(record.miss.map(|m| (m.cause, m.tokens_missed)), Some((Expired, 2_000)));
}

#[test]
fn only_1h_breakpoints_write_only_1h() {
    // B = C = 4,000.
    let record = Client::new().send(&layout([M::Hour, M::No, M::Hour], &[]), 0);
    assert_eq!(U::of(&record), u(0, 0, 4_000, 500));
}

#[test]
fn cost_is_the_price_table_times_the_usage() {
    // Sonnet 4.6 in nano-dollars per token: input 3,000; 5m write 3,750; 1h write 6,000;
    // read 300; output 15,000.
    let body = |edit| layout([M::Hour, M::Hour, M::Five], edit);
    let mut client = Client::new();
    client.send(&body(&[]), 0);
    let record = client.call(&body(&["U1"]), 10_000, Opts { output_tokens: 100, ..Opts::default() }).unwrap();
    assert_eq!(U::of(&record), u(2_000, 1_000, 1_000, 500));
    // 2,000 × 300 + 1,000 × 3,750 + 1,000 × 6,000 + 500 × 3,000 + 100 × 15,000
    // = 600,000 + 3,750,000 + 6,000,000 + 1,500,000 + 1,500,000 = 13,350,000.
    assert_eq!(record.cost.total_nanousd(), 13_350_000);
    // ÷ 3,000 per input token = 4,450 token-equivalents (kept in thousandths).
    assert_eq!(record.token_equivalents, TokenEquivalents(4_450_000));

    // Seed billing: both writes at 1.0× (3,000), reads at 0.1× (300):
    // 600,000 + 3,000,000 + 3,000,000 + 1,500,000 + 1,500,000 = 9,600,000.
    let mut client =
        Client::with_config(EndpointConfig { billing: BillingProfile::Seed, ..Default::default() });
    client.send(&body(&[]), 0);
    let record = client.call(&body(&["U1"]), 10_000, Opts { output_tokens: 100, ..Opts::default() }).unwrap();
    assert_eq!(record.cost.total_nanousd(), 9_600_000);
}

/// Cookbook G8 (reference §6): the whole book as a marked system block, the last user message
/// re-marked each turn, each assistant reply appended as a text block. Sizes chosen so the
/// cookbook's own numbers come out: book 187,340; questions 14, 14, 11, 12; replies 22, 297, 289.
fn cookbook_turn(turn: usize) -> Body {
    const QUESTIONS: [u64; 4] = [14, 14, 11, 12];
    const REPLIES: [u64; 3] = [22, 297, 289];
    let mut messages = Vec::new();
    for k in 0..=turn {
        let question = text(&format!("question {k}"), QUESTIONS[k]);
        messages.push(user(vec![if k == turn { bp(question) } else { question }]));
        if k < turn {
            messages.push(assistant(vec![text(&format!("answer {k}"), REPLIES[k])]));
        }
    }
    Body::new("claude-sonnet-4-5", messages).with("system", json!([bp(text("the whole book", 187_340))]))
}

#[test]
fn cookbook_growing_conversation_reads_what_the_turn_before_wrote() {
    // Turn 1: cold; C = 187,340 + 14 = 187,354 written.
    // Turn 2: the last question's window finds turn 1's entry (question 1): read 187,354;
    //   write reply 1 + question 2 = 22 + 14 = 36.
    // Turn 3: read 187,354 + 36 = 187,390; write 297 + 11 = 308.
    // Turn 4: read 187,390 + 308 = 187,698; write 289 + 12 = 301.
    // (The cookbook's constant `in = 4` is a rendering tail forkcache does not model: 0 here.)
    let expected = [u(0, 187_354, 0, 0), u(187_354, 36, 0, 0), u(187_390, 308, 0, 0), u(187_698, 301, 0, 0)];
    let outputs = [22, 297, 289, 300];
    let mut client = Client::new();
    let records: Vec<_> = (0..4)
        .map(|turn| {
            let at_ms = turn as u64 * 60_000;
            let opts = Opts { output_tokens: outputs[turn], ..Opts::default() };
            client.call(&cookbook_turn(turn), at_ms, opts).unwrap()
        })
        .collect();
    let usages: Vec<U> = records.iter().map(U::of).collect();
    assert_eq!(usages, expected);
    // The cookbook's relation, turn by turn: cr[n] = cr[n−1] + cc[n−1].
    for n in 1..4 {
        let (before, now) = (&records[n - 1].usage, &records[n].usage);
        assert_eq!(
            now.cache_read_input_tokens,
            before.cache_read_input_tokens + before.cache_creation_input_tokens,
            "turn {}",
            n + 1
        );
    }
    // Turn 2's cost at $3 in / $3.75 write / $0.30 read / $15 out per MTok:
    // 187,354 × 300 + 36 × 3,750 + 297 × 15,000 = 56,206,200 + 135,000 + 4,455,000.
    assert_eq!(records[1].cost.total_nanousd(), 60_796_200);
}
