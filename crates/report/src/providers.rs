//! The same agent on every provider: one scenario run on each provider's cache rules, prices
//! and models, and the bills side by side (`forkcache run --provider all`; the sweep behind
//! `reports/providers.*`).

use std::fmt::Write as _;

use forkcache_engine::billing::PriceTable;
use forkcache_engine::cache::Policy;
use forkcache_engine::provider::Provider;
use forkcache_scenario::{RunConfig, ScenarioError, ScenarioSpec, ScenarioTotals};

use crate::format::{dollars, grouped, savings_fraction, usd};

/// One provider's bill for the scenario.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderBill {
    /// The provider.
    pub provider: Provider,
    /// The model its main loop ran on.
    pub model: String,
    /// The cache rules applied.
    pub policy: Policy,
    /// The date of the prices applied.
    pub prices_date: String,
    /// Every request, summed.
    pub totals: ScenarioTotals,
}

/// The scenario's bill on each provider, in the order asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Comparison {
    /// The scenario's name.
    pub name: String,
    /// Its seed.
    pub seed: u64,
    /// One bill per provider.
    pub bills: Vec<ProviderBill>,
}

/// What a provider's cache does to a bill, in one line: the documented rules, and the
/// assumptions where the provider publishes none.
pub fn cache_rules_in_words(provider: Provider) -> &'static str {
    match provider {
        Provider::Anthropic => {
            "writes at marked breakpoints at 1.25x input (5m) or 2x (1h), reads at 0.1x, 20-block lookback"
        }
        Provider::Bedrock => {
            "Anthropic's rules with Bedrock's minimums per checkpoint; prices assumed Anthropic's list prices"
        }
        Provider::Openai => {
            "automatic at every message end past 1,024 tokens, writes free, reads 0.1x in 128-token steps; \
             idle lifetime 30 min (10 min on in_memory models), inferred"
        }
        Provider::GeminiImplicit => {
            "automatic past the model's minimum (4,096 on 3.x), writes free, reads 0.1x; idle lifetime 5 min, inferred"
        }
        Provider::GeminiExplicit => {
            "a cached object per marked prefix, created when none is live (whole prefix at input rate + storage \
             for the TTL), read at 0.1x, not renewed by use; the object-per-marker strategy is assumed"
        }
        Provider::Deepseek => {
            "automatic, whole prefix units only (a request's end, a prefix two requests share), writes free, \
             hits at 2-3% of a miss in 64-token units; idle lifetime 3 h, inferred"
        }
    }
}

impl Comparison {
    /// Runs `spec` on each of `providers`: Anthropic with `anthropic_prices`, the others with
    /// their built-in tables.
    pub fn run(
        spec: &ScenarioSpec,
        config: &RunConfig,
        anthropic_prices: &PriceTable,
        providers: &[Provider],
    ) -> Result<Comparison, ScenarioError> {
        let bills = providers
            .iter()
            .map(|&provider| {
                let on_provider = ScenarioSpec { provider, ..spec.clone() };
                let prices = match provider {
                    Provider::Anthropic => anthropic_prices.clone(),
                    other => other.prices(),
                };
                let report = forkcache_scenario::run(&on_provider, config, &prices)?;
                Ok(ProviderBill {
                    provider,
                    model: report.model,
                    policy: report.config.endpoint.cache.policy,
                    prices_date: prices.date.clone(),
                    totals: report.totals,
                })
            })
            .collect::<Result<Vec<_>, ScenarioError>>()?;
        Ok(Comparison { name: spec.name.clone(), seed: spec.seed, bills })
    }

    /// A table for people, with each cache's rules in words below it.
    pub fn to_table(&self) -> String {
        let mut out =
            format!("scenario {} · seed {} · the same agent on every provider\n\n", self.name, self.seed);
        let _ = writeln!(
            out,
            "{:<16} {:<18} {:>8} {:>11} {:>11} {:>11} {:>10} {:>10} {:>7}",
            "provider", "model", "requests", "read", "written", "uncached", "cost", "naive", "saved"
        );
        for bill in &self.bills {
            let t = &bill.totals;
            let _ = writeln!(
                out,
                "{:<16} {:<18} {:>8} {:>11} {:>11} {:>11} {:>10} {:>10} {:>6.1}%",
                bill.provider.name(),
                bill.model,
                t.requests,
                grouped(t.usage.cache_read_input_tokens),
                grouped(t.usage.cache_creation_input_tokens),
                grouped(t.usage.input_tokens),
                dollars(t.cost_nanousd),
                dollars(t.naive_nanousd),
                t.savings() * 100.0
            );
        }
        out.push_str("\nnaive: every request sent alone, sharing nothing. What each cache does:\n");
        for bill in &self.bills {
            let _ = writeln!(
                out,
                "  {:<16} {} (prices of {})",
                bill.provider.name(),
                cache_rules_in_words(bill.provider),
                bill.prices_date
            );
        }
        out.push_str("Token counts are the scenario's on every provider; real tokenizers differ by model.\n");
        out
    }

    /// One JSON document: the scenario, then each provider's bill with the report's totals.
    #[allow(clippy::expect_used)] // plain data: serializing it cannot fail
    pub fn to_json(&self) -> String {
        let providers: Vec<serde_json::Value> = self
            .bills
            .iter()
            .map(|bill| {
                serde_json::json!({
                    "provider": bill.provider.name(), "model": bill.model, "policy": bill.policy.name(),
                    "prices_date": bill.prices_date, "cache_rules": cache_rules_in_words(bill.provider),
                    "totals": bill.totals.to_json_value(),
                })
            })
            .collect();
        let json = serde_json::json!({
            "scenario": {"name": self.name, "seed": self.seed},
            "providers": providers,
        });
        serde_json::to_string(&json).expect("the comparison serializes")
    }

    /// One CSV row per provider: tokens, cost and naive cost in dollars with nine decimals.
    pub fn to_csv(&self) -> String {
        let mut out = String::from(
            "provider,model,policy,prices_date,requests,read_tokens,write_tokens,uncached_tokens,\
             output_tokens,cost_usd,naive_usd,savings\n",
        );
        for bill in &self.bills {
            let t = &bill.totals;
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{},{},{},{},{}",
                bill.provider.name(),
                bill.model,
                bill.policy.name(),
                bill.prices_date,
                t.requests,
                t.usage.cache_read_input_tokens,
                t.usage.cache_creation_input_tokens,
                t.usage.input_tokens,
                t.usage.output_tokens,
                usd(t.cost_nanousd),
                usd(t.naive_nanousd),
                savings_fraction(t.cost_nanousd, t.naive_nanousd)
            );
        }
        out
    }
}
