//! Shared helpers: request bodies built from declared-size blocks, an endpoint client that
//! sends them at given times, and a compact usage tuple to compare against.
//!
//! Every helper here only *builds* requests or *reads* results; no expected number is computed
//! by forkcache code.

use std::fmt;

use serde_json::{Value, json};

use forkcache_engine::cache::MissCause;
use forkcache_engine::endpoint::{Call, EndpointConfig, MockEndpoint, Record};
use forkcache_engine::{ApiError, PriceTable, Reply, SimTime};
use forkcache_wire::Betas;

/// Sonnet 4.6: minimum cacheable prefix 1,024 tokens, hidden tool prompt 497 (auto) / 589 (any).
pub const SONNET: &str = "claude-sonnet-4-6";

/// One minute, five minutes and one hour in milliseconds.
pub const MINUTE_MS: u64 = 60_000;
pub const FIVE_MIN_MS: u64 = 5 * MINUTE_MS;
pub const HOUR_MS: u64 = 60 * MINUTE_MS;

/// A text block of a declared size.
pub fn text(label: &str, tokens: u64) -> Value {
    json!({"type": "text", "text": label, "forkcache_tokens": tokens})
}

/// A `tool_use` block of a declared size.
pub fn tool_use(id: &str, tokens: u64) -> Value {
    json!({"type": "tool_use", "id": id, "name": "Read", "input": {"path": id}, "forkcache_tokens": tokens})
}

/// A `tool_result` block of a declared size.
pub fn tool_result(id: &str, tokens: u64) -> Value {
    json!({"type": "tool_result", "tool_use_id": id, "content": format!("result of {id}"), "forkcache_tokens": tokens})
}

/// A tool definition of a declared size.
pub fn tool(name: &str, tokens: u64) -> Value {
    json!({"name": name, "description": format!("the {name} tool"), "input_schema": {"type": "object"}, "forkcache_tokens": tokens})
}

/// `block` with a 5-minute breakpoint.
pub fn bp(block: Value) -> Value {
    with_marker(block, json!({"type": "ephemeral"}))
}

/// `block` with a 1-hour breakpoint.
pub fn bp_1h(block: Value) -> Value {
    with_marker(block, json!({"type": "ephemeral", "ttl": "1h"}))
}

fn with_marker(mut block: Value, marker: Value) -> Value {
    block.as_object_mut().expect("a block is an object").insert("cache_control".into(), marker);
    block
}

/// A user message.
pub fn user(blocks: Vec<Value>) -> Value {
    json!({"role": "user", "content": blocks})
}

/// An assistant message.
pub fn assistant(blocks: Vec<Value>) -> Value {
    json!({"role": "assistant", "content": blocks})
}

/// A request body under construction.
#[derive(Clone, Debug)]
pub struct Body(pub Value);

impl Body {
    /// `model` with these messages, nothing else.
    pub fn new(model: &str, messages: Vec<Value>) -> Body {
        Body(json!({"model": model, "max_tokens": 1024, "messages": messages}))
    }

    /// One user message holding `blocks`, on Sonnet 4.6.
    pub fn blocks(blocks: Vec<Value>) -> Body {
        Body::new(SONNET, vec![user(blocks)])
    }

    /// Sets a top-level member (`system`, `tools`, `tool_choice`, `thinking`, `cache_control`…).
    pub fn with(mut self, key: &str, value: Value) -> Body {
        self.0.as_object_mut().expect("a body is an object").insert(key.into(), value);
        self
    }

    /// The compact bytes sent.
    pub fn bytes(&self) -> Vec<u8> {
        self.0.to_string().into_bytes()
    }
}

/// The four input-side numbers of a `usage` object.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct U {
    pub read: u64,
    pub write_5m: u64,
    pub write_1h: u64,
    pub uncached: u64,
}

/// `usage` as (cache read, 5m writes, 1h writes, uncached input).
pub const fn u(read: u64, write_5m: u64, write_1h: u64, uncached: u64) -> U {
    U { read, write_5m, write_1h, uncached }
}

impl U {
    /// The usage a record reports, checking the API's own identities on the way.
    pub fn of(record: &Record) -> U {
        let usage = &record.usage;
        let split = &usage.cache_creation;
        assert_eq!(
            usage.cache_creation_input_tokens,
            split.ephemeral_5m_input_tokens + split.ephemeral_1h_input_tokens,
            "cache_creation_input_tokens = 5m + 1h"
        );
        U {
            read: usage.cache_read_input_tokens,
            write_5m: split.ephemeral_5m_input_tokens,
            write_1h: split.ephemeral_1h_input_tokens,
            uncached: usage.input_tokens,
        }
    }
}

impl fmt::Debug for U {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "u(read {}, 5m {}, 1h {}, uncached {})",
            self.read, self.write_5m, self.write_1h, self.uncached
        )
    }
}

/// An endpoint and the requests sent to it so far.
pub struct Client {
    pub endpoint: MockEndpoint,
}

impl Client {
    /// The default configuration: `anthropic` policy, semantic identity, first-token visibility.
    pub fn new() -> Client {
        Client::with_config(EndpointConfig::default())
    }

    /// Lenient: these pricing tests build bodies the API's own checks refuse (a turn's tool calls
    /// without their results yet, thinking budgets past `max_tokens`); the checks have their
    /// own tests (`wire::check`, `strict_api`, `strict_traffic`).
    pub fn with_config(mut config: EndpointConfig) -> Client {
        config.lenient = true;
        Client { endpoint: MockEndpoint::new(config, PriceTable::builtin()).expect("bytes4 is built in") }
    }

    /// A provider's cache rules and built-in prices, otherwise as [`Client::with_config`].
    pub fn on_provider(provider: forkcache_engine::Provider) -> Client {
        let mut config = EndpointConfig { lenient: true, ..EndpointConfig::default() };
        config.cache.policy = provider.policy();
        Client { endpoint: MockEndpoint::new(config, provider.prices()).expect("bytes4 is built in") }
    }

    /// Sends `body` at `at_ms` with no API key and no output; the request must be accepted.
    pub fn send(&mut self, body: &Body, at_ms: u64) -> Record {
        self.call(body, at_ms, Opts::default())
            .unwrap_or_else(|err| panic!("request at {at_ms} ms rejected: {err}"))
    }

    /// Sends `body` at `at_ms` with an API key, a known first byte or output tokens.
    pub fn call(&mut self, body: &Body, at_ms: u64, opts: Opts) -> Result<Record, ApiError> {
        let bytes = body.bytes();
        let call = Call {
            body: &bytes,
            api_key: opts.api_key,
            workspace: None,
            betas: opts.betas.unwrap_or(Betas::NONE),
            at: SimTime(at_ms),
            first_byte: opts.first_byte_ms.map(SimTime),
            reply: Reply { output_tokens: Some(opts.output_tokens), ..Reply::input_only() },
            checked: None,
        };
        self.endpoint.handle(call).map(|exchange| exchange.record)
    }

    /// Sends raw bytes at `at_ms`; the request must be accepted.
    pub fn send_bytes(&mut self, bytes: &[u8], at_ms: u64) -> Record {
        let mut call = Call::new(bytes, SimTime(at_ms));
        call.reply = Reply { output_tokens: Some(0), ..Reply::input_only() };
        self.endpoint
            .handle(call)
            .map(|exchange| exchange.record)
            .unwrap_or_else(|err| panic!("rejected: {err}"))
    }

    /// Sends `body` at `at_ms`; the request must be rejected.
    pub fn reject(&mut self, body: &Body, at_ms: u64) -> ApiError {
        match self.call(body, at_ms, Opts::default()) {
            Ok(record) => panic!("expected a 400, got usage {:?}", U::of(&record)),
            Err(err) => err,
        }
    }
}

/// What a call carries besides its body and time.
#[derive(Clone, Copy, Debug, Default)]
pub struct Opts<'k> {
    pub api_key: Option<&'k str>,
    /// When the response really began (a trace's `first_byte_ms`).
    pub first_byte_ms: Option<u64>,
    pub output_tokens: u64,
    /// The betas it names (`anthropic-beta`).
    pub betas: Option<&'k Betas>,
}

/// One request of a scripted sequence and what it must report.
pub struct Step {
    pub what: &'static str,
    pub body: Body,
    pub at_ms: u64,
    pub expect: U,
    /// `None`: no miss; `Some(cause)`: that cause.
    pub miss: Option<MissCause>,
}

/// A step: `what` names it in failures; `miss` is the expected cause, if any.
pub fn step(what: &'static str, body: Body, at_ms: u64, expect: U, miss: Option<MissCause>) -> Step {
    Step { what, body, at_ms, expect, miss }
}

/// Sends every step in order on a fresh endpoint and checks each usage (and miss cause).
pub fn check_steps(client: &mut Client, steps: &[Step]) -> Vec<Record> {
    steps
        .iter()
        .map(|step| {
            let record = client.send(&step.body, step.at_ms);
            assert_eq!(U::of(&record), step.expect, "{}: usage", step.what);
            let cause = record.miss.as_ref().map(|miss| miss.cause);
            assert_eq!(cause, step.miss, "{}: miss cause (miss = {:?})", step.what, record.miss);
            record
        })
        .collect()
}

/// Runs the `forkcache` binary with `args`, `stdin` on its standard input, to completion.
pub fn run_binary(args: &[&str], stdin: &[u8]) -> std::process::Output {
    use std::io::Write as _;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_forkcache"))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the binary runs");
    child.stdin.take().expect("a stdin").write_all(stdin).expect("stdin written");
    child.wait_with_output().expect("the binary finishes")
}
