//! What an image costs. The API bills an image by its pixels, not its bytes: about
//! `width × height / 750` tokens, after scaling an image down (aspect ratio kept) until its long
//! edge is at most 1,568 px and it costs at most about 1,600 tokens (Anthropic's vision
//! documentation). Counting the base64 by bytes instead overstates a 30 KB screenshot twentyfold:
//! a real Claude Code request that added a 1,269 × 299 px PNG was billed 874 tokens of new input
//! in all, where bytes/4 of its data alone is 9,873.
//!
//! The size is read from the image's own header (PNG, JPEG, GIF, WebP); an image whose header
//! cannot be read is counted by its bytes, as any other block is.

use base64::Engine as _;

/// The longest edge the API keeps (px).
const MAX_EDGE: f64 = 1_568.0;
/// The most an image costs after scaling (tokens).
const MAX_TOKENS: f64 = 1_600.0;
/// Pixels per token.
const PIXELS_PER_TOKEN: f64 = 750.0;
/// Enough of the data for a PNG's, GIF's or WebP's size (base64 characters, a multiple of 4).
const SHORT_HEADER_CHARS: usize = 64;
/// Enough to reach a JPEG's frame header behind its metadata segments (EXIF, ICC profiles).
const JPEG_HEADER_CHARS: usize = 96 * 1024;

/// An image's format, as its header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageFormat {
    /// `image/png`.
    Png,
    /// `image/jpeg`.
    Jpeg,
    /// `image/gif`.
    Gif,
    /// `image/webp`.
    Webp,
}

/// An image's format and size in pixels, read from its header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageSize {
    /// What the header says the image is.
    pub format: ImageFormat,
    /// Width in pixels, as stored (before the API scales it).
    pub width: u32,
    /// Height in pixels, as stored.
    pub height: u32,
}

impl ImageSize {
    /// The tokens the API bills for this image.
    pub fn tokens(self) -> u64 {
        let (width, height) = (f64::from(self.width), f64::from(self.height));
        let edge_scale = (MAX_EDGE / width.max(height)).min(1.0);
        let pixels = width * height * edge_scale * edge_scale;
        (pixels / PIXELS_PER_TOKEN).min(MAX_TOKENS).ceil() as u64
    }
}

/// The size of the image `data` (standard base64) holds, if its header can be read.
pub fn image_size(data: &str) -> Option<ImageSize> {
    let head = decoded_head(data, SHORT_HEADER_CHARS)?;
    if head.starts_with(&[0xff, 0xd8]) {
        return jpeg(&decoded_head(data, JPEG_HEADER_CHARS)?);
    }
    png(&head).or_else(|| gif(&head)).or_else(|| webp(&head))
}

/// The bytes the first `chars` characters of `data` encode (all of it when shorter).
fn decoded_head(data: &str, chars: usize) -> Option<Vec<u8>> {
    let head = &data.as_bytes()[..data.len().min(chars)];
    base64::engine::general_purpose::STANDARD.decode(head).ok()
}

fn be16(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from(u16::from_be_bytes(bytes.get(at..at + 2)?.try_into().ok()?)))
}

fn le16(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?)))
}

fn le24(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at + 3)?;
    Some(u32::from(b[0]) | u32::from(b[1]) << 8 | u32::from(b[2]) << 16)
}

fn sized(format: ImageFormat, width: u32, height: u32) -> Option<ImageSize> {
    (width > 0 && height > 0).then_some(ImageSize { format, width, height })
}

/// PNG: the signature, then the IHDR chunk's width and height (big-endian).
fn png(bytes: &[u8]) -> Option<ImageSize> {
    if !bytes.starts_with(b"\x89PNG\r\n\x1a\n") || bytes.get(12..16)? != b"IHDR" {
        return None;
    }
    let word = |at: usize| Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?));
    sized(ImageFormat::Png, word(16)?, word(20)?)
}

/// GIF: the logical screen's width and height (little-endian) after the signature.
fn gif(bytes: &[u8]) -> Option<ImageSize> {
    if !(bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a")) {
        return None;
    }
    sized(ImageFormat::Gif, le16(bytes, 6)?, le16(bytes, 8)?)
}

/// WebP: a RIFF container whose first chunk is VP8X (sizes less one), VP8L (14-bit sizes less
/// one) or VP8 (a key frame's 14-bit sizes).
fn webp(bytes: &[u8]) -> Option<ImageSize> {
    if !bytes.starts_with(b"RIFF") || bytes.get(8..12)? != b"WEBP" {
        return None;
    }
    let (width, height) = match bytes.get(12..16)? {
        b"VP8X" => (le24(bytes, 24)? + 1, le24(bytes, 27)? + 1),
        b"VP8L" => {
            let bits = u32::from_le_bytes(bytes.get(21..25)?.try_into().ok()?);
            ((bits & 0x3fff) + 1, ((bits >> 14) & 0x3fff) + 1)
        }
        b"VP8 " => (le16(bytes, 26)? & 0x3fff, le16(bytes, 28)? & 0x3fff),
        _ => return None,
    };
    sized(ImageFormat::Webp, width, height)
}

/// JPEG: the segments after the start of image, up to the first start-of-frame marker (SOF0 to
/// SOF15 but for DHT, JPG and DAC), whose height and width follow its precision byte.
fn jpeg(bytes: &[u8]) -> Option<ImageSize> {
    if !bytes.starts_with(&[0xff, 0xd8]) {
        return None;
    }
    let mut at = 2;
    loop {
        while *bytes.get(at)? == 0xff && *bytes.get(at + 1)? == 0xff {
            at += 1; // fill bytes
        }
        if *bytes.get(at)? != 0xff {
            return None;
        }
        let marker = *bytes.get(at + 1)?;
        if (0xc0..=0xcf).contains(&marker) && ![0xc4, 0xc8, 0xcc].contains(&marker) {
            return sized(ImageFormat::Jpeg, be16(bytes, at + 7)?, be16(bytes, at + 5)?);
        }
        at += 2 + usize::try_from(be16(bytes, at + 2)?).ok()?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    #[test]
    fn tokens_follow_the_documented_pixel_rule() {
        let size = |width, height| ImageSize { format: ImageFormat::Png, width, height };
        // 1,269 × 299 = 379,431 px / 750 = 505.9 → 506.
        assert_eq!(size(1_269, 299).tokens(), 506);
        // 1,000 × 1,000 = 1,333.3 → 1,334: under both limits.
        assert_eq!(size(1_000, 1_000).tokens(), 1_334);
        // 3,136 × 200: the long edge halves to 1,568 and so does the short one, 1,568 × 100
        // = 156,800 px / 750 = 209.07 → 210.
        assert_eq!(size(3_136, 200).tokens(), 210);
        // 1,500 × 1,500 = 3,000 tokens, capped at 1,600.
        assert_eq!(size(1_500, 1_500).tokens(), 1_600);
    }

    #[test]
    fn every_format_s_header_gives_its_size() {
        let mut png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
        png.extend_from_slice(&1_269u32.to_be_bytes());
        png.extend_from_slice(&299u32.to_be_bytes());
        png.extend_from_slice(&[8, 6, 0, 0, 0]);
        assert_eq!(
            image_size(&encoded(&png)),
            Some(ImageSize { format: ImageFormat::Png, width: 1_269, height: 299 })
        );

        let gif = b"GIF89a\x40\x01\xf0\x00\x00\x00\x00";
        assert_eq!(image_size(&encoded(gif)).map(|s| (s.width, s.height)), Some((320, 240)));

        // VP8X: 24-bit sizes less one, 639 and 479.
        let mut webp = b"RIFF\x00\x00\x00\x00WEBPVP8X\x0a\x00\x00\x00\x00\x00\x00\x00".to_vec();
        webp.extend_from_slice(&[0x7f, 0x02, 0x00, 0xdf, 0x01, 0x00]);
        assert_eq!(image_size(&encoded(&webp)).map(|s| (s.width, s.height)), Some((640, 480)));

        // An APP0 segment of 16 bytes, then SOF2 (progressive): precision 8, height 480, width 640.
        let mut jpeg = vec![0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10];
        jpeg.extend_from_slice(b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00");
        jpeg.extend_from_slice(&[0xff, 0xc2, 0x00, 0x11, 0x08, 0x01, 0xe0, 0x02, 0x80, 0x03]);
        assert_eq!(
            image_size(&encoded(&jpeg)).map(|s| (s.format, s.width, s.height)),
            Some((ImageFormat::Jpeg, 640, 480))
        );

        assert_eq!(image_size("aGk="), None, "\"hi\" is no image");
        assert_eq!(image_size("not base64"), None);
    }
}
