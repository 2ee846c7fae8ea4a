//! The `forkcache` command: parse flags, call the library, print, exit.

mod cli;
mod commands;
mod import_command;
mod progress;
mod proxy_command;
mod serve_command;

use std::process::ExitCode;

fn main() -> ExitCode {
    match commands::run(cli::parse()) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("forkcache: {err:#}");
            ExitCode::from(2)
        }
    }
}
