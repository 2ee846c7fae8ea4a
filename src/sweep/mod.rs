//! Parameter sweeps: a grid of scenarios (history size × sub-agents × policy × billing × fork
//! variant × launch × TTL × idle gap), run in parallel, one CSV row per cell.
//!
//! The entry point is [`run`]: `run(&spec, &SweepOptions::default(), &prices, || {})` → a
//! [`SweepResult`] whose [`SweepResult::to_csv`] bytes depend on nothing but the spec, the price
//! table and the shard: not on the thread count, not on which cell finished first.

mod run;
mod spec;
mod table;

pub use run::{Shard, SweepOptions, SweepResult, SweepRow, run};
pub use spec::{Axes, Grid, HISTORY_BLOCK_TOKENS, Subagents, SweepCell, SweepSpec, history_messages};
pub use table::COLUMNS;
pub(crate) use table::launch_name;

use crate::scenario::ScenarioError;

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
