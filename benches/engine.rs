//! Engine speed: replaying a ~90 MB agent trace, against two floors measured in the same run.
//!
//! - `floor_ignored_any`: parse every line into `serde::de::IgnoredAny` — the least any tool
//!   that reads the JSON must do.
//! - `value_tree`: parse every line into `serde_json::Value` — what a naive simulator does first.
//! - `replay`: forkcache's full path (parse, positions, hashes, tokens, cache, billing, miss
//!   diagnosis, records) via `forkcache::replay`.
//!
//! After criterion's own report, a short summary prints the throughput ratios measured in this
//! run (median of several passes each), which is what `benches/README.md` records.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use forkcache::synth::{ConversationSpec, growing_conversation};
use forkcache::{PriceTable, ReplayConfig, replay};

fn trace() -> String {
    growing_conversation(&ConversationSpec::default()).iter().map(|body| format!("{body}\n")).collect()
}

fn floor_ignored_any(trace: &str) {
    for line in trace.lines() {
        let parsed: serde::de::IgnoredAny = serde_json::from_str(line).expect("valid JSON");
        black_box(parsed);
    }
}

fn value_tree(trace: &str) {
    for line in trace.lines() {
        let parsed: serde_json::Value = serde_json::from_str(line).expect("valid JSON");
        black_box(parsed);
    }
}

fn full_replay(trace: &str, prices: &PriceTable) {
    let report = replay(&ReplayConfig::default(), prices.clone(), trace).expect("replays");
    assert_eq!(report.totals.rejected, 0);
    black_box(report);
}

fn replay_group(c: &mut Criterion, trace: &str, prices: &PriceTable) {
    let mut group = c.benchmark_group("replay_trace");
    group.throughput(Throughput::Bytes(trace.len() as u64));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(12));
    group.bench_function("floor_ignored_any", |b| b.iter(|| floor_ignored_any(trace)));
    group.bench_function("value_tree", |b| b.iter(|| value_tree(trace)));
    group.bench_function("replay", |b| b.iter(|| full_replay(trace, prices)));
    group.finish();
}

fn median_secs(passes: usize, mut run: impl FnMut()) -> f64 {
    let mut times: Vec<f64> = (0..passes)
        .map(|_| {
            let start = Instant::now();
            run();
            start.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[passes / 2]
}

fn print_ratios(trace: &str, prices: &PriceTable) {
    let gb = trace.len() as f64 / 1e9;
    let floor = median_secs(5, || floor_ignored_any(trace));
    let value = median_secs(5, || value_tree(trace));
    let full = median_secs(5, || full_replay(trace, prices));
    println!("\nreplay of {:.1} MB ({} requests), median of 5 passes:", gb * 1e3, trace.lines().count());
    println!("  floor (IgnoredAny)  {:>6.2} GB/s", gb / floor);
    println!("  Value tree          {:>6.2} GB/s  ({:.2}× the floor)", gb / value, floor / value);
    println!(
        "  forkcache replay    {:>6.2} GB/s  ({:.2}× the floor, {:.2}× Value)",
        gb / full,
        floor / full,
        value / full
    );
}

fn main() {
    let trace = trace();
    let prices = PriceTable::builtin();
    let mut criterion = Criterion::default().configure_from_args();
    replay_group(&mut criterion, &trace, &prices);
    criterion.final_summary();
    if std::env::args().any(|arg| arg == "--bench") {
        print_ratios(&trace, &prices);
    }
}
