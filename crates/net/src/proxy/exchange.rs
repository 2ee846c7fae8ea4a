//! One Messages exchange as the forwarding path saw it, and what the journal reads from it: the
//! trace envelope and the recorded usage. The journal writes them; the prediction prices them.

use axum::body::Bytes;

use forkcache_engine::agreement::recorded_of;
use forkcache_engine::billing::RecordedUsage;
use forkcache_ingest::trace::{Envelope, LoggedError, scrub_secrets};
use forkcache_wire::Betas;

use super::capture::{COPY_LIMIT_BYTES, DecodeLimit, Decoded, Encodings, Observed, observe};

/// One Messages exchange as the forwarding path saw it.
pub(super) struct Exchange {
    pub(super) seq: u64,
    pub(super) at_ms: u64,
    /// When the ticket was dropped: the exchange ended, failed or was abandoned.
    pub(super) ended_ms: u64,
    /// The key's fingerprint (never the key), or none without a key.
    pub(super) key_workspace: Option<String>,
    /// The request's key, held only to scrub it from what the upstream echoes (never written).
    pub(super) key: Option<String>,
    /// The betas its `anthropic-beta` headers named.
    pub(super) betas: Betas,
    /// The request body as it arrived, frame by frame (each shares its buffer with the frame
    /// forwarded), until joined into `body` ([`Exchange::join_body`]).
    pub(super) frames: Vec<Bytes>,
    pub(super) body: Bytes,
    pub(super) response: Option<Response>,
    /// The proxy's own answer when the upstream never gave one.
    pub(super) refused: Option<LoggedError>,
}

/// What came back.
pub(super) struct Response {
    pub(super) first_byte_ms: u64,
    pub(super) status: u16,
    pub(super) request_id: Option<String>,
    /// `anthropic-workspace-id`, else `anthropic-organization-id`.
    pub(super) workspace: Option<String>,
    pub(super) event_stream: bool,
    pub(super) encodings: Encodings,
    /// The body's frames as received: each shares its buffer with the frame sent on (a reference
    /// count, not a copy); the journal joins them.
    pub(super) copy: Vec<Bytes>,
    pub(super) copy_bytes: usize,
    pub(super) copy_overflowed: bool,
    pub(super) ended: bool,
    pub(super) upstream_error: Option<String>,
}

/// An exchange read: its trace envelope and its recorded usage.
pub(super) struct Entry {
    pub(super) workspace: String,
    pub(super) envelope: Envelope,
    pub(super) recorded: Option<RecordedUsage>,
    /// The model the response named.
    pub(super) model: Option<String>,
    /// Why the response copy was not read, when it was not (its usage is then unknown).
    pub(super) unread: Option<String>,
}

impl Entry {
    pub(super) fn of(exchange: &Exchange, decode_limit: &DecodeLimit) -> Entry {
        let response = exchange.response.as_ref();
        let workspace = workspace(exchange);
        let (observed, unread) = response.map(|r| read_copy(r, decode_limit)).unwrap_or_default();
        let usage = observed.usage.map(serde_json::Value::Object);
        let recorded = usage.clone().and_then(recorded_of);
        // No response and no answer of our own: the client left before the upstream answered.
        let abandoned = response.is_none() && exchange.refused.is_none();
        let error = exchange.refused.clone().or(observed.error).or_else(|| abandoned.then(client_left));
        let error = error.map(|mut error| {
            error.message = scrub_secrets(&error.message, exchange.key.as_deref()).into_owned();
            error
        });
        let incomplete = observed.incomplete || abandoned;
        let model = observed.model;
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
            prewarm: None,
        };
        Entry { workspace, envelope, recorded, model, unread }
    }
}

impl Exchange {
    /// Joins the request body's frames into `body` (a body that came in one frame is not
    /// copied). The trace needs it joined; without a trace the prediction joins it, at its
    /// priority: for a large body the join (a fresh buffer, a copy) is most of the journal's work.
    pub(super) fn join_body(&mut self) {
        let mut frames = std::mem::take(&mut self.frames);
        match frames.len() {
            0 => {}
            1 => self.body = frames.pop().unwrap_or_default(),
            _ => self.body = Bytes::from(frames.concat()),
        }
    }

    /// The request body's length, joined or not.
    pub(super) fn body_len(&self) -> usize {
        self.body.len() + self.frames.iter().map(Bytes::len).sum::<usize>()
    }

    /// Drops the request body.
    pub(super) fn drop_body(&mut self) {
        self.frames = Vec::new();
        self.body = Bytes::new();
    }
}

/// The exchange's cache scope: the API's workspace id, else the key's fingerprint.
pub(super) fn workspace(exchange: &Exchange) -> String {
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

/// What the response copy says: decoded (within `limit`), then read; a body that ended early is
/// incomplete. A copy that is not read says why.
fn read_copy(response: &Response, limit: &DecodeLimit) -> (Observed, Option<String>) {
    if response.copy_overflowed {
        return (Observed::default(), Some(format!("received past {} MiB", COPY_LIMIT_BYTES >> 20)));
    }
    let received = response.copy.concat();
    let decoded = if response.encodings.is_identity() {
        received
    } else {
        match response.encodings.decode_within(&received, limit) {
            Decoded::Whole(decoded) => decoded,
            Decoded::TooLarge { limit } => {
                return (Observed::default(), Some(format!("decodes past {limit} bytes")));
            }
            Decoded::Unknown => {
                let reason = format!("unknown content-encoding {}", response.encodings.name());
                return (Observed::default(), Some(reason));
            }
        }
    };
    let mut observed = observe(response.status, response.event_stream, &decoded);
    let success = (200..300).contains(&response.status);
    if success && (!response.ended || response.upstream_error.is_some()) {
        observed.incomplete = true;
    }
    (observed, None)
}
