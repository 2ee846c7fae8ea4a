//! forkcache's integration tests: one binary, one module per feature.

mod seed_example;
mod serve;
mod serve_cli;
mod serve_faults;
mod serve_harness;
mod serve_load;
mod serve_soak;
