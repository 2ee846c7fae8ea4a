//! TTL, expiry and refresh (DESIGN §2.1.6/§2.1.8, reference §1.6): an entry lives `ttl` from the
//! *start* of the request that wrote or last read it; it is readable while `t0 < expires_at`.
//!
//! The document is one 10,000-token block on Sonnet 4.6: a cold request's time to first token is
//! 400 ms + 10,000 × 20 µs = 600 ms, far below every gap used here.

use forkcache_engine::cache::MissCause::{self, Expired};

use crate::support::{Body, Client, FIVE_MIN_MS, HOUR_MS, Step, U, bp, bp_1h, check_steps, text, u};

const DOC: u64 = 10_000;

fn doc(ttl_1h: bool) -> Body {
    let block = text("document", DOC);
    Body::blocks(vec![if ttl_1h { bp_1h(block) } else { bp(block) }])
}

/// A write at 0 (5m or 1h) followed by requests at the given times, each a hit or a rewrite.
fn check(ttl_1h: bool, probes: &[(u64, bool)]) {
    let write = |at_ms, miss: Option<MissCause>| Step {
        what: "write",
        body: doc(ttl_1h),
        at_ms,
        expect: if ttl_1h { u(0, 0, DOC, 0) } else { u(0, DOC, 0, 0) },
        miss,
    };
    let mut steps = vec![write(0, None)];
    for &(at_ms, hit) in probes {
        steps.push(if hit {
            Step { what: "hit", body: doc(ttl_1h), at_ms, expect: u(DOC, 0, 0, 0), miss: None }
        } else {
            write(at_ms, Some(Expired))
        });
    }
    check_steps(&mut Client::new(), &steps);
}

#[test]
fn five_minutes_last_until_the_millisecond_before_300_000() {
    check(false, &[(FIVE_MIN_MS - 1, true)]);
    check(false, &[(FIVE_MIN_MS, false)]);
}

#[test]
fn one_hour_lasts_until_the_millisecond_before_3_600_000() {
    // Well past 5m, still alive.
    check(true, &[(FIVE_MIN_MS + 1, true)]);
    check(true, &[(HOUR_MS - 1, true)]);
    check(true, &[(HOUR_MS, false)]);
}

#[test]
fn a_read_renews_five_minutes_from_the_readers_start() {
    // Read at 200,000 → expires 500,000 (the write alone expired at 300,000).
    check(false, &[(200_000, true), (499_999, true)]);
    check(false, &[(200_000, true), (500_000, false)]);
}

#[test]
fn a_read_renews_one_hour_from_the_readers_start() {
    // Read at 3,000,000 → expires 6,600,000.
    check(true, &[(3_000_000, true), (6_599_999, true)]);
    check(true, &[(3_000_000, true), (6_600_000, false)]);
}

#[test]
fn the_ttl_runs_from_the_start_of_a_slow_request() {
    // 100,000 uncached tokens: first token at 400 + 2,000 = 2,400 ms. The entry still expires
    // 300,000 ms after the request *started*.
    let body = Body::blocks(vec![bp(text("big", 100_000))]);
    let mut client = Client::new();
    let first = client.send(&body, 0);
    assert_eq!(first.ttft_ms, 2_400);
    assert_eq!(U::of(&client.send(&body, FIVE_MIN_MS - 1)), u(100_000, 0, 0, 0));
    // That read renewed it from 299,999: alive until 599,999 exclusive.
    assert_eq!(U::of(&client.send(&body, 599_998)), u(100_000, 0, 0, 0));
    let mut client = Client::new();
    client.send(&body, 0);
    assert_eq!(U::of(&client.send(&body, FIVE_MIN_MS)), u(0, 100_000, 0, 0));
}

#[test]
fn a_hit_refreshes_only_the_matched_entry() {
    // Blocks A (5,000, marked) and B (5,000, marked): the first request writes at A and at B.
    let a = || bp(text("A", 5_000));
    let ab = Body::blocks(vec![a(), bp(text("B", 5_000))]);
    let ac = Body::blocks(vec![a(), bp(text("C", 5_000))]);
    let mut client = Client::new();
    assert_eq!(U::of(&client.send(&ab, 0)), u(0, 10_000, 0, 0));
    // At 200,000 the same request hits B (its last breakpoint) and renews B only.
    assert_eq!(U::of(&client.send(&ab, 200_000)), u(10_000, 0, 0, 0));
    // At 350,000, A's entry (written at 0) has expired although B's lives on: a request sharing
    // only A reads nothing, and A + B still hits.
    let record = client.send(&ac, 350_000);
    assert_eq!(U::of(&record), u(0, 10_000, 0, 0));
    assert_eq!(record.miss.map(|m| m.cause), Some(Expired));
    assert_eq!(U::of(&client.send(&ab, 350_001)), u(10_000, 0, 0, 0));
}

#[test]
fn rewriting_a_live_entry_keeps_the_longer_ttl() {
    // Two requests at one instant write the same entry, the first with 1h, the second with 5m
    // (it cannot read: the first has not begun its response). The entry keeps 1h: readable
    // after 5 minutes.
    let mut client = Client::new();
    assert_eq!(U::of(&client.send(&doc(true), 0)), u(0, 0, DOC, 0));
    assert_eq!(U::of(&client.send(&doc(false), 0)), u(0, DOC, 0, 0));
    assert_eq!(U::of(&client.send(&doc(false), 10 * 60_000)), u(DOC, 0, 0, 0));
}
