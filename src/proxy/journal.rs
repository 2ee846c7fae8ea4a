//! The journal: finished exchanges, put in trace order ([`super::order`]), decoded, priced by the
//! endpoint, compared, written to the trace and counted — on its own thread, off the forwarding
//! path.

use std::collections::{BTreeMap, VecDeque};
use std::io::Write;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use tokio::time::Instant;

use axum::body::Bytes;
use axum::http::{HeaderMap, header};

use super::capture::{COPY_LIMIT_BYTES, Encodings, Observed, observe};
use super::order::{Order, Stamp};
use super::redact::redact;
use super::stats::{Comparison, ProxyStats};
use crate::agreement::read_recorded;
use crate::billing::{Cost, RecordedUsage};
use crate::clock::SimTime;
use crate::endpoint::{Call, MockEndpoint, Record};
use crate::ingest::trace::{Envelope, LoggedError, TraceWriter, envelope_line, key_fingerprint};
use crate::serve::api_key;
use crate::tokenize::Tokenizer;
use crate::verify::{Divergence, cache_order, common_prefix_bytes, first_divergence};
use crate::wire::{Betas, Reply};

/// One Messages exchange as the forwarding path saw it.
struct Exchange {
    seq: u64,
    at_ms: u64,
    /// When the ticket was dropped: the exchange ended, failed or was abandoned.
    ended_ms: u64,
    /// The key's fingerprint (never the key), or none without a key.
    key_workspace: Option<String>,
    /// The betas its `anthropic-beta` headers named.
    betas: Betas,
    body: Bytes,
    response: Option<Response>,
    /// The proxy's own answer when the upstream never gave one.
    refused: Option<LoggedError>,
}

/// What came back.
struct Response {
    first_byte_ms: u64,
    status: u16,
    request_id: Option<String>,
    /// `anthropic-workspace-id`, else `anthropic-organization-id`.
    workspace: Option<String>,
    event_stream: bool,
    encodings: Encodings,
    /// The body's frames as received: each shares its buffer with the frame sent on (a reference
    /// count, not a copy); the journal joins them.
    copy: Vec<Bytes>,
    copy_bytes: usize,
    copy_overflowed: bool,
    ended: bool,
    upstream_error: Option<String>,
}

/// What the forwarding path tells the journal.
enum Note {
    /// A successful response began: from here on its cache writes are readable.
    Began { seq: u64, stamp: Stamp },
    /// The exchange is over, however it ended.
    Ended(Box<Exchange>),
}

/// Stamps every exchange's start, first byte and end with one clock, and reports each to the
/// journal under one lock, so the journal hears of a first byte before any end stamped after it
/// (see [`super::order`]).
pub(super) struct Sequencer {
    started: Instant,
    inner: Mutex<Issued>,
}

struct Issued {
    next: u64,
    notes: Sender<Note>,
}

impl Sequencer {
    /// Milliseconds since the proxy started.
    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    fn lock(&self) -> MutexGuard<'_, Issued> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A ticket for a Messages request starting now: ticket numbers follow start times.
    pub(super) fn issue(self: &Arc<Self>, headers: &HeaderMap) -> Ticket {
        let key_workspace = api_key(headers).as_deref().map(key_fingerprint);
        let betas = crate::serve::request_betas(headers);
        let mut issued = self.lock();
        let seq = issued.next;
        issued.next += 1;
        let exchange = Exchange {
            seq,
            at_ms: self.now_ms(),
            ended_ms: 0,
            key_workspace,
            betas,
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

    pub(super) fn set_body(&mut self, body: Bytes) {
        self.exchange().body = body;
    }

    /// The upstream's response head arrived: its first byte, stamped now.
    pub(super) fn began(&mut self, status: u16, headers: &HeaderMap) {
        let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
        let content_type = text(header::CONTENT_TYPE.as_str()).unwrap_or_default();
        let sequencer = Arc::clone(&self.sequencer);
        let issued = sequencer.lock();
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
            // The journal only stops after every ticket is gone.
            let _ = issued.notes.send(Note::Began { seq: exchange.seq, stamp });
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
            let issued = self.sequencer.lock();
            exchange.ended_ms = self.sequencer.now_ms();
            // The journal only stops after every ticket is gone.
            let _ = issued.notes.send(Note::Ended(Box::new(exchange)));
        }
    }
}

/// The running journal.
pub(super) struct Handle {
    thread: JoinHandle<()>,
}

impl Handle {
    /// Waits until the sequencer and every ticket are dropped and written.
    pub(super) fn finish(self) {
        let _ = self.thread.join();
    }
}

/// The trace file and how bodies are written to it.
pub(super) struct TraceOut {
    pub(super) out: TraceWriter,
    /// Bodies go through [`redact`], counted with this tokenizer (the endpoint's).
    pub(super) redact_with: Option<Box<dyn Tokenizer>>,
}

/// Starts the journal thread, and the sequencer that feeds it (its clock starts now).
pub(super) fn start(
    endpoint: MockEndpoint,
    trace: Option<TraceOut>,
    request_log: Option<Box<dyn Write + Send>>,
    stats: Arc<Mutex<ProxyStats>>,
) -> std::io::Result<(Arc<Sequencer>, Handle)> {
    let (notes, receiver) = channel();
    let journal = Journal {
        endpoint,
        trace,
        request_log,
        stats,
        order: Order::default(),
        waiting: BTreeMap::new(),
        recent: Recent::default(),
    };
    let thread = std::thread::Builder::new()
        .name("forkcache-proxy-journal".into())
        .spawn(move || journal.run(receiver))?;
    let sequencer = Sequencer { started: Instant::now(), inner: Mutex::new(Issued { next: 0, notes }) };
    Ok((Arc::new(sequencer), Handle { thread }))
}

struct Journal {
    endpoint: MockEndpoint,
    trace: Option<TraceOut>,
    request_log: Option<Box<dyn Write + Send>>,
    stats: Arc<Mutex<ProxyStats>>,
    /// Which ended exchange may be written next.
    order: Order,
    /// Ended exchanges waiting for an earlier-started one.
    waiting: BTreeMap<u64, Exchange>,
    recent: Recent,
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

impl Journal {
    fn run(mut self, receiver: Receiver<Note>) {
        for note in receiver {
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
    }

    fn write(&mut self, exchange: Exchange) {
        let entry = Entry::of(&exchange);
        let predicted = entry.envelope.usage.is_some().then(|| self.predict(&exchange, &entry)).flatten();
        let recorded = entry
            .recorded
            .as_ref()
            .map(|recorded| (recorded.usage, self.recorded_cost(predicted.as_ref(), recorded)));
        let mut comparison = Comparison::new(
            entry.workspace.clone(),
            recorded,
            predicted,
            entry.envelope.error.clone(),
            entry.envelope.incomplete.is_some(),
        );
        if comparison.agreement.is_some_and(|a| !a.agrees) {
            comparison.divergence = self.recent.divergence(&entry.workspace, &exchange.body);
        }
        self.recent.remember(&entry.workspace, entry.envelope.request_id.clone(), &exchange.body);
        if let Some(trace) = &mut self.trace {
            let line = match &trace.redact_with {
                Some(tokenizer) => {
                    envelope_line(&entry.envelope, &redact(&exchange.body, tokenizer.as_ref()))
                }
                None => envelope_line(&entry.envelope, &exchange.body),
            };
            if trace.out.append(&line).is_err() {
                self.stats.lock().unwrap_or_else(PoisonError::into_inner).trace_write_errors += 1;
            }
        }
        if let Some(log) = &mut self.request_log {
            let line = comparison.line(exchange.at_ms, entry.envelope.request_id.as_deref());
            // The log is for watching; a closed terminal must not stop the proxy.
            let _ = writeln!(log, "{line}").and_then(|()| log.flush());
        }
        let mut stats = self.stats.lock().unwrap_or_else(PoisonError::into_inner);
        stats.add(&comparison);
        if let Some(response) = &exchange.response {
            *stats.content_encodings.entry(response.encodings.name()).or_default() += 1;
        }
        if let Some(key) = &exchange.key_workspace {
            stats.key_used(key, &entry.workspace);
        }
    }

    /// What the recorded usage costs at the endpoint's prices (none for an unpriced model, or
    /// a request the endpoint could not read).
    fn recorded_cost(&self, predicted: Option<&Record>, recorded: &RecordedUsage) -> Option<Cost> {
        let date = self.endpoint.config().price_date;
        self.endpoint.prices().cost_of_recorded(&predicted?.model, date, recorded)
    }

    /// The endpoint's usage for this request, with visibility from the real first byte and the
    /// real output length.
    fn predict(&mut self, exchange: &Exchange, entry: &Entry) -> Option<Record> {
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
        };
        self.endpoint.handle(call).ok().map(|exchange| exchange.record)
    }
}

/// An exchange read: its trace envelope and its recorded usage.
struct Entry {
    workspace: String,
    envelope: Envelope,
    recorded: Option<RecordedUsage>,
}

impl Entry {
    fn of(exchange: &Exchange) -> Entry {
        let response = exchange.response.as_ref();
        let workspace = workspace(exchange);
        let observed = response.map(read_copy).unwrap_or_default();
        let usage = observed.usage.map(serde_json::Value::Object);
        let recorded = usage.as_ref().and_then(|usage| read_recorded(&usage.to_string()));
        // No response and no answer of our own: the client left before the upstream answered.
        let abandoned = response.is_none() && exchange.refused.is_none();
        let error = exchange.refused.clone().or(observed.error).or_else(|| abandoned.then(client_left));
        let incomplete = observed.incomplete || abandoned;
        let envelope = Envelope {
            at_ms: Some(exchange.at_ms),
            api_key: None,
            workspace: Some(workspace.clone()),
            betas: exchange.betas.clone(),
            first_byte_ms: response.map(|r| r.first_byte_ms),
            request_id: response.and_then(|r| r.request_id.clone()),
            usage,
            diagnostics: observed.diagnostics,
            error,
            incomplete: incomplete.then_some(true),
        };
        Entry { workspace, envelope, recorded }
    }
}

/// The exchange's cache scope: the API's workspace id, else the key's fingerprint.
fn workspace(exchange: &Exchange) -> String {
    let from_response = exchange.response.as_ref().and_then(|r| r.workspace.clone());
    from_response.or_else(|| exchange.key_workspace.clone()).unwrap_or_else(|| "default".to_string())
}

/// The error recorded for a request whose client hung up before any response (nginx's 499).
fn client_left() -> LoggedError {
    LoggedError {
        status: 499,
        kind: "client_closed_request".into(),
        message: "the client closed the connection before the upstream answered".into(),
    }
}

/// What the response copy says: decoded, then read; a body that ended early is incomplete.
fn read_copy(response: &Response) -> Observed {
    if response.copy_overflowed {
        return Observed::default();
    }
    let received = response.copy.concat();
    let decoded = if response.encodings.is_identity() {
        received
    } else {
        response.encodings.decode(&received).unwrap_or_default()
    };
    let mut observed = observe(response.status, response.event_stream, &decoded);
    let success = (200..300).contains(&response.status);
    if success && (!response.ended || response.upstream_error.is_some()) {
        observed.incomplete = true;
    }
    observed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_fingerprinted_from_either_header() {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, "Bearer sk-ant-secret".parse().unwrap());
        assert_eq!(api_key(&headers).as_deref(), Some("sk-ant-secret"));
        headers.insert("x-api-key", "sk-other".parse().unwrap());
        assert_eq!(api_key(&headers).as_deref(), Some("sk-other"));
        let (notes, _receiver) = channel();
        let sequencer =
            Arc::new(Sequencer { started: Instant::now(), inner: Mutex::new(Issued { next: 0, notes }) });
        let mut ticket = sequencer.issue(&headers);
        let workspace = ticket.exchange().key_workspace.clone().unwrap();
        assert_eq!(workspace, key_fingerprint("sk-other"));
        assert!(workspace.starts_with("key-") && workspace.len() == 20 && !workspace.contains("sk-"));
    }
}
