//! The API's own cache diagnostics (beta `cache-diagnosis-2026-04-07`): a request that carries
//! `diagnostics: {"previous_message_id": …}` is compared with the request behind that earlier
//! response, and the answer names where the two first parted — model, system, tools or
//! messages — with the tokens after that point.
//!
//! As documented, the comparison is about the requests' structure, not about what the cache
//! did: it holds only each request's position hashes and token counts (a *fingerprint*), and
//! reports a divergence even when the cache read everything it could. [`miss_reason_type`] maps
//! forkcache's own diagnosis onto the same types, so recorded diagnostics can be set beside it.

use std::collections::{BTreeMap, VecDeque};

use forkcache_wire::{Betas, CacheMissReason, CacheMissType, Diagnostics};

use super::miss::{Miss, MissCause};
use crate::prompt::{Dimension, PromptRef, Salts};

/// The type of a divergence in `dimension`.
pub fn miss_type_of(dimension: Dimension) -> CacheMissType {
    match dimension {
        Dimension::Tools => CacheMissType::ToolsChanged,
        Dimension::System => CacheMissType::SystemChanged,
        Dimension::Messages => CacheMissType::MessagesChanged,
        Dimension::Config => CacheMissType::Unavailable,
    }
}

/// The API's type for one of forkcache's misses, when the API would name one: the `*_changed`
/// types for a change of model or prefix; `None` for causes where the two requests' structure agrees and the
/// cache state alone explains the miss (expired, not written, evicted, out of reach).
pub fn miss_reason_type(miss: &Miss) -> Option<CacheMissType> {
    match miss.cause {
        MissCause::ModelChanged => Some(CacheMissType::ModelChanged),
        MissCause::PrefixChanged => Some(miss_type_of(miss.dimension.unwrap_or(Dimension::Messages))),
        MissCause::Cold
        | MissCause::NotWritten
        | MissCause::BelowMinimum
        | MissCause::LookbackExceeded
        | MissCause::Expired
        | MissCause::NotYetVisible
        | MissCause::NoBreakpoint => None,
    }
}

/// What is kept of a request for a later comparison: hashes, never content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fingerprint {
    model: String,
    /// Per position: its prefix hash.
    positions: Vec<u128>,
    /// Its input tokens.
    total_tokens: u64,
    salts: Salts,
    /// The betas the request named, sorted (their order in the header does not matter).
    betas: Vec<String>,
}

impl Fingerprint {
    /// The fingerprint of a request to `model` naming `betas`.
    pub fn of(model: &str, prompt: PromptRef, betas: &Betas) -> Fingerprint {
        let positions = (0..prompt.len() as u32).map(|i| prompt.position(i).hash).collect();
        Fingerprint {
            model: model.to_string(),
            positions,
            total_tokens: prompt.total_tokens(),
            salts: prompt.salts,
            betas: sorted(betas),
        }
    }

    /// How `prompt` (to `model`) parts from the request this fingerprint was taken of; `None`
    /// when one is a prefix of the other (a repeat, an extension, or a shorter request that
    /// changes nothing it keeps). The tokens missed are the earlier request's tokens from the
    /// divergence on (the documented example: a changed system prompt misses all 41,850 tokens
    /// of the previous request, and the 42 new ones are not counted).
    /// A different set of betas is `unavailable`: the diagnostics doc lists "the set of active
    /// `anthropic-beta` headers" among the prompt-affecting parameters.
    pub fn compare(&self, model: &str, prompt: PromptRef, betas: &Betas) -> Option<CacheMissReason> {
        if model != self.model {
            return Some(CacheMissReason::changed(CacheMissType::ModelChanged, self.total_tokens));
        }
        if sorted(betas) != self.betas {
            return Some(CacheMissReason::without_tokens(CacheMissType::Unavailable));
        }
        let diverges_at = (0..self.positions.len().min(prompt.len()) as u32)
            .find(|&i| self.positions[i as usize] != prompt.position(i).hash)?;
        if prompt.salt_difference_before(diverges_at, &self.salts).is_some() {
            return Some(CacheMissReason::without_tokens(CacheMissType::Unavailable));
        }
        let before = diverges_at.checked_sub(1).map_or(0, |p| prompt.tokens_at(p));
        let kind = miss_type_of(prompt.position(diverges_at).slot.dimension());
        Some(CacheMissReason::changed(kind, self.total_tokens.saturating_sub(before)))
    }
}

fn sorted(betas: &Betas) -> Vec<String> {
    let mut names = betas.names().to_vec();
    names.sort();
    names
}

/// Fingerprints kept per workspace and response id, the oldest forgotten first once
/// [`Fingerprints::LIMIT`] are held (the API keeps them "for a limited time").
#[derive(Default)]
pub struct Fingerprints {
    by_id: BTreeMap<(String, String), Fingerprint>,
    order: VecDeque<(String, String)>,
}

impl Fingerprints {
    /// Fingerprints held before the oldest is forgotten. Each holds 16 bytes per position, so
    /// this bounds the store at a few tens of MB even for long conversations.
    pub const LIMIT: usize = 1 << 12;

    /// The diagnostics of a request to `model` in `workspace` naming `previous` (`None` on a
    /// first turn); `betas` are the ones it names.
    pub fn diagnose(
        &self,
        workspace: &str,
        previous: Option<&str>,
        model: &str,
        prompt: PromptRef,
        betas: &Betas,
    ) -> Option<Diagnostics> {
        let previous = previous?;
        let reason = match self.by_id.get(&(workspace.to_string(), previous.to_string())) {
            None => Some(CacheMissReason::without_tokens(CacheMissType::PreviousMessageNotFound)),
            Some(fingerprint) => fingerprint.compare(model, prompt, betas),
        };
        reason.map(|cache_miss_reason| Diagnostics { cache_miss_reason })
    }

    /// Keeps `fingerprint` under the response id `id`.
    pub fn keep(&mut self, workspace: &str, id: &str, fingerprint: Fingerprint) {
        let key = (workspace.to_string(), id.to_string());
        if self.by_id.insert(key.clone(), fingerprint).is_none() {
            self.order.push_back(key);
        }
        while self.order.len() > Self::LIMIT {
            if let Some(oldest) = self.order.pop_front() {
                self.by_id.remove(&oldest);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::system_prompt_of as prompt;

    #[test]
    fn the_oldest_fingerprints_are_forgotten_past_the_limit() {
        let mut store = Fingerprints::default();
        let p = prompt(&[1, 2]);
        for id in 0..=Fingerprints::LIMIT {
            store.keep("w", &format!("msg_{id}"), Fingerprint::of("m", p.as_ref(), Betas::NONE));
        }
        assert_eq!(store.by_id.len(), Fingerprints::LIMIT);
        let not_found = store.diagnose("w", Some("msg_0"), "m", p.as_ref(), Betas::NONE).unwrap();
        assert_eq!(not_found.cache_miss_reason.kind, CacheMissType::PreviousMessageNotFound);
        // The newest is still there, and the same request repeated diverges nowhere.
        assert_eq!(
            store.diagnose("w", Some(&format!("msg_{}", Fingerprints::LIMIT)), "m", p.as_ref(), Betas::NONE),
            None
        );
        // Fingerprints are per workspace.
        let other = store
            .diagnose("v", Some(&format!("msg_{}", Fingerprints::LIMIT)), "m", p.as_ref(), Betas::NONE)
            .unwrap();
        assert_eq!(other.cache_miss_reason.kind, CacheMissType::PreviousMessageNotFound);
    }

    #[test]
    fn a_changed_set_of_betas_is_unavailable_and_their_order_does_not_matter() {
        let mut store = Fingerprints::default();
        let p = prompt(&[1, 2]);
        let two = Betas::from_names(["a-beta", "b-beta"]);
        store.keep("w", "msg_1", Fingerprint::of("m", p.as_ref(), &two));
        let reordered = Betas::from_header_values(["b-beta, a-beta"]);
        assert_eq!(store.diagnose("w", Some("msg_1"), "m", p.as_ref(), &reordered), None);
        let fewer = Betas::from_names(["a-beta"]);
        let changed = store.diagnose("w", Some("msg_1"), "m", p.as_ref(), &fewer).unwrap();
        assert_eq!(
            changed.cache_miss_reason,
            CacheMissReason { kind: CacheMissType::Unavailable, cache_missed_input_tokens: None }
        );
    }
}
