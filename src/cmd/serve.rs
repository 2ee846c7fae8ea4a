//! `forkcache serve`: flags → server settings, a runtime, the bound address, the summary.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};

use forkcache_engine::endpoint::MockEndpoint;
use forkcache_net::serve::{LatencyMode, Script, ServeConfig, Server};

use crate::flags::{EngineArgs, KeySaltFlag, QuietFlag};

/// `serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on, IP:PORT or HOST:PORT; port 0 picks a free port (the bound address is
    /// printed first).
    #[arg(long, default_value = "127.0.0.1:8765", value_parser = crate::flags::parse_listen_addr)]
    pub addr: SocketAddr,
    /// Reply script (JSON, see fixtures/scripts/); by default a short text, or JSON shaped by
    /// the request's schema when it asks for structured output.
    #[arg(long)]
    pub script: Option<PathBuf>,
    /// Append every Messages request to this JSONL trace (`forkcache replay` reads it).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// When the response begins: at once, or after the modelled time to first token.
    #[arg(long, value_enum, default_value_t = LatencyArg::Instant)]
    pub latency: LatencyArg,
    /// Refuse requests that carry no API key (401).
    #[arg(long)]
    pub require_key: bool,
    /// Stop after answering this many Messages requests (at least 1).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_requests: Option<u64>,
    #[command(flatten)]
    pub quiet: QuietFlag,
    #[command(flatten)]
    pub key_salt: KeySaltFlag,
    /// Time a client has to send a request's headers (also the longest wait for the next request
    /// on a kept-alive connection), e.g. `30s`, `500ms`.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "30s")]
    pub header_timeout: std::time::Duration,
    /// Time a client has to send a request's body once its headers arrived (408 after).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "60s")]
    pub body_timeout: std::time::Duration,
    /// Close a connection when no bytes moved either way for this long.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "120s")]
    pub idle_timeout: std::time::Duration,
    /// Refuse top-level request fields the API does not document (400), instead of counting
    /// them in the stats.
    #[arg(long)]
    pub strict: bool,
    /// Connections served at once; more wait to be accepted.
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_connections: u64,
    /// Compress responses as the request's accept-encoding allows (gzip, br, zstd), each event
    /// flushed as sent, like the real API.
    #[arg(long)]
    pub compress: bool,
    /// Requests the live page (`/forkcache/`) keeps, the newest; older ones leave its feed
    /// (`GET /forkcache/events`), never the stats.
    #[arg(long, default_value_t = forkcache_net::live::LIVE_ROWS as u64, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub live_rows: u64,
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// `serve --latency`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum LatencyArg {
    /// Answer as soon as the request is priced.
    Instant,
    /// Wait the modelled time to first token, and stream at the modelled output rate.
    Model,
}

/// Runs the server until Ctrl-C, SIGTERM or `--max-requests`, then prints the summary.
pub fn run(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let script = match &args.script {
        None => Script::builtin(),
        Some(path) => {
            let file =
                std::fs::File::open(path).with_context(|| format!("reading script {}", path.display()))?;
            let text = crate::input::read_document_text(file, path)?;
            Script::from_json(&text).with_context(|| format!("in script {}", path.display()))?
        }
    };
    let mut endpoint = MockEndpoint::new(args.engine.endpoint_config(), args.engine.prices()?)?;
    endpoint.set_key_salt(args.key_salt.salt());
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
    config.live_rows = usize::try_from(args.live_rows).unwrap_or(usize::MAX);
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
        // The summary comes at shutdown, when whoever read the output may be gone (a closed
        // pipe): it is the last thing written, so a failure to write it is not an error.
        let _ = writeln!(std::io::stdout(), "\n{}", summary.to_table().trim_end());
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// Runs an HTTP edge (serve, proxy) on a multi-threaded runtime until it returns.
pub(super) fn on_runtime<T>(edge: impl std::future::Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
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
pub(super) async fn shutdown_signal() {
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
