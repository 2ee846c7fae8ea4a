//! forkcache's integration tests: one binary, one module per feature.

mod scenario_engine;
mod scenario_mistakes;
mod scenario_props;
mod scenario_seed;
mod seed_example;
