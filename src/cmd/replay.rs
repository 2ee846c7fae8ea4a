//! `forkcache replay`: a recorded trace priced request by request (and `--calibrate`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use forkcache_ingest::replay::{ReplayConfig, replay_stream};

use super::{EXIT_INVALID_INPUT, EXIT_SOME_LINES_UNREADABLE, read_input_bytes};
use crate::flags::{CsvFlag, EngineArgs, JsonFlag, QuietFlag};

/// `replay`.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The trace; `-` reads standard input.
    pub trace: PathBuf,
    #[command(flatten)]
    pub output: JsonFlag,
    #[command(flatten)]
    pub table: CsvFlag,
    #[command(flatten)]
    pub quiet: QuietFlag,
    /// Milliseconds between lines that carry no `at_ms`.
    #[arg(long, default_value_t = 30_000)]
    pub gap_ms: u64,
    /// Fit token counts per model to the trace's recorded usage and report the held-out
    /// agreement of each candidate minimum cacheable length and first-token delay.
    #[arg(long)]
    pub calibrate: bool,
    /// Stop at the first unreadable line (exit 1) instead of reporting it and going on (exit 3).
    #[arg(long)]
    pub strict: bool,
    /// Threads that read and parse the trace (the cache runs on one more); the output is the
    /// same on any number. Default: the machine's cores.
    #[arg(long, value_parser = crate::flags::parse_threads)]
    pub threads: Option<usize>,
    /// Lines run in start order as far as this many lines (and 32 KiB of line bytes per line, at
    /// least 16 MiB and twice the longest line) reach; a line starting before one that already ran
    /// is an error (exit 1) naming it.
    #[arg(long, default_value_t = forkcache_ingest::replay::DEFAULT_REORDER_WINDOW)]
    pub reorder_window: usize,
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// Exit 0 when every line was read (requests the API would reject are results); 3 when some
/// lines were unreadable (each named on stderr); 1 when `--strict` stopped at one.
pub fn run(args: &ReplayArgs) -> anyhow::Result<ExitCode> {
    let config = ReplayConfig {
        endpoint: args.engine.endpoint_config(),
        gap_ms: args.gap_ms,
        strict: args.strict,
        threads: args.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from)),
        reorder_window: args.reorder_window,
        reorder_min_bytes: forkcache_ingest::replay::REORDER_MIN_BYTES,
    };
    if args.calibrate {
        return run_calibrate(args, &config, &read_input_bytes(&args.trace)?);
    }
    // The trace streams through the replay: it is never held whole.
    let trace = crate::input::CappedLines::new(super::open_input(&args.trace)?);
    let replayed = replay_stream(&config, args.engine.prices()?, trace);
    let report = match replayed {
        Ok(report) => report,
        Err(err) => return replay_failed(args, err),
    };
    if args.output.json {
        println!("{}", report.to_json());
    } else if args.table.csv {
        print!("{}", forkcache_report::replay_csv(&report));
    } else if !args.quiet.quiet {
        print!("{}", report.to_table());
    }
    let table_printed = !(args.output.json || args.table.csv || args.quiet.quiet);
    unreadable_lines_done(args, &report.unreadable, report.records.len(), table_printed)
}

/// The exit code of a replay that skipped `unreadable` lines and read `requests`: 3 when some
/// lines were skipped, 1 when no line at all was a request (the file is not a trace). The skipped
/// lines go to stderr, as many as a table lists, unless the table already listed them.
fn unreadable_lines_done(
    args: &ReplayArgs,
    unreadable: &[forkcache_ingest::trace::UnreadableLine],
    requests: usize,
    table_printed: bool,
) -> anyhow::Result<ExitCode> {
    if unreadable.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    if !table_printed {
        for line in forkcache_ingest::report::listed_notes(unreadable) {
            eprintln!("forkcache: {}: skipped unreadable {line}", args.trace.display());
        }
    }
    if requests == 0 {
        eprintln!(
            "forkcache: {}: no request read ({} unreadable lines): a trace holds request bodies or \
             envelopes with a `body`, one per line; Claude Code transcripts are read by \
             `forkcache import claude-code`",
            args.trace.display(),
            unreadable.len()
        );
        return Ok(ExitCode::from(EXIT_INVALID_INPUT));
    }
    Ok(ExitCode::from(EXIT_SOME_LINES_UNREADABLE))
}

/// A replay that stopped: at an unreadable line under `--strict` (exit 1, the line on stderr), or
/// before it began.
fn replay_failed(args: &ReplayArgs, err: forkcache_ingest::replay::ReplayError) -> anyhow::Result<ExitCode> {
    match err {
        forkcache_ingest::replay::ReplayError::Unreadable(line) => {
            eprintln!("forkcache: {}: {line}", args.trace.display());
            Ok(ExitCode::from(EXIT_INVALID_INPUT))
        }
        // A trace further out of start order than the window is invalid input for that window.
        forkcache_ingest::replay::ReplayError::OutOfOrder(late) => {
            eprintln!("forkcache: {}: {late}", args.trace.display());
            Ok(ExitCode::from(EXIT_INVALID_INPUT))
        }
        err => Err(err).with_context(|| format!("replaying {}", args.trace.display())),
    }
}

fn run_calibrate(args: &ReplayArgs, config: &ReplayConfig, trace: &[u8]) -> anyhow::Result<ExitCode> {
    let calibration = match forkcache_ingest::calibrate::calibrate(config, &args.engine.prices()?, trace) {
        Ok(calibration) => calibration,
        Err(err) => return replay_failed(args, err),
    };
    if args.output.json {
        println!("{}", calibration.to_json());
    } else {
        print!("{}", calibration.to_table());
    }
    // As replay: the skipped lines named on stderr, exit 3 (1 when nothing was a request).
    let requests = calibration.models.iter().map(|m| m.fit_requests + m.held_out_requests).sum::<u64>();
    unreadable_lines_done(args, &calibration.unreadable, requests as usize, false)
}
