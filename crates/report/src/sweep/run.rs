//! Running a grid: cells in parallel on a rayon pool, rows handed over in cell order.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use forkcache_engine::billing::PriceTable;
use forkcache_engine::prompt::KeptBlocks;
use forkcache_engine::provider::Provider;
use forkcache_scenario::{RequestRole, RunConfig, ScenarioTotals};

use super::SweepError;
use super::spec::{Subagents, SweepCell, SweepSpec};

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

    /// The stem of this part's files: `sweep` for the whole grid, `sweep-I-of-N` for a shard,
    /// `I` zero-padded to `N`'s width so the names sort in grid order.
    pub fn file_stem(self) -> String {
        if self == Shard::WHOLE {
            return "sweep".into();
        }
        let width = self.count.to_string().len();
        format!("sweep-{:0width$}-of-{}", self.index, self.count)
    }

    /// The shard a file stem names (`sweep-2-of-4`), if it names one.
    pub(crate) fn from_file_stem(stem: &str) -> Option<Shard> {
        let (index, count) = stem.strip_prefix("sweep-")?.split_once("-of-")?;
        let digits = |text: &str| !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
        if !digits(index) || !digits(count) {
            return None;
        }
        Shard::parse(&format!("{index}/{count}")).ok()
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

impl SweepResult {
    /// Everything but the rows: what a shard's files say before its first cell finishes.
    pub fn head(spec: &SweepSpec, prices: &PriceTable, shard: Shard) -> SweepResult {
        SweepResult {
            name: spec.name.clone(),
            description: spec.description.clone(),
            prices_date: prices.date.clone(),
            seed: spec.scenario.seed,
            cells_total: spec.cells().len(),
            shard,
            rows: Vec::new(),
        }
    }
}

/// Runs the cells of `options.shard` in parallel and returns every row, in grid order.
/// `on_cell_done` is called once per finished cell (from any worker thread; for progress bars).
/// A failure reports the first failing cell in grid order, whichever failed first in time.
pub fn run(
    spec: &SweepSpec,
    options: &SweepOptions,
    prices: &PriceTable,
    on_cell_done: impl Fn() + Sync,
) -> Result<SweepResult, SweepError> {
    let mut rows = Vec::new();
    stream(spec, options, prices, on_cell_done, |row| {
        rows.push(row);
        Ok(())
    })?;
    Ok(SweepResult { rows, ..SweepResult::head(spec, prices, options.shard) })
}

/// Runs the cells of `options.shard` in parallel and hands each row to `on_row` as soon as
/// every cell before it has been handed over: in grid order, whatever the thread count, so a
/// writer behind `on_row` keeps every row it got if the sweep is cut short. Workers take cells
/// in grid order, so the rows held back are only those the other workers finish while the
/// oldest unfinished cell runs, never a share of the grid. The worker that finishes the next
/// cell in order calls `on_row`, under a lock; an error from it stops the sweep. Like [`run`],
/// a failure reports the first failing cell in grid order.
#[allow(clippy::expect_used)] // the lock is poisoned only if a worker panicked, which is a bug to surface
pub fn stream(
    spec: &SweepSpec,
    options: &SweepOptions,
    prices: &PriceTable,
    on_cell_done: impl Fn() + Sync,
    on_row: impl FnMut(SweepRow) -> Result<(), SweepError> + Send,
) -> Result<(), SweepError> {
    spec.validate()?;
    let tables = ProviderTables::new(spec, prices);
    check_models(spec, &tables)?;
    let cells = spec.cells();
    let mine = &cells[options.shard.range(cells.len())];
    let order = Mutex::new(InOrder::new(on_row));
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let worker = || {
        // Cells resend the same system prompt, tools and history: each worker inspects a block
        // once, not once per cell. Rows do not depend on it (a block's facts are a function of
        // its bytes and the settings), so neither do the files, whatever the thread count.
        let mut blocks = None;
        while !stop.load(Ordering::Relaxed) {
            let at = next.fetch_add(1, Ordering::Relaxed);
            let Some(cell) = mine.get(at) else { break };
            let row = run_cell(spec, cell, tables.of(cell.provider), &mut blocks);
            on_cell_done();
            let mut order = order.lock().expect("a worker panicked while handing over rows");
            if order.accept(at, row).is_err() {
                stop.store(true, Ordering::Relaxed);
            }
        }
    };
    let work = || {
        rayon::scope(|scope| {
            for _ in 0..rayon::current_num_threads() {
                scope.spawn(|_| worker());
            }
        })
    };
    match options.threads {
        None => work(),
        Some(threads) => pool(threads)?.install(work),
    }
    order.into_inner().expect("a worker panicked while handing over rows").finish()
}

/// The reorder buffer: outcomes arrive keyed by their place in the shard, in any order, and
/// leave for the sink strictly in order.
struct InOrder<F> {
    /// The place of the next outcome the sink gets.
    next: usize,
    /// Outcomes that finished before one ahead of them.
    waiting: BTreeMap<usize, Result<SweepRow, SweepError>>,
    sink: F,
    /// The first error in order (a failed cell, or the sink's); nothing is handed over after it.
    failed: Option<SweepError>,
}

impl<F: FnMut(SweepRow) -> Result<(), SweepError>> InOrder<F> {
    fn new(sink: F) -> Self {
        InOrder { next: 0, waiting: BTreeMap::new(), sink, failed: None }
    }

    /// Takes the outcome at place `at` and hands over every row now in order. Err once the
    /// sweep has failed: the caller stops taking cells.
    fn accept(&mut self, at: usize, outcome: Result<SweepRow, SweepError>) -> Result<(), ()> {
        if self.failed.is_some() {
            return Err(());
        }
        self.waiting.insert(at, outcome);
        while let Some(outcome) = self.waiting.remove(&self.next) {
            self.next += 1;
            if let Err(error) = outcome.and_then(&mut self.sink) {
                self.failed = Some(error);
                self.waiting.clear();
                return Err(());
            }
        }
        Ok(())
    }

    fn finish(self) -> Result<(), SweepError> {
        self.failed.map_or(Ok(()), Err)
    }
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

/// The price table of each provider on the grid: the one given for Anthropic (`--prices`),
/// the built-in one for the others.
struct ProviderTables<'p> {
    anthropic: &'p PriceTable,
    others: BTreeMap<Provider, PriceTable>,
}

impl<'p> ProviderTables<'p> {
    fn new(spec: &SweepSpec, anthropic: &'p PriceTable) -> ProviderTables<'p> {
        let others = spec
            .axes()
            .provider
            .into_iter()
            .filter(|&provider| provider != Provider::Anthropic)
            .map(|provider| (provider, provider.prices()))
            .collect();
        ProviderTables { anthropic, others }
    }

    fn of(&self, provider: Provider) -> &PriceTable {
        self.others.get(&provider).unwrap_or(self.anthropic)
    }
}

/// An unknown model would fail every cell; say so once, naming the field (and the provider
/// whose table lacks the model that stands in for it).
fn check_models(spec: &SweepSpec, tables: &ProviderTables) -> Result<(), SweepError> {
    let mut models = vec![("scenario.model", &spec.scenario.model)];
    if spec.named.agent == forkcache_scenario::agent::NamedAgent::Explore {
        models.push(("scenario.agent.explore_model", &spec.scenario.agent.explore_model));
    }
    for provider in spec.axes().provider {
        for &(field, model) in &models {
            let stand_in = provider.model_for(model);
            if tables.of(provider).resolve(&stand_in).known {
                continue;
            }
            let message = match provider {
                Provider::Anthropic => format!("{model:?} is not in the price table"),
                _ => format!(
                    "{model:?} runs as {stand_in:?} on {provider}, which its price table does not list"
                ),
            };
            return Err(SweepError::spec(field, message));
        }
    }
    Ok(())
}

/// One cell: its scenario, priced, summed. Byte verification is off (sweeps measure cost; the
/// fixture suite checks identity); the naive pricing is on (savings need it).
fn run_cell(
    spec: &SweepSpec,
    cell: &SweepCell,
    prices: &PriceTable,
    blocks: &mut Option<KeptBlocks>,
) -> Result<SweepRow, SweepError> {
    let scenario = spec.scenario_for(cell);
    let mut config = RunConfig::for_spec(&scenario);
    config.verify = false;
    let report = forkcache_scenario::run_with_blocks(&scenario, &config, prices, blocks)
        .map_err(|source| SweepError::Cell { cell: cell.index, source })?;
    let role = match cell.subagents {
        Subagents::Fork => RequestRole::Fork,
        Subagents::Named => RequestRole::Named,
    };
    Ok(SweepRow { cell: *cell, subagents: report.role(role), totals: report.totals })
}
