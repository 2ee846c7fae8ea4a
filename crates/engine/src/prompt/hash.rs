//! Hashing helpers: xxh3-128 for content and prefix chains, and a pass-through hasher for maps
//! whose keys are already hashes.

use std::hash::{BuildHasherDefault, Hasher};

use xxhash_rust::xxh3::{xxh3_64, xxh3_128, xxh3_128_with_seed};

/// The hash of `bytes`.
pub fn content_hash(bytes: &[u8]) -> u128 {
    xxh3_128(bytes)
}

/// The hash of `bytes` in a namespace, so equal bytes in different roles do not collide.
pub fn namespaced_hash(namespace: u64, bytes: &[u8]) -> u128 {
    xxh3_128_with_seed(bytes, namespace)
}

/// A short hash of a salt's canonical text.
pub fn salt_hash(text: &str) -> u64 {
    xxh3_64(text.as_bytes())
}

/// `H[i] = hash(H[i-1], key_i, tag)`: the chained prefix hash.
pub fn chain(previous: u128, key: u128, tag: u8) -> u128 {
    let mut buffer = [0u8; 33];
    buffer[..16].copy_from_slice(&previous.to_le_bytes());
    buffer[16..32].copy_from_slice(&key.to_le_bytes());
    buffer[32] = tag;
    xxh3_128(&buffer)
}

/// A `Hasher` for keys that are already uniformly distributed hashes: it keeps the last 64 bits
/// written. Only for point lookups; such maps are never iterated into output.
#[derive(Default, Clone, Copy)]
pub struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 = self.0.rotate_left(5) ^ u64::from_le_bytes(word);
        }
    }

    fn write_u128(&mut self, value: u128) {
        self.0 = self.0.rotate_left(5) ^ (value as u64) ^ ((value >> 64) as u64);
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = self.0.rotate_left(5) ^ value;
    }

    fn write_u32(&mut self, value: u32) {
        self.0 = self.0.rotate_left(5) ^ u64::from(value);
    }
}

/// Builds [`PassThrough`] hashers.
pub type BuildPassThrough = BuildHasherDefault<PassThrough>;
