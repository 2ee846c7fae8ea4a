//! forkcache's integration tests: one binary, one module per feature.

mod seed_example;
mod serve;
mod serve_harness;
