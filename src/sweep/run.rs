//! Running a grid: cells in parallel on a rayon pool, rows merged by cell index.

use rayon::prelude::*;

use super::SweepError;
use super::spec::{Subagents, SweepCell, SweepSpec};
use crate::billing::PriceTable;
use crate::scenario::{RequestRole, RunConfig, ScenarioTotals};

/// Which contiguous part of the grid to run: shard `index` of `count` (1-based).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// 1 ≤ index ≤ count.
    pub index: u32,
    /// How many shards the grid is cut into.
    pub count: u32,
}

impl Shard {
    /// The whole grid.
    pub const WHOLE: Shard = Shard { index: 1, count: 1 };

    /// Parses `i/n`.
    pub fn parse(text: &str) -> Result<Shard, SweepError> {
        let invalid = || SweepError::Shard { given: text.to_string() };
        let (index, count) = text.split_once('/').ok_or_else(invalid)?;
        let index: u32 = index.trim().parse().map_err(|_| invalid())?;
        let count: u32 = count.trim().parse().map_err(|_| invalid())?;
        if index == 0 || index > count {
            return Err(invalid());
        }
        Ok(Shard { index, count })
    }

    /// The cells this shard runs, out of `cells`: shard i of n gets `[cells·(i−1)/n, cells·i/n)`,
    /// so the shards in order cover the grid once, in grid order.
    pub fn range(self, cells: usize) -> std::ops::Range<usize> {
        let bound = |i: u32| (cells as u128 * u128::from(i) / u128::from(self.count)) as usize;
        bound(self.index - 1)..bound(self.index)
    }

    /// The first shard carries the CSV header, so the shards' files concatenate to the whole.
    pub fn is_first(self) -> bool {
        self.index == 1
    }
}

impl Default for Shard {
    fn default() -> Self {
        Shard::WHOLE
    }
}

/// How a sweep runs (none of it changes the output bytes but `shard`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SweepOptions {
    /// Worker threads; `None` uses rayon's global pool (one per core).
    pub threads: Option<usize>,
    /// The part of the grid to run. Default: all of it.
    pub shard: Shard,
}

/// One cell's outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SweepRow {
    /// The grid point.
    pub cell: SweepCell,
    /// Every request of the cell's scenario.
    pub totals: ScenarioTotals,
    /// Only the sub-agents' requests (the forks, or the named sub-agents).
    pub subagents: ScenarioTotals,
}

/// A sweep's rows, in grid order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SweepResult {
    /// The sweep's name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// The price table's date.
    pub prices_date: String,
    /// The base scenario's seed.
    pub seed: u64,
    /// Cells in the whole grid.
    pub cells_total: usize,
    /// The part that ran.
    pub shard: Shard,
    /// One row per cell of the shard, in grid order.
    pub rows: Vec<SweepRow>,
}

/// Runs the cells of `options.shard` in parallel, calling `on_cell_done` once per finished cell
/// (from any worker thread; for progress bars). Rows come back in grid order; a failure reports
/// the first failing cell in grid order, whichever failed first in time.
pub fn run(
    spec: &SweepSpec,
    options: &SweepOptions,
    prices: &PriceTable,
    on_cell_done: impl Fn() + Sync,
) -> Result<SweepResult, SweepError> {
    spec.validate()?;
    check_models(spec, prices)?;
    let cells = spec.cells();
    let mine = &cells[options.shard.range(cells.len())];
    let work = || -> Vec<Result<SweepRow, SweepError>> {
        mine.par_iter()
            .map(|cell| {
                let row = run_cell(spec, cell, prices);
                on_cell_done();
                row
            })
            .collect()
    };
    let outcomes = match options.threads {
        None => work(),
        Some(threads) => pool(threads)?.install(work),
    };
    let rows = outcomes.into_iter().collect::<Result<Vec<_>, _>>()?;
    Ok(SweepResult {
        name: spec.name.clone(),
        description: spec.description.clone(),
        prices_date: prices.date.clone(),
        seed: spec.scenario.seed,
        cells_total: cells.len(),
        shard: options.shard,
        rows,
    })
}

fn pool(threads: usize) -> Result<rayon::ThreadPool, SweepError> {
    if threads == 0 {
        return Err(SweepError::Threads("expected at least 1".into()));
    }
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| SweepError::Threads(e.to_string()))
}

/// An unknown model would fail every cell; say so once, naming the field.
fn check_models(spec: &SweepSpec, prices: &PriceTable) -> Result<(), SweepError> {
    let mut models = vec![("scenario.model", &spec.scenario.model)];
    if spec.named.agent == crate::agent::NamedAgent::Explore {
        models.push(("scenario.agent.explore_model", &spec.scenario.agent.explore_model));
    }
    for (field, model) in models {
        if !prices.resolve(model).known {
            return Err(SweepError::spec(field, format!("{model:?} is not in the price table")));
        }
    }
    Ok(())
}

/// One cell: its scenario, priced, summed. Byte verification is off (sweeps measure cost; the
/// fixture suite checks identity); the naive pricing is on (savings need it).
fn run_cell(spec: &SweepSpec, cell: &SweepCell, prices: &PriceTable) -> Result<SweepRow, SweepError> {
    let scenario = spec.scenario_for(cell);
    let mut config = RunConfig::for_spec(&scenario);
    config.verify = false;
    let report = crate::scenario::run(&scenario, &config, prices)
        .map_err(|source| SweepError::Cell { cell: cell.index, source })?;
    let role = match cell.subagents {
        Subagents::Fork => RequestRole::Fork,
        Subagents::Named => RequestRole::Named,
    };
    Ok(SweepRow { cell: *cell, subagents: report.role(role), totals: report.totals })
}
