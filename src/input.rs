//! How much of a file any command reads: `--max-input-bytes`, one cap for every file input.
//! A document (a scenario, a sweep, a script, a price table, a request) is refused past it; a
//! stream of lines (a trace, a transcript) is read line by line and refused at the first line
//! past it. Without a cap, `/dev/zero` or a file with no newline grows the process by a
//! gigabyte a second.

use std::io::{BufRead, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context as _;

/// The cap's default: 64 MiB, twice the API's 32 MB request limit, so any request the API
/// accepts fits on one line.
pub const DEFAULT_MAX_INPUT_BYTES: u64 = 64 << 20;

/// The cap this run reads under (set once from the flag, before any command runs).
static MAX_INPUT_BYTES: AtomicU64 = AtomicU64::new(DEFAULT_MAX_INPUT_BYTES);

/// Sets the cap from `--max-input-bytes`.
pub fn set_max_input_bytes(cap: u64) {
    MAX_INPUT_BYTES.store(cap, Ordering::Relaxed);
}

/// The cap in force.
pub fn max_input_bytes() -> u64 {
    MAX_INPUT_BYTES.load(Ordering::Relaxed)
}

/// The error for input past the cap, naming what was read and the flag that raises it.
fn past_the_cap(what: &str, cap: u64) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("{what} is longer than the input cap of {cap} bytes (raise it with --max-input-bytes)"),
    )
}

/// A whole document, refused past the cap.
pub fn read_document(input: impl Read, name: &Path) -> anyhow::Result<Vec<u8>> {
    let cap = max_input_bytes();
    let mut bytes = Vec::new();
    input
        .take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .with_context(|| format!("reading {}", name.display()))?;
    if bytes.len() as u64 > cap {
        return Err(past_the_cap(&name.display().to_string(), cap).into());
    }
    Ok(bytes)
}

/// A document as text (it must be UTF-8), refused past the cap.
pub fn read_document_text(input: impl Read, name: &Path) -> anyhow::Result<String> {
    let bytes = read_document(input, name)?;
    String::from_utf8(bytes).with_context(|| format!("reading {}: not UTF-8", name.display()))
}

/// A reader of lines that fails at the first line longer than the cap, naming it (1-based).
pub struct CappedLines<R> {
    inner: R,
    cap: u64,
    /// Bytes of the current line read so far.
    line_bytes: u64,
    /// Lines finished so far.
    lines: u64,
    /// The first line found longer than the cap (1-based): reading fails from then on.
    too_long: Option<u64>,
}

impl<R: BufRead> CappedLines<R> {
    /// `inner`, its lines capped at the cap in force.
    pub fn new(inner: R) -> CappedLines<R> {
        CappedLines::with_cap(inner, max_input_bytes())
    }

    fn with_cap(inner: R, cap: u64) -> CappedLines<R> {
        CappedLines { inner, cap, line_bytes: 0, lines: 0, too_long: None }
    }
}

impl<R: BufRead> Read for CappedLines<R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(out.len());
        out[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for CappedLines<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        if let Some(line) = self.too_long {
            return Err(past_the_cap(&format!("line {line}"), self.cap));
        }
        self.inner.fill_buf()
    }

    fn consume(&mut self, amount: usize) {
        // The bytes consumed are the front of the buffer the last `fill_buf` returned: asking
        // for it again does no I/O.
        if let Ok(buffer) = self.inner.fill_buf() {
            let consumed = &buffer[..amount.min(buffer.len())];
            // At most one buffer of a line past the cap is handed on before reading fails.
            for segment in consumed.split_inclusive(|&byte| byte == b'\n') {
                let ends_line = segment.ends_with(b"\n");
                let length = self.line_bytes + (segment.len() - usize::from(ends_line)) as u64;
                if length > self.cap && self.too_long.is_none() {
                    self.too_long = Some(self.lines + 1);
                }
                (self.lines, self.line_bytes) =
                    if ends_line { (self.lines + 1, 0) } else { (self.lines, length) };
            }
        }
        self.inner.consume(amount);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_within_the_cap_pass_whole() {
        let text = b"abcd\nefgh\nij";
        let mut out = Vec::new();
        CappedLines::with_cap(&text[..], 4).read_to_end(&mut out).expect("every line has 4 bytes or fewer");
        assert_eq!(out, text);
    }

    #[test]
    fn the_first_line_past_the_cap_is_named() {
        // Line 2 has 6 bytes, past a cap of 5.
        let text = b"abc\nefghij\nk";
        let mut out = Vec::new();
        let err = CappedLines::with_cap(&text[..], 5).read_to_end(&mut out).expect_err("line 2 is too long");
        assert_eq!(
            err.to_string(),
            "line 2 is longer than the input cap of 5 bytes (raise it with --max-input-bytes)"
        );
    }

    #[test]
    fn a_document_past_the_cap_is_refused_naming_the_file() {
        set_max_input_bytes(DEFAULT_MAX_INPUT_BYTES);
        let endless = std::io::repeat(0).take(DEFAULT_MAX_INPUT_BYTES + 10);
        let err = read_document(endless, Path::new("big.json")).expect_err("past the cap");
        assert_eq!(
            err.to_string(),
            "big.json is longer than the input cap of 67108864 bytes (raise it with --max-input-bytes)"
        );
    }
}
