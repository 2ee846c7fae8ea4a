//! forkcache-net: the HTTP edges, `serve` and `proxy`, over one HTTP layer (`edge`). It may
//! import the wire, the engine and ingest; it must never import agents, reports or the CLI.
//!
//! The network edges: `serve` (the mock Messages endpoint over HTTP, for real clients) and
//! `proxy` (between a real client and the real API, recording both sides); nothing below imports
//! this crate.
#![deny(missing_docs)]
// Input-derived data is never unwrapped: a bad input is an error naming it, never a panic.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod edge;
pub mod live;
pub mod proxy;
pub mod serve;
