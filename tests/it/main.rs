//! forkcache's integration tests: one binary, one module per feature.

mod rendered;
mod seed_example;
