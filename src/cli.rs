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
#[command(name = "forkcache", version, about, long_about = None, after_help = CONVENTIONS)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The conventions every command shares, written once (the `forkcache --help` epilogue).
pub const CONVENTIONS: &str = "\
Conventions (every command):
  --json         one JSON document on standard output instead of tables
  --csv          the table as CSV on standard output (import: --csv DIR writes its CSVs there)
  --quiet, -q    no progress bar, table or per-request line on standard output; errors still
                 go to standard error (and --json still prints its document)
  --out DIR      where a command writes files (demo, report, sweep: reports/ by default)
  --prices FILE  the price table (shaped like fixtures/pricing.json); the shipped one by default
  --seed N       the seed of every generated conversation (run, demo, sweep, report)
JSON: usage objects have the API's keys (input_tokens, cache_creation_input_tokens,
  cache_read_input_tokens, output_tokens); money is cost_usd (a number, or null when a model is
  not priced); savings and rates are fractions in [0, 1] (tables show percents).
Indexes: request and record indexes are 0-based everywhere (tables, JSON, CSV, charts, errors,
  explain --request N); what people count is 1-based and says so: --shard i/n, file line
  numbers, agent labels such as \"fork 1\".
Exit codes: 0 success; 1 invalid input (stderr names the file, line, column and field);
  2 usage error; 3 finished, but some input lines were unreadable.";

/// `--json`, the same on every command.
#[derive(Args, Clone, Copy, Debug, Default)]
pub struct JsonFlag {
    /// Print one JSON document on standard output instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// `--csv`, on commands that print a table.
#[derive(Args, Clone, Copy, Debug, Default)]
pub struct CsvFlag {
    /// Print the table as CSV on standard output (one header line, then one row per line).
    #[arg(long, conflicts_with = "json")]
    pub csv: bool,
}

/// `--quiet`, the same on every command that prints as it goes.
#[derive(Args, Clone, Copy, Debug, Default)]
pub struct QuietFlag {
    /// Print no progress bar, table or per-request line on standard output (errors still go to
    /// standard error; `--json` still prints its document).
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// `--prices FILE`, on every command that prices.
#[derive(Args, Clone, Debug, Default)]
pub struct PricesFlag {
    /// Price table (JSON, shaped like fixtures/pricing.json); the shipped one by default.
    #[arg(long, value_name = "FILE")]
    pub prices: Option<PathBuf>,
}

impl PricesFlag {
    /// The price table named, or the shipped one.
    pub fn load(&self) -> anyhow::Result<PriceTable> {
        load_prices(self.prices.as_deref())
    }
}

/// `--out DIR`, on commands that write a directory of files.
#[derive(Args, Clone, Debug)]
pub struct OutDir {
    /// Directory the files are written to (created if missing).
    #[arg(long, value_name = "DIR", default_value = "reports")]
    pub out: PathBuf,
}

/// The grids `demo` and `report` run (their charts and CSVs follow).
#[derive(Args, Clone, Debug, Default)]
pub struct GridArgs {
    /// The grid behind sweep.csv and the sweep charts (a sweep file); default
    /// fixtures/sweeps/default.json.
    #[arg(long = "sweep", value_name = "SWEEP.json")]
    pub sweep: Option<PathBuf>,
    /// The grid behind cost_curves.csv (a sweep file); default fixtures/sweeps/cost-curves.json.
    #[arg(long, value_name = "SWEEP.json")]
    pub cost_curves: Option<PathBuf>,
}

/// `--seed`, on every command that generates conversations.
#[derive(Args, Clone, Copy, Debug, Default)]
pub struct SeedFlag {
    /// Seed of every generated conversation (default: each scenario's own `seed`).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
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
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub output: JsonFlag,
    #[command(flatten)]
    pub quiet: QuietFlag,
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
    #[command(flatten)]
    pub output: JsonFlag,
    #[command(flatten)]
    pub table: CsvFlag,
    #[command(flatten)]
    pub price_file: PricesFlag,
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
    #[command(flatten)]
    pub output: JsonFlag,
    /// Write requests.csv and breaks.csv (a row per request and per break) to this directory.
    #[arg(long, value_name = "DIR")]
    pub csv: Option<PathBuf>,
    /// Write two charts per session (PNG and SVG) to this directory: real usage per request with
    /// breaks marked, and real beside predicted read over time.
    #[arg(long, value_name = "DIR")]
    pub chart: Option<PathBuf>,
    /// Write one self-contained page to DIR/index.html: every session's charts (inline SVG), its
    /// breaks with their causes as a sortable table, and the what-ifs.
    #[arg(long, value_name = "DIR")]
    pub html: Option<PathBuf>,
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
    #[command(flatten)]
    pub price_file: PricesFlag,
    #[command(flatten)]
    pub quiet: QuietFlag,
}

impl PricesArgs {
    /// The price table named by `--prices`.
    pub fn prices(&self) -> anyhow::Result<PriceTable> {
        self.price_file.load()
    }
}

impl ClaudeCodeArgs {
    /// The price table named by `--prices`.
    pub fn prices(&self) -> anyhow::Result<PriceTable> {
        self.price_file.load()
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
    #[command(flatten)]
    pub files: OutDir,
    /// Run only part i of n of the grid (contiguous cells; the header is in part 1 only, so
    /// the parts' files concatenate, in order, to the whole grid's).
    #[arg(long, value_name = "i/n")]
    pub shard: Option<String>,
    /// Worker threads (default: one per core). The output does not depend on it.
    #[arg(long)]
    pub threads: Option<usize>,
    #[command(flatten)]
    pub price_file: PricesFlag,
    #[command(flatten)]
    pub generator: SeedFlag,
    #[command(flatten)]
    pub output: JsonFlag,
    #[command(flatten)]
    pub quiet: QuietFlag,
}

/// `report`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    #[command(flatten)]
    pub files: OutDir,
    #[command(flatten)]
    pub grids: GridArgs,
    /// Worker threads for the sweeps (default: one per core). The output does not depend on it.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Also write index.html: every chart inline and the small tables, sortable, in one
    /// self-contained page (nothing fetched when it opens).
    #[arg(long)]
    pub html: bool,
    #[command(flatten)]
    pub price_file: PricesFlag,
    #[command(flatten)]
    pub generator: SeedFlag,
    #[command(flatten)]
    pub output: JsonFlag,
    #[command(flatten)]
    pub quiet: QuietFlag,
}

/// `run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// The scenario file (see fixtures/scenarios/ and the README); `-` reads standard input.
    pub scenario: PathBuf,
    #[command(flatten)]
    pub output: JsonFlag,
    #[command(flatten)]
    pub table: CsvFlag,
    #[command(flatten)]
    pub quiet: QuietFlag,
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
    #[command(flatten)]
    pub price_file: PricesFlag,
    #[command(flatten)]
    pub generator: SeedFlag,
    /// Also write every request's body to this directory (NNNN-role.json, NNNN the 0-based
    /// request index), for `explain`.
    #[arg(long, value_name = "DIR")]
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

/// `demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    #[command(flatten)]
    pub files: OutDir,
    #[command(flatten)]
    pub grids: GridArgs,
    #[command(flatten)]
    pub price_file: PricesFlag,
    #[command(flatten)]
    pub generator: SeedFlag,
    #[command(flatten)]
    pub output: JsonFlag,
    #[command(flatten)]
    pub quiet: QuietFlag,
}

/// `replay`.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The trace; `-` reads standard input.
    pub trace: PathBuf,
    #[command(flatten)]
    pub output: JsonFlag,
    #[command(flatten)]
    pub table: CsvFlag,
    #[command(flatten)]
    pub quiet: QuietFlag,
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
    /// Threads that read and parse the trace (the cache runs on one more); the output is the
    /// same on any number. Default: the machine's cores.
    #[arg(long, value_parser = clap::value_parser!(usize))]
    pub threads: Option<usize>,
    /// Lines run in start order as far as this many lines (and 32 KiB of line bytes per line)
    /// reach; a line starting before one that already ran is an error (exit 1) naming it.
    #[arg(long, default_value_t = forkcache::replay::DEFAULT_REORDER_WINDOW)]
    pub reorder_window: usize,
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
    #[command(flatten)]
    pub quiet: QuietFlag,
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
    #[command(flatten)]
    pub price_file: PricesFlag,
    /// Price models the table does not list as this model (by default their cost is unknown:
    /// tokens are counted, cost is null, and they are listed as unpriced).
    #[arg(long, visible_alias = "default-model", value_name = "MODEL")]
    pub price_unknown_as: Option<String>,
    /// Price requests with the prices in force on this date (YYYY-MM-DD); default: the date a
    /// trace's session marker says its server started, else the price table's newest date.
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
        if let Some(seed) = self.generator.seed {
            spec.seed = seed;
        }
    }

    /// The price table named by `--prices`.
    pub fn prices(&self) -> anyhow::Result<PriceTable> {
        self.price_file.load()
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
        self.price_file.load()
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
        let mut table = self.price_file.load()?;
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
    #[command(flatten)]
    pub quiet: QuietFlag,
    /// `GET /forkcache/stats` needs a key (`x-api-key` or a bearer token) and shows only the
    /// workspaces that key's requests were counted in.
    #[arg(long)]
    pub require_key: bool,
    /// Request bodies (MiB) that may wait for their prediction, which runs at the lowest CPU
    /// priority; past it an exchange is recorded but not predicted (its line says so).
    #[arg(long, default_value_t = forkcache::proxy::PREDICTION_QUEUE_BYTES >> 20)]
    pub prediction_queue_mb: usize,
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// Parses the process arguments.
pub fn parse() -> Cli {
    Cli::parse()
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    use super::*;

    /// Every flag and argument of every command says what it is in one line of `--help`.
    #[test]
    fn every_flag_has_a_help_line() {
        fn walk(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in command.get_arguments() {
                let id = arg.get_id().as_str();
                if arg.get_help().is_none() && !["help", "version"].contains(&id) {
                    missing.push(format!("{path} --{id}"));
                }
            }
            for sub in command.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&Cli::command(), "forkcache", &mut missing);
        assert!(missing.is_empty(), "flags without help: {missing:?}");
    }

    /// The common flags read the same on every command that has them.
    #[test]
    fn common_flags_are_common() {
        let command = Cli::command();
        for name in ["demo", "run", "sweep", "replay", "report", "prices", "explain", "merge-shards"] {
            let sub = command.find_subcommand(name).expect("a subcommand");
            assert!(sub.get_arguments().any(|a| a.get_long() == Some("json")), "{name} --json");
        }
        for name in ["demo", "run", "sweep", "report", "prices", "serve", "proxy", "replay", "explain"] {
            let sub = command.find_subcommand(name).expect("a subcommand");
            assert!(sub.get_arguments().any(|a| a.get_long() == Some("prices")), "{name} --prices");
        }
        for name in ["demo", "run", "sweep", "report"] {
            let sub = command.find_subcommand(name).expect("a subcommand");
            assert!(sub.get_arguments().any(|a| a.get_long() == Some("seed")), "{name} --seed");
        }
        for name in ["demo", "run", "sweep", "replay", "report", "serve", "proxy", "merge-shards"] {
            let sub = command.find_subcommand(name).expect("a subcommand");
            assert!(sub.get_arguments().any(|a| a.get_long() == Some("quiet")), "{name} --quiet");
        }
        for name in ["run", "replay", "prices"] {
            let sub = command.find_subcommand(name).expect("a subcommand");
            assert!(sub.get_arguments().any(|a| a.get_long() == Some("csv")), "{name} --csv");
        }
        let import = command.find_subcommand("import").and_then(|i| i.find_subcommand("claude-code"));
        let import = import.expect("import claude-code");
        for flag in ["json", "prices", "quiet", "csv"] {
            assert!(import.get_arguments().any(|a| a.get_long() == Some(flag)), "import --{flag}");
        }
        let help = command.clone().render_long_help().to_string();
        assert!(help.contains("Conventions (every command):"), "{help}");
    }
}
