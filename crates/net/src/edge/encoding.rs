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

    /// The body with every encoding undone, outermost first, within the default
    /// [`DecodeLimit`]: nothing for an unknown encoding or a body that decodes past the limit.
    pub fn decode(&self, body: &[u8]) -> Option<Vec<u8>> {
        match self.decode_within(body, &DecodeLimit::default()) {
            Decoded::Whole(bytes) => Some(bytes),
            Decoded::TooLarge { .. } | Decoded::Unknown => None,
        }
    }

    /// The body with every encoding undone, outermost first, within `limit`. A truncated body
    /// (a stream cut off) decodes as far as it goes.
    pub fn decode_within(&self, body: &[u8], limit: &DecodeLimit) -> Decoded {
        let most = limit.for_encoded(body.len());
        let mut bytes = body.to_vec();
        for name in self.0.iter().rev() {
            bytes = match decode_one(name, &bytes, most) {
                Some(Some(decoded)) => decoded,
                Some(None) => return Decoded::TooLarge { limit: most },
                None => return Decoded::Unknown,
            };
        }
        Decoded::Whole(bytes)
    }
}

/// How far a proxy decodes a compressed copy: a response that would decode past this is not read
/// (the client still gets the upstream's bytes as sent). A few hundred kilobytes of gzip can
/// expand to gigabytes; a Messages response compresses about 5 to 20 times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeLimit {
    /// The most bytes any copy decodes to. Default [`DecodeLimit::BYTES`] (64 MiB).
    pub bytes: usize,
    /// The most decoded bytes per encoded byte. Default [`DecodeLimit::RATIO`] (256).
    pub ratio: usize,
}

impl DecodeLimit {
    /// The default cap on decoded bytes: the size the proxy keeps of any response copy.
    pub const BYTES: usize = 64 << 20;
    /// The default ratio: well past what text compresses to, far below a bomb's (gzip of zeros
    /// reaches about 1,000).
    pub const RATIO: usize = 256;
    /// Decoded bytes any copy may reach whatever its ratio, so small bodies (whose headers
    /// weigh on their ratio) are not cut: 1 MiB.
    pub const FLOOR: usize = 1 << 20;

    /// The most bytes a copy of `encoded` bytes may decode to.
    pub fn for_encoded(&self, encoded: usize) -> usize {
        encoded.saturating_mul(self.ratio).max(Self::FLOOR).min(self.bytes)
    }
}

impl Default for DecodeLimit {
    fn default() -> Self {
        DecodeLimit { bytes: Self::BYTES, ratio: Self::RATIO }
    }
}

/// A copy decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decoded {
    /// Every encoding undone.
    Whole(Vec<u8>),
    /// It decodes past `limit` bytes: decoding stopped there.
    TooLarge {
        /// The limit it passed.
        limit: usize,
    },
    /// An encoding this proxy does not know.
    Unknown,
}

/// Undoes one encoding, keeping whatever decoded before an error (a cut-off stream); `None`
/// inside when it decodes past `most` bytes (at most one byte more is ever held), `None` for an
/// unknown encoding.
fn decode_one(name: &str, bytes: &[u8], most: usize) -> Option<Option<Vec<u8>>> {
    let take = most as u64 + 1;
    let mut out = Vec::new();
    let _ = match name {
        "gzip" | "x-gzip" => flate2::read::MultiGzDecoder::new(bytes).take(take).read_to_end(&mut out),
        "deflate" => flate2::read::ZlibDecoder::new(bytes).take(take).read_to_end(&mut out),
        "br" => brotli::Decompressor::new(bytes, 4096).take(take).read_to_end(&mut out),
        "zstd" => return Some(decode_zstd_frames(bytes, most)),
        _ => return None,
    };
    Some((out.len() <= most).then_some(out))
}

/// Every zstd frame in `bytes`, one after another (a stream may hold many: a server that flushes
/// per event ends a frame per event), as far as they decode; `None` past `most` bytes.
fn decode_zstd_frames(mut bytes: &[u8], most: usize) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    while !bytes.is_empty() && out.len() <= most {
        let Ok(frame) = ruzstd::decoding::StreamingDecoder::new(&mut bytes) else { break };
        let room = (most + 1 - out.len()) as u64;
        if frame.take(room).read_to_end(&mut out).is_err() {
            break;
        }
    }
    (out.len() <= most).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_decodes_to_at_most_its_ratio_within_the_floor_and_the_cap() {
        let limit = DecodeLimit::default();
        // 100 bytes × 256 = 25,600, under the 1 MiB floor.
        assert_eq!(limit.for_encoded(100), 1 << 20);
        // 8 KiB × 256 = 2 MiB.
        assert_eq!(limit.for_encoded(8 << 10), 2 << 20);
        // 1 MiB × 256 = 256 MiB, past the 64 MiB cap.
        assert_eq!(limit.for_encoded(1 << 20), 64 << 20);
    }

    #[test]
    fn decoding_stops_one_byte_past_the_limit() {
        use std::io::Write as _;
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(&[b'0'; 3 << 20]).unwrap();
        let encoded = encoder.finish().unwrap();
        let gzip = Encodings::parse(Some("gzip"));
        // 3 MiB decoded: past a 2 MiB cap, within a 3 MiB one (a ratio of 2^20 leaves the cap to act).
        let two = DecodeLimit { bytes: 2 << 20, ratio: 1 << 20 };
        assert_eq!(gzip.decode_within(&encoded, &two), Decoded::TooLarge { limit: 2 << 20 });
        let three = DecodeLimit { bytes: 3 << 20, ratio: 1 << 20 };
        assert!(
            matches!(gzip.decode_within(&encoded, &three), Decoded::Whole(bytes) if bytes.len() == 3 << 20)
        );
    }
}
