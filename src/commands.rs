//! Runs a parsed command line: builds library configs, calls the library, prints results.

use std::io::Read as _;
use std::process::ExitCode;

use anyhow::Context;
use forkcache::demo;
use forkcache::replay::{ReplayConfig, replay};

use crate::cli::{
    Cli, Command, DemoArgs, ExplainArgs, ImportSource, ReplayArgs, ReportArgs, RunArgs, SweepArgs,
};
use crate::progress;

/// Runs one command; the exit code says whether it succeeded.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Demo(args) => run_demo(&args),
        Command::Replay(args) => run_replay(&args),
        Command::Run(args) => run_scenario(&args),
        Command::Explain(args) => run_explain(&args),
        Command::Sweep(args) => run_sweep(&args),
        Command::Report(args) => run_report(&args),
        Command::Serve(args) => crate::serve_command::run_serve(&args),
        Command::Proxy(args) => crate::proxy_command::run_proxy(&args),
        Command::Prices(args) => run_prices(&args),
        Command::Import(ImportSource::ClaudeCode(args)) => crate::import_command::run_claude_code(&args),
        Command::MergeShards(args) => run_merge_shards(&args),
        Command::Completions(args) => print_bytes(&crate::cli::completions(args.shell)),
        Command::Man => print_bytes(&crate::cli::man_page()?),
    }
}

fn run_demo(args: &DemoArgs) -> anyhow::Result<ExitCode> {
    let prices = forkcache::PriceTable::builtin();
    let runs = demo::seed_example(&prices)?;
    print!("{}", demo::seed_example_table(&runs, &prices.date));
    let suite = forkcache::scenario::run_suite(&prices)?;
    print!("\n{}", forkcache::scenario::suite_table(&suite));
    print!("\n{}", forkcache::scenario::mistakes_table(&suite));
    println!();
    write_report(&args.out, &forkcache::report::ReportOptions::default(), &prices)?;
    Ok(ExitCode::SUCCESS)
}

fn run_report(args: &ReportArgs) -> anyhow::Result<ExitCode> {
    let options = forkcache::report::ReportOptions { threads: args.threads, ..Default::default() };
    let artifacts = write_report(&args.out, &options, &forkcache::PriceTable::builtin())?;
    if args.html {
        let page = forkcache::report::html_page(&artifacts).context("building index.html")?;
        let paths = forkcache::report::write(&args.out, std::slice::from_ref(&page))
            .with_context(|| format!("writing {}", args.out.display()))?;
        println!("wrote {}", paths[0].display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Builds every report file (sweeps included, with a progress bar) and writes them to `out`.
fn write_report(
    out: &std::path::Path,
    options: &forkcache::report::ReportOptions,
    prices: &forkcache::PriceTable,
) -> anyhow::Result<Vec<forkcache::report::Artifact>> {
    let bar = progress::bar(options.cells() as u64, "sweep cells");
    let artifacts =
        forkcache::report::build(options, prices, || bar.inc(1)).context("building the reports")?;
    bar.finish_and_clear();
    let paths =
        forkcache::report::write(out, &artifacts).with_context(|| format!("writing {}", out.display()))?;
    println!(
        "wrote {} files to {} (what they hold: {})",
        paths.len(),
        out.display(),
        out.join("README.md").display()
    );
    Ok(artifacts)
}

fn run_sweep(args: &SweepArgs) -> anyhow::Result<ExitCode> {
    use forkcache::sweep::{self, Shard, SweepOptions, SweepSpec};
    let text = read_input(&args.sweep)?;
    let spec = SweepSpec::from_json(&text).with_context(|| format!("in {}", args.sweep.display()))?;
    let shard = args.shard.as_deref().map(Shard::parse).transpose()?.unwrap_or_default();
    let options = SweepOptions { threads: args.threads, shard };
    let cells = shard.range(spec.cells().len()).len();
    let bar = progress::bar(cells as u64, "cells");
    let written = sweep::write(&args.out, &spec, &options, &args.prices()?, || bar.inc(1))
        .with_context(|| format!("sweeping {}", args.sweep.display()))?;
    bar.finish_and_clear();
    println!("wrote {}", written.csv.display());
    println!("wrote {}", written.meta.display());
    println!("{} of {} cells (shard {}/{})", written.rows, written.cells_total, shard.index, shard.count);
    Ok(ExitCode::SUCCESS)
}

fn run_merge_shards(args: &crate::cli::MergeShardsArgs) -> anyhow::Result<ExitCode> {
    // The shards are the user's input: a missing, duplicated or foreign one is exit 1.
    let merged = match forkcache::sweep::merge_shards(&args.dir) {
        Ok(merged) => merged,
        Err(err) => {
            eprintln!("forkcache: merge-shards: {err}");
            return Ok(ExitCode::from(1));
        }
    };
    let out = args.out.as_deref().unwrap_or(&args.dir);
    let artifacts = [
        forkcache::report::Artifact { name: "sweep.csv".into(), bytes: merged.csv },
        forkcache::report::Artifact { name: "sweep.meta.json".into(), bytes: merged.meta.into_bytes() },
    ];
    for path in
        forkcache::report::write(out, &artifacts).with_context(|| format!("writing {}", out.display()))?
    {
        println!("wrote {}", path.display());
    }
    println!("{} shards, {} cells", merged.shards, merged.rows);
    Ok(ExitCode::SUCCESS)
}

/// Exit code of a command that finished but skipped unreadable input lines.
const EXIT_SOME_LINES_UNREADABLE: u8 = 3;
/// Exit code of invalid input.
const EXIT_INVALID_INPUT: u8 = 1;

/// Exit 0 when every line was read (requests the API would reject are results); 3 when some
/// lines were unreadable (each named on stderr); 1 when `--strict` stopped at one.
fn run_replay(args: &ReplayArgs) -> anyhow::Result<ExitCode> {
    let trace = read_input_bytes(&args.trace)?;
    let config =
        ReplayConfig { endpoint: args.engine.endpoint_config(), gap_ms: args.gap_ms, strict: args.strict };
    if args.calibrate {
        return run_calibrate(args, &config, &trace);
    }
    let report = match replay(&config, args.engine.prices()?, &trace) {
        Ok(report) => report,
        Err(err) => return replay_failed(args, err),
    };
    if args.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_table());
    }
    for line in &report.unreadable {
        eprintln!("forkcache: {}: skipped unreadable {line}", args.trace.display());
    }
    if report.unreadable.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        Ok(ExitCode::from(EXIT_SOME_LINES_UNREADABLE))
    }
}

/// A replay that stopped: at an unreadable line under `--strict` (exit 1, the line on stderr), or
/// before it began.
fn replay_failed(args: &ReplayArgs, err: forkcache::replay::ReplayError) -> anyhow::Result<ExitCode> {
    match err {
        forkcache::replay::ReplayError::Unreadable(line) => {
            eprintln!("forkcache: {}: {line}", args.trace.display());
            Ok(ExitCode::from(EXIT_INVALID_INPUT))
        }
        err => Err(err).with_context(|| format!("replaying {}", args.trace.display())),
    }
}

fn run_calibrate(args: &ReplayArgs, config: &ReplayConfig, trace: &[u8]) -> anyhow::Result<ExitCode> {
    let calibration = match forkcache::calibrate::calibrate(config, &args.engine.prices()?, trace) {
        Ok(calibration) => calibration,
        Err(err) => return replay_failed(args, err),
    };
    if args.json {
        println!("{}", calibration.to_json());
    } else {
        print!("{}", calibration.to_table());
    }
    // As replay: each skipped line named on stderr, and exit 3.
    for line in &calibration.unreadable {
        eprintln!("forkcache: {}: skipped unreadable {line}", args.trace.display());
    }
    if calibration.unreadable.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        Ok(ExitCode::from(EXIT_SOME_LINES_UNREADABLE))
    }
}

fn run_scenario(args: &RunArgs) -> anyhow::Result<ExitCode> {
    use forkcache::scenario::{RunConfig, ScenarioSpec, run};
    let text = read_input(&args.scenario)?;
    let mut spec =
        ScenarioSpec::from_json(&text).with_context(|| format!("in {}", args.scenario.display()))?;
    // Custom agents' files are named relative to the scenario file.
    let base =
        args.scenario.parent().filter(|dir| !dir.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    spec.load_agent_files(base).with_context(|| format!("in {}", args.scenario.display()))?;
    args.apply(&mut spec);
    let mut config = RunConfig::for_spec(&spec);
    config.endpoint.tokenizer = args.tokenizer.into();
    config.keep_bodies = args.bodies.is_some();
    let report = run(&spec, &config, &args.prices()?)
        .with_context(|| format!("running {}", args.scenario.display()))?;
    if let Some(dir) = &args.bodies {
        write_bodies(dir, &report)?;
    }
    if args.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_table());
    }
    Ok(ExitCode::SUCCESS)
}

fn write_bodies(dir: &std::path::Path, report: &forkcache::scenario::ScenarioReport) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for record in &report.records {
        let path = dir.join(format!("{:04}-{}.json", record.index, record.role.name()));
        let body = record.body.as_deref().unwrap_or_default();
        std::fs::write(&path, body).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn run_explain(args: &ExplainArgs) -> anyhow::Result<ExitCode> {
    let Some(b_path) = &args.b else { return run_explain_request(args) };
    let a = request_body(&read_input(&args.a)?).with_context(|| format!("in {}", args.a.display()))?;
    let b = request_body(&read_input(b_path)?).with_context(|| format!("in {}", b_path.display()))?;
    let explanation = forkcache::verify::explain(&a, &b).context("reading the requests")?;
    if args.json {
        println!("{}", serde_json::to_string(&explanation)?);
    } else {
        print!("{}", explanation.to_text());
    }
    Ok(ExitCode::SUCCESS)
}

/// `explain TRACE --request N`.
fn run_explain_request(args: &ExplainArgs) -> anyhow::Result<ExitCode> {
    let index = args.request.context("--request is required with a single file")?;
    let trace = read_input(&args.a)?;
    let config = ReplayConfig { endpoint: args.engine.endpoint_config(), gap_ms: args.gap_ms, strict: false };
    let explanation = forkcache::explain::explain_request(&config, args.engine.prices()?, &trace, index)
        .with_context(|| format!("explaining {}", args.a.display()))?;
    if args.json {
        println!("{}", serde_json::to_string(&explanation)?);
    } else {
        print!("{}", explanation.to_text());
    }
    Ok(ExitCode::SUCCESS)
}

/// A request body, or the `body` of a trace envelope (an object kept byte for byte, or a string).
fn request_body(text: &str) -> anyhow::Result<String> {
    #[derive(serde::Deserialize)]
    struct Envelope<'a> {
        #[serde(borrow)]
        body: Option<&'a serde_json::value::RawValue>,
    }
    let text = text.trim();
    let envelope: Envelope = serde_json::from_str(text).context("not a JSON object")?;
    match envelope.body {
        None => Ok(text.to_string()),
        Some(body) => match serde_json::from_str::<String>(body.get()) {
            Ok(string) => Ok(string),
            Err(_) => Ok(body.get().to_string()),
        },
    }
}

/// A file (or `-`, standard input) as bytes: a trace may hold lines that are not UTF-8.
fn read_input_bytes(path: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    if path.as_os_str() == "-" {
        let mut bytes = Vec::new();
        std::io::stdin().read_to_end(&mut bytes).context("reading standard input")?;
        return Ok(bytes);
    }
    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
}

fn read_input(path: &std::path::Path) -> anyhow::Result<String> {
    if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).context("reading standard input")?;
        return Ok(text);
    }
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

fn run_prices(args: &crate::cli::PricesArgs) -> anyhow::Result<ExitCode> {
    let table = args.prices()?;
    if args.json {
        println!("{}", table.to_json());
    } else {
        print!("{}", table.to_table());
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes generated text (a completion script, the man page) to standard output as is.
fn print_bytes(bytes: &[u8]) -> anyhow::Result<ExitCode> {
    use std::io::Write as _;
    std::io::stdout().write_all(bytes).context("writing to standard output")?;
    Ok(ExitCode::SUCCESS)
}
