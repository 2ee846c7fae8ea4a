//! The prediction: every written exchange priced by the endpoint, compared with its recorded
//! usage, logged and its prediction counted — on a thread of its own at the lowest CPU priority, so it never
//! competes with forwarding or trace writing; it catches up when the machine has slack.
//!
//! The journal hands exchanges over in trace order through a [`PredictionQueue`] bounded in
//! request-body bytes. Forwarding and the trace never wait for it: an exchange whose body would
//! take the queue past its bound is not predicted. It still passes through the queue without its
//! body (a few hundred bytes), so the log and the stats stay in trace order; its log line says
//! `prediction skipped`, the stats count it, and its recorded cost is priced from the model the
//! response named. The endpoint never sees a skipped request, so a later request that read its
//! cache may be predicted as a miss: the trace holds every exchange, and `replay` of it gives
//! the full comparison.
//!
//! At shutdown nothing is left to protect: the thread stops after the job at hand and gives its
//! state back ([`Predictor::finish`]), and the thread that finishes the proxy, at the normal
//! priority, predicts what is still queued (an unprivileged thread cannot raise its own priority
//! again).

use std::collections::{BTreeMap, VecDeque};
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use axum::body::Bytes;

use forkcache_engine::billing::{Cost, RecordedUsage};
use forkcache_engine::clock::SimTime;
use forkcache_engine::endpoint::{Call, MockEndpoint, Record};
use forkcache_engine::prompt::RenderSketch;
use forkcache_engine::verify::{Divergence, cache_order, common_prefix_bytes, first_divergence};
use forkcache_ingest::trace::{BODY_BUDGET_BYTES, BodyBudget, BodyReader, skip_member};
use forkcache_wire::Reply;
use forkcache_wire::check::{CheckMemo, check_request_remembering};

use super::exchange::{Entry, Exchange};
use super::stats::{Comparison, ProxyStats};
use crate::live::Feed;

/// The default bound of the prediction queue: 256 MiB of request bodies, a few hundred requests
/// of a long agent conversation.
pub const PREDICTION_QUEUE_BYTES: usize = 256 << 20;

/// One written exchange waiting for its prediction.
struct Job {
    exchange: Exchange,
    entry: Entry,
    /// The queue was full: the body was dropped and the request is not priced.
    skipped: bool,
    /// The body bytes it holds of the queue's room (0 when skipped).
    bytes: usize,
}

/// The journal's end of the queue to the prediction thread.
pub(super) struct PredictionQueue {
    jobs: Sender<Job>,
    room: Room,
}

/// Request-body bytes waiting for their prediction, against the bound. Only the journal adds
/// and only the prediction thread releases, so a check followed by an add never overshoots.
#[derive(Clone)]
struct Room {
    queued: Arc<AtomicUsize>,
    limit: usize,
}

impl Room {
    /// Takes `bytes` if they fit under the bound.
    fn take(&self, bytes: usize) -> bool {
        let fits = self.queued.load(Ordering::Acquire).saturating_add(bytes) <= self.limit;
        if fits {
            self.queued.fetch_add(bytes, Ordering::AcqRel);
        }
        fits
    }

    fn release(&self, bytes: usize) {
        self.queued.fetch_sub(bytes, Ordering::AcqRel);
    }
}

impl PredictionQueue {
    /// Queues a written exchange (the journal counted it as pending); without room for its body,
    /// queues it as skipped.
    pub(super) fn push(&self, mut exchange: Exchange, entry: Entry) {
        let body_bytes = exchange.body_len();
        let skipped = !self.room.take(body_bytes);
        if skipped {
            exchange.drop_body();
        }
        let bytes = if skipped { 0 } else { body_bytes };
        // The prediction thread stops only once this sender is gone.
        let _ = self.jobs.send(Job { exchange, entry, skipped, bytes });
    }
}

/// The running prediction thread.
pub(super) struct Predictor {
    thread: JoinHandle<Option<(Prediction, Receiver<Job>)>>,
    /// Set at shutdown: the thread stops after the job at hand and hands its state back.
    hand_back: Arc<AtomicBool>,
}

impl Predictor {
    /// Takes the prediction back from its low-priority thread and predicts, on this thread,
    /// everything still queued until the queue is dropped (`written` waits for that: the journal
    /// thread, which holds the queue).
    pub(super) fn finish(self, written: impl FnOnce()) {
        self.hand_back.store(true, Ordering::Release);
        let handed_back = self.thread.join().ok().flatten();
        written();
        if let Some((prediction, receiver)) = handed_back {
            prediction.run(receiver, &AtomicBool::new(false));
        }
    }
}

/// Starts the prediction thread; the returned queue feeds it, and it stops once the queue is
/// dropped and drained, or when asked to hand back.
pub(super) fn start(
    endpoint: MockEndpoint,
    request_log: Option<Box<dyn Write + Send>>,
    stats: Arc<Mutex<ProxyStats>>,
    limit_bytes: usize,
    live: Arc<Mutex<Feed>>,
) -> std::io::Result<(PredictionQueue, Predictor)> {
    let (jobs, receiver) = channel();
    let room = Room { queued: Arc::new(AtomicUsize::new(0)), limit: limit_bytes };
    let checked = endpoint.config().rules_memo();
    let prediction = Prediction {
        endpoint,
        reader: BodyReader::new(BodyBudget::new(BODY_BUDGET_BYTES)),
        sketch: RenderSketch::interleaved(),
        checked,
        request_log,
        stats: Arc::clone(&stats),
        recent: Recent::default(),
        room: room.clone(),
        live,
    };
    let hand_back = Arc::new(AtomicBool::new(false));
    let asked = Arc::clone(&hand_back);
    let thread = std::thread::Builder::new().name("forkcache-proxy-predict".into()).spawn(move || {
        yield_to_forwarding();
        prediction.run(receiver, &asked)
    })?;
    Ok((PredictionQueue { jobs, room }, Predictor { thread, hand_back }))
}

/// Lowers this thread to the lowest CPU priority (nice 19): forwarding, the trace and the
/// client get the cores first. Linux schedules each thread on its own, so this thread alone is
/// lowered; elsewhere the prediction keeps the normal priority.
#[cfg(target_os = "linux")]
fn yield_to_forwarding() {
    // SAFETY: `gettid` and `setpriority` take no pointers and change this thread's nice value
    // only. A refusal (a sandbox) leaves the normal priority, which is still correct.
    unsafe {
        let thread = libc::gettid() as libc::id_t;
        let _ = libc::setpriority(libc::PRIO_PROCESS, thread, 19);
    }
}

#[cfg(not(target_os = "linux"))]
fn yield_to_forwarding() {}

struct Prediction {
    endpoint: MockEndpoint,
    /// Reads each body from where it parts from the last one, and the endpoint renders its
    /// prompt from where it parts from one of the last few (several agents, forks and side
    /// requests share a proxy): the same usage, for less of the machine.
    reader: BodyReader,
    sketch: RenderSketch,
    /// The blocks earlier bodies showed passing the API's rules: an agent resends its tools,
    /// system prompt and conversation, and each block is read for them once. None when the
    /// endpoint is lenient.
    checked: Option<CheckMemo>,
    request_log: Option<Box<dyn Write + Send>>,
    stats: Arc<Mutex<ProxyStats>>,
    recent: Recent,
    room: Room,
    /// The live page's rows, added in trace order under the stats' lock.
    live: Arc<Mutex<Feed>>,
}

impl Prediction {
    /// Predicts queued jobs until the queue is dropped and drained (none back), or until
    /// `hand_back` is set (itself and the rest of the queue back).
    fn run(mut self, receiver: Receiver<Job>, hand_back: &AtomicBool) -> Option<(Prediction, Receiver<Job>)> {
        while !hand_back.load(Ordering::Acquire) {
            let mut job = receiver.recv().ok()?;
            job.exchange.join_body();
            self.compare(&job);
            self.room.release(job.bytes);
        }
        Some((self, receiver))
    }

    /// Prices the exchange (unless skipped), writes its comparison line and counts the
    /// prediction.
    fn compare(&mut self, job: &Job) {
        let (exchange, entry) = (&job.exchange, &job.entry);
        let priced = entry.envelope.usage.is_some() && !job.skipped;
        let predicted = priced.then(|| self.predict(exchange, entry)).flatten();
        let recorded = entry.recorded.as_ref().map(|recorded| {
            let model = predicted.as_ref().map(|r| r.model.as_str()).or(entry.model.as_deref());
            (recorded.usage, self.recorded_cost(model, recorded))
        });
        let mut comparison = Comparison::new(
            entry.workspace.clone(),
            recorded,
            predicted,
            entry.envelope.error.clone(),
            entry.envelope.incomplete.is_some(),
        );
        comparison.skipped = job.skipped;
        if comparison.agreement.is_some_and(|a| !a.agrees) {
            comparison.divergence = self.recent.divergence(&entry.workspace, &exchange.body);
        }
        if !job.skipped {
            self.recent.remember(&entry.workspace, entry.envelope.request_id.clone(), &exchange.body);
        }
        if let Some(log) = &mut self.request_log {
            let line = comparison.line(exchange.at_ms, entry.envelope.request_id.as_deref());
            // The log is for watching; a closed terminal must not stop the proxy.
            let _ = writeln!(log, "{line}").and_then(|()| log.flush());
        }
        let mut stats = self.stats.lock().unwrap_or_else(PoisonError::into_inner);
        stats.add_predicted(&comparison);
        stats.predictions_pending = stats.predictions_pending.saturating_sub(1);
        stats.renders = self.endpoint.render_counts();
        let row = super::live::row(&comparison, exchange.at_ms, entry, &stats);
        self.live.lock().unwrap_or_else(PoisonError::into_inner).push(row);
    }

    /// What the recorded usage costs at the endpoint's prices (none for an unpriced or unknown
    /// model).
    fn recorded_cost(&self, model: Option<&str>, recorded: &RecordedUsage) -> Option<Cost> {
        let date = self.endpoint.config().price_date;
        self.endpoint.prices().cost_of_recorded(model?, date, recorded)
    }

    /// The endpoint's usage for this request, with visibility from the real first byte and the
    /// real output length.
    fn predict(&mut self, exchange: &Exchange, entry: &Entry) -> Option<Record> {
        // Members the view does not read are skipped: the upstream, not the proxy, checks them.
        let read = std::str::from_utf8(&exchange.body)
            .ok()
            .and_then(|text| self.reader.read(&exchange.body, text, skip_member));
        let checked = read.as_ref().zip(self.checked.as_ref()).map(|((view, keys), memo)| {
            check_request_remembering(view, &exchange.betas, keys.check_keys(view), memo)
        });
        let call = Call {
            body: &exchange.body,
            // The workspace scopes the cache as the key would, without the key (as in replay).
            api_key: None,
            workspace: Some(&entry.workspace),
            betas: &exchange.betas,
            at: SimTime(exchange.at_ms),
            first_byte: exchange.response.as_ref().map(|r| SimTime(r.first_byte_ms)),
            reply: Reply {
                output_tokens: entry.recorded.as_ref().map(|r| r.usage.output_tokens),
                ..Reply::input_only()
            },
            checked: checked.as_ref(),
        };
        let handled = match read {
            Some((view, keys)) => self.endpoint.handle_resumed(&view, &keys, &mut self.sketch, &call),
            None => self.endpoint.handle(call),
        };
        handled.ok().map(|exchange| exchange.record)
    }
}

/// The last few request bodies of each workspace: where a disagreement is explained from.
#[derive(Default)]
struct Recent {
    bodies: BTreeMap<String, VecDeque<(Option<String>, Bytes)>>,
}

/// Bodies kept per workspace.
const RECENT_BODIES: usize = 16;

impl Recent {
    fn remember(&mut self, workspace: &str, request_id: Option<String>, body: &Bytes) {
        let bodies = self.bodies.entry(workspace.to_string()).or_default();
        if bodies.len() == RECENT_BODIES {
            bodies.pop_front();
        }
        bodies.push_back((request_id, body.clone()));
    }

    /// Where `body` first leaves the recent request it shares the longest cache prefix with
    /// (the one whose cache it should have read), and that request's id.
    fn divergence(&self, workspace: &str, body: &[u8]) -> Option<(Option<String>, Divergence)> {
        let this = cache_order(std::str::from_utf8(body).ok()?).ok()?;
        let candidates = self.bodies.get(workspace)?.iter().filter_map(|(id, earlier)| {
            let earlier = cache_order(std::str::from_utf8(earlier).ok()?).ok()?;
            Some((common_prefix_bytes(&earlier, &this), id, earlier))
        });
        // The latest of equally long prefixes: max_by_key keeps the last maximum.
        let (_, id, earlier) = candidates.max_by_key(|(shared, _, _)| *shared)?;
        first_divergence(&earlier, &this).map(|divergence| (id.clone(), divergence))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_that_would_pass_the_bound_is_refused_until_room_is_released() {
        let room = Room { queued: Arc::new(AtomicUsize::new(0)), limit: 100 };
        assert!(room.take(60), "60 of 100 fit an empty queue");
        assert!(!room.take(60), "60 + 60 = 120 > 100");
        assert!(room.take(40), "60 + 40 = 100: the bound itself fits");
        assert!(!room.take(1), "the queue is full");
        room.release(60);
        assert!(room.take(60), "40 + 60 = 100 once the first is predicted");
        let empty = Room { queued: Arc::new(AtomicUsize::new(0)), limit: 0 };
        assert!(empty.take(0) && !empty.take(1), "a zero bound skips every non-empty body");
    }
}
