//! Reading a trace line, or a request body as a server receives it, from where it parts from a
//! recent one.
//!
//! An agent's requests repeat their conversation: each body is an earlier one's history plus a
//! turn, so most of an agent's trace is bytes a reader has already read. A [`LineReader`] keeps
//! a [`Sketch`] of the last few request bodies it read — where each element of `messages` ends
//! and what it holds, where the `tools` and `system` members lie and what they hold — and reads a
//! new body by comparing its bytes with a sketched body's instead of parsing them:
//!
//! - the messages inside the longest prefix the body shares with a recent body (the same
//!   offsets from the body's start) are taken from that body's sketch;
//! - a `tools` or `system` member whose bytes, key included, equal a recent body's is taken
//!   from its sketch, wherever it stands in the body;
//! - everything else is parsed as the one-pass read parses it: the line's and the body's
//!   objects and the `messages` array are walked here, and each value in them is read by
//!   serde_json, at its offset, into the same types (`LineParts::read_member`,
//!   `RequestView::read_member`); a key is read here when it has no escape or control character
//!   (what serde_json would return for it), else by serde_json too.
//!
//! The result is the one-pass read's, field for field. A value's bytes decide its parse, so equal
//! bytes read the same, and a JSON parse depends on nothing before it but the structure it is in:
//! a prefix equal to a body already read leaves the parse in the state that body's parse was in
//! at the same offset; a member equal to one already read is a whole `"key": value` that
//! serde_json read, and the walk checks the byte after it as it checks any other. A value read
//! at its own offset has up to three more levels of serde_json's nesting limit to spend than in
//! place (the line, the body, `messages` are not around it), which changes nothing because that
//! limit applies only to values serde_json builds, never to one it skips or keeps raw (content
//! blocks, tools, unknown members), and what the reader builds nests a few levels at most — save
//! a session marker's settings, a JSON tree, so the reader leaves marker lines to the one-pass
//! read. (A recursive type such as `serde_json::Value` added to the fields read here would break
//! this; `tests/it/resume_reader.rs` nests every member near the limit to catch it.) A line the
//! reader does not expect (not an object, malformed anywhere, a session marker) is read the
//! one-pass way, so every error and every unreadable line keeps its message.
//!
//! A [`BodyReader`] walks a bare body the same way, for `serve`: one per connection, resumed from
//! the connection's last body. The members the view does not read go to its caller, which type-
//! checks them as the server's one-pass check does (a value it builds is a number, a string, a
//! list of strings or a map of ignored values: it nests no deeper than the view's). A body it
//! cannot take, or whose member the caller refuses, is left to the one-pass read and check.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use serde::Deserialize;
use serde::de::IgnoredAny;

use forkcache_engine::prompt::common_len;
use forkcache_engine::prompt::{BlockContext, BlockKeys, content_keys, tool_keys};
use forkcache_wire::check::CheckMemo;
use forkcache_wire::{ContentView, MemberValues, MessageView, RawJson, RequestView, Role};

use super::{BatchLine, LineBatch, LineParts, ParsedBatch, PooledBytes, TraceBody, TraceEntry};

/// Request bodies a reader keeps sketches of, at most: enough to find a body's own conversation
/// among a few interleaved ones (a parent, its forks, a side request).
const RECENT_BODIES: usize = 8;

/// Bytes of batches the readers of one replay keep for their sketches, together: each of `n`
/// readers keeps its sketches' batches within a `n`th of it (and always its newest body's).
pub const SKETCH_BUDGET_BYTES: usize = 16 << 20;

/// Reads lines, each resumed from the recent body it shares the longest prefix with. One per
/// worker thread: what it returns never depends on the lines it saw before (see the module
/// documentation), only how fast it returns it. It keeps the batches of its last few request
/// bodies (at most eight, within its budget) from going back to their pool.
pub struct LineReader {
    /// Newest last.
    recent: VecDeque<Sketch>,
    budget_bytes: usize,
    /// The blocks this reader's lines showed passing the API's rules; none when they are not
    /// checked.
    checked: Option<CheckMemo>,
}

impl Default for LineReader {
    /// A reader with the whole [`SKETCH_BUDGET_BYTES`].
    fn default() -> LineReader {
        LineReader::new(SKETCH_BUDGET_BYTES)
    }
}

impl LineReader {
    /// A reader keeping at most `budget_bytes` of batches for its sketches.
    pub fn new(budget_bytes: usize) -> LineReader {
        LineReader { recent: VecDeque::new(), budget_bytes, checked: Some(CheckMemo::default()) }
    }

    /// This reader, checking with `memo` (shared with the other workers of one replay, which read
    /// the lines between its own), or not checking the API's rules at all.
    pub fn sharing_checks(self, memo: Option<CheckMemo>) -> LineReader {
        LineReader { checked: memo, ..self }
    }

    /// Reads every line of `batch` and hashes its requests' blocks: what
    /// [`ParsedBatch::parse`] returns, read faster.
    pub fn parse(&mut self, batch: LineBatch) -> ParsedBatch {
        // A handle of its own (the memo is shared): the reading below borrows the reader.
        let memo = self.checked.clone();
        ParsedBatch::new(batch, |batch| {
            let read = |number, text| {
                let at = offset_in(batch.bytes(), text);
                self.read(&batch.bytes, at, number, text)
            };
            let lines = super::read_lines_with(batch.bytes(), batch.first_line, read, |line| {
                (TraceEntry::Unreadable(line), None)
            });
            lines.map(|((entry, keys), bytes)| BatchLine::keyed(entry, bytes, keys, memo.as_ref())).collect()
        })
    }

    /// One line (UTF-8, not blank), which starts at `at` in `bytes`, and its blocks' keys when
    /// the walk gathered them.
    fn read<'a>(
        &mut self,
        bytes: &Arc<PooledBytes>,
        at: usize,
        number: usize,
        text: &'a str,
    ) -> (TraceEntry<'a>, Option<BlockKeys>) {
        let Some((entry, drawn)) = self.walk(text, number) else {
            return (super::read_line(number, text), None);
        };
        let Some(drawn) = drawn else { return (entry, None) };
        let keys = drawn.keys();
        let body = at + drawn.start..at + drawn.start + drawn.len;
        self.remember(Sketch { bytes: Kept::Batch(Arc::clone(bytes)), body, drawn });
        (entry, Some(keys))
    }

    /// Keeps `sketch`, forgetting the oldest ones past [`RECENT_BODIES`] or the budget.
    fn remember(&mut self, sketch: Sketch) {
        self.recent.push_back(sketch);
        while self.recent.len() > RECENT_BODIES
            || (self.recent.len() > 1 && self.kept_bytes() > self.budget_bytes)
        {
            self.recent.pop_front();
        }
    }

    /// The capacity of the batches the sketches keep (the bodies of one batch are neighbours).
    fn kept_bytes(&self) -> usize {
        let mut previous: Option<&Arc<PooledBytes>> = None;
        let mut kept = 0;
        for sketch in &self.recent {
            let Kept::Batch(batch) = &sketch.bytes else { continue };
            if !previous.is_some_and(|previous| Arc::ptr_eq(previous, batch)) {
                kept += batch.bytes.capacity();
            }
            previous = Some(batch);
        }
        kept
    }

    /// The line read by walking it, with the sketch of its request body (none when it carries no
    /// parsed request, or a value of it could not be sketched); `None` when the line is not what
    /// the walk expects.
    fn walk<'a>(&self, text: &'a str, number: usize) -> Option<(TraceEntry<'a>, Option<Drawn>)> {
        let mut walk = Walk { text, pos: skip_ws(text, 0) };
        let mut parts = LineParts::default();
        let mut top = Drawing::new(walk.pos, self.base(text, walk.pos));
        let mut nested = None;
        walk.object(|walk| {
            if top.reuse_member(walk, &mut parts.request) {
                parts.request_fields = true;
                return Some(());
            }
            let key_at = walk.pos;
            let key = walk.key()?;
            match &*key {
                // Its settings are a JSON tree, built under serde_json's nesting limit.
                "forkcache_session" => None,
                "body" if walk.peek()? == b'{' => {
                    let (view, drawn) = self.body(walk)?;
                    parts.body = Some(TraceBody::Parsed(Box::new(view)));
                    nested = Some(drawn);
                    Some(())
                }
                key if is_sketched(key) => {
                    parts.request_fields = true;
                    walk.request_member(key, key_at, &mut parts.request, &mut top)
                }
                key => parts.read_member(key, &mut walk.values()).ok(),
            }
        })?;
        if skip_ws(text, walk.pos) != text.len() {
            return None;
        }
        let enveloped = parts.body.is_some();
        let entry = parts.into_entry(number).unwrap_or_else(TraceEntry::Unreadable);
        let parsed = matches!(&entry, TraceEntry::Request(line) if matches!(line.body, TraceBody::Parsed(_)));
        let drawn = match (parsed, enveloped) {
            (false, _) => None,
            (true, true) => nested.flatten(),
            (true, false) => top.finish(walk.pos),
        };
        Some((entry, drawn))
    }

    /// An envelope's object `body`, at the walk's position.
    fn body<'a>(&self, walk: &mut Walk<'a>) -> Option<(RequestView<'a>, Option<Drawn>)> {
        let base = self.base(walk.text, walk.pos);
        body_object(walk, base, skip_member)
    }

    /// The recent body sharing the longest prefix with the body at `start` of `text`, and that
    /// prefix's length. (On an envelope line the walk asks this at the line's start too, before
    /// it knows the line is an envelope; the comparisons stop at the first bytes there.)
    fn base(&self, text: &str, start: usize) -> Option<Base<'_>> {
        base_among(self.recent.iter().rev(), text, start)
    }
}

/// Bytes that the connections sharing one [`BodyBudget`] keep of their last requests, together,
/// by default.
pub const BODY_BUDGET_BYTES: usize = 64 << 20;

/// What the connections of one server may keep of their last requests, together: the bodies
/// their [`BodyReader`]s read, and (`serve`'s) the prompts' render sketches. Past it a reader
/// keeps nothing, and its next body is read in one pass; a sketch is dropped, and the next prompt
/// rendered whole.
#[derive(Clone, Debug)]
pub struct BodyBudget {
    limit: usize,
    kept: Arc<AtomicUsize>,
}

impl BodyBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: usize) -> BodyBudget {
        BodyBudget { limit, kept: Arc::new(AtomicUsize::new(0)) }
    }

    /// Bytes kept now, by every reader of this budget.
    pub fn kept(&self) -> usize {
        self.kept.load(Ordering::Relaxed)
    }

    /// Takes `bytes` of the budget; false (nothing taken) when they do not fit.
    pub fn take(&self, bytes: usize) -> bool {
        let before = self.kept.fetch_add(bytes, Ordering::Relaxed);
        if before + bytes > self.limit {
            self.give_back(bytes);
            return false;
        }
        true
    }

    /// Gives back `bytes` taken before.
    pub fn give_back(&self, bytes: usize) {
        self.kept.fetch_sub(bytes, Ordering::Relaxed);
    }
}

/// Reads request bodies as a server receives them (a whole body, no envelope), each resumed
/// from the last body it read, as a [`LineReader`] reads lines: one per connection, since a
/// client's next request on a connection is mostly its last one's history. It keeps the last
/// body it read (within its [`BodyBudget`]) until the next one or its drop.
pub struct BodyReader {
    last: Option<Sketch>,
    budget: BodyBudget,
}

impl BodyReader {
    /// A reader keeping its bodies within `budget`.
    pub fn new(budget: BodyBudget) -> BodyReader {
        BodyReader { last: None, budget }
    }

    /// The request in `body` (whose text is `text`, the same bytes) and its blocks' keys, as
    /// [`forkcache_wire::parse_request_str`] and [`BlockKeys::of`] give them. A top-level member
    /// the view does not read goes to `other`, with its key and its value next. `None` when the
    /// body is not what the walk expects, or `other` refused a member: the caller reads it the
    /// one-pass way (for its error), and the reader's memory is as it was.
    pub fn read<'a>(
        &mut self,
        body: &Bytes,
        text: &'a str,
        other: impl FnMut(&str, &mut WalkValues<'_, 'a>) -> Option<()>,
    ) -> Option<(RequestView<'a>, BlockKeys)> {
        // The sketch's offsets are into `body`: the two must be the same bytes.
        if !std::ptr::eq(text.as_ptr(), body.as_ptr()) || text.len() != body.len() {
            return None;
        }
        let (view, drawn) = walk_body(text, base_among(self.last.iter(), text, skip_ws(text, 0)), other)?;
        let keys = drawn.as_ref().map_or_else(|| BlockKeys::of(&view), Drawn::keys);
        self.forget();
        if let Some(drawn) = drawn.filter(|_| self.budget.take(body.len())) {
            let body_range = drawn.start..drawn.start + drawn.len;
            self.last = Some(Sketch { bytes: Kept::Body(body.clone()), body: body_range, drawn });
        }
        Some((view, keys))
    }

    fn forget(&mut self) {
        if let Some(sketch) = self.last.take() {
            self.budget.give_back(sketch.bytes.get().len());
        }
    }
}

impl Drop for BodyReader {
    fn drop(&mut self) {
        self.forget();
    }
}

/// A whole body walked from its sketched base, and the sketch of it (none when a value could not
/// be sketched); `other` reads the members the view does not.
fn walk_body<'a>(
    text: &'a str,
    base: Option<Base<'_>>,
    other: impl FnMut(&str, &mut WalkValues<'_, 'a>) -> Option<()>,
) -> Option<(RequestView<'a>, Option<Drawn>)> {
    let mut walk = Walk { text, pos: skip_ws(text, 0) };
    let read = body_object(&mut walk, base, other)?;
    (skip_ws(text, walk.pos) == text.len()).then_some(read)
}

/// A request body's object at the walk's position, read from `base` (the messages of the
/// shared prefix, byte-equal `tools` and `system` members taken from its sketch), with the
/// sketch of it; `other` reads the members the view does not.
fn body_object<'a>(
    walk: &mut Walk<'a>,
    base: Option<Base<'_>>,
    mut other: impl FnMut(&str, &mut WalkValues<'_, 'a>) -> Option<()>,
) -> Option<(RequestView<'a>, Option<Drawn>)> {
    let mut drawing = Drawing::new(walk.pos, base);
    let mut view = RequestView::default();
    walk.object(|walk| {
        if drawing.reuse_member(walk, &mut view) {
            return Some(());
        }
        let key_at = walk.pos;
        let key = walk.key()?;
        if is_sketched(&key) {
            return walk.request_member(&key, key_at, &mut view, &mut drawing);
        }
        let mut values = walk.values();
        match view.read_member(&key, &mut values) {
            Ok(true) => Some(()),
            Ok(false) => other(&key, &mut values),
            Err(_) => None,
        }
    })?;
    Some((view, drawing.finish(walk.pos)))
}

/// Of `recent` (newest first), the body sharing the longest prefix with the one at `start` of
/// `text`, and that prefix's length.
fn base_among<'s>(recent: impl Iterator<Item = &'s Sketch>, text: &str, start: usize) -> Option<Base<'s>> {
    // The rest of the line: the body and, on an envelope, whatever members follow it.
    let body = text.as_bytes().get(start..)?;
    let mut best: Option<Base> = None;
    for sketch in recent {
        let shared = common_len(body, sketch.body_bytes());
        if best.as_ref().is_none_or(|best| shared > best.shared) {
            best = Some(Base { sketch, shared });
        }
        // The newest body sharing most of this one is the one to read from: older ones
        // would each cost a comparison for little more.
        if shared >= body.len() / 2 {
            break;
        }
    }
    best
}

/// Where `inner`, a slice of `outer`, starts in it.
fn offset_in(outer: &[u8], inner: &str) -> usize {
    inner.as_ptr() as usize - outer.as_ptr() as usize
}

/// Whether a request member is read with the sketches' help.
fn is_sketched(key: &str) -> bool {
    matches!(key, "messages" | "tools" | "system")
}

fn skip_ws(text: &str, mut pos: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = text.as_bytes().get(pos) {
        pos += 1;
    }
    pos
}

/// A recent body to read from, and how many of its first bytes the new body shares.
struct Base<'s> {
    sketch: &'s Sketch,
    shared: usize,
}

/// What a reader remembers of a request body it read.
struct Sketch {
    /// The bytes the body is in, kept until the sketch is forgotten.
    bytes: Kept,
    /// The body within `bytes`.
    body: Range<usize>,
    drawn: Drawn,
}

impl Sketch {
    fn body_bytes(&self) -> &[u8] {
        self.bytes.get().get(self.body.clone()).unwrap_or_default()
    }
}

/// Where a sketched body's bytes are kept.
enum Kept {
    /// A trace's batch of lines.
    Batch(Arc<PooledBytes>),
    /// A request body as a server received it.
    Body(Bytes),
}

impl Kept {
    fn get(&self) -> &[u8] {
        match self {
            Kept::Batch(batch) => &batch.bytes,
            Kept::Body(body) => body,
        }
    }
}

/// A body's sketch as its walk drew it. Offsets of the messages are from the body's `{`.
struct Drawn {
    /// The body's `{` in its line.
    start: usize,
    len: usize,
    /// The last `messages` member (none when it was `null`): where its key starts, and its
    /// elements.
    messages: Option<MessagesSketch>,
    /// The last `tools` member and the last `system` member: two at most, so a line of many
    /// duplicate members costs two comparisons a member, not one per earlier member.
    members: Members,
}

impl Drawn {
    /// The memo keys of the view's blocks: what [`BlockKeys::of`] would hash. The view holds
    /// what the last `tools`, `system` and `messages` members held, which the sketch keeps.
    fn keys(&self) -> BlockKeys {
        let messages = self.messages.as_ref().map_or(&[][..], |m| &m.keys[..]);
        BlockKeys::from_parts(member_keys(&self.members.tools), member_keys(&self.members.system), messages)
    }
}

fn member_keys(member: &Option<MemberSketch>) -> &[u128] {
    member.as_ref().map_or(&[], |member| &member.keys)
}

/// The elements of a `messages` array, flat: a body's sketch is two vectors, so a new body
/// that shares the first k messages copies two slices of them.
#[derive(Default)]
struct MessagesSketch {
    key_at: usize,
    elements: Vec<ElementSketch>,
    /// The blocks of every element's content, in order.
    blocks: Vec<Range<usize>>,
    /// The memo key of every element's content (one for a string, one per block), in order.
    keys: Vec<u128>,
}

impl MessagesSketch {
    /// The first `count` elements (and their blocks and keys).
    fn prefix(&self, key_at: usize, count: usize) -> MessagesSketch {
        let elements = self.elements[..count].to_vec();
        let (blocks_end, keys_end) = elements.last().map_or((0, 0), |last| (last.blocks_end, last.keys_end));
        let (blocks, keys) = (self.blocks[..blocks_end].to_vec(), self.keys[..keys_end].to_vec());
        MessagesSketch { key_at, elements, blocks, keys }
    }

    /// Message `index`, read from `text` whose body starts at `start`.
    fn message<'a>(&self, index: usize, text: &'a str, start: usize) -> Option<MessageView<'a>> {
        let element = &self.elements[index];
        let content = match &element.text {
            Some(text_sketch) => ContentView::Text(text_sketch.at(text, start)?),
            None => {
                let blocks_start = index.checked_sub(1).map_or(0, |before| self.elements[before].blocks_end);
                ContentView::Blocks(raws_at(text, start, self.blocks.get(blocks_start..element.blocks_end)?)?)
            }
        };
        Some(MessageView { role: element.role, content })
    }

    /// Adds a message read at `end` of the body that starts at `start` of `text`; false when
    /// its content is not in `text`.
    fn push(&mut self, message: &MessageView, text: &str, start: usize, end: usize) -> bool {
        let text_sketch = match &message.content {
            ContentView::Blocks(blocks) => {
                let Some(spans) = spans_of(text, start, blocks) else { return false };
                self.blocks.extend(spans);
                None
            }
            ContentView::Text(content) => match TextSketch::of(text, start, content) {
                Some(sketch) => Some(sketch),
                None => return false,
            },
        };
        content_keys(&message.content, BlockContext::Message, &mut self.keys);
        let (blocks_end, keys_end) = (self.blocks.len(), self.keys.len());
        self.elements.push(ElementSketch {
            end: end - start,
            role: message.role,
            text: text_sketch,
            blocks_end,
            keys_end,
        });
        true
    }
}

/// One message: its offsets are from the body's `{`.
#[derive(Clone)]
struct ElementSketch {
    /// Just past the element (its `}`, or `]` for a message written as an array).
    end: usize,
    role: Role,
    /// A string content; `None` for blocks.
    text: Option<TextSketch>,
    /// Where its blocks end in [`MessagesSketch::blocks`].
    blocks_end: usize,
    /// Where its keys end in [`MessagesSketch::keys`].
    keys_end: usize,
}

/// A string value, its offsets from an origin (a body's or a member's start).
#[derive(Clone)]
enum TextSketch {
    /// Without escapes: where its text lies (between the quotes).
    At(Range<usize>),
    /// With escapes: its text.
    Owned(Arc<str>),
}

impl TextSketch {
    /// `content` read from `text` with offsets from `origin`; `None` for a text not in `text`.
    #[allow(clippy::ptr_arg)] // the variant is the point: borrowed is sketched by place, owned by value
    fn of(text: &str, origin: usize, content: &Cow<str>) -> Option<TextSketch> {
        Some(match content {
            Cow::Borrowed(s) => TextSketch::At(span_in(text, origin, s)?),
            Cow::Owned(s) => TextSketch::Owned(Arc::from(s.as_str())),
        })
    }

    /// The string at `origin` of `text`, which holds, from there, the bytes it was read from.
    fn at<'a>(&self, text: &'a str, origin: usize) -> Option<Cow<'a, str>> {
        Some(match self {
            TextSketch::At(range) => Cow::Borrowed(slice(text, origin, range)?),
            TextSketch::Owned(s) => Cow::Owned(s.to_string()),
        })
    }
}

/// A `system` value, its offsets from its member's start.
#[derive(Clone)]
enum ContentSketch {
    Text(TextSketch),
    /// Blocks: where each lies.
    Blocks(Vec<Range<usize>>),
}

impl ContentSketch {
    /// `content`, read from `text` with offsets from `origin`; `None` for a text not in `text`.
    fn of(text: &str, origin: usize, content: &ContentView) -> Option<ContentSketch> {
        Some(match content {
            ContentView::Text(s) => ContentSketch::Text(TextSketch::of(text, origin, s)?),
            ContentView::Blocks(blocks) => ContentSketch::Blocks(spans_of(text, origin, blocks)?),
        })
    }

    /// The content at `origin` of `text`, which holds, from there, the bytes it was read from.
    fn at<'a>(&self, text: &'a str, origin: usize) -> Option<ContentView<'a>> {
        Some(match self {
            ContentSketch::Text(sketch) => ContentView::Text(sketch.at(text, origin)?),
            ContentSketch::Blocks(blocks) => ContentView::Blocks(raws_at(text, origin, blocks)?),
        })
    }
}

/// The bytes at `range` from `origin` of `text`.
fn slice<'a>(text: &'a str, origin: usize, range: &Range<usize>) -> Option<&'a str> {
    text.get(origin + range.start..origin + range.end)
}

/// Where each of `raws`, read from `text`, lies from `origin`.
fn spans_of(text: &str, origin: usize, raws: &[RawJson]) -> Option<Vec<Range<usize>>> {
    raws.iter().map(|raw| span_in(text, origin, raw.get())).collect()
}

/// The JSON values at `spans` from `origin` of `text`, which holds there the bytes they were read
/// from.
fn raws_at<'a>(text: &'a str, origin: usize, spans: &[Range<usize>]) -> Option<Vec<RawJson<'a>>> {
    spans.iter().map(|range| slice(text, origin, range).map(RawJson::trusted)).collect()
}

/// A body's last `tools` and `system` members.
#[derive(Default)]
struct Members {
    tools: Option<MemberSketch>,
    system: Option<MemberSketch>,
}

impl Members {
    fn set(&mut self, member: MemberSketch) {
        match member.value {
            MemberValue::Tools(_) => self.tools = Some(member),
            MemberValue::System(_) => self.system = Some(member),
        }
    }

    fn iter(&self) -> impl Iterator<Item = &MemberSketch> {
        self.tools.iter().chain(&self.system)
    }
}

/// A `tools` or `system` member, offsets from its key's opening quote.
struct MemberSketch {
    /// From the body's `{`: the key's opening quote to the value's end.
    span: Range<usize>,
    value: MemberValue,
    /// Its blocks' memo keys.
    keys: Vec<u128>,
}

#[derive(Clone)]
enum MemberValue {
    /// `tools` as the view keeps it (`null` is none): where each definition lies.
    Tools(Vec<Range<usize>>),
    /// `system`.
    System(Option<ContentSketch>),
}

/// A body's sketch being drawn as its walk goes.
struct Drawing<'s> {
    /// The body's `{` in the line.
    start: usize,
    base: Option<Base<'s>>,
    messages: Option<MessagesSketch>,
    members: Members,
    /// A value could not be sketched (defensive: the parse only ever gives content borrowed from
    /// the line, or owned): the body is not remembered.
    spoiled: bool,
}

impl<'s> Drawing<'s> {
    fn new(start: usize, base: Option<Base<'s>>) -> Drawing<'s> {
        Drawing { start, base, messages: None, members: Members::default(), spoiled: false }
    }

    fn finish(self, end: usize) -> Option<Drawn> {
        let Drawing { start, messages, members, spoiled, .. } = self;
        (!spoiled).then(|| Drawn { start, len: end - start, messages, members })
    }

    /// At a member's key: when the member, key to value, is byte for byte a `tools` or `system`
    /// member of the base, takes it from the base's sketch and steps past it.
    fn reuse_member<'a>(&mut self, walk: &mut Walk<'a>, view: &mut RequestView<'a>) -> bool {
        let Some(base) = &self.base else { return false };
        let rest = walk.text.as_bytes().get(walk.pos..).unwrap_or_default();
        for member in base.sketch.drawn.members.iter() {
            let bytes = base.sketch.body_bytes().get(member.span.clone()).unwrap_or_default();
            if bytes.is_empty() || !rest.starts_with(bytes) || !apply(member, walk, view) {
                continue;
            }
            let at = walk.pos - self.start;
            let span = at..at + bytes.len();
            self.members.set(MemberSketch { span, value: member.value.clone(), keys: member.keys.clone() });
            walk.pos += bytes.len();
            return true;
        }
        false
    }

    /// A `tools` or `system` member read from `key_at` to `end` of the line, its blocks' keys
    /// (`None`: it could not be sketched).
    fn member(&mut self, key_at: usize, end: usize, value: Option<MemberValue>, keys: Vec<u128>) {
        match value {
            Some(value) => {
                let span = key_at - self.start..end - self.start;
                self.members.set(MemberSketch { span, value, keys });
            }
            None => self.spoiled = true,
        }
    }

    /// The base's messages, and how many of them lie wholly in the shared prefix, when the new
    /// body's `messages` key is at `key_at` (from the body's start) as the base's was.
    fn shared_messages(&self, key_at: usize) -> Option<(&'s MessagesSketch, usize)> {
        let base = self.base.as_ref()?;
        let messages = base.sketch.drawn.messages.as_ref().filter(|m| m.key_at == key_at)?;
        let shared = messages.elements.partition_point(|element| element.end <= base.shared);
        Some((messages, shared))
    }
}

/// A walk along a line, `pos` the next byte to read.
struct Walk<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Walk<'a> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        self.pos = skip_ws(self.text, self.pos);
    }

    /// Steps past `byte` (after any whitespace).
    fn expect(&mut self, byte: u8) -> Option<()> {
        self.skip_ws();
        (self.peek()? == byte).then(|| self.pos += 1)
    }

    /// One value of type `T` read by serde_json where the walk stands.
    fn value<T: Deserialize<'a>>(&mut self) -> Result<T, serde_json::Error> {
        let rest = self.text.get(self.pos..).unwrap_or_default();
        let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<T>();
        let value = stream.next().unwrap_or_else(|| Err(serde::de::Error::custom("a value was expected")))?;
        self.pos += stream.byte_offset();
        Ok(value)
    }

    fn values(&mut self) -> WalkValues<'_, 'a> {
        WalkValues(self)
    }

    /// An object, from its `{` (after any whitespace) to past its `}`; `member` reads each
    /// member, from its key's opening quote to its value's end.
    fn object(&mut self, mut member: impl FnMut(&mut Walk<'a>) -> Option<()>) -> Option<()> {
        self.expect(b'{')?;
        self.skip_ws();
        if self.peek()? == b'}' {
            self.pos += 1;
            return Some(());
        }
        loop {
            self.skip_ws();
            member(self)?;
            self.skip_ws();
            match self.peek()? {
                b',' => self.pos += 1,
                b'}' => {
                    self.pos += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// A member's key and its colon, leaving the walk at the value.
    fn key(&mut self) -> Option<Cow<'a, str>> {
        let key = self.plain_key().or_else(|| self.value::<Cow<'a, str>>().ok())?;
        self.expect(b':')?;
        self.skip_ws();
        Some(key)
    }

    /// A key without escapes or control characters, read without serde_json (the common case).
    fn plain_key(&mut self) -> Option<Cow<'a, str>> {
        let bytes = self.text.as_bytes();
        if bytes.get(self.pos) != Some(&b'"') {
            return None;
        }
        let inside = bytes.get(self.pos + 1..)?;
        let len = memchr::memchr2(b'"', b'\\', inside)?;
        if inside[len] != b'"' || inside[..len].iter().any(|&byte| byte < 0x20) {
            return None;
        }
        let key = self.text.get(self.pos + 1..self.pos + 1 + len)?;
        self.pos += len + 2;
        Some(Cow::Borrowed(key))
    }

    /// A sketched request member (`messages`, `tools` or `system`) whose key (at `key_at`) was
    /// just read, drawn into the sketch.
    fn request_member(
        &mut self,
        key: &str,
        key_at: usize,
        view: &mut RequestView<'a>,
        drawing: &mut Drawing,
    ) -> Option<()> {
        match key {
            "messages" => view.messages = self.messages(key_at, drawing)?,
            "tools" => {
                view.tools = self.value::<Option<Vec<RawJson<'a>>>>().ok()?.unwrap_or_default();
                let value = spans_of(self.text, key_at, &view.tools).map(MemberValue::Tools);
                let mut keys = Vec::with_capacity(view.tools.len());
                tool_keys(&view.tools, &mut keys);
                drawing.member(key_at, self.pos, value, keys);
            }
            "system" => {
                view.system = self.value::<Option<ContentView<'a>>>().ok()?;
                let mut keys = Vec::new();
                let value = match &view.system {
                    None => Some(MemberValue::System(None)),
                    Some(content) => {
                        content_keys(content, BlockContext::System, &mut keys);
                        ContentSketch::of(self.text, key_at, content).map(|c| MemberValue::System(Some(c)))
                    }
                };
                drawing.member(key_at, self.pos, value, keys);
            }
            // Only the sketched members come here (`is_sketched`).
            _ => return None,
        }
        Some(())
    }

    /// `messages`, its value at the walk's position: the elements the body shares with its base
    /// taken from the base's sketch, the rest read one by one.
    fn messages(&mut self, key_at: usize, drawing: &mut Drawing) -> Option<Option<Vec<MessageView<'a>>>> {
        if self.peek()? != b'[' {
            // `null`, or not a list: read as the one-pass read reads it; an earlier array is no
            // longer the view's.
            drawing.messages = None;
            return self.value().ok();
        }
        let key_at = key_at - drawing.start;
        let (start, text) = (drawing.start, self.text);
        let (mut sketch, mut messages) = match drawing.shared_messages(key_at) {
            Some((base, shared)) => {
                let messages =
                    (0..shared).map(|index| base.message(index, text, start)).collect::<Option<Vec<_>>>()?;
                (base.prefix(key_at, shared), messages)
            }
            None => (MessagesSketch { key_at, ..MessagesSketch::default() }, Vec::new()),
        };
        let mut need_element = match sketch.elements.last() {
            Some(last) => {
                self.pos = start + last.end;
                false
            }
            None => {
                self.pos += 1;
                self.skip_ws();
                if self.peek()? == b']' {
                    self.pos += 1;
                    drawing.messages = Some(sketch);
                    return Some(Some(messages));
                }
                true
            }
        };
        loop {
            if need_element {
                let message: MessageView<'a> = self.value().ok()?;
                if !sketch.push(&message, text, start, self.pos) {
                    drawing.spoiled = true;
                }
                messages.push(message);
            }
            need_element = true;
            self.skip_ws();
            match self.peek()? {
                b',' => self.pos += 1,
                b']' => {
                    self.pos += 1;
                    break;
                }
                _ => return None,
            }
        }
        drawing.messages = Some(sketch);
        Some(Some(messages))
    }
}

/// Sets the view's `tools` or `system` from `member`'s sketch, the member's bytes at the walk's
/// position; false when they cannot be read there (then nothing is set).
fn apply<'a>(member: &MemberSketch, walk: &Walk<'a>, view: &mut RequestView<'a>) -> bool {
    match &member.value {
        MemberValue::Tools(tools) => {
            raws_at(walk.text, walk.pos, tools).map(|tools| view.tools = tools).is_some()
        }
        MemberValue::System(None) => {
            view.system = None;
            true
        }
        MemberValue::System(Some(content)) => {
            content.at(walk.text, walk.pos).map(|content| view.system = Some(content)).is_some()
        }
    }
}

/// Where `inner` lies in `text`, from `origin`.
fn span_in(text: &str, origin: usize, inner: &str) -> Option<Range<usize>> {
    let at = (inner.as_ptr() as usize).checked_sub(text.as_ptr() as usize + origin)?;
    Some(at..at + inner.len())
}

/// The values of a walk along a body, for the readers shared with the one-pass read: each is
/// read by serde_json at its own offset.
pub struct WalkValues<'w, 'a>(&'w mut Walk<'a>);

/// Skips a top-level member the view does not read, for a reader that leaves such members to
/// someone else (a trace's lines were checked by the server that wrote them, a proxy's bodies are
/// checked by its upstream).
pub fn skip_member(_: &str, values: &mut WalkValues<'_, '_>) -> Option<()> {
    values.next_value::<IgnoredAny>().ok().map(drop)
}

impl<'a> MemberValues<'a> for WalkValues<'_, 'a> {
    type Error = serde_json::Error;

    fn next_value<T: Deserialize<'a>>(&mut self) -> Result<T, serde_json::Error> {
        self.0.value()
    }
}
