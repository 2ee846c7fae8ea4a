//! `forkcache serve`: flags → server settings, a runtime, the bound address, the summary.

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::Context;
use forkcache::endpoint::MockEndpoint;
use forkcache::serve::{LatencyMode, Script, ServeConfig, Server};

use crate::cli::{LatencyArg, ServeArgs};

/// Runs the server until Ctrl-C, SIGTERM or `--max-requests`, then prints the summary.
pub fn run_serve(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let script = match &args.script {
        None => Script::builtin(),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading script {}", path.display()))?;
            Script::from_json(&text).with_context(|| format!("in script {}", path.display()))?
        }
    };
    let endpoint = MockEndpoint::new(args.engine.endpoint_config(), args.engine.prices()?)?;
    let mut config = ServeConfig::new(args.addr);
    config.script = script;
    config.trace = args.trace.clone();
    config.latency = match args.latency {
        LatencyArg::Instant => LatencyMode::Instant,
        LatencyArg::Model => LatencyMode::Model,
    };
    config.require_key = args.require_key;
    config.max_requests = args.max_requests;
    config.header_timeout_ms = millis(args.header_timeout);
    config.body_timeout_ms = millis(args.body_timeout);
    config.idle_timeout_ms = millis(args.idle_timeout);
    config.strict = args.strict;
    config.compress = args.compress;
    config.max_connections = usize::try_from(args.max_connections).unwrap_or(usize::MAX);
    raise_open_file_limit(config.max_connections);
    if !args.quiet.quiet {
        config.request_log = Some(Box::new(std::io::stdout()));
    }
    on_runtime(async {
        let server = Server::bind(config, endpoint).await?;
        println!("forkcache serve listening on http://{}", server.local_addr());
        std::io::stdout().flush().context("writing to standard output")?;
        let summary = server.run(shutdown_signal()).await?;
        println!("\n{}", summary.to_table().trim_end());
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// Runs an HTTP edge (serve, proxy) on a multi-threaded runtime until it returns.
pub(crate) fn on_runtime<T>(edge: impl std::future::Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?;
    runtime.block_on(edge)
}

fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Lifts the soft limit on open files as far as the hard limit allows, so `--max-connections`
/// sockets (plus the trace, the log and the listener) fit; warns when they still cannot.
fn raise_open_file_limit(max_connections: usize) {
    let needed = max_connections as u64 + 64;
    match rlimit::increase_nofile_limit(needed) {
        Ok(limit) if limit < needed => eprintln!(
            "forkcache: warning: only {limit} open files allowed; --max-connections {max_connections} may run out"
        ),
        Ok(_) => {}
        Err(err) => eprintln!("forkcache: warning: cannot raise the open-file limit: {err}"),
    }
}

/// Ctrl-C, or SIGTERM where there is one (what `kill` and CI harnesses send).
pub(crate) async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(term) => term,
            Err(_) => return std::future::pending().await,
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
