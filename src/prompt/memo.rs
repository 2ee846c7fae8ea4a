//! Remembers what each distinct block is, keyed by a hash of its bytes.
//!
//! An agent's requests repeat their whole history every turn, so nearly every block of a request
//! was seen, byte for byte, in the request before. Hashing a block's bytes is an order of
//! magnitude cheaper than building its JSON tree, canonicalizing and counting it, so a request
//! costs one hash per block plus real work only for what is new. The memo changes speed only,
//! never results: its values are a pure function of the key's bytes and the run's settings.

use std::collections::HashMap;

use super::block::{BlockInfo, BlockProblem};
use super::hash::BuildPassThrough;

/// Distinct blocks remembered before the memo starts over (bounds memory on endless runs).
pub const MEMO_LIMIT: usize = 1 << 20;

/// Block facts by block-bytes hash.
#[derive(Default)]
pub struct BlockMemo {
    // Point lookups only; never iterated.
    blocks: HashMap<u128, Result<BlockInfo, Box<BlockProblem>>, BuildPassThrough>,
}

impl BlockMemo {
    /// The facts for `memo_key`, computed by `inspect` the first time.
    pub fn get_or_inspect(
        &mut self,
        memo_key: u128,
        inspect: impl FnOnce() -> Result<BlockInfo, BlockProblem>,
    ) -> Result<BlockInfo, BlockProblem> {
        if let Some(known) = self.blocks.get(&memo_key) {
            return known.clone().map_err(|problem| *problem);
        }
        if self.blocks.len() >= MEMO_LIMIT {
            self.blocks.clear();
        }
        let fresh = inspect();
        self.blocks.insert(memo_key, fresh.clone().map_err(Box::new));
        fresh
    }
}
