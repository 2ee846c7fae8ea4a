//! Random request sequences through the real endpoint and through the naive model of
//! `reference.rs` give identical usage (and time to first token, and visibility) at every step,
//! under both policies; and every usage obeys the API's identities and the price table.
//!
//! Sequences mix workspaces and models, growing and branching conversations (keep a prefix of an
//! earlier request's messages, maybe part of the next one, maybe replace one and keep the rest,
//! split a message or flip its role, append a few or ~20 messages), `tool_use` / `tool_result`
//! runs, up to 4 markers in valid TTL order, automatic caching, prompts sized exactly at the
//! model's minimum, the billing header, thinking budgets, known first bytes, and start times on
//! or next to earlier requests' first byte and TTL ends. Markers may sit anywhere, inside a
//! `tool_use`/`tool_result` run included.
//!
//! `PROPTEST_CASES=10000 cargo test --release properties` runs more cases.

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::Config;

use forkcache_engine::cache::CacheConfig;
use forkcache_engine::endpoint::{Call, EndpointConfig, MockEndpoint};
use forkcache_engine::{PriceTable, Reply, SimTime};
use forkcache_wire::Betas;

use crate::reference::{Block, Case, Kind, MODELS, Message, Model, Policy, Predicted, Request, Ttl};

/// A new message: who sends it and its blocks as (kind choice, tokens).
#[derive(Clone, Debug)]
struct MessageSpec {
    user: bool,
    blocks: Vec<(u8, u64)>,
}

/// When a step starts.
#[derive(Clone, Debug)]
struct Timing {
    gap_ms: u64,
    /// Start on an earlier request's event instead: (which, 0 first byte / 1 +5m / 2 +1h, a
    /// millisecond before it).
    align: Option<(Index, u8, bool)>,
    first_byte_delay_ms: Option<u64>,
}

/// How a step's messages come from an earlier request's.
#[derive(Clone, Debug)]
struct Shape {
    fresh: bool,
    parent: Index,
    keep: Index,
    /// Also keep the first blocks of the next message.
    cut: Option<Index>,
    replace_one: Option<MessageSpec>,
    /// Split a message in two (same role), or flip the role of a one-block message.
    restructure: Option<(Index, Index)>,
    append: Vec<MessageSpec>,
    /// Append this many one-block text messages (around the 20-position window).
    long_append: Option<usize>,
    /// Append a marked block that brings the prompt to the model's minimum (or one below).
    fill_to_minimum: Option<bool>,
}

/// Request-level settings.
#[derive(Clone, Debug)]
struct Settings {
    model: Option<usize>,
    workspace: Option<u8>,
    tools: Option<u8>,
    system: Option<u8>,
    thinking: Option<u8>,
    billing_header: Option<u32>,
    output_tokens: u64,
}

#[derive(Clone, Debug)]
struct Markers {
    at: Vec<Index>,
    hours: Index,
    /// Top-level `cache_control`; `true`: the last block's explicit marker left off.
    automatic: Option<bool>,
}

#[derive(Clone, Debug)]
struct StepSpec {
    timing: Timing,
    shape: Shape,
    settings: Settings,
    markers: Markers,
}

fn timing() -> impl Strategy<Value = Timing> {
    let gap = prop_oneof![
        2 => Just(0u64),
        3 => 1u64..3_000,
        3 => 3_000u64..120_000,
        2 => 295_000u64..305_000,
        1 => 3_595_000u64..3_605_000,
    ];
    let align = prop::option::weighted(0.25, (any::<Index>(), 0u8..3, any::<bool>()));
    (gap, align, prop::option::weighted(0.2, 0u64..5_000))
        .prop_map(|(gap_ms, align, first_byte_delay_ms)| Timing { gap_ms, align, first_byte_delay_ms })
}

fn message() -> impl Strategy<Value = MessageSpec> {
    let tokens = prop_oneof![3 => 1u64..200, 2 => 200u64..1_500];
    (any::<bool>(), prop::collection::vec((0u8..3, tokens), 1..5))
        .prop_map(|(user, blocks)| MessageSpec { user, blocks })
}

fn shape() -> impl Strategy<Value = Shape> {
    let branch = (
        prop::bool::weighted(0.1),
        any::<Index>(),
        any::<Index>(),
        prop::option::weighted(0.2, any::<Index>()),
    );
    let edits = (
        prop::option::weighted(0.2, message()),
        prop::option::weighted(0.1, (any::<Index>(), any::<Index>())),
        prop::collection::vec(message(), 0..3),
        prop::option::weighted(0.1, 17usize..23),
        prop::option::weighted(0.1, any::<bool>()),
    );
    (branch, edits).prop_map(
        |((fresh, parent, keep, cut), (replace_one, restructure, append, long_append, fill_to_minimum))| {
            Shape { fresh, parent, keep, cut, replace_one, restructure, append, long_append, fill_to_minimum }
        },
    )
}

fn settings() -> impl Strategy<Value = Settings> {
    (
        prop::option::weighted(0.1, 0..MODELS.len()),
        prop::option::weighted(0.1, 0u8..2),
        prop::option::weighted(0.1, 0u8..3),
        prop::option::weighted(0.1, 0u8..3),
        prop::option::weighted(0.1, 0u8..3),
        prop::option::weighted(0.3, any::<u32>()),
        0u64..2_000,
    )
        .prop_map(|(model, workspace, tools, system, thinking, billing_header, output_tokens)| {
            Settings { model, workspace, tools, system, thinking, billing_header, output_tokens }
        })
}

fn markers() -> impl Strategy<Value = Markers> {
    (prop::collection::vec(any::<Index>(), 0..5), any::<Index>(), prop::option::weighted(0.25, any::<bool>()))
        .prop_map(|(at, hours, automatic)| Markers { at, hours, automatic })
}

fn step() -> impl Strategy<Value = StepSpec> {
    (timing(), shape(), settings(), markers()).prop_map(|(timing, shape, settings, markers)| StepSpec {
        timing,
        shape,
        settings,
        markers,
    })
}

/// Turns step specs into concrete requests.
struct Builder {
    next_id: u32,
    at_ms: u64,
    requests: Vec<Request>,
}

const TOOL_SETS: [&[(u32, u64)]; 3] = [&[], &[(1, 600)], &[(1, 600), (2, 900)]];
const SYSTEM_SETS: [&[(u32, u64)]; 3] = [&[], &[(1, 1_200)], &[(1, 1_200), (2, 2_500)]];
const THINKING: [Option<u64>; 3] = [None, Some(2_048), Some(4_096)];

fn fixed(set: &[(u32, u64)]) -> Vec<Block> {
    set.iter().map(|&(id, tokens)| Block { kind: Kind::Text, id, tokens, marker: None }).collect()
}

fn first_request() -> Request {
    Request {
        at_ms: 0,
        workspace: 0,
        model: 1,
        first_byte_ms: None,
        output_tokens: 0,
        tools: fixed(TOOL_SETS[1]),
        system: fixed(SYSTEM_SETS[1]),
        billing_header: None,
        thinking_budget: None,
        messages: Vec::new(),
        automatic: None,
    }
}

impl Builder {
    fn block(&mut self, kind: Kind, tokens: u64) -> Block {
        self.next_id += 1;
        Block { kind, id: self.next_id, tokens, marker: None }
    }

    fn message(&mut self, spec: &MessageSpec) -> Message {
        let blocks = spec
            .blocks
            .iter()
            .map(|&(choice, tokens)| {
                let kind = match (choice, spec.user) {
                    (0, _) => Kind::Text,
                    (_, true) => Kind::ToolResult,
                    (_, false) => Kind::ToolUse,
                };
                self.block(kind, tokens)
            })
            .collect();
        Message { user: spec.user, blocks }
    }

    fn build(&mut self, spec: &StepSpec) -> Request {
        self.at_ms = self.start(&spec.timing);
        let parent = match self.requests.len() {
            n if n > 0 && !spec.shape.fresh => Some(self.requests[spec.shape.parent.index(n)].clone()),
            _ => None,
        };
        let mut request = parent.unwrap_or_else(first_request);
        self.settings(&mut request, spec);
        self.conversation(&mut request, &spec.shape);
        let forced_last = spec.shape.fill_to_minimum.is_some() || spec.markers.automatic.is_some();
        if let Some(one_below) = spec.shape.fill_to_minimum {
            self.fill_to_minimum(&mut request, one_below);
        }
        place_markers(&mut request, &spec.markers, forced_last);
        self.requests.push(request.clone());
        request
    }

    fn start(&self, timing: &Timing) -> u64 {
        let Some((which, event, one_before)) = &timing.align else { return self.at_ms + timing.gap_ms };
        if self.requests.is_empty() {
            return self.at_ms + timing.gap_ms;
        }
        let earlier = &self.requests[which.index(self.requests.len())];
        let at = match event {
            0 => earlier.first_byte_ms.unwrap_or(earlier.at_ms),
            1 => earlier.at_ms + 300_000,
            _ => earlier.at_ms + 3_600_000,
        };
        at.saturating_sub(u64::from(*one_before)).max(self.at_ms)
    }

    fn conversation(&mut self, request: &mut Request, shape: &Shape) {
        let parent = std::mem::take(&mut request.messages);
        let keep = shape.keep.index(parent.len() + 1);
        let mut messages = parent[..keep].to_vec();
        if let (Some(cut), Some(next)) = (&shape.cut, parent.get(keep)) {
            let blocks = next.blocks[..cut.index(next.blocks.len()) + 1].to_vec();
            messages.push(Message { user: next.user, blocks });
        } else if let Some(replacement) = shape.replace_one.as_ref().filter(|_| keep < parent.len()) {
            messages.push(self.message(replacement));
            messages.extend_from_slice(&parent[keep + 1..]);
        }
        if let Some((which, at)) = &shape.restructure {
            restructure(&mut messages, which, at);
        }
        for message in &shape.append {
            messages.push(self.message(message));
        }
        for k in 0..shape.long_append.unwrap_or(0) {
            let block = self.block(Kind::Text, 10 + k as u64);
            messages.push(Message { user: k % 2 == 0, blocks: vec![block] });
        }
        if messages.is_empty() {
            messages.push(self.message(&MessageSpec { user: true, blocks: vec![(0, 300)] }));
        }
        request.messages = messages;
    }

    /// A last user block sized so the whole prompt is exactly the model's minimum (or one below).
    fn fill_to_minimum(&mut self, request: &mut Request, one_below: bool) {
        let hidden = if request.tools.is_empty() { 0 } else { MODELS[request.model].tool_prompt };
        let messages = request.messages.iter().flat_map(|m| &m.blocks);
        let so_far: u64 =
            request.tools.iter().chain(&request.system).chain(messages).map(|b| b.tokens).sum::<u64>()
                + hidden;
        let target = MODELS[request.model].min_tokens - u64::from(one_below);
        let block = self.block(Kind::Text, target.saturating_sub(so_far).max(1));
        request.messages.push(Message { user: true, blocks: vec![block] });
    }

    fn settings(&self, request: &mut Request, spec: &StepSpec) {
        let settings = &spec.settings;
        request.at_ms = self.at_ms;
        request.model = settings.model.unwrap_or(request.model);
        request.workspace = settings.workspace.unwrap_or(request.workspace);
        if let Some(set) = settings.tools {
            request.tools = fixed(TOOL_SETS[set as usize]);
        }
        if let Some(set) = settings.system {
            request.system = fixed(SYSTEM_SETS[set as usize]);
        }
        if let Some(choice) = settings.thinking {
            request.thinking_budget = THINKING[choice as usize];
        }
        request.billing_header = settings.billing_header;
        request.first_byte_ms = spec.timing.first_byte_delay_ms.map(|delay| self.at_ms + delay);
        request.output_tokens = settings.output_tokens;
    }
}

/// Splits a message in two of the same role (same blocks, one more boundary), or flips the role
/// of a one-block message.
fn restructure(messages: &mut Vec<Message>, which: &Index, at: &Index) {
    if messages.is_empty() {
        return;
    }
    let m = which.index(messages.len());
    let blocks = messages[m].blocks.clone();
    if blocks.len() < 2 {
        messages[m].user = !messages[m].user;
        return;
    }
    let split = 1 + at.index(blocks.len() - 1);
    let user = messages[m].user;
    messages[m].blocks.truncate(split);
    messages.insert(m + 1, Message { user, blocks: blocks[split..].to_vec() });
}

/// Every block of the request, in tools → system → messages order.
fn blocks_mut(request: &mut Request) -> Vec<&mut Block> {
    let messages = request.messages.iter_mut().flat_map(|m| m.blocks.iter_mut());
    request.tools.iter_mut().chain(request.system.iter_mut()).chain(messages).collect()
}

/// Blocks that may carry a marker: every one (the generator makes no thinking blocks).
fn markable(request: &Request) -> Vec<bool> {
    let messages: usize = request.messages.iter().map(|m| m.blocks.len()).sum();
    vec![true; request.tools.len() + request.system.len() + messages]
}

/// Up to 4 markers on markable blocks, 1h ones first; `forced_last` puts one on the last block.
/// With automatic caching the top-level marker carries the last block's TTL (and the explicit
/// one may be left off).
fn place_markers(request: &mut Request, spec: &Markers, forced_last: bool) {
    let markable = markable(request);
    let candidates: Vec<usize> = (0..markable.len()).filter(|&i| markable[i]).collect();
    let mut chosen: Vec<usize> =
        spec.at.iter().map(|index| candidates[index.index(candidates.len())]).collect();
    let last = markable.len() - 1;
    if forced_last && !chosen.contains(&last) {
        chosen.truncate(3);
        chosen.push(last);
    }
    chosen.sort_unstable();
    chosen.dedup();
    let hours = spec.hours.index(chosen.len() + 1);
    let mut blocks = blocks_mut(request);
    for block in blocks.iter_mut() {
        block.marker = None;
    }
    for (rank, &i) in chosen.iter().enumerate() {
        blocks[i].marker = Some(if rank < hours { Ttl::Hour } else { Ttl::Five });
    }
    request.automatic = spec.automatic.map(|leave_off| {
        let ttl = blocks[last].marker.expect("the last block is marked");
        if leave_off {
            blocks[last].marker = None;
        }
        ttl
    });
}

fn case() -> impl Strategy<Value = Case> {
    prop::collection::vec(step(), 1..20).prop_map(|specs| {
        let mut builder = Builder { next_id: 100, at_ms: 0, requests: Vec::new() };
        Case(specs.iter().map(|spec| builder.build(spec)).collect())
    })
}

fn endpoint(policy: Policy) -> MockEndpoint {
    let policy = match policy {
        Policy::Anthropic => forkcache_engine::Policy::Anthropic,
        Policy::LongestPrefix => forkcache_engine::Policy::LongestPrefix,
    };
    let config =
        // Lenient: random bodies, priced whether or not the API would take them.
        EndpointConfig { cache: CacheConfig { policy, ..CacheConfig::default() }, lenient: true, ..Default::default() };
    MockEndpoint::new(config, PriceTable::builtin()).expect("bytes4 is built in")
}

/// Sends every request to the engine and to the model; the first difference fails the case.
fn run(case: &Case, policy: Policy) -> Result<(), TestCaseError> {
    let mut engine = endpoint(policy);
    let mut model = Model::new(policy);
    for (index, request) in case.0.iter().enumerate() {
        let bytes = request.body().to_string().into_bytes();
        let api_key = request.api_key();
        let call = Call {
            body: &bytes,
            api_key: Some(&api_key),
            workspace: None,
            betas: Betas::NONE,
            at: SimTime(request.at_ms),
            first_byte: request.first_byte_ms.map(SimTime),
            reply: Reply { output_tokens: Some(request.output_tokens), ..Reply::input_only() },
            checked: None,
        };
        let record = engine
            .handle(call)
            .map_err(|err| TestCaseError::fail(format!("{policy:?}: request {index} rejected: {err}")))?
            .record;
        let expected = model.serve(request);
        let usage = &record.usage;
        let split = &usage.cache_creation;
        let got = Predicted {
            read: usage.cache_read_input_tokens,
            write_5m: split.ephemeral_5m_input_tokens,
            write_1h: split.ephemeral_1h_input_tokens,
            uncached: usage.input_tokens,
            total: usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens,
            ttft_ms: record.ttft_ms,
            visible_at: record.visible_at.ms(),
        };
        prop_assert_eq!(got, expected, "{:?} policy, request {} (engine left, model right)", policy, index);
        check_invariants(request, &record)?;
    }
    Ok(())
}

/// total = read + creation + uncached (compared above with the model's own total);
/// creation = 5m + 1h; cost and token-equivalents from the price table by hand.
fn check_invariants(request: &Request, record: &forkcache_engine::Record) -> Result<(), TestCaseError> {
    let usage = &record.usage;
    let split = &usage.cache_creation;
    prop_assert_eq!(
        usage.cache_creation_input_tokens,
        split.ephemeral_5m_input_tokens + split.ephemeral_1h_input_tokens
    );
    let price = &MODELS[request.model];
    let cost = usage.input_tokens * price.input
        + split.ephemeral_5m_input_tokens * price.write_5m
        + split.ephemeral_1h_input_tokens * price.write_1h
        + usage.cache_read_input_tokens * price.read
        + request.output_tokens * price.output;
    prop_assert_eq!(usage.output_tokens, request.output_tokens);
    prop_assert_eq!(record.cost.total_nanousd(), cost);
    // Thousandths of a token, rounded half up.
    let equivalents = (cost * 1_000 + price.input / 2) / price.input;
    prop_assert_eq!(record.token_equivalents.0, equivalents);
    Ok(())
}

proptest! {
    #![proptest_config(Config { failure_persistence: None, ..Config::default() })]

    #[test]
    fn engine_matches_the_reference_model(case in case()) {
        run(&case, Policy::Anthropic)?;
        run(&case, Policy::LongestPrefix)?;
    }
}
