//! The sweep as CSV (one row per cell, fixed column order) and its metadata sidecar.

use std::io::Write;

use forkcache_scenario::{Launch, ScenarioTotals};

use super::SweepSpec;
use super::run::{Shard, SweepResult, SweepRow};
use crate::format::{fraction, misses, savings_fraction, thousandths};

type Cell = fn(&SweepRow) -> String;

/// Every column of `sweep.csv`, in order, with how its cell is written. Tokens and nano-dollars
/// are integers; savings and hit rates are fractions with four decimals, token-equivalents three. Fork-only settings are
/// empty for named sub-agents.
const TABLE: &[(&str, Cell)] = &[
    ("cell", |r| r.cell.index.to_string()),
    ("history_tokens", |r| r.cell.history_tokens.to_string()),
    ("forks", |r| r.cell.forks.to_string()),
    ("subagents", |r| r.cell.subagents.name().into()),
    ("provider", |r| r.cell.provider.name().into()),
    ("policy", |r| r.cell.policy.name().into()),
    ("billing", |r| r.cell.billing.name().into()),
    ("variant", |r| r.cell.variant.map_or(String::new(), |v| v.name().into())),
    ("launch", |r| r.cell.launch.map_or(String::new(), |l| launch_name(l).into())),
    ("mark_placeholders", |r| r.cell.mark_placeholders.map_or(String::new(), |m| m.to_string())),
    ("ttl", |r| r.cell.ttl.name().into()),
    ("idle_ms", |r| r.cell.idle_ms.to_string()),
    ("requests", |r| r.totals.requests.to_string()),
    ("context_tokens", |r| r.totals.largest_context_tokens.to_string()),
    ("read_tokens", |r| r.totals.usage.cache_read_input_tokens.to_string()),
    ("write_5m_tokens", |r| r.totals.usage.cache_creation.ephemeral_5m_input_tokens.to_string()),
    ("write_1h_tokens", |r| r.totals.usage.cache_creation.ephemeral_1h_input_tokens.to_string()),
    ("uncached_tokens", |r| r.totals.usage.input_tokens.to_string()),
    ("output_tokens", |r| r.totals.usage.output_tokens.to_string()),
    ("cost_nanousd", |r| r.totals.cost_nanousd.to_string()),
    ("naive_nanousd", |r| r.totals.naive_nanousd.to_string()),
    ("savings", |r| savings(&r.totals)),
    ("token_equivalents", |r| thousandths(r.totals.token_equivalents.0)),
    ("hit_rate", |r| hit_rate(&r.totals)),
    ("subagent_requests", |r| r.subagents.requests.to_string()),
    ("subagent_read_tokens", |r| r.subagents.usage.cache_read_input_tokens.to_string()),
    ("subagent_write_tokens", |r| r.subagents.usage.cache_creation_input_tokens.to_string()),
    ("subagent_uncached_tokens", |r| r.subagents.usage.input_tokens.to_string()),
    ("subagent_cost_nanousd", |r| r.subagents.cost_nanousd.to_string()),
    ("subagent_naive_nanousd", |r| r.subagents.naive_nanousd.to_string()),
    ("subagent_savings", |r| savings(&r.subagents)),
    ("subagent_token_equivalents", |r| thousandths(r.subagents.token_equivalents.0)),
    ("tokens_missed", |r| r.totals.tokens_missed.to_string()),
    ("misses", |r| misses(&r.totals)),
];

/// The columns of `sweep.csv`, in order.
pub const COLUMNS: [&str; TABLE.len()] = {
    let mut names = [""; TABLE.len()];
    let mut i = 0;
    while i < TABLE.len() {
        names[i] = TABLE[i].0;
        i += 1;
    }
    names
};

fn savings(t: &ScenarioTotals) -> String {
    savings_fraction(t.cost_nanousd, t.naive_nanousd)
}

fn hit_rate(t: &ScenarioTotals) -> String {
    fraction(i128::from(t.usage.cache_read_input_tokens), u128::from(t.usage.total_input_tokens()))
}

/// Kebab-case name of a launch timing, as the spec spells it.
pub(crate) fn launch_name(launch: Launch) -> &'static str {
    match launch {
        Launch::Parallel => "parallel",
        Launch::Staggered => "staggered",
        Launch::Sequential => "sequential",
    }
}

/// Sweep rows written as CSV one at a time, in the order given, the header first in the first
/// shard only (so shards' files concatenate, in order, to the whole grid's).
pub struct CsvRows<W: Write> {
    writer: csv::Writer<W>,
}

impl<W: Write> CsvRows<W> {
    /// Starts the table on `out`.
    pub fn new(out: W, shard: Shard) -> csv::Result<Self> {
        let mut writer = csv::Writer::from_writer(out);
        if shard.is_first() {
            writer.write_record(COLUMNS)?;
        }
        Ok(CsvRows { writer })
    }

    /// Appends one row.
    pub fn write(&mut self, row: &SweepRow) -> csv::Result<()> {
        self.writer.write_record(TABLE.iter().map(|(_, cell)| cell(row)))
    }

    /// Pushes what is buffered to `out`.
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.writer.flush()
    }

    /// Flushes and returns `out`.
    pub fn into_inner(self) -> std::io::Result<W> {
        self.writer.into_inner().map_err(|err| err.into_error())
    }
}

/// The keys a shard's metadata adds to the whole grid's, last, in this order: which part it is,
/// and what must match for shards to be joined (the program's version, the sweep's hash).
pub(crate) const SHARD_KEYS: [&str; 3] = ["shard", "forkcache_version", "sweep_xxh3"];

/// The sweep as parsed, hashed: xxh3-128 of its canonical JSON, so two files that differ only
/// in layout or in spelling out a default hash the same.
#[allow(clippy::expect_used)] // a parsed sweep is plain data: serializing it cannot fail
pub fn spec_hash(spec: &SweepSpec) -> String {
    let canonical = serde_json::to_vec(spec).expect("a sweep serializes");
    format!("{:032x}", xxhash_rust::xxh3::xxh3_128(&canonical))
}

impl SweepResult {
    /// The rows as CSV; the header only in the first shard, so shards concatenate in order to
    /// the whole grid's file.
    #[allow(clippy::expect_used)] // writing CSV to memory cannot fail
    pub fn to_csv(&self) -> String {
        let mut table = CsvRows::new(Vec::new(), self.shard).expect("writing to memory");
        for row in &self.rows {
            table.write(row).expect("writing to memory");
        }
        let bytes = table.into_inner().expect("writing to memory");
        String::from_utf8(bytes).expect("csv output is UTF-8")
    }

    /// What the CSV cannot say: the sweep, the price table's date, the seed, the grid's size and
    /// the columns. A shard's adds which shard it is, the version of forkcache that ran it and
    /// the sweep's hash ([`spec_hash`]), so shards can be checked before they are joined.
    #[allow(clippy::expect_used)] // the metadata is plain data: serializing it cannot fail
    pub fn meta_json(&self, spec: &SweepSpec) -> String {
        let mut meta = serde_json::json!({
            "sweep": self.name,
            "description": self.description,
            "prices_date": self.prices_date,
            "seed": self.seed,
            "cells": self.cells_total,
            "columns": COLUMNS.as_slice(),
            "spec": spec,
        });
        if self.shard != Shard::WHOLE {
            let [shard, version, hash] = SHARD_KEYS;
            meta[shard] = serde_json::json!({"index": self.shard.index, "count": self.shard.count});
            meta[version] = env!("CARGO_PKG_VERSION").into();
            meta[hash] = spec_hash(spec).into();
        }
        serde_json::to_string_pretty(&meta).expect("the metadata serializes") + "\n"
    }
}
