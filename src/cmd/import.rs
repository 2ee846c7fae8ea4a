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
    #[arg(long, value_name = "DAY", value_parser = parse_day)]
    pub since: Option<String>,
    /// Only requests on or before this day (UTC, YYYY-MM-DD).
    #[arg(long, value_name = "DAY", value_parser = parse_day)]
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
    /// Write the simulated requests as a trace `replay` and `explain` can read: each request with
    /// its real usage, the account's pre-warms marked as such (run, not billed).
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

/// Runs the import; exit code 3 when some lines could not be read, 2 when `--since` is after
/// `--until`, 1 when no request at all was read (whatever else was skipped).
pub fn run_claude_code(args: &ClaudeCodeArgs) -> anyhow::Result<ExitCode> {
    let what_ifs = args.what_if.clone();
    if let (Some(since), Some(until)) = (&args.since, &args.until)
        && since > until
    {
        // Both are YYYY-MM-DD, so text order is day order.
        eprintln!("forkcache: --since {since} is after --until {until}: no day is in both");
        return Ok(ExitCode::from(super::EXIT_USAGE));
    }
    let paths = files::transcript_files(&args.paths).context("finding transcript files")?;
    anyhow::ensure!(
        !paths.is_empty(),
        "no transcript file (*.jsonl) in {}: Claude Code keeps them under ~/.claude/projects/",
        shown(&args.paths)
    );
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
    let read_any = !transcripts.requests.is_empty();
    transcripts.retain_days(args.since.as_deref(), args.until.as_deref());
    if transcripts.requests.is_empty() {
        for line in forkcache_ingest::report::listed_notes(&transcripts.stats.notes) {
            eprintln!("forkcache: skipped {line}");
        }
        anyhow::bail!("{}", nothing_found(&transcripts.stats, read_any, paths.len(), args));
    }
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
        // The table lists them already; --json and --quiet runs see them here.
        if args.output.json || args.quiet.quiet {
            for line in forkcache_ingest::report::listed_notes(&report.read.notes) {
                eprintln!("forkcache: skipped {line}");
            }
        }
        return Ok(ExitCode::from(super::EXIT_SOME_LINES_UNREADABLE));
    }
    Ok(ExitCode::SUCCESS)
}

/// `--since`/`--until`'s value: a day, YYYY-MM-DD.
fn parse_day(text: &str) -> Result<String, String> {
    let valid = text.len() == 10
        && forkcache_ingest::transcript::parse_timestamp(&format!("{text}T00:00:00Z")).is_some();
    if valid { Ok(text.to_string()) } else { Err(format!("{text:?} is not a day as YYYY-MM-DD")) }
}

/// Why an import that read files found no request to report, with what to try instead.
fn nothing_found(
    stats: &forkcache_ingest::transcript::ReadStats,
    read_any: bool,
    files: usize,
    args: &ClaudeCodeArgs,
) -> String {
    if read_any {
        let since = args.since.as_deref().unwrap_or("the first day");
        let until = args.until.as_deref().unwrap_or("the last day");
        return format!("no request of {} falls between {since} and {until} (UTC)", shown(&args.paths));
    }
    let mut message = format!(
        "no Claude Code request in {files} file(s) of {} ({} lines read, {} unreadable)",
        shown(&args.paths),
        stats.lines,
        stats.skipped_lines
    );
    message.push_str(
        "; a Claude Code transcript holds `assistant` lines with `message.usage`. A forkcache or \
         proxy trace is read by `forkcache replay`, Codex rollouts by `forkcache import codex`",
    );
    message
}

/// The paths as given, for a message.
fn shown(paths: &[PathBuf]) -> String {
    paths.iter().map(|path| path.display().to_string()).collect::<Vec<_>>().join(", ")
}
