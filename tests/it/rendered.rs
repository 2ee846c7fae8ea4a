//! `handle_rendered` — a prompt built from block facts, sharing the conversation's positions with
//! the requests before it — must price every request exactly as `handle` prices its bytes.
//!
//! The pattern it checks (the scenario engine's fast path): markers never enter a position's
//! hash, so a conversation's positions are append-only. Each main-loop request reads them whole,
//! with its own breakpoint list; a fork resumes the hash chain from the conversation's checkpoint
//! and adds only its own positions as a tail.

use serde_json::value::RawValue;
use serde_json::{Value, json};

use forkcache_engine::billing::PriceTable;
use forkcache_engine::clock::SimTime;
use forkcache_engine::endpoint::{Call, EndpointConfig, Exchange, MockEndpoint, RenderedRequest};
use forkcache_engine::prompt::{
    BlockContext, Breakpoint, Checkpoint, Position, PromptBuilder, PromptRef, SaltInputs, Salts, Ttl,
    tool_prompt_size,
};
use forkcache_wire::{Role, Thinking};

const MODEL: &str = "claude-opus-4-8";

struct Message {
    role: Role,
    blocks: Vec<Value>,
}

fn marked(mut block: Value) -> Value {
    block["cache_control"] = json!({"type": "ephemeral"});
    block
}

fn tools() -> Vec<Value> {
    (0..3)
        .map(|i| json!({"name": format!("T{i}"), "description": "d".repeat(400), "input_schema": {"type": "object"}}))
        .collect()
}

fn system_block() -> Value {
    json!({"type": "text", "text": "You are an agent. ".repeat(300)})
}

/// The bytes: the system block and the last block of the last message carry markers.
fn body(messages: &[Message]) -> String {
    let last = messages.len() - 1;
    let messages: Vec<Value> = messages
        .iter()
        .enumerate()
        .map(|(m, message)| {
            let count = message.blocks.len();
            let blocks: Vec<Value> = message
                .blocks
                .iter()
                .enumerate()
                .map(
                    |(b, block)| {
                        if m == last && b + 1 == count { marked(block.clone()) } else { block.clone() }
                    },
                )
                .collect();
            json!({"role": message.role.as_str(), "content": blocks})
        })
        .collect();
    json!({"model": MODEL, "max_tokens": 100, "tools": tools(), "system": [marked(system_block())],
           "thinking": {"type": "enabled", "budget_tokens": 2048}, "messages": messages})
    .to_string()
}

fn turn(n: usize) -> Vec<Message> {
    vec![
        Message {
            role: Role::Assistant,
            blocks: vec![
                json!({"type": "text", "text": format!("step {n} ").repeat(50)}),
                json!({"type": "tool_use", "id": format!("t{n}a"), "name": "T0", "input": {"n": n}}),
                json!({"type": "tool_use", "id": format!("t{n}b"), "name": "T1", "input": {"n": n}}),
            ],
        },
        Message {
            role: Role::User,
            blocks: vec![
                json!({"type": "tool_result", "tool_use_id": format!("t{n}a"), "content": "out ".repeat(300)}),
                json!({"type": "tool_result", "tool_use_id": format!("t{n}b"), "content": "out ".repeat(200)}),
            ],
        },
    ]
}

fn fork(parent_turn: usize, directive: usize) -> Vec<Message> {
    let ids: Vec<String> = (0..3).map(|i| format!("fork{parent_turn}_{i}")).collect();
    let mut results: Vec<Value> = ids
        .iter()
        .map(|id| json!({"type": "tool_result", "tool_use_id": id, "content": "Fork started - processing in background"}))
        .collect();
    results.push(json!({"type": "text", "text": format!("<fork-boilerplate>directive {directive}</fork-boilerplate>")}));
    vec![
        Message {
            role: Role::Assistant,
            blocks: ids
                .iter()
                .map(|id| json!({"type": "tool_use", "id": id, "name": "Agent", "input": {"d": id}}))
                .collect(),
        },
        Message { role: Role::User, blocks: results },
    ]
}

/// The conversation as the fast path keeps it.
struct Rendered {
    positions: Vec<Position>,
    checkpoint: Checkpoint,
    system_position: u32,
    salts: Salts,
    first_after_tools: u32,
    first_message: u32,
}

fn add_messages(
    endpoint: &mut MockEndpoint,
    builder: &mut PromptBuilder,
    messages: &[Message],
    first: usize,
) {
    for (offset, message) in messages.iter().enumerate() {
        for (b, block) in message.blocks.iter().enumerate() {
            let raw = RawValue::from_string(block.to_string()).unwrap();
            let info = endpoint.block_info((&*raw).into(), BlockContext::Message, "block").unwrap();
            builder.message_block((first + offset) as u32, b as u32, message.role, b == 0, &info);
        }
    }
}

fn render_head(endpoint: &mut MockEndpoint, first_message: &[Message]) -> Rendered {
    let price = endpoint.prices().resolve(MODEL).price.clone();
    let thinking = Thinking { kind: "enabled".into(), budget_tokens: Some(2048) };
    let salts = SaltInputs { thinking: Some(&thinking), ..SaltInputs::default() }.salts(&price);
    let mut builder = PromptBuilder::new(salts, true);
    for (i, tool) in tools().iter().enumerate() {
        let info = endpoint
            .block_info(
                (&*RawValue::from_string(tool.to_string()).unwrap()).into(),
                BlockContext::Tool,
                "tools",
            )
            .unwrap();
        builder.tool(i as u32, &info);
    }
    let size = tool_prompt_size(None, &price);
    builder.tool_prompt(size.auto, size.extra);
    let system_position = builder.len();
    let raw = RawValue::from_string(system_block().to_string()).unwrap();
    let info = endpoint.block_info((&*raw).into(), BlockContext::System, "system.0").unwrap();
    builder.system(0, &info);
    add_messages(endpoint, &mut builder, first_message, 0);
    let checkpoint = builder.checkpoint();
    let prompt = builder.finish();
    Rendered {
        positions: prompt.positions,
        checkpoint,
        system_position,
        salts,
        first_after_tools: prompt.first_after_tools,
        first_message: prompt.first_message,
    }
}

fn marks(rendered: &Rendered, tail: &[Position]) -> [Breakpoint; 2] {
    let system = rendered.system_position;
    let last = rendered.positions.len() + tail.len() - 1;
    let last_position = tail.last().unwrap_or_else(|| rendered.positions.last().unwrap());
    [
        Breakpoint::at(system, &rendered.positions[system as usize], Ttl::FiveMinutes),
        Breakpoint::at(last as u32, last_position, Ttl::FiveMinutes),
    ]
}

fn priced(endpoint: &mut MockEndpoint, rendered: &Rendered, tail: &[Position], at: u64) -> Exchange {
    let breakpoints = marks(rendered, tail);
    let prompt = PromptRef {
        head: &rendered.positions,
        tail,
        breakpoints: &breakpoints,
        salts: rendered.salts,
        first_after_tools: rendered.first_after_tools,
        first_message: rendered.first_message,
    };
    let request = RenderedRequest { model: MODEL, prompt, stream: false, max_tokens: 100 };
    endpoint.handle_rendered(&request, &Call::new(&[], SimTime(at))).unwrap()
}

fn by_bytes(endpoint: &mut MockEndpoint, messages: &[Message], at: u64) -> Exchange {
    let body = body(messages);
    endpoint.handle(Call::new(body.as_bytes(), SimTime(at))).unwrap()
}

fn assert_same(bytes: &Exchange, rendered: &Exchange, what: &str) {
    assert_eq!(bytes.record.usage, rendered.record.usage, "{what}: usage");
    assert_eq!(bytes.record.miss, rendered.record.miss, "{what}: miss");
    assert_eq!(bytes.record.positions, rendered.record.positions, "{what}: positions");
    assert_eq!(bytes.response.id, rendered.response.id, "{what}: message id");
}

#[test]
fn rendered_prompts_price_exactly_like_their_bytes() {
    let prices = PriceTable::builtin();
    // Lenient: the bodies' thinking budgets exceed their `max_tokens`, which the API refuses.
    let lenient = EndpointConfig { lenient: true, ..EndpointConfig::default() };
    let mut bytes_endpoint = MockEndpoint::new(lenient.clone(), prices.clone()).unwrap();
    let mut fast = MockEndpoint::new(lenient, prices).unwrap();
    let mut messages = vec![Message {
        role: Role::User,
        blocks: vec![json!({"type": "text", "text": "task ".repeat(500)})],
    }];
    let mut rendered = render_head(&mut fast, &messages);
    let mut at = 0;
    let mut compared = 0;
    let (mut fork_reads, mut sibling_misses) = (Vec::new(), 0);
    for n in 1..=6 {
        // The main loop's request: the whole conversation, last block marked.
        let expected = by_bytes(&mut bytes_endpoint, &messages, at);
        assert_same(&expected, &priced(&mut fast, &rendered, &[], at), &format!("turn {n}"));
        compared += 1;
        at += 30_000;
        // On turns 2, 4 and 6 the parent forks three children, one after another (staggered).
        if n % 2 == 0 {
            for directive in 0..3 {
                let own = fork(n, directive);
                let mut builder = PromptBuilder::resume(&rendered.checkpoint);
                add_messages(&mut fast, &mut builder, &own, messages.len());
                let tail = builder.finish().positions;
                let mut whole = std::mem::take(&mut messages);
                let split = whole.len();
                whole.extend(own);
                let expected = by_bytes(&mut bytes_endpoint, &whole, at);
                assert_same(
                    &expected,
                    &priced(&mut fast, &rendered, &tail, at),
                    &format!("turn {n} fork {directive}"),
                );
                compared += 1;
                fork_reads.push(expected.record.usage.cache_read_input_tokens);
                sibling_misses += usize::from(expected.record.miss.is_some());
                whole.truncate(split);
                messages = whole;
                at += 30_000;
            }
        }
        // The turn's assistant reply and tool results join the conversation.
        let new = turn(n);
        let mut builder = PromptBuilder::resume(&rendered.checkpoint);
        add_messages(&mut fast, &mut builder, &new, messages.len());
        rendered.checkpoint = builder.checkpoint();
        rendered.positions.extend(builder.finish().positions);
        messages.extend(new);
    }
    // 6 main-loop requests and 3 × 3 forks, and the comparison was not vacuous: every fork read
    // its parent's cached history, and forks 2 and 3 of each spawn report where they diverge
    // from fork 1 (the documented cache only holds fork 1's entry at its own directive).
    assert_eq!(compared, 15);
    assert!(fork_reads.iter().all(|&read| read > 0), "{fork_reads:?}");
    assert_eq!(sibling_misses, 6);
}
