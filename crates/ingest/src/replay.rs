//! `replay`: prices a recorded request stream through the endpoint, request by request, and
//! renders the result as JSON or a table.
//!
//! The trace streams through: `pipeline` reads and parses batches of lines on worker threads
//! and hands them back in file order; each request line then waits in the reorder window (a heap
//! keyed by start time, then line number) until the window holds more than
//! [`ReplayConfig::reorder_window`] lines, or [`reorder_window_bytes`] of them (that many times
//! [`REORDER_BYTES_PER_LINE`], at least [`REORDER_MIN_BYTES`] and twice the longest line read),
//! and the earliest runs. A line that starts before one that already ran is
//! [`ReplayError::OutOfOrder`]: traces that `serve` and `proxy` write are in start order, and a
//! trace more disordered than the window needs a larger one. What is held at any time is the
//! batches in flight, the window, the endpoint's cache state (bounded: see the memo and history
//! modules) and the records, never the whole file. The report is byte for byte the same on any
//! number of threads: parsing is a pure function of a batch's bytes, and the cache sees the lines
//! in the same order whatever thread parsed them.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, VecDeque};
use std::fmt::Write as _;

use serde::Serialize;

use forkcache_engine::agreement::{Agreement, agreement};
use forkcache_engine::billing::{Cost, PriceDate, PriceTable, RecordedUsage, TokenEquivalents, Usage};
use forkcache_engine::cache::{
    CacheMissType, Miss, MissCause, StoreStats, describe_miss, layout_notes, miss_reason_type,
};
use forkcache_engine::clock::SimTime;
use forkcache_engine::endpoint::{Call, EndpointConfig, MockEndpoint, Record};
use forkcache_engine::prompt::{BlockKeys, RenderCounts, RenderSketch};
use forkcache_engine::tokenize::TokenizerUnavailable;
use forkcache_wire::{ApiError, Reply, parse_request};

use crate::trace::{BatchLine, ParsedBatch, TraceBody, TraceEntry, TraceLine, UnreadableLine};
use crate::transcript::parse_timestamp;

mod pipeline;

pub use pipeline::BATCH_BYTES;

/// Replay settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayConfig {
    /// The endpoint the trace is priced by.
    pub endpoint: EndpointConfig,
    /// Spacing of lines without `at_ms`, after the previous line, in milliseconds. Default 30,000
    /// (longer than the time to first token of a 1M-token uncached prompt, so a line sees the
    /// writes of the line before it).
    pub gap_ms: u64,
    /// Stop at the first unreadable line instead of reporting it and going on. Default false.
    pub strict: bool,
    /// Threads that read and parse the trace's lines (the cache itself runs on the calling
    /// thread); 0 or 1 does everything on the calling thread. The report is the same on any
    /// number. Default 1.
    pub threads: usize,
    /// How far out of start order a line may be: up to this many lines (and this many times
    /// [`REORDER_BYTES_PER_LINE`] bytes of them) wait to run in start order; a line that starts
    /// before one that already ran is an error ([`ReplayError::OutOfOrder`]). Default
    /// [`DEFAULT_REORDER_WINDOW`].
    pub reorder_window: usize,
    /// The fewest bytes of waiting lines the window holds, whatever its size in lines. Default
    /// [`REORDER_MIN_BYTES`].
    pub reorder_min_bytes: usize,
}

/// The reorder window's default, in lines: room for hundreds of concurrent requests logged as
/// they finish, and [`REORDER_MIN_BYTES`] of line bytes.
pub const DEFAULT_REORDER_WINDOW: usize = 256;

/// Bytes of waiting lines the reorder window holds per line of its size, so the window bounds
/// memory whatever the lines' length.
pub const REORDER_BYTES_PER_LINE: usize = 32 << 10;

/// The fewest bytes of waiting lines the reorder window holds, whatever its size in lines: 16 MiB,
/// so a trace of large bodies written by concurrent clients (a coding agent's 200K-token
/// requests are about 1 MB each) is held by its line count, not cut off after a few lines. The
/// window also holds twice the longest line read, so one line never fills it by itself. What it
/// holds is memory: at 64 MiB a replay of the bench trace peaked at 87 MB.
pub const REORDER_MIN_BYTES: usize = 16 << 20;

/// The bytes the reorder window holds for a window of `lines` lines, at least `min_bytes` and
/// twice `longest_line`.
pub fn reorder_window_bytes(lines: usize, min_bytes: usize, longest_line: usize) -> usize {
    lines.saturating_mul(REORDER_BYTES_PER_LINE).max(min_bytes).max(longest_line.saturating_mul(2))
}

impl Default for ReplayConfig {
    fn default() -> Self {
        ReplayConfig {
            endpoint: EndpointConfig::default(),
            gap_ms: 30_000,
            strict: false,
            threads: 1,
            reorder_window: DEFAULT_REORDER_WINDOW,
            reorder_min_bytes: REORDER_MIN_BYTES,
        }
    }
}

/// One replayed request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayRecord {
    /// 0-based request index (file order, blank lines skipped).
    pub index: usize,
    /// 1-based line number.
    pub line: usize,
    /// Start time used.
    pub at: SimTime,
    /// The model requested, when the body said.
    pub model: Option<String>,
    /// The priced request, or why the API would have rejected it.
    pub result: Result<Record, ApiError>,
    /// The usage the trace recorded for it (a proxy's real usage, or a server's own), scored
    /// against the prediction.
    pub recorded: Option<Recorded>,
}

/// A request's recorded usage beside its prediction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    /// The usage recorded.
    pub usage: Usage,
    /// What it costs at the replay's prices (none for an unpriced model).
    pub cost: Option<Cost>,
    /// Cached shares compared (none when the replay rejected the request).
    pub agreement: Option<Agreement>,
    /// The API's `diagnostics.cache_miss_reason.type`, beside the one the predicted miss maps to.
    pub miss_reason: Option<MissReasonCheck>,
}

/// The API's cache-miss reason beside forkcache's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MissReasonCheck {
    /// As the API reported it.
    pub recorded: String,
    /// The predicted miss as a diagnostics type ([`miss_reason_type`]); none for no miss, or a
    /// miss the API would not name.
    pub predicted: Option<&'static str>,
    /// Whether they name the same reason.
    pub agrees: bool,
}

/// Recorded usage summed over a replay, and how often the prediction agreed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecordedTotals {
    /// Requests with a recorded usage.
    pub requests: u64,
    /// Their usage summed.
    pub usage: Usage,
    /// Their cost summed (unpriced models left out).
    pub cost: Cost,
    /// Requests with both a recorded and a predicted usage.
    pub compared: u64,
    /// Of those, the ones that agree.
    pub agreed: u64,
    /// Requests with a recorded cache-miss reason.
    pub reasons_compared: u64,
    /// Of those, the ones forkcache names the same.
    pub reasons_agreed: u64,
}

impl RecordedTotals {
    fn add(&mut self, recorded: &Recorded) {
        self.requests += 1;
        self.usage.add(&recorded.usage);
        if let Some(cost) = &recorded.cost {
            self.cost.add(cost);
        }
        if let Some(agreement) = &recorded.agreement {
            self.compared += 1;
            self.agreed += u64::from(agreement.agrees);
        }
        if let Some(check) = &recorded.miss_reason {
            self.reasons_compared += 1;
            self.reasons_agreed += u64::from(check.agrees);
        }
    }

    /// Agreed ÷ compared (0 when nothing was compared).
    pub fn agreement_rate(&self) -> f64 {
        if self.compared == 0 { 0.0 } else { self.agreed as f64 / self.compared as f64 }
    }
}

/// Sums over a replay.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Requests priced.
    pub requests: u64,
    /// Requests rejected.
    pub rejected: u64,
    /// Usage summed.
    pub usage: Usage,
    /// Cost summed.
    pub cost: Cost,
    /// Token-equivalents summed (each request at its own model's input price).
    pub token_equivalents: TokenEquivalents,
    /// Requests per miss cause.
    pub misses: BTreeMap<MissCause, u64>,
    /// Tokens missed, summed.
    pub tokens_missed: u64,
    /// Models the price table does not list, requested without `--price-unknown-as`: their
    /// requests count in tokens, not in cost.
    pub unpriced_models: BTreeSet<String>,
    /// Priced requests whose estimated prompt was past the model's context window (within the
    /// margin: see [`forkcache_engine::endpoint::ContextWarning`]).
    pub context_warnings: u64,
}

impl Totals {
    /// Counts one priced request.
    pub fn add(&mut self, record: &Record) {
        self.requests += 1;
        self.usage.add(&record.usage);
        self.cost.add(&record.cost);
        self.token_equivalents.0 += record.token_equivalents.0;
        if !record.priced {
            self.unpriced_models.insert(record.model.clone());
        }
        self.context_warnings += u64::from(record.context_warning.is_some());
        if let Some(miss) = &record.miss {
            *self.misses.entry(miss.cause).or_insert(0) += 1;
            self.tokens_missed += miss.tokens_missed;
        }
    }

    /// Counts one priced request, or leaves the totals as they were and returns false when a sum
    /// would pass 2^64.
    pub fn checked_add(&mut self, record: &Record) -> bool {
        let missed = record.miss.as_ref().map_or(0, |miss| miss.tokens_missed);
        let fits = sums_fit(&counts(&self.usage, &self.cost), &counts(&record.usage, &record.cost))
            && self.token_equivalents.0.checked_add(record.token_equivalents.0).is_some()
            && self.tokens_missed.checked_add(missed).is_some();
        if fits {
            self.add(record);
        }
        fits
    }

    /// Token-weighted hit rate: tokens read ÷ total input tokens.
    pub fn hit_rate(&self) -> f64 {
        let total = self.usage.total_input_tokens();
        if total == 0 { 0.0 } else { self.usage.cache_read_input_tokens as f64 / total as f64 }
    }
}

/// Every count a total keeps, then the two sums of them it reports (total input tokens, total
/// cost), widened so they cannot wrap here.
fn counts(usage: &Usage, cost: &Cost) -> Vec<u128> {
    let input = [usage.input_tokens, usage.cache_creation_input_tokens, usage.cache_read_input_tokens];
    let parts = [
        cost.uncached_nanousd,
        cost.write_5m_nanousd,
        cost.write_1h_nanousd,
        cost.read_nanousd,
        cost.output_nanousd,
    ];
    let creation =
        [usage.cache_creation.ephemeral_5m_input_tokens, usage.cache_creation.ephemeral_1h_input_tokens];
    let mut counts: Vec<u128> = input
        .iter()
        .chain(&parts)
        .chain(&creation)
        .chain([&usage.output_tokens])
        .map(|&v| u128::from(v))
        .collect();
    counts.push(input.iter().map(|&v| u128::from(v)).sum());
    counts.push(parts.iter().map(|&v| u128::from(v)).sum());
    counts
}

/// Whether every `a + b` fits in a u64.
fn sums_fit(a: &[u128], b: &[u128]) -> bool {
    a.iter().zip(b).all(|(x, y)| x + y <= u128::from(u64::MAX))
}

/// A whole replay.
#[derive(Clone, Debug)]
pub struct ReplayReport {
    /// Every request, in trace order.
    pub records: Vec<ReplayRecord>,
    /// Sums.
    pub totals: Totals,
    /// The settings used.
    pub config: ReplayConfig,
    /// The price table's date.
    pub prices_date: String,
    /// Cache counters at the end, summed over the trace's sessions.
    pub cache: StoreStats,
    /// How the prompts were rendered, summed over the trace's sessions: resumed from the trace's
    /// last requests, or whole. The same records either way.
    pub renders: RenderCounts,
    /// Recorded usage and agreement, when the trace recorded any usage.
    pub recorded: Option<RecordedTotals>,
    /// Lines that are not requests at all (not UTF-8, not JSON, not an object, a broken
    /// envelope), in file order. Requests the API would reject are records, not these.
    pub unreadable: Vec<UnreadableLine>,
    /// Server runs the trace holds (session markers; lines before the first count as one run).
    pub sessions: usize,
}

/// A replay that could not run.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The configured tokenizer is not compiled in.
    #[error(transparent)]
    Tokenizer(#[from] TokenizerUnavailable),
    /// `strict` was set and this line is not a request.
    #[error("{0}")]
    Unreadable(UnreadableLine),
    /// A line starts before a line that already ran: it is further out of start order than the
    /// reorder window reaches.
    #[error("{0}")]
    OutOfOrder(OutOfOrder),
    /// The trace could not be read.
    #[error("reading the trace: {0}")]
    Read(std::io::Error),
}

// Not `#[from]`: that would also make the I/O error the source, and a chain printed whole
// (`{:#}`) would say it twice.
impl From<std::io::Error> for ReplayError {
    fn from(err: std::io::Error) -> ReplayError {
        ReplayError::Read(err)
    }
}

/// A line further out of start order than the reorder window reaches.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "line {line} starts at {at_ms} ms, before line {ran_line} ({ran_at_ms} ms), which already ran: it is more than the reorder window ({limit}) out of start order; a larger --reorder-window replays it"
)]
pub struct OutOfOrder {
    /// 1-based number of the late line.
    pub line: usize,
    /// Its start.
    pub at_ms: u64,
    /// 1-based number of the line that ran before it.
    pub ran_line: usize,
    /// That line's start.
    pub ran_at_ms: u64,
    /// The window, in lines.
    pub window: usize,
    /// The limit that made the earlier line run: `"256 lines"`, or `"64 MiB of lines"` when
    /// their bytes filled the window first.
    pub limit: String,
}

/// Replays a JSONL trace held in memory: [`replay_stream`] over its bytes.
pub fn replay(
    config: &ReplayConfig,
    prices: PriceTable,
    trace: &(impl AsRef<[u8]> + ?Sized),
) -> Result<ReplayReport, ReplayError> {
    replay_stream(config, prices, trace.as_ref())
}

/// Replays a JSONL trace as it is read, never holding more of it than the batches in flight and
/// the reorder window. Each server run in it (from one session marker to the next) is its own
/// timeline on an empty cache; within one, lines run in start-time order (file order among equal
/// times) as far as [`ReplayConfig::reorder_window`] reaches, and a line later than that is an
/// error. The records come back in file order. An unreadable line is reported and skipped, unless
/// `strict` asks to stop there. Lines are read and parsed on [`ReplayConfig::threads`] threads;
/// the report is the same on any number.
pub fn replay_stream(
    config: &ReplayConfig,
    prices: PriceTable,
    trace: impl std::io::BufRead + Send,
) -> Result<ReplayReport, ReplayError> {
    let mut replayer = Replayer::new(config, prices)?;
    // The workers check each body against the API's rules unless the endpoint would not.
    let checked = config.endpoint.rules_memo();
    pipeline::for_each_batch(trace, config.threads, checked, |batch| replayer.take(batch))?;
    replayer.finish()
}

/// A replay under way: the endpoint of the current server run, the lines waiting in the reorder
/// window, and the batches they live in.
struct Replayer<'c> {
    config: &'c ReplayConfig,
    prices: PriceTable,
    endpoint: MockEndpoint,
    /// The run's last requests, each request's prompt rendered from where it parts from one of
    /// them.
    sketch: RenderSketch,
    run: Run,
    /// Server runs closed so far.
    runs: usize,
    /// The index the next request line gets (file order).
    next_index: usize,
    window: ReorderWindow,
    /// Batches from the oldest one a waiting line lives in to the newest one read.
    held: VecDeque<HeldBatch>,
    records: Vec<ReplayRecord>,
    unreadable: Vec<UnreadableLine>,
    cache: StoreStats,
    renders: RenderCounts,
}

/// What the current server run has seen.
#[derive(Default)]
struct Run {
    /// The start of its last line read (lines without `at_ms` follow it by the gap).
    previous_at: Option<SimTime>,
    /// Request lines read in it.
    requests: usize,
    /// The last line run: nothing may start before it.
    last_run: Option<(SimTime, usize)>,
    /// When its marker says the server started (ms since the epoch): each request is priced on
    /// the day it ran, this plus its `at_ms`.
    started_ms: Option<i64>,
}

struct HeldBatch {
    batch: ParsedBatch,
    /// Its lines still in the reorder window.
    waiting: usize,
}

/// A request line read and not yet run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Waiting {
    at: SimTime,
    line: usize,
    /// Its place among the listed requests; none for a pre-warm.
    index: Option<usize>,
    batch: u64,
    entry: usize,
    bytes: usize,
}

impl Ord for Waiting {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.line).cmp(&(other.at, other.line))
    }
}

impl PartialOrd for Waiting {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Lines waiting to run, earliest start first.
#[derive(Default)]
struct ReorderWindow {
    lines: BinaryHeap<Reverse<Waiting>>,
    bytes: usize,
    /// The longest line read so far, in bytes.
    longest_line: usize,
    /// Whether the last line run was pushed out by the window's bytes (not its line count): the
    /// out-of-order error names the limit that fired.
    bytes_fired: bool,
}

/// When a run's marker says its server started: the day (a date alone is enough to price on),
/// and the instant its requests' `at_ms` count from.
#[derive(Clone, Copy, Debug, Default)]
struct RunStart {
    date: Option<PriceDate>,
    epoch_ms: Option<i64>,
}

impl RunStart {
    fn of(started: &str) -> RunStart {
        RunStart { date: PriceDate::parse(started).ok(), epoch_ms: parse_timestamp(started) }
    }
}

/// What a line read is, without borrowing its batch.
enum Arrival {
    Request {
        line: usize,
        at_ms: Option<u64>,
        bytes: usize,
        prewarm: bool,
    },
    /// A session marker, with when its server started when it names it.
    Session(RunStart),
    Unreadable(UnreadableLine),
}

impl<'c> Replayer<'c> {
    fn new(config: &'c ReplayConfig, prices: PriceTable) -> Result<Replayer<'c>, ReplayError> {
        let endpoint = MockEndpoint::new(config.endpoint.clone(), prices.clone())?;
        Ok(Replayer {
            config,
            prices,
            endpoint,
            sketch: RenderSketch::interleaved(),
            run: Run::default(),
            runs: 0,
            next_index: 0,
            window: ReorderWindow::default(),
            held: VecDeque::new(),
            records: Vec::new(),
            unreadable: Vec::new(),
            cache: StoreStats::default(),
            renders: RenderCounts::default(),
        })
    }

    /// Reads a batch's lines into the window, running the earliest ones as the window fills.
    fn take(&mut self, batch: ParsedBatch) -> Result<(), ReplayError> {
        let number = batch.number();
        let count = batch.entries().len();
        self.held.push_back(HeldBatch { batch, waiting: 0 });
        let slot = self.held.len() - 1;
        for entry in 0..count {
            match arrival(&self.held[slot].batch, entry) {
                Arrival::Request { line, at_ms, bytes, prewarm } => {
                    let at = self.start_of(at_ms);
                    self.check_order(line, at)?;
                    // A pre-warm is run, not listed: the listed requests keep consecutive indexes.
                    let index = (!prewarm).then(|| {
                        self.next_index += 1;
                        self.next_index - 1
                    });
                    self.window.lines.push(Reverse(Waiting { at, line, index, batch: number, entry, bytes }));
                    self.window.bytes += bytes;
                    self.window.longest_line = self.window.longest_line.max(bytes);
                    self.held[slot].waiting += 1;
                    while self.window_is_over() {
                        self.run_earliest();
                    }
                }
                Arrival::Session(started) => self.new_run(started)?,
                Arrival::Unreadable(line) if self.config.strict => return Err(ReplayError::Unreadable(line)),
                Arrival::Unreadable(line) => self.unreadable.push(line),
            }
        }
        self.release_batches();
        Ok(())
    }

    /// `at_ms` where given; otherwise the previous line's start plus the gap.
    fn start_of(&mut self, at_ms: Option<u64>) -> SimTime {
        let at = match (at_ms, self.run.previous_at) {
            (Some(ms), _) => SimTime(ms),
            (None, Some(before)) => before.plus_ms(self.config.gap_ms),
            (None, None) => SimTime::ZERO,
        };
        self.run.previous_at = Some(at);
        self.run.requests += 1;
        at
    }

    /// A line may not start before one that already ran.
    fn check_order(&self, line: usize, at: SimTime) -> Result<(), ReplayError> {
        match self.run.last_run {
            Some((ran_at, ran_line)) if at < ran_at => Err(ReplayError::OutOfOrder(OutOfOrder {
                line,
                at_ms: at.ms(),
                ran_line,
                ran_at_ms: ran_at.ms(),
                window: self.config.reorder_window,
                limit: self.fired_limit(),
            })),
            _ => Ok(()),
        }
    }

    fn window_bytes(&self) -> usize {
        reorder_window_bytes(
            self.config.reorder_window,
            self.config.reorder_min_bytes,
            self.window.longest_line,
        )
    }

    fn window_is_over(&mut self) -> bool {
        let window = self.config.reorder_window;
        let lines_over = self.window.lines.len() > window;
        let bytes_over = self.window.bytes > self.window_bytes();
        if lines_over || bytes_over {
            self.window.bytes_fired = !lines_over;
        }
        lines_over || bytes_over
    }

    /// The reorder window's limit that last made a line run, in words.
    fn fired_limit(&self) -> String {
        let window = self.config.reorder_window;
        if self.window.bytes_fired {
            let bytes = self.window_bytes();
            match bytes >> 20 {
                0 => format!("{} KiB of lines", bytes >> 10),
                mib => format!("{mib} MiB of lines"),
            }
        } else {
            format!("{window} lines")
        }
    }

    /// Runs the waiting line that starts first.
    fn run_earliest(&mut self) {
        let Some(Reverse(waiting)) = self.window.lines.pop() else { return };
        self.window.bytes -= waiting.bytes;
        self.run.last_run = Some((waiting.at, waiting.line));
        // Every waiting line's batch is held: batches are released only once none of their lines
        // wait, and numbers are consecutive from the front.
        let Some(front) = self.held.front() else { return };
        let slot = (waiting.batch - front.batch.number()) as usize;
        let Some(held) = self.held.get_mut(slot) else { return };
        held.waiting -= 1;
        if let Some(BatchLine { entry: TraceEntry::Request(line), keys, checked, .. }) =
            held.batch.entries().get(waiting.entry)
        {
            if let (None, Some(started)) = (self.config.endpoint.price_date, self.run.started_ms) {
                let ran_at = started.saturating_add(waiting.at.0 as i64);
                self.endpoint.set_price_date(Some(PriceDate::of_epoch_ms(ran_at)));
            }
            let (endpoint, sketch) = (&mut self.endpoint, &mut self.sketch);
            let worked = Worked { keys: keys.as_ref(), checked: checked.as_ref() };
            let record = replay_line(endpoint, sketch, waiting.index, line, worked, waiting.at);
            self.records.extend(record);
        }
    }

    /// Drops the batches at the front none of whose lines wait any more.
    fn release_batches(&mut self) {
        while self.held.front().is_some_and(|held| held.waiting == 0) {
            self.held.pop_front();
        }
    }

    /// Runs every waiting line.
    fn drain(&mut self) {
        while !self.window.lines.is_empty() {
            self.run_earliest();
        }
    }

    /// A session marker: the run so far ends and a new one starts on an empty cache. Requests
    /// before the first marker (an old trace, raw bodies) are a run of their own; an empty one is
    /// no run.
    ///
    /// Each request of the run is priced on the day it ran, its marker's start plus its `at_ms`
    /// (on the marker's date when that names no time), unless the replay was given a date
    /// (`--date`), which holds for every request.
    fn new_run(&mut self, started: RunStart) -> Result<(), ReplayError> {
        if self.run.requests > 0 || self.runs > 0 {
            self.close_run();
            self.endpoint = MockEndpoint::new(self.config.endpoint.clone(), self.prices.clone())?;
            self.sketch = RenderSketch::interleaved();
        }
        if self.config.endpoint.price_date.is_none() {
            self.endpoint.set_price_date(started.date);
        }
        self.run.started_ms = started.epoch_ms;
        Ok(())
    }

    fn close_run(&mut self) {
        self.drain();
        add_store_stats(&mut self.cache, &self.endpoint.cache_stats());
        self.renders += self.endpoint.render_counts();
        self.runs += 1;
        self.run = Run::default();
    }

    fn finish(mut self) -> Result<ReplayReport, ReplayError> {
        self.close_run();
        let mut records = std::mem::take(&mut self.records);
        // Lines ran in start order; the report lists them in file order.
        records.sort_by_key(|record| record.index);
        let totals = sum_records(&mut records);
        let recorded = recorded_totals(&records);
        Ok(ReplayReport {
            records,
            totals,
            config: self.config.clone(),
            prices_date: self.prices.date.clone(),
            cache: self.cache,
            renders: self.renders,
            recorded,
            unreadable: self.unreadable,
            sessions: self.runs,
        })
    }
}

/// Entry `entry` of `batch`, as far as reading it into the window needs.
fn arrival(batch: &ParsedBatch, entry: usize) -> Arrival {
    let Some(read) = batch.entries().get(entry) else { return Arrival::Session(RunStart::default()) };
    match &read.entry {
        TraceEntry::Request(line) => {
            Arrival::Request { line: line.line, at_ms: line.at_ms, bytes: read.bytes, prewarm: line.prewarm }
        }
        TraceEntry::Unreadable(line) => Arrival::Unreadable(line.clone()),
        TraceEntry::Session { marker, .. } => Arrival::Session(RunStart::of(&marker.started)),
    }
}

/// The recorded usage and agreement summed, when the trace recorded any usage.
fn recorded_totals(records: &[ReplayRecord]) -> Option<RecordedTotals> {
    let mut recorded: Option<RecordedTotals> = None;
    for line in records.iter().filter_map(|record| record.recorded.as_ref()) {
        recorded.get_or_insert_with(RecordedTotals::default).add(line);
    }
    recorded
}

/// The totals of every record. A priced request that would carry a sum past 2^64 is not added:
/// it becomes an error naming its line (every count is bounded, so only an absurdly long trace
/// gets there).
fn sum_records(records: &mut [ReplayRecord]) -> Totals {
    let mut totals = Totals::default();
    for record in records {
        let fits = match &record.result {
            Ok(priced) => totals.checked_add(priced),
            Err(_) => true,
        };
        if !fits {
            let message = format!("line {}: the replay's token or cost totals would pass 2^64", record.line);
            record.result = Err(ApiError::invalid(message));
        }
        if record.result.is_err() {
            totals.rejected += 1;
        }
    }
    totals
}

fn add_store_stats(into: &mut StoreStats, session: &StoreStats) {
    into.entries += session.entries;
    into.writes += session.writes;
    into.reads += session.reads;
    into.evictions += session.evictions;
}

/// Prices one line; `keys` are its blocks' memo keys when the parsing thread hashed them (its
/// prompt is then rendered from `sketch`, the run's last requests). A line with no `index` (a
/// pre-warm) changes the cache and makes no record.
/// What a parsing worker did for a line: its blocks' memo keys and its body's rules checked.
#[derive(Clone, Copy, Default)]
struct Worked<'w> {
    keys: Option<&'w BlockKeys>,
    checked: Option<&'w Result<(), ApiError>>,
}

fn replay_line(
    endpoint: &mut MockEndpoint,
    sketch: &mut RenderSketch,
    index: Option<usize>,
    line: &TraceLine,
    worked: Worked,
    at: SimTime,
) -> Option<ReplayRecord> {
    let reply = Reply { output_tokens: Some(line.output_tokens.unwrap_or(0)), ..Reply::input_only() };
    let call = Call {
        body: &[],
        api_key: line.api_key.as_deref(),
        workspace: line.workspace.as_deref(),
        betas: &line.betas,
        at,
        first_byte: line.first_byte_ms.map(SimTime),
        reply,
        checked: worked.checked,
    };
    let (model, result) = match &line.body {
        TraceBody::Parsed(view) => {
            let handled = match worked.keys {
                Some(keys) => endpoint.handle_resumed(view, keys, sketch, &call),
                None => endpoint.handle_view(view, &call),
            };
            (view.model.as_deref().map(str::to_string), handled)
        }
        TraceBody::Text(text) => match parse_request(text.as_bytes()) {
            Ok(view) => (view.model.as_deref().map(str::to_string), endpoint.handle_view(&view, &call)),
            Err(error) => (None, Err(error)),
        },
        TraceBody::Rejected(error) => (None, Err(error.clone())),
    };
    let index = index?;
    let result = result.map(|exchange| exchange.record);
    let recorded =
        line.recorded.as_ref().map(|usage| score(endpoint, model.as_deref(), &result, usage, line));
    Some(ReplayRecord { index, line: line.line, at, model, result, recorded })
}

/// A recorded usage priced and compared with the prediction.
fn score(
    endpoint: &MockEndpoint,
    model: Option<&str>,
    result: &Result<Record, ApiError>,
    recorded: &RecordedUsage,
    line: &TraceLine,
) -> Recorded {
    let usage = recorded.usage;
    let date = endpoint.config().price_date;
    let cost = model.and_then(|model| endpoint.prices().cost_of_recorded(model, date, recorded));
    let predicted = result.as_ref().ok();
    let miss_reason = line.recorded_miss_reason.as_ref().map(|reason| {
        let predicted =
            predicted.and_then(|r| r.miss.as_ref()).and_then(miss_reason_type).map(CacheMissType::name);
        MissReasonCheck { recorded: reason.clone(), predicted, agrees: predicted == Some(reason.as_str()) }
    });
    Recorded { usage, cost, agreement: predicted.map(|r| agreement(&r.usage, &usage)), miss_reason }
}

/// The `--json` document.
#[derive(Serialize)]
struct ReplayJson<'r> {
    requests: Vec<RequestJson<'r>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    unreadable: Vec<UnreadableJson<'r>>,
    totals: ReplayTotalsJson,
    settings: SettingsJson<'r>,
}

/// Replay's totals: the predicted sums, and the recorded ones beside them when there are any.
#[derive(Serialize)]
struct ReplayTotalsJson {
    #[serde(flatten)]
    predicted: TotalsJson,
    #[serde(skip_serializing_if = "Option::is_none")]
    recorded: Option<RecordedTotalsJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    agreement: Option<AgreementTotalsJson>,
}

#[derive(Serialize)]
struct RecordedTotalsJson {
    requests: u64,
    usage: Usage,
    cost_usd: f64,
    cost_nanousd: u64,
}

#[derive(Serialize)]
struct AgreementTotalsJson {
    compared: u64,
    agreed: u64,
    rate: f64,
    miss_reasons_compared: u64,
    miss_reasons_agreed: u64,
}

#[derive(Serialize)]
struct RecordedJson<'r> {
    usage: &'r Usage,
    cost_usd: Option<f64>,
    cost_nanousd: Option<u64>,
}

#[derive(Serialize)]
struct AgreementJson<'r> {
    agrees: bool,
    recorded_cached_share: f64,
    predicted_cached_share: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    miss_reason: Option<&'r MissReasonCheck>,
}

#[derive(Serialize)]
struct RequestJson<'r> {
    index: usize,
    at_ms: u64,
    model: Option<&'r str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    priced_as: Option<&'r str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    unknown_model: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<&'r Usage>,
    /// Absent for a rejected request; null for a model without a price.
    #[serde(skip_serializing_if = "Option::is_none")]
    cost_usd: Option<Option<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cost_nanousd: Option<Option<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    token_equivalents: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ttft_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    miss: Option<Option<&'r Miss>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorJson<'r>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    recorded: Option<RecordedJson<'r>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    agreement: Option<AgreementJson<'r>>,
    /// What was priced but may not be what the API does (a prompt near the context window).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<String>,
}

#[derive(Serialize)]
struct UnreadableJson<'r> {
    line: usize,
    message: &'r str,
}

#[derive(Serialize)]
struct ErrorJson<'r> {
    #[serde(rename = "type")]
    kind: &'static str,
    message: &'r str,
}

/// [`Totals`] as `replay --json` and the server's stats write them.
#[derive(Serialize)]
pub struct TotalsJson {
    requests: u64,
    rejected: u64,
    usage: Usage,
    total_input_tokens: u64,
    cost_usd: f64,
    cost_nanousd: u64,
    token_equivalents: f64,
    hit_rate: f64,
    tokens_missed: u64,
    misses: BTreeMap<&'static str, u64>,
    unpriced_models: Vec<String>,
    #[serde(skip_serializing_if = "is_zero")]
    context_warnings: u64,
}

fn is_zero(count: &u64) -> bool {
    *count == 0
}

#[derive(Serialize)]
struct SettingsJson<'r> {
    policy: &'static str,
    billing: &'static str,
    identity: &'static str,
    tokenizer: &'static str,
    visibility: forkcache_engine::clock::Visibility,
    gap_ms: u64,
    prices_date: &'r str,
    cache_entries: u64,
    cache_evictions: u64,
}

impl From<&Totals> for TotalsJson {
    fn from(totals: &Totals) -> TotalsJson {
        TotalsJson {
            requests: totals.requests,
            rejected: totals.rejected,
            usage: totals.usage,
            total_input_tokens: totals.usage.total_input_tokens(),
            cost_usd: totals.cost.usd(),
            cost_nanousd: totals.cost.total_nanousd(),
            token_equivalents: totals.token_equivalents.value(),
            hit_rate: round6(totals.hit_rate()),
            tokens_missed: totals.tokens_missed,
            misses: totals.misses.iter().map(|(cause, n)| (cause.name(), *n)).collect(),
            unpriced_models: totals.unpriced_models.iter().cloned().collect(),
            context_warnings: totals.context_warnings,
        }
    }
}

fn request_json(record: &ReplayRecord) -> RequestJson<'_> {
    let base = RequestJson {
        index: record.index,
        at_ms: record.at.ms(),
        model: record.model.as_deref(),
        priced_as: None,
        unknown_model: None,
        usage: None,
        cost_usd: None,
        cost_nanousd: None,
        token_equivalents: None,
        ttft_ms: None,
        miss: None,
        error: None,
        recorded: record.recorded.as_ref().map(|r| RecordedJson {
            usage: &r.usage,
            cost_usd: r.cost.map(|cost| cost.usd()),
            cost_nanousd: r.cost.map(|cost| cost.total_nanousd()),
        }),
        agreement: record.recorded.as_ref().and_then(agreement_json),
        warnings: Vec::new(),
    };
    match &record.result {
        Ok(priced) => RequestJson {
            priced_as: priced.priced.then_some(priced.priced_as.as_str()),
            unknown_model: (!priced.model_known).then_some(true),
            usage: Some(&priced.usage),
            cost_usd: Some(priced.priced.then(|| priced.cost.usd())),
            cost_nanousd: Some(priced.priced.then(|| priced.cost.total_nanousd())),
            token_equivalents: Some(priced.token_equivalents.value()),
            ttft_ms: Some(priced.ttft_ms),
            miss: Some(priced.miss.as_ref()),
            warnings: priced.context_warning.iter().map(ToString::to_string).collect(),
            ..base
        },
        Err(error) => RequestJson {
            error: Some(ErrorJson { kind: error.kind.type_name(), message: &error.message }),
            ..base
        },
    }
}

fn agreement_json(recorded: &Recorded) -> Option<AgreementJson<'_>> {
    let agreement = recorded.agreement?;
    Some(AgreementJson {
        agrees: agreement.agrees,
        recorded_cached_share: agreement.recorded_share_ppm as f64 / 1e6,
        predicted_cached_share: agreement.predicted_share_ppm as f64 / 1e6,
        miss_reason: recorded.miss_reason.as_ref(),
    })
}

fn recorded_totals_json(recorded: &RecordedTotals) -> (RecordedTotalsJson, AgreementTotalsJson) {
    let totals = RecordedTotalsJson {
        requests: recorded.requests,
        usage: recorded.usage,
        cost_usd: recorded.cost.usd(),
        cost_nanousd: recorded.cost.total_nanousd(),
    };
    let agreement = AgreementTotalsJson {
        compared: recorded.compared,
        agreed: recorded.agreed,
        rate: round6(recorded.agreement_rate()),
        miss_reasons_compared: recorded.reasons_compared,
        miss_reasons_agreed: recorded.reasons_agreed,
    };
    (totals, agreement)
}

impl ReplayReport {
    /// The `--json` document (one line).
    #[allow(clippy::expect_used)] // the report is strings, integers and finite floats: serializing it cannot fail
    pub fn to_json(&self) -> String {
        let totals = &self.totals;
        let endpoint = &self.config.endpoint;
        let json = ReplayJson {
            requests: self.records.iter().map(request_json).collect(),
            unreadable: self
                .unreadable
                .iter()
                .map(|line| UnreadableJson { line: line.line, message: &line.message })
                .collect(),
            totals: {
                let (recorded, agreement) = self.recorded.as_ref().map(recorded_totals_json).unzip();
                ReplayTotalsJson { predicted: TotalsJson::from(totals), recorded, agreement }
            },
            settings: SettingsJson {
                policy: endpoint.cache.policy.name(),
                billing: endpoint.billing.name(),
                identity: endpoint.prompt.identity.name(),
                tokenizer: endpoint.tokenizer.name(),
                visibility: endpoint.cache.visibility,
                gap_ms: self.config.gap_ms,
                prices_date: &self.prices_date,
                cache_entries: self.cache.entries,
                cache_evictions: self.cache.evictions,
            },
        };
        serde_json::to_string(&json).expect("the report serializes")
    }

    /// A table for people.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:>5} {:>9} {:<24} {:>9} {:>9} {:>9} {:>9} {:>7} {:>12} {:>11}  miss",
            "#",
            "at_ms",
            "model",
            "read",
            "write_5m",
            "write_1h",
            "uncached",
            "output",
            "cost_usd",
            "tok_equiv"
        );
        for record in &self.records {
            out.push_str(&table_row(record));
        }
        out.push_str(&self.table_footer());
        out
    }

    fn table_footer(&self) -> String {
        let t = &self.totals;
        let mut out = format!(
            "\n{} requests ({} rejected): read {} · written {} · uncached {} · output {} tokens; cost ${:.6} = {:.1} token-equivalents; hit rate {:.1}%\n",
            t.requests + t.rejected,
            t.rejected,
            t.usage.cache_read_input_tokens,
            t.usage.cache_creation_input_tokens,
            t.usage.input_tokens,
            t.usage.output_tokens,
            t.cost.usd(),
            t.token_equivalents.value(),
            t.hit_rate() * 100.0
        );
        if let Some(recorded) = &self.recorded {
            out.push_str(&recorded_footer(recorded));
        }
        for line in self.unreadable.iter().take(super::report::NOTES_LISTED) {
            let _ = writeln!(out, "unreadable {line}");
        }
        if let Some(more) = self.unreadable.len().checked_sub(super::report::NOTES_LISTED).filter(|n| *n > 0)
        {
            let _ = writeln!(out, "… and {more} more unreadable lines");
        }
        if !t.unpriced_models.is_empty() {
            let models: Vec<&str> = t.unpriced_models.iter().map(String::as_str).collect();
            let _ = writeln!(
                out,
                "* not in the price table, so not in the cost: {} (--price-unknown-as MODEL prices them as MODEL)",
                models.join(", ")
            );
        }
        let unknown =
            self.records.iter().filter_map(|r| r.result.as_ref().ok()).find(|r| !r.model_known && r.priced);
        if let Some(record) = unknown {
            let _ = writeln!(
                out,
                "* not in the price table: priced as {} (--price-unknown-as)",
                record.priced_as
            );
        }
        let causes =
            self.records.iter().filter_map(|r| r.result.as_ref().ok()?.miss.as_ref().map(|miss| miss.cause));
        out.push_str(&layout_notes(causes));
        let endpoint = &self.config.endpoint;
        let _ = writeln!(
            out,
            "policy {} · billing {} · identity {} · tokenizer {} (token counts are estimates) · prices of {}",
            endpoint.cache.policy.name(),
            endpoint.billing.name(),
            endpoint.prompt.identity.name(),
            endpoint.tokenizer.name(),
            self.prices_date
        );
        out
    }
}

/// The recorded totals and the agreement, under the predicted ones.
fn recorded_footer(recorded: &RecordedTotals) -> String {
    let mut out = format!(
        "recorded ({} requests): read {} · written {} · uncached {} · output {} tokens; cost ${:.6}; agreement {}/{} ({:.1}%: cached share within 2 points or 1,000 tokens)\n",
        recorded.requests,
        recorded.usage.cache_read_input_tokens,
        recorded.usage.cache_creation_input_tokens,
        recorded.usage.input_tokens,
        recorded.usage.output_tokens,
        recorded.cost.usd(),
        recorded.agreed,
        recorded.compared,
        recorded.agreement_rate() * 100.0
    );
    if recorded.reasons_compared > 0 {
        out.push_str(&format!(
            "the API's cache-miss reasons: {} of {} named the same\n",
            recorded.reasons_agreed, recorded.reasons_compared
        ));
    }
    out
}

/// One request's line of the table (a model missing from the price table is starred).
fn table_row(record: &ReplayRecord) -> String {
    let model = record.model.as_deref().unwrap_or("?");
    let r = match &record.result {
        Ok(r) => r,
        Err(error) => {
            return format!(
                "{:>5} {:>9} {:<24} rejected: {error}\n",
                record.index,
                record.at.ms(),
                truncate(model, 24)
            );
        }
    };
    let model = if r.model_known { model.to_string() } else { format!("{model}*") };
    let u = &r.usage;
    let cost = if r.priced { format!("{:.6}", r.cost.usd()) } else { "unpriced".to_string() };
    format!(
        "{:>5} {:>9} {:<24} {:>9} {:>9} {:>9} {:>9} {:>7} {:>12} {:>11.1}  {}\n",
        record.index,
        record.at.ms(),
        truncate(&model, 24),
        u.cache_read_input_tokens,
        u.cache_creation.ephemeral_5m_input_tokens,
        u.cache_creation.ephemeral_1h_input_tokens,
        u.input_tokens,
        u.output_tokens,
        cost,
        r.token_equivalents.value(),
        describe_miss(r.miss.as_ref())
    )
}

fn truncate(text: &str, width: usize) -> &str {
    match text.char_indices().nth(width) {
        Some((cut, _)) => &text[..cut],
        None => text,
    }
}

fn round6(value: f64) -> f64 {
    (value * 1e6).round() / 1e6
}
