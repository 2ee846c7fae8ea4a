//! `forkcache proxy`: flags → proxy settings, a runtime, the bound address, the summary.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use forkcache_engine::endpoint::MockEndpoint;
use forkcache_net::proxy::{Proxy, ProxyConfig};

use super::serve::{on_runtime, shutdown_signal};
use crate::flags::{EngineArgs, KeySaltFlag, QuietFlag};

/// `proxy`.
#[derive(Args, Debug)]
pub struct ProxyArgs {
    /// Where to forward: the API's base URL (`https://api.anthropic.com`) or a mock's.
    #[arg(long, value_parser = parse_upstream)]
    pub upstream: String,
    /// PEM file of extra CA certificates to trust for an https upstream (a private CA).
    #[arg(long)]
    pub upstream_ca: Option<PathBuf>,
    /// Address to listen on, IP:PORT or HOST:PORT; port 0 picks a free port (the bound address is
    /// printed first).
    #[arg(long, default_value = "127.0.0.1:8766", value_parser = crate::flags::parse_listen_addr)]
    pub addr: SocketAddr,
    /// Append every Messages exchange to this JSONL trace, created mode 0600 (`forkcache replay`
    /// reads it).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Rewrite every string a user wrote or a tool returned before it goes to the trace, one
    /// character for one of the same kind (base64 stays base64): the trace can be shared and
    /// still replays to the same usage.
    #[arg(long)]
    pub redact: bool,
    #[command(flatten)]
    pub quiet: QuietFlag,
    #[command(flatten)]
    pub key_salt: KeySaltFlag,
    /// `GET /forkcache/stats` and the live page's feed need a key (`x-api-key` or a bearer
    /// token) and show only the workspaces that key's requests were counted in.
    #[arg(long)]
    pub require_key: bool,
    /// Request bodies (MiB) that may wait for their prediction, which runs at the lowest CPU
    /// priority; past it an exchange is recorded but not predicted (its line says so).
    #[arg(long, default_value_t = forkcache_net::proxy::PREDICTION_QUEUE_BYTES >> 20)]
    pub prediction_queue_mb: usize,
    /// Requests the live page (`/forkcache/`) keeps, the newest; older ones leave its feed
    /// (`GET /forkcache/events`), never the stats.
    #[arg(long, default_value_t = forkcache_net::live::LIVE_ROWS as u64, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub live_rows: u64,
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// Forwards until Ctrl-C or SIGTERM, then prints the recorded and predicted totals.
pub fn run(args: &ProxyArgs) -> anyhow::Result<ExitCode> {
    let mut endpoint = MockEndpoint::new(args.engine.endpoint_config(), args.engine.prices()?)?;
    endpoint.set_key_salt(args.key_salt.salt());
    let mut config = ProxyConfig::new(args.upstream.clone());
    config.addr = args.addr;
    config.trace = args.trace.clone();
    config.redact = args.redact;
    config.require_key = args.require_key;
    config.live_rows = usize::try_from(args.live_rows).unwrap_or(usize::MAX);
    config.prediction_queue_bytes = args.prediction_queue_mb.saturating_mul(1 << 20);
    if let Some(path) = &args.upstream_ca {
        let pem = std::fs::read(path).with_context(|| format!("reading --upstream-ca {}", path.display()))?;
        config.upstream_ca_pem = Some(pem);
    }
    if !args.quiet.quiet {
        config.request_log = Some(Box::new(std::io::stdout()));
    }
    on_runtime(async {
        let proxy = Proxy::bind(config, endpoint).await?;
        println!(
            "forkcache proxy listening on http://{} → {}",
            proxy.local_addr(),
            forkcache_net::proxy::without_credentials(&args.upstream)
        );
        std::io::stdout().flush().context("writing to standard output")?;
        let stats = proxy.run(shutdown_signal()).await?;
        // The summary comes at shutdown, when whoever read the output may be gone (a closed
        // pipe): it is the last thing written, so a failure to write it is not an error.
        let _ = writeln!(std::io::stdout(), "\n{}", stats.to_table().trim_end());
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// `--upstream`'s parser: the URL checks the proxy makes at start (scheme, host, no query), at
/// parse time, so a bad value is a usage error like any other flag's.
fn parse_upstream(text: &str) -> Result<String, String> {
    forkcache_net::proxy::Upstream::new(text, None).map(|_| text.to_string()).map_err(|e| e.to_string())
}
