//! One module per subcommand: its flags (clap) and its run, which builds library configs,
//! calls the library and prints. No domain logic lives here.

pub mod demo;
pub mod explain;
pub mod import;
pub mod import_codex;
pub mod merge_shards;
pub mod prices;
pub mod proxy;
pub mod replay;
pub mod report;
pub mod run;
pub mod serve;
pub mod sweep;

use std::io::Read as _;
use std::process::ExitCode;

use anyhow::Context;

use crate::cli::{Cli, Command};
use crate::progress;

/// Runs one command; the exit code says whether it succeeded.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    crate::input::set_max_input_bytes(cli.max_input_bytes);
    match cli.command {
        Command::Demo(args) => demo::run(&args),
        Command::Replay(args) => replay::run(&args),
        Command::Run(args) => run::run(&args),
        Command::Explain(args) => explain::run(&args),
        Command::Sweep(args) => sweep::run(&args),
        Command::Report(args) => report::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Proxy(args) => proxy::run(&args),
        Command::Prices(args) => prices::run(&args),
        Command::Import(source) => import::run(&source),
        Command::MergeShards(args) => merge_shards::run(&args),
        Command::Completions(args) => print_bytes(&crate::cli::completions(args.shell)),
        Command::Man => print_bytes(&crate::cli::man_page()?),
    }
}

/// Exit code of a command that finished but skipped unreadable input lines.
pub(crate) const EXIT_SOME_LINES_UNREADABLE: u8 = 3;

/// Exit code of a usage error: a flag value or a combination of flags the command refuses.
pub(crate) const EXIT_USAGE: u8 = 2;

/// Exit code of invalid input.
pub(crate) const EXIT_INVALID_INPUT: u8 = 1;

/// A progress bar, or a hidden one under `--quiet` and `--json`.
pub(crate) fn progress_bar(chatty: bool, total: u64, what: &str) -> indicatif::ProgressBar {
    if chatty { progress::bar(total, what) } else { indicatif::ProgressBar::hidden() }
}

/// Writes each `(name, bytes)` into `dir`, creating it first; an error names the file.
pub(crate) fn write_files(dir: &std::path::Path, files: &[(&str, Vec<u8>)]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (name, bytes) in files {
        let path = dir.join(name);
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// The `--json` document of a command whose result is files written.
pub(crate) fn files_json(out: &std::path::Path, files: &[String]) -> serde_json::Value {
    serde_json::json!({"out": out.display().to_string(), "files": files})
}

/// A trace file (or `-`, standard input) as bytes, each line within `--max-input-bytes`: a
/// trace may hold lines that are not UTF-8.
pub(crate) fn read_input_bytes(path: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    crate::input::CappedLines::new(open_input(path)?)
        .read_to_end(&mut bytes)
        .with_context(|| format!("reading {}", path.display()))?;
    Ok(bytes)
}

/// A trace file as text, each line within `--max-input-bytes`.
pub(crate) fn read_trace_text(path: &std::path::Path) -> anyhow::Result<String> {
    String::from_utf8(read_input_bytes(path)?)
        .with_context(|| format!("reading {}: not UTF-8", path.display()))
}

/// A document (or `-`, standard input) as text, within `--max-input-bytes`.
pub(crate) fn read_input(path: &std::path::Path) -> anyhow::Result<String> {
    crate::input::read_document_text(open_input(path)?, path)
}

/// Refuses a forkcache trace handed to a command that takes one JSON document (`run`'s
/// scenario, `sweep`'s grid), pointing to `replay`: the parse error alone would say only that
/// `forkcache_session` is an unknown field.
pub(crate) fn not_a_trace(
    text: &str,
    path: &std::path::Path,
    command: &str,
    takes: &str,
) -> anyhow::Result<()> {
    if text.trim_start().starts_with(r#"{"forkcache_session""#) {
        anyhow::bail!(
            "{path} is a forkcache trace (its first line is a session marker): `forkcache replay {path}` \
             prices it; `{command}` takes {takes}",
            path = path.display()
        );
    }
    Ok(())
}

/// A file, or standard input for `-`, buffered.
pub(crate) fn open_input(path: &std::path::Path) -> anyhow::Result<Box<dyn std::io::BufRead + Send>> {
    if path.as_os_str() == "-" {
        return Ok(Box::new(std::io::BufReader::new(std::io::stdin())));
    }
    let file = std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(Box::new(std::io::BufReader::new(file)))
}

/// Writes generated text (a completion script, the man page) to standard output as is.
pub(crate) fn print_bytes(bytes: &[u8]) -> anyhow::Result<ExitCode> {
    use std::io::Write as _;
    std::io::stdout().write_all(bytes).context("writing to standard output")?;
    Ok(ExitCode::SUCCESS)
}
