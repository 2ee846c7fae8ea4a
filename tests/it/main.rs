//! forkcache's integration tests: one binary, one module per feature.

mod lookback;
mod seed_example;
mod support;
