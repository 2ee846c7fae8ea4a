//! `forkcache import codex`: reads rollout files, prints the report, writes the CSVs and the
//! page.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use forkcache_engine::PriceTable;
use forkcache_ingest::codex::{self, CodexOptions, CodexWhatIf};
use forkcache_ingest::files;

use crate::flags::{JsonFlag, QuietFlag};

/// `import codex`.
#[derive(Args, Debug)]
pub struct CodexArgs {
    /// Rollout files, or directories searched for `.jsonl` files (a `~/.codex/sessions` tree).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    #[command(flatten)]
    pub output: JsonFlag,
    /// Write requests.csv and breaks.csv (a row per request and per break) to this directory.
    #[arg(long, value_name = "DIR")]
    pub csv: Option<PathBuf>,
    /// Write one self-contained page to DIR/index.html: every thread's totals, two charts (real
    /// usage per request with breaks marked; real beside predicted reads), its breaks with their
    /// causes, and the what-ifs.
    #[arg(long, value_name = "DIR")]
    pub html: Option<PathBuf>,
    /// Re-price the prediction under a changed setting: retention=24h, no-model-switch
    /// (repeatable).
    #[arg(long = "what-if", value_name = "SETTING", value_parser = CodexWhatIf::parse)]
    pub what_if: Vec<CodexWhatIf>,
    /// Price table (JSON, shaped like fixtures/pricing-openai.json); the shipped OpenAI one by
    /// default.
    #[arg(long, value_name = "FILE")]
    pub prices: Option<PathBuf>,
    /// Also price threads of this `model_provider` at the table's prices (only `openai` is by
    /// default; other providers' requests have no cost). Repeatable.
    #[arg(long = "price-provider", value_name = "NAME")]
    pub price_provider: Vec<String>,
    #[command(flatten)]
    pub quiet: QuietFlag,
}

impl CodexArgs {
    fn prices(&self) -> anyhow::Result<PriceTable> {
        match &self.prices {
            None => Ok(PriceTable::builtin_openai()),
            Some(path) => {
                let text =
                    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
                PriceTable::from_json(&text).with_context(|| format!("reading {}", path.display()))
            }
        }
    }
}

/// Runs the import.
pub fn run(args: &CodexArgs) -> anyhow::Result<ExitCode> {
    let paths = files::transcript_files(&args.paths).context("finding rollout files")?;
    let mut threads = Vec::with_capacity(paths.len());
    for path in &paths {
        let name = path.display().to_string();
        let bytes = std::fs::read(path).with_context(|| format!("reading {name}"))?;
        threads.push(codex::read_rollout(&name, &bytes)?);
    }
    let mut options = CodexOptions { what_ifs: args.what_if.clone(), ..CodexOptions::default() };
    options.priced_providers.extend(args.price_provider.iter().cloned());
    let report = codex::analyse(&threads, &options, &args.prices()?);
    if args.output.json {
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        serde_json::to_writer(&mut out, &report).context("writing the report")?;
        writeln!(out).context("writing the report")?;
    } else if !args.quiet.quiet {
        print!("{}", report.to_table());
    }
    if let Some(dir) = &args.csv {
        let (requests, breaks) = report.to_csv()?;
        super::write_files(dir, &[("requests.csv", requests), ("breaks.csv", breaks)])?;
    }
    if let Some(dir) = &args.html {
        let page = forkcache_report::import::codex::page(&report)?;
        forkcache_report::write(dir, &[page]).with_context(|| format!("writing {}", dir.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}
