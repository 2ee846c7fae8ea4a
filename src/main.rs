//! The `forkcache` command: parse flags, call the library, print, exit.
//!
//! Exit codes: 0 success; 1 invalid input or a failure, named on stderr; 2 a usage error (clap's
//! own, for flags it cannot parse); 3 finished, but some input lines were unreadable.

mod allocator;
mod cli;
mod cmd;
mod flags;
mod input;
mod progress;

use std::process::ExitCode;

/// mimalloc for `serve` and `proxy`, the system allocator for the rest (see `allocator`).
#[global_allocator]
static ALLOCATOR: allocator::ByCommand = allocator::ByCommand;

fn main() -> ExitCode {
    let cli = cli::parse();
    if matches!(cli.command, cli::Command::Serve(_) | cli::Command::Proxy(_)) {
        allocator::use_mimalloc();
    }
    match cmd::run(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("forkcache: {err:#}");
            ExitCode::from(1)
        }
    }
}
