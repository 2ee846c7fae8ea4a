//! The network edges: `serve` (the mock Messages endpoint over HTTP) and `proxy` (between a real
//! client and the real API), over one HTTP layer.
//!
//! The top of the library graph beside the reports: it may import the wire, the engine and
//! ingest (trace lines); nothing below imports it, and it never imports agents or reports.
#![deny(missing_docs)]
// Input-derived data is never unwrapped: a bad input is an error naming it, never a panic.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod edge;
pub mod proxy;
pub mod serve;
