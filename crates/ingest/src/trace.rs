//! JSONL traces: what `serve` logs, what `proxy` records and what `replay` reads.
//!
//! A line is either a raw request body, an envelope
//! `{"at_ms": u64, "workspace": "…"?, "betas": ["…"]?, "first_byte_ms": u64?, "request_id": "…"?,
//! "usage": {…}?, "diagnostics": {…}?, "error": {…}?, "incomplete": true?, "body": {…} | "…"}`, or a session
//! marker `{"forkcache_session": {"started", "version", "settings"}}`. A line is an envelope
//! exactly when it has a `body` member. An envelope with an `error` records a request turned away
//! before it was priced (a scripted error, a missing key, a body over the size limit, an
//! upstream's error): it replays as that error, whatever its body. `usage` is the response's usage
//! as returned — the *recorded* usage replay scores its prediction against — and `diagnostics`
//! the API's cache diagnostics. `betas` are the betas the request named in its `anthropic-beta`
//! headers (absent when none: traces without it read as before). Lines are read in one pass: a raw body (or an object `body`) is
//! parsed straight into a [`RequestView`] borrowing the line.
//!
//! A trace never holds an API key: `workspace` is the key's workspace (for `proxy`, the API's
//! workspace id when the response names one), which for a key without a configured workspace is
//! its [`key_fingerprint`]. Old traces' `api_key` is still read.
//!
//! Each `serve` or `proxy` run starts with a session marker, so a file appended to by several runs
//! (whose `at_ms` each restart from 0) replays as several timelines, each on an empty cache. A line
//! that is not a request at all (not UTF-8, not JSON, not an object, a broken envelope: typically
//! the torn last line of a crashed run) is [`TraceEntry::Unreadable`], and the lines after it are
//! still read.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

mod resume;

pub use resume::{
    BODY_BUDGET_BYTES, BodyBudget, BodyReader, LineReader, SKETCH_BUDGET_BYTES, WalkValues, skip_member,
};

use forkcache_engine::billing::{RecordedUsage, Usage};
use forkcache_engine::prompt::BlockKeys;
use forkcache_wire::check::{CheckMemo, check_request_remembering};
use forkcache_wire::{ApiError, Betas, MapValues, MemberValues, RequestView, describe_parse_error};

/// The request a trace line carries.
#[derive(Debug)]
pub enum TraceBody<'a> {
    /// Parsed in place (boxed: a view is large and most lines carry one).
    Parsed(Box<RequestView<'a>>),
    /// A string `body`: the bytes as sent, to be parsed (they may not even be JSON).
    Text(Cow<'a, str>),
    /// The body could not be read; the endpoint would have answered this error.
    Rejected(ApiError),
}

/// One line of a trace.
#[derive(Debug)]
pub struct TraceLine<'a> {
    /// 1-based line number in the file.
    pub line: usize,
    /// When the request started, if the line says.
    pub at_ms: Option<u64>,
    /// The API key, if an old line says (traces written now carry `workspace` instead).
    pub api_key: Option<Cow<'a, str>>,
    /// The workspace the request ran in (an id or a key fingerprint), if the line says.
    pub workspace: Option<Cow<'a, str>>,
    /// The betas the request named (none when the line does not say).
    pub betas: Betas,
    /// When its response began, if the line says.
    pub first_byte_ms: Option<u64>,
    /// Output tokens of the response that was returned, if logged.
    pub output_tokens: Option<u64>,
    /// The usage the response carried (`usage`, as the API returned it), if logged.
    pub recorded: Option<RecordedUsage>,
    /// The response's `diagnostics.cache_miss_reason.type`, if logged.
    pub recorded_miss_reason: Option<String>,
    /// Traffic the trace stands in for, not one of its requests (`"prewarm": true`): replayed
    /// into the cache, never listed or billed. An import writes one where the account kept a
    /// prefix warm from outside the session.
    pub prewarm: bool,
    /// The request.
    pub body: TraceBody<'a>,
}

/// An envelope's `error`: the API error a request was turned away with before it was priced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoggedError {
    /// The HTTP status sent.
    pub status: u16,
    /// The `error.type` sent.
    #[serde(rename = "type")]
    pub kind: String,
    /// The `error.message` sent.
    pub message: String,
}

impl LoggedError {
    /// The record of `error` as sent.
    pub fn of(error: &ApiError) -> LoggedError {
        LoggedError {
            status: error.status,
            kind: error.kind.type_name().to_string(),
            message: error.message.clone(),
        }
    }

    /// The error to replay.
    pub fn to_api_error(&self) -> ApiError {
        ApiError::with_status(self.status, self.message.clone())
    }
}

/// A line that is not a request at all: not UTF-8, not JSON, not an object, or a broken envelope.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct UnreadableLine {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// One non-blank line of a trace.
#[derive(Debug)]
pub enum TraceEntry<'a> {
    /// A request (which the API may have rejected: that is a result, not an unreadable line).
    Request(TraceLine<'a>),
    /// A server run began here: a new timeline on an empty cache.
    Session {
        /// 1-based line number.
        line: usize,
        /// What the marker says.
        marker: SessionMarker,
    },
    /// Not a request at all.
    Unreadable(UnreadableLine),
}

/// The line that opens a session of a trace: each `serve` and `proxy` start, and each session of an
/// import's emitted trace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionMarker {
    /// When the server started (RFC 3339, UTC).
    #[serde(default)]
    pub started: String,
    /// The forkcache version that wrote the trace.
    #[serde(default)]
    pub version: String,
    /// The trace format's revision ([`TRACE_FORMAT`] when written; 0 for traces older than the
    /// field, which read the same way).
    #[serde(default)]
    pub format: u32,
    /// The settings the run priced with.
    #[serde(default)]
    pub settings: serde_json::Value,
}

/// What a scrubbed secret is replaced with.
pub const SCRUBBED: &str = "[scrubbed]";

/// `text` with every secret it may hold replaced by [`SCRUBBED`]: the request's own `key` (an
/// upstream may echo it in an error) and anything shaped like an Anthropic key (`sk-ant-`
/// followed by key characters). Error messages pass through here before they are written to a
/// trace or a log: no key is ever written.
pub fn scrub_secrets<'t>(text: &'t str, key: Option<&str>) -> Cow<'t, str> {
    let key = key.filter(|key| key.len() >= 8 && text.contains(*key));
    if key.is_none() && !text.contains("sk-ant-") {
        return Cow::Borrowed(text);
    }
    let text = key.map_or_else(|| text.to_string(), |key| text.replace(key, SCRUBBED));
    let mut scrubbed = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(start) = rest.find("sk-ant-") {
        scrubbed.push_str(&rest[..start]);
        scrubbed.push_str(SCRUBBED);
        let tail = &rest[start + "sk-ant-".len()..];
        let end =
            tail.find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_')).unwrap_or(tail.len());
        rest = &tail[end..];
    }
    scrubbed.push_str(rest);
    Cow::Owned(scrubbed)
}

/// The trace format this version writes. Revision 2: a refused body that is not strict JSON (a
/// number out of range, a lone surrogate) is logged as a string of its bytes, and a redacted
/// body (`proxy --redact`) has every written string rewritten character for character, base64
/// kept valid, where revision 1 replaced texts with hashes declaring their sizes
/// (`forkcache_tokens`). Revision 3 adds `"prewarm": true`, traffic a trace stands in for
/// (replayed into the cache, neither listed nor billed; a reader of revision 2 would bill it).
/// Older revisions read unchanged.
pub const TRACE_FORMAT: u32 = 3;

/// The session marker line (no trailing newline): `{"forkcache_session": {…}}`.
pub fn session_line(marker: &SessionMarker) -> String {
    serde_json::json!({ "forkcache_session": marker }).to_string()
}

/// A trace file being appended to, one line per request, flushed per line so a crash loses at
/// most the line being written. Opening it starts a session: if the file ends in a torn line (no
/// final newline) a newline is written first, so lines are never glued, then the session marker.
pub struct TraceWriter {
    out: std::io::BufWriter<std::fs::File>,
}

impl TraceWriter {
    /// Opens (or creates, readable by its owner only: it holds prompts) `path` for appending and
    /// writes `marker`'s line.
    pub fn open(path: &std::path::Path, marker: &SessionMarker) -> std::io::Result<TraceWriter> {
        let mut options = std::fs::OpenOptions::new();
        options.create(true).read(true).append(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(path)?;
        let torn = ends_without_newline(&mut file)?;
        let mut writer = TraceWriter { out: std::io::BufWriter::new(file) };
        if torn {
            std::io::Write::write_all(&mut writer.out, b"\n")?;
        }
        writer.append(&session_line(marker))?;
        Ok(writer)
    }

    /// Appends one line and flushes it.
    pub fn append(&mut self, line: &str) -> std::io::Result<()> {
        use std::io::Write as _;
        self.out.write_all(line.as_bytes())?;
        self.out.write_all(b"\n")?;
        self.out.flush()
    }
}

/// Whether a non-empty file's last byte is not a newline.
fn ends_without_newline(file: &mut std::fs::File) -> std::io::Result<bool> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    if file.metadata()?.len() == 0 {
        return Ok(false);
    }
    file.seek(SeekFrom::End(-1))?;
    let mut last = [0u8; 1];
    file.read_exact(&mut last)?;
    Ok(last[0] != b'\n')
}

/// The fingerprint a trace carries in place of an API key (the endpoint names workspaces by it).
pub use forkcache_engine::endpoint::key_fingerprint;

/// Reads one non-blank line (already known to be UTF-8).
pub fn read_line(line: usize, text: &str) -> TraceEntry<'_> {
    let read = match serde_json::from_str::<LineParts>(text) {
        Ok(parts) => parts.into_entry(line),
        Err(_) => explain_line(line, text),
    };
    read.unwrap_or_else(TraceEntry::Unreadable)
}

/// Every non-blank line of a trace, in file order. The trace is read as bytes: a line that is not
/// UTF-8 (such as one torn inside a character) is unreadable on its own.
pub fn read_trace(bytes: &[u8]) -> impl Iterator<Item = TraceEntry<'_>> {
    read_lines(bytes, 1).map(|(entry, _)| entry)
}

/// Every non-blank line of `bytes`, whose first line is line `first_line` of its file, with the
/// line's length in bytes.
fn read_lines(bytes: &[u8], first_line: usize) -> impl Iterator<Item = (TraceEntry<'_>, usize)> {
    read_lines_with(bytes, first_line, read_line, TraceEntry::Unreadable)
}

/// [`read_lines`], each UTF-8 line read by `read` (given its number and text), each other line
/// by `unreadable`.
fn read_lines_with<'a, T>(
    bytes: &'a [u8],
    first_line: usize,
    mut read: impl FnMut(usize, &'a str) -> T,
    unreadable: impl Fn(UnreadableLine) -> T,
) -> impl Iterator<Item = (T, usize)> {
    lines_of(bytes)
        .enumerate()
        .map(move |(index, line)| (first_line + index, line.strip_suffix(b"\r").unwrap_or(line)))
        .filter(|(_, line)| !line.trim_ascii().is_empty())
        .map(move |(number, line)| {
            let entry = match std::str::from_utf8(line) {
                Ok(text) => read(number, text),
                Err(err) => unreadable(UnreadableLine {
                    line: number,
                    message: format!("not UTF-8 (byte {})", err.valid_up_to() + 1),
                }),
            };
            (entry, line.len())
        })
}

/// `bytes` cut at every newline, as `split` cuts them (a final empty piece after a last newline),
/// found with `memchr`: a byte-by-byte split cost a replay's workers a third of the JSON parse.
fn lines_of(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut start = 0;
    memchr::memchr_iter(b'\n', bytes).chain(std::iter::once(bytes.len())).map(move |end| {
        let line = bytes.get(start..end).unwrap_or_default();
        start = end + 1;
        line
    })
}

/// Whole lines of a trace, read together so that a worker thread can parse them while the lines
/// before them are replayed. Its buffer goes back to its reader's pool once the batch and every
/// reader still comparing later lines with it ([`LineReader`]) are done with it.
#[derive(Debug)]
pub struct LineBatch {
    /// Batch number, from 0, in file order.
    pub number: u64,
    /// 1-based number of the batch's first line in the file.
    pub first_line: usize,
    bytes: Arc<PooledBytes>,
}

impl LineBatch {
    /// The lines, each with its newline (the file's last line may have none).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes.bytes
    }
}

/// A batch's buffer, given back to its pool when the last holder drops it.
#[derive(Debug)]
struct PooledBytes {
    bytes: Vec<u8>,
    pool: Arc<BufferPool>,
}

impl Drop for PooledBytes {
    fn drop(&mut self) {
        self.pool.give_back(std::mem::take(&mut self.bytes));
    }
}

/// Buffers of batches already replayed, for the reader to fill again. Batches are a few hundred
/// KB, which the allocator maps fresh from the kernel each time (every page faulted in and zeroed,
/// then unmapped): reusing a handful cut the CPU cost of reading a trace by more than half.
#[derive(Debug)]
struct BufferPool {
    spare: std::sync::Mutex<Vec<Vec<u8>>>,
    /// A buffer grown past this (by a long line) is freed rather than kept.
    max_capacity: usize,
}

/// Spare buffers kept at most: more than a replay's reader needs between two batches consumed.
const SPARE_BUFFERS: usize = 4;

/// A buffer that one long line grew past this many times the batch size is not kept.
const SPARE_CAPACITY_FACTOR: usize = 8;

impl BufferPool {
    fn take(&self) -> Option<Vec<u8>> {
        self.spare.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop()
    }

    fn give_back(&self, mut bytes: Vec<u8>) {
        if bytes.capacity() > self.max_capacity {
            return;
        }
        bytes.clear();
        let mut spare = self.spare.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if spare.len() < SPARE_BUFFERS {
            spare.push(bytes);
        }
    }
}

/// Reads a trace as [`LineBatch`]es of whole lines of about `target_bytes` each (a longer line is
/// a batch of its own): only the batches in flight are ever in memory, never the whole file.
///
/// A batch is read straight into its buffer (a read that large bypasses the reader's own
/// buffer), then cut after its last newline; the bytes past it start the next batch.
pub struct BatchReader<R> {
    reader: R,
    target_bytes: usize,
    next_line: usize,
    next_batch: u64,
    pool: std::sync::Arc<BufferPool>,
    /// What the last read brought past the previous batch's last whole line.
    carry: Vec<u8>,
}

/// Bytes read at a time, once a batch holds its size, while looking for the end of its last line:
/// at most this much is carried over to the next batch.
const LINE_END_READ: usize = 64 << 10;

impl<R: std::io::BufRead> BatchReader<R> {
    /// Batches of about `target_bytes` (at least one line each).
    pub fn new(reader: R, target_bytes: usize) -> BatchReader<R> {
        let pool = BufferPool {
            spare: std::sync::Mutex::new(Vec::new()),
            max_capacity: target_bytes.saturating_mul(SPARE_CAPACITY_FACTOR),
        };
        let pool = std::sync::Arc::new(pool);
        BatchReader { reader, target_bytes, next_line: 1, next_batch: 0, pool, carry: Vec::new() }
    }

    /// The next batch; `None` at the end of the file.
    pub fn next_batch(&mut self) -> std::io::Result<Option<LineBatch>> {
        let mut bytes = self.pool.take().unwrap_or_else(|| Vec::with_capacity(self.target_bytes));
        bytes.append(&mut self.carry);
        let whole = self.fill(&mut bytes)?;
        if bytes.is_empty() {
            return Ok(None);
        }
        self.carry.extend_from_slice(bytes.get(whole..).unwrap_or_default());
        bytes.truncate(whole);
        // Only the file's last line can lack its newline.
        let lines = memchr::memchr_iter(b'\n', &bytes).count() + usize::from(!bytes.ends_with(b"\n"));
        let batch = LineBatch {
            number: self.next_batch,
            first_line: self.next_line,
            bytes: Arc::new(PooledBytes { bytes, pool: Arc::clone(&self.pool) }),
        };
        self.next_line += lines;
        self.next_batch += 1;
        Ok(Some(batch))
    }

    /// Reads into `bytes` until they hold a batch's size and a newline, or the file ends; the
    /// length of their whole lines (all of them at the end of the file).
    fn fill(&mut self, bytes: &mut Vec<u8>) -> std::io::Result<usize> {
        let mut scanned = 0;
        loop {
            let want = match self.target_bytes.checked_sub(bytes.len()) {
                Some(short) if short > 0 => short,
                _ => LINE_END_READ,
            };
            let read = read_more(&mut self.reader, bytes, want)?;
            if read == 0 {
                return Ok(bytes.len());
            }
            if bytes.len() >= self.target_bytes {
                if let Some(last) = memchr::memrchr(b'\n', bytes.get(scanned..).unwrap_or_default()) {
                    return Ok(scanned + last + 1);
                }
                scanned = bytes.len();
            }
        }
    }
}

/// Appends up to `want` bytes to `bytes`, fewer only at the end of the input; how many.
/// `Read::take(..).read_to_end` would zero the buffer's whole spare capacity on every call, which
/// for a buffer grown by a long line is megabytes per batch: this zeroes only the `want` bytes.
fn read_more(reader: &mut impl std::io::Read, bytes: &mut Vec<u8>, want: usize) -> std::io::Result<usize> {
    let start = bytes.len();
    bytes.resize(start + want, 0);
    let mut filled = 0;
    while filled < want {
        match reader.read(&mut bytes[start + filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => {
                bytes.truncate(start + filled);
                return Err(error);
            }
        }
    }
    bytes.truncate(start + filled);
    Ok(filled)
}

/// A batch's non-blank lines, in file order.
pub type BatchEntries<'a> = Vec<BatchLine<'a>>;

/// One non-blank line of a batch, as a worker read it.
#[derive(Debug)]
pub struct BatchLine<'a> {
    /// The line.
    pub entry: TraceEntry<'a>,
    /// Its length in bytes.
    pub bytes: usize,
    /// The memo keys of its request's blocks, hashed by the worker, when the body was parsed in
    /// place.
    pub keys: Option<BlockKeys>,
    /// Its request's body checked against the API's rules, by the worker (the same answer the
    /// endpoint would give, without taking the replay's own thread); none when the replay does not
    /// check them (`lenient`).
    pub checked: Option<Result<(), ApiError>>,
}

impl<'a> BatchLine<'a> {
    /// A line read, its blocks hashed (unless their keys are given) and, given a `memo`, its
    /// body's rules checked (not reading again the blocks the memo knows passed).
    fn keyed(
        entry: TraceEntry<'a>,
        bytes: usize,
        keys: Option<BlockKeys>,
        memo: Option<&CheckMemo>,
    ) -> BatchLine<'a> {
        let (keys, checked) = match &entry {
            TraceEntry::Request(TraceLine { body: TraceBody::Parsed(view), betas, .. }) => {
                let keys = keys.unwrap_or_else(|| BlockKeys::of(view));
                let checked =
                    memo.map(|memo| check_request_remembering(view, betas, keys.check_keys(view), memo));
                (Some(keys), checked)
            }
            _ => (None, None),
        };
        BatchLine { entry, bytes, keys, checked }
    }
}

self_cell::self_cell!(
    /// A [`LineBatch`] and its lines read in place: the entries borrow the batch's bytes, so the
    /// two travel together from the thread that parsed them to the one that replays them.
    pub struct ParsedBatch {
        owner: LineBatch,

        #[covariant]
        dependent: BatchEntries,
    }

    impl {Debug}
);

impl ParsedBatch {
    /// Reads every line of `batch` and hashes its requests' blocks (the work a worker thread
    /// does).
    pub fn parse(batch: LineBatch) -> ParsedBatch {
        ParsedBatch::new(batch, |batch| {
            let memo = CheckMemo::default();
            read_lines(batch.bytes(), batch.first_line)
                .map(|(entry, bytes)| BatchLine::keyed(entry, bytes, None, Some(&memo)))
                .collect()
        })
    }

    /// The batch's number.
    pub fn number(&self) -> u64 {
        self.borrow_owner().number
    }

    /// The batch's entries, in file order.
    pub fn entries(&self) -> &BatchEntries<'_> {
        self.borrow_dependent()
    }
}

/// Envelope fields and request fields of a line, gathered in one pass.
#[derive(Default)]
struct LineParts<'a> {
    at_ms: Option<u64>,
    api_key: Option<Cow<'a, str>>,
    workspace: Option<Cow<'a, str>>,
    betas: Betas,
    session: Option<SessionMarker>,
    first_byte_ms: Option<u64>,
    output_tokens: Option<u64>,
    recorded: Option<RecordedUsage>,
    recorded_miss_reason: Option<String>,
    prewarm: bool,
    body: Option<TraceBody<'a>>,
    error: Option<LoggedError>,
    request: RequestView<'a>,
    request_fields: bool,
}

impl<'a> LineParts<'a> {
    fn into_entry(self, line: usize) -> Result<TraceEntry<'a>, UnreadableLine> {
        if let Some(marker) = self.session {
            return Ok(TraceEntry::Session { line, marker });
        }
        let body = match (self.body, self.request_fields) {
            (Some(_), true) => {
                return Err(UnreadableLine {
                    line,
                    message: "an envelope carries its request in \"body\", but request fields (model, messages, …) were also found at the top level".into(),
                });
            }
            (Some(body), false) => match self.error {
                Some(error) => TraceBody::Rejected(error.to_api_error()),
                None => body,
            },
            (None, _) => TraceBody::Parsed(Box::new(self.request)),
        };
        Ok(TraceEntry::Request(TraceLine {
            line,
            at_ms: self.at_ms,
            api_key: self.api_key,
            workspace: self.workspace,
            betas: self.betas,
            first_byte_ms: self.first_byte_ms,
            output_tokens: self.output_tokens,
            recorded: self.recorded,
            recorded_miss_reason: self.recorded_miss_reason,
            prewarm: self.prewarm,
            body,
        }))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for LineParts<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(LineVisitor)
    }
}

struct LineVisitor;

impl<'de> Visitor<'de> for LineVisitor {
    type Value = LineParts<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object: a request body or an envelope")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut parts = LineParts::default();
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            parts.read_member(&key, &mut MapValues(&mut map))?;
        }
        Ok(parts)
    }
}

impl<'a> LineParts<'a> {
    /// Reads one member of a line: an envelope field, or a request field of a raw body.
    fn read_member<'de: 'a, V: MemberValues<'de>>(
        &mut self,
        key: &str,
        values: &mut V,
    ) -> Result<(), V::Error> {
        match key {
            "at_ms" => self.at_ms = values.next_value()?,
            "api_key" => self.api_key = values.next_value()?,
            "workspace" => self.workspace = values.next_value()?,
            "betas" => {
                let names = values.next_value::<Option<Vec<String>>>()?.unwrap_or_default();
                self.betas = Betas::from_names(names.iter().map(String::as_str));
            }
            "forkcache_session" => self.session = Some(values.next_value()?),
            "first_byte_ms" => self.first_byte_ms = values.next_value()?,
            "usage" => {
                let raw = values.next_value::<Option<&'de RawValue>>()?;
                self.recorded = bounded_recorded(raw.map(RawValue::get))?;
                self.output_tokens = self.recorded.as_ref().map(|recorded| recorded.usage.output_tokens);
            }
            "diagnostics" => {
                let diagnostics = values.next_value::<Option<LoggedDiagnostics>>()?;
                self.recorded_miss_reason = diagnostics.and_then(|d| d.cache_miss_reason).map(|r| r.kind);
            }
            "body" => self.body = Some(values.next_value::<BodyField>()?.0),
            "error" => self.error = values.next_value()?,
            "prewarm" => self.prewarm = values.next_value::<Option<bool>>()?.unwrap_or(false),
            other => {
                if self.request.read_member(other, values)? {
                    self.request_fields = true;
                } else {
                    values.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// The part of a logged `diagnostics` replay compares (the cache-diagnostics beta).
#[derive(Deserialize)]
struct LoggedDiagnostics {
    #[serde(default)]
    cache_miss_reason: Option<LoggedMissReason>,
}

#[derive(Deserialize)]
struct LoggedMissReason {
    #[serde(rename = "type")]
    kind: String,
}

/// A logged `usage` read as the recorded usage, with every count at most
/// [`forkcache_engine::prompt::MAX_DECLARED_TOKENS`] (so no sum over a trace can wrap). `None` for a usage
/// that is not an object of counts.
fn bounded_recorded<E: de::Error>(raw: Option<&str>) -> Result<Option<RecordedUsage>, E> {
    let Some(value) = raw.and_then(|raw| serde_json::from_str::<serde_json::Value>(raw).ok()) else {
        return Ok(None);
    };
    // Sizes first: a usage past the caps is an unreadable line, named, not a usage left out.
    RecordedUsage::check_sizes(&value).map_err(E::custom)?;
    // Every count is at most the input sum or the output the check bounds.
    Ok(forkcache_engine::agreement::recorded_of(value))
}

/// `body`: an object parsed in place, or a string holding the bytes as sent.
struct BodyField<'a>(TraceBody<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for BodyField<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct BodyVisitor;
        impl<'de> Visitor<'de> for BodyVisitor {
            type Value = BodyField<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a request object or a string of request bytes")
            }
            fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(BodyField(TraceBody::Text(Cow::Borrowed(text))))
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
                Ok(BodyField(TraceBody::Text(Cow::Owned(text.to_string()))))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let view = RequestView::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(BodyField(TraceBody::Parsed(Box::new(view))))
            }
        }
        deserializer.deserialize_any(BodyVisitor)
    }
}

/// The slow path, after the one-pass read failed: is the line broken, its envelope, or only the
/// request in it (which the endpoint would have rejected)?
fn explain_line(line: usize, text: &str) -> Result<TraceEntry<'_>, UnreadableLine> {
    let value: serde_json::Value = match serde_json::from_str(text) {
        Ok(value) => value,
        // Nesting past serde_json's limit is JSON the API itself refuses with a 400: a result.
        Err(err) if is_too_deep(&err) => return Ok(rejected(line, None, describe_parse_error(text))),
        Err(err) => {
            return Err(UnreadableLine {
                line,
                message: format!(
                    "not JSON (column {}): {}",
                    err.column(),
                    forkcache_wire::json::without_position(&err)
                ),
            });
        }
    };
    let Some(object) = value.as_object() else {
        return Err(UnreadableLine {
            line,
            message: "expected a JSON object: a request body or an envelope".into(),
        });
    };
    if let Some(marker) = object.get("forkcache_session") {
        let message = match SessionMarker::deserialize(marker) {
            Ok(_) => "a session marker carries nothing else".to_string(),
            Err(err) => format!("session marker: {err}"),
        };
        return Err(UnreadableLine { line, message });
    }
    let Some(body) = object.get("body") else {
        return Ok(rejected(line, None, describe_parse_error(text)));
    };
    if let Some(usage) = object.get("usage").filter(|usage| !usage.is_null()) {
        bounded_recorded::<serde_json::Error>(Some(&usage.to_string()))
            .map_err(|err| UnreadableLine { line, message: format!("envelope: {err}") })?;
    }
    let envelope: Envelope = serde_path_to_error::deserialize(value.clone()).map_err(|err| {
        // Named by its field (`envelope.at_ms: …`): the message alone says only what was expected.
        let field = match err.path().to_string() {
            root if root == "." => String::new(),
            path => format!(".{path}"),
        };
        let why = forkcache_wire::json::without_position(err.inner());
        UnreadableLine { line, message: format!("envelope{field}: {why}") }
    })?;
    let error = match &envelope.error {
        Some(logged) => logged.to_api_error(),
        None => describe_parse_error(&body.to_string()),
    };
    Ok(rejected(line, Some(envelope), error))
}

/// serde_json's recursion limit (128 levels), which it reports only in its message.
fn is_too_deep(err: &serde_json::Error) -> bool {
    err.to_string().starts_with("recursion limit exceeded")
}

fn rejected<'a>(line: usize, envelope: Option<Envelope>, error: ApiError) -> TraceEntry<'a> {
    let envelope = envelope.unwrap_or_default();
    TraceEntry::Request(TraceLine {
        line,
        at_ms: envelope.at_ms,
        api_key: envelope.api_key.map(Cow::Owned),
        workspace: envelope.workspace.map(Cow::Owned),
        betas: envelope.betas,
        first_byte_ms: envelope.first_byte_ms,
        output_tokens: None,
        recorded: None,
        recorded_miss_reason: None,
        prewarm: envelope.prewarm.unwrap_or(false),
        body: TraceBody::Rejected(error),
    })
}

/// A trace envelope, as `serve` and `proxy` write it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    /// Milliseconds since the start of the run.
    #[serde(default)]
    pub at_ms: Option<u64>,
    /// The API key of an old trace (read, never written: see `workspace`).
    #[serde(default, skip_serializing)]
    pub api_key: Option<String>,
    /// The workspace the request was priced in ([`key_fingerprint`] for a key without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// The betas the request named in `anthropic-beta` (omitted when none).
    #[serde(default, skip_serializing_if = "Betas::is_empty")]
    pub betas: Betas,
    /// When the response began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_byte_ms: Option<u64>,
    /// The upstream's `request-id` (`proxy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// The usage returned (absent for a rejected request): serve's own, or, from `proxy`, the
    /// upstream's exactly as it returned it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<serde_json::Value>,
    /// The upstream's cache diagnostics as it returned them (`proxy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<serde_json::Value>,
    /// The error the request was turned away with before it was priced, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<LoggedError>,
    /// `true` when the response ended early (`proxy`: the upstream failed mid-stream, or the
    /// client hung up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<bool>,
    /// `true` for traffic the trace stands in for rather than records (`import claude-code
    /// --emit-trace`: the account keeping a prefix warm from outside the session): `replay`
    /// runs it through the cache but neither lists nor bills it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prewarm: Option<bool>,
}

impl Envelope {
    /// `usage` as serve writes its own.
    #[allow(clippy::expect_used)] // a usage is integers and strings: it always serializes
    pub fn usage_of(usage: &Usage) -> serde_json::Value {
        serde_json::to_value(usage).expect("a usage serializes")
    }
}

/// Writes one envelope line (no trailing newline) around `body`: the body is kept byte for byte
/// when it is a one-line JSON object, and written as a string otherwise (so even a malformed
/// request is logged exactly).
///
/// A refused body (the envelope has an `error`; see also [`refused_envelope_line`]) is kept as an object only when it is strict JSON
/// (`replay` reads the line with a full parse: a number out of range or a lone surrogate in an
/// object would make the whole line unreadable), and written as a string of its bytes otherwise.
///
/// A body that is not UTF-8 is never logged altered: its envelope should carry the `error` it was
/// refused with, and the body is logged empty.
pub fn envelope_line(envelope: &Envelope, body: &[u8]) -> String {
    write_envelope(envelope, body, envelope.error.is_some())
}

/// [`envelope_line`] for a request that was refused, whether or not its envelope carries the
/// error (an endpoint's refusal is found again in the body): its body is kept as an object only
/// when it is strict JSON.
pub fn refused_envelope_line(envelope: &Envelope, body: &[u8]) -> String {
    write_envelope(envelope, body, true)
}

#[allow(clippy::expect_used)] // an envelope is strings, integers and JSON values: it serializes
fn write_envelope(envelope: &Envelope, body: &[u8], refused: bool) -> String {
    let fields = serde_json::to_string(envelope).expect("an envelope serializes");
    let mut line = String::with_capacity(fields.len() + body.len() + 16);
    line.push_str(&fields[..fields.len() - 1]);
    if fields.len() > 2 {
        line.push(',');
    }
    line.push_str("\"body\":");
    match std::str::from_utf8(body) {
        Ok(text) if is_one_line_object(text) && (!refused || is_strict_json(text)) => {
            line.push_str(text.trim());
        }
        Ok(text) => line.push_str(&serde_json::Value::from(text).to_string()),
        Err(_) => line.push_str("\"\""),
    }
    line.push('}');
    line
}

/// Whether a full parse accepts `text` (a raw-value check skips numbers' range and escapes'
/// surrogates). Only refused bodies pay for it: an accepted one was parsed by its endpoint.
fn is_strict_json(text: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(text).is_ok()
}

fn is_one_line_object(text: &str) -> bool {
    !text.contains('\n')
        && text.trim_start().starts_with('{')
        && serde_json::from_str::<&serde_json::value::RawValue>(text).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use forkcache_wire::ErrorKind;

    fn request(entry: TraceEntry) -> TraceLine {
        match entry {
            TraceEntry::Request(line) => line,
            other => panic!("expected a request, got {other:?}"),
        }
    }

    fn unreadable(entry: TraceEntry) -> String {
        match entry {
            TraceEntry::Unreadable(error) => error.to_string(),
            other => panic!("expected an unreadable line, got {other:?}"),
        }
    }

    #[test]
    fn batches_hold_whole_lines_and_number_them_from_the_file() {
        // Lines 1-5: 3, 40, 0 (blank), 7 and 25 bytes, the last without a newline (79 bytes in
        // all), read in batches of about 16 bytes: the 40-byte line overruns its batch.
        let x = "x".repeat(40);
        let y = "y".repeat(25);
        let text = ["abc", x.as_str(), "", "defghij", y.as_str()].join("\n");
        let mut reader = BatchReader::new(text.as_bytes(), 16);
        let (mut joined, mut entry_lines, mut first_lines) = (Vec::new(), Vec::new(), Vec::new());
        while let Some(batch) = reader.next_batch().unwrap() {
            joined.extend_from_slice(batch.bytes());
            first_lines.push(batch.first_line);
            let parsed = ParsedBatch::parse(batch);
            for read in parsed.entries() {
                let TraceEntry::Unreadable(line) = &read.entry else { panic!("none is JSON") };
                entry_lines.push((line.line, read.bytes));
            }
        }
        assert_eq!(joined, text.as_bytes(), "every byte once, in order");
        // 16 bytes read: "abc\n" and 12 x's; the batch ends after "abc". The next reads to the
        // end of the file and ends after "defghij" (lines 2-4); the 25 y's are the last batch.
        assert_eq!(first_lines, [1, 2, 5]);
        assert_eq!(entry_lines, [(1, 3), (2, 40), (4, 7), (5, 25)], "the blank line 3 is skipped");
    }

    #[test]
    fn raw_body_line_is_parsed_in_place() {
        let line = request(read_line(
            1,
            r#"{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}"#,
        ));
        assert!(line.at_ms.is_none());
        let TraceBody::Parsed(view) = line.body else { panic!("parsed") };
        assert_eq!(view.require_model().unwrap(), "m");
    }

    #[test]
    fn envelope_with_object_and_string_bodies() {
        let line = request(read_line(
            2,
            r#"{"at_ms":1500,"api_key":"k","first_byte_ms":1502,"body":{"model":"m","messages":[]},"usage":{"output_tokens":9}}"#,
        ));
        assert_eq!((line.at_ms, line.first_byte_ms, line.output_tokens), (Some(1500), Some(1502), Some(9)));
        assert_eq!(line.api_key.as_deref(), Some("k"));
        assert!(matches!(line.body, TraceBody::Parsed(_)));
        let line = request(read_line(3, r#"{"at_ms":7,"workspace":"key-00","body":"{\"model\":\"m\"}"}"#));
        assert_eq!(line.workspace.as_deref(), Some("key-00"));
        assert!(matches!(line.body, TraceBody::Text(_)));
    }

    #[test]
    fn broken_lines_and_bodies_are_told_apart() {
        let message = unreadable(read_line(4, r#"{"at_ms":1,"body":"#));
        assert!(message.starts_with("line 4: not JSON"), "{message}");
        let message = unreadable(read_line(5, r#"{"at_ms":"soon","body":{}}"#));
        assert!(message.starts_with("line 5: envelope.at_ms: invalid type: string \"soon\""), "{message}");
        let message = unreadable(read_line(5, "[1]"));
        assert_eq!(message, "line 5: expected a JSON object: a request body or an envelope");
        let line = request(read_line(
            6,
            r#"{"at_ms":1,"body":{"model":"m","messages":[{"role":"user","content":5}]}}"#,
        ));
        let TraceBody::Rejected(error) = line.body else { panic!("rejected") };
        assert!(error.message.starts_with("messages.0.content: invalid type"), "{}", error.message);
        assert_eq!(line.at_ms, Some(1));
    }

    #[test]
    fn logged_error_replays_as_that_error_whatever_the_body() {
        let line = request(read_line(
            7,
            r#"{"at_ms":9,"error":{"status":529,"type":"overloaded_error","message":"Overloaded"},"body":{"model":"m","max_tokens":1,"messages":[]}}"#,
        ));
        let TraceBody::Rejected(error) = line.body else { panic!("rejected") };
        assert_eq!((error.kind, error.message.as_str()), (ErrorKind::Overloaded, "Overloaded"));
        assert_eq!(line.at_ms, Some(9));
        let line = request(read_line(
            8,
            r#"{"at_ms":9,"error":{"status":413,"type":"request_too_large","message":"too big"},"body":""}"#,
        ));
        let TraceBody::Rejected(error) = line.body else { panic!("rejected") };
        assert_eq!(error.kind, ErrorKind::RequestTooLarge);
        // An upstream's 502 through the proxy: an api_error, still a 502 when replayed.
        let line = request(read_line(
            9,
            r#"{"at_ms":9,"error":{"status":502,"type":"api_error","message":"upstream unreachable"},"body":""}"#,
        ));
        let TraceBody::Rejected(error) = line.body else { panic!("rejected") };
        assert_eq!(error.to_string(), "api_error (502): upstream unreachable");
    }

    #[test]
    fn refused_body_that_is_not_strict_json_is_logged_as_a_string_and_replays_refused() {
        // 1e400 overflows an f64 and \ud800 is a lone surrogate: a raw-value check accepts both,
        // a full parse refuses both, so as objects they would make the line unreadable.
        for body in
            [r#"{"model":"m","max_tokens":1e400,"messages":[]}"#, r#"{"model":"\ud800","messages":[]}"#]
        {
            let envelope = Envelope {
                at_ms: Some(1),
                error: Some(LoggedError::of(&describe_parse_error(body))),
                ..Envelope::default()
            };
            let line = envelope_line(&envelope, body.as_bytes());
            // An endpoint's refusal carries no `error`: replay finds it again in the body.
            let unlogged =
                refused_envelope_line(&Envelope { at_ms: Some(1), ..Envelope::default() }, body.as_bytes());
            assert_eq!(unlogged, format!(r#"{{"at_ms":1,"body":{}}}"#, serde_json::Value::from(body)));
            let TraceBody::Text(_) = request(read_line(1, &unlogged)).body else { panic!("a string body") };
            assert!(line.ends_with(&format!(",\"body\":{}}}", serde_json::Value::from(body))), "{line}");
            let line = request(read_line(1, &line));
            let TraceBody::Rejected(error) = line.body else { panic!("rejected: {line:?}") };
            assert_eq!(error.kind.status(), 400);
        }
    }

    #[test]
    fn secrets_are_scrubbed_from_messages() {
        let echoed = "invalid x-api-key: my-gateway-key-123 (also sk-ant-api03-AbC_d-9 and sk-ant-)";
        assert_eq!(
            scrub_secrets(echoed, Some("my-gateway-key-123")),
            "invalid x-api-key: [scrubbed] (also [scrubbed] and [scrubbed])"
        );
        assert!(matches!(scrub_secrets("overloaded", Some("my-gateway-key-123")), Cow::Borrowed(_)));
        // A key too short to be one is not hunted for in ordinary words.
        assert_eq!(scrub_secrets("a b c", Some("b")), "a b c");
    }

    #[test]
    fn envelope_line_keeps_body_bytes() {
        let body = br#"{"model":"m", "messages":[]}"#;
        let line = envelope_line(&Envelope { at_ms: Some(3), ..Envelope::default() }, body);
        assert_eq!(line, r#"{"at_ms":3,"body":{"model":"m", "messages":[]}}"#);
        let line = envelope_line(&Envelope { at_ms: Some(3), ..Envelope::default() }, b"not json");
        assert_eq!(line, r#"{"at_ms":3,"body":"not json"}"#);
    }

    #[test]
    fn envelope_line_never_writes_a_key_or_altered_bytes() {
        let envelope = Envelope {
            at_ms: Some(1),
            api_key: Some("sk-secret".into()),
            workspace: Some(key_fingerprint("sk-secret")),
            ..Envelope::default()
        };
        let line = envelope_line(&envelope, b"{\"model\":\"m\xff\"}");
        assert!(!line.contains("sk-secret"), "{line}");
        assert!(!line.contains('\u{fffd}'), "{line}");
        assert_eq!(
            line,
            format!(r#"{{"at_ms":1,"workspace":"{}","body":""}}"#, key_fingerprint("sk-secret"))
        );
    }

    #[test]
    fn key_fingerprint_is_key_dash_16_hex_of_xxh3() {
        // xxh3_64("") is 0x2d06800538d394c2 (the published test vector for the empty input).
        assert_eq!(key_fingerprint(""), "key-2d06800538d394c2");
        let print = key_fingerprint("sk-ant-test");
        assert_eq!(print.len(), 20);
        assert!(print[4..].chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_ne!(print, key_fingerprint("sk-ant-test2"));
    }

    #[test]
    fn session_marker_round_trips_and_is_told_apart() {
        let marker = SessionMarker {
            started: "2026-11-24T12:00:00Z".into(),
            version: "0.1.0".into(),
            format: TRACE_FORMAT,
            settings: serde_json::json!({"policy": "anthropic"}),
        };
        let line = session_line(&marker);
        assert!(line.starts_with(r#"{"forkcache_session":{"started":"2026-11-24T12:00:00Z""#), "{line}");
        match read_line(1, &line) {
            TraceEntry::Session { line: 1, marker: read } => assert_eq!(read, marker),
            other => panic!("expected a session, got {other:?}"),
        }
        let message = unreadable(read_line(2, r#"{"forkcache_session":5}"#));
        assert!(message.starts_with("line 2: session marker: invalid type"), "{message}");
    }

    #[test]
    fn trace_torn_inside_a_utf8_character_loses_only_that_line() {
        let mut trace =
            br#"{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}"#.to_vec();
        trace.extend_from_slice(b"\n{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"caf\xc3");
        let entries: Vec<TraceEntry> = read_trace(&trace).collect();
        assert_eq!(entries.len(), 2);
        assert!(matches!(entries[0], TraceEntry::Request(_)));
        let TraceEntry::Unreadable(error) = &entries[1] else { panic!("unreadable") };
        assert_eq!(error.line, 2);
        assert!(error.message.starts_with("not UTF-8 (byte "), "{}", error.message);
    }
}
