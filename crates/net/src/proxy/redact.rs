//! `--redact`: a trace that can be shared and still replays. Every text a request carries — text
//! blocks, string content, thinking, tool inputs and results, tool descriptions and schemas — is
//! replaced by a short hash of itself, and its block declares the size it had
//! (`forkcache_tokens`). Equal texts stay equal and different ones different, so the cache sees
//! the same identities, the same token counts and the same breakpoints: replaying a redacted
//! trace gives the usage the original gives.

use serde_json::{Map, Value};

use forkcache_engine::prompt::{DECLARED_TOKENS_KEY, canonical};
use forkcache_engine::tokenize::Tokenizer;

/// The members of a block that hold what was written (everything else is structure: type, ids,
/// names, markers, signatures).
const PAYLOAD_KEYS: [&str; 7] =
    ["text", "thinking", "data", "content", "input", "description", "input_schema"];

/// The body with every text replaced; a body that is not a JSON object is dropped entirely.
pub fn redact(body: &[u8], tokenizer: &dyn Tokenizer) -> Vec<u8> {
    let Ok(Value::Object(mut request)) = serde_json::from_slice::<Value>(body) else {
        return Vec::new();
    };
    if let Some(system) = request.get_mut("system") {
        redact_content(system, tokenizer);
    }
    for message in request.get_mut("messages").and_then(Value::as_array_mut).into_iter().flatten() {
        if let Some(content) = message.get_mut("content") {
            redact_content(content, tokenizer);
        }
    }
    for tool in request.get_mut("tools").and_then(Value::as_array_mut).into_iter().flatten() {
        if let Value::Object(tool) = tool {
            redact_block(tool, tokenizer);
        }
    }
    Value::Object(request).to_string().into_bytes()
}

/// String content becomes the one text block it stands for; every block is redacted.
fn redact_content(content: &mut Value, tokenizer: &dyn Tokenizer) {
    if let Value::String(text) = content {
        let mut block = Map::new();
        block.insert("type".into(), Value::String("text".into()));
        block.insert("text".into(), Value::String(std::mem::take(text)));
        redact_block(&mut block, tokenizer);
        *content = Value::Array(vec![Value::Object(block)]);
        return;
    }
    for block in content.as_array_mut().into_iter().flatten() {
        if let Value::Object(block) = block {
            redact_block(block, tokenizer);
        }
    }
}

/// Declares the block's size as counted now, then hashes its payload.
fn redact_block(block: &mut Map<String, Value>, tokenizer: &dyn Tokenizer) {
    if !PAYLOAD_KEYS.iter().any(|key| block.contains_key(*key)) {
        return;
    }
    if !block.contains_key(DECLARED_TOKENS_KEY) {
        let tokens = tokenizer.count(&canonical(block, false));
        block.insert(DECLARED_TOKENS_KEY.into(), Value::from(tokens));
    }
    for key in PAYLOAD_KEYS {
        if let Some(value) = block.get_mut(key) {
            *value = placeholder(key, value);
        }
    }
}

/// `redacted <16 hex>` of the value's JSON; a schema stays an object and an input stays an
/// object, as the API requires of them.
fn placeholder(key: &str, value: &Value) -> Value {
    let hash = format!("redacted {:016x}", xxhash_rust::xxh3::xxh3_64(value.to_string().as_bytes()));
    match key {
        "input_schema" => serde_json::json!({"type": "object", "description": hash}),
        "input" => serde_json::json!({"redacted": hash}),
        _ => Value::String(hash),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use forkcache_engine::tokenize::Bytes4;

    #[test]
    fn texts_become_hashes_with_their_declared_size() {
        let body = br#"{"model":"m","system":"secret system","messages":[{"role":"user","content":[{"type":"text","text":"secret question","cache_control":{"type":"ephemeral"}}]},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Read","input":{"path":"/secret"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"secret file"}]}],"tools":[{"name":"Read","description":"secret tool","input_schema":{"type":"object"}}]}"#;
        let redacted = String::from_utf8(redact(body, &Bytes4)).unwrap();
        assert!(!redacted.contains("secret"), "{redacted}");
        let value: Value = serde_json::from_str(&redacted).unwrap();
        // {"type":"text","text":"secret system"} = 38 bytes → 10 tokens (bytes4, rounded up).
        assert_eq!(value["system"][0]["forkcache_tokens"], 10);
        // The marker is not counted: {"type":"text","text":"secret question"} = 40 bytes → 10.
        assert_eq!(value["messages"][0]["content"][0]["forkcache_tokens"], 10);
        assert_eq!(value["messages"][0]["content"][0]["cache_control"]["type"], "ephemeral");
        assert_eq!(value["messages"][1]["content"][0]["id"], "t1");
        assert!(value["messages"][1]["content"][0]["input"].is_object());
        assert!(value["tools"][0]["input_schema"].is_object());
        assert_eq!(value["tools"][0]["name"], "Read");
        assert!(redact(b"not json", &Bytes4).is_empty());
    }

    #[test]
    fn equal_texts_stay_equal_and_different_ones_differ() {
        let one = |text: &str| {
            let body = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": text}]});
            let redacted: Value =
                serde_json::from_slice(&redact(body.to_string().as_bytes(), &Bytes4)).unwrap();
            redacted["messages"][0]["content"][0]["text"].as_str().unwrap().to_string()
        };
        assert_eq!(one("same words"), one("same words"));
        assert_ne!(one("same words"), one("same wordz"));
    }
}
