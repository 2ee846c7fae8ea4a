//! `forkcache prices`: the price table as people and programs read it.

use std::process::ExitCode;

use clap::Args;

use forkcache_engine::PriceTable;

use crate::flags::{CsvFlag, JsonFlag, PricesFlag};

/// `prices`.
#[derive(Args, Debug)]
pub struct PricesArgs {
    #[command(flatten)]
    pub output: JsonFlag,
    #[command(flatten)]
    pub table: CsvFlag,
    #[command(flatten)]
    pub price_file: PricesFlag,
    /// Whose shipped table to list when `--prices` names none: anthropic (Claude) or openai
    /// (what `import codex` prices with).
    #[arg(long, value_enum, default_value = "anthropic")]
    pub provider: Provider,
}

/// The providers with a shipped price table.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provider {
    /// Claude models (`fixtures/pricing.json`).
    Anthropic,
    /// OpenAI models (`fixtures/pricing-openai.json`).
    Openai,
}

impl PricesArgs {
    /// The price table named by `--prices`.
    pub fn prices(&self) -> anyhow::Result<PriceTable> {
        if self.provider == Provider::Openai && self.price_file.prices.is_none() {
            return Ok(PriceTable::builtin_openai());
        }
        self.price_file.load()
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
