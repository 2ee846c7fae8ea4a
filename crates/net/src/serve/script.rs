//! Reply scripts: what the mock answers, chosen from the request's content alone.
//!
//! A script is an ordered list of rules; the first rule whose every condition holds decides the
//! reply, and a request no rule matches gets the script's `default` (a short text). Conditions
//! look only at what the request says — never at arrival order or at how many requests came
//! before — because an agent's sub-agents and side calls arrive concurrently, in any order.
//!
//! ```json
//! {"rules": [
//!   {"name": "fork child",
//!    "when": {"last_user_contains": "<fork-boilerplate>"},
//!    "reply": {"text": "Fork finished."}},
//!   {"when": {"tool_offered": "Agent", "has_tool_result": false, "last_user_contains": "SPAWN"},
//!    "reply": {"tool_use": [{"name": "Agent", "input": {"description": "d", "prompt": "p"}}]}},
//!   {"when": {"wants_format": true}, "reply": {"json_from_schema": true}},
//!   {"when": {"model": "claude-haiku-4-5"}, "reply": {"error": {"status": 529, "retry_after_s": 1}}},
//!   {"when": {"last_user_contains": "CUT", "stream": true}, "reply": {"cut_stream": true}}
//! ]}
//! ```

use std::cell::OnceCell;

use serde::Deserialize;
use serde_json::Value;

use forkcache_wire::{
    ApiError, ContentView, ErrorKind, MessageView, Reply, ReplyContent, RequestView, Role, StopReason,
};

/// A parsed, checked script.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// What the script is for (shown nowhere; for the people reading the file).
    #[serde(default)]
    pub description: Option<String>,
    /// The rules, tried in order.
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// The reply when no rule matches. Default: the text "forkcache mock reply.".
    #[serde(default)]
    pub default: Option<ScriptReply>,
}

/// One rule: conditions and the reply they select.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// A label for people (and for error messages).
    #[serde(default)]
    pub name: Option<String>,
    /// The conditions, all of which must hold; none means "always".
    #[serde(default)]
    pub when: When,
    /// What to answer.
    pub reply: ScriptReply,
}

/// Conditions on a request's content. Every condition given must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct When {
    /// The last `user` message contains this text (its text blocks and the text of its
    /// `tool_result` blocks, joined by newlines).
    #[serde(default)]
    pub last_user_contains: Option<String>,
    /// A tool with this `name` is offered in `tools`.
    #[serde(default)]
    pub tool_offered: Option<String>,
    /// Whether any message carries a `tool_result` block.
    #[serde(default)]
    pub has_tool_result: Option<bool>,
    /// `model` equals this.
    #[serde(default)]
    pub model: Option<String>,
    /// `model` contains this (for example `"haiku"`).
    #[serde(default)]
    pub model_contains: Option<String>,
    /// Whether `output_config.format` (structured output) is present.
    #[serde(default)]
    pub wants_format: Option<bool>,
    /// Whether the request asks for a stream.
    #[serde(default)]
    pub stream: Option<bool>,
}

/// A scripted reply. Content fields (`text`, `tool_use`, `json`, `json_from_schema`) may be
/// combined — blocks come in that order — but not with `error` or `cut_stream`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptReply {
    /// A text block.
    #[serde(default)]
    pub text: Option<String>,
    /// `tool_use` blocks; the endpoint gives each a deterministic `toolu_…` id.
    #[serde(default)]
    pub tool_use: Vec<ToolCall>,
    /// A text block holding this JSON value, serialized compactly in the order written.
    #[serde(default)]
    pub json: Option<Value>,
    /// A text block holding a JSON value shaped by the request's `output_config.format` schema.
    #[serde(default)]
    pub json_from_schema: bool,
    /// Answer with this error instead (the request is not priced and touches no cache entry).
    #[serde(default)]
    pub error: Option<ErrorReply>,
    /// Streams only: send `message_start` (the request is priced, its writes made), then drop the
    /// connection. A rule with this set never matches a request that does not stream.
    #[serde(default)]
    pub cut_stream: bool,
    /// Stop reason; by default `tool_use` when a tool is called, else `end_turn`.
    #[serde(default)]
    pub stop_reason: Option<StopReason>,
    /// Output tokens to bill; by default counted from the content.
    #[serde(default)]
    pub output_tokens: Option<u64>,
}

/// A scripted `tool_use` block.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// The tool's name.
    pub name: String,
    /// Its input: a JSON object, key order kept. Default `{}`.
    #[serde(default = "empty_object")]
    pub input: Value,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// A scripted error response.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorReply {
    /// HTTP status, 400–599; the error type follows it (529 → `overloaded_error`).
    pub status: u16,
    /// The message. Default: one worded after the type.
    #[serde(default)]
    pub message: Option<String>,
    /// Sent as the `retry-after` header, in seconds.
    #[serde(default)]
    pub retry_after_s: Option<u64>,
    /// Streams only: send `message_start` (the request is priced, its writes made), then this
    /// error as an `error` event, as the API does when it fails mid-stream. A rule with it never
    /// matches a request that does not stream.
    #[serde(default)]
    pub mid_stream: bool,
}

/// A script that cannot be used, naming where.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ScriptError {
    /// Where, as a JSON path (`rules[2].when`); `.` for the whole file.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

/// What a script decided for one request.
#[derive(Clone, Debug, PartialEq)]
pub enum Planned {
    /// Price the request and answer this.
    Answer(Reply),
    /// Turn the request away with this error before pricing it.
    Fail {
        /// The error.
        error: ApiError,
        /// The `retry-after` header, in seconds.
        retry_after_s: Option<u64>,
    },
    /// Price the request, send `message_start`, then drop the connection.
    CutStream,
    /// Price the request, send `message_start`, then this error as an `error` event.
    StreamError(ApiError),
}

impl Script {
    /// Parses and checks a script.
    pub fn from_json(text: &str) -> Result<Script, ScriptError> {
        let script: Script = forkcache_wire::json::read_object(text, ".")
            .map_err(|err| ScriptError { message: err.message_at(), path: err.path })?;
        script.check()?;
        Ok(script)
    }

    /// The script used when none is given: structured-output requests get JSON shaped by their
    /// schema (so clients that parse it keep working), everything else a short text.
    pub fn builtin() -> Script {
        Script {
            description: Some("forkcache's default replies".into()),
            rules: vec![Rule {
                name: Some("structured output".into()),
                when: When { wants_format: Some(true), ..When::default() },
                reply: ScriptReply { json_from_schema: true, ..ScriptReply::default() },
            }],
            default: None,
        }
    }

    fn check(&self) -> Result<(), ScriptError> {
        for (index, rule) in self.rules.iter().enumerate() {
            rule.reply.check(&format!("rules[{index}].reply"))?;
        }
        if let Some(default) = &self.default {
            default.check("default")?;
            if default.streams_only() {
                return Err(ScriptError {
                    path: "default".into(),
                    message: "the default reply must answer every request, streamed or not".into(),
                });
            }
        }
        Ok(())
    }

    /// The reply for a request: the first matching rule's, else the default.
    pub fn plan(&self, request: &RequestView) -> Planned {
        let facts = Facts::new(request);
        let chosen = self.rules.iter().find(|rule| rule.matches(&facts)).map(|rule| &rule.reply);
        match chosen.or(self.default.as_ref()) {
            Some(reply) => reply.plan(request),
            None => Planned::Answer(Reply::default_text()),
        }
    }
}

impl Rule {
    fn matches(&self, facts: &Facts) -> bool {
        let when = &self.when;
        let holds = |condition: Option<bool>| condition.unwrap_or(true);
        let request = facts.request;
        let model = request.model.as_deref().unwrap_or_default();
        (!self.reply.streams_only() || request.stream)
            && holds(when.stream.map(|wanted| wanted == request.stream))
            && holds(when.model.as_ref().map(|wanted| wanted == model))
            && holds(when.model_contains.as_ref().map(|part| model.contains(part.as_str())))
            && holds(when.wants_format.map(|wanted| wanted == request.wants_format()))
            && holds(when.tool_offered.as_ref().map(|name| facts.tools().iter().any(|t| t == name)))
            && holds(when.has_tool_result.map(|wanted| wanted == facts.has_tool_result()))
            && holds(
                when.last_user_contains
                    .as_ref()
                    .map(|needle| facts.last_user_text().contains(needle.as_str())),
            )
    }
}

impl ScriptReply {
    /// Whether the reply only makes sense once a stream has begun.
    fn streams_only(&self) -> bool {
        self.cut_stream || self.error.as_ref().is_some_and(|error| error.mid_stream)
    }

    fn check(&self, path: &str) -> Result<(), ScriptError> {
        let fail =
            |field: &str, message: String| Err(ScriptError { path: format!("{path}{field}"), message });
        let has_content =
            self.text.is_some() || !self.tool_use.is_empty() || self.json.is_some() || self.json_from_schema;
        if self.json.is_some() && self.json_from_schema {
            return fail(".json", "give either `json` or `json_from_schema`, not both".into());
        }
        if let Some(error) = &self.error {
            if has_content || self.cut_stream {
                return fail(".error", "an error reply cannot also carry content or `cut_stream`".into());
            }
            if !(400..=599).contains(&error.status) {
                return fail(
                    ".error.status",
                    format!("must be an HTTP error status (400–599), got {}", error.status),
                );
            }
        }
        if self.cut_stream && has_content {
            return fail(".cut_stream", "a cut stream sends no content; remove the content fields".into());
        }
        for (index, call) in self.tool_use.iter().enumerate() {
            if !call.input.is_object() {
                return fail(
                    &format!(".tool_use[{index}].input"),
                    format!("must be a JSON object, got {}", call.input),
                );
            }
        }
        Ok(())
    }

    fn plan(&self, request: &RequestView) -> Planned {
        if let Some(error) = &self.error {
            let kind = ErrorKind::from_status(error.status);
            let message = error.message.clone().unwrap_or_else(|| default_message(kind).to_string());
            let api_error = ApiError::with_status(error.status, message);
            if error.mid_stream {
                return Planned::StreamError(api_error);
            }
            return Planned::Fail { error: api_error, retry_after_s: error.retry_after_s };
        }
        if self.cut_stream {
            return Planned::CutStream;
        }
        let mut content = Vec::new();
        if let Some(text) = &self.text {
            content.push(ReplyContent::Text(text.clone()));
        }
        if let Some(json) = &self.json {
            content.push(ReplyContent::Text(json.to_string()));
        }
        if self.json_from_schema {
            content.push(ReplyContent::Text(schema_example(&request_schema(request), 0).to_string()));
        }
        for call in &self.tool_use {
            content.push(ReplyContent::ToolUse { name: call.name.clone(), input: call.input.clone() });
        }
        Planned::Answer(Reply { content, stop_reason: self.stop_reason, output_tokens: self.output_tokens })
    }
}

fn default_message(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Overloaded => "Overloaded",
        ErrorKind::RateLimit => "Number of request tokens has exceeded your rate limit.",
        ErrorKind::Api => "Internal server error",
        ErrorKind::Timeout | ErrorKind::RequestTimeout => "Request timed out",
        ErrorKind::Authentication => "invalid x-api-key",
        ErrorKind::Permission => "Your API key does not have permission to use the specified resource.",
        ErrorKind::NotFound => "Not found",
        ErrorKind::RequestTooLarge => "Request exceeds the maximum allowed number of bytes.",
        ErrorKind::InvalidRequest => "Invalid request",
    }
}

/// What the conditions look at, each read from the request the first time a rule asks (most
/// scripts need only a few, and the history of a long conversation is large).
struct Facts<'r> {
    request: &'r RequestView<'r>,
    last_user_text: OnceCell<String>,
    tools: OnceCell<Vec<String>>,
    has_tool_result: OnceCell<bool>,
}

impl<'r> Facts<'r> {
    fn new(request: &'r RequestView<'r>) -> Facts<'r> {
        Facts {
            request,
            last_user_text: OnceCell::new(),
            tools: OnceCell::new(),
            has_tool_result: OnceCell::new(),
        }
    }

    fn messages(&self) -> &'r [MessageView<'r>] {
        self.request.messages.as_deref().unwrap_or_default()
    }

    fn last_user_text(&self) -> &str {
        self.last_user_text.get_or_init(|| {
            let last_user = self.messages().iter().rev().find(|m| m.role == Role::User);
            last_user.map(|m| content_text(&m.content)).unwrap_or_default()
        })
    }

    fn tools(&self) -> &[String] {
        self.tools.get_or_init(|| self.request.tools.iter().filter_map(|raw| tool_name(raw.get())).collect())
    }

    fn has_tool_result(&self) -> bool {
        *self.has_tool_result.get_or_init(|| {
            self.messages().iter().any(|m| match &m.content {
                ContentView::Text(_) => false,
                // Only blocks that mention the type are parsed.
                ContentView::Blocks(raw) => raw.iter().any(|block| {
                    block.get().contains("tool_result")
                        && serde_json::from_str::<Value>(block.get())
                            .is_ok_and(|b| b["type"] == "tool_result")
                }),
            })
        })
    }
}

/// The content's blocks as JSON trees (a string content is one text block). Blocks that are not
/// JSON objects are skipped: the endpoint rejects them later with a precise error.
fn blocks<'c>(content: &'c ContentView) -> Box<dyn Iterator<Item = Value> + 'c> {
    match content {
        ContentView::Text(text) => {
            Box::new(std::iter::once(serde_json::json!({"type": "text", "text": text})))
        }
        ContentView::Blocks(raw) => {
            Box::new(raw.iter().filter_map(|block| serde_json::from_str::<Value>(block.get()).ok()))
        }
    }
}

/// Text blocks' text and `tool_result` text, newline-joined.
fn content_text(content: &ContentView) -> String {
    let mut parts = Vec::new();
    for block in blocks(content) {
        match block["type"].as_str() {
            Some("text") => parts.extend(block["text"].as_str().map(str::to_string)),
            Some("tool_result") => match &block["content"] {
                Value::String(text) => parts.push(text.clone()),
                Value::Array(inner) => {
                    parts.extend(inner.iter().filter_map(|b| b["text"].as_str()).map(str::to_string))
                }
                _ => {}
            },
            _ => {}
        }
    }
    parts.join("\n")
}

/// A tool definition's `name` (a definition without one is rejected later by the endpoint).
fn tool_name(definition: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Named {
        name: Option<String>,
    }
    serde_json::from_str::<Named>(definition).ok()?.name
}

/// The request's `output_config.format.schema` (or the format itself when it has no `schema`).
fn request_schema(request: &RequestView) -> Value {
    let Some(format) = request.output_config.as_ref().and_then(|c| c.format) else { return Value::Null };
    let format: Value = serde_json::from_str(format.get()).unwrap_or(Value::Null);
    match format.get("schema") {
        Some(schema) => schema.clone(),
        None => format,
    }
}

/// Deepest schema nesting followed; deeper parts become `null`.
const SCHEMA_DEPTH_LIMIT: usize = 32;

/// A value that satisfies the common JSON-schema keywords: `const`, `enum`, `default`, `examples`,
/// `type` (object properties in order, arrays of `minItems`, strings of `minLength`, numbers at
/// their `minimum`), `anyOf`/`oneOf`/`allOf` (the first). Deterministic.
pub fn schema_example(schema: &Value, depth: usize) -> Value {
    if depth > SCHEMA_DEPTH_LIMIT {
        return Value::Null;
    }
    let Some(object) = schema.as_object() else { return serde_json::json!({}) };
    for literal in ["const", "default"] {
        if let Some(value) = object.get(literal) {
            return value.clone();
        }
    }
    for list in ["enum", "examples", "anyOf", "oneOf", "allOf"] {
        if let Some(first) = object.get(list).and_then(Value::as_array).and_then(|items| items.first()) {
            return if list == "enum" || list == "examples" {
                first.clone()
            } else {
                schema_example(first, depth + 1)
            };
        }
    }
    match schema_type(object) {
        "object" => Value::Object(
            object
                .get("properties")
                .and_then(Value::as_object)
                .map(|properties| {
                    properties
                        .iter()
                        .map(|(name, sub)| (name.clone(), schema_example(sub, depth + 1)))
                        .collect()
                })
                .unwrap_or_default(),
        ),
        "array" => {
            let count = object.get("minItems").and_then(Value::as_u64).unwrap_or(0).min(16) as usize;
            let item = object.get("items").map_or(Value::Null, |items| schema_example(items, depth + 1));
            Value::Array(vec![item; count])
        }
        "string" => {
            let min = object.get("minLength").and_then(Value::as_u64).unwrap_or(0).min(1024) as usize;
            let text = "forkcache mock";
            Value::String(if text.len() >= min { text.to_string() } else { "x".repeat(min) })
        }
        "integer" | "number" => object.get("minimum").cloned().unwrap_or(Value::from(0)),
        "boolean" => Value::Bool(false),
        "null" => Value::Null,
        _ => serde_json::json!({}),
    }
}

fn schema_type(object: &serde_json::Map<String, Value>) -> &str {
    match object.get("type") {
        Some(Value::String(kind)) => kind,
        Some(Value::Array(kinds)) => {
            kinds.iter().filter_map(Value::as_str).find(|k| *k != "null").unwrap_or("null")
        }
        _ if object.contains_key("properties") => "object",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use forkcache_wire::parse_request;

    fn plan(script: &Script, body: &str) -> Planned {
        script.plan(&parse_request(body.as_bytes()).expect("a valid body"))
    }

    fn texts(planned: Planned) -> Vec<String> {
        let Planned::Answer(reply) = planned else { panic!("expected an answer, got {planned:?}") };
        reply
            .content
            .into_iter()
            .map(|c| match c {
                ReplyContent::Text(text) => text,
                ReplyContent::ToolUse { name, input } => format!("tool {name} {input}"),
            })
            .collect()
    }

    const FORKS: &str = r#"{"rules": [
        {"name": "child", "when": {"last_user_contains": "<fork-boilerplate>"}, "reply": {"text": "child done"}},
        {"name": "spawn", "when": {"tool_offered": "Agent", "has_tool_result": false, "last_user_contains": "SPAWN"},
         "reply": {"text": "forking", "tool_use": [{"name": "Agent", "input": {"prompt": "a", "subagent_type": "fork"}}]}},
        {"name": "after", "when": {"has_tool_result": true}, "reply": {"text": "parent done"}}
    ]}"#;

    #[test]
    fn rules_match_on_content_in_order() {
        let script = Script::from_json(FORKS).unwrap();
        let tools = r#""tools":[{"name":"Agent","input_schema":{"type":"object"}}]"#;
        let parent = format!(
            r#"{{"model":"m","max_tokens":9,{tools},"messages":[{{"role":"user","content":"please SPAWN two"}}]}}"#
        );
        assert_eq!(
            texts(plan(&script, &parent)),
            ["forking", r#"tool Agent {"prompt":"a","subagent_type":"fork"}"#]
        );
        // The child repeats the parent's first message (with SPAWN) but its last user turn is the directive.
        let child = format!(
            r#"{{"model":"m","max_tokens":9,{tools},"messages":[{{"role":"user","content":"please SPAWN two"}},{{"role":"assistant","content":[{{"type":"tool_use","id":"t1","name":"Agent","input":{{}}}}]}},{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t1","content":"Fork started"}},{{"type":"text","text":"<fork-boilerplate> go"}}]}}]}}"#
        );
        assert_eq!(texts(plan(&script, &child)), ["child done"]);
        let follow_up = child.replace("<fork-boilerplate> go", "next");
        assert_eq!(texts(plan(&script, &follow_up)), ["parent done"]);
        // Nothing matches: the default text.
        let other = r#"{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"hello"}]}"#;
        assert_eq!(texts(plan(&script, other)), ["forkcache mock reply."]);
    }

    #[test]
    fn tool_result_text_counts_as_last_user_text() {
        let script = Script::from_json(
            r#"{"rules":[{"when":{"last_user_contains":"launched"},"reply":{"text":"seen"}}]}"#,
        )
        .unwrap();
        let body = r#"{"model":"m","max_tokens":9,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"Async agent launched"}]}]}]}"#;
        assert_eq!(texts(plan(&script, body)), ["seen"]);
    }

    #[test]
    fn errors_and_cut_streams() {
        let script = Script::from_json(
            r#"{"rules":[
                {"when":{"model_contains":"haiku"},"reply":{"error":{"status":529,"retry_after_s":2}}},
                {"when":{"last_user_contains":"CUT"},"reply":{"cut_stream":true}},
                {"when":{"last_user_contains":"MID"},"reply":{"error":{"status":500,"mid_stream":true}}}
            ]}"#,
        )
        .unwrap();
        let haiku =
            r#"{"model":"claude-haiku-4-5","max_tokens":9,"messages":[{"role":"user","content":"x"}]}"#;
        let Planned::Fail { error, retry_after_s } = plan(&script, haiku) else { panic!("a failure") };
        assert_eq!(
            (error.kind.status(), error.message.as_str(), retry_after_s),
            (529, "Overloaded", Some(2))
        );
        let mid =
            r#"{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"MID"}]}"#;
        assert_eq!(
            plan(&script, mid),
            Planned::StreamError(ApiError::new(ErrorKind::Api, "Internal server error"))
        );
        assert_eq!(texts(plan(&script, &mid.replace(r#""stream":true,"#, ""))), ["forkcache mock reply."]);
        let cut =
            r#"{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"CUT"}]}"#;
        assert_eq!(plan(&script, cut), Planned::CutStream);
        // The client's non-streaming fallback is not cut.
        assert_eq!(texts(plan(&script, &cut.replace(r#""stream":true,"#, ""))), ["forkcache mock reply."]);
    }

    #[test]
    fn structured_output_gets_json_shaped_by_the_schema() {
        let body = r#"{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"t"}],"output_config":{"format":{"type":"json_schema","schema":{"type":"object","properties":{"title":{"type":"string"},"n":{"type":"integer","minimum":3},"tags":{"type":"array","items":{"enum":["a","b"]},"minItems":2},"ok":{"type":["boolean","null"]}},"required":["title"]}}}}"#;
        assert_eq!(
            texts(plan(&Script::builtin(), body)),
            [r#"{"title":"forkcache mock","n":3,"tags":["a","a"],"ok":false}"#]
        );
    }

    #[test]
    fn bad_scripts_name_the_field() {
        let err = |text: &str| Script::from_json(text).unwrap_err().to_string();
        let message = err(r#"{"rules":[{"when":{"last_user":"x"},"reply":{}}]}"#);
        assert!(
            message.starts_with(
                "rules[0].when.last_user: unknown field `last_user`; did you mean `last_user_contains`?"
            ),
            "{message}"
        );
        let message =
            err(r#"{"rules":[{"reply":{"text":"a"}},{"reply":{"text":"b","error":{"status":529}}}]}"#);
        assert_eq!(message, "rules[1].reply.error: an error reply cannot also carry content or `cut_stream`");
        let message = err(r#"{"rules":[{"reply":{"error":{"status":200}}}]}"#);
        assert_eq!(message, "rules[0].reply.error.status: must be an HTTP error status (400–599), got 200");
        let message = err(r#"{"rules":[{"reply":{"tool_use":[{"name":"t","input":[1]}]}}]}"#);
        assert_eq!(message, "rules[0].reply.tool_use[0].input: must be a JSON object, got [1]");
        let message = err(r#"{"rules":[{"reply":{"text":5}}]}"#);
        assert!(
            message.starts_with("rules[0].reply.text: expected text in double quotes; found the number 5"),
            "{message}"
        );
        let message = err(r#"{"default":{"cut_stream":true}}"#);
        assert_eq!(message, "default: the default reply must answer every request, streamed or not");
    }
}
