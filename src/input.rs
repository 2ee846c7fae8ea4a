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
    count: LineCount,
}

/// The lines handed on so far, measured against the cap.
struct LineCount {
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
        CappedLines { inner, count: LineCount { cap, line_bytes: 0, lines: 0, too_long: None } }
    }
}

impl LineCount {
    /// Counts `bytes`, the next ones handed on, and notes the first line past the cap.
    fn add(&mut self, bytes: &[u8]) {
        let mut start = 0;
        for newline in memchr::memchr_iter(b'\n', bytes) {
            self.extend_line((newline - start) as u64);
            self.lines += 1;
            self.line_bytes = 0;
            start = newline + 1;
        }
        self.extend_line((bytes.len() - start) as u64);
    }

    fn extend_line(&mut self, length: u64) {
        self.line_bytes += length;
        if self.line_bytes > self.cap && self.too_long.is_none() {
            self.too_long = Some(self.lines + 1);
        }
    }

    fn check(&self) -> std::io::Result<()> {
        match self.too_long {
            Some(line) => Err(past_the_cap(&format!("line {line}"), self.cap)),
            None => Ok(()),
        }
    }
}

impl<R: BufRead> Read for CappedLines<R> {
    /// Reads straight into `out` (a large read bypasses the inner reader's buffer, so a trace's
    /// 256 KiB batches are not copied through its 8 KiB), then counts what was read. At most
    /// one read of a line past the cap is handed on before reading fails.
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        self.count.check()?;
        let n = self.inner.read(out)?;
        self.count.add(&out[..n]);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for CappedLines<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.count.check()?;
        self.inner.fill_buf()
    }

    fn consume(&mut self, amount: usize) {
        // The bytes consumed are the front of the buffer the last `fill_buf` returned: asking
        // for it again does no I/O. At most one buffer of a line past the cap is handed on
        // before reading fails.
        if let Ok(buffer) = self.inner.fill_buf() {
            self.count.add(&buffer[..amount.min(buffer.len())]);
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
