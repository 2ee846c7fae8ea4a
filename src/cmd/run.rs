//! `forkcache run`: one scenario, every request priced.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use forkcache_engine::{PriceTable, Provider};

use super::{not_a_trace, read_input};
use crate::flags::{
    BillingArg, CsvFlag, IdentityArg, JsonFlag, PolicyArg, PricesFlag, ProviderList, QuietFlag, SeedFlag,
    TokenizerArg, VisibilityArg,
};

/// `run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// The scenario file (see fixtures/scenarios/ and docs/run.md); `-` reads standard input.
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
    /// Run on this provider's cache rules, prices and models: anthropic, bedrock, openai,
    /// gemini-implicit, gemini-explicit or deepseek (default: the scenario's `provider`, else
    /// anthropic). Several, comma-separated, or `all`: one table compares their bills.
    /// `--prices` replaces Anthropic's table only.
    #[arg(long, value_name = "PROVIDER[,…]", value_parser = crate::flags::parse_providers)]
    pub provider: Option<ProviderList>,
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
    /// Render thinking/effort ahead of the tools (the "model-specific" rows of the docs), as
    /// `replay` and `serve` do with the same flag.
    #[arg(long)]
    pub render_config_ahead: bool,
}

impl RunArgs {
    /// Applies the flags given to the scenario's own settings.
    pub fn apply(&self, spec: &mut forkcache_scenario::ScenarioSpec) {
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

pub fn run(args: &RunArgs) -> anyhow::Result<ExitCode> {
    use forkcache_scenario::{RunConfig, ScenarioSpec};
    let text = read_input(&args.scenario)?;
    not_a_trace(&text, &args.scenario, "run", "a scenario file (docs/run.md)")?;
    let mut spec =
        ScenarioSpec::from_json(&text).with_context(|| format!("in {}", args.scenario.display()))?;
    // Custom agents' files are named relative to the scenario file.
    let base =
        args.scenario.parent().filter(|dir| !dir.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    spec.load_agent_files(base).with_context(|| format!("in {}", args.scenario.display()))?;
    args.apply(&mut spec);
    let mut config = RunConfig::for_spec(&spec);
    config.endpoint.tokenizer = args.tokenizer.into();
    config.keep_bodies = args.bodies.is_some();
    config.endpoint.prompt.render_config_ahead = args.render_config_ahead;
    let providers = args.provider.as_ref().map_or(&[][..], |list| &list.0[..]);
    if providers.len() > 1 {
        return compare(args, &spec, &config, providers);
    }
    if let Some(&provider) = providers.first() {
        spec.provider = provider;
    }
    let prices = match spec.provider {
        Provider::Anthropic => args.prices()?,
        provider => provider.prices(),
    };
    let report = forkcache_scenario::run(&spec, &config, &prices)
        .with_context(|| format!("running {}", args.scenario.display()))?;
    if let Some(dir) = &args.bodies {
        write_bodies(dir, &report)?;
    }
    if args.output.json {
        println!("{}", report.to_json());
    } else if args.table.csv {
        print!("{}", forkcache_report::scenario_requests_csv(&report));
    } else if !args.quiet.quiet {
        print!("{}", report.to_table());
    }
    Ok(ExitCode::SUCCESS)
}

/// The scenario on each of `providers`, one table (or JSON document, or CSV) of their bills.
fn compare(
    args: &RunArgs,
    spec: &forkcache_scenario::ScenarioSpec,
    config: &forkcache_scenario::RunConfig,
    providers: &[Provider],
) -> anyhow::Result<ExitCode> {
    use forkcache_report::providers::Comparison;
    if args.bodies.is_some() {
        crate::flags::conflicting_flags("--bodies writes the bodies of one run; give one --provider");
    }
    let comparison = Comparison::run(spec, config, &args.prices()?, providers)
        .with_context(|| format!("running {}", args.scenario.display()))?;
    if args.output.json {
        println!("{}", comparison.to_json());
    } else if args.table.csv {
        print!("{}", comparison.to_csv());
    } else if !args.quiet.quiet {
        print!("{}", comparison.to_table());
    }
    Ok(ExitCode::SUCCESS)
}

fn write_bodies(dir: &std::path::Path, report: &forkcache_scenario::ScenarioReport) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for record in &report.records {
        let path = dir.join(format!("{:04}-{}.json", record.index, record.role.name()));
        let body = record.body.as_deref().unwrap_or_default();
        std::fs::write(&path, body).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
