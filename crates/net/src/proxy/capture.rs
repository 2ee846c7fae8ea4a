//! The copy of an upstream response the proxy keeps: its bytes as received (compressed or not),
//! decoded and read for usage after the client already has them.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Map, Value};

use forkcache_ingest::trace::LoggedError;
use forkcache_wire::ErrorKind;

pub use crate::edge::encoding::{DecodeLimit, Decoded, Encodings};

/// A response copy larger than this is not kept (its usage is then unknown): a Messages response
/// is a few kilobytes to a few megabytes.
pub const COPY_LIMIT_BYTES: usize = 64 << 20;

/// What a response said about its request, read from the decoded copy.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observed {
    /// `usage` as the upstream returned it: the JSON body's, or `message_start`'s with
    /// `message_delta`'s members laid over it (key order kept).
    pub usage: Option<Map<String, Value>>,
    /// `diagnostics` as returned (the cache-diagnostics beta), when present.
    pub diagnostics: Option<Value>,
    /// The upstream's error: an error status, or an `error` event inside a stream.
    pub error: Option<LoggedError>,
    /// The model the response names (the message's `model`): what prices the recorded usage when
    /// the request itself was not read.
    pub model: Option<String>,
    /// The stream began (`message_start`) but never reached `message_stop`.
    pub incomplete: bool,
}

/// Reads a decoded response body: a JSON message or error, or an SSE stream.
pub fn observe(status: u16, event_stream: bool, body: &[u8]) -> Observed {
    // Checked whole first: a lossy reading walks the bytes more slowly, and is for the rare body
    // that is not UTF-8.
    let text = std::str::from_utf8(body).map_or_else(|_| String::from_utf8_lossy(body), Cow::Borrowed);
    if !(200..300).contains(&status) {
        return Observed { error: Some(error_of(status, &text)), ..Observed::default() };
    }
    if event_stream {
        return observe_stream(&text);
    }
    let message: Message = serde_json::from_str(&text).unwrap_or_default();
    let mut observed = Observed::default();
    message.read_into(&mut observed);
    observed
}

/// A message as far as usage is read from it: its content, id and the rest are skipped without
/// being built (a non-streamed message's content is its whole answer).
#[derive(Default, Deserialize)]
struct Message {
    #[serde(default)]
    model: Value,
    #[serde(default)]
    usage: Value,
    /// `Some(Value::Null)` for an explicit `null`, as the member is recorded as sent.
    #[serde(default, deserialize_with = "present")]
    diagnostics: Option<Value>,
}

impl Message {
    fn read_into(self, observed: &mut Observed) {
        observed.usage = match self.usage {
            Value::Object(usage) => Some(usage),
            _ => None,
        };
        observed.diagnostics = self.diagnostics;
        observed.model = self.model.as_str().map(str::to_string);
    }
}

/// A member that is there, whatever its value (`null` included).
fn present<'de, D: serde::Deserializer<'de>>(member: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(member).map(Some)
}

/// The API's error body, or the status's error type when the body is not one.
fn error_of(status: u16, body: &str) -> LoggedError {
    let value: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let error = &value["error"];
    let kind = error["type"].as_str().unwrap_or_else(|| ErrorKind::from_status(status).type_name());
    let message = match error["message"].as_str() {
        Some(message) => message.to_string(),
        None => body.chars().take(200).collect(),
    };
    LoggedError { status, kind: kind.to_string(), message }
}

/// One SSE event's data: its type, and the members usage is read from; everything else (a
/// delta's text, a content block) is skipped without being built.
#[derive(Deserialize)]
struct EventData<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    /// `message_start`'s message.
    #[serde(default)]
    message: Message,
    /// `message_delta`'s usage.
    #[serde(default)]
    usage: Value,
}

/// Whether an event's data may be one this reading acts on (`message_*`, `error`): its type's
/// value, a JSON string, then appears in the text as `"message_` or `"error"`. A stream is mostly
/// `content_block_delta` events, which are passed over without being parsed; a text that holds
/// these words anyway is parsed, and its type decides.
fn may_name_a_read_event(data: &str) -> bool {
    data.contains("\"message_") || data.contains("\"error\"")
}

/// An SSE Messages stream: usage from `message_start` and `message_delta`, an `error` event, and
/// whether `message_stop` came.
fn observe_stream(text: &str) -> Observed {
    let mut observed = Observed::default();
    let mut started = false;
    let mut stopped = false;
    for data in text.lines().filter_map(|line| line.strip_prefix("data:")).map(str::trim) {
        if !may_name_a_read_event(data) {
            continue;
        }
        let Ok(event) = serde_json::from_str::<EventData>(data) else { continue };
        match &*event.kind {
            "message_start" => {
                started = true;
                event.message.read_into(&mut observed);
            }
            "message_delta" => {
                if let Some(delta) = event.usage.as_object() {
                    let usage = observed.usage.get_or_insert_with(Map::new);
                    for (key, value) in delta {
                        usage.insert(key.clone(), value.clone());
                    }
                }
            }
            "message_stop" => stopped = true,
            "error" => {
                // Rare: read whole, as the error's text is kept in its compact form.
                let event = serde_json::from_str::<Value>(data).unwrap_or(Value::Null);
                observed.error = Some(error_of(500, &event.to_string()));
            }
            _ => {}
        }
    }
    observed.incomplete = started && !stopped;
    observed
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    const STREAM: &str = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude-sonnet-4-6\",\"usage\":{\"input_tokens\":4,\"cache_creation_input_tokens\":10,\"cache_read_input_tokens\":2000,\"output_tokens\":1,\"service_tier\":\"standard\"}}}\n\nevent: ping\ndata: {\"type\":\"ping\"}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":9}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

    #[test]
    fn stream_usage_is_message_start_with_message_delta_laid_over() {
        let observed = observe(200, true, STREAM.as_bytes());
        let usage = Value::Object(observed.usage.expect("usage"));
        assert_eq!(
            usage.to_string(),
            r#"{"input_tokens":4,"cache_creation_input_tokens":10,"cache_read_input_tokens":2000,"output_tokens":9,"service_tier":"standard"}"#
        );
        assert!(!observed.incomplete);
        assert_eq!(observed.error, None);
        assert_eq!(observed.model.as_deref(), Some("claude-sonnet-4-6"));
    }

    #[test]
    fn only_the_events_usage_is_read_from_are_parsed_and_their_type_decides() {
        // A delta whose text names the events (escaped quotes and all) is parsed and passed over.
        let tricky = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a \\\"message_stop\\\" and an \\\"error\\\"\"}}\n\n";
        assert!(may_name_a_read_event(tricky.lines().nth(1).unwrap()));
        let cut = &STREAM[..STREAM.find("event: ping").unwrap()];
        let observed = observe(200, true, format!("{cut}{tricky}").as_bytes());
        assert!(observed.incomplete, "the delta is not a message_stop");
        assert_eq!(observed.error, None, "nor an error");
        assert!(!may_name_a_read_event(r#"{"type":"ping"}"#));
        for data in STREAM.lines().filter_map(|line| line.strip_prefix("data: ")) {
            let wanted = ["message_start", "message_delta", "message_stop"].iter().any(|t| data.contains(t));
            assert_eq!(may_name_a_read_event(data), wanted, "{data}");
        }
    }

    #[test]
    fn stream_cut_after_message_start_is_incomplete_and_keeps_input_usage() {
        let cut = &STREAM[..STREAM.find("event: ping").unwrap()];
        let observed = observe(200, true, cut.as_bytes());
        assert!(observed.incomplete);
        assert_eq!(observed.usage.unwrap()["cache_read_input_tokens"], 2000);
    }

    #[test]
    fn stream_error_event_is_recorded() {
        let body = format!(
            "{}event: error\ndata: {{\"type\":\"error\",\"error\":{{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}}}\n\n",
            &STREAM[..STREAM.find("event: ping").unwrap()]
        );
        let observed = observe(200, true, body.as_bytes());
        assert!(observed.incomplete);
        let error = observed.error.unwrap();
        assert_eq!((error.kind.as_str(), error.message.as_str()), ("overloaded_error", "Overloaded"));
    }

    #[test]
    fn error_status_keeps_the_api_error_or_names_the_status() {
        let body = br#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#;
        let error = observe(429, false, body).error.unwrap();
        assert_eq!(
            (error.status, error.kind.as_str(), error.message.as_str()),
            (429, "rate_limit_error", "slow down")
        );
        let error = observe(502, false, b"<html>bad gateway</html>").error.unwrap();
        assert_eq!((error.kind.as_str(), error.message.as_str()), ("api_error", "<html>bad gateway</html>"));
    }

    #[test]
    fn json_message_usage_and_diagnostics() {
        let body = br#"{"id":"msg_1","usage":{"input_tokens":42,"cache_read_input_tokens":0,"cache_creation_input_tokens":41850,"output_tokens":210},"diagnostics":{"cache_miss_reason":{"type":"system_changed","cache_missed_input_tokens":41850}}}"#;
        let observed = observe(200, false, body);
        assert_eq!(observed.usage.unwrap()["cache_creation_input_tokens"], 41850);
        assert_eq!(observed.diagnostics.unwrap()["cache_miss_reason"]["type"], "system_changed");
    }

    #[test]
    fn a_message_is_read_for_usage_alone_and_keeps_members_as_sent() {
        // Content of any shape is skipped; an explicit null diagnostics is recorded as null; a
        // model that is not a string names no model, and the usage is still read.
        let body = br#"{"id":"msg_1","content":[{"type":"text","text":"a \"quoted\" answer"}],"model":7,"usage":{"input_tokens":3,"output_tokens":2},"diagnostics":null}"#;
        let observed = observe(200, false, body);
        assert_eq!(observed.usage.unwrap()["input_tokens"], 3);
        assert_eq!(observed.diagnostics, Some(Value::Null));
        assert_eq!(observed.model, None);
        let without = observe(200, false, br#"{"usage":"none","model":"claude-sonnet-4-6"}"#);
        assert_eq!((without.usage, without.diagnostics), (None, None));
        assert_eq!(without.model.as_deref(), Some("claude-sonnet-4-6"));
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }

    fn brotli(bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut writer = brotli::CompressorWriter::new(&mut out, 4096, 5, 22);
        writer.write_all(bytes).unwrap();
        drop(writer);
        out
    }

    fn zstd(bytes: &[u8]) -> Vec<u8> {
        ruzstd::encoding::compress_to_vec(bytes, ruzstd::encoding::CompressionLevel::Fastest)
    }

    #[test]
    fn every_encoding_claude_code_asks_for_decodes() {
        let plain = STREAM.as_bytes();
        for (header, encoded) in [
            ("gzip", gzip(plain)),
            ("br", brotli(plain)),
            ("zstd", zstd(plain)),
            ("identity", plain.to_vec()),
        ] {
            assert_eq!(Encodings::parse(Some(header)).decode(&encoded).as_deref(), Some(plain), "{header}");
        }
        let twice = brotli(&gzip(plain));
        assert_eq!(Encodings::parse(Some("gzip, br")).decode(&twice).as_deref(), Some(plain));
        assert_eq!(Encodings::parse(Some("compress")).decode(plain), None);
    }

    #[test]
    fn a_cut_gzip_stream_decodes_as_far_as_it_goes() {
        let plain = STREAM.repeat(50);
        let encoded = gzip(plain.as_bytes());
        let decoded = Encodings::parse(Some("gzip")).decode(&encoded[..encoded.len() / 2]).unwrap();
        assert!(!decoded.is_empty() && plain.as_bytes().starts_with(&decoded));
    }
}
