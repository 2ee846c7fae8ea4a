//! Streaming replay, end to end: a ~90 MB agent trace read from a file and replayed on 1, 2, 4
//! and 8 parsing threads, against the single-core floor measured in the same run.
//!
//! - `floor_ignored_any`: read the file and parse every line into `serde::de::IgnoredAny` on one
//!   core — the least any tool that reads the JSON must do.
//! - `threads/N`: `forkcache_ingest::replay::replay_stream` over the file with `threads: N` (reading,
//!   parsing, positions, hashes, tokens, cache, billing, miss diagnosis, records).
//!
//! After criterion's report, a summary prints each path's throughput as a ratio of the floor
//! (median of 5 passes each), which is what `benches/README.md` records.

use std::hint::black_box;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[path = "support/timing.rs"]
mod timing;
use criterion::{Criterion, Throughput};
use timing::median_secs;

use forkcache_engine::PriceTable;
use forkcache_ingest::replay::{ReplayConfig, replay_stream};
use forkcache_scenario::synth::{ConversationSpec, growing_conversation};

const THREADS: [usize; 4] = [1, 2, 4, 8];

/// The engine bench's trace (the default growing conversation), written to a temporary file.
fn trace_file() -> PathBuf {
    let trace: String =
        growing_conversation(&ConversationSpec::default()).iter().map(|body| format!("{body}\n")).collect();
    let path = std::env::temp_dir().join(format!("forkcache-bench-replay-{}.jsonl", std::process::id()));
    std::fs::write(&path, trace).expect("the trace is written");
    path
}

/// The floor reads as the replay does — large reads into one reused buffer, lines cut with
/// `memchr` — so the ratio compares parsing and pricing, not two ways of reading a file.
fn floor_ignored_any(path: &Path) {
    let mut file = std::fs::File::open(path).expect("the trace opens");
    let mut buffer = vec![0u8; FLOOR_READ_BYTES];
    let mut filled = 0;
    loop {
        if filled == buffer.len() {
            buffer.resize(buffer.len() * 2, 0);
        }
        let read = file.read(&mut buffer[filled..]).expect("the trace reads");
        let end = filled + read;
        let whole =
            if read == 0 { end } else { memchr::memrchr(b'\n', &buffer[..end]).map_or(0, |at| at + 1) };
        let mut start = 0;
        for newline in memchr::memchr_iter(b'\n', &buffer[..whole]) {
            parse_ignored(&buffer[start..newline]);
            start = newline + 1;
        }
        parse_ignored(&buffer[start..whole]);
        if read == 0 {
            return;
        }
        buffer.copy_within(whole..end, 0);
        filled = end - whole;
    }
}

fn parse_ignored(line: &[u8]) {
    if !line.is_empty() {
        let parsed: serde::de::IgnoredAny = serde_json::from_slice(line).expect("valid JSON");
        black_box(parsed);
    }
}

/// What the floor reads at a time (the replay's batches are about 256 KiB).
const FLOOR_READ_BYTES: usize = 256 * 1024;

fn streamed(path: &Path, threads: usize, prices: &PriceTable) {
    let reader = std::io::BufReader::new(std::fs::File::open(path).expect("the trace opens"));
    let config = ReplayConfig { threads, ..ReplayConfig::default() };
    let report = replay_stream(&config, prices.clone(), reader).expect("replays");
    assert_eq!(report.totals.rejected, 0);
    black_box(report);
}

fn print_ratios(path: &Path, prices: &PriceTable) {
    let gb = std::fs::metadata(path).expect("the trace exists").len() as f64 / 1e9;
    let floor = median_secs(5, || floor_ignored_any(path));
    println!("\nstreaming replay of {:.1} MB from a file, median of 5 passes:", gb * 1e3);
    println!("  floor (IgnoredAny, 1 core)  {:>6.2} GB/s", gb / floor);
    for threads in THREADS {
        let secs = median_secs(5, || streamed(path, threads, prices));
        println!(
            "  replay, {threads} threads         {:>6.2} GB/s  ({:.2}× the floor)",
            gb / secs,
            floor / secs
        );
    }
}

fn main() {
    let path = trace_file();
    let prices = PriceTable::builtin();
    // Criterion's plots need a font the machine may lack; the project ships one.
    forkcache_report::chart::register_font();
    let mut criterion = Criterion::default().configure_from_args();
    let mut group = criterion.benchmark_group("replay_stream");
    group.throughput(Throughput::Bytes(std::fs::metadata(&path).expect("the trace exists").len()));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(8));
    group.bench_function("floor_ignored_any", |b| b.iter(|| floor_ignored_any(&path)));
    for threads in THREADS {
        group.bench_function(format!("threads/{threads}"), |b| b.iter(|| streamed(&path, threads, &prices)));
    }
    group.finish();
    criterion.final_summary();
    if std::env::args().any(|arg| arg == "--bench") {
        print_ratios(&path, &prices);
    }
    let _ = std::fs::remove_file(&path);
}
