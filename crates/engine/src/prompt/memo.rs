//! Remembers what each distinct block is, keyed by a hash of its bytes.
//!
//! An agent's requests repeat their whole history every turn, so nearly every block of a request
//! was seen, byte for byte, in the request before. Hashing a block's bytes is an order of
//! magnitude cheaper than building its JSON tree, canonicalizing and counting it, so a request
//! costs one hash per block plus real work only for what is new. The memo changes speed only,
//! never results: its values are a pure function of the key's bytes and the run's settings.
//!
//! It is bounded by two generations, an approximate LRU: blocks go into the current generation;
//! when that holds [`MEMO_LIMIT`]` / 2` blocks it becomes the previous one and the one before is
//! dropped. A block found in the previous generation moves back into the current one. So the
//! memo holds at most [`MEMO_LIMIT`] blocks (about 64 bytes each, plus the hash table's slack),
//! everything used within the last `MEMO_LIMIT / 2` distinct blocks is kept, and a block
//! forgotten is only inspected again when it comes back.

use std::collections::HashMap;

use super::block::{BlockInfo, BlockProblem};
use super::hash::BuildPassThrough;

/// Distinct blocks remembered at most (two generations of half as many).
pub const MEMO_LIMIT: usize = 1 << 19;

type Facts = Result<BlockInfo, Box<BlockProblem>>;

/// Block facts by block-bytes hash.
pub struct BlockMemo {
    /// Blocks remembered at most ([`MEMO_LIMIT`]; smaller in tests).
    limit: usize,
    // Point lookups only; never iterated.
    current: HashMap<u128, Facts, BuildPassThrough>,
    previous: HashMap<u128, Facts, BuildPassThrough>,
}

impl Default for BlockMemo {
    fn default() -> Self {
        BlockMemo::with_limit(MEMO_LIMIT)
    }
}

impl BlockMemo {
    /// An empty memo remembering at most `limit` blocks.
    fn with_limit(limit: usize) -> BlockMemo {
        BlockMemo { limit, current: HashMap::default(), previous: HashMap::default() }
    }

    /// The facts for `memo_key`, computed by `inspect` the first time.
    pub fn get_or_inspect(
        &mut self,
        memo_key: u128,
        inspect: impl FnOnce() -> Result<BlockInfo, BlockProblem>,
    ) -> Result<BlockInfo, BlockProblem> {
        if let Some(known) = self.current.get(&memo_key) {
            return known.clone().map_err(|problem| *problem);
        }
        let facts = match self.previous.remove(&memo_key) {
            Some(known) => known,
            None => inspect().map_err(Box::new),
        };
        if self.current.len() >= self.limit / 2 {
            self.previous = std::mem::take(&mut self.current);
        }
        self.current.insert(memo_key, facts.clone());
        facts.map_err(|problem| *problem)
    }

    /// Blocks remembered.
    pub fn len(&self) -> usize {
        self.current.len() + self.previous.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::block::BlockKind;

    fn info(tokens: u64) -> BlockInfo {
        BlockInfo {
            key: u128::from(tokens),
            tokens,
            estimated: true,
            kind: BlockKind::Text,
            marker: None,
            has_image: false,
            has_citations: false,
            web_search_tool: false,
            ignored: false,
            deferred: false,
            auto_eligible: true,
        }
    }

    #[test]
    fn the_memo_holds_at_most_its_limit_and_keeps_what_is_used() {
        let limit = 1_000;
        let mut memo = BlockMemo::with_limit(limit);
        let mut inspected = 0u64;
        // Block 0 is used every turn; blocks 1.. are each new once, 1.5 × the limit of them.
        let fresh = 3 * limit as u64 / 2;
        for block in 1..=fresh {
            for key in [0, block] {
                let facts = memo.get_or_inspect(u128::from(key), || {
                    inspected += 1;
                    Ok(info(key))
                });
                assert_eq!(facts.unwrap().tokens, key);
            }
            assert!(memo.len() <= limit);
        }
        // Each new block once, block 0 once: it never aged out.
        assert_eq!(inspected, fresh + 1);
        // The oldest blocks were forgotten: block 1 is inspected again.
        memo.get_or_inspect(1, || {
            inspected += 1;
            Ok(info(1))
        })
        .unwrap();
        assert_eq!(inspected, fresh + 2);
    }
}
