//! `forkcache proxy`: between a real client and the real API. Every request is forwarded
//! unchanged and every response returned as received, chunk by chunk; a copy of each Messages
//! exchange — the request bytes, the usage the API billed — is recorded and, unless its
//! prediction is skipped, priced by the [`MockEndpoint`] beside it.
//!
//! The forwarding path only copies bytes. Decoding the response copy (`content-encoding` gzip,
//! br, zstd), reading its usage, writing the trace and counting the recorded side of the stats
//! run on a journal thread; pricing, the live comparison line and the predicted side of the
//! stats on a prediction thread behind it at the lowest CPU priority (`predict`), fed by a queue
//! bounded in bytes (`--prediction-queue-mb`): forwarding never waits for a prediction, and an
//! exchange arriving at a full queue is recorded but not predicted. An ended exchange is written
//! once every earlier-started exchange whose cache it could have read is written (`order`), so a
//! long stream holds back only what depends on it, the trace needs no reordering, and, while no
//! prediction is skipped, the endpoint sees requests exactly as `replay` will.
//!
//! Like [`crate::serve`], this is an edge that reads a wall clock: it stamps each request's start
//! and its upstream's first byte in milliseconds since the proxy started. No API key is ever
//! written: a workspace is the API's workspace (or organization) id from the response headers, or
//! a fingerprint of the key ([`forkcache_ingest::trace::key_fingerprint`]).

mod capture;
mod exchange;
mod http;
mod journal;
mod live;
mod mailbox;
mod order;
mod predict;
mod redact;
mod stats;
mod upstream;

pub use crate::edge::encoding::DecodeLimit;
use std::future::Future;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::time::Duration;

use forkcache_engine::endpoint::MockEndpoint;
use forkcache_ingest::trace::{SessionMarker, TraceWriter};

use crate::edge::{EdgeError, Limits, serve_until};
use crate::live::{Edge, Feed};

pub use capture::{COPY_LIMIT_BYTES, Encodings, Observed, observe};
pub use predict::PREDICTION_QUEUE_BYTES;
pub use redact::redact;
pub use stats::{Comparison, ProxyStats};
pub use upstream::{Upstream, UpstreamError, without_credentials};

/// The connection limits: serve's header timeout and connection cap, but an idle timeout past the
/// API's own ten-minute limit on a non-streaming request, which sends nothing until it is done.
const CONNECTION_LIMITS: Limits = Limits {
    header_timeout: Duration::from_millis(crate::edge::HEADER_TIMEOUT_MS),
    idle_timeout: Duration::from_secs(11 * 60),
    max_connections: crate::edge::MAX_CONNECTIONS,
};

/// The `--trace` file's session marker: the wall-clock start (the edge may read it), this
/// version, the upstream's host (never a key or the rest of its URL) and the settings that price
/// the prediction, without the key → workspace map (it holds keys).
fn session_marker(config: &ProxyConfig, upstream: &Upstream, endpoint: &MockEndpoint) -> SessionMarker {
    SessionMarker {
        started: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        format: forkcache_ingest::trace::TRACE_FORMAT,
        settings: serde_json::json!({
            "upstream": upstream.host(),
            "endpoint": crate::edge::pricing_settings(endpoint),
            "prices_date": endpoint.prices().date,
            "redact": config.redact,
            // Whether workspace fingerprints are keyed (the secret itself is never written).
            "key_salted": endpoint.key_salt().is_set(),
        }),
    }
}

/// Proxy settings.
pub struct ProxyConfig {
    /// Address to listen on. Default `127.0.0.1:8766`; port 0 picks a free port.
    pub addr: SocketAddr,
    /// Where requests go: `http://` or `https://` host, port and optional path prefix.
    pub upstream: String,
    /// PEM certificates trusted for an `https` upstream besides the public roots. Default none.
    pub upstream_ca_pem: Option<Vec<u8>>,
    /// Append one envelope per Messages exchange to this JSONL trace (created mode 0600).
    pub trace: Option<PathBuf>,
    /// Rewrite every string a user wrote or a tool returned, character for character, before a
    /// body goes to the trace (see [`redact`]), so the trace can be shared and still replays to
    /// the same usage. Default false.
    pub redact: bool,
    /// Where to write the live comparison, one line per Messages exchange. Default none.
    pub request_log: Option<Box<dyn Write + Send>>,
    /// Largest request body forwarded, in bytes (larger ones get 413 as from the API).
    pub body_limit_bytes: usize,
    /// How long in-flight exchanges may take to finish once shutdown begins, in milliseconds.
    /// Default 10,000.
    pub shutdown_grace_ms: u64,
    /// Request-body bytes that may wait for their prediction; an exchange whose body would pass
    /// this is written to the trace but not predicted. Default [`PREDICTION_QUEUE_BYTES`].
    pub prediction_queue_bytes: usize,
    /// Show `GET /forkcache/stats` only to a key, and only that key's workspaces (as `serve
    /// --require-key`). Default false: without a key, every workspace is shown.
    pub require_key: bool,
    /// How far a compressed response copy is decoded to read its usage; past it the copy is not
    /// read (the stats count it in `copies_unread`). Default [`DecodeLimit::default`]: 64 MiB,
    /// at most 256 decoded bytes per encoded byte.
    pub decode_limit: DecodeLimit,
    /// Exchanges the live page's feed keeps (`GET /forkcache/events`). Default
    /// [`crate::live::LIVE_ROWS`].
    pub live_rows: usize,
}

impl ProxyConfig {
    /// The defaults, forwarding to `upstream`.
    pub fn new(upstream: impl Into<String>) -> ProxyConfig {
        ProxyConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], 8766)),
            upstream: upstream.into(),
            upstream_ca_pem: None,
            trace: None,
            redact: false,
            request_log: None,
            body_limit_bytes: crate::edge::BODY_LIMIT_BYTES,
            shutdown_grace_ms: 10_000,
            prediction_queue_bytes: PREDICTION_QUEUE_BYTES,
            require_key: false,
            decode_limit: DecodeLimit::default(),
            live_rows: crate::live::LIVE_ROWS,
        }
    }
}

/// A proxy that could not start.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// `--upstream` or `--upstream-ca` is unusable.
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
    /// The address could not be bound, the trace not opened, or the proxy stopped with an I/O
    /// error (as for `serve`).
    #[error(transparent)]
    Edge(#[from] EdgeError),
}

/// A bound proxy, ready to run.
pub struct Proxy {
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    journal: journal::Handle,
    shutdown_grace_ms: u64,
}

impl Proxy {
    /// Checks the upstream, opens the trace and binds the address; `endpoint` predicts every
    /// exchange.
    pub async fn bind(config: ProxyConfig, endpoint: MockEndpoint) -> Result<Proxy, ProxyError> {
        let upstream = Upstream::new(&config.upstream, config.upstream_ca_pem.as_deref())?;
        let trace = match &config.trace {
            Some(path) => Some(
                TraceWriter::open(path, &session_marker(&config, &upstream, &endpoint))
                    .map_err(|source| EdgeError::Trace { path: path.clone(), source })?,
            ),
            None => None,
        };
        let listener = tokio::net::TcpListener::bind(config.addr)
            .await
            .map_err(|source| EdgeError::Bind { addr: config.addr, source })?;
        let stats = Arc::new(Mutex::new(ProxyStats::default()));
        let live = Arc::new(Mutex::new(Feed::new(Edge::Proxy, config.live_rows)));
        let trace = trace.map(|out| journal::TraceOut { out, redact: config.redact });
        let (sequencer, journal) = journal::start(
            endpoint,
            trace,
            config.request_log,
            Arc::clone(&stats),
            config.prediction_queue_bytes,
            config.decode_limit,
            Arc::clone(&live),
        )
        .map_err(EdgeError::Io)?;
        let shared = Shared {
            upstream,
            sequencer,
            stats,
            body_limit_bytes: config.body_limit_bytes,
            require_key: config.require_key,
            live,
        };
        Ok(Proxy { listener, shared: Arc::new(shared), journal, shutdown_grace_ms: config.shutdown_grace_ms })
    }

    /// The address actually bound.
    #[allow(clippy::expect_used)] // a bound TCP listener always has a local address
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().expect("a bound listener has an address")
    }

    /// Forwards until `shutdown` completes, lets in-flight exchanges finish (up to the grace
    /// period), writes what they recorded and returns the totals.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<ProxyStats, ProxyError> {
        let router = http::router(Arc::clone(&self.shared));
        // No body readers: the proxy forwards bodies, it does not read them.
        serve_until(self.listener, router, CONNECTION_LIMITS, None, shutdown, self.shutdown_grace_ms).await;
        let stats = Arc::clone(&self.shared.stats);
        drop(self.shared);
        // Exchanges still held by connections past the grace period are left out.
        let journal = self.journal;
        let finished = tokio::task::spawn_blocking(move || journal.finish());
        let _ = tokio::time::timeout(Duration::from_millis(self.shutdown_grace_ms), finished).await;
        let stats = stats.lock().unwrap_or_else(PoisonError::into_inner).clone();
        Ok(stats)
    }
}

/// State every connection shares.
struct Shared {
    upstream: Upstream,
    /// Hands out start-ordered tickets and stamps their times.
    sequencer: Arc<journal::Sequencer>,
    stats: Arc<Mutex<ProxyStats>>,
    body_limit_bytes: usize,
    /// `GET /forkcache/stats` needs a key, and shows only that key's workspaces.
    require_key: bool,
    /// The live page's last rows (`GET /forkcache/events`); locked after `stats`, never before.
    live: Arc<Mutex<Feed>>,
}
