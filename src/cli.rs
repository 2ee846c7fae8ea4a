//! Command-line arguments → library configs. Nothing below this module knows clap exists.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use forkcache::billing::{BillingProfile, PriceTable};
use forkcache::cache::Policy;
use forkcache::clock::Visibility;
use forkcache::endpoint::EndpointConfig;
use forkcache::prompt::{DeferredTools, IdentityMode};
use forkcache::tokenize::TokenizerKind;

/// Simulate, measure and price prompt-cache sharing in LLM agent systems.
#[derive(Parser, Debug)]
#[command(name = "forkcache", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the built-in examples, print a summary table and write CSVs to reports/.
    Demo(DemoArgs),
    /// Price a recorded request stream (JSONL: raw bodies or envelopes), request by request.
    Replay(ReplayArgs),
    /// Run one scenario (forks, sub-agents, sidecars, compaction) and price every request.
    Run(RunArgs),
    /// Show where request B's cache prefix first leaves request A's, and why.
    Explain(ExplainArgs),
    /// Run a parameter grid of scenarios in parallel and write one CSV row per cell.
    Sweep(SweepArgs),
    /// Regenerate every CSV, chart and note in reports/ (the default sweep included).
    Report(ReportArgs),
    /// Serve the mock Messages API over HTTP, for real clients (the SDKs, Claude Code).
    Serve(ServeArgs),
    /// Stand between a real client and the real API: forward unchanged, record bytes and real
    /// usage (never keys), and compare each request with the simulator's prediction.
    Proxy(ProxyArgs),
    /// Print the price table: every model's prices, modifiers, constants, source and date.
    Prices(PricesArgs),
    /// Price real sessions: their recorded bill, every cache break, the prediction beside it.
    #[command(subcommand)]
    Import(ImportSource),
    /// Check a sweep's shards (from `sweep --shard i/n`, at any depth under DIR: every shard
    /// once, one sweep, one version, every row) and join them into sweep.csv and sweep.meta.json.
    MergeShards(MergeShardsArgs),
    /// Print a shell completion script (bash, zsh or fish) for forkcache.
    Completions(CompletionsArgs),
    /// Print forkcache's man page (roff), e.g. `forkcache man > forkcache.1`.
    Man,
}

/// `merge-shards`.
#[derive(Args, Debug)]
pub struct MergeShardsArgs {
    /// Directory holding the shards' files (sweep-I-of-N.csv and .meta.json), in any
    /// subdirectories.
    pub dir: PathBuf,
    /// Directory sweep.csv and sweep.meta.json are written to. Default: DIR.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// `completions`.
#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh or fish.
    pub shell: CompletionShell,
}

/// A shell `completions` writes for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CompletionShell {
    /// Bash: `source <(forkcache completions bash)`.
    Bash,
    /// Zsh: save as `_forkcache` in a directory on `$fpath`.
    Zsh,
    /// Fish: save as `~/.config/fish/completions/forkcache.fish`.
    Fish,
}

/// The completion script for `shell`, generated from the same definition that parses the flags.
pub fn completions(shell: CompletionShell) -> Vec<u8> {
    use clap::CommandFactory as _;
    let shell = match shell {
        CompletionShell::Bash => clap_complete::Shell::Bash,
        CompletionShell::Zsh => clap_complete::Shell::Zsh,
        CompletionShell::Fish => clap_complete::Shell::Fish,
    };
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "forkcache", &mut out);
    out
}

/// The man page (roff), generated from the same definition that parses the flags: the command,
/// then one section per subcommand.
pub fn man_page() -> std::io::Result<Vec<u8>> {
    use clap::CommandFactory as _;
    let command = Cli::command();
    let mut out = Vec::new();
    clap_mangen::Man::new(command.clone()).render(&mut out)?;
    for sub in command.get_subcommands() {
        let title = format!("forkcache-{}", sub.get_name());
        let sub = sub.clone().bin_name(format!("forkcache {}", sub.get_name()));
        out.extend_from_slice(b".bp\n");
        clap_mangen::Man::new(sub).title(title).render(&mut out)?;
    }
    Ok(out)
}

/// `prices`.
#[derive(Args, Debug)]
pub struct PricesArgs {
    /// Print one JSON document instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Price table (JSON, shaped like fixtures/pricing.json); the shipped one by default.
    #[arg(long)]
    pub prices: Option<PathBuf>,
}

/// `import`'s sources.
#[derive(Subcommand, Debug)]
pub enum ImportSource {
    /// Claude Code transcripts (~/.claude/projects/…): session files, sub-agent files, session or
    /// project directories.
    ClaudeCode(ClaudeCodeArgs),
}

/// `import claude-code`.
#[derive(Args, Debug)]
pub struct ClaudeCodeArgs {
    /// Session files, sub-agent files, session directories or project directories.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Only requests on or after this day (UTC, YYYY-MM-DD).
    #[arg(long)]
    pub since: Option<String>,
    /// Only requests on or before this day (UTC, YYYY-MM-DD).
    #[arg(long)]
    pub until: Option<String>,
    /// Print one JSON document instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Write requests.csv and breaks.csv (a row per request and per break) to this directory.
    #[arg(long, value_name = "DIR")]
    pub csv: Option<PathBuf>,
    /// Write two charts per session (PNG and SVG) to this directory: real usage per request with
    /// breaks marked, and real beside predicted read over time.
    #[arg(long, value_name = "DIR")]
    pub chart: Option<PathBuf>,
    /// Re-run the prediction under a changed setting: ttl=1h, ttl=5m, subagent-ttl=1h,
    /// no-model-switch, max-idle=5m (repeatable).
    #[arg(long = "what-if", value_name = "SETTING", value_parser = forkcache::ingest::predict::WhatIf::parse)]
    pub what_if: Vec<forkcache::ingest::predict::WhatIf>,
    /// A proxy's trace (envelopes with `request_id` and `body`): joined by request id, each break
    /// gets the first byte where its prompt left its chain's previous request.
    #[arg(long, value_name = "PROXY.jsonl")]
    pub trace: Option<PathBuf>,
    /// Write the simulated requests as a trace `replay` and `sweep` can read.
    #[arg(long, value_name = "FILE")]
    pub emit_trace: Option<PathBuf>,
    /// Price table (JSON, shaped like fixtures/pricing.json); the shipped one by default.
    #[arg(long)]
    pub prices: Option<PathBuf>,
}

impl PricesArgs {
    /// The price table named by `--prices`.
    pub fn prices(&self) -> anyhow::Result<PriceTable> {
        load_prices(self.prices.as_deref())
    }
}

impl ClaudeCodeArgs {
    /// The price table named by `--prices`.
    pub fn prices(&self) -> anyhow::Result<PriceTable> {
        load_prices(self.prices.as_deref())
    }
}

fn parse_date(text: &str) -> Result<forkcache::billing::PriceDate, String> {
    forkcache::billing::PriceDate::parse(text).map_err(|err| err.to_string())
}

/// `sweep`.
#[derive(Args, Debug)]
pub struct SweepArgs {
    /// The sweep file (see fixtures/sweeps/ and the README); `-` reads standard input.
    pub sweep: PathBuf,
    /// Directory sweep.csv and sweep.meta.json are written to.
    #[arg(long, default_value = "reports")]
    pub out: PathBuf,
    /// Run only part i of n of the grid (contiguous cells; the header is in part 1 only, so
    /// the parts' files concatenate, in order, to the whole grid's).
    #[arg(long, value_name = "i/n")]
    pub shard: Option<String>,
    /// Worker threads (default: one per core). The output does not depend on it.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Price table (JSON, shaped like fixtures/pricing.json); the shipped one by default.
    #[arg(long)]
    pub prices: Option<PathBuf>,
}

/// `report`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Directory the reports are written to.
    #[arg(long, default_value = "reports")]
    pub out: PathBuf,
    /// Worker threads for the sweeps (default: one per core). The output does not depend on it.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Also write index.html: every chart inline and the small tables, sortable, in one
    /// self-contained page (nothing fetched when it opens).
    #[arg(long)]
    pub html: bool,
}

/// `run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// The scenario file (see fixtures/scenarios/ and the README); `-` reads standard input.
    pub scenario: PathBuf,
    /// Print one JSON document instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Cache policy (default: the scenario's).
    #[arg(long, value_enum)]
    pub policy: Option<PolicyArg>,
    /// Billing profile (default: the scenario's).
    #[arg(long, value_enum)]
    pub billing: Option<BillingArg>,
    /// What "the same bytes" means (default: the scenario's).
    #[arg(long, value_enum)]
    pub identity: Option<IdentityArg>,
    /// When a write becomes readable (default: the scenario's).
    #[arg(long, value_enum)]
    pub visibility: Option<VisibilityArg>,
    /// Token estimate (o200k needs the `o200k` cargo feature).
    #[arg(long, value_enum, default_value_t = TokenizerArg::Bytes4)]
    pub tokenizer: TokenizerArg,
    /// Price table (JSON, shaped like fixtures/pricing.json); the shipped one by default.
    #[arg(long)]
    pub prices: Option<PathBuf>,
    /// Seed (default: the scenario's).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Also write every request's body to this directory (NNNN-role.json), for `explain`.
    #[arg(long)]
    pub bodies: Option<PathBuf>,
}

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
    #[arg(long)]
    pub request: Option<usize>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Milliseconds between trace lines that carry no `at_ms` (with `--request`).
    #[arg(long, default_value_t = 30_000)]
    pub gap_ms: u64,
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// `demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Directory the CSVs are written to.
    #[arg(long, default_value = "reports")]
    pub out: PathBuf,
}

/// `replay`.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The trace; `-` reads standard input.
    pub trace: PathBuf,
    /// Print one JSON document instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Milliseconds between lines that carry no `at_ms`.
    #[arg(long, default_value_t = 30_000)]
    pub gap_ms: u64,
    /// Fit token counts per model to the trace's recorded usage and report the held-out
    /// agreement of each candidate minimum cacheable length and first-token delay.
    #[arg(long)]
    pub calibrate: bool,
    /// Stop at the first unreadable line (exit 1) instead of reporting it and going on (exit 3).
    #[arg(long)]
    pub strict: bool,
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// `serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on; port 0 picks a free port (the bound address is printed first).
    #[arg(long, default_value = "127.0.0.1:8765")]
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
    /// Print no line per request (the summary is still printed at shutdown).
    #[arg(long)]
    pub quiet: bool,
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

/// Settings shared by every command that prices requests.
#[derive(Args, Debug)]
pub struct EngineArgs {
    /// Cache policy.
    #[arg(long, value_enum, default_value_t = PolicyArg::Anthropic)]
    pub policy: PolicyArg,
    /// Billing profile.
    #[arg(long, value_enum, default_value_t = BillingArg::Anthropic)]
    pub billing: BillingArg,
    /// What "the same bytes" means.
    #[arg(long, value_enum, default_value_t = IdentityArg::Semantic)]
    pub identity: IdentityArg,
    /// Token estimate (o200k needs the `o200k` cargo feature).
    #[arg(long, value_enum, default_value_t = TokenizerArg::Bytes4)]
    pub tokenizer: TokenizerArg,
    /// When a write becomes readable.
    #[arg(long, value_enum, default_value_t = VisibilityArg::FirstToken)]
    pub visibility: VisibilityArg,
    /// Price table (JSON, shaped like fixtures/pricing.json); the shipped one by default.
    #[arg(long)]
    pub prices: Option<PathBuf>,
    /// Price models the table does not list as this model (by default their cost is unknown:
    /// tokens are counted, cost is null, and they are listed as unpriced).
    #[arg(long, visible_alias = "default-model", value_name = "MODEL")]
    pub price_unknown_as: Option<String>,
    /// Price requests with the prices in force on this date (YYYY-MM-DD); default: the price
    /// table's newest date.
    #[arg(long, value_name = "YYYY-MM-DD", value_parser = parse_date)]
    pub date: Option<forkcache::billing::PriceDate>,
    /// Positions each breakpoint looks back over, itself included.
    #[arg(long, default_value_t = 20)]
    pub lookback: u32,
    /// Count every tool_use / tool_result block as its own position.
    #[arg(long)]
    pub no_collapse_runs: bool,
    /// Render thinking/effort ahead of the tools (the "model-specific" rows of the docs).
    #[arg(long)]
    pub render_config_ahead: bool,
    /// Cache capacity in entries, per workspace (one workspace never evicts another's entries).
    #[arg(long, default_value_t = 1 << 20)]
    pub capacity: usize,
    /// Loading a deferred tool (a `tool_reference`) renders it among the tools, breaking the
    /// prefix, as real transcripts show; by default the documented rule (no change).
    #[arg(long)]
    pub deferred_tools_observed: bool,
}

/// `--policy`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum PolicyArg {
    /// What the API documents.
    Anthropic,
    /// The seeds' idealised longest-prefix cache.
    LongestPrefix,
}

/// `--billing`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum BillingArg {
    /// The price table.
    Anthropic,
    /// Writes 1.0×, reads 0.1×.
    Seed,
}

/// `--identity`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum IdentityArg {
    /// Structural for the API's objects, exact for user JSON and text.
    Semantic,
    /// Bytes as sent.
    Wire,
}

/// `--tokenizer`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum TokenizerArg {
    /// ceil(bytes / 4).
    Bytes4,
    /// OpenAI o200k.
    O200k,
}

/// `--visibility`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum VisibilityArg {
    /// When the writer starts.
    Start,
    /// When the writer's response begins.
    FirstToken,
    /// When the writer's response ends.
    Complete,
}

impl From<PolicyArg> for Policy {
    fn from(arg: PolicyArg) -> Policy {
        match arg {
            PolicyArg::Anthropic => Policy::Anthropic,
            PolicyArg::LongestPrefix => Policy::LongestPrefix,
        }
    }
}

impl From<BillingArg> for BillingProfile {
    fn from(arg: BillingArg) -> BillingProfile {
        match arg {
            BillingArg::Anthropic => BillingProfile::Anthropic,
            BillingArg::Seed => BillingProfile::Seed,
        }
    }
}

impl From<IdentityArg> for IdentityMode {
    fn from(arg: IdentityArg) -> IdentityMode {
        match arg {
            IdentityArg::Semantic => IdentityMode::Semantic,
            IdentityArg::Wire => IdentityMode::Wire,
        }
    }
}

impl From<VisibilityArg> for Visibility {
    fn from(arg: VisibilityArg) -> Visibility {
        match arg {
            VisibilityArg::Start => Visibility::Start,
            VisibilityArg::FirstToken => Visibility::FirstToken,
            VisibilityArg::Complete => Visibility::Complete,
        }
    }
}

impl From<TokenizerArg> for TokenizerKind {
    fn from(arg: TokenizerArg) -> TokenizerKind {
        match arg {
            TokenizerArg::Bytes4 => TokenizerKind::Bytes4,
            TokenizerArg::O200k => TokenizerKind::O200k,
        }
    }
}

impl RunArgs {
    /// Applies the flags given to the scenario's own settings.
    pub fn apply(&self, spec: &mut forkcache::scenario::ScenarioSpec) {
        if let Some(policy) = self.policy {
            spec.policy = policy.into();
        }
        if let Some(billing) = self.billing {
            spec.billing = billing.into();
        }
        if let Some(identity) = self.identity {
            spec.identity = identity.into();
        }
        if let Some(visibility) = self.visibility {
            spec.visibility = visibility.into();
        }
        if let Some(seed) = self.seed {
            spec.seed = seed;
        }
    }

    /// The price table named by `--prices`.
    pub fn prices(&self) -> anyhow::Result<PriceTable> {
        load_prices(self.prices.as_deref())
    }
}

fn load_prices(path: Option<&std::path::Path>) -> anyhow::Result<PriceTable> {
    use anyhow::Context;
    match path {
        None => Ok(PriceTable::builtin()),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading price table {}", path.display()))?;
            Ok(PriceTable::from_json(&text).with_context(|| format!("in {}", path.display()))?)
        }
    }
}

impl SweepArgs {
    /// The price table named by `--prices`.
    pub fn prices(&self) -> anyhow::Result<PriceTable> {
        load_prices(self.prices.as_deref())
    }
}

impl EngineArgs {
    /// The endpoint settings these flags describe.
    pub fn endpoint_config(&self) -> EndpointConfig {
        let mut config = EndpointConfig {
            billing: match self.billing {
                BillingArg::Anthropic => BillingProfile::Anthropic,
                BillingArg::Seed => BillingProfile::Seed,
            },
            tokenizer: match self.tokenizer {
                TokenizerArg::Bytes4 => TokenizerKind::Bytes4,
                TokenizerArg::O200k => TokenizerKind::O200k,
            },
            ..EndpointConfig::default()
        };
        config.prompt.identity = match self.identity {
            IdentityArg::Semantic => IdentityMode::Semantic,
            IdentityArg::Wire => IdentityMode::Wire,
        };
        config.prompt.collapse_tool_runs = !self.no_collapse_runs;
        config.prompt.render_config_ahead = self.render_config_ahead;
        if self.deferred_tools_observed {
            config.prompt.deferred_tools = DeferredTools::Observed;
        }
        config.cache.policy = match self.policy {
            PolicyArg::Anthropic => Policy::Anthropic,
            PolicyArg::LongestPrefix => Policy::LongestPrefix,
        };
        config.cache.visibility = match self.visibility {
            VisibilityArg::Start => Visibility::Start,
            VisibilityArg::FirstToken => Visibility::FirstToken,
            VisibilityArg::Complete => Visibility::Complete,
        };
        config.cache.lookback_positions = self.lookback;
        config.cache.capacity_entries = self.capacity;
        config.price_date = self.date;
        config
    }

    /// The price table these flags name.
    pub fn prices(&self) -> anyhow::Result<PriceTable> {
        let mut table = load_prices(self.prices.as_deref())?;
        if let Some(model) = &self.price_unknown_as {
            table.set_price_unknown_as(model)?;
        }
        Ok(table)
    }
}

/// `proxy`.
#[derive(Args, Debug)]
pub struct ProxyArgs {
    /// Where to forward: the API's base URL (`https://api.anthropic.com`) or a mock's.
    #[arg(long)]
    pub upstream: String,
    /// PEM file of extra CA certificates to trust for an https upstream (a private CA).
    #[arg(long)]
    pub upstream_ca: Option<PathBuf>,
    /// Address to listen on; port 0 picks a free port (the bound address is printed first).
    #[arg(long, default_value = "127.0.0.1:8766")]
    pub addr: SocketAddr,
    /// Append every Messages exchange to this JSONL trace, created mode 0600 (`forkcache replay`
    /// reads it).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Write every text of a request to the trace as a hash with its declared size
    /// (`forkcache_tokens`): the trace can be shared and still replays to the same usage.
    #[arg(long)]
    pub redact: bool,
    /// Print no comparison line per request (the summary is still printed at shutdown).
    #[arg(long)]
    pub quiet: bool,
    /// `GET /forkcache/stats` needs a key (`x-api-key` or a bearer token) and shows only the
    /// workspaces that key's requests were counted in.
    #[arg(long)]
    pub require_key: bool,
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// Parses the process arguments.
pub fn parse() -> Cli {
    Cli::parse()
}
