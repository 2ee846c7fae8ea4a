//! `forkcache sweep`: one parameter grid, or one shard of it, to CSV.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use forkcache_engine::PriceTable;

use super::{files_json, not_a_trace, progress_bar, read_input};
use crate::flags::{JsonFlag, OutDir, PricesFlag, ProviderList, QuietFlag, SeedFlag};

/// `sweep`.
#[derive(Args, Debug)]
pub struct SweepArgs {
    /// The sweep file (see fixtures/sweeps/ and docs/sweep.md); `-` reads standard input.
    pub sweep: PathBuf,
    #[command(flatten)]
    pub files: OutDir,
    /// Run only part i of n of the grid (contiguous cells; the header is in part 1 only, so
    /// the parts' files concatenate, in order, to the whole grid's).
    #[arg(long, value_name = "i/n", value_parser = forkcache_report::sweep::Shard::parse)]
    pub shard: Option<forkcache_report::sweep::Shard>,
    /// Worker threads (default: one per core). The output does not depend on it.
    #[arg(long, value_parser = crate::flags::parse_threads)]
    pub threads: Option<usize>,
    #[command(flatten)]
    pub price_file: PricesFlag,
    /// Replace the grid's provider axis: one provider, several comma-separated, or `all`
    /// (docs/providers.md). `--prices` replaces Anthropic's table only.
    #[arg(long, value_name = "PROVIDER[,…]", value_parser = crate::flags::parse_providers)]
    pub provider: Option<ProviderList>,
    #[command(flatten)]
    pub generator: SeedFlag,
    #[command(flatten)]
    pub output: JsonFlag,
    #[command(flatten)]
    pub quiet: QuietFlag,
}

impl SweepArgs {
    /// The price table named by `--prices`.
    pub fn prices(&self) -> anyhow::Result<PriceTable> {
        self.price_file.load()
    }
}

pub fn run(args: &SweepArgs) -> anyhow::Result<ExitCode> {
    use forkcache_report::sweep::{self, SweepOptions};
    let mut spec = read_sweep(&args.sweep)?;
    if let Some(seed) = args.generator.seed {
        spec.scenario.seed = seed;
    }
    if let Some(ProviderList(providers)) = &args.provider {
        spec.grid.provider = Some(providers.clone());
        spec.validate().with_context(|| format!("in {} with --provider", args.sweep.display()))?;
    }
    let shard = args.shard.unwrap_or_default();
    let options = SweepOptions { threads: args.threads, shard };
    let cells = shard.range(spec.cells().len()).len();
    let chatty = !(args.output.json || args.quiet.quiet);
    let bar = progress_bar(chatty, cells as u64, "cells");
    let out = &args.files.out;
    let written = sweep::write(out, &spec, &options, &args.prices()?, || bar.inc(1))
        .with_context(|| format!("sweeping {}", args.sweep.display()))?;
    bar.finish_and_clear();
    if args.output.json {
        let mut json =
            files_json(out, &[written.csv.display().to_string(), written.meta.display().to_string()]);
        json["rows"] = written.rows.into();
        json["cells_total"] = written.cells_total.into();
        // The shard is counted by people: part 1 of n is the first.
        json["shard"] = serde_json::json!({"i": shard.index, "n": shard.count});
        println!("{json}");
    } else if chatty {
        println!("wrote {}", written.csv.display());
        println!("wrote {}", written.meta.display());
        println!("{} of {} cells (shard {}/{})", written.rows, written.cells_total, shard.index, shard.count);
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn read_sweep(path: &std::path::Path) -> anyhow::Result<forkcache_report::sweep::SweepSpec> {
    let text = read_input(path)?;
    not_a_trace(&text, path, "sweep", "a sweep file (docs/sweep.md)")?;
    forkcache_report::sweep::SweepSpec::from_json(&text).with_context(|| format!("in {}", path.display()))
}
