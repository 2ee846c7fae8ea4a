//! Routes: the Messages API's paths, OpenAI's Responses and Chat Completions ([`openai`]), the
//! stats page, and Anthropic-shaped errors for the rest.

mod openai;

use std::sync::Arc;

use axum::Extension;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::StreamExt as _;
use serde_json::json;

use forkcache_engine::billing::PriceTable;
use forkcache_engine::prompt::BlockKeys;
use forkcache_wire::{ApiError, Betas, ErrorKind, MessageResponse, SseEvent, error_event, message_events};

use super::answer::{Answer, Ending, turn_away};
use super::read::ReadBody;
use super::{Shared, pricer};
use crate::edge::listen::Connection;
use crate::edge::{api_key, key_not_utf8, request_betas};

type SharedState = State<Arc<Shared>>;

/// Every route the mock answers.
pub(super) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/", get(root))
        .route("/v1/messages", post(messages))
        .route("/v1/messages/count_tokens", post(count_tokens))
        .route("/v1/responses", post(openai::responses))
        .route("/v1/chat/completions", post(openai::chat_completions))
        .route("/v1/models", get(models))
        .route("/v1/models/{id}", get(model))
        .route("/forkcache/stats", get(stats))
        .route("/forkcache/", get(crate::live::page))
        .route("/forkcache", get(crate::live::to_page))
        .route("/forkcache/events", get(super::live::events))
        // Claude Code 2.1.330 probes `HEAD /api/hello` before its first request.
        .route("/api/hello", get(root))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(shared)
}

/// `GET /` and `HEAD /` (Claude Code's connection check).
async fn root() -> Response {
    json_response(
        StatusCode::OK,
        json!({"name": "forkcache", "api": "mock Anthropic Messages API"}).to_string(),
    )
}

/// A known path with the wrong method: 405, in the API's error shape.
async fn method_not_allowed(State(shared): SharedState, method: Method, uri: Uri) -> Response {
    let error = ApiError::invalid(format!("Method not allowed: {method} {}", uri.path()));
    error_response_as(StatusCode::METHOD_NOT_ALLOWED, &error, &shared.lock().next_request_id())
}

async fn not_found(State(shared): SharedState, method: Method, uri: Uri) -> Response {
    let error = ApiError::new(ErrorKind::NotFound, format!("Not found: {method} {}", uri.path()));
    error_response(&error, &shared.lock().next_request_id(), None)
}

/// `POST /v1/messages`: priced by the endpoint, answered as JSON or as an SSE stream.
async fn messages(
    State(shared): SharedState,
    connection: Option<Extension<Connection>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let api_key = api_key(&headers);
    let betas = request_betas(&headers);
    let Ok(body) = read_body_in_time(&shared, body, &headers).await else {
        return body_timed_out(&shared, api_key.as_deref(), &betas).await;
    };
    let body = match body {
        Ok(body) => body,
        Err(error) => {
            return respond(&shared, turn_away(&shared, (api_key.as_deref(), &betas), b"", error)).await;
        }
    };
    if let Some(error) = key_not_utf8(&headers) {
        return respond(&shared, turn_away(&shared, (None, &betas), &body, error)).await;
    }
    if shared.config.require_key && api_key.is_none() {
        let error = ApiError::new(ErrorKind::Authentication, "x-api-key header is required");
        return respond(&shared, turn_away(&shared, (None, &betas), &body, error)).await;
    }
    let connection = connection.map(|Extension(connection)| connection);
    let body = ReadBody::read(body, &betas, &shared.config, connection.as_ref());
    let answer = pricer::price(&shared, body, (api_key, betas), connection).await;
    respond(&shared, answer).await
}

async fn respond(shared: &Arc<Shared>, answer: Answer) -> Response {
    match answer {
        Answer::Error { request_id, error, retry_after_s } => {
            error_response(&error, &request_id, retry_after_s)
        }
        Answer::Message { request_id, response, stream: false, first_byte_ms: _, done_ms, .. } => {
            // A non-streamed body arrives once the whole message is generated.
            wait_until(shared, done_ms).await;
            let mut reply = json_response(StatusCode::OK, response.to_json());
            set_request_id(&mut reply, &request_id);
            reply
        }
        Answer::Message { request_id, response, stream: true, ending, first_byte_ms, done_ms } => {
            wait_until(shared, first_byte_ms).await;
            let mut reply = stream_response(shared, &response, ending, (first_byte_ms, done_ms));
            reply
                .headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream; charset=utf-8"));
            reply.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            set_request_id(&mut reply, &request_id);
            reply
        }
    }
}

/// Sleeps until virtual time `ms`; no timer at all when that moment has passed (the instant
/// mode's every case), which keeps the timer wheel out of the hot path.
async fn wait_until(shared: &Shared, ms: u64) {
    let due = shared.instant_of(ms);
    if due > tokio::time::Instant::now() {
        tokio::time::sleep_until(due).await;
    }
}

/// The SSE body: every event; or `message_start` and then a dropped connection or an `error`
/// event. Deltas are spread evenly from the first byte to the modelled end of generation; when
/// that span is empty (instant latency) the whole stream goes out in one write.
fn stream_response(
    shared: &Arc<Shared>,
    response: &MessageResponse,
    ending: Ending,
    span_ms: (u64, u64),
) -> Response {
    let mut events = message_events(response, shared.config.chunking);
    let (first_byte_ms, done_ms) = span_ms;
    let cut = matches!(ending, Ending::Cut);
    if let Ending::Error(error) = &ending {
        events.truncate(1);
        events.push(error_event(error));
    }
    if !cut && done_ms == first_byte_ms {
        let mut body = String::with_capacity(events.iter().map(SseEvent::wire_len).sum());
        events.iter().for_each(|event| event.write_wire(&mut body));
        return Response::new(Body::from(body));
    }
    if cut {
        events.truncate(1);
    }
    let deltas = events.iter().filter(|e| e.is_delta()).count().max(1) as u64;
    let mut seen = 0;
    let paced: Vec<(u64, Bytes)> = events
        .iter()
        .map(|event| {
            seen += u64::from(event.is_delta());
            (first_byte_ms + (done_ms - first_byte_ms) * seen / deltas, Bytes::from(event.to_wire()))
        })
        .collect();
    let shared = Arc::clone(shared);
    let body = futures_util::stream::iter(paced).then(move |(due_ms, bytes)| {
        let shared = Arc::clone(&shared);
        async move {
            wait_until(&shared, due_ms).await;
            Ok::<_, std::io::Error>(bytes)
        }
    });
    // The cut waits a moment first: the connection is dropped when the error is polled, and
    // message_start must have left the write buffer by then (an idle poll makes hyper flush).
    let cut_off = futures_util::stream::iter(cut.then_some(())).then(|()| async {
        tokio::time::sleep(std::time::Duration::from_millis(CUT_DELAY_MS)).await;
        Err(std::io::Error::new(std::io::ErrorKind::ConnectionAborted, "stream cut by the reply script"))
    });
    Response::new(Body::from_stream(body.chain(cut_off)))
}

/// How long a cut stream stays open after `message_start`, in milliseconds.
const CUT_DELAY_MS: u64 = 20;

/// `POST /v1/messages/count_tokens`: the request's input tokens; the cache is never touched.
async fn count_tokens(State(shared): SharedState, headers: HeaderMap, body: Body) -> Response {
    let Ok(body) = read_body_in_time(&shared, body, &headers).await else {
        return count_body_timed_out(&shared);
    };
    let body = match body {
        Ok(body) => body,
        Err(error) => return error_response(&error, &shared.lock().next_request_id(), None),
    };
    if let Some(error) = key_not_utf8(&headers) {
        return error_response(&error, &shared.lock().next_request_id(), None);
    }
    if shared.config.require_key && api_key(&headers).is_none() {
        let error = ApiError::new(ErrorKind::Authentication, "x-api-key header is required");
        return error_response(&error, &shared.lock().next_request_id(), None);
    }
    // Parsed and hashed before the lock: a large body would hold up every request being priced.
    let parsed = forkcache_wire::parse_request(&body).map(|view| {
        let keys = BlockKeys::of(&view);
        (view, keys)
    });
    let mut core = shared.lock();
    let request_id = core.next_request_id();
    let counted = parsed.and_then(|(view, keys)| core.endpoint.count_tokens_keyed(&view, Some(&keys)));
    core.stats.count_tokens_requests += 1;
    drop(core);
    match counted {
        Ok(tokens) => {
            let mut reply = json_response(StatusCode::OK, json!({"input_tokens": tokens}).to_string());
            set_request_id(&mut reply, &request_id);
            reply
        }
        Err(error) => error_response(&error, &request_id, None),
    }
}

/// `GET /v1/models`: the price table's models.
async fn models(State(shared): SharedState) -> Response {
    json_response(StatusCode::OK, shared.models_json.clone())
}

/// `GET /v1/models/{id}`. An id that does not decode to UTF-8 (`%ff`) names no model either: a
/// 404 in the API's shape, naming it as it was sent.
async fn model(State(shared): SharedState, uri: Uri, id: Result<Path<String>, PathRejection>) -> Response {
    let id = match id {
        Ok(Path(id)) => id,
        Err(_) => uri.path().rsplit('/').next().unwrap_or_default().to_string(),
    };
    // Our own JSON; were it ever unreadable, every id would be a 404.
    let list: serde_json::Value = serde_json::from_str(&shared.models_json).unwrap_or_default();
    let found = list["data"].as_array().and_then(|models| models.iter().find(|m| m["id"] == id.as_str()));
    match found {
        Some(model) => json_response(StatusCode::OK, model.to_string()),
        None => {
            let error = ApiError::new(ErrorKind::NotFound, format!("model: {id}"));
            error_response(&error, &shared.lock().next_request_id(), None)
        }
    }
}

/// `GET /forkcache/stats`: totals per workspace so far. Asked with a key, it shows that key's
/// workspace alone; under `require_key` it must be asked with one, so one tenant never sees
/// another's traffic.
async fn stats(State(shared): SharedState, headers: HeaderMap) -> Response {
    let key = api_key(&headers);
    let mut core = shared.lock();
    if let Some(error) = key_not_utf8(&headers) {
        return error_response(&error, &core.next_request_id(), None);
    }
    match key {
        Some(key) => {
            let workspace = core.endpoint.workspace_of(Some(&key));
            json_response(StatusCode::OK, core.stats.workspace_json(&workspace))
        }
        None if shared.config.require_key => {
            let error = ApiError::new(ErrorKind::Authentication, "x-api-key header is required");
            error_response(&error, &core.next_request_id(), None)
        }
        None => json_response(StatusCode::OK, core.summary().to_json()),
    }
}

/// The `GET /v1/models` document: every id of every priced model, in table order.
pub(super) fn models_json(prices: &PriceTable) -> String {
    let created_at = format!("{}T00:00:00Z", prices.date);
    let data: Vec<serde_json::Value> = prices
        .models()
        .iter()
        .flat_map(|model| {
            let created_at = &created_at;
            model.ids.iter().map(move |id| {
                json!({"type": "model", "id": id, "display_name": format!("Claude {}", model.name), "created_at": created_at})
            })
        })
        .collect();
    let first = data.first().map(|m| m["id"].clone());
    let last = data.last().map(|m| m["id"].clone());
    json!({"data": data, "has_more": false, "first_id": first, "last_id": last}).to_string()
}

/// [`read_body`] within the body timeout; `Err` when the client did not send it all in time.
async fn read_body_in_time(
    shared: &Shared,
    body: Body,
    headers: &HeaderMap,
) -> Result<Result<Bytes, ApiError>, tokio::time::error::Elapsed> {
    let mut reading = std::pin::pin!(read_body(body, headers, shared.config.body_limit_bytes));
    // Most bodies arrive with their head: one read without arming a timer (a timer per request
    // was about 1% of the server's CPU on 18 KB requests).
    let first = std::future::poll_fn(|cx| std::task::Poll::Ready(reading.as_mut().poll(cx))).await;
    if let std::task::Poll::Ready(read) = first {
        return Ok(read);
    }
    let timeout = std::time::Duration::from_millis(shared.config.body_timeout_ms);
    tokio::time::timeout(timeout, reading).await
}

/// 408: a Messages body that did not arrive within the body timeout. Traced as a rejection
/// (with its error and no bytes: what arrived is not the request) and counted in the stats, like
/// every other request turned away at the edge.
async fn body_timed_out(shared: &Arc<Shared>, api_key: Option<&str>, betas: &Betas) -> Response {
    let answer = turn_away(shared, (api_key, betas), b"", body_timeout_error(shared));
    close_after(respond(shared, answer).await)
}

/// 408 for a `count_tokens` body that did not arrive in time (not a Messages request: not traced).
fn count_body_timed_out(shared: &Shared) -> Response {
    let error = body_timeout_error(shared);
    close_after(error_response(&error, &shared.lock().next_request_id(), None))
}

fn body_timeout_error(shared: &Shared) -> ApiError {
    let message = format!("request body not received within {} ms", shared.config.body_timeout_ms);
    ApiError::new(ErrorKind::RequestTimeout, message)
}

/// The rest of a late body may still be on its way: this connection cannot carry another request.
fn close_after(mut reply: Response) -> Response {
    reply.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    reply
}

/// The body, or 413 once it passes `limit` bytes. An oversized body is still read (and dropped)
/// up to [`DRAIN_FACTOR`] × `limit`, so a client that sends it all before reading gets the 413
/// instead of a reset connection; past that the connection is abandoned.
async fn read_body(body: Body, headers: &HeaderMap, limit: usize) -> Result<Bytes, ApiError> {
    let too_large = |size: String| {
        ApiError::new(
            ErrorKind::RequestTooLarge,
            format!("Request exceeds the maximum size of {limit} bytes ({size})"),
        )
    };
    let limit = limit as u64;
    let drain_limit = limit.saturating_mul(DRAIN_FACTOR);
    let announced =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if let Some(length) = announced.filter(|&length| length > drain_limit) {
        return Err(too_large(format!("{length} bytes announced")));
    }
    let mut stream = body.into_data_stream();
    // A body that arrives as one chunk (a whole request in one read, the usual case) is kept as
    // it is; only a second chunk makes a copy.
    let mut first: Option<Bytes> = None;
    let mut collected = Vec::new();
    let mut total: u64 = 0;
    while let Some(chunk) = stream.next().await {
        let chunk =
            chunk.map_err(|err| ApiError::invalid(format!("request body could not be read: {err}")))?;
        total += chunk.len() as u64;
        if total > limit {
            if total > drain_limit {
                break;
            }
        } else if total == chunk.len() as u64 {
            first = Some(chunk);
        } else {
            if let Some(first) = first.take() {
                // Sized from the announced length, so a large body is copied once and never regrown.
                collected.reserve(announced.map_or(0, |length| length.min(limit)) as usize);
                collected.extend_from_slice(&first);
            }
            collected.extend_from_slice(&chunk);
        }
    }
    if total > limit {
        return Err(too_large(format!("{total} bytes or more sent")));
    }
    Ok(first.unwrap_or_else(|| Bytes::from(collected)))
}

/// How far past the limit an oversized body is still read, as a multiple of the limit.
const DRAIN_FACTOR: u64 = 4;

fn json_response(status: StatusCode, body: String) -> Response {
    let mut reply = (status, body).into_response();
    reply.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    reply
}

/// An error in the API's shape, with its status, `request-id` and, if given, `retry-after`.
fn error_response(error: &ApiError, request_id: &str, retry_after_s: Option<u64>) -> Response {
    let status = StatusCode::from_u16(error.status).unwrap_or(StatusCode::BAD_REQUEST);
    let mut reply = error_response_as(status, error, request_id);
    if let Some(seconds) = retry_after_s {
        reply.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    reply
}

/// An error in the API's shape under a status of the HTTP layer's own (405, 408).
fn error_response_as(status: StatusCode, error: &ApiError, request_id: &str) -> Response {
    let mut reply = json_response(status, error.to_json(request_id));
    set_request_id(&mut reply, request_id);
    reply
}

fn set_request_id(reply: &mut Response, request_id: &str) {
    if let Ok(value) = HeaderValue::from_str(request_id) {
        reply.headers_mut().insert("request-id", value);
    }
}
