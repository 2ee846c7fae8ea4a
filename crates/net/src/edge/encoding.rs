//! Content codings: the one `serve --compress` picks from a request's `accept-encoding`
//! ([`Encoding`]), and the ones a proxy undoes on its copy of a response ([`Encodings`]).

use std::io::Read;

/// An encoding `serve --compress` can produce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// `gzip`.
    Gzip,
    /// `br`.
    Brotli,
    /// `zstd`.
    Zstd,
}

impl Encoding {
    /// The coding's name in `content-encoding`.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Gzip => "gzip",
            Encoding::Brotli => "br",
            Encoding::Zstd => "zstd",
        }
    }

    /// The encoding an `accept-encoding` value prefers: the highest `q` among those this server
    /// produces, the first listed among equals; none when it allows none (or only `identity`).
    pub fn negotiate(accept: &str) -> Option<Encoding> {
        let mut best: Option<(Encoding, u32)> = None;
        for item in accept.split(',') {
            let mut parts = item.split(';');
            let encoding = match parts.next().unwrap_or("").trim().to_ascii_lowercase().as_str() {
                "gzip" | "x-gzip" => Encoding::Gzip,
                "br" => Encoding::Brotli,
                "zstd" => Encoding::Zstd,
                _ => continue,
            };
            let q = parts.find_map(|p| p.trim().strip_prefix("q=").map(quality)).unwrap_or(1_000);
            if q > 0 && best.is_none_or(|(_, best_q)| q > best_q) {
                best = Some((encoding, q));
            }
        }
        best.map(|(encoding, _)| encoding)
    }
}

/// A `q` value in thousandths (`0.8` → 800); unreadable counts as 0 (not acceptable).
fn quality(text: &str) -> u32 {
    text.trim().parse::<f64>().map_or(0, |q| (q.clamp(0.0, 1.0) * 1_000.0).round() as u32)
}

/// How a copy's body was encoded (`content-encoding`, outermost last).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Encodings(Vec<String>);

impl Encodings {
    /// Reads a `content-encoding` header value (`gzip`, `br, gzip`, …).
    pub fn parse(header: Option<&str>) -> Encodings {
        let names = header.unwrap_or("").split(',').map(|name| name.trim().to_ascii_lowercase());
        Encodings(names.filter(|name| !name.is_empty() && name != "identity").collect())
    }

    /// No encoding: the body is as sent.
    pub fn is_identity(&self) -> bool {
        self.0.is_empty()
    }

    /// The header's encodings as written (`identity` for none).
    pub fn name(&self) -> String {
        if self.0.is_empty() { "identity".to_string() } else { self.0.join(", ") }
    }

    /// The body with every encoding undone, outermost first. A truncated body (a stream cut off)
    /// decodes as far as it goes; an unknown encoding yields nothing.
    pub fn decode(&self, body: &[u8]) -> Option<Vec<u8>> {
        let mut bytes = body.to_vec();
        for name in self.0.iter().rev() {
            bytes = decode_one(name, &bytes)?;
        }
        Some(bytes)
    }
}

/// Undoes one encoding, keeping whatever decoded before an error (a cut-off stream).
fn decode_one(name: &str, bytes: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let _ = match name {
        "gzip" | "x-gzip" => flate2::read::MultiGzDecoder::new(bytes).read_to_end(&mut out),
        "deflate" => flate2::read::ZlibDecoder::new(bytes).read_to_end(&mut out),
        "br" => brotli::Decompressor::new(bytes, 4096).read_to_end(&mut out),
        "zstd" => return Some(decode_zstd_frames(bytes)),
        _ => return None,
    };
    Some(out)
}

/// Every zstd frame in `bytes`, one after another (a stream may hold many: a server that flushes
/// per event ends a frame per event), as far as they decode.
fn decode_zstd_frames(mut bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let Ok(mut frame) = ruzstd::decoding::StreamingDecoder::new(&mut bytes) else { break };
        if frame.read_to_end(&mut out).is_err() {
            break;
        }
    }
    out
}
