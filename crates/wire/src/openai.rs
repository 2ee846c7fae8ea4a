//! OpenAI's Responses (`POST /v1/responses`) and Chat Completions (`POST /v1/chat/completions`)
//! APIs on the wire: a request read into the Messages body whose prompt the engine prices, and a
//! priced [`MessageResponse`] written back as OpenAI's JSON and SSE shapes.
//!
//! The prompt keeps OpenAI's documented prefix order, one block per position: tool definitions
//! (as sent), then `instructions`, then each message or input item in order. System and developer
//! messages become user-role text blocks where they stand (the Messages `system` field would
//! refuse non-text blocks and move them ahead of nothing: the order is the same either way).
//! Text parts become text blocks (`forkcache_tokens` kept, the engine's declared-size extension);
//! function calls and their outputs become `tool_use` and `tool_result` blocks; any other item or
//! part (images, reasoning, shell calls) is one block holding its JSON as sent, so it is counted
//! and keyed but never interpreted.

use serde_json::{Map, Value, json};

use crate::{ApiError, MessageResponse, ResponseBlock, StopReason, Usage, text_chunks};

/// Which OpenAI API a request came in on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenAiApi {
    /// `POST /v1/responses`.
    Responses,
    /// `POST /v1/chat/completions`.
    ChatCompletions,
}

/// An error in OpenAI's shape: `{"error":{"message","type","param","code"}}` under `status`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenAiError {
    /// HTTP status.
    pub status: u16,
    /// `error.message`.
    pub message: String,
    /// `error.type`: `invalid_request_error` for every 4xx OpenAI documents, `server_error` for 5xx.
    pub kind: &'static str,
    /// `error.param`: the request field at fault, when there is one.
    pub param: Option<String>,
    /// `error.code`, when OpenAI gives one (`model_not_found`, `invalid_api_key`, …).
    pub code: Option<&'static str>,
}

impl OpenAiError {
    /// A 400 naming `param`.
    pub fn invalid(param: Option<&str>, message: impl Into<String>) -> OpenAiError {
        OpenAiError {
            status: 400,
            message: message.into(),
            kind: "invalid_request_error",
            param: param.map(str::to_string),
            code: None,
        }
    }

    /// A 400 for a field of the wrong type (`code: invalid_type`).
    fn wrong_type(param: &str, expected: &str) -> OpenAiError {
        let message = format!("Invalid type for '{param}': expected {expected}.");
        OpenAiError { code: Some("invalid_type"), ..OpenAiError::invalid(Some(param), message) }
    }

    /// A 400 for a missing field (`code: missing_required_parameter`).
    fn missing(param: &str) -> OpenAiError {
        let message = format!("Missing required parameter: '{param}'.");
        OpenAiError { code: Some("missing_required_parameter"), ..OpenAiError::invalid(Some(param), message) }
    }

    /// The 404 for a model the price table does not list, in OpenAI's words.
    pub fn model_not_found(model: &str) -> OpenAiError {
        OpenAiError {
            status: 404,
            message: format!("The model `{model}` does not exist or you do not have access to it."),
            kind: "invalid_request_error",
            param: Some("model".to_string()),
            code: Some("model_not_found"),
        }
    }

    /// The same refusal in OpenAI's shape: the status kept, the type OpenAI uses for it.
    pub fn from_api(error: &ApiError) -> OpenAiError {
        let kind = if error.status >= 500 { "server_error" } else { "invalid_request_error" };
        let code = match error.status {
            401 => Some("invalid_api_key"),
            429 => Some("rate_limit_exceeded"),
            _ if error.message.contains("prompt is too long") => Some("context_length_exceeded"),
            _ => None,
        };
        OpenAiError { status: error.status, message: error.message.clone(), kind, param: None, code }
    }

    /// The JSON body.
    pub fn to_json(&self) -> String {
        let error =
            json!({"message": self.message, "type": self.kind, "param": self.param, "code": self.code});
        json!({ "error": error }).to_string()
    }
}

/// An OpenAI request read: what the edge needs to answer it, and the Messages body to price.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenAiRequest {
    /// The API it came in on.
    pub api: OpenAiApi,
    /// `model`.
    pub model: String,
    /// `stream`.
    pub stream: bool,
    /// Chat Completions' `stream_options.include_usage`: the last chunk carries the usage.
    pub include_usage: bool,
    /// `prompt_cache_key`, recorded (the cache is per workspace and model already).
    pub prompt_cache_key: Option<String>,
    /// The Messages body with the same prompt, in the same order.
    pub messages_body: String,
}

/// `max_tokens` of the priced body when the request names no output limit: generous, since the
/// reply script decides the reply's length, and no OpenAI model in the table allows less.
const DEFAULT_MAX_OUTPUT_TOKENS: u64 = 32_000;

/// Reads an OpenAI request body (UTF-8 already checked) into the Messages body the engine prices.
pub fn read_openai_request(api: OpenAiApi, body: &str) -> Result<OpenAiRequest, OpenAiError> {
    let value: Value = serde_json::from_str(body).map_err(|err| {
        OpenAiError::invalid(
            None,
            format!(
                "We could not parse the JSON body of your request. (HINT: This likely means you \
                 aren't using your HTTP library correctly. The OpenAI API expects a JSON payload: {err})"
            ),
        )
    })?;
    let Value::Object(request) = &value else {
        return Err(OpenAiError::invalid(None, "The request body must be a JSON object."));
    };
    let model = string_field(request, "model")?.ok_or_else(|| OpenAiError::missing("model"))?;
    let stream = bool_field(request, "stream")?.unwrap_or(false);
    let prompt_cache_key = string_field(request, "prompt_cache_key")?.map(str::to_string);
    let mut prompt = Prompt::default();
    if let Some(settings) = settings_block(api, request) {
        prompt.push("user", settings);
    }
    let (tools, max_tokens, include_usage) = match api {
        OpenAiApi::Responses => read_responses(request, &mut prompt)?,
        OpenAiApi::ChatCompletions => read_chat(request, &mut prompt)?,
    };
    if prompt.messages.is_empty() {
        let param = if api == OpenAiApi::Responses { "input" } else { "messages" };
        return Err(OpenAiError::invalid(Some(param), format!("'{param}' must hold at least one message.")));
    }
    let mut body = Map::new();
    body.insert("model".into(), Value::String(model.to_string()));
    body.insert("max_tokens".into(), Value::from(max_tokens.unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS)));
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools));
    }
    body.insert("messages".into(), Value::Array(prompt.into_messages()));
    body.insert("stream".into(), Value::Bool(stream));
    Ok(OpenAiRequest {
        api,
        model: model.to_string(),
        stream,
        include_usage,
        prompt_cache_key,
        messages_body: Value::Object(body).to_string(),
    })
}

type Object = Map<String, Value>;

/// The request settings OpenAI's guide lists as changing the cached prefix (`parallel_tool_calls`,
/// the structured-output format, reasoning effort, verbosity), as one block of no tokens ahead
/// of the messages: a change keys every position after the tools anew, as OpenAI's cache would
/// miss, and costs nothing. Named alike for both APIs, so the same settings key alike. `None`
/// when the request names none of them.
fn settings_block(api: OpenAiApi, request: &Object) -> Option<Value> {
    let text = request.get("text");
    let reasoning = request.get("reasoning");
    let (format, effort, verbosity) = match api {
        OpenAiApi::Responses => (
            text.and_then(|text| text.get("format")),
            reasoning.and_then(|reasoning| reasoning.get("effort")),
            text.and_then(|text| text.get("verbosity")),
        ),
        OpenAiApi::ChatCompletions => {
            (request.get("response_format"), request.get("reasoning_effort"), request.get("verbosity"))
        }
    };
    let named = [
        ("parallel_tool_calls", request.get("parallel_tool_calls")),
        ("format", format),
        ("reasoning_effort", effort),
        ("verbosity", verbosity),
    ];
    let mut block = Map::new();
    block.insert("type".into(), Value::String("openai_settings".into()));
    for (name, value) in named {
        if let Some(value) = value.filter(|value| !value.is_null()) {
            block.insert(name.into(), value.clone());
        }
    }
    if block.len() == 1 {
        return None;
    }
    block.insert("forkcache_tokens".into(), Value::from(0));
    Some(Value::Object(block))
}

/// Tools, output limit and `include_usage` of a Responses request; its prompt into `prompt`.
fn read_responses(
    request: &Object,
    prompt: &mut Prompt,
) -> Result<(Vec<Value>, Option<u64>, bool), OpenAiError> {
    if request.get("previous_response_id").is_some_and(|id| !id.is_null()) {
        let message = "previous_response_id is not supported by forkcache serve (no response is stored): send the whole input";
        return Err(OpenAiError::invalid(Some("previous_response_id"), message));
    }
    let tools = array_field(request, "tools")?.cloned().unwrap_or_default();
    let max_tokens = count_field(request, "max_output_tokens")?;
    if let Some(instructions) = string_field(request, "instructions")? {
        prompt.push_text("user", instructions, None);
    }
    match request.get("input") {
        None => return Err(OpenAiError::missing("input")),
        Some(Value::String(text)) => prompt.push_text("user", text, None),
        Some(Value::Array(items)) => {
            for (index, item) in items.iter().enumerate() {
                push_input_item(prompt, item, &format!("input[{index}]"))?;
            }
        }
        Some(_) => return Err(OpenAiError::wrong_type("input", "a string or an array of input items")),
    }
    Ok((tools, max_tokens, false))
}

/// One Responses input item, in the prompt's order.
fn push_input_item(prompt: &mut Prompt, item: &Value, param: &str) -> Result<(), OpenAiError> {
    let Value::Object(object) = item else {
        return Err(OpenAiError::wrong_type(param, "an object"));
    };
    let kind = object.get("type").and_then(Value::as_str).unwrap_or("message");
    match kind {
        "message" => push_message(prompt, object, param),
        "function_call" | "custom_tool_call" => {
            let call_id = required_string(object, "call_id", param)?;
            let name = required_string(object, "name", param)?;
            let input = match kind {
                "function_call" => arguments_input(object.get("arguments")),
                _ => json!({ "input": object.get("input").cloned().unwrap_or(Value::Null) }),
            };
            prompt
                .push("assistant", json!({"type": "tool_use", "id": call_id, "name": name, "input": input}));
            Ok(())
        }
        "function_call_output" | "custom_tool_call_output" => {
            let call_id = required_string(object, "call_id", param)?;
            let output = object.get("output").map(output_text).unwrap_or_default();
            prompt.push("user", json!({"type": "tool_result", "tool_use_id": call_id, "content": output}));
            Ok(())
        }
        // Outputs of built-in tools come back as the client's turn; everything else the model made.
        other => {
            let role = if other.ends_with("_output") { "user" } else { "assistant" };
            prompt.push(role, item.clone());
            Ok(())
        }
    }
}

/// A message (Responses item or Chat message): its role and content parts, in order.
fn push_message(prompt: &mut Prompt, object: &Object, param: &str) -> Result<(), OpenAiError> {
    let role = required_string(object, "role", param)?;
    let role = match role {
        "user" | "system" | "developer" => "user",
        "assistant" => "assistant",
        other => {
            let message = format!(
                "Invalid value: '{other}'. Supported values are: 'user', 'assistant', 'system' and 'developer'."
            );
            return Err(OpenAiError::invalid(Some(&format!("{param}.role")), message));
        }
    };
    match object.get("content") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(text)) => {
            prompt.push_text(role, text, None);
            Ok(())
        }
        Some(Value::Array(parts)) => {
            for (index, part) in parts.iter().enumerate() {
                push_part(prompt, role, part, &format!("{param}.content[{index}]"))?;
            }
            Ok(())
        }
        Some(_) => Err(OpenAiError::wrong_type(&format!("{param}.content"), "a string or an array")),
    }
}

/// A content part: text (any of OpenAI's text part types) as a text block, anything else as sent.
fn push_part(prompt: &mut Prompt, role: &str, part: &Value, param: &str) -> Result<(), OpenAiError> {
    let Value::Object(object) = part else {
        return Err(OpenAiError::wrong_type(param, "an object"));
    };
    let kind = object.get("type").and_then(Value::as_str);
    let text_key = match kind {
        Some("input_text" | "output_text" | "text") => "text",
        Some("refusal") => "refusal",
        _ => {
            prompt.push(role, part.clone());
            return Ok(());
        }
    };
    let text = required_string(object, text_key, param)?;
    prompt.push_text(role, text, object.get("forkcache_tokens"));
    Ok(())
}

/// Tools, output limit and `include_usage` of a Chat Completions request; its prompt into `prompt`.
fn read_chat(request: &Object, prompt: &mut Prompt) -> Result<(Vec<Value>, Option<u64>, bool), OpenAiError> {
    if let Some(n) = count_field(request, "n")?.filter(|&n| n != 1) {
        return Err(OpenAiError::invalid(
            Some("n"),
            format!("n: {n} choices are not supported by forkcache serve (1 only)"),
        ));
    }
    let tools = array_field(request, "tools")?.cloned().unwrap_or_default();
    let max_tokens = match count_field(request, "max_completion_tokens")? {
        Some(tokens) => Some(tokens),
        None => count_field(request, "max_tokens")?,
    };
    let include_usage = match request.get("stream_options") {
        None | Some(Value::Null) => false,
        Some(Value::Object(options)) => bool_field(options, "include_usage")?.unwrap_or(false),
        Some(_) => return Err(OpenAiError::wrong_type("stream_options", "an object")),
    };
    let messages = array_field(request, "messages")?.ok_or_else(|| OpenAiError::missing("messages"))?;
    for (index, message) in messages.iter().enumerate() {
        push_chat_message(prompt, message, &format!("messages[{index}]"))?;
    }
    Ok((tools, max_tokens, include_usage))
}

/// A Chat message: tool results and assistant tool calls as their blocks, the rest as text.
fn push_chat_message(prompt: &mut Prompt, message: &Value, param: &str) -> Result<(), OpenAiError> {
    let Value::Object(object) = message else {
        return Err(OpenAiError::wrong_type(param, "an object"));
    };
    match required_string(object, "role", param)? {
        "tool" | "function" => {
            let id = object.get("tool_call_id").or_else(|| object.get("name")).and_then(Value::as_str);
            let id = id.ok_or_else(|| OpenAiError::missing(&format!("{param}.tool_call_id")))?;
            let content = object.get("content").map(output_text).unwrap_or_default();
            prompt.push("user", json!({"type": "tool_result", "tool_use_id": id, "content": content}));
            Ok(())
        }
        "assistant" => {
            push_message(prompt, object, param)?;
            push_tool_calls(prompt, object.get("tool_calls"), &format!("{param}.tool_calls"))
        }
        _ => push_message(prompt, object, param),
    }
}

fn push_tool_calls(prompt: &mut Prompt, calls: Option<&Value>, param: &str) -> Result<(), OpenAiError> {
    let calls = match calls {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Array(calls)) => calls,
        Some(_) => return Err(OpenAiError::wrong_type(param, "an array")),
    };
    for (index, call) in calls.iter().enumerate() {
        let param = format!("{param}[{index}]");
        let Value::Object(call) = call else { return Err(OpenAiError::wrong_type(&param, "an object")) };
        let id = required_string(call, "id", &param)?;
        let function = call.get("function").and_then(Value::as_object);
        let function = function.ok_or_else(|| OpenAiError::missing(&format!("{param}.function")))?;
        let name = required_string(function, "name", &format!("{param}.function"))?;
        let input = arguments_input(function.get("arguments"));
        prompt.push("assistant", json!({"type": "tool_use", "id": id, "name": name, "input": input}));
    }
    Ok(())
}

/// A function call's `arguments` (a JSON string) as a tool input object: the object it encodes,
/// or the string itself under `arguments` when it encodes something else.
fn arguments_input(arguments: Option<&Value>) -> Value {
    let text = arguments.and_then(Value::as_str).unwrap_or("");
    match serde_json::from_str::<Value>(text) {
        Ok(object @ Value::Object(_)) => object,
        _ => json!({ "arguments": text }),
    }
}

/// A tool output (a string, or content parts) as `tool_result` content: the string, or the
/// parts' JSON as sent.
fn output_text(output: &Value) -> String {
    match output {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The prompt being built: messages of alternating roles, consecutive blocks of one role merged
/// into one message (the blocks, the positions, stay as they were).
#[derive(Default)]
struct Prompt {
    messages: Vec<(&'static str, Vec<Value>)>,
}

impl Prompt {
    fn push(&mut self, role: &str, block: Value) {
        let role = if role == "assistant" { "assistant" } else { "user" };
        match self.messages.last_mut() {
            Some((last, blocks)) if *last == role => blocks.push(block),
            _ => self.messages.push((role, vec![block])),
        }
    }

    /// A text block; an empty text has no tokens and no block (the engine refuses empty text).
    fn push_text(&mut self, role: &str, text: &str, declared: Option<&Value>) {
        if text.is_empty() && declared.is_none() {
            return;
        }
        let mut block = json!({"type": "text", "text": text});
        if let (Some(declared), Value::Object(object)) = (declared, &mut block) {
            object.insert("forkcache_tokens".into(), declared.clone());
        }
        self.push(role, block);
    }

    fn into_messages(self) -> Vec<Value> {
        self.messages.into_iter().map(|(role, content)| json!({"role": role, "content": content})).collect()
    }
}

fn string_field<'a>(object: &'a Object, name: &str) -> Result<Option<&'a str>, OpenAiError> {
    match object.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(OpenAiError::wrong_type(name, "a string")),
    }
}

fn required_string<'a>(object: &'a Object, name: &str, param: &str) -> Result<&'a str, OpenAiError> {
    let full = format!("{param}.{name}");
    match object.get(name) {
        None | Some(Value::Null) => Err(OpenAiError::missing(&full)),
        Some(Value::String(text)) => Ok(text),
        Some(_) => Err(OpenAiError::wrong_type(&full, "a string")),
    }
}

fn bool_field(object: &Object, name: &str) -> Result<Option<bool>, OpenAiError> {
    match object.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(flag)) => Ok(Some(*flag)),
        Some(_) => Err(OpenAiError::wrong_type(name, "a boolean")),
    }
}

/// A positive integer field.
fn count_field(object: &Object, name: &str) -> Result<Option<u64>, OpenAiError> {
    match object.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => match value.as_u64() {
            Some(count) if count > 0 => Ok(Some(count)),
            _ => Err(OpenAiError::wrong_type(name, "a positive integer")),
        },
    }
}

fn array_field<'a>(object: &'a Object, name: &str) -> Result<Option<&'a Vec<Value>>, OpenAiError> {
    match object.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => Ok(Some(items)),
        Some(_) => Err(OpenAiError::wrong_type(name, "an array")),
    }
}

/// A request's usage in OpenAI's terms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenAiUsage {
    /// All input: uncached, read and written (`input_tokens`, `prompt_tokens`).
    pub input_tokens: u64,
    /// Read from the cache (`cached_tokens`).
    pub cached_tokens: u64,
    /// Written to the cache (`cache_write_tokens`): reported from GPT-5.6, `None` before.
    pub cache_write_tokens: Option<u64>,
    /// Output (`output_tokens`, `completion_tokens`), reasoning included.
    pub output_tokens: u64,
    /// Reasoning tokens, within the output: the mock's replies have none.
    pub reasoning_tokens: u64,
}

impl OpenAiUsage {
    /// The Messages usage the engine computed, in OpenAI's fields; `report_writes` for models
    /// that report `cache_write_tokens` (GPT-5.6 and later).
    pub fn of(usage: &Usage, report_writes: bool) -> OpenAiUsage {
        let written = usage.cache_creation_input_tokens;
        OpenAiUsage {
            input_tokens: usage.input_tokens + written + usage.cache_read_input_tokens,
            cached_tokens: usage.cache_read_input_tokens,
            cache_write_tokens: report_writes.then_some(written),
            output_tokens: usage.output_tokens,
            reasoning_tokens: 0,
        }
    }

    /// `input_tokens + output_tokens`.
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }

    /// The Responses API's `usage` object.
    pub fn responses_json(&self) -> Value {
        let mut details = json!({"cached_tokens": self.cached_tokens});
        add_writes(&mut details, self.cache_write_tokens);
        json!({
            "input_tokens": self.input_tokens,
            "input_tokens_details": details,
            "output_tokens": self.output_tokens,
            "output_tokens_details": {"reasoning_tokens": self.reasoning_tokens},
            "total_tokens": self.total_tokens(),
        })
    }

    /// Chat Completions' `usage` object.
    pub fn chat_json(&self) -> Value {
        let mut details = json!({"cached_tokens": self.cached_tokens, "audio_tokens": 0});
        add_writes(&mut details, self.cache_write_tokens);
        json!({
            "prompt_tokens": self.input_tokens,
            "completion_tokens": self.output_tokens,
            "total_tokens": self.total_tokens(),
            "prompt_tokens_details": details,
            "completion_tokens_details": {
                "reasoning_tokens": self.reasoning_tokens,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        })
    }
}

fn add_writes(details: &mut Value, written: Option<u64>) {
    if let (Some(written), Value::Object(details)) = (written, details) {
        details.insert("cache_write_tokens".into(), Value::from(written));
    }
}

/// What an OpenAI answer is written from: the priced message, its usage, and the request's.
pub struct OpenAiAnswer<'a> {
    /// The request, as read.
    pub request: &'a OpenAiRequest,
    /// The priced Messages response (its content is the reply).
    pub response: &'a MessageResponse,
    /// Its usage in OpenAI's terms.
    pub usage: OpenAiUsage,
    /// `created_at` / `created`, in seconds (the server's clock: the edge stamps it).
    pub created_s: u64,
}

impl OpenAiAnswer<'_> {
    /// The id's unique part: the Messages response's (`msg_…`, deterministic).
    fn suffix(&self) -> &str {
        self.response.id.strip_prefix("msg_").unwrap_or(&self.response.id)
    }

    /// The JSON body of a response that is not streamed.
    pub fn to_json(&self) -> String {
        match self.request.api {
            OpenAiApi::Responses => self.response_object("completed").to_string(),
            OpenAiApi::ChatCompletions => self.chat_completion().to_string(),
        }
    }

    /// The SSE body of a streamed response, every frame in order.
    pub fn to_sse(&self, chunk_chars: usize) -> String {
        match self.request.api {
            OpenAiApi::Responses => self.responses_events(chunk_chars),
            OpenAiApi::ChatCompletions => self.chat_chunks(chunk_chars),
        }
    }

    /// The Responses API's `response` object at `status` (`in_progress` has no output or usage
    /// yet).
    fn response_object(&self, status: &str) -> Value {
        let done = status != "in_progress";
        let status = match (done, self.response.stop_reason) {
            (true, StopReason::MaxTokens) => "incomplete",
            _ => status,
        };
        let incomplete = (status == "incomplete").then(|| json!({"reason": "max_output_tokens"}));
        let output: Vec<Value> = if done { self.output_items("completed") } else { Vec::new() };
        json!({
            "id": format!("resp_{}", self.suffix()),
            "object": "response",
            "created_at": self.created_s,
            "status": status,
            "error": null,
            "incomplete_details": incomplete,
            "model": self.request.model,
            "output": output,
            "parallel_tool_calls": true,
            "previous_response_id": null,
            "prompt_cache_key": self.request.prompt_cache_key,
            "store": false,
            "tool_choice": "auto",
            "tools": [],
            "usage": if done { self.usage.responses_json() } else { Value::Null },
        })
    }

    /// The output items: a message per text block, a function call per tool call.
    fn output_items(&self, status: &str) -> Vec<Value> {
        let ids = self.item_ids();
        self.response.content.iter().zip(ids).map(|(block, id)| output_item(block, &id, status)).collect()
    }

    fn item_ids(&self) -> Vec<String> {
        let suffix = self.suffix();
        let id = |(index, block): (usize, &ResponseBlock)| match block {
            ResponseBlock::Text { .. } => format!("msg_{suffix}_{index}"),
            ResponseBlock::ToolUse { .. } => format!("fc_{suffix}_{index}"),
        };
        self.response.content.iter().enumerate().map(id).collect()
    }

    fn responses_events(&self, chunk_chars: usize) -> String {
        let mut events = ResponsesEvents::default();
        events.push("response.created", json!({"response": self.response_object("in_progress")}));
        events.push("response.in_progress", json!({"response": self.response_object("in_progress")}));
        for (index, (block, id)) in self.response.content.iter().zip(self.item_ids()).enumerate() {
            item_events(&mut events, block, &id, index, chunk_chars);
        }
        events.push("response.completed", json!({"response": self.response_object("completed")}));
        events.out
    }

    fn finish_reason(&self) -> &'static str {
        match self.response.stop_reason {
            StopReason::MaxTokens => "length",
            StopReason::ToolUse => "tool_calls",
            _ => "stop",
        }
    }

    fn chat_completion(&self) -> Value {
        let text: String = self.response.content.iter().filter_map(block_text).collect();
        let calls: Vec<Value> = self.tool_calls().collect();
        let mut message = json!({"role": "assistant", "content": text, "refusal": null});
        if let (false, Value::Object(object)) = (calls.is_empty(), &mut message) {
            object.insert("tool_calls".into(), Value::Array(calls));
        }
        json!({
            "id": format!("chatcmpl-{}", self.suffix()),
            "object": "chat.completion",
            "created": self.created_s,
            "model": self.request.model,
            "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": self.finish_reason()}],
            "usage": self.usage.chat_json(),
            "system_fingerprint": null,
        })
    }

    fn tool_calls(&self) -> impl Iterator<Item = Value> + '_ {
        self.response.content.iter().filter_map(|block| match block {
            ResponseBlock::ToolUse { id, name, input } => Some(json!({
                "id": id, "type": "function", "function": {"name": name, "arguments": input.to_string()}
            })),
            ResponseBlock::Text { .. } => None,
        })
    }

    fn chat_chunks(&self, chunk_chars: usize) -> String {
        let mut out = String::new();
        let mut chunk = |delta: Value, finish: Option<&str>| {
            let mut frame = json!({
                "id": format!("chatcmpl-{}", self.suffix()),
                "object": "chat.completion.chunk",
                "created": self.created_s,
                "model": self.request.model,
                "system_fingerprint": null,
                "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
            });
            if let (true, Value::Object(object)) = (self.request.include_usage, &mut frame) {
                object.insert("usage".into(), Value::Null);
            }
            data_frame(&mut out, &frame);
        };
        chunk(json!({"role": "assistant", "content": "", "refusal": null}), None);
        let text: String = self.response.content.iter().filter_map(block_text).collect();
        if !text.is_empty() {
            text_chunks(&text, chunk_chars)
                .into_iter()
                .for_each(|piece| chunk(json!({"content": piece}), None));
        }
        for (index, call) in self.tool_calls().enumerate() {
            chunk(json!({"tool_calls": [tool_call_delta(index, &call)]}), None);
        }
        chunk(json!({}), Some(self.finish_reason()));
        if self.request.include_usage {
            let frame = json!({
                "id": format!("chatcmpl-{}", self.suffix()),
                "object": "chat.completion.chunk",
                "created": self.created_s,
                "model": self.request.model,
                "system_fingerprint": null,
                "choices": [],
                "usage": self.usage.chat_json(),
            });
            data_frame(&mut out, &frame);
        }
        out.push_str("data: [DONE]\n\n");
        out
    }
}

/// A whole tool call as one streamed delta (its index, id, name and arguments).
fn tool_call_delta(index: usize, call: &Value) -> Value {
    let mut delta = call.clone();
    if let Value::Object(object) = &mut delta {
        object.insert("index".into(), Value::from(index));
    }
    delta
}

fn block_text(block: &ResponseBlock) -> Option<&str> {
    match block {
        ResponseBlock::Text { text } => Some(text),
        ResponseBlock::ToolUse { .. } => None,
    }
}

fn output_item(block: &ResponseBlock, id: &str, status: &str) -> Value {
    match block {
        ResponseBlock::Text { text } => json!({
            "id": id,
            "type": "message",
            "status": status,
            "role": "assistant",
            "content": if status == "in_progress" { json!([]) } else { json!([text_part(text)]) },
        }),
        ResponseBlock::ToolUse { id: call_id, name, input } => json!({
            "id": id,
            "type": "function_call",
            "status": status,
            "call_id": call_id,
            "name": name,
            "arguments": if status == "in_progress" { String::new() } else { input.to_string() },
        }),
    }
}

fn text_part(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
}

/// One output item's events: added, its text or arguments in deltas, done.
fn item_events(
    events: &mut ResponsesEvents,
    block: &ResponseBlock,
    id: &str,
    index: usize,
    chunk_chars: usize,
) {
    events.push(
        "response.output_item.added",
        json!({"output_index": index, "item": output_item(block, id, "in_progress")}),
    );
    let at = json!({"item_id": id, "output_index": index});
    match block {
        ResponseBlock::Text { text } => {
            let part_at = with(&at, "content_index", json!(0));
            events.push("response.content_part.added", with(&part_at, "part", text_part("")));
            for piece in text_chunks(text, chunk_chars) {
                let delta = with(&with(&part_at, "delta", json!(piece)), "logprobs", json!([]));
                events.push("response.output_text.delta", delta);
            }
            events.push(
                "response.output_text.done",
                with(&with(&part_at, "text", json!(text)), "logprobs", json!([])),
            );
            events.push("response.content_part.done", with(&part_at, "part", text_part(text)));
        }
        ResponseBlock::ToolUse { input, .. } => {
            let arguments = input.to_string();
            events.push("response.function_call_arguments.delta", with(&at, "delta", json!(arguments)));
            events.push("response.function_call_arguments.done", with(&at, "arguments", json!(arguments)));
        }
    }
    events.push(
        "response.output_item.done",
        json!({"output_index": index, "item": output_item(block, id, "completed")}),
    );
}

/// `object` with one more member.
fn with(object: &Value, key: &str, value: Value) -> Value {
    let mut object = object.clone();
    if let Value::Object(members) = &mut object {
        members.insert(key.into(), value);
    }
    object
}

/// Responses SSE frames (`event:` and `data:`), each payload with its `type` and
/// `sequence_number`.
#[derive(Default)]
struct ResponsesEvents {
    out: String,
    sequence: u64,
}

impl ResponsesEvents {
    fn push(&mut self, kind: &str, payload: Value) {
        let mut event = json!({"type": kind, "sequence_number": self.sequence});
        if let (Value::Object(event), Value::Object(payload)) = (&mut event, payload) {
            event.extend(payload);
        }
        self.sequence += 1;
        self.out.push_str("event: ");
        self.out.push_str(kind);
        self.out.push('\n');
        data_frame(&mut self.out, &event);
    }
}

fn data_frame(out: &mut String, payload: &Value) {
    out.push_str("data: ");
    out.push_str(&payload.to_string());
    out.push_str("\n\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(api: OpenAiApi, body: &str) -> Value {
        let request = read_openai_request(api, body).unwrap();
        serde_json::from_str(&request.messages_body).unwrap()
    }

    #[test]
    fn responses_input_keeps_its_order_tools_first() {
        let body = r#"{"model":"gpt-5.5","instructions":"be brief","tools":[{"type":"function","name":"f","parameters":{}}],
            "input":[{"role":"developer","content":"dev"},{"role":"user","content":[{"type":"input_text","text":"hi"}]},
            {"type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\":1}"},
            {"type":"function_call_output","call_id":"c1","output":"ok"},{"type":"reasoning","summary":[]}]}"#;
        let messages = read(OpenAiApi::Responses, body);
        assert_eq!(messages["tools"][0]["name"], "f");
        let expected = json!([
            {"role": "user", "content": [{"type": "text", "text": "be brief"}, {"type": "text", "text": "dev"}, {"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "f", "input": {"a": 1}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "ok"}]},
            {"role": "assistant", "content": [{"type": "reasoning", "summary": []}]},
        ]);
        assert_eq!(messages["messages"], expected);
    }

    #[test]
    fn settings_that_change_the_prefix_are_one_block_of_no_tokens_named_alike() {
        let responses =
            r#"{"model":"m","reasoning":{"effort":"high"},"parallel_tool_calls":false,"input":"x"}"#;
        let chat = r#"{"model":"m","reasoning_effort":"high","parallel_tool_calls":false,"messages":[{"role":"user","content":"x"}]}"#;
        let (responses, chat) =
            (read(OpenAiApi::Responses, responses), read(OpenAiApi::ChatCompletions, chat));
        let expected = json!({"type": "openai_settings", "parallel_tool_calls": false, "reasoning_effort": "high", "forkcache_tokens": 0});
        assert_eq!(responses["messages"][0]["content"][0], expected);
        assert_eq!(responses["messages"], chat["messages"]);
        let plain = read(OpenAiApi::Responses, r#"{"model":"m","input":"x"}"#);
        assert_eq!(plain["messages"][0]["content"], json!([{"type": "text", "text": "x"}]));
    }

    #[test]
    fn chat_tool_calls_and_results_are_blocks() {
        let body = r#"{"model":"gpt-5.5","max_tokens":9,"messages":[{"role":"system","content":"s"},{"role":"user","content":"u"},
            {"role":"assistant","content":null,"tool_calls":[{"id":"t","type":"function","function":{"name":"g","arguments":"x"}}]},
            {"role":"tool","tool_call_id":"t","content":"r"}],"stream":true,"stream_options":{"include_usage":true}}"#;
        let request = read_openai_request(OpenAiApi::ChatCompletions, body).unwrap();
        assert!(request.stream && request.include_usage);
        let messages: Value = serde_json::from_str(&request.messages_body).unwrap();
        assert_eq!(messages["max_tokens"], 9);
        assert_eq!(messages["messages"][1]["content"][0]["input"], json!({"arguments": "x"}));
        assert_eq!(messages["messages"][2]["content"][0]["tool_use_id"], "t");
    }

    #[test]
    fn bad_requests_are_openai_errors_naming_the_field() {
        let error = read_openai_request(OpenAiApi::Responses, "{").unwrap_err();
        assert_eq!((error.status, error.kind), (400, "invalid_request_error"));
        let error = read_openai_request(OpenAiApi::Responses, r#"{"model":5,"input":"x"}"#).unwrap_err();
        assert_eq!(error.param.as_deref(), Some("model"));
        let error = read_openai_request(OpenAiApi::ChatCompletions, r#"{"model":"m"}"#).unwrap_err();
        assert_eq!(
            (error.param.as_deref(), error.code),
            (Some("messages"), Some("missing_required_parameter"))
        );
        let error = read_openai_request(
            OpenAiApi::Responses,
            r#"{"model":"m","input":[{"role":"x","content":"a"}]}"#,
        );
        assert_eq!(error.unwrap_err().param.as_deref(), Some("input[0].role"));
        let json: Value = serde_json::from_str(&OpenAiError::model_not_found("m").to_json()).unwrap();
        assert_eq!(json["error"]["code"], "model_not_found");
    }

    #[test]
    fn usage_counts_every_input_token_once() {
        let usage = Usage {
            input_tokens: 7,
            cache_creation_input_tokens: 80,
            cache_read_input_tokens: 1_920,
            output_tokens: 3,
            ..Usage::default()
        };
        let openai = OpenAiUsage::of(&usage, false);
        assert_eq!(openai.responses_json()["input_tokens"], 2_007);
        assert!(openai.responses_json()["input_tokens_details"].get("cache_write_tokens").is_none());
        let openai = OpenAiUsage::of(&usage, true);
        assert_eq!(openai.chat_json()["prompt_tokens_details"]["cache_write_tokens"], 80);
        assert_eq!(openai.chat_json()["total_tokens"], 2_010);
    }
}
