//! forkcache: a deterministic simulator and cost model for prompt-cache sharing in LLM agent
//! systems.
//!
//! The path of a request: wire bytes → [`wire`] (a borrowed view) → [`prompt`] (positions,
//! chained hashes, tokens, breakpoints) → [`cache`] (lookup, accounting, writes, miss diagnosis)
//! → [`billing`] (usage and cost) → a [`Record`]. [`MockEndpoint`] is that path's one entry
//! point; [`replay()`] drives it over a recorded trace, and [`serve`] puts it behind HTTP for
//! real clients.
#![deny(missing_docs)]
// Input-derived data is never unwrapped: a bad input is an error naming it, never a panic. The
// few sites that cannot fail carry an `allow` saying why.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod agent;
pub mod agreement;
pub mod billing;
pub mod cache;
pub mod calibrate;
pub mod clock;
pub mod demo;
pub mod endpoint;
pub mod explain;
pub mod ingest;
mod json;
pub mod prompt;
pub mod proxy;
pub mod replay;
pub mod report;
pub mod scenario;
pub mod serve;
pub mod sweep;
pub mod synth;
pub mod tokenize;
pub mod verify;
pub mod wire;

pub use billing::{BillingProfile, Cost, PriceTable, TokenEquivalents, Usage};
pub use cache::{CacheConfig, Miss, MissCause, Policy};
pub use clock::{LatencyModel, SimTime, Visibility};
pub use endpoint::{Call, EndpointConfig, Exchange, MockEndpoint, Record};
pub use ingest::trace::Envelope;
pub use prompt::{Dimension, IdentityMode, PromptConfig, Ttl};
pub use replay::{ReplayConfig, ReplayReport, replay};
pub use tokenize::{Tokenizer, TokenizerKind};
pub use wire::{ApiError, ErrorKind, MessageResponse, Reply};
