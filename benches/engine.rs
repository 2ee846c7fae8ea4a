//! Engine speed: replaying a ~90 MB agent trace, against two floors measured in the same run.
//!
//! - `floor_ignored_any`: parse every line into `serde::de::IgnoredAny` — the least any tool
//!   that reads the JSON must do.
//! - `value_tree`: parse every line into `serde_json::Value` — what a naive simulator does first.
//! - `replay`: forkcache's full path (parse, positions, hashes, tokens, cache, billing, miss
//!   diagnosis, records) via `forkcache_ingest::replay::replay`.
//!
//! - `scenario/session_1000_turns_8_forks`: a 1,000-turn session with a ~200K-token history
//!   (auto-compaction at 200K) spawning 8 forks every turn: 9,004 requests through the scenario
//!   engine, naive pricing on, byte verification off.
//! - `scenario/per_request/{10K,100K,1M}`: 40 spawns of 8 forks on a history of that size.
//!
//! Sweep speed (cells per second on one and two threads) is `benches/sweep.rs`.
//!
//! After criterion's own report, a short summary prints the ratios measured in this run (median
//! of several passes each) — replay against its floors, and the marginal cost of one scenario
//! request at each history size (timing 100 spawns minus 20, so the one-time history setup is
//! excluded) — which is what `benches/README.md` records.

use std::hint::black_box;
use std::time::Duration;

#[path = "support/timing.rs"]
mod timing;
use criterion::{Criterion, Throughput};
use timing::median_secs;

use forkcache_engine::PriceTable;
use forkcache_ingest::{replay::ReplayConfig, replay::replay};
use forkcache_scenario::synth::{ConversationSpec, growing_conversation};
use forkcache_scenario::{RunConfig, ScenarioSpec, run};

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

/// A session whose history starts at `history_tokens` (default generated turns average about
/// 4,000 tokens) and spawns 8 forks `spawns` times.
fn forking_session(history_tokens: u64, spawns: usize, compact_at: Option<u64>) -> ScenarioSpec {
    let turns = (history_tokens / 4_000).max(1);
    let fork = serde_json::json!({"fork": {"count": 8}});
    serde_json::from_value(serde_json::json!({
        "name": "bench",
        "history": {"generate": {"turns": turns}},
        "agent": {"compaction_threshold_tokens": compact_at},
        "timeline": vec![fork; spawns],
    }))
    .expect("a valid spec")
}

fn simulate(spec: &ScenarioSpec, prices: &PriceTable) -> usize {
    let mut config = RunConfig::for_spec(spec);
    config.verify = false;
    let report = run(spec, &config, prices).expect("the scenario runs");
    black_box(report.records.len())
}

const HISTORY_SIZES: [(&str, u64); 3] = [("10K", 10_000), ("100K", 100_000), ("1M", 1_000_000)];

fn scenario_group(c: &mut Criterion, prices: &PriceTable) {
    let mut group = c.benchmark_group("scenario");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    let session = forking_session(200_000, 1_000, Some(200_000));
    group.throughput(Throughput::Elements(simulate(&session, prices) as u64));
    group.bench_function("session_1000_turns_8_forks", |b| b.iter(|| simulate(&session, prices)));
    for (name, tokens) in HISTORY_SIZES {
        let spec = forking_session(tokens, 40, None);
        group.throughput(Throughput::Elements(simulate(&spec, prices) as u64));
        group.bench_function(format!("per_request/{name}"), |b| b.iter(|| simulate(&spec, prices)));
    }
    group.finish();
}

fn print_scenario_costs(prices: &PriceTable) {
    let session = forking_session(200_000, 1_000, Some(200_000));
    let requests = simulate(&session, prices);
    let secs = median_secs(3, || {
        simulate(&session, prices);
    });
    println!("\nscenario engine, one core, median of 3 passes:");
    println!("  1,000-turn session, 8 forks per turn ({requests} requests): {secs:.3} s");
    let costs: Vec<f64> = HISTORY_SIZES
        .iter()
        .map(|&(name, tokens)| {
            let (short, long) = (forking_session(tokens, 20, None), forking_session(tokens, 100, None));
            let extra = (simulate(&long, prices) - simulate(&short, prices)) as f64;
            let short_secs = median_secs(5, || {
                simulate(&short, prices);
            });
            let long_secs = median_secs(5, || {
                simulate(&long, prices);
            });
            let ns = (long_secs - short_secs) * 1e9 / extra;
            println!("  marginal cost per request, {name:>4}-token history: {ns:>8.0} ns");
            ns
        })
        .collect();
    let (low, high) = costs.iter().fold((f64::MAX, 0.0f64), |(lo, hi), &c| (lo.min(c), hi.max(c)));
    println!("  largest ÷ smallest: {:.2}× (target: within 2×)", high / low);
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
    forkcache_report::chart::register_font();
    let mut criterion = Criterion::default().configure_from_args();
    replay_group(&mut criterion, &trace, &prices);
    scenario_group(&mut criterion, &prices);
    criterion.final_summary();
    if std::env::args().any(|arg| arg == "--bench") {
        print_ratios(&trace, &prices);
        print_scenario_costs(&prices);
    }
}
