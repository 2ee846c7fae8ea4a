//! The `forkcache` command: parse flags, call the library, print, exit.
//!
//! Exit codes: 0 success; 1 invalid input or a failure, named on stderr; 2 a usage error (clap's
//! own, for flags it cannot parse); 3 finished, but some input lines were unreadable.

mod cli;
mod commands;
mod import_command;
mod progress;
mod proxy_command;
mod serve_command;

use std::process::ExitCode;

/// mimalloc, not the system allocator: `serve` and `proxy` allocate on several runtime workers
/// and free on others, and glibc's arenas then contend (on the serve bench, a futex call per
/// request went into malloc's arena locks). See benches/README.md.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    match commands::run(cli::parse()) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("forkcache: {err:#}");
            ExitCode::from(1)
        }
    }
}
