//! The upstream: where requests go, and the HTTP(S) client that takes them there.
//!
//! hyper-util's client over hyper-rustls: the same hyper the axum side runs on, so a response's
//! body frames pass from one to the other without re-buffering, and TLS is rustls (ring) with the
//! public web roots plus any `--upstream-ca`.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Bytes;
use axum::http::Uri;
use axum::http::uri::{Authority, PathAndQuery, Scheme};
use http_body::{Frame, SizeHint};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// An upstream that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// Not an absolute `http://` or `https://` URL.
    #[error("--upstream {url:?}: {reason}")]
    Url {
        /// What was given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The CA file holds no usable certificate.
    #[error("--upstream-ca: {0}")]
    Ca(String),
}

/// `url` with the credentials of its authority (`user:password@`) removed: what any message may
/// show of an `--upstream`. Text that is not a URL is returned with everything up to its last
/// `@` before the path removed, since it may still hold a password.
pub fn without_credentials(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").map_or(("", url), |(scheme, rest)| (scheme, rest));
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let scheme = if url.contains("://") { format!("{scheme}://") } else { String::new() };
    format!("{scheme}{host}{tail}")
}

/// Where requests are forwarded, and the client that forwards them.
pub struct Upstream {
    scheme: Scheme,
    authority: Authority,
    /// Path prefix without its trailing `/` (empty for none).
    prefix: String,
    client: Client<HttpsConnector<HttpConnector>, Frames>,
    /// A client that keeps no idle connection: each request it sends goes on a connection of its
    /// own, for a retry that must not meet another connection the upstream is closing.
    fresh: Client<HttpsConnector<HttpConnector>, Frames>,
}

impl Upstream {
    /// Checks `url` and builds the client; `ca_pem` adds trusted roots for `https`.
    pub fn new(url: &str, ca_pem: Option<&[u8]>) -> Result<Upstream, UpstreamError> {
        let bad =
            |reason: &str| UpstreamError::Url { url: without_credentials(url), reason: reason.to_string() };
        let uri: Uri = url.parse().map_err(|_| bad("not a URL"))?;
        let scheme = uri.scheme().cloned().ok_or_else(|| bad("give the scheme, http:// or https://"))?;
        if scheme != Scheme::HTTP && scheme != Scheme::HTTPS {
            return Err(bad("the scheme must be http or https"));
        }
        let authority = uri.authority().cloned().ok_or_else(|| bad("no host"))?;
        if uri.query().is_some() {
            return Err(bad("a query cannot be forwarded to; give a host and optional path"));
        }
        let prefix = uri.path().trim_end_matches('/').to_string();
        let client = Client::builder(TokioExecutor::new()).build(connector(ca_pem)?);
        let fresh = Client::builder(TokioExecutor::new()).pool_max_idle_per_host(0).build(connector(ca_pem)?);
        Ok(Upstream { scheme, authority, prefix, client, fresh })
    }

    /// The upstream URL for a request's path and query.
    #[allow(clippy::expect_used)] // scheme and authority were checked in `new`; axum parsed the path
    pub fn target(&self, path_and_query: Option<&PathAndQuery>) -> Uri {
        let tail = path_and_query.map_or("/", PathAndQuery::as_str);
        Uri::builder()
            .scheme(self.scheme.clone())
            .authority(self.authority.clone())
            .path_and_query(format!("{}{tail}", self.prefix))
            .build()
            .expect("a checked upstream and a received path make a URL")
    }

    /// The upstream as given, without any `user:password@` (for messages: a 502's body, the
    /// trace, the startup line).
    pub fn describe(&self) -> String {
        let port = self.authority.port().map_or_else(String::new, |port| format!(":{port}"));
        format!("{}://{}{port}{}", self.scheme, self.authority.host(), self.prefix)
    }

    /// The upstream's host alone (no scheme, credentials, port or path): what a trace names.
    pub fn host(&self) -> &str {
        self.authority.host()
    }

    /// The client.
    pub(super) fn client(&self) -> &Client<HttpsConnector<HttpConnector>, Frames> {
        &self.client
    }

    /// The client that sends each request on a new connection.
    pub(super) fn fresh_client(&self) -> &Client<HttpsConnector<HttpConnector>, Frames> {
        &self.fresh
    }
}

/// A request body sent upstream as the frames it arrived in, none joined.
pub(super) struct Frames {
    frames: VecDeque<Bytes>,
    remaining: u64,
}

impl Frames {
    pub(super) fn new(frames: Vec<Bytes>) -> Frames {
        let remaining = frames.iter().map(|frame| frame.len() as u64).sum();
        Frames { frames: frames.into(), remaining }
    }
}

impl http_body::Body for Frames {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        let frame = this.frames.pop_front().map(|data| {
            this.remaining -= data.len() as u64;
            Ok(Frame::data(data))
        });
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.frames.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

#[allow(clippy::expect_used)] // ring supports the default protocol versions
fn connector(ca_pem: Option<&[u8]>) -> Result<HttpsConnector<HttpConnector>, UpstreamError> {
    let mut roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    if let Some(pem) = ca_pem {
        let certificates: Vec<CertificateDer> = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<_, _>>()
            .map_err(|err| UpstreamError::Ca(format!("not PEM certificates: {err}")))?;
        if certificates.is_empty() {
            return Err(UpstreamError::Ca("no certificate found".into()));
        }
        for certificate in certificates {
            roots.add(certificate).map_err(|err| UpstreamError::Ca(err.to_string()))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(tcp_connector()))
}

/// The TCP side of the client: any scheme (the TLS layer enforces its own), and Nagle's
/// algorithm off, as on the sockets serve and the proxy accept. With it on, the last short
/// segment of a large request body waited for the upstream's delayed ACK (40 ms on Linux).
fn tcp_connector() -> HttpConnector {
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    tcp.set_nodelay(true);
    tcp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(url: &str) -> String {
        Upstream::new(url, None).err().expect("refused").to_string()
    }

    #[test]
    fn credentials_in_the_upstream_are_never_shown() {
        assert_eq!(without_credentials("http://u:PASS@host:8080/base"), "http://host:8080/base");
        assert_eq!(without_credentials("https://PASS@host"), "https://host");
        assert_eq!(without_credentials("http://host/a@b"), "http://host/a@b");
        assert_eq!(without_credentials("u:PASS@host?x"), "host?x");
        let upstream = Upstream::new("http://u:PASS@127.0.0.1:9/base", None).expect("valid");
        assert_eq!(upstream.describe(), "http://127.0.0.1:9/base");
        assert!(!error("ftp://u:PASS@host").contains("PASS"), "{}", error("ftp://u:PASS@host"));
    }

    #[test]
    fn upstream_urls_are_checked_at_start() {
        assert!(error("api.anthropic.com").contains("give the scheme"), "{}", error("api.anthropic.com"));
        assert!(error("ftp://example.com").contains("http or https"));
        assert!(error("http://h/?a=1").contains("query"));
        let ca = Upstream::new("https://h", Some(b"not pem")).err().unwrap().to_string();
        assert!(ca.starts_with("--upstream-ca: no certificate"), "{ca}");
    }

    #[test]
    fn targets_keep_path_and_query_under_the_prefix() {
        let upstream = Upstream::new("http://127.0.0.1:9/base/", None).unwrap();
        let pq: PathAndQuery = "/v1/messages?beta=true".parse().unwrap();
        assert_eq!(upstream.target(Some(&pq)).to_string(), "http://127.0.0.1:9/base/v1/messages?beta=true");
        assert_eq!(upstream.describe(), "http://127.0.0.1:9/base");
    }
}
