//! `POST /v1/responses` and `POST /v1/chat/completions`: OpenAI's APIs, read at the edge into
//! the Messages body with the same prompt ([`read_openai_request`]), priced by the server's
//! OpenAI endpoint (OpenAI's automatic prefix cache and price table), and answered in OpenAI's
//! JSON or SSE shapes with OpenAI's usage fields.
//!
//! Counted in the stats (the workspace rows, and the `openai` row in OpenAI's fields), logged
//! and shown on the live page like Messages requests; not written to `--trace`: a trace line is a
//! Messages body that `replay` prices under the Messages cache rules, which are not these.
//! Priced under the core's lock directly rather than at the pricing desk: the desk's reads and
//! renders are the Messages path's, and this path's cost is the parse on the worker.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use forkcache_engine::cache::openai::Generation;
use forkcache_engine::clock::SimTime;
use forkcache_engine::endpoint::{Call, Exchange};
use forkcache_wire::{
    ApiError, Betas, MessageResponse, OpenAiAnswer, OpenAiApi, OpenAiError, OpenAiRequest, OpenAiUsage,
    parse_request, read_openai_request,
};

use super::super::read::require_utf8;
use super::super::script::Planned;
use super::super::stats::request_line;
use super::super::{Core, LatencyMode, Shared};
use super::{SharedState, body_timeout_error, close_after, read_body_in_time, wait_until};
use crate::edge::{api_key, key_not_utf8};

/// `POST /v1/responses`.
pub(super) async fn responses(State(shared): SharedState, headers: HeaderMap, body: Body) -> Response {
    answer(&shared, &headers, body, OpenAiApi::Responses).await
}

/// `POST /v1/chat/completions`.
pub(super) async fn chat_completions(State(shared): SharedState, headers: HeaderMap, body: Body) -> Response {
    answer(&shared, &headers, body, OpenAiApi::ChatCompletions).await
}

/// What a request came to, decided under the lock.
enum Decided {
    Priced(Box<Priced>),
    Refused { request_id: String, error: OpenAiError },
}

/// A priced request: what its answer is written from, and when it is due.
struct Priced {
    request_id: String,
    request: OpenAiRequest,
    response: MessageResponse,
    usage: OpenAiUsage,
    first_byte_ms: u64,
    done_ms: u64,
}

async fn answer(shared: &Arc<Shared>, headers: &HeaderMap, body: Body, api: OpenAiApi) -> Response {
    let key = api_key(headers);
    let read = read_body_in_time(shared, body, headers).await;
    let timed_out = read.is_err();
    let read = read.unwrap_or_else(|_| Err(body_timeout_error(shared)));
    let decided = decide(shared, headers, key.as_deref(), read, api);
    let reply = respond(shared, decided).await;
    if timed_out { close_after(reply) } else { reply }
}

/// Everything from the body read to the priced (or refused) request; nothing here awaits.
fn decide(
    shared: &Shared,
    headers: &HeaderMap,
    key: Option<&str>,
    read: Result<Bytes, ApiError>,
    api: OpenAiApi,
) -> Decided {
    let body = match read {
        Ok(body) => body,
        Err(error) => return refuse(shared, key, OpenAiError::from_api(&error)),
    };
    if let Some(error) = key_not_utf8(headers) {
        return refuse(shared, None, OpenAiError::from_api(&error));
    }
    if shared.config.require_key && key.is_none() {
        return refuse(shared, None, no_key());
    }
    let request = require_utf8(&body)
        .map_err(|error| OpenAiError::from_api(&error))
        .and_then(|text| read_openai_request(api, text));
    match request {
        Ok(request) => price(shared, request, key),
        Err(error) => refuse(shared, key, error),
    }
}

/// OpenAI's 401 for a request without a key (under `--require-key`).
fn no_key() -> OpenAiError {
    OpenAiError {
        status: 401,
        message: "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth.".to_string(),
        kind: "invalid_request_error",
        param: None,
        code: Some("invalid_api_key"),
    }
}

/// Prices a request read: the reply script's plan and the parse of the Messages body on the
/// worker, the rest under the lock, in arrival order.
fn price(shared: &Shared, request: OpenAiRequest, key: Option<&str>) -> Decided {
    let body = request.messages_body.as_bytes();
    // Our own JSON: it parses unless the reading above has a defect, which is then an error.
    let view = match parse_request(body) {
        Ok(view) => view,
        Err(error) => return refuse(shared, key, OpenAiError::from_api(&error)),
    };
    let reply = match shared.config.script.plan(&view) {
        Planned::Answer(reply) => reply,
        Planned::Fail { error, .. } | Planned::StreamError(error) => {
            return refuse(shared, key, OpenAiError::from_api(&error));
        }
        Planned::CutStream => {
            let error = ApiError::new(forkcache_wire::ErrorKind::Api, "the reply script cut this stream");
            return refuse(shared, key, OpenAiError::from_api(&error));
        }
    };
    let mut core = shared.lock();
    let at = shared.now_ms();
    let request_id = core.next_request_id();
    if let Some(error) = shared.past_max_requests(core.stats.messages_requests()) {
        return Decided::Refused { request_id, error: OpenAiError::from_api(&error) };
    }
    if !core.openai.prices().resolve(&request.model).known {
        let error = OpenAiError::model_not_found(&request.model);
        return finish_refused(shared, &mut core, (at, request_id), key, error);
    }
    let instant = shared.config.latency == LatencyMode::Instant;
    let betas = Betas::default();
    let call = Call {
        body,
        api_key: key,
        workspace: None,
        betas: &betas,
        at: SimTime(at),
        first_byte: instant.then_some(SimTime(at)),
        reply,
        checked: None,
    };
    match core.openai.handle_view(&view, &call) {
        Ok(exchange) => finish_priced(shared, &mut core, request_id, request, exchange),
        Err(error) => finish_refused(shared, &mut core, (at, request_id), key, OpenAiError::from_api(&error)),
    }
}

fn finish_priced(
    shared: &Shared,
    core: &mut Core,
    request_id: String,
    request: OpenAiRequest,
    exchange: Exchange,
) -> Decided {
    let Exchange { record, response } = exchange;
    let at = record.at.ms();
    core.retire_idle(at, &record.workspace);
    let (first_byte_ms, done_ms) = shared.reply_times(&record, &core.openai.config().cache.latency);
    // GPT-5.6 and later report their cache writes; earlier models write for free and do not.
    let report_writes = Generation::of(&request.model) == Generation::Breakpoints;
    let usage = OpenAiUsage::of(&record.usage, report_writes);
    core.log(|| request_line(&request_id, at, &record.workspace, Ok(&record)));
    core.stats.priced(&record);
    core.stats.openai.priced(&usage, &record.cost);
    core.live_priced(&record, &request_id);
    shared.count_for_shutdown(core.stats.messages_requests());
    Decided::Priced(Box::new(Priced { request_id, request, response, usage, first_byte_ms, done_ms }))
}

/// A request refused before it was priced: stamped, logged and counted under the lock.
fn refuse(shared: &Shared, key: Option<&str>, error: OpenAiError) -> Decided {
    let mut core = shared.lock();
    let at = shared.now_ms();
    let request_id = core.next_request_id();
    if let Some(error) = shared.past_max_requests(core.stats.messages_requests()) {
        return Decided::Refused { request_id, error: OpenAiError::from_api(&error) };
    }
    finish_refused(shared, &mut core, (at, request_id), key, error)
}

fn finish_refused(
    shared: &Shared,
    core: &mut Core,
    stamp: (u64, String),
    key: Option<&str>,
    error: OpenAiError,
) -> Decided {
    let (at, request_id) = stamp;
    let workspace = core.openai.workspace_of(key);
    core.retire_idle(at, &workspace);
    let logged = ApiError::new(forkcache_wire::ErrorKind::from_status(error.status), error.message.clone());
    core.log(|| request_line(&request_id, at, &workspace, Err(&logged)));
    core.stats.rejected(&workspace, at);
    core.stats.openai.rejected += 1;
    core.live_refused(at, &request_id, &workspace, &logged);
    shared.count_for_shutdown(core.stats.messages_requests());
    Decided::Refused { request_id, error }
}

async fn respond(shared: &Shared, decided: Decided) -> Response {
    let priced = match decided {
        Decided::Refused { request_id, error } => return error_response(&error, &request_id),
        Decided::Priced(priced) => priced,
    };
    let Priced { request_id, request, response, usage, first_byte_ms, done_ms } = *priced;
    // Arrival-relative seconds: the mock's clock, not the calendar.
    let answer =
        OpenAiAnswer { request: &request, response: &response, usage, created_s: first_byte_ms / 1_000 };
    let mut reply = if request.stream {
        // The whole stream at the first byte: deltas are not paced on these routes.
        wait_until(shared, first_byte_ms).await;
        let mut reply = Response::new(Body::from(answer.to_sse(shared.config.chunking.text_chars)));
        let content_type = HeaderValue::from_static("text/event-stream; charset=utf-8");
        reply.headers_mut().insert(header::CONTENT_TYPE, content_type);
        reply.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        reply
    } else {
        wait_until(shared, done_ms).await;
        json_reply(StatusCode::OK, answer.to_json())
    };
    set_request_id(&mut reply, &request_id);
    reply
}

fn error_response(error: &OpenAiError, request_id: &str) -> Response {
    let status = StatusCode::from_u16(error.status).unwrap_or(StatusCode::BAD_REQUEST);
    let mut reply = json_reply(status, error.to_json());
    set_request_id(&mut reply, request_id);
    reply
}

fn json_reply(status: StatusCode, body: String) -> Response {
    let mut reply = (status, body).into_response();
    reply.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    reply
}

/// OpenAI's clients read `x-request-id`.
fn set_request_id(reply: &mut Response, request_id: &str) {
    if let Ok(value) = HeaderValue::from_str(request_id) {
        reply.headers_mut().insert("x-request-id", value);
    }
}
