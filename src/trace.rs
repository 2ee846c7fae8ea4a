//! JSONL traces: what `serve` logs, what `proxy` records and what `replay` reads.
//!
//! A line is either a raw request body, or an envelope
//! `{"at_ms": u64, "api_key": "…"?, "workspace": "…"?, "first_byte_ms": u64?, "request_id": "…"?,
//! "usage": {…}?, "diagnostics": {…}?, "error": {…}?, "incomplete": true?, "body": {…} | "…"}`.
//! A line is an envelope exactly when it has a `body` member. An envelope with an `error` records
//! a request turned away before it was priced (a scripted error, a missing key, a body over the
//! size limit, an upstream's error): it replays as that error, whatever its body. `usage` is the
//! response's usage as returned — the *recorded* usage replay scores its prediction against —
//! and `diagnostics` the API's cache diagnostics; `workspace` scopes the cache as a key would.
//! Lines are read in one pass: a raw body (or an object `body`) is parsed straight into a
//! [`RequestView`] borrowing the line.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::billing::{RecordedUsage, Usage};
use crate::wire::{ApiError, ErrorKind, RequestView, describe_parse_error};

/// The request a trace line carries.
#[derive(Debug)]
pub enum TraceBody<'a> {
    /// Parsed in place (boxed: a view is large and most lines carry one).
    Parsed(Box<RequestView<'a>>),
    /// A string `body`: the bytes as sent, to be parsed (they may not even be JSON).
    Text(Cow<'a, str>),
    /// The body could not be read; the endpoint would have answered this error.
    Rejected(ApiError),
}

/// One line of a trace.
#[derive(Debug)]
pub struct TraceLine<'a> {
    /// 1-based line number in the file.
    pub line: usize,
    /// When the request started, if the line says.
    pub at_ms: Option<u64>,
    /// The API key, if the line says.
    pub api_key: Option<Cow<'a, str>>,
    /// When its response began, if the line says.
    pub first_byte_ms: Option<u64>,
    /// Output tokens of the response that was returned, if logged.
    pub output_tokens: Option<u64>,
    /// The usage the response carried (`usage`, as the API returned it), if logged.
    pub recorded: Option<RecordedUsage>,
    /// The response's `diagnostics.cache_miss_reason.type`, if logged.
    pub recorded_miss_reason: Option<String>,
    /// The workspace the request ran in (an id or a key fingerprint), if the line says.
    pub workspace: Option<Cow<'a, str>>,
    /// The request.
    pub body: TraceBody<'a>,
}

/// An envelope's `error`: the API error a request was turned away with before it was priced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoggedError {
    /// The HTTP status sent.
    pub status: u16,
    /// The `error.type` sent.
    #[serde(rename = "type")]
    pub kind: String,
    /// The `error.message` sent.
    pub message: String,
}

impl LoggedError {
    /// The record of `error` as sent.
    pub fn of(error: &ApiError) -> LoggedError {
        LoggedError {
            status: error.kind.status(),
            kind: error.kind.type_name().to_string(),
            message: error.message.clone(),
        }
    }

    /// The error to replay.
    pub fn to_api_error(&self) -> ApiError {
        ApiError::new(ErrorKind::from_status(self.status), self.message.clone())
    }
}

/// A line that is not a request at all.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
struct TraceError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Reads one non-blank line. A line that is not a request at all (not JSON, a bad envelope) comes
/// back as a rejected request whose message starts with `line N:`, so one broken line — such as
/// the half-written last line of a crashed run — never hides the others.
pub fn read_line(line: usize, text: &str) -> TraceLine<'_> {
    let read = match serde_json::from_str::<LineParts>(text) {
        Ok(parts) => parts.into_line(line),
        Err(_) => explain_line(line, text),
    };
    read.unwrap_or_else(|error| rejected(line, None, ApiError::invalid(error.to_string())))
}

/// Every non-blank line of a trace, in file order.
pub fn read_trace(text: &str) -> impl Iterator<Item = TraceLine<'_>> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(index, line)| read_line(index + 1, line))
}

/// Envelope fields and request fields of a line, gathered in one pass.
#[derive(Default)]
struct LineParts<'a> {
    at_ms: Option<u64>,
    api_key: Option<Cow<'a, str>>,
    first_byte_ms: Option<u64>,
    output_tokens: Option<u64>,
    recorded: Option<RecordedUsage>,
    recorded_miss_reason: Option<String>,
    workspace: Option<Cow<'a, str>>,
    body: Option<TraceBody<'a>>,
    error: Option<LoggedError>,
    request: RequestView<'a>,
    request_fields: bool,
}

impl<'a> LineParts<'a> {
    fn into_line(self, line: usize) -> Result<TraceLine<'a>, TraceError> {
        let body = match (self.body, self.request_fields) {
            (Some(_), true) => {
                return Err(TraceError {
                    line,
                    message: "an envelope carries its request in \"body\", but request fields (model, messages, …) were also found at the top level".into(),
                });
            }
            (Some(body), false) => match self.error {
                Some(error) => TraceBody::Rejected(error.to_api_error()),
                None => body,
            },
            (None, _) => TraceBody::Parsed(Box::new(self.request)),
        };
        Ok(TraceLine {
            line,
            at_ms: self.at_ms,
            api_key: self.api_key,
            first_byte_ms: self.first_byte_ms,
            output_tokens: self.output_tokens,
            recorded: self.recorded,
            recorded_miss_reason: self.recorded_miss_reason,
            workspace: self.workspace,
            body,
        })
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for LineParts<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(LineVisitor)
    }
}

struct LineVisitor;

impl<'de> Visitor<'de> for LineVisitor {
    type Value = LineParts<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object: a request body or an envelope")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut parts = LineParts::default();
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match &*key {
                "at_ms" => parts.at_ms = map.next_value()?,
                "api_key" => parts.api_key = map.next_value()?,
                "first_byte_ms" => parts.first_byte_ms = map.next_value()?,
                "usage" => {
                    let raw = map.next_value::<Option<&'de RawValue>>()?;
                    parts.recorded = raw.and_then(|raw| crate::agreement::read_recorded(raw.get()));
                    parts.output_tokens =
                        parts.recorded.as_ref().map(|recorded| recorded.usage.output_tokens);
                }
                "diagnostics" => {
                    let diagnostics = map.next_value::<Option<LoggedDiagnostics>>()?;
                    parts.recorded_miss_reason =
                        diagnostics.and_then(|d| d.cache_miss_reason).map(|r| r.kind);
                }
                "workspace" => parts.workspace = map.next_value()?,
                "body" => parts.body = Some(map.next_value::<BodyField>()?.0),
                "error" => parts.error = map.next_value()?,
                other => {
                    if parts.request.read_member(other, &mut map)? {
                        parts.request_fields = true;
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
        }
        Ok(parts)
    }
}

/// The part of a logged `diagnostics` replay compares (the cache-diagnostics beta).
#[derive(Deserialize)]
struct LoggedDiagnostics {
    #[serde(default)]
    cache_miss_reason: Option<LoggedMissReason>,
}

#[derive(Deserialize)]
struct LoggedMissReason {
    #[serde(rename = "type")]
    kind: String,
}

/// `body`: an object parsed in place, or a string holding the bytes as sent.
struct BodyField<'a>(TraceBody<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for BodyField<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct BodyVisitor;
        impl<'de> Visitor<'de> for BodyVisitor {
            type Value = BodyField<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a request object or a string of request bytes")
            }
            fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(BodyField(TraceBody::Text(Cow::Borrowed(text))))
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
                Ok(BodyField(TraceBody::Text(Cow::Owned(text.to_string()))))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let view = RequestView::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(BodyField(TraceBody::Parsed(Box::new(view))))
            }
        }
        deserializer.deserialize_any(BodyVisitor)
    }
}

/// The slow path, after the one-pass read failed: is the line broken, its envelope, or only the
/// request in it (which the endpoint would have rejected)?
fn explain_line(line: usize, text: &str) -> Result<TraceLine<'_>, TraceError> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|err| TraceError {
        line,
        message: format!("not JSON (column {}): {}", err.column(), crate::json::without_position(&err)),
    })?;
    let Some(object) = value.as_object() else {
        return Err(TraceError {
            line,
            message: "expected a JSON object: a request body or an envelope".into(),
        });
    };
    let Some(body) = object.get("body") else {
        return Ok(rejected(line, None, describe_parse_error(text)));
    };
    let envelope: Envelope = serde_json::from_value(value.clone()).map_err(|err| TraceError {
        line,
        message: format!("envelope: {}", crate::json::without_position(&err)),
    })?;
    let error = match &envelope.error {
        Some(logged) => logged.to_api_error(),
        None => describe_parse_error(&body.to_string()),
    };
    Ok(rejected(line, Some(envelope), error))
}

fn rejected<'a>(line: usize, envelope: Option<Envelope>, error: ApiError) -> TraceLine<'a> {
    let envelope = envelope.unwrap_or_default();
    TraceLine {
        line,
        at_ms: envelope.at_ms,
        api_key: envelope.api_key.map(Cow::Owned),
        first_byte_ms: envelope.first_byte_ms,
        output_tokens: None,
        recorded: None,
        recorded_miss_reason: None,
        workspace: None,
        body: TraceBody::Rejected(error),
    }
}

/// A trace envelope, as `serve` writes it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    /// Milliseconds since the start of the run.
    #[serde(default)]
    pub at_ms: Option<u64>,
    /// The API key used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// When the response began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_byte_ms: Option<u64>,
    /// The usage returned (absent for a rejected request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The error the request was turned away with before it was priced, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<LoggedError>,
}

/// Writes one envelope line (no trailing newline) around `body`: the body is kept byte for byte
/// when it is a one-line JSON object, and written as a string otherwise (so even a malformed
/// request is logged exactly).
pub fn envelope_line(envelope: &impl Serialize, body: &[u8]) -> String {
    let fields = serde_json::to_string(envelope).expect("an envelope serializes");
    let mut line = String::with_capacity(fields.len() + body.len() + 16);
    line.push_str(&fields[..fields.len() - 1]);
    if fields.len() > 2 {
        line.push(',');
    }
    line.push_str("\"body\":");
    match std::str::from_utf8(body) {
        Ok(text) if is_one_line_object(text) => line.push_str(text.trim()),
        _ => line
            .push_str(&serde_json::to_string(&String::from_utf8_lossy(body)).expect("a string serializes")),
    }
    line.push('}');
    line
}

fn is_one_line_object(text: &str) -> bool {
    !text.contains('\n')
        && text.trim_start().starts_with('{')
        && serde_json::from_str::<&serde_json::value::RawValue>(text).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_body_line_is_parsed_in_place() {
        let line =
            read_line(1, r#"{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}"#);
        assert!(line.at_ms.is_none());
        let TraceBody::Parsed(view) = line.body else { panic!("parsed") };
        assert_eq!(view.require_model().unwrap(), "m");
    }

    #[test]
    fn envelope_with_object_and_string_bodies() {
        let line = read_line(
            2,
            r#"{"at_ms":1500,"api_key":"k","first_byte_ms":1502,"body":{"model":"m","messages":[]},"usage":{"output_tokens":9}}"#,
        );
        assert_eq!((line.at_ms, line.first_byte_ms, line.output_tokens), (Some(1500), Some(1502), Some(9)));
        assert_eq!(line.api_key.as_deref(), Some("k"));
        assert!(matches!(line.body, TraceBody::Parsed(_)));
        let line = read_line(3, r#"{"at_ms":7,"body":"{\"model\":\"m\"}"}"#);
        assert!(matches!(line.body, TraceBody::Text(_)));
    }

    #[test]
    fn broken_lines_and_bodies_are_told_apart() {
        let rejection = |line: TraceLine| match line.body {
            TraceBody::Rejected(error) => error.message,
            other => panic!("expected a rejection, got {other:?}"),
        };
        let message = rejection(read_line(4, r#"{"at_ms":1,"body":"#));
        assert!(message.starts_with("line 4: not JSON"), "{message}");
        let message = rejection(read_line(5, r#"{"at_ms":"soon","body":{}}"#));
        assert!(message.starts_with("line 5: envelope: invalid type: string \"soon\""), "{message}");
        let line =
            read_line(6, r#"{"at_ms":1,"body":{"model":"m","messages":[{"role":"user","content":5}]}}"#);
        let TraceBody::Rejected(error) = line.body else { panic!("rejected") };
        assert!(error.message.starts_with("messages.0.content: invalid type"), "{}", error.message);
        assert_eq!(line.at_ms, Some(1));
    }

    #[test]
    fn logged_error_replays_as_that_error_whatever_the_body() {
        let line = read_line(
            7,
            r#"{"at_ms":9,"error":{"status":529,"type":"overloaded_error","message":"Overloaded"},"body":{"model":"m","max_tokens":1,"messages":[]}}"#,
        );
        let TraceBody::Rejected(error) = line.body else { panic!("rejected") };
        assert_eq!((error.kind, error.message.as_str()), (ErrorKind::Overloaded, "Overloaded"));
        assert_eq!(line.at_ms, Some(9));
        let line = read_line(
            8,
            r#"{"at_ms":9,"error":{"status":413,"type":"request_too_large","message":"too big"},"body":""}"#,
        );
        let TraceBody::Rejected(error) = line.body else { panic!("rejected") };
        assert_eq!(error.kind, ErrorKind::RequestTooLarge);
    }

    #[test]
    fn envelope_line_keeps_body_bytes() {
        let body = br#"{"model":"m", "messages":[]}"#;
        let line = envelope_line(&Envelope { at_ms: Some(3), ..Envelope::default() }, body);
        assert_eq!(line, r#"{"at_ms":3,"body":{"model":"m", "messages":[]}}"#);
        let line = envelope_line(&Envelope { at_ms: Some(3), ..Envelope::default() }, b"not json");
        assert_eq!(line, r#"{"at_ms":3,"body":"not json"}"#);
    }
}
