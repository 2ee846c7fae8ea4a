//! forkcache's integration tests: one binary, one module per feature.

mod accounting;
mod automatic;
mod lookback;
mod minimum;
mod seed_example;
mod support;
mod ttl;
mod validation;
mod visibility;
