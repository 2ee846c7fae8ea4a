//! Rendering a request from where it parts from one of the last rendered for the same client.
//!
//! A client's next request repeats its conversation: the same tools and system, the same
//! messages, and a few new ones at the end (and, as the client moves its breakpoints, the last
//! message or two again with their markers changed). Every block's memo key is computed before
//! rendering (the readers of `serve` and the proxy take most of them from the last body,
//! replay's workers hash them), so the renderer can see, by comparing keys, how many whole
//! messages the request shares with each request it kept for that client. A [`RenderSketch`]
//! keeps, for each, what the prompt builder needs to go on from the end of any of its messages:
//! where it stood there ([`Checkpoint`]), how many of the breakpoints before it were the blocks'
//! own, and what the blocks before it told the salts.
//!
//! The prompt is the whole render's, position for position, because a prefix's positions depend
//! on nothing but its blocks (keys, roles, message boundaries) and what [`Frame`] and the salts
//! hold; the resumed path checks every one of them, and otherwise renders the whole request.
//! Breakpoints are the other thing a request does not share with the one it resumes from: the
//! blocks' own markers travel with their keys, but a top-level `cache_control` marks the last
//! eligible block, so the breakpoint it put in the kept request is left out of what this one
//! shares, and a request whose own automatic breakpoint would fall before the parting is
//! rendered whole. Anything the API would refuse is rendered whole as well, so every error is the
//! whole render's.

use std::collections::VecDeque;

use forkcache_wire::{ContentView, RequestView, Role};

use super::{
    BlockKeys, ImageRule, KeyFeed, Renderer, SaltFacts, apply_automatic_marker, build_messages, salts,
    tool_prompt_size, validate_breakpoints,
};
use super::{Item, ToolChanges, ToolPromptSize};
use crate::billing::ModelPrice;
use crate::prompt::common_len;
use crate::prompt::{Breakpoint, Checkpoint, Position, Prompt, PromptBuilder};

/// What [`Renderer::render_resumed`] keeps of the last requests it rendered for one client (one
/// `serve` connection; one server run of a replayed trace; a proxy's traffic), to render the
/// client's next request from where it parts from the one it shares most with. Its size grows
/// with those requests' blocks and messages ([`RenderSketch::heap_bytes`]).
#[derive(Debug)]
pub struct RenderSketch {
    /// Newest last.
    recent: VecDeque<Last>,
    capacity: usize,
    /// Past this many bytes ([`RenderSketch::heap_bytes`]) the oldest requests are forgotten, all
    /// but the newest.
    limit_bytes: usize,
}

impl Default for RenderSketch {
    /// A sketch of the last request alone.
    fn default() -> RenderSketch {
        RenderSketch::with_capacity(1)
    }
}

/// A sketch to keep a request rendered whole in, with the request's frame, the shapes of its
/// messages and its blocks' keys.
pub(super) struct Keep<'s> {
    pub(super) sketch: &'s mut RenderSketch,
    pub(super) frame: Frame,
    pub(super) shapes: &'s [(Role, usize)],
    pub(super) keys: &'s BlockKeys,
}

/// A request rendered.
#[derive(Debug, Default)]
struct Last {
    frame: Frame,
    /// Its blocks' memo keys, in render order: tools, system, then each message's.
    keys: Vec<u128>,
    /// Each message's role and where its keys end in `keys`.
    shapes: Vec<(Role, usize)>,
    /// The builder at each message's end.
    ends: Vec<MessageEnd>,
    prompt: Prompt,
    /// The index in `prompt.breakpoints` of the breakpoint a top-level `cache_control` added.
    automatic: Option<usize>,
}

impl Last {
    fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        size_of::<Last>()
            + self.keys.capacity() * size_of::<u128>()
            + self.shapes.capacity() * size_of::<(Role, usize)>()
            + self.ends.capacity() * size_of::<MessageEnd>()
            + self.prompt.positions.capacity() * size_of::<Position>()
            + self.prompt.breakpoints.capacity() * size_of::<Breakpoint>()
    }
}

/// What a prompt's positions depend on besides its blocks and its salts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Frame {
    /// The renderer's settings and tokenizer.
    renderer: u128,
    tool_prompt: ToolPromptSize,
    tool_changes: ToolChanges,
    /// Keys of the tools, then of the system blocks.
    tools: usize,
    system: usize,
}

impl Frame {
    pub(super) fn of(
        renderer: &Renderer,
        request: &RequestView,
        model: &ModelPrice,
        tool_changes: ToolChanges,
    ) -> Frame {
        Frame {
            renderer: renderer.fingerprint,
            tool_prompt: tool_prompt_size(request.tool_choice.as_ref(), model),
            tool_changes,
            tools: request.tools.len(),
            system: request.system.as_ref().map_or(0, content_len),
        }
    }

    /// Keys before the first message's.
    pub(super) fn head_keys(&self) -> usize {
        self.tools + self.system
    }
}

/// Where the builder stood at the end of one message.
#[derive(Clone, Copy, Debug)]
struct MessageEnd {
    checkpoint: Checkpoint,
    /// Breakpoints through the message that blocks' own markers made (not a top-level
    /// `cache_control`'s).
    own_breakpoints: usize,
    facts: SaltFacts,
}

/// Notes, while a prompt's items are built, where the builder stands at each message's end.
pub(super) struct EndLog {
    ends: Vec<MessageEnd>,
    /// The next message to end.
    next: usize,
    own_breakpoints: usize,
    facts: SaltFacts,
    /// The breakpoint a top-level `cache_control` made: its index among the prompt's breakpoints.
    automatic: Option<usize>,
}

impl EndLog {
    /// A log of a whole render of `items`, the items before the messages noted.
    pub(super) fn new(items: &[Item]) -> EndLog {
        let mut log = EndLog::from(0, 0, SaltFacts::default());
        let head = items.iter().take_while(|item| !matches!(item.slot, crate::prompt::Slot::Message { .. }));
        head.for_each(|item| log.note(item));
        log
    }

    fn from(next: usize, own_breakpoints: usize, facts: SaltFacts) -> EndLog {
        EndLog { ends: Vec::new(), next, own_breakpoints, facts, automatic: None }
    }

    /// One more item, in build order. Every marked item makes one breakpoint; the one the
    /// top-level `cache_control` marked comes after the blocks' own before it.
    pub(super) fn note(&mut self, item: &Item) {
        if item.automatic {
            self.automatic = Some(self.own_breakpoints);
        } else if item.info.marker.is_some() {
            self.own_breakpoints += 1;
        }
        self.facts = self.facts.with(&item.info);
    }

    /// Ends every message before `message` that has not ended yet, where `builder` stands.
    pub(super) fn end_messages_before(&mut self, message: usize, builder: &mut PromptBuilder) {
        while self.next < message {
            let end = MessageEnd {
                checkpoint: builder.checkpoint(),
                own_breakpoints: self.own_breakpoints,
                facts: self.facts,
            };
            self.ends.push(end);
            self.next += 1;
        }
    }
}

impl RenderSketch {
    /// A sketch of the last `requests` requests (at least one): a client that interleaves
    /// conversations (a parent and its forks, side requests) resumes each from its own.
    pub fn with_capacity(requests: usize) -> RenderSketch {
        RenderSketch { recent: VecDeque::new(), capacity: requests.max(1), limit_bytes: usize::MAX }
    }

    /// [`RenderSketch::with_capacity`], keeping at most `limit_bytes` (and always the newest
    /// request).
    pub fn with_limits(requests: usize, limit_bytes: usize) -> RenderSketch {
        RenderSketch { limit_bytes, ..RenderSketch::with_capacity(requests) }
    }

    /// A sketch for a stream in which several conversations interleave (a replayed trace, a
    /// proxy's traffic: a parent, its forks, side requests, sub-agents): the last 8 requests,
    /// within 32 MiB.
    pub fn interleaved() -> RenderSketch {
        RenderSketch::with_limits(8, 32 << 20)
    }

    /// Forgets every request: the next is rendered whole.
    pub fn clear(&mut self) {
        self.recent.clear();
    }

    /// Bytes it holds on the heap (capacities, not lengths: what it really keeps).
    pub fn heap_bytes(&self) -> usize {
        self.recent.iter().map(Last::heap_bytes).sum()
    }

    /// Adds `last` as the newest, forgetting the oldest past the limits.
    fn push(&mut self, last: Last) {
        self.recent.push_back(last);
        while self.recent.len() > self.capacity
            || (self.recent.len() > 1 && self.heap_bytes() > self.limit_bytes)
        {
            self.recent.pop_front();
        }
    }

    /// Keeps a request rendered whole, with the log of its build, in place of the oldest kept
    /// when the sketch is full (whose buffers it reuses).
    pub(super) fn keep(
        &mut self,
        frame: Frame,
        shapes: &[(Role, usize)],
        keys: &BlockKeys,
        log: EndLog,
        prompt: &Prompt,
    ) {
        // Keys that do not cover every block (fewer were given) cannot be compared.
        let covered = shapes.last().map_or(frame.head_keys(), |&(_, end)| end) == keys.0.len();
        if !covered {
            return;
        }
        debug_assert_eq!(log.ends.len(), shapes.len(), "one end per message");
        let mut last = match self.recent.len() >= self.capacity {
            true => self.recent.pop_front().unwrap_or_default(),
            false => Last::default(),
        };
        last.frame = frame;
        last.keys.clone_from(&keys.0);
        last.shapes.clear();
        last.shapes.extend_from_slice(shapes);
        last.automatic = log.automatic;
        last.ends = log.ends;
        last.prompt.clone_from(prompt);
        self.push(last);
    }
}

/// Each message's role and where its keys end, counted from `head` keys (the tools' and the
/// system's).
pub(super) fn shapes_of(request: &RequestView, head: usize) -> Vec<(Role, usize)> {
    let mut at = head;
    let messages = request.messages.iter().flatten();
    messages
        .map(|message| {
            at += content_len(&message.content);
            (message.role, at)
        })
        .collect()
}

/// Keys a content holds: one for a string, one per block.
fn content_len(content: &ContentView) -> usize {
    match content {
        ContentView::Text(_) => 1,
        ContentView::Blocks(blocks) => blocks.len(),
    }
}

/// How a request parts from one kept: whole messages shared, and the first key after them.
struct Parting<'l> {
    last: &'l Last,
    messages: usize,
    key: usize,
}

impl<'l> Parting<'l> {
    /// Where a request of `shapes` and `keys` parts from `last`: `None` unless they share their
    /// frame and at least one whole message (its role, its keys, where it ends).
    fn find(last: &'l Last, frame: &Frame, shapes: &[(Role, usize)], keys: &[u128]) -> Option<Parting<'l>> {
        if last.frame != *frame {
            return None;
        }
        // A message shared ends within the keys both share, so the tools and system are shared.
        let common = common_len(keys, &last.keys);
        let shared = |(new, old): &(&(Role, usize), &(Role, usize))| new == old && new.1 <= common;
        let messages = shapes.iter().zip(&last.shapes).take_while(shared).count();
        let key = shapes[..messages].last()?.1;
        Some(Parting { last, messages, key })
    }

    fn end(&self) -> &'l MessageEnd {
        &self.last.ends[self.messages - 1]
    }

    /// The kept request's breakpoints that this one shares: the blocks' own, up to the parting,
    /// leaving out the one its top-level `cache_control` added. (That one is not always the last:
    /// a block after the last eligible one, such as an ignored system block, may have its own.)
    fn breakpoints(&self) -> impl Iterator<Item = &'l Breakpoint> {
        let automatic = self.last.automatic;
        let own = self
            .last
            .prompt
            .breakpoints
            .iter()
            .enumerate()
            .filter(move |(index, _)| Some(*index) != automatic);
        own.map(|(_, breakpoint)| breakpoint).take(self.end().own_breakpoints)
    }

    /// The positions through the parting.
    fn positions(&self) -> &'l [Position] {
        &self.last.prompt.positions[..self.end().checkpoint.len() as usize]
    }
}

impl Renderer {
    /// The prompt of `request` (whose messages have `shapes`) built on from where it parts from
    /// the kept request it shares the most messages with, that request replaced by this one.
    /// `None`, the sketch left as it was, when none can be resumed from or the whole render must
    /// give its answer (an error).
    pub(super) fn resume(
        &mut self,
        request: &RequestView,
        keys: &BlockKeys,
        sketch: &mut RenderSketch,
        frame: &Frame,
        shapes: &[(Role, usize)],
        model: &ModelPrice,
    ) -> Option<Prompt> {
        // The most shared messages; of equals, the newest.
        let partings = sketch.recent.iter().enumerate().rev();
        let (index, parting) = partings
            .filter_map(|(index, last)| {
                Parting::find(last, frame, shapes, &keys.0).map(|parting| (index, parting))
            })
            .reduce(|best, next| if next.1.messages > best.1.messages { next } else { best })?;
        let mut tail = std::mem::take(&mut self.items);
        tail.clear();
        let resumed = self.resume_from(&parting, request, keys, &mut tail, model);
        self.items = tail;
        let (built, log) = resumed?;
        let (messages, key, head) = (parting.messages, parting.key, parting.positions().len());
        // Built on in place: the kept request's keys and positions up to the parting are this
        // one's.
        let mut last = sketch.recent.remove(index)?;
        last.keys.truncate(key);
        last.keys.extend_from_slice(&keys.0[key..]);
        last.shapes.clear();
        last.shapes.extend_from_slice(shapes);
        last.ends.truncate(messages);
        last.ends.extend(log.ends);
        last.automatic = log.automatic;
        let Prompt { positions, breakpoints, salts, first_after_tools, first_message } = built;
        last.prompt.positions.truncate(head);
        last.prompt.positions.extend_from_slice(&positions);
        last.prompt.breakpoints = breakpoints;
        last.prompt.salts = salts;
        last.prompt.first_after_tools = first_after_tools;
        last.prompt.first_message = first_message;
        let prompt = last.prompt.clone();
        sketch.push(last);
        Some(prompt)
    }

    /// The prompt's part after the parting (its positions from there on; every breakpoint, the
    /// salts) and the log of the messages after the parting, their items collected into `tail`.
    fn resume_from(
        &mut self,
        parting: &Parting,
        request: &RequestView,
        keys: &BlockKeys,
        tail: &mut Vec<Item>,
        model: &ModelPrice,
    ) -> Option<(Prompt, EndLog)> {
        let mut feed = KeyFeed(keys.0[parting.key..].iter());
        self.collect_messages(request, parting.messages, &mut feed, tail).ok()?;
        // Message blocks are never ignored or deferred; were one, the whole render decides.
        if tail.iter().any(|item| item.info.ignored || item.info.deferred) {
            return None;
        }
        let end = parting.end();
        let facts = tail.iter().fold(end.facts, |facts, item| facts.with(&item.info));
        let images_salt = self.config.image_rule == ImageRule::Documented;
        let facts = SaltFacts { images: facts.images && images_salt, ..facts };
        let salts = salts(request, model, facts, self.config.render_config_ahead);
        if salts != parting.last.prompt.salts {
            return None;
        }
        // The automatic breakpoint must fall after the parting, where it is built anew.
        if request.cache_control.is_some() && !tail.iter().any(|item| item.info.auto_eligible) {
            return None;
        }
        apply_automatic_marker(request, tail).ok()?;
        let head = parting.positions();
        let shared =
            parting.breakpoints().map(|breakpoint| (head[breakpoint.position as usize].slot, breakpoint.ttl));
        let own = tail.iter().filter_map(|item| item.info.marker.map(|ttl| (item.slot, ttl)));
        validate_breakpoints(shared.chain(own)).ok()?;
        let mut builder = PromptBuilder::resume(&end.checkpoint);
        let mut log = EndLog::from(parting.messages, end.own_breakpoints, end.facts);
        let messages = request.messages.as_ref().map_or(0, Vec::len);
        build_messages(&mut builder, tail, messages, Some(&mut log));
        let built = builder.finish();
        let mut breakpoints: Vec<Breakpoint> = parting.breakpoints().copied().collect();
        breakpoints.extend_from_slice(&built.breakpoints);
        Some((Prompt { breakpoints, salts, ..built }, log))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::billing::PriceTable;
    use crate::prompt::{BlockContext, PromptConfig, RenderCounts};
    use crate::tokenize::Bytes4;
    use forkcache_wire::{RawJson, parse_request};

    /// Block facts move to a renderer with the same settings and tokenizer, and are refused by
    /// one whose settings would give other facts (another identity mode).
    #[test]
    fn kept_blocks_move_only_between_renderers_that_render_alike() {
        let block =
            serde_json::value::RawValue::from_string(r#"{"type":"text","text":"rules"}"#.into()).unwrap();
        let mut first = Renderer::new(PromptConfig::default(), Box::new(Bytes4));
        let facts = first.block_info(RawJson::from(&*block), BlockContext::System, "system[0]").unwrap();
        assert_eq!(first.memo.len(), 1);
        let kept = first.keep_blocks();
        assert!(first.memo.is_empty(), "the memo moved out");
        let mut alike = Renderer::new(PromptConfig::default(), Box::new(Bytes4));
        alike.adopt_blocks(kept);
        assert_eq!(alike.memo.len(), 1);
        let again = alike.block_info(RawJson::from(&*block), BlockContext::System, "system[0]").unwrap();
        assert_eq!(again, facts);
        let wire = PromptConfig { identity: crate::prompt::IdentityMode::Wire, ..PromptConfig::default() };
        let mut other = Renderer::new(wire, Box::new(Bytes4));
        other.adopt_blocks(alike.keep_blocks());
        assert!(other.memo.is_empty(), "facts computed under other settings are not adopted");
    }

    /// After every render, the sketch holds that request: every block's key, each message's
    /// shape and end, and its prompt. A growing conversation whose breakpoint is a top-level
    /// `cache_control`'s is resumed at every turn after its first.
    #[test]
    fn the_sketch_holds_the_last_request_whole() {
        let prices = PriceTable::builtin();
        let model = &prices.resolve("claude-sonnet-4-6").price;
        let mut renderer = Renderer::new(PromptConfig::default(), Box::new(Bytes4));
        let mut sketch = RenderSketch::default();
        let mut messages = Vec::new();
        for turn in 0..6 {
            if turn > 0 {
                messages.push(serde_json::json!({"role": "assistant", "content": format!("answer {turn}")}));
            }
            messages.push(serde_json::json!({"role": "user", "content": format!("question {turn}")}));
            let body = serde_json::json!({"model": "claude-sonnet-4-6", "max_tokens": 8,
                "system": [{"type": "text", "text": "rules", "cache_control": {"type": "ephemeral"}}],
                "messages": messages, "cache_control": {"type": "ephemeral"}})
            .to_string();
            let view = parse_request(body.as_bytes()).unwrap();
            let keys = BlockKeys::of(&view);
            let prompt =
                renderer.render_resumed(&view, &keys, &mut sketch, model, ToolChanges::Invalidate).unwrap();
            let last = sketch.recent.back().unwrap();
            assert_eq!(last.keys, keys.0);
            assert_eq!((last.shapes.len(), last.ends.len()), (messages.len(), messages.len()));
            assert_eq!(last.shapes.last().map(|&(_, end)| end), Some(keys.0.len()));
            assert_eq!(last.prompt, prompt);
            assert_eq!(last.ends.last().unwrap().checkpoint.len() as usize, prompt.positions.len());
            // The system block's own breakpoint, then the automatic one on the question.
            assert_eq!((prompt.breakpoints.len(), last.ends.last().unwrap().own_breakpoints), (2, 1));
            assert_eq!(last.automatic, Some(1));
        }
        assert_eq!(renderer.counts(), RenderCounts { whole: 1, resumed: 5 });
    }

    /// Two conversations interleaved: a sketch of one request resumes neither (each request
    /// parts from the other conversation's at its first message), a sketch of two resumes each
    /// from its own.
    #[test]
    fn a_sketch_of_two_requests_resumes_two_interleaved_conversations() {
        let prices = PriceTable::builtin();
        let model = &prices.resolve("claude-sonnet-4-6").price;
        let resumed_with = |capacity| {
            let mut renderer = Renderer::new(PromptConfig::default(), Box::new(Bytes4));
            let mut sketch = RenderSketch::with_capacity(capacity);
            for turn in 0..4 {
                for conversation in ["first", "second"] {
                    let messages: Vec<serde_json::Value> = (0..=turn)
                        .map(
                            |t| serde_json::json!({"role": "user", "content": format!("{conversation} {t}")}),
                        )
                        .collect();
                    let body = serde_json::json!({"model": "claude-sonnet-4-6", "max_tokens": 8, "messages": messages})
                        .to_string();
                    let view = parse_request(body.as_bytes()).unwrap();
                    let keys = BlockKeys::of(&view);
                    renderer
                        .render_resumed(&view, &keys, &mut sketch, model, ToolChanges::Invalidate)
                        .unwrap();
                }
            }
            (renderer.counts().resumed, sketch.recent.len())
        };
        assert_eq!(resumed_with(1), (0, 1));
        // Turns 1 to 3 of each conversation.
        assert_eq!(resumed_with(2), (6, 2));
    }
}
