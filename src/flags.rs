//! The flags several commands share, written once: each command's module flattens the ones it
//! takes, so they read the same everywhere (`cli::CONVENTIONS` documents them).

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use forkcache_engine::billing::{BillingProfile, PriceTable};
use forkcache_engine::cache::Policy;
use forkcache_engine::clock::Visibility;
use forkcache_engine::endpoint::EndpointConfig;
use forkcache_engine::prompt::{DeferredTools, IdentityMode, ImageRule};
use forkcache_engine::provider::Provider;
use forkcache_engine::tokenize::TokenizerKind;

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

/// `--key-salt`, on the commands that fingerprint keys (`serve`, `proxy`).
#[derive(Args, Clone, Default)]
pub struct KeySaltFlag {
    /// Key the workspace fingerprints of API keys with this secret, so that no one without it can
    /// compute a key's fingerprint or link it to a key; the same secret gives the same
    /// fingerprints in every run. Set it in the environment rather than on a command line others
    /// can list. Default: unkeyed fingerprints (xxh3 of the key).
    #[arg(long, env = "FORKCACHE_KEY_SALT", hide_env_values = true, value_name = "SECRET",
        value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub key_salt: Option<String>,
}

// By hand: the secret is never printed, not even in a debug dump of the arguments.
impl std::fmt::Debug for KeySaltFlag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.key_salt.is_some() { "KeySaltFlag(set)" } else { "KeySaltFlag(none)" })
    }
}

impl KeySaltFlag {
    /// The salt to fingerprint keys with.
    pub fn salt(&self) -> forkcache_engine::endpoint::KeySalt {
        self.key_salt.as_deref().map(forkcache_engine::endpoint::KeySalt::new).unwrap_or_default()
    }
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

fn parse_date(text: &str) -> Result<forkcache_engine::billing::PriceDate, String> {
    forkcache_engine::billing::PriceDate::parse(text).map_err(|err| err.to_string())
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
    pub date: Option<forkcache_engine::billing::PriceDate>,
    /// Positions each breakpoint looks back over, itself included.
    #[arg(long, default_value_t = 20)]
    pub lookback: u32,
    /// Count every tool_use / tool_result block as its own position.
    #[arg(long)]
    pub no_collapse_runs: bool,
    /// Render thinking/effort ahead of the tools (the "model-specific" rows of the docs).
    #[arg(long)]
    pub render_config_ahead: bool,
    /// Accept and price what the real API refuses (tool calls without results, out-of-range
    /// sampling, unknown block types, …), as before the API's own checks were applied.
    #[arg(long)]
    pub lenient: bool,
    /// Cache capacity in entries, per workspace (one workspace never evicts another's entries).
    #[arg(long, default_value_t = 1 << 20)]
    pub capacity: usize,
    /// Loading a deferred tool (a `tool_reference`) renders it among the tools, breaking the
    /// prefix, as real transcripts show; by default the documented rule (no change).
    #[arg(long)]
    pub deferred_tools_observed: bool,
    /// What an image does to the messages' cache: `observed` (the real API: an image added after
    /// the cached prefix leaves it readable) or `documented` (the docs' table: an image anywhere
    /// invalidates the messages level). See docs/fidelity.md.
    #[arg(long, value_enum, default_value_t = ImageRuleArg::Observed)]
    pub image_rule: ImageRuleArg,
}

/// `--image-rule`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ImageRuleArg {
    /// What the real API did.
    Observed,
    /// The documentation's table read literally.
    Documented,
}

/// `--policy`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum PolicyArg {
    /// What the API documents.
    Anthropic,
    /// The seeds' idealised longest-prefix cache.
    LongestPrefix,
}

/// `--provider` on `run` and `sweep`: providers by name, comma-separated, or `all` (every
/// provider, in [`Provider::ALL`]'s order); each once, in the order first named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderList(pub Vec<Provider>);

/// Reads a [`ProviderList`] (a usage error names the known providers).
pub fn parse_providers(text: &str) -> Result<ProviderList, String> {
    let mut providers: Vec<Provider> = Vec::new();
    for name in text.split(',').map(str::trim) {
        let named = match name {
            "all" => Provider::ALL.to_vec(),
            name => vec![parse_provider(name)?],
        };
        for provider in named {
            if !providers.contains(&provider) {
                providers.push(provider);
            }
        }
    }
    Ok(ProviderList(providers))
}

/// Flags that parse one by one but not together: said as clap says any usage error (exit 2).
pub fn conflicting_flags(message: impl std::fmt::Display) -> ! {
    clap::Error::raw(clap::error::ErrorKind::ArgumentConflict, format!("{message}\n")).exit()
}

/// One provider by name (a usage error names the known ones).
pub fn parse_provider(text: &str) -> Result<Provider, String> {
    Provider::parse(text).map_err(|err| err.to_string())
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

fn load_prices(path: Option<&std::path::Path>) -> anyhow::Result<PriceTable> {
    use anyhow::Context;
    match path {
        None => Ok(PriceTable::builtin()),
        Some(path) => {
            let file = std::fs::File::open(path)
                .with_context(|| format!("reading price table {}", path.display()))?;
            let text = crate::input::read_document_text(file, path)?;
            Ok(PriceTable::from_json(&text).with_context(|| format!("in {}", path.display()))?)
        }
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
        config.lenient = self.lenient;
        config.prompt.render_config_ahead = self.render_config_ahead;
        if self.deferred_tools_observed {
            config.prompt.deferred_tools = DeferredTools::Observed;
        }
        config.prompt.image_rule = match self.image_rule {
            ImageRuleArg::Observed => ImageRule::Observed,
            ImageRuleArg::Documented => ImageRule::Documented,
        };
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

/// The most worker threads `--threads` takes: far past any machine this runs on, and low enough
/// that a typo (`--threads 1000000`) is refused at once instead of spawning a million threads.
pub const MAX_THREADS: usize = 1024;

/// `--addr`'s parser for `serve` and `proxy`: an IP address and port, or a host name and port
/// (`localhost:8765`), taking the first address the name resolves to.
pub fn parse_listen_addr(text: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs as _;
    if let Ok(addr) = text.parse() {
        return Ok(addr);
    }
    let mut resolved =
        text.to_socket_addrs().map_err(|e| format!("{text:?}: expected HOST:PORT or IP:PORT ({e})"))?;
    resolved.next().ok_or_else(|| format!("{text:?} resolves to no address"))
}

/// `--threads N`'s parser, the same on every command: 1 to [`MAX_THREADS`].
pub fn parse_threads(text: &str) -> Result<usize, String> {
    let threads: usize = text.parse().map_err(|_| format!("{text:?} is not a whole number"))?;
    if (1..=MAX_THREADS).contains(&threads) {
        Ok(threads)
    } else {
        Err(format!("{threads} threads: expected 1 to {MAX_THREADS}"))
    }
}
