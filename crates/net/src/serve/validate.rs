//! What the API checks at its edge before it prices anything, beyond what the endpoint itself
//! refuses: non-empty `messages` and contents, the types of the documented fields the endpoint
//! does not read (`"temperature": "hot"` is a 400), and unknown top-level fields — accepted and
//! counted by default, refused under `strict` with the API's `Extra inputs are not permitted`.
//! The engine stays permissive (it simulates whatever it is given); only `serve` answers as the
//! API would.

use std::borrow::Cow;
use std::collections::BTreeMap;

use bytes::Bytes;
use serde::Deserialize;
use serde::de::{self, IgnoredAny, MapAccess, Visitor};

use forkcache_engine::billing::PriceTable;
use forkcache_engine::prompt::BlockKeys;
use forkcache_ingest::trace::BodyReader;
use forkcache_wire::{
    ApiError, ContentView, ErrorKind, MapValues, MemberValues, RequestView, parse_request_str,
};

/// The top-level fields the API documents for `POST /v1/messages`, beta fields included
/// (reference §4.2: the request table, then `context_management`, `diagnostics`, `speed`).
pub const DOCUMENTED_FIELDS: &[&str] = &[
    "model",
    "max_tokens",
    "messages",
    "system",
    "cache_control",
    "tools",
    "tool_choice",
    "thinking",
    "output_config",
    "output_format",
    "metadata",
    "stop_sequences",
    "stream",
    "temperature",
    "top_p",
    "top_k",
    "service_tier",
    "inference_geo",
    "container",
    "context_management",
    "diagnostics",
    "speed",
    "mcp_servers",
];

/// Checks a parsed body as the API would. Returns the unknown top-level fields (in body order),
/// which `strict` turns into an error.
pub fn check(text: &str, view: &RequestView, strict: bool) -> Result<Vec<String>, ApiError> {
    check_messages(view)?;
    refuse_unknown(check_types(text)?, strict)
}

/// [`parse_request_str`] and [`check`] in one pass over the body instead of two: the server's
/// hot path, where each pass over a large request costs about as much as pricing it. A body
/// that fails is read again the two-pass way, so its error is exactly theirs (the parse's,
/// naming the field at fault, before any type check's).
pub fn parse_checked(text: &str, strict: bool) -> Result<(RequestView<'_>, Vec<String>), ApiError> {
    match serde_json::from_str::<OnePass>(text) {
        Ok(OnePass { view, unknown }) => {
            check_messages(&view)?;
            Ok((view, refuse_unknown(unknown, strict)?))
        }
        Err(_) => {
            let view = parse_request_str(text)?;
            let unknown = check(text, &view, strict)?;
            Ok((view, unknown))
        }
    }
}

/// The unknown fields, or under `strict` the API's error for the first.
fn refuse_unknown(unknown: Vec<String>, strict: bool) -> Result<Vec<String>, ApiError> {
    match unknown.first() {
        Some(field) if strict => Err(ApiError::invalid(format!("{field}: Extra inputs are not permitted"))),
        _ => Ok(unknown),
    }
}

/// What the API checks against the model: an id it does not serve is a 404 (`model: <id>`), and
/// `max_tokens` past the model's largest output a 400 (`max_tokens: 0` is the cache pre-warm and
/// stays valid). The engine itself still simulates unpriced models.
pub fn check_model(prices: &PriceTable, view: &RequestView) -> Result<(), ApiError> {
    let model = view.require_model()?;
    let resolved = prices.resolve(model);
    if !resolved.known {
        return Err(ApiError::new(ErrorKind::NotFound, format!("model: {model}")));
    }
    let max_tokens = forkcache_engine::endpoint::required_max_tokens(view)?;
    match resolved.price.max_output_tokens {
        Some(most) if max_tokens > most => Err(ApiError::invalid(format!(
            "max_tokens: {max_tokens} > {most}, which is the maximum allowed number of output tokens for {model}"
        ))),
        _ => Ok(()),
    }
}

fn check_messages(view: &RequestView) -> Result<(), ApiError> {
    // A missing field is reported before anything about the fields present, as the API does.
    view.require_model()?;
    forkcache_engine::endpoint::required_max_tokens(view)?;
    let messages = view.require_messages()?;
    if messages.is_empty() {
        return Err(ApiError::invalid("messages: at least one message is required"));
    }
    let last = messages.len() - 1;
    for (index, message) in messages.iter().enumerate() {
        let empty = matches!(&message.content, ContentView::Blocks(blocks) if blocks.is_empty());
        let final_assistant = index == last && message.role == forkcache_wire::Role::Assistant;
        if empty && !final_assistant {
            return Err(ApiError::invalid(format!(
                "messages.{index}: all messages must have non-empty content except for the optional final assistant message"
            )));
        }
    }
    Ok(())
}

/// One pass over the top level: the documented fields the endpoint does not read must have the
/// API's types; the names no documentation lists are gathered (in body order).
fn check_types(text: &str) -> Result<Vec<String>, ApiError> {
    let de = &mut serde_json::Deserializer::from_str(text);
    TopLevel::deserialize(de)
        .map(|top| top.0)
        .map_err(|err| ApiError::invalid(without_positions(&err.to_string())))
}

/// The message without serde_json's ` at line L column C` (the field's own error carries one,
/// and so does the error wrapping it).
fn without_positions(message: &str) -> String {
    message.find(" at line ").map_or(message, |cut| &message[..cut]).to_string()
}

/// The unknown top-level field names of a body.
struct TopLevel(Vec<String>);

impl<'de> Deserialize<'de> for TopLevel {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(TopLevelVisitor)
    }
}

struct TopLevelVisitor;

impl<'de> Visitor<'de> for TopLevelVisitor {
    type Value = TopLevel;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object (the request body)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TopLevel, A::Error> {
        let mut unknown = Vec::new();
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            check_member(&key, &mut map, &mut unknown)?;
        }
        Ok(TopLevel(unknown))
    }
}

/// Reads the value of top-level field `key`: a documented field must have the API's type; an
/// undocumented one is added to `unknown`.
fn check_member<'de, A: MapAccess<'de>>(
    key: &str,
    map: &mut A,
    unknown: &mut Vec<String>,
) -> Result<(), A::Error> {
    check_value(key, &mut MapValues(map), unknown)
        .map_err(|err| de::Error::custom(format_args!("{key}: {err}")))
}

/// [`check_member`] over any reader of member values.
fn check_value<'de, V: MemberValues<'de>>(
    key: &str,
    values: &mut V,
    unknown: &mut Vec<String>,
) -> Result<(), V::Error> {
    match key {
        "temperature" | "top_p" => values.next_value::<Option<f64>>().map(drop),
        "top_k" => values.next_value::<Option<u64>>().map(drop),
        "stop_sequences" => values.next_value::<Option<Vec<Cow<'de, str>>>>().map(drop),
        "metadata" => values.next_value::<Option<BTreeMap<Cow<'de, str>, IgnoredAny>>>().map(drop),
        "service_tier" | "inference_geo" => values.next_value::<Option<Cow<'de, str>>>().map(drop),
        documented if DOCUMENTED_FIELDS.contains(&documented) => values.next_value::<IgnoredAny>().map(drop),
        other => {
            unknown.push(other.to_string());
            values.next_value::<IgnoredAny>().map(drop)
        }
    }
}

/// [`parse_checked`] and the blocks' keys. With a `reader`, the body is read from where it parts
/// from the last body the reader read (a connection's requests repeat their history): the same
/// answer. A body the reader cannot take, or that fails a check on the way, is read by
/// [`parse_checked`], so every error is its error.
pub fn read_checked<'a>(
    reader: Option<&mut BodyReader>,
    body: &Bytes,
    text: &'a str,
    strict: bool,
) -> Result<(RequestView<'a>, Vec<String>, BlockKeys), ApiError> {
    let mut unknown = Vec::new();
    let resumed = reader.and_then(|reader| {
        reader.read(body, text, |key, values| check_value(key, values, &mut unknown).ok())
    });
    match resumed {
        Some((view, keys)) => {
            check_messages(&view)?;
            Ok((view, refuse_unknown(unknown, strict)?, keys))
        }
        None => {
            let (view, unknown) = parse_checked(text, strict)?;
            let keys = BlockKeys::of(&view);
            Ok((view, unknown, keys))
        }
    }
}

/// A body read once: the members the endpoint's view knows go to the view, every other one
/// through [`check_member`].
struct OnePass<'a> {
    view: RequestView<'a>,
    unknown: Vec<String>,
}

impl<'de: 'a, 'a> Deserialize<'de> for OnePass<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(OnePassVisitor)
    }
}

struct OnePassVisitor;

impl<'de> Visitor<'de> for OnePassVisitor {
    type Value = OnePass<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object (the request body)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<OnePass<'de>, A::Error> {
        let mut view = RequestView::default();
        let mut unknown = Vec::new();
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            if !view.read_member(&key, &mut MapValues(&mut map))? {
                check_member(&key, &mut map, &mut unknown)?;
            }
        }
        Ok(OnePass { view, unknown })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use forkcache_wire::parse_request;

    fn checked(body: &str, strict: bool) -> Result<Vec<String>, String> {
        let view = parse_request(body.as_bytes()).map_err(|e| e.message)?;
        check(body, &view, strict).map_err(|e| e.message)
    }

    #[test]
    fn empty_messages_and_contents_are_refused_but_a_final_assistant_prefill_may_be_empty() {
        let err = checked(r#"{"model":"m","max_tokens":1,"messages":[]}"#, false).unwrap_err();
        assert_eq!(err, "messages: at least one message is required");
        let err = checked(r#"{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[]}]}"#, false)
            .unwrap_err();
        assert!(err.starts_with("messages.0: all messages must have non-empty content"), "{err}");
        let prefill = r#"{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[]}]}"#;
        assert_eq!(checked(prefill, false), Ok(vec![]));
    }

    #[test]
    fn wrong_types_name_the_field() {
        let err = checked(
            r#"{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"temperature":"hot"}"#,
            false,
        )
        .unwrap_err();
        assert!(err.starts_with("temperature: invalid type: string \"hot\""), "{err}");
        let err = checked(
            r#"{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"stop_sequences":[1]}"#,
            false,
        )
        .unwrap_err();
        assert!(err.starts_with("stop_sequences: invalid type: integer `1`"), "{err}");
    }

    /// The one-pass parse answers every body exactly as the parse and the check one after the
    /// other: the same view, the same unknown fields, the same error message.
    #[test]
    fn the_one_pass_parse_agrees_with_the_two_passes() {
        let bodies = [
            r#"{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}"#,
            r#"{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"zeta":1,"temperature":0.5,"alpha":[]}"#,
            r#"{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"temperature":"hot"}"#,
            r#"{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"metadata":{"user_id":"u"},"stop_sequences":["x"],"top_k":3}"#,
            r#"{"model":"m","max_tokens":1,"messages":[{"role":"user","content":7}],"temperature":"hot"}"#,
            r#"{"model":"m","max_tokens":"one","messages":[{"role":"user","content":"hi"}]}"#,
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"zeta":1}"#,
            r#"{"model":"m","max_tokens":1,"messages":[]}"#,
            r#"{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]} trailing"#,
            r#"{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"model":"n","zeta":1,"zeta":2}"#,
            r#"{"model":"m","max_tokens":1,"#,
            r#"[1,2]"#,
        ];
        for body in bodies {
            for strict in [false, true] {
                let two_passes = checked(body, strict);
                let one_pass = parse_checked(body, strict)
                    .map(|(view, unknown)| {
                        assert_eq!(view.model, parse_request(body.as_bytes()).unwrap().model, "{body}");
                        unknown
                    })
                    .map_err(|e| e.message);
                assert_eq!(one_pass, two_passes, "{body} (strict {strict})");
            }
        }
        // Spelled out for two of them: the unknown fields in body order, and the type error.
        let unknown = parse_checked(bodies[1], false).map(|(_, unknown)| unknown).map_err(|e| e.message);
        assert_eq!(unknown, Ok(vec!["zeta".to_string(), "alpha".to_string()]));
        let err = parse_checked(bodies[2], false).map(drop).unwrap_err().message;
        assert!(err.starts_with("temperature: invalid type: string \"hot\""), "{err}");
    }

    #[test]
    fn unknown_fields_are_counted_and_refused_only_when_strict() {
        let body = r#"{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"zeta":1,"alpha":2,"context_management":{}}"#;
        assert_eq!(checked(body, false), Ok(vec!["zeta".to_string(), "alpha".to_string()]));
        assert_eq!(checked(body, true), Err("zeta: Extra inputs are not permitted".to_string()));
    }
}
