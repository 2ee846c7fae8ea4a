//! `forkcache import claude-code`: reads transcripts (a progress bar over files), prints the
//! report, writes the CSVs and the emitted trace.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};

use forkcache_engine::PriceTable;
use forkcache_ingest::report::ImportOptions;
use forkcache_ingest::transcript::TranscriptReader;
use forkcache_ingest::{files, import};

use crate::flags::{JsonFlag, PricesFlag, QuietFlag};
use crate::progress;

/// `import`'s sources.
#[derive(Subcommand, Debug)]
pub enum ImportSource {
    /// Claude Code transcripts (~/.claude/projects/…): session files, sub-agent files, session or
    /// project directories.
    ClaudeCode(ClaudeCodeArgs),
    /// Codex CLI and Codex Desktop rollout files (~/.codex/sessions/…): rollout files or a
    /// sessions tree, priced and re-simulated under OpenAI's cache rules.
    Codex(crate::cmd::import_codex::CodexArgs),
}

/// `import claude-code`.
#[derive(Args, Debug)]
pub struct ClaudeCodeArgs {
    /// Session files, sub-agent files, session directories or project directories.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Only requests on or after this day (UTC, YYYY-MM-DD).
    #[arg(long)]
    pub since: Option<String>,
    /// Only requests on or before this day (UTC, YYYY-MM-DD).
    #[arg(long)]
    pub until: Option<String>,
    #[command(flatten)]
    pub output: JsonFlag,
    /// Write requests.csv and breaks.csv (a row per request and per break) to this directory.
    #[arg(long, value_name = "DIR")]
    pub csv: Option<PathBuf>,
    /// Write two charts per session (PNG and SVG) to this directory: real usage per request with
    /// breaks marked, and real beside predicted read over time.
    #[arg(long, value_name = "DIR")]
    pub chart: Option<PathBuf>,
    /// Write one self-contained page to DIR/index.html: every session's charts (inline SVG), its
    /// breaks with their causes as a sortable table, and the what-ifs.
    #[arg(long, value_name = "DIR")]
    pub html: Option<PathBuf>,
    /// Re-run the prediction under a changed setting: ttl=1h, ttl=5m, subagent-ttl=1h,
    /// no-model-switch, max-idle=5m (repeatable).
    #[arg(long = "what-if", value_name = "SETTING", value_parser = forkcache_ingest::predict::WhatIf::parse)]
    pub what_if: Vec<forkcache_ingest::predict::WhatIf>,
    /// A proxy's trace (envelopes with `request_id` and `body`): joined by request id, each break
    /// gets the first byte where its prompt left its chain's previous request.
    #[arg(long, value_name = "PROXY.jsonl")]
    pub trace: Option<PathBuf>,
    /// Write the simulated requests as a trace `replay` and `sweep` can read.
    #[arg(long, value_name = "FILE")]
    pub emit_trace: Option<PathBuf>,
    #[command(flatten)]
    pub price_file: PricesFlag,
    #[command(flatten)]
    pub quiet: QuietFlag,
}

impl ClaudeCodeArgs {
    /// The price table named by `--prices`.
    pub fn prices(&self) -> anyhow::Result<PriceTable> {
        self.price_file.load()
    }
}

/// Runs `import`'s source.
pub fn run(source: &ImportSource) -> anyhow::Result<ExitCode> {
    match source {
        ImportSource::ClaudeCode(args) => run_claude_code(args),
        ImportSource::Codex(args) => crate::cmd::import_codex::run(args),
    }
}

/// Runs the import; exit code 3 when some lines could not be read.
pub fn run_claude_code(args: &ClaudeCodeArgs) -> anyhow::Result<ExitCode> {
    let what_ifs = args.what_if.clone();
    for day in [&args.since, &args.until].into_iter().flatten() {
        anyhow::ensure!(
            forkcache_ingest::transcript::parse_timestamp(&format!("{day}T00:00:00Z")).is_some(),
            "--since/--until: {day:?} is not a YYYY-MM-DD date"
        );
    }
    let paths = files::transcript_files(&args.paths).context("finding transcript files")?;
    let bar = if args.quiet.quiet || args.output.json {
        indicatif::ProgressBar::hidden()
    } else {
        progress::bar(paths.len() as u64, "files")
    };
    let mut reader = TranscriptReader::new().keep_raw_usage(args.output.json);
    for path in &paths {
        let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
        reader
            .read(&path.display().to_string(), crate::input::CappedLines::new(std::io::BufReader::new(file)))
            .with_context(|| format!("reading {}", path.display()))?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    let mut transcripts = reader.finish();
    transcripts.retain_days(args.since.as_deref(), args.until.as_deref());
    let options = ImportOptions { what_ifs, emit_trace: args.emit_trace.is_some() };
    let mut report = import(transcripts, &options, &args.prices()?)?;
    if let Some(path) = &args.trace {
        let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let join = forkcache_ingest::proxy::join(
            &report.break_pairs(),
            crate::input::CappedLines::new(std::io::BufReader::new(file)),
        )
        .with_context(|| format!("reading {}", path.display()))?;
        report.join = Some(join);
    }
    if args.output.json {
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        report.write_json(&mut out).context("writing the report")?;
        writeln!(out).context("writing the report")?;
    } else if !args.quiet.quiet {
        print!("{}", report.to_table());
    }
    if let Some(dir) = &args.csv {
        let (requests, breaks) = report.to_csv()?;
        super::write_files(dir, &[("requests.csv", requests), ("breaks.csv", breaks)])?;
    }
    if let Some(dir) = &args.chart {
        let charts = forkcache_report::import::chart::charts(&report.sessions)?;
        forkcache_report::write(dir, &charts).with_context(|| format!("writing {}", dir.display()))?;
    }
    if let Some(dir) = &args.html {
        let page = forkcache_report::import::html::page(&report)?;
        forkcache_report::write(dir, &[page]).with_context(|| format!("writing {}", dir.display()))?;
    }
    if let Some(path) = &args.emit_trace {
        let mut text = report.trace.join("\n");
        text.push('\n');
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    let join_skipped = report.join.as_ref().map_or(&[][..], |join| join.unreadable.as_slice());
    if let Some(path) = args.trace.as_ref().filter(|_| !join_skipped.is_empty()) {
        for line in join_skipped {
            eprintln!("forkcache: {}: skipped unreadable {line}", path.display());
        }
    }
    if report.read.skipped_lines > 0 || !join_skipped.is_empty() {
        for note in &report.read.notes {
            eprintln!("forkcache: skipped {note}");
        }
        return Ok(ExitCode::from(3));
    }
    Ok(ExitCode::SUCCESS)
}
