//! forkcache-engine: prompts, cache policies, billing, the mock endpoint — bytes in, usage out.
//! It may import the wire alone; it must never import agents, traces, reports, network or CLI.
//!
//! A deterministic model of a provider's prompt cache and its bill: request bytes and a virtual
//! time in; the API's usage object, the cost and a miss diagnosis out. Nothing in it reads a
//! clock, a socket or a terminal.
//!
//! The path of a request: wire bytes → [`wire`] (a borrowed view) → [`prompt`] (positions,
//! chained hashes, tokens, breakpoints) → [`cache`] (lookup, accounting, writes, miss diagnosis)
//! → [`billing`] (usage and cost) → a [`Record`]. [`MockEndpoint`] is that path's one entry
//! point; everything that prices a request, whatever door it came in by, goes through it.
//!
//! # Example
//!
//! Two requests share a 5,000-token system prompt with a breakpoint on it. The first writes it
//! to the cache; the second, a minute later, reads it back. (`forkcache_tokens` declares a
//! synthetic block's size, so the arithmetic is exact; real text is estimated by the tokenizer.)
//!
//! ```
//! use forkcache_engine::{Call, EndpointConfig, MockEndpoint, PriceTable, SimTime};
//!
//! let mut endpoint = MockEndpoint::new(EndpointConfig::default(), PriceTable::builtin())?;
//! let request = |question: &str| {
//!     serde_json::json!({
//!         "model": "claude-sonnet-4-6",
//!         "max_tokens": 100,
//!         "system": [{"type": "text", "text": "You review code.", "forkcache_tokens": 5000,
//!                     "cache_control": {"type": "ephemeral"}}],
//!         "messages": [{"role": "user", "content": question}],
//!     })
//!     .to_string()
//! };
//! let first = request("Is this loop correct?");
//! let second = request("And this one?");
//! let one = endpoint.handle(Call::new(first.as_bytes(), SimTime(0)))?;
//! let two = endpoint.handle(Call::new(second.as_bytes(), SimTime(60_000)))?;
//!
//! assert_eq!(one.record.usage.cache_creation_input_tokens, 5_000);
//! assert_eq!(one.record.usage.cache_read_input_tokens, 0);
//! // The second request reads the system prompt the first one wrote, within its 5-minute TTL.
//! assert_eq!(two.record.usage.cache_read_input_tokens, 5_000);
//! assert_eq!(two.record.usage.cache_creation_input_tokens, 0);
//! // Reads bill at a tenth of the input price: $3/MTok × 5,000 × 0.1 = $0.0015.
//! assert_eq!(two.record.cost.read_nanousd, 1_500_000);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
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
pub mod provider;
pub mod tokenize;
pub mod verify;

/// The wire types the engine's answers are made of, for embedders that need nothing else.
pub use forkcache_wire as wire;

pub use billing::{BillingProfile, Cost, NeutralUsage, PriceTable, TokenEquivalents};
pub use cache::{CacheConfig, Miss, MissCause, Policy};
pub use clock::{LatencyModel, SimTime, Visibility};
pub use endpoint::{Call, EndpointConfig, Exchange, MockEndpoint, Record};
pub use forkcache_wire::{ApiError, ErrorKind, MessageResponse, Reply, Usage};
pub use prompt::{Dimension, IdentityMode, PromptConfig, Ttl};
pub use provider::Provider;
pub use tokenize::{Tokenizer, TokenizerKind};
