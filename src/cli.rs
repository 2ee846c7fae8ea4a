//! The command line's definition: the subcommands (each module of `cmd` holds its own flags),
//! the conventions they share, and what is generated from the definition (completions, man).

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::cmd::demo::DemoArgs;
use crate::cmd::explain::ExplainArgs;
use crate::cmd::import::ImportSource;
use crate::cmd::merge_shards::MergeShardsArgs;
use crate::cmd::prices::PricesArgs;
use crate::cmd::proxy::ProxyArgs;
use crate::cmd::replay::ReplayArgs;
use crate::cmd::report::ReportArgs;
use crate::cmd::run::RunArgs;
use crate::cmd::serve::ServeArgs;
use crate::cmd::sweep::SweepArgs;

/// Simulate, measure and price prompt-cache sharing in LLM agent systems.
#[derive(Parser, Debug)]
#[command(name = "forkcache", version, about, long_about = None, after_help = CONVENTIONS)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// The most bytes any one input may hold: a document (scenario, sweep, script, price
    /// table, request), or one line of a trace or transcript.
    #[arg(long, global = true, value_name = "BYTES", default_value_t = crate::input::DEFAULT_MAX_INPUT_BYTES)]
    pub max_input_bytes: u64,
}

/// The conventions every command shares, written once (the `forkcache --help` epilogue).
pub const CONVENTIONS: &str = "\
Conventions (the same on every command that takes the flag):
  --json         one JSON document on standard output instead of tables
  --csv          the table as CSV on standard output (import: --csv DIR writes its CSVs there)
  --quiet, -q    no progress bar, table or per-request line on standard output; errors still
                 go to standard error (and --json still prints its document)
  --out DIR      where a command writes files (demo, report, sweep: reports/ by default)
  --prices FILE  the price table (shaped like fixtures/pricing.json); the shipped one by default
  --seed N       the seed of every generated conversation (run, demo, sweep, report)
  --max-input-bytes N  the most bytes of one input file, or of one line of a trace or
                 transcript (default 64 MiB); past it, an error names the file or line
JSON: usage objects have the API's keys (input_tokens, cache_creation_input_tokens,
  cache_read_input_tokens, output_tokens); money is cost_usd (a number, or null when a model is
  not priced); savings and rates are fractions in [0, 1] (tables show percents).
Indexes: request and record indexes are 0-based everywhere (tables, JSON, CSV, charts, errors,
  explain --request N); what people count is 1-based and says so: --shard i/n, file line
  numbers, agent labels such as \"fork 1\".
Exit codes: 0 success; 1 invalid input (stderr names the file, line, column and field);
  2 usage error; 3 finished, but some input lines were unreadable.";

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
    render_subcommands(&command, "forkcache", &mut out)?;
    Ok(out)
}

/// A page for each subcommand of `command` (called `name`), and for theirs in turn
/// (`forkcache import claude-code` has its own page).
fn render_subcommands(command: &clap::Command, name: &str, out: &mut Vec<u8>) -> std::io::Result<()> {
    for sub in command.get_subcommands().filter(|sub| sub.get_name() != "help") {
        let sub_name = format!("{name} {}", sub.get_name());
        let page = sub.clone().bin_name(&sub_name);
        out.extend_from_slice(b".bp\n");
        clap_mangen::Man::new(page).title(sub_name.replace(' ', "-")).render(out)?;
        render_subcommands(sub, &sub_name, out)?;
    }
    Ok(())
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
        assert!(help.contains("Conventions (the same on every command that takes the flag):"), "{help}");
    }
}
