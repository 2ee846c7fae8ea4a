//! The API's error shape for the requests hyper refuses itself.
//!
//! A request whose request line or headers cannot be parsed, whose URI is too long or whose
//! header block is too large never reaches a handler: hyper answers it with a bare status and
//! `content-length: 0`, then closes the connection. Every other refusal of both edges is the
//! API's JSON error, so a client's error handling sees one shape. This writer gives hyper's
//! answers that shape on their way out: it recognises them as a whole response head of status
//! 400, 414 or 431 with an empty body (no handler answers those with an empty body) and writes
//! in its place the same head, with a JSON body, `content-type` and `request-id`.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use forkcache_wire::ApiError;

/// The `request-id` of a refusal no request was parsed for.
const UNPARSED_REQUEST_ID: &str = "req_fc_unparsed";

/// The longest bare refusal hyper writes (a status line, `connection`, `content-length` and
/// `date`, about 110 bytes): anything longer is not one, and is passed on without a look.
const BARE_REFUSAL_MAX_BYTES: usize = 256;

/// Writes through to `inner`, except hyper's own bare refusals (see the module docs).
pub(crate) struct ShapedRefusals<T> {
    inner: T,
    /// A refusal being written in place of the head hyper gave.
    rewriting: Option<Rewrite>,
}

struct Rewrite {
    bytes: Vec<u8>,
    sent: usize,
    /// The length of hyper's head, reported written once `bytes` all are.
    replaces: usize,
}

impl<T> ShapedRefusals<T> {
    pub(crate) fn new(inner: T) -> ShapedRefusals<T> {
        ShapedRefusals { inner, rewriting: None }
    }
}

const EMPTY_BODY: &str = "\r\ncontent-length: 0\r\n";

/// The status and message of `head` when it is one of hyper's bare refusals. Every response
/// write passes here, so the common case (a body, or a head with one) is settled by its length
/// and first bytes, before any text is read.
fn bare_refusal(head: &[u8]) -> Option<(u16, &'static str)> {
    if head.len() > BARE_REFUSAL_MAX_BYTES || !head.starts_with(b"HTTP/1.1 4") || !head.ends_with(b"\r\n\r\n")
    {
        return None;
    }
    let text = std::str::from_utf8(head).ok()?;
    if !text.contains(EMPTY_BODY) {
        return None;
    }
    match text.get(9..12)? {
        "400" => Some((400, "malformed HTTP request: its request line or a header could not be parsed")),
        "414" => Some((414, "the request's URI is too long")),
        "431" => Some((431, "the request's header fields are too large")),
        _ => None,
    }
}

/// The API-shaped response for `head` when it is one of hyper's bare refusals.
fn shaped(head: &[u8]) -> Option<Vec<u8>> {
    let (status, message) = bare_refusal(head)?;
    let text = std::str::from_utf8(head).ok()?;
    let body = ApiError::with_status(status, message).to_json(UNPARSED_REQUEST_ID);
    let headers = format!(
        "\r\ncontent-type: application/json\r\nrequest-id: {UNPARSED_REQUEST_ID}\r\ncontent-length: {}\r\n",
        body.len()
    );
    Some([text.replacen(EMPTY_BODY, &headers, 1).into_bytes(), body.into_bytes()].concat())
}

impl<T: AsyncWrite + Unpin> ShapedRefusals<T> {
    /// Writes `buf` through, or its shaped replacement when it is a bare refusal.
    fn write(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        if self.rewriting.is_none() {
            let Some(bytes) = shaped(buf) else { return Pin::new(&mut self.inner).poll_write(cx, buf) };
            self.rewriting = Some(Rewrite { bytes, sent: 0, replaces: buf.len() });
        }
        self.write_rewrite(cx)
    }

    /// Drives the replacement out; hyper sees its own head written when all of it is.
    fn write_rewrite(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let Some(rewrite) = self.rewriting.as_mut() else { return Poll::Ready(Ok(0)) };
        while rewrite.sent < rewrite.bytes.len() {
            match Pin::new(&mut self.inner).poll_write(cx, &rewrite.bytes[rewrite.sent..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(written)) => rewrite.sent += written,
                Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
                Poll::Pending => return Poll::Pending,
            }
        }
        let replaces = rewrite.replaces;
        self.rewriting = None;
        Poll::Ready(Ok(replaces))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for ShapedRefusals<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for ShapedRefusals<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        // A bare refusal is a head alone: one non-empty slice.
        let mut filled = bufs.iter().filter(|buf| !buf.is_empty());
        if let (Some(only), None) = (filled.next(), filled.next()) {
            if self.rewriting.is_some() || bare_refusal(only).is_some() {
                return self.write(cx, only);
            }
        }
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.rewriting.is_some() {
            if let Poll::Ready(Err(error)) = self.write_rewrite(cx) {
                return Poll::Ready(Err(error));
            }
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hypers_bare_refusals_get_the_apis_shape_and_nothing_else_is_touched() {
        let bare = b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\ndate: Sun, 29 Nov 2026 12:49:35 GMT\r\n\r\n";
        let response = String::from_utf8(shaped(bare).unwrap()).unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\nconnection: close\r\n"), "{head}");
        assert!(
            head.contains("content-type: application/json") && head.contains("request-id: req_fc_unparsed")
        );
        assert!(head.contains(&format!("content-length: {}", body.len())), "{head}");
        let error: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(error["type"], "error");
        assert_eq!(error["error"]["type"], "invalid_request_error");
        assert_eq!(error["request_id"], "req_fc_unparsed");
        // A response with a body, an empty 200, and a status hyper does not refuse with pass.
        let answered = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 12\r\n\r\n";
        let empty_ok = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
        let not_allowed = b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n";
        assert!(shaped(answered).is_none() && shaped(empty_ok).is_none() && shaped(not_allowed).is_none());
        // Part of a head is not a head.
        assert!(shaped(&bare[..40]).is_none());
    }
}
