//! `forkcache import claude-code`: reads transcripts (a progress bar over files), prints the
//! report, writes the CSVs and the emitted trace.

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::Context;
use forkcache::ingest::report::ImportOptions;
use forkcache::ingest::transcript::TranscriptReader;
use forkcache::ingest::{files, import};

use crate::cli::ClaudeCodeArgs;
use crate::progress;

/// Runs the import; exit code 3 when some lines could not be read.
pub fn run_claude_code(args: &ClaudeCodeArgs) -> anyhow::Result<ExitCode> {
    let what_ifs = args.what_if.clone();
    for day in [&args.since, &args.until].into_iter().flatten() {
        anyhow::ensure!(
            forkcache::ingest::transcript::parse_timestamp(&format!("{day}T00:00:00Z")).is_some(),
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
            .read(&path.display().to_string(), std::io::BufReader::new(file))
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
        let join = forkcache::ingest::proxy::join(&report, std::io::BufReader::new(file))
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
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        for (name, bytes) in [("requests.csv", requests), ("breaks.csv", breaks)] {
            let path = dir.join(name);
            std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
        }
    }
    if let Some(dir) = &args.chart {
        let charts = forkcache::ingest::chart::charts(&report.sessions)?;
        forkcache::report::write(dir, &charts).with_context(|| format!("writing {}", dir.display()))?;
    }
    if let Some(dir) = &args.html {
        let page = forkcache::ingest::html::page(&report)?;
        forkcache::report::write(dir, &[page]).with_context(|| format!("writing {}", dir.display()))?;
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
