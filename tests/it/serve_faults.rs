//! Faults: random mutations of valid requests — dropped fields, wrong types, huge strings,
//! truncation, invalid UTF-8 — sent to one server. Every one must get a well-formed answer (a
//! message, a complete stream, or an error in the API's shape whose type matches its status),
//! and the server must still answer a valid request afterwards.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Value, json};

use forkcache_engine::ErrorKind;
use forkcache_engine::endpoint::EndpointConfig;
use forkcache_net::serve::ServeConfig;

use crate::serve_harness::{Answer, Running, cached_request, client, post, sse_events};

/// Valid requests to start from.
fn templates() -> Vec<Value> {
    vec![
        json!({"model": "claude-sonnet-4-6", "max_tokens": 64, "messages": [{"role": "user", "content": "hello"}]}),
        json!({"model": "claude-opus-4-8", "max_tokens": 64, "stream": true,
            "system": [{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.197.fa0;"},
                       {"type": "text", "text": "You are a test.", "cache_control": {"type": "ephemeral"}}],
            "tools": [{"name": "Agent", "description": "d", "input_schema": {"type": "object", "properties": {"prompt": {"type": "string"}}}, "defer_loading": true}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "spawn", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]},
                {"role": "system", "content": "skills"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Agent", "input": {"prompt": "p"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "done"}]}]}
            ],
            "thinking": {"type": "adaptive"}, "output_config": {"effort": "high"}, "context_management": {"edits": []}}),
        json!({"model": "claude-haiku-4-5-20251001", "max_tokens": 0, "cache_control": {"type": "ephemeral"},
            "tool_choice": {"type": "auto"}, "metadata": {"user_id": "u"},
            "messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}, {"type": "text", "text": "what?"}]}]}),
    ]
}

/// One way to damage a request.
#[derive(Clone, Debug)]
enum Mutation {
    /// Remove the value at the n-th path (an object member or an array element).
    Drop(usize),
    /// Replace the value at the n-th path with a value of another type.
    Retype(usize, usize),
    /// Replace the value at the n-th path with a string of this many bytes.
    Huge(usize, usize),
    /// Keep only this fraction (per mille) of the body's bytes.
    Truncate(u16),
    /// Overwrite the byte at this fraction (per mille) of the body with a byte invalid in UTF-8.
    BadByte(u16, u8),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::Drop),
        (any::<usize>(), 0..OTHER_TYPES).prop_map(|(path, kind)| Mutation::Retype(path, kind)),
        (any::<usize>(), 1usize..(1 << 20)).prop_map(|(path, size)| Mutation::Huge(path, size)),
        (0u16..1000).prop_map(Mutation::Truncate),
        (0u16..1000, prop_oneof![Just(0xffu8), Just(0xc0), Just(0x80), Just(0xfe)])
            .prop_map(|(at, byte)| Mutation::BadByte(at, byte)),
    ]
}

const OTHER_TYPES: usize = 8;

fn other_type(kind: usize) -> Value {
    [json!(null), json!(0), json!(-1), json!(1.5), json!(true), json!("text"), json!([]), json!({})][kind]
        .clone()
}

/// Every path in `value`, depth first (the root excluded).
fn paths(value: &Value, prefix: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    let children: Vec<(Step, &Value)> = match value {
        Value::Object(map) => map.iter().map(|(k, v)| (Step::Key(k.clone()), v)).collect(),
        Value::Array(items) => items.iter().enumerate().map(|(i, v)| (Step::Index(i), v)).collect(),
        _ => Vec::new(),
    };
    for (step, child) in children {
        prefix.push(step);
        out.push(prefix.clone());
        paths(child, prefix, out);
        prefix.pop();
    }
}

#[derive(Clone, Debug)]
enum Step {
    Key(String),
    Index(usize),
}

/// The parent of `path` and the last step, to edit in place.
fn edit(root: &mut Value, path: &[Step], change: impl FnOnce(&mut Value, &Step)) {
    let (last, parents) = path.split_last().expect("a non-root path");
    let mut node = root;
    for step in parents {
        node = match step {
            Step::Key(key) => &mut node[key.as_str()],
            Step::Index(index) => &mut node[*index],
        };
    }
    change(node, last);
}

fn mutate(template: &Value, mutation: &Mutation) -> Vec<u8> {
    let mut value = template.clone();
    let mut all = Vec::new();
    paths(&value, &mut Vec::new(), &mut all);
    let pick = |n: usize| all[n % all.len()].clone();
    match *mutation {
        Mutation::Drop(n) => edit(&mut value, &pick(n), |parent, step| match (parent, step) {
            (Value::Object(map), Step::Key(key)) => {
                map.shift_remove(key);
            }
            (Value::Array(items), Step::Index(index)) => {
                items.remove(*index);
            }
            _ => unreachable!("paths follow the tree"),
        }),
        Mutation::Retype(n, kind) => {
            edit(&mut value, &pick(n), |parent, step| set(parent, step, other_type(kind)))
        }
        Mutation::Huge(n, size) => {
            edit(&mut value, &pick(n), |parent, step| set(parent, step, json!("é".repeat(size / 2))))
        }
        Mutation::Truncate(_) | Mutation::BadByte(..) => {}
    }
    let mut bytes = value.to_string().into_bytes();
    match *mutation {
        Mutation::Truncate(per_mille) => bytes.truncate(bytes.len() * per_mille as usize / 1000),
        Mutation::BadByte(per_mille, byte) => {
            let at = bytes.len() * per_mille as usize / 1000;
            bytes[at] = byte;
        }
        _ => {}
    }
    bytes
}

fn set(parent: &mut Value, step: &Step, new: Value) {
    match step {
        Step::Key(key) => parent[key.as_str()] = new,
        Step::Index(index) => parent[*index] = new,
    }
}

/// A message, a complete stream, or an API-shaped error whose type matches its status.
fn well_formed(answer: &Answer) -> Result<(), TestCaseError> {
    match answer.status {
        200 if answer.is_stream() => {
            let events = sse_events(&answer.body);
            prop_assert_eq!(events.first().map(|e| e.0.as_str()), Some("message_start"));
            prop_assert_eq!(events.last().map(|e| e.0.as_str()), Some("message_stop"));
        }
        200 => {
            let message = answer.json();
            prop_assert_eq!(&message["type"], "message");
            prop_assert!(message["usage"]["input_tokens"].is_u64());
        }
        status => {
            let (kind, message) = answer.error();
            prop_assert_eq!(ErrorKind::from_status(status).type_name(), kind.as_str());
            prop_assert!(!message.is_empty());
            prop_assert!(status < 500, "a server error: {}", answer.body);
        }
    }
    Ok(())
}

#[test]
fn mutated_requests_always_get_a_well_formed_answer() {
    let server = Running::start(ServeConfig::default(), EndpointConfig::default());
    let url = server.url("/v1/messages");
    let agent = client();
    let templates = templates();
    let mut runner = TestRunner::new(Config { cases: 160, failure_persistence: None, ..Config::default() });
    let strategy = (0..templates.len(), mutation());
    runner
        .run(&strategy, |(template, mutation)| {
            let body = mutate(&templates[template], &mutation);
            let answer = post(&agent, &url, Some("fuzz"), &body);
            well_formed(&answer)
        })
        .unwrap();
    // Still serving, and every case was answered.
    let valid =
        post(&agent, &url, Some("fuzz"), cached_request("claude-sonnet-4-6", 2_000, "hi", false).as_bytes());
    assert_eq!(valid.status, 200);
    let summary = server.stop();
    let fuzz = &summary.stats.workspaces[&forkcache_ingest::trace::key_fingerprint("fuzz")];
    assert!(fuzz.requests + fuzz.rejected > 160, "{fuzz:?}");
    assert!(fuzz.requests > 0 && fuzz.rejected > 0, "the mutations produce both outcomes: {fuzz:?}");
}
