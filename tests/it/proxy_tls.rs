//! `forkcache proxy` to an https upstream: rustls with `--upstream-ca` for a private CA, and a
//! 502 naming the certificate problem without it.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::http::header;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

use crate::proxy::{RunningProxy, scratch, trace_lines};
use crate::serve_harness::{cached_request, client, post};

const STREAM: &str = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":9000,\"output_tokens\":1}}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

/// A private CA (PEM) and a certificate it signed for 127.0.0.1, with its key.
fn private_ca() -> (String, CertificateDer<'static>, PrivateKeyDer<'static>) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf_key = KeyPair::generate().unwrap();
    let leaf =
        CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap().signed_by(&leaf_key, &issuer).unwrap();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    (ca.pem(), leaf.der().clone(), key)
}

/// TLS over a loopback listener, for `axum::serve`.
struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, addr)) = self.tcp.accept().await else { continue };
            // A client that refuses the certificate just ends its handshake.
            if let Ok(tls) = self.acceptor.accept(tcp).await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.tcp.local_addr()
    }
}

/// An https upstream answering every request with one fixed stream.
fn https_upstream(
    certificate: CertificateDer<'static>,
    key: PrivateKeyDer<'static>,
) -> (SocketAddr, tokio::runtime::Runtime) {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![certificate], key)
        .unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let tcp = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = tcp.local_addr().unwrap();
    let listener = TlsListener { tcp, acceptor: TlsAcceptor::from(Arc::new(config)) };
    let app = axum::Router::new().fallback(|| async {
        (
            [
                (header::CONTENT_TYPE, "text/event-stream"),
                (header::HeaderName::from_static("request-id"), "req_tls"),
            ],
            STREAM,
        )
    });
    runtime.spawn(async move { axum::serve(listener, app).await });
    (addr, runtime)
}

#[test]
fn an_https_upstream_is_reached_through_a_private_ca_and_refused_without_it() {
    let (ca_pem, certificate, key) = private_ca();
    let (addr, _runtime) = https_upstream(certificate, key);
    let upstream = format!("https://{addr}");
    let body = cached_request("claude-sonnet-4-6", 10, "hi", true);

    let dir = scratch("tls");
    let trace = dir.join("proxy.jsonl");
    let trusting = RunningProxy::start_with(&upstream, |config| {
        config.trace = Some(trace);
        config.upstream_ca_pem = Some(ca_pem.into_bytes());
    });
    let answer = post(&client(), &trusting.url("/v1/messages"), Some("k"), body.as_bytes());
    trusting.stop();
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body, STREAM);
    let line = &trace_lines(&dir.join("proxy.jsonl"))[0];
    assert_eq!(
        (line["request_id"].as_str(), line["usage"]["cache_read_input_tokens"].as_u64()),
        (Some("req_tls"), Some(9000))
    );

    // The public roots alone do not know the private CA.
    let untrusting = RunningProxy::start(&upstream, None);
    let answer = post(&client(), &untrusting.url("/v1/messages"), Some("k"), body.as_bytes());
    untrusting.stop();
    assert_eq!(answer.status, 502);
    let (kind, message) = answer.error();
    assert_eq!(kind, "api_error");
    assert!(message.contains(&upstream) && message.contains("certificate"), "{message}");
    let _ = std::fs::remove_dir_all(&dir);
}
