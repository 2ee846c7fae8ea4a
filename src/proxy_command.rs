//! `forkcache proxy`: flags → proxy settings, a runtime, the bound address, the summary.

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::Context;
use forkcache::endpoint::MockEndpoint;
use forkcache::proxy::{Proxy, ProxyConfig};

use crate::cli::ProxyArgs;
use crate::serve_command::{on_runtime, shutdown_signal};

/// Forwards until Ctrl-C or SIGTERM, then prints the recorded and predicted totals.
pub fn run_proxy(args: &ProxyArgs) -> anyhow::Result<ExitCode> {
    let endpoint = MockEndpoint::new(args.engine.endpoint_config(), args.engine.prices()?)?;
    let mut config = ProxyConfig::new(args.upstream.clone());
    config.addr = args.addr;
    config.trace = args.trace.clone();
    config.redact = args.redact;
    config.require_key = args.require_key;
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
        println!("forkcache proxy listening on http://{} → {}", proxy.local_addr(), args.upstream);
        std::io::stdout().flush().context("writing to standard output")?;
        let stats = proxy.run(shutdown_signal()).await?;
        println!("\n{}", stats.to_table().trim_end());
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}
