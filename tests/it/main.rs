//! forkcache's integration tests: one binary, one module per feature.

mod accounting;
mod automatic;
mod identity;
mod longest_prefix;
mod lookback;
mod minimum;
mod misses;
mod positions;
mod properties;
mod reference;
mod rendered;
mod replay_cli;
mod reports;
mod salts;
mod scenario_engine;
mod scenario_mistakes;
mod scenario_props;
mod scenario_seed;
mod scope;
mod seed_example;
mod support;
mod sweep_grid;
mod ttl;
mod validation;
mod visibility;
