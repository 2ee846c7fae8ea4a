//! Parameter sweeps: a grid of scenarios (history size × sub-agents × policy × billing × fork
//! variant × launch × TTL × idle gap), run in parallel, one CSV row per cell.
//!
//! The entry point is [`run`]: `run(&spec, &SweepOptions::default(), &prices, || {})` → a
//! [`SweepResult`] whose [`SweepResult::to_csv`] bytes depend on nothing but the spec, the price
//! table and the shard: not on the thread count, not on which cell finished first. [`stream`]
//! hands rows over in grid order as they finish (a reorder buffer keyed by cell index);
//! [`write()`] puts them in a file a row at a time, so a sweep cut short keeps whole rows.
//! [`merge_shards`] checks a directory of shards (each once, one sweep, one version, every row)
//! and joins them into the whole grid's files.

mod files;
mod run;
mod spec;
mod table;

pub use files::{MergeError, Merged, Written, merge_shards, write};
pub use run::{Shard, SweepOptions, SweepResult, SweepRow, run, stream};
pub use spec::{Axes, Grid, HISTORY_BLOCK_TOKENS, Subagents, SweepCell, SweepSpec, history_messages};
pub(crate) use table::launch_name;
pub use table::{COLUMNS, CsvRows, spec_hash};

use forkcache_scenario::ScenarioError;

/// Why a sweep could not run.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// The file is not a valid sweep: where, and what was expected.
    #[error("{path}: {message}")]
    Spec {
        /// The field, e.g. `grid.forks[2]`.
        path: String,
        /// What is wrong with it.
        message: String,
    },
    /// `--shard` is not `i/n` with 1 ≤ i ≤ n.
    #[error("shard {given:?}: expected i/n with 1 ≤ i ≤ n, e.g. 2/4")]
    Shard {
        /// What was given.
        given: String,
    },
    /// The worker pool could not start.
    #[error("threads: {0}")]
    Threads(String),
    /// A sweep file could not be written.
    #[error("{path}: {source}")]
    Output {
        /// The file or directory.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A cell's scenario failed (the first failing cell in grid order).
    #[error("cell {cell}: {source}")]
    Cell {
        /// The cell's index.
        cell: usize,
        /// What the scenario engine said.
        source: ScenarioError,
    },
}

impl SweepError {
    fn spec(path: impl Into<String>, message: impl Into<String>) -> SweepError {
        SweepError::Spec { path: path.into(), message: message.into() }
    }
}
