//! `forkcache prices`: the price table as people and programs read it.

use std::process::ExitCode;

use clap::Args;

use forkcache_engine::PriceTable;

use forkcache_engine::Provider;

use crate::flags::{CsvFlag, JsonFlag, PricesFlag, parse_provider};

/// `prices`.
#[derive(Args, Debug)]
pub struct PricesArgs {
    #[command(flatten)]
    pub output: JsonFlag,
    #[command(flatten)]
    pub table: CsvFlag,
    #[command(flatten)]
    pub price_file: PricesFlag,
    /// Whose shipped table to list when `--prices` names none: anthropic, bedrock, openai
    /// (what `import codex` prices with), gemini-implicit or deepseek.
    #[arg(long, value_name = "PROVIDER", default_value = "anthropic", value_parser = parse_provider)]
    pub provider: Provider,
}

impl PricesArgs {
    /// The price table named by `--prices`, else the provider's.
    pub fn prices(&self) -> anyhow::Result<PriceTable> {
        match self.price_file.prices {
            Some(_) => self.price_file.load(),
            None => Ok(self.provider.prices()),
        }
    }
}

pub fn run(args: &PricesArgs) -> anyhow::Result<ExitCode> {
    let table = args.prices()?;
    if args.output.json {
        println!("{}", table.to_json());
    } else if args.table.csv {
        print!("{}", table.to_csv());
    } else {
        print!("{}", table.to_table());
    }
    Ok(ExitCode::SUCCESS)
}
