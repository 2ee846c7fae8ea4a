//! A naive reference model of the prefix cache, written from DESIGN §2.1/§2.2 for the property
//! test — it shares no code with `forkcache_engine::prompt` or `forkcache_engine::cache`.
//!
//! Requests are plain structures (tools, system, messages of declared-size blocks); [`Request::body`]
//! renders the JSON the engine is sent. The model walks the same structure itself:
//! - positions: each tool, the hidden tool prompt, each system block (the billing header
//!   dropped), each message block, with consecutive `tool_use` / `tool_result` blocks of one
//!   message collapsed into one position that a marked block ends;
//! - prefix identity: the *content* up to a position — the sequence of block descriptions (level,
//!   role, whether the block opens its message, JSON without `cache_control`) with the thinking
//!   salt before the first message block. Prefixes are numbered by a trie so that equal content
//!   gets the same number (exact: no hashing);
//! - entries: a plain `Vec`, scanned linearly.

use std::collections::HashMap;
use std::fmt;

use serde_json::{Value, json};

/// A cache entry's lifetime.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Ttl {
    Five,
    Hour,
}

impl Ttl {
    fn ms(self) -> u64 {
        match self {
            Ttl::Five => 300_000,
            Ttl::Hour => 3_600_000,
        }
    }

    fn marker(self) -> Value {
        match self {
            Ttl::Five => json!({"type": "ephemeral"}),
            Ttl::Hour => json!({"type": "ephemeral", "ttl": "1h"}),
        }
    }
}

/// What the model needs to know of a model id (reference §1.5, §2.2, §2.5), in nano-dollars per
/// token for prices.
pub struct ModelFacts {
    pub id: &'static str,
    pub min_tokens: u64,
    pub tool_prompt: u64,
    pub input: u64,
    pub write_5m: u64,
    pub write_1h: u64,
    pub read: u64,
    pub output: u64,
}

pub const MODELS: [ModelFacts; 3] = [
    ModelFacts {
        id: "claude-opus-5",
        min_tokens: 512,
        tool_prompt: 286,
        input: 5_000,
        write_5m: 6_250,
        write_1h: 10_000,
        read: 500,
        output: 25_000,
    },
    ModelFacts {
        id: "claude-sonnet-4-6",
        min_tokens: 1_024,
        tool_prompt: 497,
        input: 3_000,
        write_5m: 3_750,
        write_1h: 6_000,
        read: 300,
        output: 15_000,
    },
    ModelFacts {
        id: "claude-haiku-4-5",
        min_tokens: 4_096,
        tool_prompt: 496,
        input: 1_000,
        write_5m: 1_250,
        write_1h: 2_000,
        read: 100,
        output: 5_000,
    },
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Text,
    ToolUse,
    ToolResult,
}

/// A block of declared size; `id` makes its content unique.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    pub kind: Kind,
    pub id: u32,
    pub tokens: u64,
    pub marker: Option<Ttl>,
}

impl Block {
    /// The block's JSON, without `cache_control`.
    fn json(&self) -> Value {
        let (id, tokens) = (self.id, self.tokens);
        match self.kind {
            Kind::Text => json!({"type": "text", "text": format!("text {id}"), "forkcache_tokens": tokens}),
            Kind::ToolUse => {
                json!({"type": "tool_use", "id": format!("toolu_{id}"), "name": "Read", "input": {"n": id}, "forkcache_tokens": tokens})
            }
            Kind::ToolResult => {
                json!({"type": "tool_result", "tool_use_id": format!("toolu_{id}"), "content": format!("result {id}"), "forkcache_tokens": tokens})
            }
        }
    }

    fn tool_json(&self) -> Value {
        json!({"name": format!("tool_{}", self.id), "description": "a tool", "input_schema": {"type": "object"}, "forkcache_tokens": self.tokens})
    }

    fn sent(&self, json: Value) -> Value {
        let mut json = json;
        if let Some(ttl) = self.marker {
            json.as_object_mut().unwrap().insert("cache_control".into(), ttl.marker());
        }
        json
    }

    /// `tool_use` and `tool_result` blocks form runs.
    pub fn in_run(&self) -> bool {
        matches!(self.kind, Kind::ToolUse | Kind::ToolResult)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub user: bool,
    pub blocks: Vec<Block>,
}

/// One request and when it is sent.
#[derive(Clone, Debug)]
pub struct Request {
    pub at_ms: u64,
    pub workspace: u8,
    pub model: usize,
    pub first_byte_ms: Option<u64>,
    pub output_tokens: u64,
    pub tools: Vec<Block>,
    pub system: Vec<Block>,
    /// A billing-header line as `system[0]` (its number varies per request).
    pub billing_header: Option<u32>,
    pub thinking_budget: Option<u64>,
    pub messages: Vec<Message>,
    /// A top-level `cache_control` with this TTL.
    pub automatic: Option<Ttl>,
}

impl Request {
    pub fn api_key(&self) -> String {
        format!("sk-workspace-{}", self.workspace)
    }

    pub fn body(&self) -> Value {
        let mut body = json!({"model": MODELS[self.model].id, "max_tokens": 4096});
        let object = body.as_object_mut().unwrap();
        if !self.tools.is_empty() {
            object.insert("tools".into(), self.tools.iter().map(|b| b.sent(b.tool_json())).collect());
        }
        let header = self
            .billing_header
            .map(|n| json!({"type": "text", "text": format!("x-anthropic-billing-header: cch={n};")}));
        let system: Vec<Value> =
            header.into_iter().chain(self.system.iter().map(|b| b.sent(b.json()))).collect();
        if !system.is_empty() {
            object.insert("system".into(), system.into());
        }
        if let Some(budget) = self.thinking_budget {
            object.insert("thinking".into(), json!({"type": "enabled", "budget_tokens": budget}));
        }
        if let Some(ttl) = self.automatic {
            object.insert("cache_control".into(), ttl.marker());
        }
        let messages = self.messages.iter().map(|m| {
            let content: Vec<Value> = m.blocks.iter().map(|b| b.sent(b.json())).collect();
            json!({"role": if m.user { "user" } else { "assistant" }, "content": content})
        });
        object.insert("messages".into(), messages.collect());
        body
    }

    /// A trace line for `forkcache replay`.
    pub fn trace_line(&self) -> String {
        let mut line = json!({"at_ms": self.at_ms, "api_key": self.api_key()});
        if let Some(first_byte) = self.first_byte_ms {
            line["first_byte_ms"] = json!(first_byte);
        }
        line["usage"] = json!({"output_tokens": self.output_tokens});
        line["body"] = self.body();
        line.to_string()
    }
}

/// A sequence of requests, printed as a pasteable JSONL trace.
#[derive(Clone)]
pub struct Case(pub Vec<Request>);

impl fmt::Debug for Case {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        writeln!(f, "trace ({} requests; replay with `forkcache replay FILE --json`):", self.0.len())?;
        for request in &self.0 {
            writeln!(f, "{}", request.trace_line())?;
        }
        Ok(())
    }
}

/// The usage the model predicts, and when the writes become readable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Predicted {
    pub read: u64,
    pub write_5m: u64,
    pub write_1h: u64,
    pub uncached: u64,
    pub total: u64,
    pub ttft_ms: u64,
    pub visible_at: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Policy {
    Anthropic,
    LongestPrefix,
}

struct Position {
    prefix: u32,
    tokens_end: u64,
}

/// A marked block: the prefix through it (which is a position's prefix unless the block sits
/// inside a run) and the position holding it, where its lookback starts.
struct Breakpoint {
    position: usize,
    prefix: u32,
    tokens: u64,
    ttl: Ttl,
}

/// Where a request read from.
#[derive(Clone, Copy)]
struct Hit {
    prefix: u32,
    tokens: u64,
}

struct Entry {
    workspace: u8,
    model: usize,
    prefix: u32,
    ttl: Ttl,
    expires_at: u64,
    visible_at: u64,
}

impl Entry {
    fn readable(&self, now: u64) -> bool {
        self.visible_at <= now && now < self.expires_at
    }
}

/// The cache of one run.
pub struct Model {
    policy: Policy,
    /// (parent prefix, description of the next block or salt) → prefix number; 0 is empty.
    trie: HashMap<(u32, String), u32>,
    entries: Vec<Entry>,
}

impl Model {
    pub fn new(policy: Policy) -> Model {
        Model { policy, trie: HashMap::new(), entries: Vec::new() }
    }

    fn extend(&mut self, prefix: u32, description: String) -> u32 {
        let next = self.trie.len() as u32 + 1;
        *self.trie.entry((prefix, description)).or_insert(next)
    }

    /// DESIGN §1/§2.1.1: the request's positions, in tools → system → messages order, and its
    /// breakpoints. A prefix is named by its blocks alone; a run of tool_use (or tool_result)
    /// blocks is one position whatever markers it carries.
    fn positions(&mut self, request: &Request) -> (Vec<Position>, Vec<Breakpoint>) {
        let mut positions = Vec::new();
        let mut breakpoints = Vec::new();
        let (mut prefix, mut tokens) = (0, 0);
        let mut mark = |positions: &Vec<Position>, prefix, tokens, marker: Option<Ttl>| {
            if let Some(ttl) = marker {
                breakpoints.push(Breakpoint { position: positions.len(), prefix, tokens, ttl });
            }
        };
        for tool in &request.tools {
            prefix = self.extend(prefix, format!("tool {}", tool.tool_json()));
            tokens += tool.tokens;
            mark(&positions, prefix, tokens, tool.marker);
            positions.push(Position { prefix, tokens_end: tokens });
        }
        if !request.tools.is_empty() {
            prefix = self.extend(prefix, "hidden tool prompt".into());
            tokens += MODELS[request.model].tool_prompt;
            positions.push(Position { prefix, tokens_end: tokens });
        }
        for block in &request.system {
            prefix = self.extend(prefix, format!("system {}", block.json()));
            tokens += block.tokens;
            mark(&positions, prefix, tokens, block.marker);
            positions.push(Position { prefix, tokens_end: tokens });
        }
        prefix = self.extend(prefix, format!("thinking {:?}", request.thinking_budget));
        let last_message = request.messages.len() - 1;
        for (m, message) in request.messages.iter().enumerate() {
            for (b, block) in message.blocks.iter().enumerate() {
                let role = if message.user { "user" } else { "assistant" };
                prefix = self.extend(prefix, format!("{role} opens={} {}", b == 0, block.json()));
                tokens += block.tokens;
                let last_of_request = m == last_message && b + 1 == message.blocks.len();
                mark(
                    &positions,
                    prefix,
                    tokens,
                    block.marker.or(request.automatic.filter(|_| last_of_request)),
                );
                let next = message.blocks.get(b + 1);
                let run_goes_on = block.in_run() && next.is_some_and(|n| n.kind == block.kind);
                if !run_goes_on {
                    positions.push(Position { prefix, tokens_end: tokens });
                }
            }
        }
        (positions, breakpoints)
    }

    fn find(&self, request: &Request, prefix: u32) -> Option<usize> {
        self.entries
            .iter()
            .position(|e| e.workspace == request.workspace && e.model == request.model && e.prefix == prefix)
    }

    fn readable(&self, request: &Request, prefix: u32) -> bool {
        self.find(request, prefix).is_some_and(|index| self.entries[index].readable(request.at_ms))
    }

    /// Prices one request and updates the cache.
    pub fn serve(&mut self, request: &Request) -> Predicted {
        let (positions, breakpoints) = self.positions(request);
        let total = positions.last().map_or(0, |p| p.tokens_end);
        let (hit, writes) = match self.policy {
            Policy::Anthropic => self.anthropic(request, &positions, &breakpoints),
            Policy::LongestPrefix => self.longest(request, &positions, &breakpoints),
        };
        // §2.1.7: A, B, C.
        let a = hit.map_or(0, |h| h.tokens);
        let b = writes.iter().filter(|w| w.2 == Ttl::Hour).map(|w| w.1).max().unwrap_or(a);
        let c = writes.last().map_or(a, |w| w.1);
        let ttft_ms = 400 + ((total - a) * 20).div_ceil(1_000);
        let visible_at = request.first_byte_ms.unwrap_or(request.at_ms + ttft_ms);
        // §2.1.8: refresh the matched entry, then write.
        if let Some(hit) = hit {
            let index = self.find(request, hit.prefix).expect("a hit has an entry");
            let entry = &mut self.entries[index];
            entry.expires_at = entry.expires_at.max(request.at_ms + entry.ttl.ms());
        }
        for &(prefix, _, ttl) in &writes {
            self.write(request, prefix, ttl, visible_at);
        }
        Predicted {
            read: a,
            write_1h: b - a,
            write_5m: c - b,
            uncached: total - c,
            total,
            ttft_ms,
            visible_at,
        }
    }

    /// §2.1.5–6: breakpoints long enough, last first, each checking its own prefix and then the
    /// 19 positions before its own. Writes: (prefix, tokens, ttl) for breakpoints beyond A.
    fn anthropic(
        &self,
        request: &Request,
        positions: &[Position],
        breakpoints: &[Breakpoint],
    ) -> (Option<Hit>, Vec<(u32, u64, Ttl)>) {
        let minimum = MODELS[request.model].min_tokens;
        let valid: Vec<&Breakpoint> = breakpoints.iter().filter(|bp| bp.tokens >= minimum).collect();
        let mut hit = None;
        'breakpoints: for bp in valid.iter().rev() {
            if self.readable(request, bp.prefix) {
                hit = Some(Hit { prefix: bp.prefix, tokens: bp.tokens });
                break;
            }
            for p in (bp.position.saturating_sub(19)..bp.position).rev() {
                if self.readable(request, positions[p].prefix) {
                    hit = Some(Hit { prefix: positions[p].prefix, tokens: positions[p].tokens_end });
                    break 'breakpoints;
                }
            }
        }
        let a = hit.map_or(0, |h| h.tokens);
        let writes =
            valid.iter().filter(|bp| bp.tokens > a).map(|bp| (bp.prefix, bp.tokens, bp.ttl)).collect();
        (hit, writes)
    }

    /// §2.2: the longest readable prefix; every later position written with the request's largest
    /// marker TTL (5m without markers).
    fn longest(
        &self,
        request: &Request,
        positions: &[Position],
        breakpoints: &[Breakpoint],
    ) -> (Option<Hit>, Vec<(u32, u64, Ttl)>) {
        let hit = positions
            .iter()
            .rev()
            .find(|p| self.readable(request, p.prefix))
            .map(|p| Hit { prefix: p.prefix, tokens: p.tokens_end });
        let ttl = breakpoints.iter().map(|bp| bp.ttl).max().unwrap_or(Ttl::Five);
        let a = hit.map_or(0, |h| h.tokens);
        let writes =
            positions.iter().filter(|p| p.tokens_end > a).map(|p| (p.prefix, p.tokens_end, ttl)).collect();
        (hit, writes)
    }

    /// A write creates the entry, or renews a live one keeping the earliest visibility and the
    /// longer TTL (the engine's documented choice).
    fn write(&mut self, request: &Request, prefix: u32, ttl: Ttl, visible_at: u64) {
        let now = request.at_ms;
        let fresh = Entry {
            workspace: request.workspace,
            model: request.model,
            prefix,
            ttl,
            expires_at: now + ttl.ms(),
            visible_at,
        };
        match self.find(request, prefix) {
            Some(index) if self.entries[index].expires_at > now => {
                let entry = &mut self.entries[index];
                entry.ttl = entry.ttl.max(ttl);
                entry.expires_at = entry.expires_at.max(now + entry.ttl.ms());
                entry.visible_at = entry.visible_at.min(visible_at);
            }
            Some(index) => self.entries[index] = fresh,
            None => self.entries.push(fresh),
        }
    }
}
