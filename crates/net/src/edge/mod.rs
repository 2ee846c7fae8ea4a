//! The HTTP layer both edges stand on — `serve` (the mock endpoint) and `proxy` (in front of a
//! real one): connection limits and the accept loop (`listen`), the request headers both read
//! (the key, the betas), the content codings both speak ([`encoding`]), their defaults and the
//! settings their trace's session marker records. Neither edge imports the other; both import
//! this.

pub mod encoding;
mod headers;
pub(crate) mod listen;
mod refusals;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;

use forkcache_engine::endpoint::MockEndpoint;
use forkcache_ingest::trace::BodyBudget;

pub(crate) use headers::{api_key, key_not_utf8, request_betas};
pub(crate) use listen::Limits;

/// Bodies larger than this are refused with 413 `request_too_large`, as the API does (32 MB).
pub const BODY_LIMIT_BYTES: usize = 32 << 20;

/// Default header timeout: 30 s.
pub const HEADER_TIMEOUT_MS: u64 = 30_000;
/// Default body timeout: 60 s (32 MB at about 4 Mbit/s).
pub const BODY_TIMEOUT_MS: u64 = 60_000;
/// Default idle timeout: 120 s, longer than any modelled wait for a first byte.
pub const IDLE_TIMEOUT_MS: u64 = 120_000;
/// Default connection cap: well under the file-descriptor limit the binary raises at start.
pub const MAX_CONNECTIONS: usize = 4_096;

/// An edge (`serve`, `proxy`) that could not start or stopped with an I/O error.
#[derive(Debug, thiserror::Error)]
pub enum EdgeError {
    /// The address could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The trace file could not be opened for appending.
    #[error("cannot open trace {}", path.display())]
    Trace {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The endpoint's tokenizer is not in this build.
    #[error("tokenizer {0} is not available in this build")]
    Tokenizer(&'static str),
    /// The server stopped with an I/O error.
    #[error("the server failed")]
    Io(#[from] std::io::Error),
}

/// Serves `router` on `listener` within `limits` until `stopping` completes, then lets in-flight
/// requests finish — but a client that never finishes its request may not hold the server up for
/// longer than `grace_ms`. With `kept`, each connection reads its bodies, and renders their
/// prompts, from where they part from its last request, within that budget
/// ([`listen::Connection`]).
pub(crate) async fn serve_until(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    limits: Limits,
    kept: Option<BodyBudget>,
    stopping: impl Future<Output = ()> + Send + 'static,
    grace_ms: u64,
) {
    let (began, stop_began) = tokio::sync::oneshot::channel::<()>();
    let stopping = async move {
        stopping.await;
        let _ = began.send(());
    };
    let grace = async move {
        match stop_began.await {
            Ok(()) => tokio::time::sleep(std::time::Duration::from_millis(grace_ms)).await,
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        () = listen::serve(listener, router, limits, kept, stopping) => {}
        () = grace => {}
    }
}

/// The endpoint's settings as a session marker records them: without the key → workspace map,
/// which holds keys.
pub(crate) fn pricing_settings(endpoint: &MockEndpoint) -> serde_json::Value {
    let mut pricing = serde_json::to_value(endpoint.config()).unwrap_or_default();
    if let Some(pricing) = pricing.as_object_mut() {
        pricing.remove("workspaces");
    }
    pricing
}
