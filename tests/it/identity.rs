//! Identity modes (DESIGN §2.1.2): `semantic` compares the API's own objects structurally (key
//! order and whitespace ignored, string content ≡ one text block) but the user's JSON
//! (`tool_use.input`, `input_schema`) and all text exactly, key order included; `wire` compares
//! each block's bytes as sent, minus `cache_control`.
//!
//! Bodies are written out as raw strings here: whitespace and key order are the point.

use forkcache_engine::IdentityMode::{self, Semantic, Wire};
use forkcache_engine::endpoint::EndpointConfig;
use forkcache_engine::prompt::PromptConfig;

use crate::support::{Client, SONNET, U, u};

fn client(identity: IdentityMode) -> Client {
    let prompt = PromptConfig { identity, ..PromptConfig::default() };
    Client::with_config(EndpointConfig { prompt, ..Default::default() })
}

/// Sends `first` at 0 and `second` at 10 s under `identity`; checks the second's usage (the first
/// writes `total` tokens).
fn check(identity: IdentityMode, first: &str, second: &str, total: u64, same: bool) {
    let mut client = client(identity);
    assert_eq!(U::of(&client.send_bytes(first.as_bytes(), 0)), u(0, total, 0, 0), "{identity:?}: first");
    let expect = if same { u(total, 0, 0, 0) } else { u(0, total, 0, 0) };
    let got = U::of(&client.send_bytes(second.as_bytes(), 10_000));
    assert_eq!(got, expect, "{identity:?}, same = {same}:\n{first}\n{second}");
}

/// One user message holding `block` (2,000 declared tokens, marked).
fn one_block(block: &str) -> String {
    format!(r#"{{"model":"{SONNET}","max_tokens":1024,"messages":[{{"role":"user","content":[{block}]}}]}}"#)
}

const BLOCK: &str =
    r#"{"type":"text","text":"doc","forkcache_tokens":2000,"cache_control":{"type":"ephemeral"}}"#;

#[test]
fn protocol_key_order_and_whitespace() {
    // (variant of BLOCK, same under semantic, same under wire)
    let cases = [
        (BLOCK, true, true),
        (
            r#"{"forkcache_tokens":2000,"text":"doc","cache_control":{"type":"ephemeral"},"type":"text"}"#,
            true,
            false,
        ),
        (
            r#"{ "type": "text", "text": "doc", "forkcache_tokens": 2000, "cache_control": {"type": "ephemeral"} }"#,
            true,
            false,
        ),
        // The marker's own place in the object is not part of the block in either mode.
        (
            r#"{"cache_control":{"type":"ephemeral"},"type":"text","text":"doc","forkcache_tokens":2000}"#,
            true,
            true,
        ),
        // Text is the user's: one extra space is another block.
        (
            r#"{"type":"text","text":"doc ","forkcache_tokens":2000,"cache_control":{"type":"ephemeral"}}"#,
            false,
            false,
        ),
    ];
    for (variant, semantic, wire) in cases {
        check(Semantic, &one_block(BLOCK), &one_block(variant), 2_000, semantic);
        check(Wire, &one_block(BLOCK), &one_block(variant), 2_000, wire);
    }
}

#[test]
fn string_content_is_one_text_block_only_semantically() {
    // Counted by bytes4: {"type":"text","text":"x…x"} with 4,100 × "x" is 25 + 4,100 = 4,125
    // bytes → 1,032 tokens, whether sent as a string or as a block. Automatic caching marks it.
    let x = "x".repeat(4_100);
    let request = |content: String| {
        format!(
            r#"{{"model":"{SONNET}","max_tokens":1024,"cache_control":{{"type":"ephemeral"}},"messages":[{{"role":"user","content":{content}}}]}}"#
        )
    };
    let as_string = request(format!(r#""{x}""#));
    let as_block = request(format!(r#"[{{"type":"text","text":"{x}"}}]"#));
    check(Semantic, &as_string, &as_block, 1_032, true);
    check(Wire, &as_string, &as_block, 1_032, false);
}

/// A user document (2,000, marked), an assistant `tool_use` with `input` (100), and its
/// `tool_result` (100, marked). T: 2,000 → 2,100 → 2,200.
fn with_tool_use(input: &str) -> String {
    format!(
        r#"{{"model":"{SONNET}","max_tokens":1024,"messages":[{{"role":"user","content":[{{"type":"text","text":"doc","forkcache_tokens":2000,"cache_control":{{"type":"ephemeral"}}}}]}},{{"role":"assistant","content":[{{"type":"tool_use","id":"toolu_1","name":"Read","input":{input},"forkcache_tokens":100}}]}},{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"toolu_1","content":"ok","forkcache_tokens":100,"cache_control":{{"type":"ephemeral"}}}}]}}]}}"#
    )
}

#[test]
fn tool_use_input_key_order_matters_in_both_modes() {
    // (second input, same under semantic, same under wire). When it differs, the second request
    // still reads the document's entry: read 2,000, write 200.
    let cases = [
        (r#"{"a":1,"b":2}"#, true, true),
        (r#"{"b":2,"a":1}"#, false, false),
        // Whitespace outside strings is not content, even in the user's JSON.
        (r#"{"a": 1, "b": 2}"#, true, false),
    ];
    for (input, semantic, wire) in cases {
        for (identity, same) in [(Semantic, semantic), (Wire, wire)] {
            let mut client = client(identity);
            client.send_bytes(with_tool_use(r#"{"a":1,"b":2}"#).as_bytes(), 0);
            let got = U::of(&client.send_bytes(with_tool_use(input).as_bytes(), 10_000));
            let expect = if same { u(2_200, 0, 0, 0) } else { u(2_000, 200, 0, 0) };
            assert_eq!(got, expect, "{identity:?}: input {input}");
        }
    }
}

/// One tool (1,500, marked) and a marked 100-token question. T: 1,500; hidden tool prompt 497
/// → 1,997; question → 2,097.
fn with_tool(definition: &str) -> String {
    format!(
        r#"{{"model":"{SONNET}","max_tokens":1024,"tools":[{definition}],"messages":[{{"role":"user","content":[{{"type":"text","text":"q","forkcache_tokens":100,"cache_control":{{"type":"ephemeral"}}}}]}}]}}"#
    )
}

#[test]
fn input_schema_key_order_matters_tool_key_order_only_on_the_wire() {
    let tool = r#"{"name":"f","description":"d","input_schema":{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}}},"forkcache_tokens":1500,"cache_control":{"type":"ephemeral"}}"#;
    let cases = [
        (tool, true, true),
        (
            r#"{"description":"d","name":"f","input_schema":{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}}},"forkcache_tokens":1500,"cache_control":{"type":"ephemeral"}}"#,
            true,
            false,
        ),
        (
            r#"{"name":"f","description":"d","input_schema":{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"string"}}},"forkcache_tokens":1500,"cache_control":{"type":"ephemeral"}}"#,
            false,
            false,
        ),
    ];
    for (variant, semantic, wire) in cases {
        check(Semantic, &with_tool(tool), &with_tool(variant), 2_097, semantic);
        check(Wire, &with_tool(tool), &with_tool(variant), 2_097, wire);
    }
}
