//! Seeded conversation generator: user prompts, assistant replies with tool calls, tool results.
//!
//! Every stream is a `ChaCha8Rng` derived from (seed, stable id), so adding a draw in one place
//! (a fork child's loop) never reshuffles another (the parent's history).

use std::collections::BTreeMap;

use rand::{RngExt as _, SeedableRng as _};
use rand_chacha::ChaCha8Rng;
use serde_json::json;
use xxhash_rust::xxh3::xxh3_64;

use super::spec::{ContentMode, GenerateSpec, Range};
use crate::agent::{Block, BlockKind, BlockRef, Message, result_stub, tool_use_id, with_tokens};

/// The RNG of one subsystem or agent: the run's seed, on the stream named `id`.
pub fn stream(seed: u64, id: &str) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(xxh3_64(id.as_bytes()));
    rng
}

/// Draws conversation pieces for one agent.
pub struct Generator {
    spec: GenerateSpec,
    rng: ChaCha8Rng,
    label: String,
    calls: u64,
    /// When a result is at least this large it gets a stub the replacement budget may use.
    stub_from_tokens: Option<u64>,
}

const WORDS: [&str; 32] = [
    "cache",
    "prefix",
    "fork",
    "agent",
    "tool",
    "result",
    "token",
    "request",
    "system",
    "message",
    "byte",
    "block",
    "parent",
    "child",
    "directive",
    "history",
    "write",
    "read",
    "entry",
    "scope",
    "model",
    "turn",
    "file",
    "test",
    "build",
    "error",
    "patch",
    "source",
    "module",
    "config",
    "branch",
    "commit",
];

impl Generator {
    /// A generator for agent `label` on the stream `(seed, label)`.
    pub fn new(spec: &GenerateSpec, seed: u64, label: &str, stub_from_tokens: Option<u64>) -> Generator {
        Generator {
            spec: spec.clone(),
            rng: stream(seed, label),
            label: label.to_string(),
            calls: 0,
            stub_from_tokens,
        }
    }

    fn draw(&mut self, range: Range) -> u64 {
        self.rng.random_range(range[0]..=range[1])
    }

    /// A text block of `tokens` tokens, declared or written out.
    pub fn text(&mut self, what: &str, tokens: u64) -> BlockRef {
        match self.spec.content {
            ContentMode::Declared => {
                Block::text(&format!("[{} {what}: {tokens} tokens]", self.label), Some(tokens))
            }
            ContentMode::Filler => Block::text(&self.filler(tokens), None),
        }
    }

    fn filler(&mut self, tokens: u64) -> String {
        // {"type":"text","text":""} is 25 bytes; bytes4 counts ⌈bytes / 4⌉.
        let target = (tokens * 4).saturating_sub(25) as usize;
        let mut text = String::with_capacity(target + 16);
        while text.len() < target {
            text.push_str(WORDS[self.rng.random_range(0..WORDS.len())]);
            text.push(' ');
        }
        text.truncate(target);
        text
    }

    /// A user prompt.
    pub fn user_prompt(&mut self) -> Message {
        let tokens = self.draw(self.spec.user_tokens);
        Message::user(vec![self.text("user prompt", tokens)])
    }

    fn tool_name(&mut self) -> String {
        let total: u32 = self.spec.tool_mix.values().sum();
        if total == 0 {
            return "Read".into();
        }
        let mut pick = self.rng.random_range(0..total);
        for (name, weight) in &self.spec.tool_mix {
            if pick < *weight {
                return name.clone();
            }
            pick -= weight;
        }
        unreachable!("pick < total")
    }

    /// A `tool_use` block with a deterministic id.
    pub fn tool_use(&mut self) -> BlockRef {
        self.calls += 1;
        let name = self.tool_name();
        let tokens = self.draw(self.spec.tool_use_tokens);
        let id = format!("toolu_{}_{:04}", self.label.replace([' ', '.'], "_"), self.calls);
        let input =
            json!({"path": format!("src/{}_{}.rs", WORDS[self.calls as usize % WORDS.len()], self.calls)});
        let declared = (self.spec.content == ContentMode::Declared).then_some(tokens);
        Block::from_value(&with_tokens(
            json!({"type": "tool_use", "id": id, "name": name, "input": input}),
            declared,
        ))
    }

    /// An assistant reply: a text block and drawn tool calls; with `blocks`, that many blocks
    /// alternating text and `tool_use` (so none collapse into one position).
    pub fn reply(&mut self, blocks: Option<u32>) -> Message {
        let text_tokens = self.draw(self.spec.assistant_tokens);
        let mut content = vec![self.text("assistant text", text_tokens)];
        match blocks {
            None => {
                let calls = self.draw(self.spec.tool_calls);
                content.extend((0..calls).map(|_| self.tool_use()));
            }
            Some(count) => {
                for index in 1..count {
                    let block = if index % 2 == 1 { self.tool_use() } else { self.text("note", 20) };
                    content.push(block);
                }
            }
        }
        Message::assistant(content)
    }

    /// The user message answering `reply`: its tool results, or a new prompt when it called none.
    pub fn answer(&mut self, reply: &Message) -> Message {
        let ids: Vec<String> =
            reply.blocks.iter().filter(|b| b.kind == BlockKind::ToolUse).filter_map(tool_use_id).collect();
        if ids.is_empty() {
            return self.user_prompt();
        }
        Message::user(ids.iter().map(|id| self.tool_result(id)).collect())
    }

    /// One tool result; large ones carry a stub for the replacement budget.
    pub fn tool_result(&mut self, id: &str) -> BlockRef {
        let tokens = self.draw(self.spec.tool_result_tokens);
        let declared = (self.spec.content == ContentMode::Declared).then_some(tokens);
        let content = match self.spec.content {
            ContentMode::Declared => format!("[{} output: {tokens} tokens]", self.label),
            ContentMode::Filler => self.filler(tokens),
        };
        let block = Block::from_value(&with_tokens(
            json!({"type": "tool_result", "tool_use_id": id, "content": content}),
            declared,
        ));
        match self.stub_from_tokens {
            Some(min) if block.tokens >= min => Block::with_stub(block, result_stub(id, 60)),
            _ => block,
        }
    }

    /// A whole history of `turns` steps: `u0 a0 u1 a1 … u_turns`, ending with a user message.
    pub fn history(&mut self, turns: u32) -> Vec<Message> {
        let mut messages = vec![self.user_prompt()];
        for _ in 0..turns {
            let reply = self.reply(None);
            let answer = self.answer(&reply);
            messages.push(reply);
            messages.push(answer);
        }
        messages
    }
}

/// Tokens of a message's blocks.
fn message_tokens(message: &Message) -> u64 {
    message.blocks.iter().map(|block| block.tokens).sum()
}

impl Generator {
    /// A history grown step by step until its blocks hold at least `target_tokens` (the first
    /// step that reaches it is the last), ending with a user message; at most `max_turns` steps.
    /// `None` when `max_turns` steps fall short.
    pub fn history_to(&mut self, target_tokens: u64, max_turns: u32) -> Option<Vec<Message>> {
        let mut messages = vec![self.user_prompt()];
        let mut tokens = message_tokens(&messages[0]);
        for _ in 0..max_turns {
            if tokens >= target_tokens {
                return Some(messages);
            }
            let reply = self.reply(None);
            let answer = self.answer(&reply);
            tokens += message_tokens(&reply) + message_tokens(&answer);
            messages.push(reply);
            messages.push(answer);
        }
        (tokens >= target_tokens).then_some(messages)
    }
}

/// Tool mix weights as a sorted map (for callers building a spec programmatically).
pub fn tool_mix(pairs: &[(&str, u32)]) -> BTreeMap<String, u32> {
    pairs.iter().map(|(name, weight)| (name.to_string(), *weight)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng as _;

    #[test]
    fn the_rng_stream_is_pinned() {
        // Value stability: the first draw of (seed 0, "history") must never change, or every
        // generated fixture's numbers would silently move.
        let first = stream(0, "history").next_u64();
        assert_eq!(first, stream(0, "history").next_u64());
        assert_ne!(first, stream(0, "turns").next_u64());
        assert_eq!(first, 0x9744_9fb2_2282_7768, "{first:#x}");
    }

    /// Steps of exactly 300 tokens: a 200-token reply with no tool call, then a 100-token prompt.
    fn fixed_steps(content: ContentMode) -> GenerateSpec {
        GenerateSpec {
            user_tokens: [100, 100],
            assistant_tokens: [200, 200],
            tool_calls: [0, 0],
            content,
            ..GenerateSpec::default()
        }
    }

    fn total(messages: &[Message]) -> u64 {
        messages.iter().map(message_tokens).sum()
    }

    #[test]
    fn a_history_grows_to_its_target_and_no_further() {
        for content in [ContentMode::Declared, ContentMode::Filler] {
            let spec = fixed_steps(content);
            // 100 (the first prompt) + 3 × 300 = 1,000: exactly the target, three steps.
            let exact = Generator::new(&spec, 1, "history", None).history_to(1_000, 100).unwrap();
            assert_eq!((exact.len(), total(&exact)), (7, 1_000), "{content:?}");
            // One token more takes a fourth step: 100 + 4 × 300 = 1,300.
            let over = Generator::new(&spec, 1, "history", None).history_to(1_001, 100).unwrap();
            assert_eq!((over.len(), total(&over)), (9, 1_300), "{content:?}");
            assert_eq!(over.last().unwrap().role, forkcache_wire::Role::User);
        }
        // Filler text is sized for bytes4: a 100-token prompt's block is 4 × 100 = 400 bytes of
        // JSON, ⌈400 / 4⌉ = 100 tokens.
        let spec = fixed_steps(ContentMode::Filler);
        let prompt = Generator::new(&spec, 1, "history", None).user_prompt();
        assert_eq!(prompt.blocks[0].json().to_string().len(), 400);
        // Two steps cannot reach 1,000 tokens: 100 + 2 × 300 = 700.
        assert!(Generator::new(&spec, 1, "history", None).history_to(1_000, 2).is_none());
    }

    #[test]
    fn histories_end_with_a_user_message_and_repeat_per_seed() {
        let spec = GenerateSpec::default();
        let a = Generator::new(&spec, 7, "history", None).history(5);
        let b = Generator::new(&spec, 7, "history", None).history(5);
        assert_eq!(a.len(), 11);
        assert_eq!(a.last().unwrap().role, forkcache_wire::Role::User);
        let bytes = |m: &[Message]| {
            m.iter().flat_map(|m| m.blocks.iter().map(|b| b.json().to_string())).collect::<Vec<_>>()
        };
        assert_eq!(bytes(&a), bytes(&b));
    }
}
