//! Cache entries, bounded per tenant (workspace): when a tenant is full, its expired entry goes
//! first, else its least recently used — one tenant's writes never evict another's entries.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};

use crate::clock::SimTime;
use crate::prompt::BuildPassThrough;

/// A cache scope: one workspace × one model. The high 32 bits number the workspace (its
/// tenant in the store), the low 32 bits the model within it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ScopeId(pub u64);

/// Maps keyed by scope (or by scope and prefix hash) use the pass-through hasher, which keeps
/// the bits it is given. A scope's own bits are not uniform: workspaces differ only in the high
/// half, so every tenant's entry for one prefix would land in the same buckets with the same
/// control byte, and a lookup would walk all of them (O(tenants)). A full 64-bit mix
/// (SplitMix64's finalizer) spreads any difference over every bit.
impl Hash for ScopeId {
    fn hash<H: Hasher>(&self, state: &mut H) {
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        state.write_u64(z ^ (z >> 31));
    }
}

impl ScopeId {
    /// No scope: what a request priced alone looks up (no workspace is ever numbered this).
    pub const UNSCOPED: ScopeId = ScopeId(u64::MAX);

    /// Model number `model` of workspace number `workspace`.
    pub fn new(workspace: u32, model: u32) -> ScopeId {
        ScopeId(u64::from(workspace) << 32 | u64::from(model))
    }

    /// The workspace's number.
    pub fn workspace(self) -> u32 {
        (self.0 >> 32) as u32
    }
}

/// Where an entry lives: its scope and the prefix hash `H[b]` it was written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EntryKey {
    /// Workspace × model.
    pub scope: ScopeId,
    /// The prefix hash.
    pub prefix: u128,
}

/// One cache entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// `T[b]` when written.
    pub tokens: u64,
    /// Lifetime in milliseconds (the policy's for the TTL written), renewed on every read.
    pub lifetime_ms: u64,
    /// Readable until (exclusive).
    pub expires_at: SimTime,
    /// Readable from (inclusive): when the writer's response began.
    pub visible_at: SimTime,
    last_used: u64,
}

impl Entry {
    /// Whether a request starting at `now` can read this entry.
    pub fn readable_at(&self, now: SimTime) -> bool {
        self.visible_at <= now && now < self.expires_at
    }
}

/// Counters for reports and the server's stats.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct StoreStats {
    /// Entries held now.
    pub entries: u64,
    /// Entries written (new or renewed by a write).
    pub writes: u64,
    /// Entries read.
    pub reads: u64,
    /// Entries evicted to stay within capacity.
    pub evictions: u64,
}

/// The entries of every scope.
pub struct EntryStore {
    // Point lookups only; eviction order comes from each tenant's two ordered sets.
    map: HashMap<EntryKey, Entry, BuildPassThrough>,
    /// Per workspace number (the tenant).
    tenants: BTreeMap<u32, Tenant>,
    capacity: usize,
    tick: u64,
    stats: StoreStats,
}

/// One tenant's eviction order.
#[derive(Default)]
struct Tenant {
    by_expiry: BTreeSet<(SimTime, EntryKey)>,
    by_use: BTreeSet<(u64, EntryKey)>,
}

impl EntryStore {
    /// An empty store holding at most `capacity` entries (at least 1) per tenant.
    pub fn new(capacity: usize) -> EntryStore {
        EntryStore {
            map: HashMap::default(),
            tenants: BTreeMap::new(),
            capacity: capacity.max(1),
            tick: 0,
            stats: StoreStats::default(),
        }
    }

    /// An entry counts against its workspace's share of the capacity.
    fn tenant(key: &EntryKey) -> u32 {
        key.scope.workspace()
    }

    /// When the last of `tenant`'s entries expires, if it holds any.
    pub fn last_expiry(&self, tenant: u32) -> Option<SimTime> {
        self.tenants.get(&tenant)?.by_expiry.last().map(|&(expires_at, _)| expires_at)
    }

    /// Forgets every entry of `tenant` (a workspace dropped once idle).
    pub fn drop_tenant(&mut self, tenant: u32) {
        let Some(dropped) = self.tenants.remove(&tenant) else { return };
        for (_, key) in dropped.by_use {
            self.map.remove(&key);
        }
    }

    /// The entry at `key`, in whatever state, without touching it.
    pub fn peek(&self, key: &EntryKey) -> Option<&Entry> {
        self.map.get(key)
    }

    /// Counters.
    pub fn stats(&self) -> StoreStats {
        StoreStats { entries: self.map.len() as u64, ..self.stats }
    }

    /// A read at `now` renews the entry's lifetime from `now`.
    pub fn refresh(&mut self, key: EntryKey, now: SimTime) {
        let Some(mut entry) = self.map.get(&key).copied() else { return };
        entry.expires_at = entry.expires_at.max(now.plus_ms(entry.lifetime_ms));
        self.stats.reads += 1;
        self.put(key, entry);
    }

    /// A write at `now` of an entry living `lifetime_ms`: creates the entry, or renews it when it
    /// is still alive (keeping the earliest visibility and the longest lifetime).
    pub fn write(&mut self, key: EntryKey, tokens: u64, lifetime_ms: u64, now: SimTime, visible_at: SimTime) {
        let fresh =
            Entry { tokens, lifetime_ms, expires_at: now.plus_ms(lifetime_ms), visible_at, last_used: 0 };
        let entry = match self.map.get(&key) {
            Some(old) if old.expires_at > now => Entry {
                lifetime_ms: old.lifetime_ms.max(lifetime_ms),
                expires_at: old.expires_at.max(now.plus_ms(old.lifetime_ms.max(lifetime_ms))),
                visible_at: old.visible_at.min(visible_at),
                ..fresh
            },
            Some(_) => fresh,
            None => {
                self.make_room(Self::tenant(&key), now);
                fresh
            }
        };
        self.stats.writes += 1;
        self.put(key, entry);
    }

    fn put(&mut self, key: EntryKey, mut entry: Entry) {
        let old = self.map.get(&key).map(|old| (old.expires_at, old.last_used));
        self.tick += 1;
        entry.last_used = self.tick;
        let tenant = self.tenants.entry(Self::tenant(&key)).or_default();
        if let Some((expires_at, last_used)) = old {
            tenant.by_expiry.remove(&(expires_at, key));
            tenant.by_use.remove(&(last_used, key));
        }
        tenant.by_expiry.insert((entry.expires_at, key));
        tenant.by_use.insert((entry.last_used, key));
        self.map.insert(key, entry);
    }

    /// Evicts from `tenant` alone until it has room for one more entry.
    fn make_room(&mut self, tenant: u32, now: SimTime) {
        let Some(indexes) = self.tenants.get_mut(&tenant) else { return };
        while indexes.by_use.len() >= self.capacity {
            let expired =
                indexes.by_expiry.first().filter(|(expires_at, _)| *expires_at <= now).map(|(_, key)| *key);
            let Some(victim) = expired.or_else(|| indexes.by_use.first().map(|(_, key)| *key)) else {
                return;
            };
            let Some(entry) = self.map.remove(&victim) else { return };
            indexes.by_expiry.remove(&(entry.expires_at, victim));
            indexes.by_use.remove(&(entry.last_used, victim));
            self.stats.evictions += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::Ttl;

    fn key(prefix: u128) -> EntryKey {
        EntryKey { scope: ScopeId(0), prefix }
    }

    #[test]
    fn eviction_takes_expired_entries_first_then_least_recently_used() {
        let mut store = EntryStore::new(2);
        store.write(key(1), 10, Ttl::FiveMinutes.ms(), SimTime(0), SimTime(0));
        store.write(key(2), 10, Ttl::OneHour.ms(), SimTime(1), SimTime(1));
        // Key 1 becomes the most recently used, and expires at 300,002 ms.
        store.refresh(key(1), SimTime(2));
        // At 600,000 ms key 1 has expired: it is evicted although key 2 was used less recently.
        store.write(key(3), 10, Ttl::FiveMinutes.ms(), SimTime(600_000), SimTime(600_000));
        assert!(store.peek(&key(1)).is_none(), "the expired entry is evicted first");
        assert!(store.peek(&key(2)).is_some());
        // Nothing expired now (key 2 lives 1h, key 3 just written): the least recently used goes.
        store.write(key(4), 10, Ttl::FiveMinutes.ms(), SimTime(600_001), SimTime(600_001));
        assert!(store.peek(&key(2)).is_none());
        assert_eq!(store.stats().evictions, 2);
        assert_eq!(store.stats().entries, 2);
    }

    #[test]
    fn rewrite_of_a_live_entry_keeps_earliest_visibility() {
        let mut store = EntryStore::new(8);
        store.write(key(1), 10, Ttl::FiveMinutes.ms(), SimTime(0), SimTime(500));
        store.write(key(1), 10, Ttl::FiveMinutes.ms(), SimTime(100), SimTime(700));
        let entry = store.peek(&key(1)).unwrap();
        assert_eq!(entry.visible_at, SimTime(500));
        assert_eq!(entry.expires_at, SimTime(300_100));
    }

    #[test]
    fn tenants_that_sent_the_same_prefix_land_in_different_buckets() {
        use std::hash::BuildHasher;
        // 20,000 workspaces' entries for one prefix, hashed as the store's map hashes them. A
        // table of 2^15 buckets indexes by the low 15 bits and keeps the top 7 as a control byte.
        let prefix = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210;
        let hashes: Vec<u64> = (0..20_000)
            .map(|workspace| {
                BuildPassThrough::default().hash_one(EntryKey { scope: ScopeId::new(workspace, 0), prefix })
            })
            .collect();
        let buckets: BTreeSet<u64> = hashes.iter().map(|hash| hash & 0x7fff).collect();
        let control_bytes: BTreeSet<u64> = hashes.iter().map(|hash| hash >> 57).collect();
        // Uniform hashes fill 32,768 × (1 − e^(−20,000 / 32,768)) ≈ 14,900 buckets; unmixed
        // scopes (workspace << 32) left all 20,000 in one bucket with one control byte.
        assert!(buckets.len() > 14_000, "{} buckets", buckets.len());
        assert_eq!(control_bytes.len(), 128, "every control byte is used");
        // The same holds for the scopes alone (the history's last request per scope).
        let scopes: BTreeSet<u64> = (0..20_000)
            .map(|workspace| BuildPassThrough::default().hash_one(ScopeId::new(workspace, 0)) & 0x7fff)
            .collect();
        assert!(scopes.len() > 14_000, "{} buckets", scopes.len());
    }

    #[test]
    fn capacity_is_per_tenant_and_one_tenant_never_evicts_another() {
        let mut store = EntryStore::new(2);
        let in_scope = |workspace: u32, prefix: u128| EntryKey { scope: ScopeId::new(workspace, 0), prefix };
        store.write(in_scope(0, 1), 10, Ttl::FiveMinutes.ms(), SimTime(0), SimTime(0));
        store.write(in_scope(0, 2), 10, Ttl::FiveMinutes.ms(), SimTime(1), SimTime(1));
        // Tenant 1 fills its own share: tenant 0's two entries stay.
        for prefix in 1..=5 {
            store.write(in_scope(1, prefix), 10, Ttl::FiveMinutes.ms(), SimTime(2), SimTime(2));
        }
        assert!(store.peek(&in_scope(0, 1)).is_some() && store.peek(&in_scope(0, 2)).is_some());
        assert_eq!(store.stats().entries, 4, "2 per tenant");
        assert_eq!(store.stats().evictions, 3, "tenant 1 evicted its own 3 oldest");
    }
}
