//! Prices, the API's `usage` object, and what a request costs.
//!
//! Money is integer nano-dollars throughout: every price in the table is a whole number of
//! nano-dollars per token (a $/MTok price with at most three decimals), so costs add up exactly.
//! Token-equivalents (cost ÷ the model's base input price) make numbers comparable across models;
//! they are kept in thousandths.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The price table shipped with forkcache (`fixtures/pricing.json`).
pub const BUILTIN_PRICES_JSON: &str = include_str!("../fixtures/pricing.json");

/// How cache writes and reads are billed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BillingProfile {
    /// The price table as written: 5m writes 1.25×, 1h writes 2×, reads 0.1× (or as listed).
    #[default]
    Anthropic,
    /// The seed articles' arithmetic: writes at 1.0× input, reads at 0.1× input.
    Seed,
}

impl BillingProfile {
    /// The profile's name as the command line spells it.
    pub fn name(self) -> &'static str {
        match self {
            BillingProfile::Anthropic => "anthropic",
            BillingProfile::Seed => "seed",
        }
    }
}

/// Per-token prices in nano-dollars (1 $/MTok = 1,000 nano-dollars per token).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Rates {
    /// Uncached input.
    pub input: u64,
    /// Cache write with the 5-minute TTL.
    pub write_5m: u64,
    /// Cache write with the 1-hour TTL.
    pub write_1h: u64,
    /// Cache read.
    pub read: u64,
    /// Output (thinking included).
    pub output: u64,
}

/// Hidden tool-use system prompt sizes, added once whenever `tools` is non-empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolPromptTokens {
    /// With `tool_choice` `auto` or `none` (or absent).
    pub auto: u64,
    /// With `tool_choice` `any` or `tool`.
    pub any: u64,
}

/// One model's row of the price table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelPrice {
    /// Human name, e.g. "Sonnet 4.6".
    pub name: String,
    /// API ids, the first one canonical; aliases resolve to the same cache scope.
    pub ids: Vec<String>,
    /// Prices as the table writes them.
    pub rates: Rates,
    /// Minimum cumulative prefix length a breakpoint needs to be cached.
    pub min_cacheable_tokens: u64,
    /// Hidden tool-use prompt; `None` where the table publishes no number (counted as 0).
    pub tool_prompt_tokens: Option<ToolPromptTokens>,
    /// The effort level that equals omitting `output_config.effort`.
    pub effort_default: String,
}

impl ModelPrice {
    /// The canonical API id.
    pub fn id(&self) -> &str {
        &self.ids[0]
    }

    /// The rates a billing profile applies to this model.
    pub fn rates(&self, profile: BillingProfile) -> Rates {
        match profile {
            BillingProfile::Anthropic => self.rates,
            BillingProfile::Seed => Rates {
                write_5m: self.rates.input,
                write_1h: self.rates.input,
                read: self.rates.input / 10,
                ..self.rates
            },
        }
    }
}

/// A model id resolved against the table.
#[derive(Clone, Copy, Debug)]
pub struct ResolvedModel<'t> {
    /// The row used for prices and cache constants.
    pub price: &'t ModelPrice,
    /// False when the id was not in the table and the default model priced it.
    pub known: bool,
}

/// The dated price table.
#[derive(Clone, Debug)]
pub struct PriceTable {
    /// The date the prices were read (stated in every report).
    pub date: String,
    /// Where they were read.
    pub source: String,
    models: Vec<ModelPrice>,
    by_id: BTreeMap<String, usize>,
    default_model: usize,
}

/// A price table that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum PriceTableError {
    /// The file is not the expected JSON shape.
    #[error("price table: {path}: {source}")]
    Json {
        /// Where in the document the problem is.
        path: String,
        /// What serde found.
        source: serde_json::Error,
    },
    /// A price is negative or finer than 0.001 $/MTok.
    #[error(
        "price table: model {model:?}: {field} = {value} is not a whole number of nano-dollars per token (prices are $/MTok with at most 3 decimals)"
    )]
    Price {
        /// Model name.
        model: String,
        /// Price field.
        field: &'static str,
        /// The value found.
        value: f64,
    },
    /// Two rows claim one id, or a row has none.
    #[error("price table: {0}")]
    Ids(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TableFile {
    date: String,
    source: String,
    default_model: String,
    models: Vec<ModelFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelFile {
    name: String,
    ids: Vec<String>,
    input: f64,
    cache_write_5m: f64,
    cache_write_1h: f64,
    cache_read: f64,
    output: f64,
    min_cacheable_tokens: u64,
    tool_prompt_tokens: Option<ToolPromptTokens>,
    #[serde(default = "default_effort")]
    effort_default: String,
    #[serde(default)]
    #[allow(dead_code)] // documentation for readers of the fixture
    note: Option<String>,
}

fn default_effort() -> String {
    "high".to_string()
}

impl PriceTable {
    /// The table shipped in `fixtures/pricing.json`.
    #[allow(clippy::expect_used)] // the compiled-in table is checked by the tests
    pub fn builtin() -> PriceTable {
        PriceTable::from_json(BUILTIN_PRICES_JSON).expect("the shipped price table is valid")
    }

    /// Parses a price table in the shape of `fixtures/pricing.json`.
    pub fn from_json(text: &str) -> Result<PriceTable, PriceTableError> {
        let de = &mut serde_json::Deserializer::from_str(text);
        let file: TableFile = serde_path_to_error::deserialize(de)
            .map_err(|e| PriceTableError::Json { path: e.path().to_string(), source: e.into_inner() })?;
        let models = file.models.into_iter().map(model_price).collect::<Result<Vec<_>, _>>()?;
        let by_id = index_ids(&models)?;
        let default_model = *by_id.get(&file.default_model).ok_or_else(|| {
            PriceTableError::Ids(format!("default_model {:?} is not an id of any model", file.default_model))
        })?;
        Ok(PriceTable { date: file.date, source: file.source, models, by_id, default_model })
    }

    /// Every model, in table order.
    pub fn models(&self) -> &[ModelPrice] {
        &self.models
    }

    /// The model that prices unknown ids.
    pub fn default_model(&self) -> &ModelPrice {
        &self.models[self.default_model]
    }

    /// Makes `id` the model that prices unknown ids.
    pub fn set_default_model(&mut self, id: &str) -> Result<(), PriceTableError> {
        let index = *self
            .by_id
            .get(id)
            .ok_or_else(|| PriceTableError::Ids(format!("{id:?} is not an id in the price table")))?;
        self.default_model = index;
        Ok(())
    }

    /// Looks a model id up; unknown ids are priced as the default model and flagged.
    pub fn resolve(&self, id: &str) -> ResolvedModel<'_> {
        match self.by_id.get(id) {
            Some(&index) => ResolvedModel { price: &self.models[index], known: true },
            None => ResolvedModel { price: self.default_model(), known: false },
        }
    }
}

fn model_price(file: ModelFile) -> Result<ModelPrice, PriceTableError> {
    let rate = |field: &'static str, value: f64| nanousd_per_token(&file.name, field, value);
    let rates = Rates {
        input: rate("input", file.input)?,
        write_5m: rate("cache_write_5m", file.cache_write_5m)?,
        write_1h: rate("cache_write_1h", file.cache_write_1h)?,
        read: rate("cache_read", file.cache_read)?,
        output: rate("output", file.output)?,
    };
    if file.ids.is_empty() {
        return Err(PriceTableError::Ids(format!("model {:?} has no ids", file.name)));
    }
    Ok(ModelPrice {
        name: file.name,
        ids: file.ids,
        rates,
        min_cacheable_tokens: file.min_cacheable_tokens,
        tool_prompt_tokens: file.tool_prompt_tokens,
        effort_default: file.effort_default,
    })
}

/// $/MTok → nano-dollars per token, refusing anything that is not exact.
fn nanousd_per_token(model: &str, field: &'static str, usd_per_mtok: f64) -> Result<u64, PriceTableError> {
    let scaled = usd_per_mtok * 1000.0;
    let rounded = scaled.round();
    if !(0.0..=1e12).contains(&rounded) || (scaled - rounded).abs() > 1e-6 {
        return Err(PriceTableError::Price { model: model.to_string(), field, value: usd_per_mtok });
    }
    Ok(rounded as u64)
}

fn index_ids(models: &[ModelPrice]) -> Result<BTreeMap<String, usize>, PriceTableError> {
    let mut by_id = BTreeMap::new();
    for (index, model) in models.iter().enumerate() {
        for id in &model.ids {
            if by_id.insert(id.clone(), index).is_some() {
                return Err(PriceTableError::Ids(format!("id {id:?} appears twice")));
            }
        }
    }
    Ok(by_id)
}

/// Always "standard": the mock has one service tier.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StandardTier;

impl Serialize for StandardTier {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str("standard")
    }
}

impl<'de> Deserialize<'de> for StandardTier {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(deserializer)?;
        Ok(StandardTier)
    }
}

/// `usage.cache_creation`: writes split by TTL.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheCreation {
    /// Tokens written with the 5-minute TTL.
    pub ephemeral_5m_input_tokens: u64,
    /// Tokens written with the 1-hour TTL.
    pub ephemeral_1h_input_tokens: u64,
}

/// The API's `usage` object, field for field.
///
/// `input_tokens` counts only tokens neither read from nor written to the cache; the total input
/// is the sum of the three input fields.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Uncached input: the tail after the last cache breakpoint.
    pub input_tokens: u64,
    /// Tokens written to the cache (= 5m + 1h).
    pub cache_creation_input_tokens: u64,
    /// Tokens read from the cache.
    pub cache_read_input_tokens: u64,
    /// Writes split by TTL.
    pub cache_creation: CacheCreation,
    /// Output tokens.
    pub output_tokens: u64,
    /// Always "standard".
    #[serde(default)]
    pub service_tier: StandardTier,
}

impl Usage {
    /// Builds a usage object from its parts, keeping `creation = 5m + 1h` true by construction.
    pub fn new(uncached: u64, read: u64, write_5m: u64, write_1h: u64, output: u64) -> Usage {
        Usage {
            input_tokens: uncached,
            cache_creation_input_tokens: write_5m + write_1h,
            cache_read_input_tokens: read,
            cache_creation: CacheCreation {
                ephemeral_5m_input_tokens: write_5m,
                ephemeral_1h_input_tokens: write_1h,
            },
            output_tokens: output,
            service_tier: StandardTier,
        }
    }

    /// read + creation + uncached.
    pub fn total_input_tokens(&self) -> u64 {
        self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens
    }

    /// Adds another usage into this one (for totals).
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.cache_creation_input_tokens += other.cache_creation_input_tokens;
        self.cache_read_input_tokens += other.cache_read_input_tokens;
        self.cache_creation.ephemeral_5m_input_tokens += other.cache_creation.ephemeral_5m_input_tokens;
        self.cache_creation.ephemeral_1h_input_tokens += other.cache_creation.ephemeral_1h_input_tokens;
        self.output_tokens += other.output_tokens;
    }
}

/// What a request cost, by component, in nano-dollars.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Cost {
    /// Uncached input.
    pub uncached_nanousd: u64,
    /// 5-minute writes.
    pub write_5m_nanousd: u64,
    /// 1-hour writes.
    pub write_1h_nanousd: u64,
    /// Reads.
    pub read_nanousd: u64,
    /// Output.
    pub output_nanousd: u64,
}

impl Cost {
    /// Prices a usage object at the given rates.
    pub fn of(usage: &Usage, rates: &Rates) -> Cost {
        Cost {
            uncached_nanousd: usage.input_tokens * rates.input,
            write_5m_nanousd: usage.cache_creation.ephemeral_5m_input_tokens * rates.write_5m,
            write_1h_nanousd: usage.cache_creation.ephemeral_1h_input_tokens * rates.write_1h,
            read_nanousd: usage.cache_read_input_tokens * rates.read,
            output_nanousd: usage.output_tokens * rates.output,
        }
    }

    /// Every component added up.
    pub fn total_nanousd(&self) -> u64 {
        self.uncached_nanousd
            + self.write_5m_nanousd
            + self.write_1h_nanousd
            + self.read_nanousd
            + self.output_nanousd
    }

    /// Adds another cost into this one (for totals).
    pub fn add(&mut self, other: &Cost) {
        self.uncached_nanousd += other.uncached_nanousd;
        self.write_5m_nanousd += other.write_5m_nanousd;
        self.write_1h_nanousd += other.write_1h_nanousd;
        self.read_nanousd += other.read_nanousd;
        self.output_nanousd += other.output_nanousd;
    }

    /// The total in US dollars, for display only.
    pub fn usd(&self) -> f64 {
        self.total_nanousd() as f64 / 1e9
    }

    /// The total as token-equivalents of the given base input price.
    pub fn token_equivalents(&self, input_rate: u64) -> TokenEquivalents {
        TokenEquivalents::of(self.total_nanousd(), input_rate)
    }
}

/// Cost ÷ base input price, in thousandths of a token (integer, so sums are exact).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct TokenEquivalents(pub u64);

impl TokenEquivalents {
    /// `nanousd` at `input_rate` nano-dollars per token, rounded to the nearest thousandth.
    pub fn of(nanousd: u64, input_rate: u64) -> TokenEquivalents {
        if input_rate == 0 {
            return TokenEquivalents(0);
        }
        let milli = (nanousd as u128 * 1000 + input_rate as u128 / 2) / input_rate as u128;
        TokenEquivalents(milli as u64)
    }

    /// Whole token-equivalents, for display only.
    pub fn value(self) -> f64 {
        self.0 as f64 / 1000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_table_loads_and_resolves_aliases() {
        let table = PriceTable::builtin();
        let sonnet = table.resolve("claude-sonnet-4-5");
        assert!(sonnet.known);
        assert_eq!(sonnet.price.id(), "claude-sonnet-4-5-20250929");
        // $3/MTok = 3,000 nano-dollars per token; reads $0.30 = 300.
        assert_eq!(sonnet.price.rates.input, 3_000);
        assert_eq!(sonnet.price.rates.read, 300);
        // Haiku 3's table values are rounded ($0.30 write, not 1.25 × $0.25): used as written.
        let haiku3 = table.resolve("claude-3-haiku-20240307").price;
        assert_eq!(haiku3.rates.write_5m, 300);
        assert_eq!(haiku3.rates.read, 30);
    }

    #[test]
    fn unknown_model_is_priced_as_default_and_flagged() {
        let table = PriceTable::builtin();
        let resolved = table.resolve("claude-opus-9");
        assert!(!resolved.known);
        assert_eq!(resolved.price.id(), "claude-sonnet-4-6");
    }

    #[test]
    fn seed_profile_writes_at_input_and_reads_at_a_tenth() {
        let table = PriceTable::builtin();
        let rates = table.resolve("claude-sonnet-4-6").price.rates(BillingProfile::Seed);
        assert_eq!((rates.write_5m, rates.write_1h, rates.read), (3_000, 3_000, 300));
    }

    #[test]
    fn g8_turn_2_costs_six_cents() {
        // Reference §6 G8 turn 2 at $3 in / $15 out: 4×3 + 187,354×0.30 + 36×3.75 + 297×15
        // per MTok = 12,000 + 56,206,200 + 135,000 + 4,455,000 nano-dollars = $0.0608082.
        let table = PriceTable::builtin();
        let rates = table.resolve("claude-sonnet-4-5").price.rates(BillingProfile::Anthropic);
        let usage = Usage::new(4, 187_354, 36, 0, 297);
        assert_eq!(Cost::of(&usage, &rates).total_nanousd(), 60_808_200);
    }

    #[test]
    fn token_equivalents_are_cost_over_input_price() {
        // 100,000 reads at 0.1× + 800 writes at 1.0× = 10,800 token-equivalents.
        let rates = PriceTable::builtin().resolve("claude-sonnet-4-6").price.rates(BillingProfile::Seed);
        let cost = Cost::of(&Usage::new(0, 100_000, 800, 0, 0), &rates);
        assert_eq!(cost.token_equivalents(rates.input), TokenEquivalents(10_800_000));
    }

    #[test]
    fn malformed_table_names_the_field() {
        let err = PriceTable::from_json(r#"{"date":"x","source":"y","default_model":"m","models":[{"name":"M","ids":["m"],"input":"3"}]}"#)
            .unwrap_err();
        assert!(err.to_string().contains("models[0].input"), "{err}");
        let err = PriceTable::from_json(r#"{"date":"x","source":"y","default_model":"m","models":[{"name":"M","ids":["m"],"input":3.0001,"cache_write_5m":1,"cache_write_1h":1,"cache_read":1,"output":1,"min_cacheable_tokens":1,"tool_prompt_tokens":null}]}"#)
            .unwrap_err();
        assert!(err.to_string().contains("input = 3.0001"), "{err}");
    }
}
