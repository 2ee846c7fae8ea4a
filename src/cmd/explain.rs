//! `forkcache explain`: where B's cache prefix leaves A's, or one trace request's miss and fix.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use forkcache_ingest::replay::ReplayConfig;

use super::read_input;
use crate::flags::{EngineArgs, JsonFlag};

/// `explain`: `explain A B`, or `explain TRACE --request N`.
#[derive(Args, Debug)]
pub struct ExplainArgs {
    /// The earlier request (a body, or an envelope with a `body` member); with `--request`, the
    /// trace.
    pub a: PathBuf,
    /// The later request.
    #[arg(required_unless_present = "request", conflicts_with = "request")]
    pub b: Option<PathBuf>,
    /// Explain request N (0-based) of the trace A: its miss, the bytes around the divergence
    /// from the closest earlier request, and the fix with its saving.
    #[arg(long, value_name = "N")]
    pub request: Option<usize>,
    #[command(flatten)]
    pub output: JsonFlag,
    /// Milliseconds between trace lines that carry no `at_ms` (with `--request`).
    #[arg(long, default_value_t = 30_000)]
    pub gap_ms: u64,
    #[command(flatten)]
    pub engine: EngineArgs,
}

pub fn run(args: &ExplainArgs) -> anyhow::Result<ExitCode> {
    let Some(b_path) = &args.b else { return run_explain_request(args) };
    let a = request_body(&read_input(&args.a)?).with_context(|| format!("in {}", args.a.display()))?;
    let b = request_body(&read_input(b_path)?).with_context(|| format!("in {}", b_path.display()))?;
    let explanation = forkcache_engine::verify::explain(&a, &b).context("reading the requests")?;
    if args.output.json {
        println!("{}", serde_json::to_string(&explanation)?);
    } else {
        print!("{}", explanation.to_text());
    }
    Ok(ExitCode::SUCCESS)
}

/// `explain TRACE --request N`.
fn run_explain_request(args: &ExplainArgs) -> anyhow::Result<ExitCode> {
    let index = args.request.context("--request is required with a single file")?;
    let trace = super::read_trace_text(&args.a)?;
    let config = ReplayConfig {
        endpoint: args.engine.endpoint_config(),
        gap_ms: args.gap_ms,
        ..ReplayConfig::default()
    };
    let explanation =
        forkcache_ingest::explain::explain_request(&config, args.engine.prices()?, &trace, index)
            .with_context(|| format!("explaining {}", args.a.display()))?;
    if args.output.json {
        println!("{}", serde_json::to_string(&explanation)?);
    } else {
        print!("{}", explanation.to_text());
    }
    Ok(ExitCode::SUCCESS)
}

/// A request body, or the `body` of a trace envelope (an object kept byte for byte, or a string).
fn request_body(text: &str) -> anyhow::Result<String> {
    #[derive(serde::Deserialize)]
    struct Envelope<'a> {
        #[serde(borrow)]
        body: Option<&'a serde_json::value::RawValue>,
    }
    let text = text.trim();
    let envelope: Envelope = serde_json::from_str(text).context("not a JSON object")?;
    let body = match envelope.body {
        None => text.to_string(),
        Some(body) => match serde_json::from_str::<String>(body.get()) {
            Ok(string) => string,
            Err(_) => body.get().to_string(),
        },
    };
    messages_request(&body)?;
    Ok(body)
}

/// Refuses what is not a Messages request: two arbitrary JSON objects share no prompt, and
/// comparing them would report a cache hit that means nothing.
fn messages_request(body: &str) -> anyhow::Result<()> {
    let not_a_request = |e: forkcache_wire::ApiError| {
        anyhow::anyhow!("not a Messages request (a body with `model` and `messages`): {}", e.message)
    };
    let view = forkcache_wire::parse_request_str(body).map_err(not_a_request)?;
    view.require_model().map_err(not_a_request)?;
    view.require_messages().map_err(not_a_request)?;
    Ok(())
}
