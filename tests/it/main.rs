//! forkcache's integration tests: one binary, one module per feature.

mod lookback;
mod minimum;
mod seed_example;
mod support;
mod ttl;
mod visibility;
