//! `forkcache report`: every file of `reports/`, and with `--html` one page of them.

use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use super::sweep::read_sweep;
use super::{files_json, progress_bar};
use crate::flags::{GridArgs, JsonFlag, OutDir, PricesFlag, QuietFlag, SeedFlag};

/// `report`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    #[command(flatten)]
    pub files: OutDir,
    #[command(flatten)]
    pub grids: GridArgs,
    /// Worker threads for the sweeps (default: one per core). The output does not depend on it.
    #[arg(long, value_parser = crate::flags::parse_threads)]
    pub threads: Option<usize>,
    /// Also write index.html: every chart inline and the small tables, sortable, in one
    /// self-contained page (nothing fetched when it opens).
    #[arg(long)]
    pub html: bool,
    #[command(flatten)]
    pub price_file: PricesFlag,
    #[command(flatten)]
    pub generator: SeedFlag,
    #[command(flatten)]
    pub output: JsonFlag,
    #[command(flatten)]
    pub quiet: QuietFlag,
}

pub fn run(args: &ReportArgs) -> anyhow::Result<ExitCode> {
    let options = report_options(&args.grids, args.threads, args.generator.seed)?;
    let out = &args.files.out;
    let chatty = !(args.output.json || args.quiet.quiet);
    let mut written = write_report(out, &options, &args.price_file.load()?, chatty)?;
    if args.html {
        let page = forkcache_report::html_page(&written.artifacts).context("building index.html")?;
        let paths = forkcache_report::write(out, std::slice::from_ref(&page))
            .with_context(|| format!("writing {}", out.display()))?;
        if chatty {
            println!("wrote {}", paths[0].display());
        }
        written.files.extend(paths.iter().map(|path| path.display().to_string()));
    }
    if args.output.json {
        println!("{}", files_json(out, &written.files));
    }
    Ok(ExitCode::SUCCESS)
}

/// What the report runs: the built-in grids, or the files `--sweep` and `--cost-curves` name.
pub(super) fn report_options(
    grids: &crate::flags::GridArgs,
    threads: Option<usize>,
    seed: Option<u64>,
) -> anyhow::Result<forkcache_report::ReportOptions> {
    let mut options = forkcache_report::ReportOptions { threads, seed, ..Default::default() };
    if let Some(path) = &grids.sweep {
        options.sweep = read_sweep(path)?;
    }
    if let Some(path) = &grids.cost_curves {
        options.cost_curves = read_sweep(path)?;
    }
    Ok(options)
}

/// What `write_report` built and where it wrote it.
pub(super) struct Written {
    pub artifacts: Vec<forkcache_report::Artifact>,
    /// The paths written, as printed.
    pub files: Vec<String>,
}

/// Builds every report file (sweeps included, with a progress bar when `chatty`) and writes them
/// to `out`.
pub(super) fn write_report(
    out: &std::path::Path,
    options: &forkcache_report::ReportOptions,
    prices: &forkcache_engine::PriceTable,
    chatty: bool,
) -> anyhow::Result<Written> {
    let bar = progress_bar(chatty, options.cells() as u64, "sweep cells");
    let artifacts =
        forkcache_report::build(options, prices, || bar.inc(1)).context("building the reports")?;
    bar.finish_and_clear();
    let paths =
        forkcache_report::write(out, &artifacts).with_context(|| format!("writing {}", out.display()))?;
    if chatty {
        println!(
            "wrote {} files to {} (what they hold: {})",
            paths.len(),
            out.display(),
            out.join("README.md").display()
        );
    }
    Ok(Written { artifacts, files: paths.iter().map(|path| path.display().to_string()).collect() })
}
