//! The journal: finished exchanges, put in trace order ([`super::order`]), decoded, read,
//! written to the trace and counted (their recorded side) — on its own thread, off the
//! forwarding path — then handed, in trace order, to the prediction ([`super::predict`]), which
//! prices and compares them at the lowest priority.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, header};
use tokio::time::Instant;

use forkcache_engine::endpoint::KeySalt;
use forkcache_engine::endpoint::MockEndpoint;
use forkcache_ingest::trace::{LoggedError, TraceWriter, envelope_line};

use super::capture::{COPY_LIMIT_BYTES, DecodeLimit, Encodings};
use super::exchange::{Entry, Exchange, Response, workspace};
use super::mailbox::Mailbox;
use super::order::{Order, Stamp};
use super::predict::{self, PredictionQueue, Predictor};
use super::redact::redact;
use super::stats::ProxyStats;
use crate::edge::api_key;

/// What the forwarding path tells the journal.
enum Note {
    /// A successful response began: from here on its cache writes are readable.
    Began { seq: u64, stamp: Stamp },
    /// The exchange is over, however it ended.
    Ended(Box<Exchange>),
}

/// How long the journal lets notes gather after a batch before it takes the next. A note from
/// the forwarding path then costs a push under a lock, not a wake-up of the journal's thread
/// (a futex call on each side and a context switch, once the load is heavy enough that the
/// journal keeps up note by note); a trace line is written at most this much later.
const BATCH_TICK: Duration = Duration::from_millis(1);

/// Stamps every exchange's start, first byte and end with one clock, and posts each to the
/// journal under the journal's one lock, so the journal hears of a first byte before any end
/// stamped after it (see [`super::order`]). Dropping it (with the last ticket) closes the
/// journal's mailbox.
pub(super) struct Sequencer {
    started: Instant,
    notes: Arc<Mailbox<Note>>,
    /// The next ticket number; taken under the mailbox's lock, so numbers follow start stamps.
    next: AtomicU64,
    /// How a key is fingerprinted (the endpoint's).
    key_salt: KeySalt,
}

impl Sequencer {
    /// Milliseconds since the proxy started.
    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// The fingerprint of `key`, salted as the endpoint's.
    pub(super) fn fingerprint(&self, key: &str) -> String {
        self.key_salt.fingerprint(key)
    }

    /// A ticket for a Messages request starting now: ticket numbers follow start times.
    pub(super) fn issue(self: &Arc<Self>, headers: &HeaderMap) -> Ticket {
        let key = api_key(headers);
        let key_workspace = key.as_deref().map(|key| self.fingerprint(key));
        let betas = crate::edge::request_betas(headers);
        let posting = self.notes.post();
        let seq = self.next.fetch_add(1, Ordering::Relaxed);
        let at_ms = self.now_ms();
        drop(posting);
        let exchange = Exchange {
            seq,
            at_ms,
            ended_ms: 0,
            key_workspace,
            key,
            betas,
            frames: Vec::new(),
            body: Bytes::new(),
            response: None,
            refused: None,
        };
        Ticket { exchange: Some(exchange), sequencer: Arc::clone(self) }
    }
}

/// One exchange being recorded. It reaches the journal when dropped, however it ended, so an
/// abandoned exchange never holds up the ones after it.
pub(super) struct Ticket {
    exchange: Option<Exchange>,
    sequencer: Arc<Sequencer>,
}

impl Ticket {
    #[allow(clippy::expect_used)] // the exchange is taken only in `drop`
    fn exchange(&mut self) -> &mut Exchange {
        self.exchange.as_mut().expect("a ticket holds its exchange until dropped")
    }

    pub(super) fn set_body(&mut self, frames: Vec<Bytes>) {
        self.exchange().frames = frames;
    }

    /// The upstream's response head arrived: its first byte, stamped now.
    pub(super) fn began(&mut self, status: u16, headers: &HeaderMap) {
        let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
        let content_type = text(header::CONTENT_TYPE.as_str()).unwrap_or_default();
        let sequencer = Arc::clone(&self.sequencer);
        let mut posting = sequencer.notes.post();
        let first_byte_ms = sequencer.now_ms();
        let exchange = self.exchange();
        exchange.response = Some(Response {
            first_byte_ms,
            status,
            request_id: text("request-id"),
            workspace: text("anthropic-workspace-id").or_else(|| text("anthropic-organization-id")),
            event_stream: content_type.starts_with("text/event-stream"),
            encodings: Encodings::parse(text(header::CONTENT_ENCODING.as_str()).as_deref()),
            copy: Vec::new(),
            copy_bytes: 0,
            copy_overflowed: false,
            ended: false,
            upstream_error: None,
        });
        // An error response writes nothing to the cache: nothing waits for it.
        if (200..300).contains(&status) {
            let stamp = Stamp { workspace: workspace(exchange), ms: first_byte_ms };
            posting.push(Note::Began { seq: exchange.seq, stamp });
        }
    }
    #[allow(clippy::expect_used)] // `http` passes response bytes on only after the head
    fn response(&mut self) -> &mut Response {
        self.exchange().response.as_mut().expect("response bytes come after the head")
    }

    /// A chunk of the response body, as received.
    pub(super) fn copy(&mut self, data: &Bytes) {
        let response = self.response();
        if response.copy_bytes + data.len() > COPY_LIMIT_BYTES {
            response.copy_overflowed = true;
        } else {
            response.copy_bytes += data.len();
            response.copy.push(data.clone());
        }
    }

    pub(super) fn ended(&mut self) {
        self.response().ended = true;
    }

    pub(super) fn upstream_failed(&mut self, error: String) {
        self.response().upstream_error = Some(error);
    }

    /// The proxy answered itself (upstream unreachable, body unreadable).
    pub(super) fn refused(mut self, error: LoggedError) {
        self.exchange().refused = Some(error);
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let Some(mut exchange) = self.exchange.take() {
            let mut posting = self.sequencer.notes.post();
            exchange.ended_ms = self.sequencer.now_ms();
            posting.push(Note::Ended(Box::new(exchange)));
        }
    }
}

impl Drop for Sequencer {
    /// Every ticket is gone too (each holds the sequencer): the journal writes what it has and
    /// stops.
    fn drop(&mut self) {
        self.notes.close();
    }
}

/// The running journal and prediction threads.
pub(super) struct Handle {
    journal: JoinHandle<()>,
    prediction: Predictor,
}

impl Handle {
    /// Waits until the sequencer and every ticket are dropped and written, and every written
    /// exchange is predicted or skipped — what is left to predict then runs on the calling
    /// thread, at its priority.
    pub(super) fn finish(self) {
        let journal = self.journal;
        self.prediction.finish(move || {
            let _ = journal.join();
        });
    }
}

/// The trace file and how bodies are written to it.
pub(super) struct TraceOut {
    pub(super) out: TraceWriter,
    /// Bodies go through [`redact`] first.
    pub(super) redact: bool,
}

/// Starts the journal thread and the prediction thread behind it, and the sequencer that feeds
/// them (its clock starts now). At most `prediction_queue_bytes` of request bodies wait for their
/// prediction (see [`PredictionQueue`]).
pub(super) fn start(
    endpoint: MockEndpoint,
    trace: Option<TraceOut>,
    request_log: Option<Box<dyn Write + Send>>,
    stats: Arc<Mutex<ProxyStats>>,
    prediction_queue_bytes: usize,
    decode_limit: DecodeLimit,
    live: Arc<Mutex<crate::live::Feed>>,
) -> std::io::Result<(Arc<Sequencer>, Handle)> {
    let key_salt = endpoint.key_salt().clone();
    let (predictions, prediction) =
        predict::start(endpoint, request_log, Arc::clone(&stats), prediction_queue_bytes, live)?;
    let notes = Arc::new(Mailbox::default());
    let journal = Journal {
        trace,
        predictions,
        stats,
        order: Order::default(),
        waiting: BTreeMap::new(),
        decode_limit,
    };
    let inbox = Arc::clone(&notes);
    let journal = std::thread::Builder::new()
        .name("forkcache-proxy-journal".into())
        .spawn(move || journal.run(&inbox))?;
    let sequencer = Sequencer { started: Instant::now(), notes, next: AtomicU64::new(0), key_salt };
    Ok((Arc::new(sequencer), Handle { journal, prediction }))
}

struct Journal {
    trace: Option<TraceOut>,
    /// Where written exchanges go to be priced, in trace order.
    predictions: PredictionQueue,
    stats: Arc<Mutex<ProxyStats>>,
    /// Which ended exchange may be written next.
    order: Order,
    /// Ended exchanges waiting for an earlier-started one.
    waiting: BTreeMap<u64, Exchange>,
    /// How far a compressed copy is decoded.
    decode_limit: DecodeLimit,
}

impl Journal {
    /// Takes the notes in batches, in the order they were posted, until the mailbox is closed
    /// and empty.
    fn run(mut self, notes: &Mailbox<Note>) {
        let mut batch = Vec::new();
        while notes.take(&mut batch) {
            for note in batch.drain(..) {
                self.note(note);
            }
            std::thread::sleep(BATCH_TICK);
        }
    }

    /// One note, then every exchange it lets be written.
    fn note(&mut self, note: Note) {
        match note {
            Note::Began { seq, stamp } => self.order.began(seq, stamp),
            Note::Ended(exchange) => {
                let stamp = Stamp { workspace: workspace(&exchange), ms: exchange.at_ms };
                self.order.ended(exchange.seq, stamp, exchange.ended_ms);
                self.waiting.insert(exchange.seq, *exchange);
            }
        }
        while let Some(seq) = self.order.take_writable() {
            if let Some(exchange) = self.waiting.remove(&seq) {
                self.write(exchange);
            }
        }
    }

    /// Writes the exchange's trace line, then queues it for its prediction.
    fn write(&mut self, mut exchange: Exchange) {
        let entry = Entry::of(&exchange, &self.decode_limit);
        if let Some(trace) = &mut self.trace {
            exchange.join_body();
            let line = if trace.redact {
                envelope_line(&entry.envelope, &redact(&exchange.body))
            } else {
                envelope_line(&entry.envelope, &exchange.body)
            };
            if trace.out.append(&line).is_err() {
                self.stats.lock().unwrap_or_else(PoisonError::into_inner).trace_write_errors += 1;
            }
        }
        self.count(&exchange, &entry);
        // The copy is read: only the request body is needed from here on.
        if let Some(response) = &mut exchange.response {
            response.copy = Vec::new();
        }
        self.predictions.push(exchange, entry);
    }

    /// The recorded side of the stats, counted as soon as the exchange is written, and the
    /// exchange as pending (the predicted side follows from the prediction thread).
    fn count(&self, exchange: &Exchange, entry: &Entry) {
        let mut stats = self.stats.lock().unwrap_or_else(PoisonError::into_inner);
        let recorded = entry.recorded.as_ref().map(|recorded| &recorded.usage);
        let (error, incomplete) = (entry.envelope.error.is_some(), entry.envelope.incomplete.is_some());
        stats.add_recorded(&entry.workspace, recorded, error, incomplete);
        // Queued for its prediction right after this (`PredictionQueue::push`).
        stats.predictions_pending += 1;
        if let Some(unread) = &entry.unread {
            *stats.copies_unread.entry(unread.clone()).or_default() += 1;
        }
        if let Some(response) = &exchange.response {
            *stats.content_encodings.entry(response.encodings.name()).or_default() += 1;
        }
        if let Some(key) = &exchange.key_workspace {
            stats.key_used(key, &entry.workspace);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use forkcache_ingest::trace::key_fingerprint;

    #[test]
    fn keys_are_fingerprinted_from_either_header() {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, "Bearer sk-ant-secret".parse().unwrap());
        assert_eq!(api_key(&headers).as_deref(), Some("sk-ant-secret"));
        headers.insert("x-api-key", "sk-other".parse().unwrap());
        assert_eq!(api_key(&headers).as_deref(), Some("sk-other"));
        let sequencer = Arc::new(Sequencer {
            started: Instant::now(),
            notes: Arc::default(),
            next: AtomicU64::new(0),
            key_salt: KeySalt::default(),
        });
        let mut ticket = sequencer.issue(&headers);
        let workspace = ticket.exchange().key_workspace.clone().unwrap();
        assert_eq!(workspace, key_fingerprint("sk-other"));
        assert!(workspace.starts_with("key-") && workspace.len() == 20 && !workspace.contains("sk-"));
    }
}
