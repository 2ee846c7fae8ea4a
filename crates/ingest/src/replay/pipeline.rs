//! The parallel front of a replay: worker threads read the trace in [`LineBatch`]es and parse
//! them; the calling thread takes the parsed batches back in file order and replays them.
//!
//! Reading is serial by nature (one worker at a time holds the reader), parsing is not, and the
//! cache is sequential again, so a batch's number is all the consumer needs to restore file order.
//! At most `2 × threads` batches are read and not yet consumed at any time: a fast reader waits
//! for the replay instead of filling memory. Parsing is a pure function of a batch's bytes, so
//! what the consumer sees is the same on every thread count.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::sync::{Condvar, Mutex, PoisonError, mpsc};

use forkcache_wire::check::CheckMemo;

use crate::trace::{BatchReader, LineReader, ParsedBatch, SKETCH_BUDGET_BYTES};

/// Bytes of whole lines read per batch: enough lines to make a worker's hand-off cheap beside
/// its parse, few enough that the batches in flight stay a few MB.
pub const BATCH_BYTES: usize = 256 << 10;

/// Batches in flight (read, not yet consumed) per worker thread.
const IN_FLIGHT_PER_THREAD: usize = 2;

/// Calls `consume` with every batch of `reader`, in file order, read and parsed on `threads`
/// worker threads (on the calling thread when `threads` is 0 or 1), each request's body checked
/// against the API's rules with `checked` (not when none). Stops at the first read error or the
/// first error `consume` returns.
pub fn for_each_batch<R, E>(
    reader: R,
    threads: usize,
    checked: Option<CheckMemo>,
    mut consume: impl FnMut(ParsedBatch) -> Result<(), E>,
) -> Result<(), E>
where
    R: BufRead + Send,
    E: From<std::io::Error> + Send,
{
    let mut batches = BatchReader::new(reader, BATCH_BYTES);
    if threads <= 1 {
        let mut lines = LineReader::default().sharing_checks(checked);
        while let Some(batch) = batches.next_batch()? {
            consume(lines.parse(batch))?;
        }
        return Ok(());
    }
    let shared = Shared {
        state: Mutex::new(ReadState { batches, in_flight: 0, finished: false }),
        room: Condvar::new(),
        limit: threads * IN_FLIGHT_PER_THREAD,
        threads,
        checked,
    };
    let (parsed, results) = mpsc::channel();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let parsed = parsed.clone();
            let shared = &shared;
            scope.spawn(move || work(shared, &parsed));
        }
        // Only the workers hold senders now: the channel closes when the last one ends.
        drop(parsed);
        let outcome = consume_in_order(&shared, &results, &mut consume);
        // On an error the workers still running must stop reading rather than wait for room.
        shared.finish();
        outcome
    })
}

/// What the workers share: the reader, and how many batches are out.
struct Shared<R> {
    state: Mutex<ReadState<R>>,
    room: Condvar,
    limit: usize,
    /// Worker threads: they share the sketches' budget.
    threads: usize,
    /// The blocks any worker saw pass the API's rules (each reads alternate lines); none when
    /// they are not checked.
    checked: Option<CheckMemo>,
}

struct ReadState<R> {
    batches: BatchReader<R>,
    in_flight: usize,
    finished: bool,
}

impl<R: BufRead> Shared<R> {
    /// The next batch to parse, once there is room for it; `None` when the trace is read or the
    /// replay stopped.
    fn take(&self) -> Option<std::io::Result<crate::trace::LineBatch>> {
        // A poisoned lock means a worker panicked; the scope re-raises that panic, so carrying on
        // with the state as it was is safe.
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        while state.in_flight >= self.limit && !state.finished {
            state = self.room.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
        if state.finished {
            return None;
        }
        match state.batches.next_batch() {
            Ok(Some(batch)) => {
                state.in_flight += 1;
                Some(Ok(batch))
            }
            Ok(None) => {
                state.finished = true;
                self.room.notify_all();
                None
            }
            Err(err) => {
                state.finished = true;
                self.room.notify_all();
                Some(Err(err))
            }
        }
    }

    /// One batch was consumed: room for another.
    fn consumed(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.in_flight -= 1;
        self.room.notify_one();
    }

    /// Nothing more is read.
    fn finish(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.finished = true;
        self.room.notify_all();
    }
}

/// A worker: take a batch, parse it, hand it over, until the trace is read.
fn work<R: BufRead>(shared: &Shared<R>, parsed: &mpsc::Sender<std::io::Result<ParsedBatch>>) {
    let mut lines =
        LineReader::new(SKETCH_BUDGET_BYTES / shared.threads).sharing_checks(shared.checked.clone());
    while let Some(batch) = shared.take() {
        let sent = parsed.send(batch.map(|batch| lines.parse(batch)));
        if sent.is_err() {
            return;
        }
    }
}

/// Feeds `consume` the batches in file order as they arrive from the workers.
fn consume_in_order<R: BufRead, E: From<std::io::Error>>(
    shared: &Shared<R>,
    results: &mpsc::Receiver<std::io::Result<ParsedBatch>>,
    consume: &mut impl FnMut(ParsedBatch) -> Result<(), E>,
) -> Result<(), E> {
    // Batches parsed ahead of the one the replay needs next (at most the in-flight limit).
    let mut early: BTreeMap<u64, ParsedBatch> = BTreeMap::new();
    let mut next = 0u64;
    for result in results {
        let batch = result?;
        early.insert(batch.number(), batch);
        while let Some(batch) = early.remove(&next) {
            consume(batch)?;
            shared.consumed();
            next += 1;
        }
    }
    Ok(())
}
