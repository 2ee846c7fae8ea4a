//! The Messages API on the wire: request views, responses, server-sent events and API errors.

mod beta;
mod error;
mod raw;
mod request;
mod response;
mod rules;
mod sse;

pub use beta::{Betas, CACHE_DIAGNOSIS, CONTEXT_1M, MID_CONVERSATION_TOOL_CHANGES, tool_changes_keep_cache};
pub use error::{ApiError, ErrorKind};
pub use raw::RawJson;
pub use request::{
    ContentView, DiagnosticsRequest, MapValues, MemberValues, MessageView, OutputConfig, RequestView, Role,
    Thinking, ToolChoice, api_path, describe_parse_error, parse_request, parse_request_str,
};
pub use response::{MessageResponse, Reply, ReplyContent, ResponseBlock, StopReason};
pub use rules::check_model_rules;
pub use sse::{
    Chunking, SseEvent, char_chunks, error_event, message_delta, message_events, message_start, ping,
    text_chunks,
};
