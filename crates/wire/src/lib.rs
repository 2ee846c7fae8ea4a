//! forkcache-wire: the Messages API's shapes — request views, usage, errors, responses, SSE — and
//! OpenAI's Responses and Chat Completions requests and answers, read into and out of them.
//! It imports no other forkcache crate; it must never import pricing, caches, traces or networks.
//!
//! What a request and its answer are, never what they cost or whether they hit a cache; and
//! [`json`], reading a user's JSON file with errors that name the field.
#![deny(missing_docs)]
// Input-derived data is never unwrapped: a bad input is an error naming it, never a panic.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod beta;
pub mod check;
mod diagnostics;
mod error;
mod openai;
mod raw;
mod request;
mod response;
mod rules;
mod sse;
mod usage;

pub mod json;

pub use beta::{Betas, CACHE_DIAGNOSIS, CONTEXT_1M, MID_CONVERSATION_TOOL_CHANGES, tool_changes_keep_cache};
pub use diagnostics::{CacheMissReason, CacheMissType, Diagnostics};
pub use error::{ApiError, ErrorKind};
pub use openai::{OpenAiAnswer, OpenAiApi, OpenAiError, OpenAiRequest, OpenAiUsage, read_openai_request};
pub use raw::RawJson;
pub use request::{
    ContentView, DiagnosticsRequest, MapValues, MemberValues, MessageView, Metadata, OutputConfig,
    RequestView, Role, Thinking, ToolChoice, api_path, describe_parse_error, parse_request,
    parse_request_str,
};
pub use response::{MessageResponse, Reply, ReplyContent, ResponseBlock, StopReason};
pub use rules::check_model_rules;
pub use sse::{
    Chunking, SseEvent, char_chunks, error_event, message_delta, message_events, message_start, ping,
    text_chunks,
};
pub use usage::{CacheCreation, InferenceGeo, Speed, StandardTier, Usage};
