//! Runs a parsed command line: builds library configs, calls the library, prints results.

use std::io::Read as _;
use std::process::ExitCode;

use anyhow::Context;
use forkcache::demo;
use forkcache::replay::{ReplayConfig, replay_stream};

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
    let prices = args.price_file.load()?;
    let runs = demo::seed_example(&prices)?;
    let suite = forkcache::scenario::run_suite_seeded(&prices, args.generator.seed)?;
    let tables = !(args.output.json || args.quiet.quiet);
    if tables {
        print!("{}", demo::seed_example_table(&runs, &prices.date));
        print!("\n{}", forkcache::scenario::suite_table(&suite));
        print!("\n{}", forkcache::scenario::mistakes_table(&suite));
        println!();
    }
    let options = report_options(&args.grids, None, args.generator.seed)?;
    let written = write_report(&args.files.out, &options, &prices, tables)?;
    if args.output.json {
        println!("{}", demo::demo_json(&runs, &suite, &written.files));
    }
    Ok(ExitCode::SUCCESS)
}

fn run_report(args: &ReportArgs) -> anyhow::Result<ExitCode> {
    let options = report_options(&args.grids, args.threads, args.generator.seed)?;
    let out = &args.files.out;
    let chatty = !(args.output.json || args.quiet.quiet);
    let mut written = write_report(out, &options, &args.price_file.load()?, chatty)?;
    if args.html {
        let page = forkcache::report::html_page(&written.artifacts).context("building index.html")?;
        let paths = forkcache::report::write(out, std::slice::from_ref(&page))
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
fn report_options(
    grids: &crate::cli::GridArgs,
    threads: Option<usize>,
    seed: Option<u64>,
) -> anyhow::Result<forkcache::report::ReportOptions> {
    let mut options = forkcache::report::ReportOptions { threads, seed, ..Default::default() };
    if let Some(path) = &grids.sweep {
        options.sweep = read_sweep(path)?;
    }
    if let Some(path) = &grids.cost_curves {
        options.cost_curves = read_sweep(path)?;
    }
    Ok(options)
}

fn read_sweep(path: &std::path::Path) -> anyhow::Result<forkcache::sweep::SweepSpec> {
    let text = read_input(path)?;
    forkcache::sweep::SweepSpec::from_json(&text).with_context(|| format!("in {}", path.display()))
}

/// What `write_report` built and where it wrote it.
struct Written {
    artifacts: Vec<forkcache::report::Artifact>,
    /// The paths written, as printed.
    files: Vec<String>,
}

/// Builds every report file (sweeps included, with a progress bar when `chatty`) and writes them
/// to `out`.
fn write_report(
    out: &std::path::Path,
    options: &forkcache::report::ReportOptions,
    prices: &forkcache::PriceTable,
    chatty: bool,
) -> anyhow::Result<Written> {
    let bar = progress_bar(chatty, options.cells() as u64, "sweep cells");
    let artifacts =
        forkcache::report::build(options, prices, || bar.inc(1)).context("building the reports")?;
    bar.finish_and_clear();
    let paths =
        forkcache::report::write(out, &artifacts).with_context(|| format!("writing {}", out.display()))?;
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

/// A progress bar, or a hidden one under `--quiet` and `--json`.
fn progress_bar(chatty: bool, total: u64, what: &str) -> indicatif::ProgressBar {
    if chatty { progress::bar(total, what) } else { indicatif::ProgressBar::hidden() }
}

/// The `--json` document of a command whose result is files written.
fn files_json(out: &std::path::Path, files: &[String]) -> serde_json::Value {
    serde_json::json!({"out": out.display().to_string(), "files": files})
}

fn run_sweep(args: &SweepArgs) -> anyhow::Result<ExitCode> {
    use forkcache::sweep::{self, Shard, SweepOptions};
    let mut spec = read_sweep(&args.sweep)?;
    if let Some(seed) = args.generator.seed {
        spec.scenario.seed = seed;
    }
    let shard = args.shard.as_deref().map(Shard::parse).transpose()?.unwrap_or_default();
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
    let paths =
        forkcache::report::write(out, &artifacts).with_context(|| format!("writing {}", out.display()))?;
    let files: Vec<String> = paths.iter().map(|path| path.display().to_string()).collect();
    if args.output.json {
        let mut json = files_json(out, &files);
        json["shards"] = merged.shards.into();
        json["rows"] = merged.rows.into();
        println!("{json}");
    } else if !args.quiet.quiet {
        for file in &files {
            println!("wrote {file}");
        }
        println!("{} shards, {} cells", merged.shards, merged.rows);
    }
    Ok(ExitCode::SUCCESS)
}

/// Exit code of a command that finished but skipped unreadable input lines.
const EXIT_SOME_LINES_UNREADABLE: u8 = 3;
/// Exit code of invalid input.
const EXIT_INVALID_INPUT: u8 = 1;

/// Exit 0 when every line was read (requests the API would reject are results); 3 when some
/// lines were unreadable (each named on stderr); 1 when `--strict` stopped at one.
fn run_replay(args: &ReplayArgs) -> anyhow::Result<ExitCode> {
    let config = ReplayConfig {
        endpoint: args.engine.endpoint_config(),
        gap_ms: args.gap_ms,
        strict: args.strict,
        threads: args.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from)),
        reorder_window: args.reorder_window,
    };
    if args.calibrate {
        return run_calibrate(args, &config, &read_input_bytes(&args.trace)?);
    }
    // The trace streams through the replay: it is never held whole.
    let replayed = if args.trace.as_os_str() == "-" {
        replay_stream(&config, args.engine.prices()?, std::io::BufReader::new(std::io::stdin()))
    } else {
        let file =
            std::fs::File::open(&args.trace).with_context(|| format!("reading {}", args.trace.display()))?;
        replay_stream(&config, args.engine.prices()?, std::io::BufReader::new(file))
    };
    let report = match replayed {
        Ok(report) => report,
        Err(err) => return replay_failed(args, err),
    };
    if args.output.json {
        println!("{}", report.to_json());
    } else if args.table.csv {
        print!("{}", forkcache::report::replay_csv(&report));
    } else if !args.quiet.quiet {
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
        // A trace further out of start order than the window is invalid input for that window.
        forkcache::replay::ReplayError::OutOfOrder(late) => {
            eprintln!("forkcache: {}: {late}", args.trace.display());
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
    if args.output.json {
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
    if args.output.json {
        println!("{}", report.to_json());
    } else if args.table.csv {
        print!("{}", forkcache::report::scenario_requests_csv(&report));
    } else if !args.quiet.quiet {
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
    if args.output.json {
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
    let config = ReplayConfig {
        endpoint: args.engine.endpoint_config(),
        gap_ms: args.gap_ms,
        ..ReplayConfig::default()
    };
    let explanation = forkcache::explain::explain_request(&config, args.engine.prices()?, &trace, index)
        .with_context(|| format!("explaining {}", args.a.display()))?;
    if args.output.json {
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
    if args.output.json {
        println!("{}", table.to_json());
    } else if args.table.csv {
        print!("{}", table.to_csv());
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
