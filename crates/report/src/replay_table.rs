//! `replay --csv`: a replay's requests as CSV, one row per request in file order, with the API's
//! usage key names. `index` is the 0-based request index, `line` the 1-based file line number.

use forkcache_engine::cache::describe_miss;
use forkcache_ingest::replay::{ReplayRecord, ReplayReport};

use super::tables::to_csv;

type Cell = fn(&ReplayRecord) -> String;

const COLUMNS: &[(&str, Cell)] = &[
    ("index", |r| r.index.to_string()),
    ("line", |r| r.line.to_string()),
    ("at_ms", |r| r.at.ms().to_string()),
    ("model", |r| r.model.clone().unwrap_or_default()),
    ("input_tokens", |r| usage(r, |u| u.input_tokens)),
    ("cache_creation_input_tokens", |r| usage(r, |u| u.cache_creation_input_tokens)),
    ("cache_read_input_tokens", |r| usage(r, |u| u.cache_read_input_tokens)),
    ("output_tokens", |r| usage(r, |u| u.output_tokens)),
    ("cost_usd", cost_usd),
    ("cost_nanousd", |r| priced(r).map(|p| p.cost.total_nanousd().to_string()).unwrap_or_default()),
    ("miss", |r| r.result.as_ref().map_or(String::new(), |p| describe_miss(p.miss.as_ref()))),
    ("rejected", |r| r.result.as_ref().err().map(|e| e.to_string()).unwrap_or_default()),
];

/// The priced record, when the request was accepted and its model priced.
fn priced(record: &ReplayRecord) -> Option<&forkcache_engine::endpoint::Record> {
    record.result.as_ref().ok().filter(|r| r.priced)
}

fn usage(record: &ReplayRecord, field: fn(&forkcache_engine::billing::Usage) -> u64) -> String {
    record.result.as_ref().map(|r| field(&r.usage).to_string()).unwrap_or_default()
}

/// Dollars with nine decimals (exact nano-dollars); empty when the cost is unknown.
fn cost_usd(record: &ReplayRecord) -> String {
    priced(record).map(|r| super::format::usd(r.cost.total_nanousd())).unwrap_or_default()
}

/// `replay --csv`.
pub fn replay_csv(report: &ReplayReport) -> String {
    to_csv(COLUMNS, &report.records)
}
