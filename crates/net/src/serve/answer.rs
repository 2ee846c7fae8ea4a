//! What one Messages request comes to: stamped, priced (or refused), traced, logged and counted,
//! under the core's lock, in the order requests are handed over.

use forkcache_engine::clock::SimTime;
use forkcache_engine::endpoint::{Call, Exchange};
use forkcache_engine::prompt::BlockKeys;
use forkcache_ingest::trace::{Envelope, LoggedError, envelope_line, refused_envelope_line};
use forkcache_wire::{ApiError, Betas, MessageResponse, Reply, RequestView};

use super::read::{Checked, Read, ReadBody};
use super::script::Planned;
use super::stats::request_line;
use super::{Core, LatencyMode, Shared, validate};
use crate::edge::listen::Connection;

/// A Messages request read on a worker, with who sent it: what is priced.
pub(super) struct Request {
    pub(super) body: ReadBody,
    pub(super) api_key: Option<String>,
    pub(super) betas: Betas,
    /// The connection's, whose sketch the prompt is rendered from.
    pub(super) connection: Option<Connection>,
}

/// What one Messages request came to, decided under the lock.
pub(super) enum Answer {
    Message {
        request_id: String,
        // Boxed: the message is much larger than an error.
        response: Box<MessageResponse>,
        stream: bool,
        ending: Ending,
        first_byte_ms: u64,
        done_ms: u64,
    },
    Error {
        request_id: String,
        error: ApiError,
        retry_after_s: Option<u64>,
    },
}

/// How a streamed response ends.
pub(super) enum Ending {
    /// Every event, through `message_stop`.
    Complete,
    /// `message_start`, then the connection drops.
    Cut,
    /// `message_start`, then an `error` event.
    Error(ApiError),
}

/// Prices one request read on a worker ([`ReadBody::read`]: parsed, checked, planned, its blocks
/// hashed): stamps, prices, logs and counts it, under the lock, in the order requests were
/// handed over (`pricer`), so the trace is in pricing order and replays to the same usage.
pub(super) fn price(shared: &Shared, core: &mut Core, request: &Request) -> Answer {
    let (api_key, betas) = (request.api_key.as_deref(), &request.betas);
    let body: &[u8] = request.body.borrow_owner();
    let at = shared.now_ms();
    let request_id = core.next_request_id();
    if let Some(error) = shared.past_max_requests(core.stats.messages_requests()) {
        return Answer::Error { request_id, error, retry_after_s: None };
    }
    let rejection = |request_id, error, logged| Rejection {
        request_id,
        at,
        api_key,
        betas,
        body,
        error,
        logged,
        retry_after_s: None,
    };
    let checked = match request.body.borrow_dependent() {
        Read::Text(Ok(checked)) => checked,
        // Logged with its error. The edge checks more than the engine does (non-empty contents,
        // the documented fields' types, unknown fields under `strict`), so the bytes alone could
        // replay as priced; a body that is not UTF-8 goes without its bytes, as a lossy copy
        // would replay as a request that was never sent.
        Read::Text(Err(error)) | Read::NotText(error) => {
            return finish_rejected(shared, core, rejection(request_id, error.clone(), true));
        }
    };
    let Checked { view, unknown, planned, keys, rules } = checked;
    core.stats.unknown_fields(unknown);
    if let Err(error) = validate::check_model(core.endpoint.prices(), view) {
        // Logged: the engine would price what the API refuses here.
        return finish_rejected(shared, core, rejection(request_id, error, true));
    }
    let (reply, ending) = match planned {
        Planned::Answer(reply) => (reply.clone(), Ending::Complete),
        Planned::CutStream => (Reply::input_only(), Ending::Cut),
        Planned::StreamError(error) => (Reply::input_only(), Ending::Error(error.clone())),
        Planned::Fail { error, retry_after_s } => {
            let rejection =
                Rejection { retry_after_s: *retry_after_s, ..rejection(request_id, error.clone(), true) };
            return finish_rejected(shared, core, rejection);
        }
    };
    let instant = shared.config.latency == LatencyMode::Instant;
    let call = Call {
        body,
        api_key,
        workspace: None,
        betas,
        at: SimTime(at),
        first_byte: instant.then_some(SimTime(at)),
        reply,
        checked: rules.as_ref(),
    };
    match handle(core, request, view, keys, &call) {
        Ok(exchange) => finish_priced(shared, core, request_id, exchange, &call, ending),
        Err(error) => finish_rejected(shared, core, rejection(request_id, error, false)),
    }
}

/// The endpoint's answer, the prompt rendered from the connection's sketch when it has one (a
/// poisoned sketch, left by a panic mid-render, is not used again).
fn handle(
    core: &mut Core,
    request: &Request,
    view: &RequestView,
    keys: &BlockKeys,
    call: &Call,
) -> Result<Exchange, ApiError> {
    let kept = request.connection.as_ref().and_then(|connection| connection.0.sketch.lock().ok());
    let Some(mut kept) = kept else { return core.endpoint.handle_keyed(view, Some(keys), call) };
    kept.render_with(|sketch| core.endpoint.handle_resumed(view, keys, sketch, call))
}

fn finish_priced(
    shared: &Shared,
    core: &mut Core,
    request_id: String,
    exchange: Exchange,
    call: &Call,
    ending: Ending,
) -> Answer {
    let Exchange { record, response } = exchange;
    let at = record.at.ms();
    core.retire_idle(at, &record.workspace);
    let (first_byte_ms, done_ms) = shared.reply_times(&record, &core.endpoint.config().cache.latency);
    core.append_trace(|| {
        let envelope = Envelope {
            at_ms: Some(at),
            api_key: None,
            workspace: call.api_key.map(|_| record.workspace.clone()),
            betas: call.betas.clone(),
            first_byte_ms: Some(first_byte_ms),
            usage: Some(Envelope::usage_of(&record.usage)),
            ..Envelope::default()
        };
        envelope_line(&envelope, call.body)
    });
    core.log(|| request_line(&request_id, at, &record.workspace, Ok(&record)));
    core.stats.priced(&record);
    core.live_priced(&record, &request_id);
    shared.count_for_shutdown(core.stats.messages_requests());
    let response = Box::new(response);
    Answer::Message { request_id, response, stream: record.stream, ending, first_byte_ms, done_ms }
}

/// A request answered with an error.
struct Rejection<'r> {
    request_id: String,
    at: u64,
    api_key: Option<&'r str>,
    /// The betas it named: replay reads a rejected request under them too.
    betas: &'r Betas,
    body: &'r [u8],
    error: ApiError,
    /// Whether the trace must carry the error: true when the server turned the request away
    /// before the endpoint saw it (replay could not find the error in the body).
    logged: bool,
    retry_after_s: Option<u64>,
}

fn finish_rejected(shared: &Shared, core: &mut Core, rejection: Rejection) -> Answer {
    let Rejection { request_id, at, api_key, betas, body, error, logged, retry_after_s } = rejection;
    let workspace = core.endpoint.workspace_of(api_key);
    core.retire_idle(at, &workspace);
    let envelope = Envelope {
        at_ms: Some(at),
        api_key: None,
        workspace: api_key.map(|_| workspace.clone()),
        betas: betas.clone(),
        error: logged.then(|| LoggedError::of(&error)),
        ..Envelope::default()
    };
    core.append_trace(|| refused_envelope_line(&envelope, body));
    core.log(|| request_line(&request_id, at, &workspace, Err(&error)));
    core.stats.rejected(&workspace, at);
    core.live_refused(at, &request_id, &workspace, &error);
    shared.count_for_shutdown(core.stats.messages_requests());
    Answer::Error { request_id, error, retry_after_s }
}

/// A request refused at the edge (no key, too large): stamped, traced and counted like any other.
/// `sender` is its API key and the betas it named.
pub(super) fn turn_away(
    shared: &Shared,
    sender: (Option<&str>, &Betas),
    body: &[u8],
    error: ApiError,
) -> Answer {
    let (api_key, betas) = sender;
    let mut core = shared.lock();
    let at = shared.now_ms();
    let request_id = core.next_request_id();
    if let Some(error) = shared.past_max_requests(core.stats.messages_requests()) {
        return Answer::Error { request_id, error, retry_after_s: None };
    }
    finish_rejected(
        shared,
        &mut core,
        Rejection { request_id, at, api_key, betas, body, error, logged: true, retry_after_s: None },
    )
}
