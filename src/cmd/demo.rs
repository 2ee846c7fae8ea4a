//! `forkcache demo`: the seeds' example and the fixture suite, printed; the reports written.

use std::process::ExitCode;

use clap::Args;

use forkcache_report::demo;

use super::report::{report_options, write_report};
use crate::flags::{GridArgs, JsonFlag, OutDir, PricesFlag, QuietFlag, SeedFlag};

/// `demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    #[command(flatten)]
    pub files: OutDir,
    #[command(flatten)]
    pub grids: GridArgs,
    #[command(flatten)]
    pub price_file: PricesFlag,
    #[command(flatten)]
    pub generator: SeedFlag,
    #[command(flatten)]
    pub output: JsonFlag,
    #[command(flatten)]
    pub quiet: QuietFlag,
}

pub fn run(args: &DemoArgs) -> anyhow::Result<ExitCode> {
    let prices = args.price_file.load()?;
    let runs = demo::seed_example(&prices)?;
    let suite = forkcache_scenario::run_suite_seeded(&prices, args.generator.seed)?;
    let tables = !(args.output.json || args.quiet.quiet);
    if tables {
        print!("{}", demo::seed_example_table(&runs, &prices.date));
        print!("\n{}", demo::suite_table(&suite));
        print!("\n{}", demo::mistakes_table(&suite));
        println!();
    }
    let options = report_options(&args.grids, None, args.generator.seed)?;
    let written = write_report(&args.files.out, &options, &prices, tables)?;
    if args.output.json {
        println!("{}", demo::demo_json(&runs, &suite, &written.files));
    }
    Ok(ExitCode::SUCCESS)
}
