//! `reports/README.md`: what every file holds, the settings behind it, and every CSV column.

use std::fmt::Write as _;

use super::Artifact;
use crate::sweep::{Axes, SweepResult, SweepSpec};

/// What the notes are written from.
pub(crate) struct Inputs<'a> {
    /// Every other file of the report (CSV headers are read from them).
    pub artifacts: &'a [Artifact],
    pub sweep: (&'a SweepSpec, &'a SweepResult),
    pub curves: (&'a SweepSpec, &'a SweepResult),
    pub providers: (&'a SweepSpec, &'a SweepResult),
    pub prices_date: &'a str,
}

/// One chart of the report, as the notes and the HTML page describe it.
pub(crate) struct ChartNote {
    /// File stem (`cost_vs_idle` for `cost_vs_idle.png` and `.svg`).
    pub stem: &'static str,
    /// What it shows.
    pub shows: &'static str,
    /// One line: what to read from it.
    pub read: &'static str,
    /// Where its data comes from.
    pub data: &'static str,
}

/// The charts, in reading order.
pub(crate) const CHARTS: &[ChartNote] = &[
    ChartNote {
        stem: "savings_vs_history",
        shows: "what forks save by sharing the parent's cache, by history size, one line per fork count",
        read: "The longer the parent's history, the larger the share of the forks' input cost that sharing saves.",
        data: "sweep.csv: `subagent_savings`",
    },
    ChartNote {
        stem: "cost_vs_forks",
        shows: "the sub-agents' cost by how many are spawned: forks without sharing, forks sharing, named sub-agents",
        read: "At the N you spawn, the gap between the naive line and the sharing line is what the shared prefix saves.",
        data: "sweep.csv: `subagent_naive_nanousd`, `subagent_cost_nanousd`",
    },
    ChartNote {
        stem: "cost_vs_idle",
        shows: "the whole session's cost by the idle gap before the spawn, 5-minute vs 1-hour TTL, both TTLs marked",
        read: "Cost is flat except for one jump where the gap outlasts the TTL: the 1-hour TTL pays off when gaps of 5 to 60 minutes are common.",
        data: "sweep.csv: `cost_nanousd`",
    },
    ChartNote {
        stem: "policy_gap",
        shows: "what one of N forks costs under the documented cache (marker on the directive only, or on the last placeholder too, or own-tool-use forks) and under the idealised longest-prefix cache",
        read: "With the marker on the directive only, each fork costs more as N grows; a marker on the last placeholder too puts the documented cache on the idealised line.",
        data: "sweep.csv: `subagent_cost_nanousd` ÷ `forks`",
    },
    ChartNote {
        stem: "antipatterns",
        shows: "each anti-pattern's whole-scenario cost over its correct twin's, on a log axis from 1× (no change)",
        read: "The longer the bar, the more the mistake costs: equal lengths are equal ratios, and each bar carries its value.",
        data: "antipatterns.csv: `multiplier`",
    },
    ChartNote {
        stem: "session_timeline",
        shows: "one session's requests at their start times: tokens read, written and left uncached, forks, named sub-agents, sidecars and compaction marked",
        read: "Tall written (orange) columns are where the cache was built or rebuilt; gaps on the time axis are time with no request.",
        data: "requests.csv, scenario `session`: `at_ms` and the token columns",
    },
    ChartNote {
        stem: "cost_curves",
        shows: "what one fork costs, sharing and not, as the history grows (log-log)",
        read: "At your history size, the distance between a sharing line and the no-sharing lines is what each fork saves.",
        data: "cost_curves.csv",
    },
    ChartNote {
        stem: "providers",
        shows: "what N forks cost on each provider's cache and prices: Anthropic, Claude on Bedrock, OpenAI, Gemini's implicit cache and explicit objects, DeepSeek (log-log)",
        read: "Lines sit in the order of the providers' input prices; a line that climbs faster pays again for the forks' shared part: forks launched together cannot read it under Anthropic's rules (no marker inside it) or DeepSeek's (it becomes a unit only after two requests sent it).",
        data: "providers.csv: `subagent_cost_nanousd`",
    },
    ChartNote {
        stem: "delegation_vs_history",
        shows: "one unit of delegated work, five ways (fork, named agent, teammate, background agent, s06 sub-agent): what delegating added to the session's cost, by history size",
        read: "On a short history a fork or a teammate adds least; past about 50,000 tokens a named or background agent does, as neither carries the history.",
        data: "delegation.csv: `added_token_equivalents`, `idle_ms` 1000",
    },
    ChartNote {
        stem: "delegation_vs_idle",
        shows: "the same five ways by the idle gap between the delegate's requests, at a 100,000-token history",
        read: "Each line holds its cost between jumps (dots: the gaps of delegation.csv; each jump found to the second by running the session between them): at 2.5 minutes for the ways that make the parent wait (two gaps outlast the parent's 5-minute TTL), at the 5-minute TTL (marked) where the delegate's own cached prefix expires; the background agent adds least at every gap shown.",
        data: "delegation.csv: `added_token_equivalents`, `history_tokens` 100000",
    },
];

/// The CSV files, in reading order, with what one row is.
pub(crate) const TABLES: &[(&str, &str)] = &[
    ("summary.csv", "one fixture scenario (`fixtures/scenarios/`), with its own policy, billing and seed"),
    ("requests.csv", "one request of one fixture scenario, in start order"),
    ("antipatterns.csv", "one anti-pattern (docs/design.md §3) against its correct twin"),
    (
        "seed_example.csv",
        "one case of the seed articles' worked example (docs/design.md §2.5) under one policy and billing",
    ),
    ("sweep.csv", "one cell of the default grid (`fixtures/sweeps/default.json`)"),
    ("cost_curves.csv", "one cell of the cost-curve grid (`fixtures/sweeps/cost-curves.json`)"),
    (
        "providers.csv",
        "one cell of the providers grid (`fixtures/sweeps/providers.json`): the same agent on one provider",
    ),
    (
        "delegation.csv",
        "one way of delegating one unit of work (`scenario::delegation_spec`) at one history size and idle gap",
    ),
];

/// The notes, as Markdown.
pub(crate) fn readme(inputs: &Inputs) -> String {
    let mut out = String::new();
    preamble(&mut out, inputs);
    sweeps(&mut out, inputs);
    charts(&mut out);
    tables(&mut out, inputs.artifacts);
    out
}

fn preamble(out: &mut String, inputs: &Inputs) {
    let _ = writeln!(out, "# reports/\n");
    let _ = writeln!(
        out,
        "Generated: `forkcache report` writes every file here (`forkcache demo` does too, after printing its tables;\n`cargo bench --bench cost_curves` rewrites the cost curves). Edit the fixtures or the sweep files, not these.\nThe bytes depend only on the fixtures, the sweep files, the price table and the seeds: two runs on any\nmachine give identical files, PNG included.\n"
    );
    let _ = writeln!(out, "- Prices: `fixtures/pricing.json` of {}.", inputs.prices_date);
    let _ = writeln!(
        out,
        "- Tokens: declared by the blocks of the fixtures and sweeps, so every count is exact for the simulation\n  (Claude's tokenizer is not public: against real traffic, counts are estimates)."
    );
    let _ = writeln!(
        out,
        "- Money: integer nano-dollars (`*_nanousd`, 10⁹ to the dollar). Token-equivalents: cost ÷ the model's base\n  input price, three decimals. Percentages: two decimals. All computed in integers, rounded half away from zero."
    );
    let _ = writeln!(
        out,
        "- Naive cost: every request priced again alone in its own workspace — what it costs when nothing is shared.\n"
    );
}

fn sweeps(out: &mut String, inputs: &Inputs) {
    let _ = writeln!(out, "## The sweeps\n");
    for (spec, result) in [inputs.sweep, inputs.curves, inputs.providers] {
        let _ = writeln!(
            out,
            "- **{}** (`fixtures/sweeps/{}.json`), seed {}, {} cells: {}",
            result.name, result.name, result.seed, result.cells_total, spec.description
        );
        let _ = writeln!(out, "  Axes: {}.", axes_text(&spec.axes()));
    }
    let _ = writeln!(
        out,
        "\nEach cell runs one scenario: the history as alternating user and assistant messages of declared size,\none main-loop turn, the idle gap, then the spawn — N forks in one parent request, or N named sub-agents one\nafter another. `subagent_*` columns count only the forks' (or named sub-agents') requests.\n\nThe sweep charts hold every axis they do not plot at one point: each listed axis at its first value, the\nhistory nearest 100,000 tokens and the fork count nearest 4. Each chart's caption names that point.\n"
    );
}

fn axes_text(axes: &Axes) -> String {
    let list = |values: Vec<String>| values.join(", ");
    let names = |v: Vec<&str>| list(v.into_iter().map(str::to_string).collect());
    [
        format!("history_tokens {}", list(axes.history_tokens.iter().map(u64::to_string).collect())),
        format!("forks {}", list(axes.forks.iter().map(u32::to_string).collect())),
        format!("subagents {}", names(axes.subagents.iter().map(|s| s.name()).collect())),
        format!("provider {}", names(axes.provider.iter().map(|p| p.name()).collect())),
        format!("policy {}", names(axes.policy.iter().map(|p| p.name()).collect())),
        format!("billing {}", names(axes.billing.iter().map(|b| b.name()).collect())),
        format!("variant {}", names(axes.variant.iter().map(|v| v.name()).collect())),
        format!("launch {}", names(axes.launch.iter().map(|&l| crate::sweep::launch_name(l)).collect())),
        format!("mark_placeholders {}", list(axes.mark_placeholders.iter().map(bool::to_string).collect())),
        format!("ttl {}", names(axes.ttl.iter().map(|t| t.name()).collect())),
        format!("idle_ms {}", list(axes.idle_ms.iter().map(u64::to_string).collect())),
    ]
    .join("; ")
}

fn charts(out: &mut String) {
    let _ = writeln!(out, "## Charts\n");
    let _ = writeln!(
        out,
        "Each as PNG (1200×800) and SVG, the price table's date and the seed in its caption.\n"
    );
    for chart in CHARTS {
        let _ = writeln!(out, "- `{}.png`: {}", chart.stem, chart.read);
        let _ = writeln!(out, "  Shows {}. Data: {}.", chart.shows, chart.data);
    }
    out.push('\n');
}

fn tables(out: &mut String, artifacts: &[Artifact]) {
    let _ = writeln!(out, "## Tables\n");
    let _ = writeln!(out, "Comma-separated, a header row, columns always in this order.\n");
    for (file, row) in TABLES {
        let Some(header) = header_of(artifacts, file) else { continue };
        let _ = writeln!(out, "### `{file}` — a row is {row}\n");
        for column in header.split(',') {
            let _ = writeln!(out, "- `{column}`: {}", describe(file, column));
        }
        out.push('\n');
    }
}

fn header_of<'a>(artifacts: &'a [Artifact], file: &str) -> Option<&'a str> {
    let artifact = artifacts.iter().find(|a| a.name == *file)?;
    let text = std::str::from_utf8(&artifact.bytes).ok()?;
    text.lines().next()
}

/// What a column holds; a file's own meaning first, then the shared one.
pub(crate) fn describe(file: &str, column: &str) -> &'static str {
    match (file, column) {
        ("cost_curves.csv", "savings") => "the forks' cost saved against no sharing (a fraction, 0 to 1)",
        ("sweep.csv", "savings") => "the whole session's cost saved against no sharing (a fraction, 0 to 1)",
        ("seed_example.csv", "requests") => "requests replayed, the parent's included",
        ("delegation.csv", "idle_ms") => {
            "the gap between the delegate's requests (ms): its tools' time, or a teammate's wait for the leader's next message"
        }
        ("delegation.csv", "token_equivalents") => "the whole session's cost in token-equivalents",
        (_, "write_tokens") => "tokens written to the cache",
        _ => describe_shared(column),
    }
}

fn describe_shared(column: &str) -> &'static str {
    match column {
        "scenario" => "the fixture's name (`fixtures/scenarios/NAME.json`)",
        "provider" => {
            "the provider whose cache rules, prices and models the cell ran on: `anthropic`, `bedrock`, `openai`, `gemini-implicit`, `gemini-explicit` or `deepseek` (docs/providers.md)"
        }
        "policy" => {
            "cache policy: `anthropic` (the documented rules), `longest-prefix` (the seeds' idealised cache), or another provider's (`openai`, `gemini-implicit`, `gemini-explicit`, `deepseek`)"
        }
        "billing" => "billing profile: `anthropic` (the price table) or `seed` (writes 1.0×, reads 0.1×)",
        "seed" => "the seed every random draw derives from",
        "requests" => "requests sent",
        "context_tokens" => "the largest request's input tokens",
        "read_tokens" => "input tokens read from the cache",
        "write_5m_tokens" => "input tokens written to the cache with the 5-minute TTL",
        "write_1h_tokens" => "input tokens written to the cache with the 1-hour TTL",
        "uncached_tokens" => "input tokens neither read nor written (the API's `input_tokens`)",
        "output_tokens" => "output tokens billed",
        "cost_nanousd" => "what it cost",
        "naive_nanousd" => "what the same requests cost with nothing shared",
        "savings" => "cost saved against the naive cost (a fraction, 0 to 1)",
        "token_equivalents" => "cost ÷ base input price, in tokens",
        "naive_token_equivalents" => "naive cost ÷ base input price, in tokens",
        "hit_rate" => "tokens read ÷ input tokens (a fraction, 0 to 1)",
        "rewrite_factor" => {
            "tokens written ÷ the largest context: how many times the context was paid for again"
        }
        "tokens_missed" => "tokens that could have been read and were not",
        "misses" => "requests per miss cause, `cause=count` separated by `;`",
        "forks_identical" => {
            "per spawn (`;`-separated): the forks' common prefix ÷ the longest fork, in bytes (a fraction, 0 to 1); where block sizes are declared (most fixtures), those bytes are stand-in text, not the tokens priced"
        }
        "index" => "the request's place in start order, from 0",
        "role" => {
            "who sent it: `parent`, `fork`, `named`, `task` (s06 sub-agent), `teammate`, `sidecar` or `compaction`"
        }
        "agent" => "which agent and turn",
        "spawn" => "the spawn a fork belongs to, from 0",
        "fork" => "the fork's place in its spawn, from 0",
        "at_ms" => "start time on the virtual clock (ms)",
        "model" => "the model id",
        "ttft_ms" => "modelled time to first token (ms)",
        "miss" => "why it read less than it could have (empty: it did not)",
        "miss_dimension" => "for `prefix_changed`: tools, system, messages or config",
        "miss_path" => "the JSON path where the miss happened",
        "mistake" => "the anti-pattern's short name",
        "what" => "what goes wrong",
        "mistake_scenario" => "the fixture making the mistake",
        "correct_scenario" => "its correct twin",
        "correct_nanousd" => "the twin's whole-scenario cost",
        "mistake_nanousd" => "the mistake's whole-scenario cost",
        "extra_nanousd" => "what the mistake adds",
        "correct_token_equivalents" => "the twin's cost in token-equivalents",
        "mistake_token_equivalents" => "the mistake's cost in token-equivalents",
        "multiplier" => "mistake cost ÷ correct cost (×, three decimals)",
        "case" => {
            "`warm` (the parent cached the history first), `cold` (nothing cached) or `naive` (no sharing)"
        }
        "forks_token_equivalents" => {
            "the forks' cost in token-equivalents (the parent's own turn left out, as in the articles)"
        }
        other => describe_sweep(other),
    }
}

fn describe_sweep(column: &str) -> &'static str {
    match column {
        "cell" => "the cell's place in the grid, from 0 (shards keep it)",
        "history_tokens" => {
            "tokens of history before the parent's turn (system prompt and tools come on top)"
        }
        "forks" => "sub-agents spawned",
        "subagents" => {
            "`fork` (inherit the context, share the cache) or `named` (general-purpose, fresh context)"
        }
        "variant" => "`all-tool-uses` or `own-tool-use` (empty for named sub-agents)",
        "launch" => "`staggered`, `parallel` or `sequential` (empty for named sub-agents)",
        "mark_placeholders" => "a marker on the last placeholder too (empty for named sub-agents)",
        "ttl" => "every marker's TTL, `5m` or `1h`",
        "idle_ms" => "idle time between the parent's turn and the spawn (ms)",
        "subagent_requests" => "the sub-agents' requests",
        "subagent_read_tokens" => "the sub-agents' tokens read from the cache",
        "subagent_write_tokens" => "the sub-agents' tokens written to the cache",
        "subagent_uncached_tokens" => "the sub-agents' uncached tokens",
        "subagent_cost_nanousd" => "the sub-agents' cost",
        "subagent_naive_nanousd" => "the sub-agents' cost with nothing shared",
        "subagent_savings" => "the sub-agents' cost saved against no sharing (a fraction, 0 to 1)",
        "subagent_token_equivalents" => "the sub-agents' cost in token-equivalents",
        "forks_cost_nanousd" => "the forks' cost",
        "forks_naive_nanousd" => "the forks' cost with nothing shared",
        "cost_per_fork_nanousd" => "the forks' cost ÷ forks, rounded",
        "naive_per_fork_nanousd" => "the forks' naive cost ÷ forks, rounded",
        "naive_over_shared" => "naive cost ÷ shared cost (×, three decimals)",
        "way" => {
            "how the work is delegated: `fork`, `named` (sync general-purpose), `teammate`, `background` or `subagent` (s06)"
        }
        "delegate_requests" => "the delegate's requests (everything but the parent's)",
        "baseline_token_equivalents" => "the same session without the delegation, in token-equivalents",
        "added_token_equivalents" => "what delegating added: the session's cost less the baseline's",
        "delegate_token_equivalents" => "the delegate's cost in token-equivalents",
        "delegate_hit_rate" => "the delegate's tokens read ÷ its input tokens (a fraction, 0 to 1)",
        _ => "",
    }
}
