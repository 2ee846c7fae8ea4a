//! Runs a parsed command line: builds library configs, calls the library, prints results.

use std::io::Read as _;
use std::process::ExitCode;

use anyhow::Context;
use forkcache::demo;
use forkcache::replay::{ReplayConfig, replay};

use crate::cli::{Cli, Command, DemoArgs, ReplayArgs};

/// Runs one command; the exit code says whether it succeeded.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Demo(args) => run_demo(&args),
        Command::Replay(args) => run_replay(&args),
        Command::Serve(args) => crate::serve_command::run_serve(&args),
    }
}

fn run_demo(args: &DemoArgs) -> anyhow::Result<ExitCode> {
    let prices = forkcache::PriceTable::builtin();
    let runs = demo::seed_example(&prices)?;
    print!("{}", demo::seed_example_table(&runs, &prices.date));
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let path = args.out.join("seed_example.csv");
    std::fs::write(&path, demo::seed_example_csv(&runs)?)
        .with_context(|| format!("writing {}", path.display()))?;
    println!("\nwrote {}", path.display());
    Ok(ExitCode::SUCCESS)
}

fn run_replay(args: &ReplayArgs) -> anyhow::Result<ExitCode> {
    let trace = read_input(&args.trace)?;
    let config = ReplayConfig { endpoint: args.engine.endpoint_config(), gap_ms: args.gap_ms };
    let report = replay(&config, args.engine.prices()?, &trace)
        .with_context(|| format!("replaying {}", args.trace.display()))?;
    if args.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_table());
    }
    Ok(ExitCode::SUCCESS)
}

fn read_input(path: &std::path::Path) -> anyhow::Result<String> {
    if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).context("reading standard input")?;
        return Ok(text);
    }
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}
