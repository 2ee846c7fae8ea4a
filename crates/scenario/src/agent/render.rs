//! Agent requests rendered for the cache without serializing or re-reading their history.
//!
//! An agent's requests share almost everything: the main loop resends its history with two more
//! messages each turn, and every fork or sidecar resends the parent's. A [`Lineage`] renders a
//! conversation's tools, system and messages once, append-only; a request whose head matches it
//! (same `Arc`s, or the same blocks by identity) reads those positions in place and renders only
//! its own tail. Block facts are remembered per block object. The result is priced by
//! [`MockEndpoint::handle_rendered`], and a test proves it prices every fixture request exactly
//! like its bytes.
//!
//! A request with an image, citations or a web-search tool anywhere is declined (`None`): those
//! join the hash chain as salts from the first level on, so such a conversation cannot be
//! extended block by block. The caller prices it from its view instead.

use std::collections::HashMap;
use std::sync::Arc;

use forkcache_engine::billing::ModelPrice;
use forkcache_engine::endpoint::{MockEndpoint, RenderedRequest};
use forkcache_engine::prompt::{
    BlockContext, BlockInfo, Breakpoint, Checkpoint, Position, PromptBuilder, PromptRef, SaltInputs, Salts,
    Ttl, tool_prompt_size,
};
use forkcache_wire::ApiError;

use super::block::{BlockRef, Message};
use super::request::{AgentRequest, Mark, ThinkingConfig};

/// Lineages kept: the main loop's, plus a few branches (compaction, a fork's fresh
/// replacement state, a named agent's conversation).
const LINEAGES: usize = 8;
/// Block facts remembered before starting over (each entry keeps its block alive).
const INFOS_LIMIT: usize = 1 << 20;

/// Hashes an address: a multiplicative mix, since aligned addresses share their low bits.
#[derive(Default)]
struct AddressHasher(u64);

impl std::hash::Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn write_usize(&mut self, address: usize) {
        self.0 = (address as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
    }
}

type BuildAddressHasher = std::hash::BuildHasherDefault<AddressHasher>;

/// Whether a block turns on a parameter rendered into the prompt (images, citations, web
/// search), which the fast path declines.
fn turns_on_salt(info: &BlockInfo) -> bool {
    info.has_image || info.has_citations || info.web_search_tool
}

/// One conversation rendered so far: what it rendered (kept alive, compared by identity) and
/// the positions, per-block breakpoints and per-message checkpoints it produced.
struct Lineage {
    model: String,
    thinking: Option<ThinkingConfig>,
    tools: Arc<Vec<BlockRef>>,
    system: Arc<Vec<BlockRef>>,
    salts: Salts,
    source: Arc<Vec<Message>>,
    messages: usize,
    positions: Vec<Position>,
    /// System blocks' breakpoints (`None` for an ignored block).
    system_blocks: Vec<Option<Breakpoint>>,
    /// Every rendered message block's breakpoint, in order.
    blocks: Vec<Breakpoint>,
    /// Index into `blocks` of each rendered message's first block.
    message_starts: Vec<usize>,
    /// The chain after 0, 1, … `messages` messages.
    checkpoints: Vec<Checkpoint>,
    first_after_tools: u32,
}

/// A rendered request: borrows the lineage's shared positions, owns its tail.
pub struct Rendered<'r> {
    lineage: &'r Lineage,
    head_positions: usize,
    tail: Vec<Position>,
    breakpoints: Vec<Breakpoint>,
    model: &'r str,
}

impl Rendered<'_> {
    /// The request as the endpoint prices it.
    pub fn request(&self, max_tokens: u64) -> RenderedRequest<'_> {
        let prompt = PromptRef {
            head: &self.lineage.positions[..self.head_positions],
            tail: &self.tail,
            breakpoints: &self.breakpoints,
            salts: self.lineage.salts,
            first_after_tools: self.lineage.first_after_tools,
            first_message: self.lineage.checkpoints[0].len(),
        };
        RenderedRequest { model: self.model, prompt, stream: false, max_tokens }
    }
}

/// What rendering took, counted. Unlike a timing it is the same on every machine and thread
/// count, so a test can pin it and any growth in the work per request shows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RenderWork {
    /// Blocks chained into a prompt's hashes: a lineage's tools, system and messages once, then
    /// each request's own tail.
    pub blocks_hashed: u64,
    /// Distinct blocks whose facts were asked of the endpoint (each block object once per run).
    pub blocks_looked_up: u64,
    /// Requests the fast path declined (an image, citations or web search): rendered whole from
    /// their JSON by the endpoint instead.
    pub declined: u64,
}

/// Renders agent requests, sharing work between them.
#[derive(Default)]
pub struct RequestRenderer {
    work: RenderWork,
    lineages: Vec<Lineage>,
    // Keyed by the block's address; the entry holds the block, so the address is never reused.
    // Point lookups only.
    infos: HashMap<usize, (BlockRef, BlockInfo), BuildAddressHasher>,
}

impl RequestRenderer {
    /// The work done so far.
    pub fn work(&self) -> RenderWork {
        self.work
    }

    /// Renders `request` with `endpoint`'s settings (its identity mode, tokenizer and prices);
    /// `None` when the request has content the fast path declines (see the module docs).
    #[allow(clippy::expect_used)] // the infos were built from these same blocks, one each
    pub fn render<'r>(
        &'r mut self,
        endpoint: &mut MockEndpoint,
        request: &'r AgentRequest,
    ) -> Result<Option<Rendered<'r>>, ApiError> {
        let price = endpoint.prices().resolve(&request.model).price.clone();
        let tail_infos = self.message_infos(endpoint, &request.tail)?;
        if tail_infos.iter().any(turns_on_salt) {
            self.work.declined += 1;
            return Ok(None);
        }
        let Some(index) = self.lineage_for(endpoint, request, &price)? else {
            self.work.declined += 1;
            return Ok(None);
        };
        self.work.blocks_hashed += tail_infos.len() as u64;
        let head_messages = request.head.len();
        let lineage = &self.lineages[index];
        let checkpoint = lineage.checkpoints[head_messages];
        let mut builder = PromptBuilder::resume(&checkpoint);
        let mut tail_blocks = Vec::with_capacity(tail_infos.len());
        let mut infos = tail_infos.iter();
        for (offset, message) in request.tail.iter().enumerate() {
            let number = (head_messages + offset) as u32;
            for (block, _) in message.blocks.iter().enumerate() {
                let info = infos.next().expect("one info per tail block");
                builder.message_block(number, block as u32, message.role, block == 0, &without_marker(info));
                tail_blocks.push(builder.breakpoint_here(request.ttl));
            }
        }
        let tail = builder.finish().positions;
        let breakpoints = breakpoints(request, lineage, head_messages, &tail_blocks);
        let rendered = Rendered {
            lineage,
            head_positions: checkpoint.len() as usize,
            tail,
            breakpoints,
            model: &request.model,
        };
        Ok(Some(rendered))
    }

    fn info(
        &mut self,
        endpoint: &mut MockEndpoint,
        block: &BlockRef,
        context: BlockContext,
    ) -> Result<BlockInfo, ApiError> {
        let address = Arc::as_ptr(block) as usize;
        if let Some((_, info)) = self.infos.get(&address) {
            return Ok(*info);
        }
        if self.infos.len() >= INFOS_LIMIT {
            self.infos.clear();
        }
        let info = endpoint.block_info(block.raw(None), context, "block")?;
        self.work.blocks_looked_up += 1;
        self.infos.insert(address, (Arc::clone(block), info));
        Ok(info)
    }

    fn message_infos(
        &mut self,
        endpoint: &mut MockEndpoint,
        messages: &[Message],
    ) -> Result<Vec<BlockInfo>, ApiError> {
        let blocks = messages.iter().flat_map(|m| m.blocks.iter());
        blocks.map(|block| self.info(endpoint, block, BlockContext::Message)).collect()
    }

    /// The lineage rendering `request`'s whole head, extended or branched as needed.
    fn lineage_for(
        &mut self,
        endpoint: &mut MockEndpoint,
        request: &AgentRequest,
        price: &ModelPrice,
    ) -> Result<Option<usize>, ApiError> {
        let index = match self.best_match(request) {
            Some((index, matched)) if self.lineages[index].messages == matched => index,
            Some((index, matched)) => self.branch(index, matched),
            None => match self.start(endpoint, request, price)? {
                Some(index) => index,
                None => return Ok(None),
            },
        };
        if self.extend(endpoint, index, &request.head)? {
            return Ok(Some(index));
        }
        // A head block turns on a salt the chain was built without: this lineage is useless.
        self.lineages.remove(index);
        Ok(None)
    }

    /// The lineage sharing the most messages with `request`'s head, and how many it shares.
    fn best_match(&self, request: &AgentRequest) -> Option<(usize, usize)> {
        let mut best: Option<(usize, usize)> = None;
        for (index, lineage) in self.lineages.iter().enumerate() {
            let same_setup = lineage.model == request.model
                && lineage.thinking == request.thinking
                && Arc::ptr_eq(&lineage.tools, &request.tools)
                && Arc::ptr_eq(&lineage.system, &request.system);
            if !same_setup {
                continue;
            }
            let matched = shared_messages(lineage, &request.head);
            if best.is_none_or(|(_, most)| matched >= most) {
                best = Some((index, matched));
            }
        }
        best
    }

    /// A new lineage: tools, the hidden tool prompt and system, no messages yet.
    fn start(
        &mut self,
        endpoint: &mut MockEndpoint,
        request: &AgentRequest,
        price: &ModelPrice,
    ) -> Result<Option<usize>, ApiError> {
        let tool_infos = self.infos_of(endpoint, &request.tools, BlockContext::Tool)?;
        let system_infos = self.infos_of(endpoint, &request.system, BlockContext::System)?;
        if tool_infos.iter().chain(&system_infos).any(turns_on_salt) {
            return Ok(None);
        }
        let thinking = request.thinking.map(|t| t.wire());
        let config = endpoint.config().prompt.clone();
        let salts = SaltInputs {
            thinking: thinking.as_ref(),
            config_ahead: config.render_config_ahead,
            ..SaltInputs::default()
        }
        .salts(price);
        let mut builder = PromptBuilder::new(salts, config.collapse_tool_runs);
        // A deferred tool is not in the prompt until tool search loads it (documented rule).
        for (index, info) in tool_infos.iter().enumerate().filter(|(_, info)| !info.deferred) {
            builder.tool(index as u32, &without_marker(info));
            self.work.blocks_hashed += 1;
        }
        if !tool_infos.is_empty() {
            let size = tool_prompt_size(None, price);
            builder.tool_prompt(size.auto, size.extra);
        }
        let mut system_blocks = Vec::with_capacity(system_infos.len());
        for (index, info) in system_infos.iter().enumerate() {
            if info.ignored {
                system_blocks.push(None);
                continue;
            }
            builder.system(index as u32, &without_marker(info));
            self.work.blocks_hashed += 1;
            system_blocks.push(Some(builder.breakpoint_here(request.ttl)));
        }
        let checkpoint = builder.checkpoint();
        let prompt = builder.finish();
        let lineage = Lineage {
            model: request.model.clone(),
            thinking: request.thinking,
            tools: Arc::clone(&request.tools),
            system: Arc::clone(&request.system),
            salts,
            source: Arc::new(Vec::new()),
            messages: 0,
            positions: prompt.positions,
            system_blocks,
            blocks: Vec::new(),
            message_starts: Vec::new(),
            checkpoints: vec![checkpoint],
            first_after_tools: prompt.first_after_tools,
        };
        Ok(Some(self.keep(lineage)))
    }

    fn infos_of(
        &mut self,
        endpoint: &mut MockEndpoint,
        blocks: &[BlockRef],
        context: BlockContext,
    ) -> Result<Vec<BlockInfo>, ApiError> {
        blocks.iter().map(|block| self.info(endpoint, block, context)).collect()
    }

    /// A copy of lineage `index` cut back to its first `messages` messages.
    fn branch(&mut self, index: usize, messages: usize) -> usize {
        let from = &self.lineages[index];
        let checkpoint = from.checkpoints[messages];
        let blocks_end = from.message_starts.get(messages).copied().unwrap_or(from.blocks.len());
        let lineage = Lineage {
            model: from.model.clone(),
            thinking: from.thinking,
            tools: Arc::clone(&from.tools),
            system: Arc::clone(&from.system),
            salts: from.salts,
            source: Arc::clone(&from.source),
            messages,
            positions: from.positions[..checkpoint.len() as usize].to_vec(),
            system_blocks: from.system_blocks.clone(),
            blocks: from.blocks[..blocks_end].to_vec(),
            message_starts: from.message_starts[..messages].to_vec(),
            checkpoints: from.checkpoints[..=messages].to_vec(),
            first_after_tools: from.first_after_tools,
        };
        self.keep(lineage)
    }

    /// Renders `head`'s messages beyond those lineage `index` has, appending to it; false when
    /// one of them turns on a salt (the lineage is then left half-extended: drop it).
    #[allow(clippy::expect_used)] // the infos were built from these same blocks, one each
    fn extend(
        &mut self,
        endpoint: &mut MockEndpoint,
        index: usize,
        head: &Arc<Vec<Message>>,
    ) -> Result<bool, ApiError> {
        let done = self.lineages[index].messages;
        if head.len() > done {
            let infos = self.message_infos(endpoint, &head[done..])?;
            if infos.iter().any(turns_on_salt) {
                return Ok(false);
            }
            self.work.blocks_hashed += infos.len() as u64;
            let lineage = &mut self.lineages[index];
            let mut builder = PromptBuilder::resume(&lineage.checkpoints[done]);
            let mut infos = infos.iter();
            for (offset, message) in head[done..].iter().enumerate() {
                lineage.message_starts.push(lineage.blocks.len());
                for (block, _) in message.blocks.iter().enumerate() {
                    let info = infos.next().expect("one info per head block");
                    let number = (done + offset) as u32;
                    builder.message_block(
                        number,
                        block as u32,
                        message.role,
                        block == 0,
                        &without_marker(info),
                    );
                    lineage.blocks.push(builder.breakpoint_here(Ttl::FiveMinutes));
                }
                lineage.checkpoints.push(builder.checkpoint());
            }
            lineage.positions.extend(builder.finish().positions);
            lineage.messages = head.len();
        }
        // The lineage now stands for this head (a longer or equal list starting the same way).
        self.lineages[index].source = Arc::clone(head);
        Ok(true)
    }

    fn keep(&mut self, lineage: Lineage) -> usize {
        if self.lineages.len() >= LINEAGES {
            self.lineages.remove(0);
        }
        self.lineages.push(lineage);
        self.lineages.len() - 1
    }
}

/// How many leading messages of `head` the lineage rendered, block for block.
fn shared_messages(lineage: &Lineage, head: &Arc<Vec<Message>>) -> usize {
    let limit = lineage.messages.min(head.len());
    if Arc::ptr_eq(&lineage.source, head) {
        return limit;
    }
    (0..limit).find(|&m| !same_message(&lineage.source[m], &head[m])).unwrap_or(limit)
}

fn same_message(a: &Message, b: &Message) -> bool {
    a.role == b.role
        && a.blocks.len() == b.blocks.len()
        && a.blocks.iter().zip(&b.blocks).all(|(x, y)| Arc::ptr_eq(x, y))
}

fn without_marker(info: &BlockInfo) -> BlockInfo {
    BlockInfo { marker: None, ..*info }
}

/// The request's markers as breakpoints, from the blocks' recorded prefixes.
fn breakpoints(
    request: &AgentRequest,
    lineage: &Lineage,
    head_messages: usize,
    tail_blocks: &[Breakpoint],
) -> Vec<Breakpoint> {
    let mut tail_starts = Vec::with_capacity(request.tail.len());
    let mut start = 0;
    for message in &request.tail {
        tail_starts.push(start);
        start += message.blocks.len();
    }
    let at = |mark: &Mark| -> Option<Breakpoint> {
        match *mark {
            Mark::System(index) => lineage.system_blocks.get(index as usize).copied().flatten(),
            Mark::Message(message, block) if (message as usize) < head_messages => {
                lineage.blocks.get(lineage.message_starts[message as usize] + block as usize).copied()
            }
            Mark::Message(message, block) => {
                let start = tail_starts.get(message as usize - head_messages)?;
                tail_blocks.get(start + block as usize).copied()
            }
        }
    };
    request.marks.iter().filter_map(at).map(|bp| Breakpoint { ttl: request.ttl, ..bp }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::block::Block;
    use forkcache_engine::billing::PriceTable;
    use forkcache_engine::endpoint::EndpointConfig;
    use serde_json::json;

    fn request(tail: Vec<Message>) -> AgentRequest {
        AgentRequest {
            model: "claude-sonnet-4-6".into(),
            max_tokens: 100,
            thinking: None,
            system: Arc::new(vec![Block::text("system", Some(2_000))]),
            tools: Arc::new(Vec::new()),
            head: Arc::new(vec![Message::user(vec![Block::text("history", Some(10_000))])]),
            tail,
            marks: vec![Mark::System(0)],
            ttl: Ttl::FiveMinutes,
        }
    }

    #[test]
    fn images_are_declined_everything_else_is_rendered() {
        let mut endpoint = MockEndpoint::new(EndpointConfig::default(), PriceTable::builtin()).unwrap();
        let mut renderer = RequestRenderer::default();
        let plain = request(vec![Message::assistant(vec![Block::text("ok", Some(5))])]);
        let rendered = renderer.render(&mut endpoint, &plain).unwrap().expect("no salt-bearing content");
        // 2,000 + 10,000 + 5 tokens; the system marker is the one breakpoint.
        assert_eq!(rendered.request(100).prompt.total_tokens(), 12_005);
        assert_eq!(rendered.request(100).prompt.breakpoints.len(), 1);
        let image = Block::from_value(
            &json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}),
        );
        let with_image = request(vec![Message::user(vec![image])]);
        assert!(renderer.render(&mut endpoint, &with_image).unwrap().is_none());
    }
}
