//! One agent design, every provider's cache: what each provider is made of here — its cache
//! rules (a [`Policy`]), its price table, and which of its models stands in for each Claude
//! model a scenario names.
//!
//! A scenario's requests keep their layout on every provider: tools, then the instructions
//! (`system`), then the messages, which is the order every provider documents its prefix in.
//! Token counts are the scenario's own on every provider (declared sizes, or the estimate):
//! real tokenizers differ by model, so a comparison shows what the cache rules and the prices
//! change, not the tokenizers. Which rules are documented and which inferred is said in each
//! policy's module ([`crate::cache::openai`], [`crate::cache::gemini`],
//! [`crate::cache::deepseek`]) and in `docs/providers.md`.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::billing::{
    BUILTIN_BEDROCK_PRICES_JSON, BUILTIN_DEEPSEEK_PRICES_JSON, BUILTIN_GEMINI_EXPLICIT_PRICES_JSON,
    BUILTIN_GEMINI_PRICES_JSON, BUILTIN_OPENAI_PRICES_JSON, BUILTIN_PRICES_JSON, PriceTable,
};
use crate::cache::Policy;

/// A provider whose cache forkcache prices.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Provider {
    /// Anthropic's API: breakpoints, 5m/1h TTLs, writes 1.25x/2x, reads 0.1x.
    #[default]
    Anthropic,
    /// Claude on Amazon Bedrock: Anthropic's rules with Bedrock's minimums.
    Bedrock,
    /// OpenAI: automatic, no write premium through GPT-5.5.
    Openai,
    /// Gemini's implicit cache: automatic, no write premium, per-model minimum.
    GeminiImplicit,
    /// Gemini's explicit cached objects: created at markers, billed at creation and for storage.
    GeminiExplicit,
    /// DeepSeek: automatic whole-prefix units on disk, hits at 2–3% of a miss.
    Deepseek,
}

/// A name `--provider` does not know.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown provider {given:?}; expected one of: {}", Provider::names().join(", "))]
pub struct UnknownProvider {
    /// What was given.
    pub given: String,
}

/// Which model of a provider stands in for a Claude model: by family (the tier of price and
/// capability the scenario chose).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tier {
    /// Opus, Fable, Mythos.
    Large,
    /// Sonnet and anything not named.
    Medium,
    /// Haiku.
    Small,
}

impl Tier {
    fn of(model: &str) -> Tier {
        if model.contains("haiku") {
            Tier::Small
        } else if ["opus", "fable", "mythos"].iter().any(|family| model.contains(family)) {
            Tier::Large
        } else {
            Tier::Medium
        }
    }
}

impl Provider {
    /// Every provider, in the order reports list them.
    pub const ALL: [Provider; 6] = [
        Provider::Anthropic,
        Provider::Bedrock,
        Provider::Openai,
        Provider::GeminiImplicit,
        Provider::GeminiExplicit,
        Provider::Deepseek,
    ];

    /// The name the command line and reports spell.
    pub fn name(self) -> &'static str {
        match self {
            Provider::Anthropic => "anthropic",
            Provider::Bedrock => "bedrock",
            Provider::Openai => "openai",
            Provider::GeminiImplicit => "gemini-implicit",
            Provider::GeminiExplicit => "gemini-explicit",
            Provider::Deepseek => "deepseek",
        }
    }

    /// Every name, in [`Provider::ALL`]'s order.
    pub fn names() -> Vec<&'static str> {
        Provider::ALL.iter().map(|provider| provider.name()).collect()
    }

    /// The provider a name spells.
    pub fn parse(name: &str) -> Result<Provider, UnknownProvider> {
        Provider::ALL
            .into_iter()
            .find(|provider| provider.name() == name)
            .ok_or_else(|| UnknownProvider { given: name.to_string() })
    }

    /// The cache rules: Bedrock runs Anthropic's.
    pub fn policy(self) -> Policy {
        match self {
            Provider::Anthropic | Provider::Bedrock => Policy::Anthropic,
            Provider::Openai => Policy::Openai,
            Provider::GeminiImplicit => Policy::GeminiImplicit,
            Provider::GeminiExplicit => Policy::GeminiExplicit,
            Provider::Deepseek => Policy::Deepseek,
        }
    }

    /// The policy a run on this provider uses: its own rules, or `policy` where the provider
    /// runs Anthropic's (anthropic, bedrock), so the idealised `longest-prefix` stays available.
    pub fn policy_over(self, policy: Policy) -> Policy {
        match self.policy() {
            Policy::Anthropic => policy,
            own => own,
        }
    }

    /// The built-in price table.
    #[allow(clippy::expect_used)] // the compiled-in tables are checked by the tests
    pub fn prices(self) -> PriceTable {
        let json = match self {
            Provider::Anthropic => BUILTIN_PRICES_JSON,
            Provider::Bedrock => BUILTIN_BEDROCK_PRICES_JSON,
            Provider::Openai => BUILTIN_OPENAI_PRICES_JSON,
            Provider::GeminiImplicit => BUILTIN_GEMINI_PRICES_JSON,
            Provider::GeminiExplicit => BUILTIN_GEMINI_EXPLICIT_PRICES_JSON,
            Provider::Deepseek => BUILTIN_DEEPSEEK_PRICES_JSON,
        };
        PriceTable::from_json(json).expect("the shipped price tables are valid")
    }

    /// The model that stands in for `model`: a Claude id becomes the provider's model of the
    /// same tier (on Anthropic and Bedrock, itself); any other id is kept (a scenario may name
    /// the provider's own model).
    pub fn model_for(self, model: &str) -> String {
        let tiers: [&str; 3] = match self {
            _ if !model.starts_with("claude") => return model.to_string(),
            Provider::Anthropic | Provider::Bedrock => return model.to_string(),
            Provider::Openai => ["gpt-5.5", "gpt-5.4", "gpt-5.4-mini"],
            Provider::GeminiImplicit | Provider::GeminiExplicit => {
                ["gemini-3.1-pro", "gemini-3.1-pro", "gemini-3.8-flash"]
            }
            Provider::Deepseek => ["deepseek-v4-pro", "deepseek-v4-pro", "deepseek-flash"],
        };
        let index = match Tier::of(model) {
            Tier::Large => 0,
            Tier::Medium => 1,
            Tier::Small => 2,
        };
        tiers[index].to_string()
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_provider_has_a_valid_table_pricing_each_model_it_stands_in_with() {
        for provider in Provider::ALL {
            let table = provider.prices();
            for claude in ["claude-opus-4-6", "claude-sonnet-4-6", "claude-haiku-4-5"] {
                let model = provider.model_for(claude);
                assert!(table.resolve(&model).known, "{provider}: {model} (for {claude}) is priced");
            }
        }
    }

    #[test]
    fn names_round_trip_and_an_unknown_name_lists_the_known_ones() {
        for provider in Provider::ALL {
            assert_eq!(Provider::parse(provider.name()), Ok(provider));
        }
        let err = Provider::parse("azure").unwrap_err().to_string();
        assert_eq!(
            err,
            "unknown provider \"azure\"; expected one of: anthropic, bedrock, openai, gemini-implicit, \
             gemini-explicit, deepseek"
        );
    }

    #[test]
    fn tiers_follow_the_claude_family() {
        assert_eq!(Provider::Openai.model_for("claude-opus-4-6"), "gpt-5.5");
        assert_eq!(Provider::Openai.model_for("claude-sonnet-4-6"), "gpt-5.4");
        assert_eq!(Provider::Openai.model_for("claude-haiku-4-5"), "gpt-5.4-mini");
        assert_eq!(Provider::Deepseek.model_for("claude-3-7-sonnet-latest"), "deepseek-v4-pro");
        // The provider's own ids (or any other) are kept.
        assert_eq!(Provider::Openai.model_for("gpt-5.6-terra"), "gpt-5.6-terra");
        assert_eq!(Provider::Bedrock.model_for("claude-haiku-4-5"), "claude-haiku-4-5");
    }
}
