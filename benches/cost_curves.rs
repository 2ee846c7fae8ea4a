//! Cost curves, under `cargo bench`: what one fork costs, sharing the parent's cache and not, as
//! the parent's history grows from 10K to 1M tokens, for 1, 4, 16 and 64 forks.
//!
//! Not a timing (criterion measures only forkcache's own speed): simulated costs are
//! deterministic outputs, so this computes them and writes `reports/cost_curves.csv`, `.png`
//! and `.svg` — the same bytes `forkcache report` writes — then prints the curves. Run outside
//! `cargo bench` (e.g. by `cargo test --benches`), it computes and prints but writes nothing.

use std::path::Path;

use forkcache_engine::PriceTable;
use forkcache_report::sweep::{SweepOptions, SweepResult, SweepSpec, run};
use forkcache_report::{cost_curve_artifacts, write};

fn main() {
    let prices = PriceTable::builtin();
    let spec = SweepSpec::cost_curves();
    let result = run(&spec, &SweepOptions::default(), &prices, || {}).expect("the cost-curve grid runs");
    print_curves(&result);
    let artifacts = cost_curve_artifacts(&result).expect("the cost curves draw");
    if std::env::args().any(|arg| arg == "--bench") {
        let reports = Path::new(env!("CARGO_MANIFEST_DIR")).join("reports");
        for path in write(&reports, &artifacts).expect("writing reports/") {
            println!("wrote {}", path.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap_or(&path).display());
        }
    } else {
        println!("(not under `cargo bench`: nothing written)");
    }
}

/// One line per history size: the cost of one fork, shared and naive, for each fork count.
fn print_curves(result: &SweepResult) {
    let mut forks: Vec<u32> = result.rows.iter().map(|r| r.cell.forks).collect();
    forks.sort_unstable();
    forks.dedup();
    println!(
        "\ncost curves: USD per fork, sharing the cache / not sharing (prices of {})",
        result.prices_date
    );
    print!("{:>10}", "history");
    for n in &forks {
        print!("  {:>19}", format!("{n} fork(s)"));
    }
    println!();
    let mut histories: Vec<u64> = result.rows.iter().map(|r| r.cell.history_tokens).collect();
    histories.dedup();
    for history in histories {
        print!("{history:>10}");
        for &n in &forks {
            let row = result.rows.iter().find(|r| r.cell.history_tokens == history && r.cell.forks == n);
            let per_fork = |nanousd: u64| nanousd as f64 / 1e9 / f64::from(n);
            match row {
                Some(r) => print!(
                    "  {:>8.4} / {:>8.4}",
                    per_fork(r.subagents.cost_nanousd),
                    per_fork(r.subagents.naive_nanousd)
                ),
                None => print!("  {:>19}", "-"),
            }
        }
        println!();
    }
}
