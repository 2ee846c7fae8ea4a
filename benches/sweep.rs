//! Sweep speed: cells per second on one and on two worker threads, the way `forkcache sweep`
//! runs them (`sweep::write`: cells taken in grid order, rows through the reorder buffer into
//! a CSV file, flushed a row at a time).
//!
//! - `sweep_cells/threads/{1,2}`: the first tenth of the default grid
//!   (`fixtures/sweeps/default.json`, 2,184 cells) written to a scratch directory.
//!
//! After criterion's report, the summary prints both throughputs and their ratio, read from
//! criterion's own medians of this run (`target/criterion/sweep_cells/threads/N/new`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput};

use forkcache_engine::PriceTable;
use forkcache_report::sweep::{self, Shard, SweepOptions, SweepSpec};

const GROUP: &str = "sweep_cells";
const THREADS: [usize; 2] = [1, 2];

fn scratch() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-sweep");
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

fn main() {
    let spec = SweepSpec::default_grid();
    let prices = PriceTable::builtin();
    let shard = Shard::parse("1/10").expect("a valid shard");
    let cells = shard.range(spec.cells().len()).len();
    let out = scratch();
    // Criterion's charts need a font; the one the reports embed.
    forkcache_report::chart::register_font();
    let mut criterion = Criterion::default().configure_from_args();
    let mut group = criterion.benchmark_group(GROUP);
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(15));
    group.throughput(Throughput::Elements(cells as u64));
    for threads in THREADS {
        let options = SweepOptions { threads: Some(threads), shard };
        group.bench_function(BenchmarkId::new("threads", threads), |b| {
            b.iter(|| {
                let written = sweep::write(&out, &spec, &options, &prices, || {}).expect("the sweep runs");
                assert_eq!(written.rows, cells);
            })
        });
    }
    group.finish();
    criterion.final_summary();
    if std::env::args().any(|arg| arg == "--bench") {
        print_summary(cells);
    }
}

/// Criterion's median time per iteration (ns) for `threads`, from this run's estimates.
fn median_ns(threads: usize) -> Option<f64> {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| PathBuf::from("target"), PathBuf::from);
    let path = target.join(format!("criterion/{GROUP}/threads/{threads}/new/estimates.json"));
    let estimates: serde_json::Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    estimates["median"]["point_estimate"].as_f64()
}

fn print_summary(cells: usize) {
    let Some(medians) = THREADS.iter().map(|&t| median_ns(t)).collect::<Option<Vec<f64>>>() else {
        println!("\n(no criterion estimates for every thread count: run without a filter to see the ratio)");
        return;
    };
    println!("\nsweep, {cells} cells of the default grid, criterion medians:");
    for (threads, ns) in THREADS.iter().zip(&medians) {
        println!("  {threads} thread(s): {:>8.0} cells/s", cells as f64 / (ns / 1e9));
    }
    println!("  2 threads ÷ 1 thread: {:.2}× (target ≥ 1.8× on 2 cores)", medians[0] / medians[1]);
}
