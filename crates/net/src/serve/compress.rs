//! `serve --compress`: responses encoded as the request's `accept-encoding` allows (gzip, br or
//! zstd), like the real API behind its CDN — so a proxy and real clients can be tested against a
//! compressing upstream.
//!
//! Each body frame is compressed and flushed on its own: an SSE event reaches the client, and a
//! proxy's copy, as soon as it is sent, as without compression. gzip and br use a sync flush
//! (flate2, brotli); zstd ends one frame per body frame (a zstd stream may hold many frames, RFC
//! 8878 §3.1). Off the shelf, tower-http's `CompressionLayer` buffers event streams until the
//! encoder's window fills (so its default leaves them uncompressed), which is why this is not it.

use std::io::Write;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;
use http_body::Frame;

use crate::edge::encoding::Encoding;

/// The middleware: encodes a response when the request accepts one of the encodings and the
/// response is not encoded already.
pub(super) async fn compress(request: Request, next: Next) -> Response {
    let accept = request.headers().get(header::ACCEPT_ENCODING).and_then(|v| v.to_str().ok());
    let encoding = accept.and_then(Encoding::negotiate);
    let response = next.run(request).await;
    match encoding {
        Some(encoding) if !response.headers().contains_key(header::CONTENT_ENCODING) => {
            encode(response, encoding)
        }
        _ => response,
    }
}

fn encode(response: Response, encoding: Encoding) -> Response {
    let (mut head, body) = response.into_parts();
    head.headers.remove(header::CONTENT_LENGTH);
    head.headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static(encoding.name()));
    head.headers.append(header::VARY, HeaderValue::from_static("accept-encoding"));
    Response::from_parts(head, Body::new(Compressed { inner: body, encoder: Some(Encoder::new(encoding)) }))
}

/// An encoder writing into its own buffer, drained after every frame.
enum Encoder {
    Gzip(flate2::write::GzEncoder<Vec<u8>>),
    Brotli(Box<brotli::CompressorWriter<Vec<u8>>>),
    Zstd,
}

/// brotli's quality 5 and 4 MB window, a common setting for dynamic responses.
const BROTLI_QUALITY: u32 = 5;
const BROTLI_WINDOW_BITS: u32 = 22;

impl Encoder {
    fn new(encoding: Encoding) -> Encoder {
        match encoding {
            Encoding::Gzip => {
                Encoder::Gzip(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()))
            }
            Encoding::Brotli => Encoder::Brotli(Box::new(brotli::CompressorWriter::new(
                Vec::new(),
                4096,
                BROTLI_QUALITY,
                BROTLI_WINDOW_BITS,
            ))),
            Encoding::Zstd => Encoder::Zstd,
        }
    }

    /// `data` compressed and flushed: everything the client needs to decode it so far.
    fn frame(&mut self, data: &[u8]) -> std::io::Result<Vec<u8>> {
        match self {
            Encoder::Gzip(gzip) => {
                gzip.write_all(data)?;
                gzip.flush()?;
                Ok(std::mem::take(gzip.get_mut()))
            }
            Encoder::Brotli(brotli) => {
                brotli.write_all(data)?;
                brotli.flush()?;
                Ok(std::mem::take(brotli.get_mut()))
            }
            Encoder::Zstd => {
                Ok(ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest))
            }
        }
    }

    /// The stream's end (gzip's trailer, brotli's last block).
    fn finish(self) -> std::io::Result<Vec<u8>> {
        match self {
            Encoder::Gzip(gzip) => gzip.finish(),
            Encoder::Brotli(brotli) => Ok(brotli.into_inner()),
            Encoder::Zstd => Ok(Vec::new()),
        }
    }
}

/// A body compressed frame by frame.
struct Compressed {
    inner: Body,
    /// Taken when the inner body ends.
    encoder: Option<Encoder>,
}

impl http_body::Body for Compressed {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        loop {
            let Some(encoder) = this.encoder.as_mut() else { return Poll::Ready(None) };
            let polled = std::task::ready!(Pin::new(&mut this.inner).poll_frame(cx));
            let encoded = match polled {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) if data.is_empty() => continue,
                    Ok(data) => encoder.frame(&data),
                    Err(trailers) => return Poll::Ready(Some(Ok(trailers))),
                },
                Some(Err(err)) => return Poll::Ready(Some(Err(err))),
                None => this.encoder.take().map_or(Ok(Vec::new()), Encoder::finish),
            };
            match encoded {
                Ok(bytes) if bytes.is_empty() => continue,
                Ok(bytes) => return Poll::Ready(Some(Ok(Frame::data(Bytes::from(bytes))))),
                Err(err) => return Poll::Ready(Some(Err(axum::Error::new(err)))),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edge::encoding::Encodings;

    #[test]
    fn the_highest_quality_wins_then_the_first_listed() {
        assert_eq!(Encoding::negotiate("gzip, deflate, br, zstd"), Some(Encoding::Gzip));
        assert_eq!(Encoding::negotiate("deflate, br;q=0.9, zstd"), Some(Encoding::Zstd));
        assert_eq!(Encoding::negotiate("gzip;q=0, identity"), None);
        assert_eq!(Encoding::negotiate("BR"), Some(Encoding::Brotli));
        assert_eq!(Encoding::negotiate("deflate"), None);
    }

    #[test]
    fn every_frame_decodes_on_its_own_and_the_whole_decodes_to_the_body() {
        let events =
            ["event: message_start\ndata: {}\n\n", "event: ping\ndata: {}\n\n", "event: message_stop\n\n"];
        for encoding in [Encoding::Gzip, Encoding::Brotli, Encoding::Zstd] {
            let decoder = Encodings::parse(Some(encoding.name()));
            let mut encoder = Encoder::new(encoding);
            let mut sent = Vec::new();
            let mut plain = String::new();
            for event in events {
                sent.extend(encoder.frame(event.as_bytes()).unwrap());
                plain.push_str(event);
                // What the client holds so far decodes to every event sent so far: nothing waits
                // in the encoder.
                assert_eq!(decoder.decode(&sent).unwrap(), plain.as_bytes(), "{encoding:?}");
            }
            sent.extend(encoder.finish().unwrap());
            assert_eq!(decoder.decode(&sent).unwrap(), plain.as_bytes(), "{encoding:?}");
        }
    }
}
