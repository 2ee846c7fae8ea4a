//! A streamed message as server-sent events, rendered by pure functions: a [`MessageResponse`]
//! in, the API's event sequence out. The HTTP server only writes these bytes (and decides when),
//! so the event order can be tested without a socket.
//!
//! The order is the API's: `message_start` (the message with empty content, the input and cache
//! usage, `stop_reason: null`); per content block `content_block_start` (a skeleton), one or more
//! `content_block_delta` (`text_delta` chunks, or `input_json_delta` chunks whose first is `""`),
//! `content_block_stop`; one `ping` right after the first `content_block_start` (after
//! `message_start` when there is no block); `message_delta` with the stop reason and the
//! cumulative usage; `message_stop`.

use serde::Serialize;

use super::error::ApiError;
use super::response::{MessageResponse, ResponseBlock, StopReason};
use crate::{Diagnostics, Usage};

/// One event: `event: NAME\ndata: JSON\n\n`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    /// The event name, equal to the JSON's `type`.
    pub name: &'static str,
    /// The JSON payload, one line.
    pub data: String,
}

impl SseEvent {
    /// The payload's JSON is written straight from borrowed fields: no `serde_json::Value` tree
    /// (a map per object) is built for a stream's handful of small events.
    #[allow(clippy::expect_used)] // a payload is plain data (strings, integers): it always serializes
    fn new(payload: &Payload<'_>) -> SseEvent {
        SseEvent {
            name: payload.name(),
            data: serde_json::to_string(payload).expect("an event always serializes"),
        }
    }

    /// The event as it goes on the wire.
    pub fn to_wire(&self) -> String {
        let mut wire = String::with_capacity(self.wire_len());
        self.write_wire(&mut wire);
        wire
    }

    /// Appends the event as it goes on the wire to `out` (a whole stream in one buffer).
    pub fn write_wire(&self, out: &mut String) {
        out.push_str("event: ");
        out.push_str(self.name);
        out.push_str("\ndata: ");
        out.push_str(&self.data);
        out.push_str("\n\n");
    }

    /// The length of [`SseEvent::to_wire`], in bytes.
    pub fn wire_len(&self) -> usize {
        "event: \ndata: \n\n".len() + self.name.len() + self.data.len()
    }

    /// Whether this event carries generated content (its timing follows the output rate).
    pub fn is_delta(&self) -> bool {
        self.name == "content_block_delta"
    }
}

/// An event's JSON: `type` first, then the fields in the API's order.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Payload<'a> {
    MessageStart { message: StartMessage<'a> },
    Ping,
    ContentBlockStart { index: usize, content_block: Skeleton<'a> },
    ContentBlockDelta { index: usize, delta: Delta<'a> },
    ContentBlockStop { index: usize },
    MessageDelta { delta: StopDelta, usage: &'a Usage },
    MessageStop,
    Error { error: ErrorBody<'a> },
}

impl Payload<'_> {
    /// The event name: the payload's `type`.
    fn name(&self) -> &'static str {
        match self {
            Payload::MessageStart { .. } => "message_start",
            Payload::Ping => "ping",
            Payload::ContentBlockStart { .. } => "content_block_start",
            Payload::ContentBlockDelta { .. } => "content_block_delta",
            Payload::ContentBlockStop { .. } => "content_block_stop",
            Payload::MessageDelta { .. } => "message_delta",
            Payload::MessageStop => "message_stop",
            Payload::Error { .. } => "error",
        }
    }
}

/// `message_start`'s message: the response without content and without a stop reason yet.
#[derive(Serialize)]
struct StartMessage<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    role: &'a str,
    content: [(); 0],
    model: &'a str,
    stop_reason: Option<StopReason>,
    stop_sequence: Option<&'a str>,
    usage: Usage,
    #[serde(skip_serializing_if = "Option::is_none")]
    diagnostics: Option<&'a Option<Diagnostics>>,
}

/// A content block as `content_block_start` announces it: empty text, or a tool call with an
/// empty input.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Skeleton<'a> {
    Text { text: &'a str },
    ToolUse { id: &'a str, name: &'a str, input: EmptyObject },
}

/// `{}`.
#[derive(Serialize)]
struct EmptyObject {}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Delta<'a> {
    TextDelta { text: &'a str },
    InputJsonDelta { partial_json: &'a str },
}

#[derive(Serialize)]
struct StopDelta {
    stop_reason: StopReason,
    stop_sequence: Option<&'static str>,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    message: &'a str,
}

/// How content is cut into deltas.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunking {
    /// Text per `text_delta`, in characters; cuts fall after whitespace where possible. Default 24.
    pub text_chars: usize,
    /// Tool input JSON per `input_json_delta`, in characters. Default 24.
    pub json_chars: usize,
}

impl Default for Chunking {
    fn default() -> Self {
        Chunking { text_chars: 24, json_chars: 24 }
    }
}

/// Every event of a streamed response, in order.
pub fn message_events(response: &MessageResponse, chunking: Chunking) -> Vec<SseEvent> {
    let mut events = vec![message_start(response)];
    if response.content.is_empty() {
        events.push(ping());
    }
    for (index, block) in response.content.iter().enumerate() {
        events.push(content_block_start(index, block));
        if index == 0 {
            events.push(ping());
        }
        events.extend(content_block_deltas(index, block, chunking));
        events.push(SseEvent::new(&Payload::ContentBlockStop { index }));
    }
    events.push(message_delta(response));
    events.push(SseEvent::new(&Payload::MessageStop));
    events
}

/// `message_start`: the message without content, with the input side of the usage and at most
/// one output token (the rest arrive with `message_delta`).
/// Cache diagnostics, when asked for, arrive here (the API's rule for streams).
pub fn message_start(response: &MessageResponse) -> SseEvent {
    let usage = Usage { output_tokens: response.usage.output_tokens.min(1), ..response.usage };
    let message = StartMessage {
        id: &response.id,
        kind: response.kind,
        role: response.role,
        content: [],
        model: &response.model,
        stop_reason: None,
        stop_sequence: None,
        usage,
        diagnostics: response.diagnostics.as_ref(),
    };
    SseEvent::new(&Payload::MessageStart { message })
}

/// `ping`.
pub fn ping() -> SseEvent {
    SseEvent::new(&Payload::Ping)
}

fn content_block_start(index: usize, block: &ResponseBlock) -> SseEvent {
    let content_block = match block {
        ResponseBlock::Text { .. } => Skeleton::Text { text: "" },
        ResponseBlock::ToolUse { id, name, .. } => Skeleton::ToolUse { id, name, input: EmptyObject {} },
    };
    SseEvent::new(&Payload::ContentBlockStart { index, content_block })
}

fn content_block_deltas(index: usize, block: &ResponseBlock, chunking: Chunking) -> Vec<SseEvent> {
    let event = |delta: Delta<'_>| SseEvent::new(&Payload::ContentBlockDelta { index, delta });
    match block {
        ResponseBlock::Text { text } => text_chunks(text, chunking.text_chars)
            .iter()
            .map(|chunk| event(Delta::TextDelta { text: chunk }))
            .collect(),
        ResponseBlock::ToolUse { input, .. } => {
            // The API's first input_json_delta is often empty; clients must cope, so we always send it.
            let mut chunks = vec![String::new()];
            chunks.extend(char_chunks(&input.to_string(), chunking.json_chars));
            chunks.iter().map(|chunk| event(Delta::InputJsonDelta { partial_json: chunk })).collect()
        }
    }
}

/// `message_delta`: the stop reason and the whole usage (the API's counts here are cumulative).
pub fn message_delta(response: &MessageResponse) -> SseEvent {
    let delta = StopDelta { stop_reason: response.stop_reason, stop_sequence: None };
    SseEvent::new(&Payload::MessageDelta { delta, usage: &response.usage })
}

/// `error`: a failure after the stream began (the HTTP status was already 200).
pub fn error_event(error: &ApiError) -> SseEvent {
    let error = ErrorBody { kind: error.kind.type_name(), message: &error.message };
    SseEvent::new(&Payload::Error { error })
}

/// Cuts `text` into pieces of about `size` characters, each ending after whitespace where the
/// text allows. Never returns an empty list (an empty text is one empty piece).
pub fn text_chunks(text: &str, size: usize) -> Vec<String> {
    let size = size.max(1);
    let mut chunks = Vec::new();
    let mut current = String::new();
    for word in text.split_inclusive(char::is_whitespace) {
        for piece in char_chunks(word, size) {
            if !current.is_empty() && current.chars().count() + piece.chars().count() > size {
                chunks.push(std::mem::take(&mut current));
            }
            current.push_str(&piece);
        }
    }
    if !current.is_empty() || chunks.is_empty() {
        chunks.push(current);
    }
    chunks
}

/// Cuts `text` into pieces of at most `size` characters (never splitting a character).
pub fn char_chunks(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(size.max(1)).map(|piece| piece.iter().collect()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StopReason;
    use serde_json::Value;

    fn response(content: Vec<ResponseBlock>, stop_reason: StopReason) -> MessageResponse {
        MessageResponse {
            id: "msg_fc1".into(),
            kind: "message",
            role: "assistant",
            content,
            model: "claude-sonnet-4-6".into(),
            stop_reason,
            stop_sequence: None,
            usage: Usage::new(4, 1_000, 200, 0, 15),
            diagnostics: None,
        }
    }

    fn names(events: &[SseEvent]) -> Vec<&str> {
        events.iter().map(|e| e.name).collect()
    }

    #[test]
    fn text_stream_follows_the_documented_order() {
        let text = ResponseBlock::Text { text: "Hello there, this is a mock speaking.".into() };
        let events = message_events(&response(vec![text], StopReason::EndTurn), Chunking::default());
        assert_eq!(
            names(&events),
            [
                "message_start",
                "content_block_start",
                "ping",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        assert_eq!(
            events[0].data,
            r#"{"type":"message_start","message":{"id":"msg_fc1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-6","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":4,"cache_creation_input_tokens":200,"cache_read_input_tokens":1000,"cache_creation":{"ephemeral_5m_input_tokens":200,"ephemeral_1h_input_tokens":0},"output_tokens":1,"service_tier":"standard"}}}"#
        );
        assert_eq!(
            events[3].data,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello there, this is a "}}"#
        );
        assert_eq!(
            events[6].data,
            r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":4,"cache_creation_input_tokens":200,"cache_read_input_tokens":1000,"cache_creation":{"ephemeral_5m_input_tokens":200,"ephemeral_1h_input_tokens":0},"output_tokens":15,"service_tier":"standard"}}"#
        );
        assert_eq!(events[7].to_wire(), "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    }

    #[test]
    fn tool_input_streams_as_json_chunks_after_an_empty_one() {
        let input = serde_json::json!({"location": "San Francisco, CA"});
        let tool = ResponseBlock::ToolUse { id: "toolu_fc1".into(), name: "get_weather".into(), input };
        let events = message_events(
            &response(vec![tool], StopReason::ToolUse),
            Chunking { text_chars: 24, json_chars: 10 },
        );
        assert_eq!(
            events[1].data,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_fc1","name":"get_weather","input":{}}}"#
        );
        // {"location":"San Francisco, CA"} is 32 characters: "", then 10 + 10 + 10 + 2.
        let partials: Vec<String> = events
            .iter()
            .filter(|e| e.is_delta())
            .map(|e| {
                serde_json::from_str::<Value>(&e.data).unwrap()["delta"]["partial_json"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(partials, ["", "{\"location", "\":\"San Fra", "ncisco, CA", "\"}"]);
        assert!(events[events.len() - 2].data.contains(r#""stop_reason":"tool_use""#));
    }

    #[test]
    fn second_block_gets_no_ping_and_empty_content_pings_after_start() {
        let blocks = vec![
            ResponseBlock::Text { text: "ok".into() },
            ResponseBlock::ToolUse { id: "toolu_fc2".into(), name: "t".into(), input: serde_json::json!({}) },
        ];
        let events = message_events(&response(blocks, StopReason::ToolUse), Chunking::default());
        assert_eq!(events.iter().filter(|e| e.name == "ping").count(), 1);
        assert!(events[5].data.contains(r#""index":1"#), "{}", events[5].data);
        let events = message_events(&response(Vec::new(), StopReason::MaxTokens), Chunking::default());
        assert_eq!(names(&events), ["message_start", "ping", "message_delta", "message_stop"]);
    }

    #[test]
    fn diagnostics_asked_for_ride_on_message_start() {
        // Asked for with nothing diverged: `null`, after the usage (the API's order).
        let mut asked = response(Vec::new(), StopReason::EndTurn);
        asked.diagnostics = Some(None);
        let start = message_start(&asked);
        assert_eq!(
            start.data,
            r#"{"type":"message_start","message":{"id":"msg_fc1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-6","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":4,"cache_creation_input_tokens":200,"cache_read_input_tokens":1000,"cache_creation":{"ephemeral_5m_input_tokens":200,"ephemeral_1h_input_tokens":0},"output_tokens":1,"service_tier":"standard"},"diagnostics":null}}"#
        );
        // The wire form is the name line, the data line and a blank line; its length is known.
        assert_eq!(start.to_wire(), format!("event: message_start\ndata: {}\n\n", start.data));
        assert_eq!(start.wire_len(), start.to_wire().len());
    }

    #[test]
    fn mid_stream_error_has_the_api_shape() {
        let event = error_event(&ApiError::new(crate::ErrorKind::Overloaded, "Overloaded"));
        assert_eq!(
            event.to_wire(),
            "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
        );
    }

    #[test]
    fn text_chunks_cut_after_whitespace_and_keep_every_character() {
        assert_eq!(text_chunks("aaa bbb ccc", 8), ["aaa bbb ", "ccc"]);
        assert_eq!(text_chunks("abcdefghij", 4), ["abcd", "efgh", "ij"]);
        assert_eq!(text_chunks("", 4), [""]);
        assert_eq!(text_chunks("héllo wörld", 6), ["héllo ", "wörld"]);
        assert_eq!(char_chunks("ééé", 2), ["éé", "é"]);
    }
}
