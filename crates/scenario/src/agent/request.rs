//! One request an agent sends: shared system and tools, a shared message head and a private
//! tail, and where its cache markers go. It becomes either a borrowed [`RequestView`] (no body
//! is serialized: the endpoint reads the blocks' bytes in place) or, when bytes are needed, the
//! full body.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::sync::Arc;

use forkcache_engine::prompt::Ttl;
use forkcache_engine::verify::{Loc, Segment};
use forkcache_wire::{ContentView, MessageView, RawJson, RequestView, Thinking};

use super::block::{BlockRef, Message};

/// The `thinking` parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThinkingConfig {
    /// `{"type":"enabled","budget_tokens":N}`.
    Enabled {
        /// The budget.
        budget_tokens: u64,
    },
    /// `{"type":"adaptive"}`.
    Adaptive,
}

impl ThinkingConfig {
    /// The parameter as the wire view holds it.
    pub fn wire(self) -> Thinking {
        match self {
            ThinkingConfig::Enabled { budget_tokens } => {
                Thinking { kind: "enabled".into(), budget_tokens: Some(budget_tokens) }
            }
            ThinkingConfig::Adaptive => Thinking { kind: "adaptive".into(), budget_tokens: None },
        }
    }

    fn json(self) -> String {
        match self {
            ThinkingConfig::Enabled { budget_tokens } => {
                format!(r#"{{"type":"enabled","budget_tokens":{budget_tokens}}}"#)
            }
            ThinkingConfig::Adaptive => r#"{"type":"adaptive"}"#.to_string(),
        }
    }

    /// The config a request with `max_tokens` ends up sending: an enabled budget must stay below
    /// `max_tokens`, so a smaller output limit clamps it (and changes the cache key).
    pub fn clamped_to(self, max_tokens: u64) -> ThinkingConfig {
        match self {
            ThinkingConfig::Enabled { budget_tokens } => {
                ThinkingConfig::Enabled { budget_tokens: budget_tokens.min(max_tokens.saturating_sub(1)) }
            }
            adaptive => adaptive,
        }
    }
}

/// Where a cache marker goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mark {
    /// `system[i]`.
    System(u32),
    /// `messages[m].content[b]`, counted over head and tail together.
    Message(u32, u32),
}

/// One request, ready to be viewed or rendered.
#[derive(Clone, Debug)]
pub struct AgentRequest {
    /// `model`.
    pub model: String,
    /// `max_tokens`.
    pub max_tokens: u64,
    /// `thinking`.
    pub thinking: Option<ThinkingConfig>,
    /// `system` blocks.
    pub system: Arc<Vec<BlockRef>>,
    /// `tools`.
    pub tools: Arc<Vec<BlockRef>>,
    /// Messages shared with other requests (a parent's history).
    pub head: Arc<Vec<Message>>,
    /// Messages of this request alone.
    pub tail: Vec<Message>,
    /// Cache markers, sorted.
    pub marks: Vec<Mark>,
    /// The markers' TTL.
    pub ttl: Ttl,
}

impl AgentRequest {
    /// The request in cache order, borrowing its shared blocks (stored without markers), so
    /// siblings that share a block compare it by address.
    pub fn segments(&self) -> Vec<Segment<'_>> {
        let mut out = vec![Segment::model(&self.model)];
        out.extend(
            self.tools.iter().enumerate().map(|(i, b)| Segment::borrowed(Loc::Tool(i as u32), b.json())),
        );
        out.extend(
            self.system.iter().enumerate().map(|(i, b)| Segment::borrowed(Loc::System(i as u32), b.json())),
        );
        let thinking = self.thinking.map(|t| t.wire());
        out.push(Segment::config(thinking.as_ref(), &RequestView::default()));
        for (index, message) in self.messages().enumerate() {
            let m = index as u32;
            out.push(Segment::role(m, message.role.as_str()));
            let blocks = message.blocks.iter().enumerate();
            out.extend(blocks.map(|(b, block)| Segment::borrowed(Loc::Block(m, b as u32), block.json())));
        }
        out
    }

    /// Every message, head then tail.
    pub fn messages(&self) -> impl Iterator<Item = &Message> {
        self.head.iter().chain(self.tail.iter())
    }

    /// Number of messages.
    pub fn message_count(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    /// The last message.
    pub fn last_message(&self) -> Option<&Message> {
        self.tail.last().or_else(|| self.head.last())
    }

    /// Declared or estimated tokens of tools, system and messages (without the hidden tool prompt).
    pub fn tokens_estimate(&self) -> u64 {
        let blocks = |b: &[BlockRef]| b.iter().map(|b| b.tokens).sum::<u64>();
        blocks(&self.tools) + blocks(&self.system) + self.messages().map(Message::tokens).sum::<u64>()
    }

    /// Marks the last block of the last message.
    pub fn mark_last_block(&mut self) {
        let count = self.message_count();
        if let Some(last) = self.last_message().filter(|m| !m.blocks.is_empty()) {
            self.marks.push(Mark::Message(count as u32 - 1, last.blocks.len() as u32 - 1));
            self.marks.sort();
            self.marks.dedup();
        }
    }

    fn marker(&self, mark: Mark) -> Option<Ttl> {
        self.marks.binary_search(&mark).ok().map(|_| self.ttl)
    }

    fn system_raw(&self) -> Vec<RawJson<'_>> {
        self.system.iter().enumerate().map(|(i, b)| b.raw(self.marker(Mark::System(i as u32)))).collect()
    }

    fn message_raw<'s>(&'s self, index: usize, message: &'s Message) -> Vec<RawJson<'s>> {
        let mark = |b: usize| self.marker(Mark::Message(index as u32, b as u32));
        message.blocks.iter().enumerate().map(|(b, block)| block.raw(mark(b))).collect()
    }

    /// The request as the endpoint reads it, borrowing every block in place.
    pub fn view(&self) -> RequestView<'_> {
        let messages = self
            .messages()
            .enumerate()
            .map(|(index, message)| MessageView {
                role: message.role,
                content: ContentView::Blocks(self.message_raw(index, message)),
            })
            .collect();
        RequestView {
            model: Some(Cow::Borrowed(&self.model)),
            max_tokens: Some(self.max_tokens),
            messages: Some(messages),
            system: (!self.system.is_empty()).then(|| ContentView::Blocks(self.system_raw())),
            tools: self.tools.iter().map(|b| b.raw(None)).collect(),
            thinking: self.thinking.map(ThinkingConfig::wire),
            ..RequestView::default()
        }
    }

    /// The full body, compact JSON: what [`AgentRequest::view`] stands for, byte for byte.
    pub fn body(&self) -> String {
        let mut out = String::with_capacity(1024);
        out.push('{');
        let _ = write!(out, "\"model\":{},", json_string(&self.model));
        let _ = write!(out, "\"max_tokens\":{}", self.max_tokens);
        if let Some(thinking) = self.thinking {
            let _ = write!(out, ",\"thinking\":{}", thinking.json());
        }
        if !self.system.is_empty() {
            out.push_str(",\"system\":");
            push_array(&mut out, self.system_raw());
        }
        if !self.tools.is_empty() {
            out.push_str(",\"tools\":");
            push_array(&mut out, self.tools.iter().map(|b| b.raw(None)).collect());
        }
        out.push_str(",\"messages\":[");
        for (index, message) in self.messages().enumerate() {
            if index > 0 {
                out.push(',');
            }
            let _ = write!(out, "{{\"role\":\"{}\",\"content\":", message.role.as_str());
            push_array(&mut out, self.message_raw(index, message));
            out.push('}');
        }
        out.push_str("]}");
        out
    }
}

#[allow(clippy::expect_used)] // serializing a string cannot fail
fn json_string(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}

fn push_array(out: &mut String, items: Vec<RawJson>) {
    out.push('[');
    for (index, item) in items.into_iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        out.push_str(item.get());
    }
    out.push(']');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::block::Block;

    #[test]
    fn body_marks_exactly_the_marked_blocks() {
        let mut request = AgentRequest {
            model: "m".into(),
            max_tokens: 10,
            thinking: Some(ThinkingConfig::Enabled { budget_tokens: 5 }),
            system: Arc::new(vec![Block::text("s", None)]),
            tools: Arc::new(Vec::new()),
            head: Arc::new(vec![Message::user(vec![Block::text("a", None)])]),
            tail: vec![Message::assistant(vec![Block::text("b", None)])],
            marks: vec![Mark::System(0)],
            ttl: Ttl::FiveMinutes,
        };
        request.mark_last_block();
        assert_eq!(
            request.body(),
            r#"{"model":"m","max_tokens":10,"thinking":{"type":"enabled","budget_tokens":5},"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"a"}]},{"role":"assistant","content":[{"type":"text","text":"b","cache_control":{"type":"ephemeral"}}]}]}"#
        );
    }

    #[test]
    fn a_smaller_output_limit_clamps_the_thinking_budget() {
        let thinking = ThinkingConfig::Enabled { budget_tokens: 16_000 };
        assert_eq!(thinking.clamped_to(8_000), ThinkingConfig::Enabled { budget_tokens: 7_999 });
        assert_eq!(thinking.clamped_to(32_000), thinking);
    }
}
