//! `forkcache serve` answering OpenAI's Responses and Chat Completions APIs: usage under
//! OpenAI's automatic prefix cache and its price table, both endpoints streamed and not, and
//! OpenAI-shaped errors. Every expected number is worked by hand below from the reference
//! (`other-providers.md` §2: the 1,024-token minimum, reads rounded down to 128 through GPT-5.5,
//! exact from GPT-5.6, writes free before 5.6 and at 1.25x from it) and the price table's rows
//! (`fixtures/pricing-openai.json`, dated 2026-08-15).

use serde_json::{Value, json};

use forkcache_net::serve::ServeConfig;

use super::serve_harness::{Answer, Running, client, get, post_with_headers, sse_events};

/// The prompt every test sends: a 2,000-token developer part (declared) and the user's "hi",
/// which the default estimate counts as `{"type":"text","text":"hi"}` = 27 bytes → 7 tokens.
const PROMPT_TOKENS: u64 = 2_007;

/// What `tokens` cost at a price per million tokens given in thousandths of a dollar, in
/// nano-dollars: $1 per million tokens is 1,000 nano-dollars a token.
const fn nanousd(tokens: u64, millidollars_per_million: u64) -> u64 {
    tokens * millidollars_per_million
}

fn responses_body(model: &str, stream: bool) -> String {
    json!({
        "model": model,
        "input": [
            {"role": "developer", "content": [{"type": "input_text", "text": "s", "forkcache_tokens": 2000}]},
            {"role": "user", "content": "hi"},
        ],
        "stream": stream,
    })
    .to_string()
}

fn chat_body(model: &str, stream: bool) -> String {
    json!({
        "model": model,
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "s", "forkcache_tokens": 2000}]},
            {"role": "user", "content": "hi"},
        ],
        "stream": stream,
        "stream_options": if stream { json!({"include_usage": true}) } else { Value::Null },
    })
    .to_string()
}

fn send(server: &Running, path: &str, body: &str) -> Answer {
    let agent = client();
    post_with_headers(&agent, &server.url(path), &[("authorization", "Bearer sk-test")], body.as_bytes())
}

/// The usage object of a Responses answer: the body's, or `response.completed`'s when streamed.
fn responses_usage(answer: &Answer) -> Value {
    assert_eq!(answer.status, 200, "{}", answer.body);
    if !answer.is_stream() {
        return answer.json()["usage"].clone();
    }
    let events = sse_events(&answer.body);
    let (name, completed) = events.last().unwrap();
    assert_eq!(name, "response.completed", "{}", answer.body);
    completed["response"]["usage"].clone()
}

/// The usage object of a Chat Completions answer: the body's, or the last chunk's when streamed.
fn chat_usage(answer: &Answer) -> Value {
    assert_eq!(answer.status, 200, "{}", answer.body);
    if !answer.is_stream() {
        return answer.json()["usage"].clone();
    }
    let chunks = chat_chunks(&answer.body);
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"], json!([]), "the usage chunk has no choices: {}", answer.body);
    last["usage"].clone()
}

/// Every `data:` payload of a Chat Completions stream, checking it ends in `data: [DONE]`.
fn chat_chunks(body: &str) -> Vec<Value> {
    let frames: Vec<&str> = body.split("\n\n").filter(|frame| !frame.trim().is_empty()).collect();
    assert_eq!(frames.last(), Some(&"data: [DONE]"), "{body}");
    let data =
        frames[..frames.len() - 1].iter().map(|frame| frame.strip_prefix("data: ").expect("a data frame"));
    data.map(|data| serde_json::from_str(data).unwrap()).collect()
}

fn openai_stats(server: &Running) -> Value {
    let stats = get(&client(), &server.url("/forkcache/stats")).json();
    stats["openai"].clone()
}

#[test]
fn responses_on_gpt_5_5_read_a_repeated_prefix_in_128_token_steps_and_write_it_free() {
    for stream in [false, true] {
        let server = Running::default_server();
        let first = responses_usage(&send(&server, "/v1/responses", &responses_body("gpt-5.5", stream)));
        let second = responses_usage(&send(&server, "/v1/responses", &responses_body("gpt-5.5", stream)));
        // 2,007 tokens, all input, on both calls; nothing cached the first time.
        assert_eq!(first["input_tokens"], PROMPT_TOKENS, "{first}");
        assert_eq!(first["input_tokens_details"]["cached_tokens"], 0, "{first}");
        // The whole prompt is cached; reported rounded down to 128: 2,007 = 15 × 128 + 87.
        assert_eq!(second["input_tokens"], PROMPT_TOKENS, "{second}");
        assert_eq!(second["input_tokens_details"]["cached_tokens"], 1_920, "{second}");
        // Before GPT-5.6 writes are neither charged nor reported.
        assert!(second["input_tokens_details"].get("cache_write_tokens").is_none(), "{second}");
        let output = second["output_tokens"].as_u64().unwrap();
        assert_eq!(second["total_tokens"], PROMPT_TOKENS + output);
        assert_eq!(second["output_tokens_details"]["reasoning_tokens"], 0);

        // gpt-5.5: $5.00 input (and writes), $0.50 cached, $30.00 output per million.
        // First: 2,007 written at the input rate. Second: 1,920 read, 87 at the input rate.
        let first_cost = nanousd(2_007, 5_000) + nanousd(output, 30_000);
        let second_cost = nanousd(1_920, 500) + nanousd(87, 5_000) + nanousd(output, 30_000);
        let stats = openai_stats(&server);
        assert_eq!(stats["requests"], 2, "{stats}");
        assert_eq!(stats["cached_tokens"], 1_920, "{stats}");
        assert_eq!(stats["cost_nanousd"], first_cost + second_cost, "{stats}");
    }
}

#[test]
fn chat_completions_on_gpt_5_6_terra_read_exactly_and_pay_1_25x_for_writes() {
    for stream in [false, true] {
        let server = Running::default_server();
        let first = chat_usage(&send(&server, "/v1/chat/completions", &chat_body("gpt-5.6-terra", stream)));
        let second = chat_usage(&send(&server, "/v1/chat/completions", &chat_body("gpt-5.6-terra", stream)));
        // First: every token past the minimum written, and GPT-5.6 reports the writes.
        assert_eq!(first["prompt_tokens"], PROMPT_TOKENS, "{first}");
        assert_eq!(first["prompt_tokens_details"]["cached_tokens"], 0, "{first}");
        assert_eq!(first["prompt_tokens_details"]["cache_write_tokens"], PROMPT_TOKENS, "{first}");
        // Second: read at the exact boundary (no 128-token steps from GPT-5.6), nothing written.
        assert_eq!(second["prompt_tokens_details"]["cached_tokens"], PROMPT_TOKENS, "{second}");
        assert_eq!(second["prompt_tokens_details"]["cache_write_tokens"], 0, "{second}");
        let output = second["completion_tokens"].as_u64().unwrap();
        assert_eq!(second["total_tokens"], PROMPT_TOKENS + output);
        assert_eq!(second["completion_tokens_details"]["reasoning_tokens"], 0);

        // gpt-5.6-terra from 2026-07-30: $2.00 input, $2.50 write (1.25x), $0.20 read, $12.00
        // output per million.
        let first_cost = nanousd(2_007, 2_500) + nanousd(output, 12_000);
        let second_cost = nanousd(2_007, 200) + nanousd(output, 12_000);
        let stats = openai_stats(&server);
        assert_eq!(stats["cache_write_tokens"], PROMPT_TOKENS, "{stats}");
        assert_eq!(stats["cost_nanousd"], first_cost + second_cost, "{stats}");
        // The guide's worked example: one write and one full reuse cost 1.35x one uncached pass.
        assert_eq!(nanousd(2_007, 2_500) + nanousd(2_007, 200), nanousd(2_007, 2_000) * 135 / 100);
    }
}

#[test]
fn responses_stream_has_the_real_event_sequence() {
    let server = Running::default_server();
    let answer = send(&server, "/v1/responses", &responses_body("gpt-5.5", true));
    assert!(answer.is_stream(), "{:?}", answer.content_type);
    let events = sse_events(&answer.body);
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names[..2], ["response.created", "response.in_progress"]);
    assert_eq!(names.last(), Some(&"response.completed"));
    for expected in [
        "response.output_item.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.output_item.done",
    ] {
        assert!(names.contains(&expected), "{expected} in {names:?}");
    }
    let numbers: Vec<u64> =
        events.iter().map(|(_, data)| data["sequence_number"].as_u64().unwrap()).collect();
    assert!(numbers.iter().copied().eq(0..events.len() as u64), "{numbers:?}");
    // The deltas spell the completed message's text; usage only in the completed event.
    let deltas: String = events
        .iter()
        .filter(|(name, _)| name == "response.output_text.delta")
        .map(|(_, data)| data["delta"].as_str().unwrap())
        .collect();
    let completed = &events.last().unwrap().1["response"];
    assert_eq!(completed["output"][0]["content"][0]["text"], deltas.as_str());
    assert_eq!(completed["status"], "completed");
    assert_eq!(events[0].1["response"]["usage"], Value::Null);
}

#[test]
fn chat_completion_without_a_stream_is_one_message() {
    let server = Running::default_server();
    let answer = send(&server, "/v1/chat/completions", &chat_body("gpt-5.5", false));
    let json = answer.json();
    assert_eq!(json["object"], "chat.completion");
    assert_eq!(json["choices"][0]["message"]["role"], "assistant");
    assert!(json["choices"][0]["message"]["content"].as_str().is_some_and(|text| !text.is_empty()));
    assert_eq!(json["choices"][0]["finish_reason"], "stop");
    assert_eq!(json["usage"]["prompt_tokens"], PROMPT_TOKENS);
    // A stream without include_usage carries no usage at all, and still ends in [DONE].
    let body = chat_body("gpt-5.5", true)
        .replace(r#""stream_options":{"include_usage":true}"#, r#""stream_options":null"#);
    let chunks = chat_chunks(&send(&server, "/v1/chat/completions", &body).body);
    assert!(chunks.iter().all(|chunk| chunk.get("usage").is_none()), "{chunks:?}");
    assert!(chunks.iter().all(|chunk| chunk["object"] == "chat.completion.chunk"));
}

#[test]
fn tools_and_instructions_key_the_prefix_and_function_calls_are_priced() {
    let server = Running::default_server();
    let with_tools = |description: &str, instructions: &str| {
        json!({
            "model": "gpt-5.5",
            "instructions": instructions,
            "tools": [{"type": "function", "name": "f", "description": description, "parameters": {"type": "object"}}],
            "input": [
                {"role": "developer", "content": [{"type": "input_text", "text": "s", "forkcache_tokens": 2000}]},
                {"role": "user", "content": "hi"},
                {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "ok"},
            ],
        })
        .to_string()
    };
    let cached = |body: &str| {
        responses_usage(&send(&server, "/v1/responses", body))["input_tokens_details"]["cached_tokens"]
            .clone()
    };
    assert_eq!(cached(&with_tools("one", "be brief")), 0);
    // The same tools again: the 2,000-token part and more are cached (at least 15 × 128).
    assert!(cached(&with_tools("one", "be brief")).as_u64().unwrap() >= 1_920);
    // Tools come first in the prefix: a changed description is a miss from the start.
    assert_eq!(cached(&with_tools("two", "be brief")), 0);
    assert!(cached(&with_tools("two", "be brief")).as_u64().unwrap() >= 1_920);
    // Instructions come before the 2,000-token part: changed, nothing past the minimum is read.
    assert_eq!(cached(&with_tools("two", "be terse")), 0);
}

#[test]
fn a_changed_reasoning_effort_is_a_miss_and_adds_no_tokens() {
    let server = Running::default_server();
    let with_effort = |effort: &str| {
        let mut body: Value = serde_json::from_str(&responses_body("gpt-5.5", false)).unwrap();
        body["reasoning"] = json!({"effort": effort});
        responses_usage(&send(&server, "/v1/responses", &body.to_string()))
    };
    assert_eq!(with_effort("low")["input_tokens_details"]["cached_tokens"], 0);
    assert_eq!(with_effort("low")["input_tokens_details"]["cached_tokens"], 1_920);
    // The guide: a changed reasoning effort changes the prefix. The prompt is as long as before.
    let changed = with_effort("high");
    assert_eq!(changed["input_tokens_details"]["cached_tokens"], 0, "{changed}");
    assert_eq!(changed["input_tokens"], PROMPT_TOKENS, "{changed}");
}

/// `(status, error)` of an OpenAI-shaped error, checking the shape on the way.
fn openai_error(answer: &Answer) -> (u16, Value) {
    let json = answer.json();
    let error = json["error"].clone();
    assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()), "{}", answer.body);
    assert_eq!(error["type"], "invalid_request_error", "{}", answer.body);
    assert!(error.get("param").is_some() && error.get("code").is_some(), "{}", answer.body);
    (answer.status, error)
}

#[test]
fn bad_requests_get_openai_shaped_errors_and_are_counted() {
    let config = ServeConfig { body_limit_bytes: 4_096, ..ServeConfig::default() };
    let server = Running::start(config, Default::default());
    let (status, error) =
        openai_error(&send(&server, "/v1/responses", &responses_body("gpt-9-nonesuch", false)));
    assert_eq!((status, &error["code"], &error["param"]), (404, &json!("model_not_found"), &json!("model")));
    let (status, _) = openai_error(&send(&server, "/v1/chat/completions", "{not json"));
    assert_eq!(status, 400);
    let (status, error) = openai_error(&send(&server, "/v1/responses", r#"{"model":"gpt-5.5","input":5}"#));
    assert_eq!((status, &error["param"]), (400, &json!("input")));
    let (status, error) = openai_error(&send(
        &server,
        "/v1/chat/completions",
        r#"{"model":"gpt-5.5","messages":[{"role":"user","content":7}]}"#,
    ));
    assert_eq!((status, &error["param"]), (400, &json!("messages[0].content")));
    let (status, error) = openai_error(&send(&server, "/v1/chat/completions", r#"{"model":"gpt-5.5"}"#));
    assert_eq!((status, &error["param"]), (400, &json!("messages")));
    let oversized = format!(r#"{{"model":"gpt-5.5","input":"{}"}}"#, "x".repeat(8_000));
    let (status, _) = openai_error(&send(&server, "/v1/responses", &oversized));
    assert_eq!(status, 413);
    // Every refusal is counted, and the server still prices the next request.
    assert_eq!(send(&server, "/v1/responses", &responses_body("gpt-5.5", false)).status, 200);
    let stats = openai_stats(&server);
    assert_eq!((stats["requests"].as_u64(), stats["rejected"].as_u64()), (Some(1), Some(6)), "{stats}");
}
