//! The forwarding path: every request to the upstream unchanged, every response back as received,
//! with a copy of each Messages exchange handed to the journal.

use std::pin::Pin;
use std::sync::{Arc, PoisonError};
use std::task::{Context, Poll};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http_body::Frame;
use http_body_util::BodyExt as _;

use forkcache_ingest::trace::LoggedError;
use forkcache_wire::{ApiError, ErrorKind};

use super::Shared;
use super::journal::Ticket;
use super::upstream::Frames;

type SharedState = State<Arc<Shared>>;

/// The stats page, and everything else forwarded.
pub(super) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/forkcache/stats", get(stats))
        .route("/forkcache/", get(crate::live::page))
        .route("/forkcache", get(crate::live::to_page))
        .route("/forkcache/events", get(super::live::events))
        .fallback(forward)
        .with_state(shared)
}

/// `GET /forkcache/stats`: recorded and predicted totals per workspace so far. As in `serve`:
/// asked with a key, it shows that key's workspaces alone; under `require_key` it must be asked
/// with one, so one tenant never sees another's traffic.
async fn stats(State(shared): SharedState, headers: HeaderMap) -> Response {
    let key = crate::edge::api_key(&headers);
    if key.is_none() && shared.require_key {
        let error = ApiError::new(ErrorKind::Authentication, "x-api-key header is required");
        return refuse(None, error, StatusCode::UNAUTHORIZED);
    }
    let stats = shared.stats.lock().unwrap_or_else(PoisonError::into_inner);
    let json = match key {
        Some(key) => stats.key_json(&shared.sequencer.fingerprint(&key)),
        None => stats.to_json(),
    };
    drop(stats);
    let mut reply = (StatusCode::OK, json).into_response();
    reply.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    reply
}

/// Forwards one request; a Messages exchange is recorded on the way.
async fn forward(State(shared): SharedState, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let recorded = parts.method == Method::POST && parts.uri.path() == "/v1/messages";
    let mut ticket = recorded.then(|| shared.sequencer.issue(&parts.headers));
    let frames = match read_frames(body, shared.body_limit_bytes).await {
        Ok(frames) => frames,
        Err(unread) => {
            let error = unread.answer(shared.body_limit_bytes);
            let status = StatusCode::from_u16(error.status).unwrap_or(StatusCode::BAD_REQUEST);
            return refuse(ticket, error, status);
        }
    };
    if let Some(ticket) = &mut ticket {
        // References to the frames' buffers: the journal joins them, off this path.
        ticket.set_body(frames.clone());
    }
    let target = shared.upstream.target(parts.uri.path_and_query());
    let headers = end_to_end(&parts.headers);
    let upstream_request = |frames: Vec<Bytes>| {
        let mut request = hyper::Request::new(Frames::new(frames));
        *request.method_mut() = parts.method.clone();
        *request.uri_mut() = target.clone();
        *request.headers_mut() = headers.clone();
        request
    };
    let mut sent = shared.upstream.client().request(upstream_request(frames.clone())).await;
    if sent.as_ref().is_err_and(never_answered) {
        // The upstream closed the connection before answering a byte: on a kept-alive connection
        // it closed while the request was on its way. Once more, on a new connection (another
        // kept-alive one may be closing too).
        shared.stats.lock().unwrap_or_else(PoisonError::into_inner).upstream_retries += 1;
        sent = shared.upstream.fresh_client().request(upstream_request(frames)).await;
    }
    let response = match sent {
        Ok(response) => response,
        Err(err) => {
            let message = format!(
                "upstream {} unreachable: {}",
                shared.upstream.describe(),
                describe_client_error(&err)
            );
            return refuse(ticket, ApiError::new(ErrorKind::Api, message), StatusCode::BAD_GATEWAY);
        }
    };
    let (mut head, incoming) = response.into_parts();
    head.headers = end_to_end(&head.headers);
    let body = match ticket {
        Some(mut ticket) => {
            ticket.began(head.status.as_u16(), &head.headers);
            Body::new(Tee { inner: incoming, ticket })
        }
        None => Body::new(incoming),
    };
    Response::from_parts(head, body)
}

/// An Anthropic-shaped error from the proxy itself (the upstream never answered).
fn refuse(ticket: Option<Ticket>, error: ApiError, status: StatusCode) -> Response {
    let request_id = "req_forkcache_proxy";
    if let Some(ticket) = ticket {
        ticket.refused(LoggedError { status: status.as_u16(), ..LoggedError::of(&error) });
    }
    let mut reply = (status, error.to_json(request_id)).into_response();
    reply.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    reply
}

/// A request body that was not forwarded.
enum Unread {
    /// Past the body limit.
    TooLarge,
    /// The client's body failed (a broken connection, bad chunking).
    Failed(String),
}

impl Unread {
    /// The API's error (its kind gives the status): 413 past the limit, 400 for a body that
    /// could not be read.
    fn answer(&self, limit: usize) -> ApiError {
        match self {
            Unread::TooLarge => ApiError::new(
                ErrorKind::RequestTooLarge,
                format!("Request exceeds the maximum size of {limit} bytes"),
            ),
            Unread::Failed(err) => ApiError::invalid(format!("request body could not be read: {err}")),
        }
    }
}

/// The whole request body, as the frames it arrived in: forwarded without joining them (a copy
/// of every byte of a large body), up to `limit` bytes.
async fn read_frames(body: Body, limit: usize) -> Result<Vec<Bytes>, Unread> {
    // A declared length past the limit is refused before any of it is read.
    if http_body::Body::size_hint(&body).lower() > limit as u64 {
        return Err(Unread::TooLarge);
    }
    let mut body = std::pin::pin!(body);
    let (mut frames, mut bytes) = (Vec::new(), 0usize);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|err| Unread::Failed(err.to_string()))?;
        // Trailers carry nothing the API reads.
        if let Ok(data) = frame.into_data() {
            bytes = bytes.saturating_add(data.len());
            if bytes > limit {
                return Err(Unread::TooLarge);
            }
            if !data.is_empty() {
                frames.push(data);
            }
        }
    }
    Ok(frames)
}

/// Whether a request failed because its connection closed (or was reset) before any byte of a
/// response came back: the failure hyper reports when an upstream closes a kept-alive connection
/// just as a request is sent on it. A request that was never sent at all is retried by the client
/// itself; a connection that could not be made is not retried (the upstream is down).
fn never_answered(err: &hyper_util::client::legacy::Error) -> bool {
    if err.is_connect() {
        return false;
    }
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        if let Some(hyper_error) = cause.downcast_ref::<hyper::Error>() {
            if hyper_error.is_incomplete_message() || hyper_error.is_canceled() {
                return true;
            }
        }
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
            if matches!(io.kind(), ConnectionReset | BrokenPipe | ConnectionAborted) {
                return true;
            }
        }
        source = cause.source();
    }
    false
}

/// The client error and its causes, most specific last (`connection refused`, not only
/// `client error (Connect)`).
fn describe_client_error(err: &hyper_util::client::legacy::Error) -> String {
    let mut message = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

/// Headers that belong to one connection, not to the exchange (RFC 9110 §7.6.1), plus `Host`,
/// which the client sets from the upstream URL.
const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// `headers` without hop-by-hop ones (those listed above and those `Connection` names) and
/// without `Host`; order and repeats kept.
fn end_to_end(headers: &HeaderMap) -> HeaderMap {
    let named: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .collect();
    let keep = |name: &HeaderName| {
        let name = name.as_str();
        name != "host" && !HOP_BY_HOP.contains(&name) && !named.iter().any(|n| n == name)
    };
    let mut kept = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers.iter().filter(|(name, _)| keep(name)) {
        kept.append(name.clone(), value.clone());
    }
    kept
}

/// A response body passed through frame by frame, its data copied into the ticket. When it is
/// dropped — ended, failed, or abandoned by the client (which drops the upstream connection too)
/// — the ticket goes to the journal.
struct Tee {
    inner: hyper::body::Incoming,
    ticket: Ticket,
}

impl http_body::Body for Tee {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    // A reference to the frame's buffer: the journal joins and reads them.
                    this.ticket.copy(data);
                }
                if http_body::Body::is_end_stream(&this.inner) {
                    this.ticket.ended();
                }
            }
            Poll::Ready(Some(Err(err))) => this.ticket.upstream_failed(err.to_string()),
            Poll::Ready(None) => this.ticket.ended(),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_headers_and_host_are_dropped() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("host", "127.0.0.1:8766"),
            ("connection", "keep-alive, x-trace-hop"),
            ("x-trace-hop", "1"),
            ("transfer-encoding", "chunked"),
            ("x-api-key", "k"),
            ("anthropic-beta", "a"),
            ("anthropic-beta", "b"),
            ("accept-encoding", "gzip, deflate, br, zstd"),
        ] {
            headers.append(HeaderName::from_static(name), HeaderValue::from_static(value));
        }
        let kept = end_to_end(&headers);
        let names: Vec<&str> = kept.keys().map(HeaderName::as_str).collect();
        assert_eq!(names, ["x-api-key", "anthropic-beta", "accept-encoding"]);
        assert_eq!(kept.get_all("anthropic-beta").iter().count(), 2);
    }

    /// A body of `pieces`, without a declared length (as a chunked one arrives).
    fn pieces(pieces: &[&'static str]) -> Body {
        let frames: Vec<_> = pieces
            .iter()
            .map(|piece| Ok::<_, std::io::Error>(Bytes::from_static(piece.as_bytes())))
            .collect();
        Body::from_stream(futures_util::stream::iter(frames))
    }

    fn read(body: Body, limit: usize) -> Result<Vec<Bytes>, Unread> {
        tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(read_frames(body, limit))
    }

    #[test]
    fn a_body_is_read_as_its_frames_up_to_the_limit() {
        // 3 + 4 + 3 = 10 bytes: at a limit of 10 it is read, frame for frame; at 9 it is not.
        let frames = read(pieces(&["{\"a", "\":12", "34}"]), 10).ok().unwrap();
        assert_eq!(frames, ["{\"a", "\":12", "34}"]);
        assert!(matches!(read(pieces(&["{\"a", "\":12", "34}"]), 9), Err(Unread::TooLarge)));
        // A declared length past the limit is refused before reading.
        assert!(matches!(read(Body::from("0123456789"), 9), Err(Unread::TooLarge)));
        let failed =
            Body::from_stream(futures_util::stream::iter([Err::<Bytes, _>(std::io::Error::other("reset"))]));
        assert!(matches!(read(failed, 9), Err(Unread::Failed(err)) if err.contains("reset")));
    }
}
