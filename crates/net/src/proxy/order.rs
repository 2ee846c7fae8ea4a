//! When a finished exchange's trace line may be written.
//!
//! A line holds its exchange's usage, which arrives at the end of the response, so strict start
//! order would make one long stream hold back every later, shorter exchange. What `replay` (and
//! the journal's own endpoint) needs is weaker: when it reaches a line, every request whose cache
//! writes that line could have read is already behind it. A request's writes are readable from
//! its response's first byte, so exchange N waits only for the earlier-started, unwritten
//! exchanges M of its workspace whose successful response began no later than N started
//! (`first_byte_ms(M) ≤ at_ms(N)`). Every other earlier-started exchange was still waiting for
//! its first byte when N started (or failed, or is in another cache scope): the two are
//! concurrent, neither could read what the other wrote, and N may go first.
//!
//! So within a workspace `at_ms` rises from line to line except between concurrent exchanges;
//! an exchange never waits for a later-started one, nor for one whose response had not begun
//! when it started. One interaction falls outside the rule: a read renews an entry from the
//! reader's start, so if an entry expired between M's start and N's and only M's read would have
//! kept it alive, N read first misses it. That needs the entry to expire within M's time to
//! first byte.
//!
//! The forwarding path stamps starts, first bytes and ends under one lock and reports each
//! before releasing it, so when an end arrives every first byte stamped before it has arrived.
//! A first byte stamped after N's end is later than N's start — unless both fall in the
//! millisecond N started; an exchange that ended in its own start's millisecond therefore waits
//! for every earlier-started line (plain start order).

use std::collections::{BTreeMap, BTreeSet};

/// An exchange the journal has been told about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Stamp {
    /// The cache scope (the trace's `workspace`).
    pub(super) workspace: String,
    /// For a response that began: its first byte; for an ended exchange: its start.
    pub(super) ms: u64,
}

/// An ended exchange waiting for its line.
#[derive(Clone, Debug)]
struct Ended {
    workspace: String,
    at_ms: u64,
    ended_ms: u64,
}

/// The line-order bookkeeping, by ticket number (start order).
#[derive(Debug, Default)]
pub(super) struct Order {
    /// Every ticket below this one is written.
    low: u64,
    /// Written tickets at or above `low`.
    written_above: BTreeSet<u64>,
    /// Unwritten exchanges whose successful response began: their scope and first byte.
    begun: BTreeMap<u64, Stamp>,
    /// Ended exchanges not yet written.
    ended: BTreeMap<u64, Ended>,
}

impl Order {
    /// Ticket `seq`'s successful response began (`stamp.ms` is its first byte).
    pub(super) fn began(&mut self, seq: u64, stamp: Stamp) {
        self.begun.insert(seq, stamp);
    }

    /// Ticket `seq` ended at `ended_ms`; `stamp.ms` is its start.
    pub(super) fn ended(&mut self, seq: u64, stamp: Stamp, ended_ms: u64) {
        self.ended.insert(seq, Ended { workspace: stamp.workspace, at_ms: stamp.ms, ended_ms });
    }

    /// The earliest-started ended exchange that may be written now, marked written.
    pub(super) fn take_writable(&mut self) -> Option<u64> {
        let seq = self.ended.iter().find(|(seq, ended)| self.may_write(**seq, ended)).map(|(seq, _)| *seq)?;
        self.ended.remove(&seq);
        self.begun.remove(&seq);
        self.written_above.insert(seq);
        while self.written_above.remove(&self.low) {
            self.low += 1;
        }
        Some(seq)
    }

    fn may_write(&self, seq: u64, ended: &Ended) -> bool {
        if ended.ended_ms <= ended.at_ms {
            // A first byte may yet be stamped in this millisecond: plain start order.
            return self.low == seq;
        }
        !self
            .begun
            .range(..seq)
            .any(|(_, earlier)| earlier.workspace == ended.workspace && earlier.ms <= ended.at_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(workspace: &str, ms: u64) -> Stamp {
        Stamp { workspace: workspace.to_string(), ms }
    }

    fn drain(order: &mut Order) -> Vec<u64> {
        std::iter::from_fn(|| order.take_writable()).collect()
    }

    #[test]
    fn a_short_exchange_passes_a_long_stream_that_began_after_it_started() {
        let mut order = Order::default();
        // 0 starts at 100 and streams for a minute; its first byte comes at 900.
        // 1 starts at 500 (0 has no first byte yet) and ends at 1,200.
        order.began(0, stamp("w", 900));
        order.began(1, stamp("w", 1_000));
        order.ended(1, stamp("w", 500), 1_200);
        assert_eq!(drain(&mut order), [1], "1 could not read 0's writes (900 > 500)");
        order.ended(0, stamp("w", 100), 60_100);
        assert_eq!(drain(&mut order), [0]);
    }

    #[test]
    fn an_exchange_waits_for_an_earlier_one_whose_writes_it_could_read() {
        let mut order = Order::default();
        // 0's response began at 400, before 1 started at 500: 1 may have read 0's writes.
        order.began(0, stamp("w", 400));
        order.began(1, stamp("w", 700));
        order.ended(1, stamp("w", 500), 800);
        assert_eq!(drain(&mut order), Vec::<u64>::new());
        order.ended(0, stamp("w", 100), 5_000);
        assert_eq!(drain(&mut order), [0, 1]);
    }

    #[test]
    fn first_bytes_in_other_workspaces_and_failures_hold_nothing() {
        let mut order = Order::default();
        // 0 began at 200 in another workspace; 1 failed (no first byte reported); 2 started at 500.
        order.began(0, stamp("other", 200));
        order.ended(2, stamp("w", 500), 600);
        assert_eq!(drain(&mut order), [2]);
        order.ended(1, stamp("w", 300), 301);
        order.ended(0, stamp("other", 100), 9_000);
        assert_eq!(drain(&mut order), [0, 1]);
    }

    #[test]
    fn a_wait_is_transitive_through_a_waiting_exchange() {
        let mut order = Order::default();
        // 1 began at 300, before 2 started at 400; 1 itself waits for 0 (began at 150 < 200).
        order.began(0, stamp("w", 150));
        order.began(1, stamp("w", 300));
        order.began(2, stamp("w", 450));
        order.ended(2, stamp("w", 400), 500);
        order.ended(1, stamp("w", 200), 600);
        assert_eq!(drain(&mut order), Vec::<u64>::new());
        order.ended(0, stamp("w", 100), 700);
        assert_eq!(drain(&mut order), [0, 1, 2]);
    }

    #[test]
    fn an_exchange_ended_within_its_start_millisecond_keeps_plain_start_order() {
        let mut order = Order::default();
        // 1 started and ended at 500; 0 has no first byte yet but might stamp one at 500.
        order.ended(1, stamp("w", 500), 500);
        assert_eq!(drain(&mut order), Vec::<u64>::new());
        order.ended(0, stamp("w", 100), 2_000);
        assert_eq!(drain(&mut order), [0, 1]);
    }
}
