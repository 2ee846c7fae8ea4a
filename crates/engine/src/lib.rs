//! forkcache's engine: a deterministic model of a provider's prompt cache and its bill. Request
//! bytes and a virtual time in; the API's usage object, the cost and a miss diagnosis out.
//!
//! The path of a request: wire bytes → [`wire`] (a borrowed view) → [`prompt`] (positions,
//! chained hashes, tokens, breakpoints) → [`cache`] (lookup, accounting, writes, miss diagnosis)
//! → [`billing`] (usage and cost) → a [`Record`]. [`MockEndpoint`] is that path's one entry
//! point; everything that prices a request, whatever door it came in by, goes through it.
//!
//! It may import the wire crate alone; never agents, traces, reports, the network or the command
//! line, and nothing that reads a clock, a socket or a terminal.
#![deny(missing_docs)]
// Input-derived data is never unwrapped: a bad input is an error naming it, never a panic. The
// few sites that cannot fail carry an `allow` saying why.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod agreement;
pub mod billing;
pub mod cache;
pub mod clock;
pub mod endpoint;
pub mod prompt;
pub mod tokenize;
pub mod verify;

/// The wire types the engine's answers are made of, for embedders that need nothing else.
pub use forkcache_wire as wire;

pub use billing::{BillingProfile, Cost, PriceTable, TokenEquivalents};
pub use cache::{CacheConfig, Miss, MissCause, Policy};
pub use clock::{LatencyModel, SimTime, Visibility};
pub use endpoint::{Call, EndpointConfig, Exchange, MockEndpoint, Record};
pub use forkcache_wire::{ApiError, ErrorKind, MessageResponse, Reply, Usage};
pub use prompt::{Dimension, IdentityMode, PromptConfig, Ttl};
pub use tokenize::{Tokenizer, TokenizerKind};
