//! Prices, the API's `usage` object, and what a request costs.
//!
//! Money is integer nano-dollars throughout: every price in the table is a whole number of
//! nano-dollars per token (a $/MTok price with at most three decimals), so costs add up exactly.
//! Token-equivalents (cost ÷ the model's base input price) make numbers comparable across models;
//! they are kept in thousandths.
//!
//! The table is effective-dated: a row's prices may change on a date (`changes`), and a request
//! is priced with the prices in force on its date; without a date, the newest. A model the table
//! does not list is *unpriced* — its tokens are counted, its cost is unknown — unless the caller
//! names a model to price unknown ids as. Modifiers stack on the row's prices: a prompt-size band
//! (the whole request at the band's rates), fast mode (`speed: "fast"`), US-only inference
//! (`inference_geo: "us"`) and the batch tier.
//!
//! **The 1M-context beta** (`context-1m-2025-08-07`, [`forkcache_wire::CONTEXT_1M`]): a row
//! may offer it (`context_1m`: a larger window, until the beta's retirement). Sonnet 4 and 4.5
//! do: with the beta their window is 1,000,000 tokens instead of 200,000, and a request above
//! 200K input tokens (uncached + cache reads + cache writes) pays "legacy long-context pricing",
//! $6 / $22.50 per MTok, with the cache multipliers on the premium input (reference §2.1). The
//! premium is a band marked `with_context_1m`, which applies only while the beta is in effect
//! ([`Modifiers::context_1m`]). **Inferences:** (1) the band prices the whole request, output
//! included — the reference gives a premium output rate, which only a whole-request price uses;
//! (2) "retired 2026-04-30" means a request dated that day or later gets the table's window and
//! standard rates (the beta has no effect; the reference says nothing more), and a request
//! without a date is priced as of the table's newest prices, so it does not get the beta either;
//! (3) a *recorded* usage above the table's window on such a row ran with the beta (the API
//! accepted it), so it is priced at the premium ([`PriceTable::cost_of_recorded`]), whatever
//! its date.

mod listing;

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// The API's usage object and the request settings that change a price live on the wire.
pub use forkcache_wire::{CacheCreation, InferenceGeo, Speed, StandardTier, Usage};

/// The price table shipped with forkcache (`fixtures/pricing.json`).
pub const BUILTIN_PRICES_JSON: &str = include_str!("../../../../fixtures/pricing.json");

/// OpenAI's models, dated, with sources (`fixtures/pricing-openai.json`): what `import codex`
/// prices with. A row's write columns hold OpenAI's one write rate (= input through GPT-5.5).
pub const BUILTIN_OPENAI_PRICES_JSON: &str = include_str!("../../../../fixtures/pricing-openai.json");

/// Gemini's models (`fixtures/pricing-gemini.json`): the write columns hold the input rate
/// (no write premium).
pub const BUILTIN_GEMINI_PRICES_JSON: &str = include_str!("../../../../fixtures/pricing-gemini.json");

/// Gemini's explicit cached objects (`fixtures/pricing-gemini-explicit.json`): the write columns
/// hold input + cached + storage for the TTL (creation, the creating request's use, storage).
pub const BUILTIN_GEMINI_EXPLICIT_PRICES_JSON: &str =
    include_str!("../../../../fixtures/pricing-gemini-explicit.json");

/// DeepSeek's models at the off-peak rate (`fixtures/pricing-deepseek.json`): the write columns
/// hold the miss rate.
pub const BUILTIN_DEEPSEEK_PRICES_JSON: &str = include_str!("../../../../fixtures/pricing-deepseek.json");

/// Claude on Amazon Bedrock (`fixtures/pricing-bedrock.json`): Bedrock's minimums, Anthropic's
/// list prices (marked uncertain).
pub const BUILTIN_BEDROCK_PRICES_JSON: &str = include_str!("../../../../fixtures/pricing-bedrock.json");

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

/// A calendar day (UTC): the unit of the table's effective dates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PriceDate {
    // year × 10,000 + month × 100 + day, so the derived order is the calendar's.
    yyyymmdd: u32,
}

/// A date that is not `YYYY-MM-DD` (optionally followed by `T…`, as in an ISO 8601 timestamp).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a date: expected YYYY-MM-DD, e.g. 2026-10-07")]
pub struct DateError {
    /// What was given.
    pub text: String,
}

impl PriceDate {
    /// Reads `2026-10-07` or the date of a timestamp such as `2026-10-07T08:45:12.345Z`.
    pub fn parse(text: &str) -> Result<PriceDate, DateError> {
        let error = || DateError { text: text.to_string() };
        let day = text.get(..10).ok_or_else(error)?;
        if text.len() > 10 && !text[10..].starts_with('T') {
            return Err(error());
        }
        let bytes = day.as_bytes();
        if bytes[4] != b'-' || bytes[7] != b'-' {
            return Err(error());
        }
        let number = |range: std::ops::Range<usize>| -> Result<u32, DateError> {
            let part = &day[range];
            if !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(error());
            }
            part.parse().map_err(|_| error())
        };
        let (year, month, day_of_month) = (number(0..4)?, number(5..7)?, number(8..10)?);
        if !(1..=12).contains(&month) || !(1..=31).contains(&day_of_month) {
            return Err(error());
        }
        Ok(PriceDate { yyyymmdd: year * 10_000 + month * 100 + day_of_month })
    }

    /// The UTC day of an instant given in ms since 1970-01-01 (Howard Hinnant's
    /// `civil_from_days`).
    pub fn of_epoch_ms(ms: i64) -> PriceDate {
        let days = ms.div_euclid(86_400_000) + 719_468;
        let era = days.div_euclid(146_097);
        let day_of_era = days - era * 146_097;
        let year_of_era =
            (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
        let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
        let shifted_month = (5 * day_of_year + 2) / 153;
        let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
        let month = if shifted_month < 10 { shifted_month + 3 } else { shifted_month - 9 };
        let year = year_of_era + era * 400 + i64::from(month <= 2);
        let yyyymmdd = year.clamp(0, 9_999) * 10_000 + month * 100 + day;
        PriceDate { yyyymmdd: yyyymmdd as u32 }
    }
}

impl fmt::Display for PriceDate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.yyyymmdd;
        write!(f, "{:04}-{:02}-{:02}", d / 10_000, d / 100 % 100, d % 100)
    }
}

impl Serialize for PriceDate {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PriceDate {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        PriceDate::parse(&text).map_err(serde::de::Error::custom)
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

/// Rates for requests whose total input (uncached + read + written) is above a threshold; the
/// band prices every category of the request, output included.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Band {
    /// The band applies to requests with more total input tokens than this.
    pub above_input_tokens: u64,
    /// Its rates.
    pub rates: Rates,
    /// The band applies only while the 1M-context beta is in effect ([`Modifiers::context_1m`]):
    /// legacy long-context pricing.
    pub with_context_1m: bool,
}

/// A row's offer of the 1M-context beta: a larger window, until the beta's retirement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Context1m {
    /// The context window with the beta, in tokens.
    pub window: u64,
    /// The beta's retirement: the first day a request no longer gets it.
    pub until: PriceDate,
}

/// The request settings that change a model's prices.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Modifiers {
    /// Fast mode.
    pub speed: Speed,
    /// Data residency.
    pub geo: InferenceGeo,
    /// The Message Batches tier (half price).
    pub batch: bool,
    /// The 1M-context beta is in effect: named, on a row that offers it on the request's date
    /// (or, for a recorded usage, evident from its size). Turns on the row's `with_context_1m`
    /// bands.
    pub context_1m: bool,
}

/// One model's row of the price table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelPrice {
    /// Human name, e.g. "Sonnet 4.6".
    pub name: String,
    /// API ids, the first one canonical; aliases resolve to the same cache scope.
    pub ids: Vec<String>,
    /// Prices as the table writes them, from the row's start.
    pub rates: Rates,
    /// Later prices, each in force from its date on (ascending dates).
    pub changes: Vec<(PriceDate, Rates)>,
    /// Prompt-size bands above the base rates (ascending thresholds).
    pub bands: Vec<Band>,
    /// Fast-mode rates; `None` where the model has no fast mode.
    pub fast: Option<Rates>,
    /// The `inference_geo: "us"` multiplier in thousandths (1,100 = ×1.1); `None`: no premium.
    pub us_geo_permille: Option<u64>,
    /// Minimum cumulative prefix length a breakpoint needs to be cached.
    pub min_cacheable_tokens: u64,
    /// Hidden tool-use prompt; `None` where the table publishes no number (counted as 0).
    pub tool_prompt_tokens: Option<ToolPromptTokens>,
    /// The effort level that equals omitting `output_config.effort`.
    pub effort_default: String,
    /// Context window in tokens, where known.
    pub context_window: Option<u64>,
    /// The 1M-context beta, where the row offers it.
    pub context_1m: Option<Context1m>,
    /// Largest `max_tokens` the model accepts, where known.
    pub max_output_tokens: Option<u64>,
    /// The model's tokens for the same text relative to the `bytes4` estimate, in thousandths
    /// (1,300: the tokenizer of Opus 4.7 and later counts about 30% more).
    pub tokens_per_bytes4_permille: u64,
    /// Where the row was read, and when.
    pub source: Option<String>,
    /// Fields whose values were not found in a primary source.
    pub uncertain: Vec<String>,
    /// Anything a reader of the row should know.
    pub note: Option<String>,
}

impl ModelPrice {
    /// The canonical API id.
    pub fn id(&self) -> &str {
        &self.ids[0]
    }

    /// The base rates in force on `date` (the newest when `None`).
    pub fn rates_on(&self, date: Option<PriceDate>) -> Rates {
        let in_force = |(from, _): &&(PriceDate, Rates)| date.is_none_or(|date| *from <= date);
        self.changes.iter().rev().find(in_force).map_or(self.rates, |(_, rates)| *rates)
    }

    /// The rates a billing profile applies to this model (base rates, newest prices).
    pub fn rates(&self, profile: BillingProfile) -> Rates {
        profile_rates(self.rates_on(None), profile)
    }

    /// The context window with the 1M-context beta on `date`: `Some` while the row offers the
    /// beta (a request without a date is priced as of the table's newest prices, after the
    /// retirement of the only such beta modelled, so it gets `None`).
    pub fn context_1m_window(&self, date: Option<PriceDate>) -> Option<u64> {
        let offer = self.context_1m?;
        date.is_some_and(|date| date < offer.until).then_some(offer.window)
    }

    /// The context window a request gets, with the 1M-context beta named or not.
    pub fn context_window_with(&self, context_1m_named: bool, date: Option<PriceDate>) -> Option<u64> {
        match context_1m_named {
            true => self.context_1m_window(date).or(self.context_window),
            false => self.context_window,
        }
    }

    /// Whether a recorded usage evidently ran with the 1M-context beta: its total input is past
    /// the table's window on a row that offers the beta, and the API accepted it. Whatever its
    /// date: a recorded request past the window after the beta's retirement contradicts the
    /// retirement, not the record, and the long-context rates are the best estimate of its cost.
    pub fn context_1m_evident(&self, usage: &Usage) -> bool {
        let past_window = self.context_window.is_some_and(|window| usage.total_input_tokens() > window);
        past_window && self.context_1m.is_some()
    }

    /// What `usage` costs on `date` under `modifiers`; `None` when the model has no price for
    /// them (fast mode on a model without one).
    pub fn cost(
        &self,
        profile: BillingProfile,
        date: Option<PriceDate>,
        usage: &Usage,
        modifiers: Modifiers,
    ) -> Option<Cost> {
        let total_input = usage.total_input_tokens();
        let band = self
            .bands
            .iter()
            .rev()
            .filter(|band| modifiers.context_1m || !band.with_context_1m)
            .find(|band| total_input > band.above_input_tokens);
        let rates = match (modifiers.speed, band) {
            (Speed::Fast, _) => self.fast?,
            (Speed::Standard, Some(band)) => band.rates,
            (Speed::Standard, None) => self.rates_on(date),
        };
        let mut cost = Cost::of(usage, &profile_rates(rates, profile));
        if modifiers.geo == InferenceGeo::Us {
            cost = cost.scaled(self.us_geo_permille.unwrap_or(1_000), 1_000);
        }
        if modifiers.batch {
            cost = cost.scaled(1, 2);
        }
        Some(cost)
    }
}

fn profile_rates(rates: Rates, profile: BillingProfile) -> Rates {
    match profile {
        BillingProfile::Anthropic => rates,
        BillingProfile::Seed => {
            Rates { write_5m: rates.input, write_1h: rates.input, read: rates.input / 10, ..rates }
        }
    }
}

/// A model id resolved against the table.
#[derive(Clone, Copy, Debug)]
pub struct ResolvedModel<'t> {
    /// The row whose cache constants (minimum length, tool prompt) the request is simulated with
    /// and, when `priced`, whose prices it pays.
    pub price: &'t ModelPrice,
    /// False when the id is not in the table.
    pub known: bool,
    /// False when the request's cost is unknown: an unknown id with no `price_unknown_as`.
    pub priced: bool,
}

/// The dated price table.
#[derive(Clone, Debug)]
pub struct PriceTable {
    /// The newest date the prices were read (stated in every report; requests without a date
    /// are priced as of it).
    pub date: String,
    /// Where they were read.
    pub source: String,
    models: Vec<ModelPrice>,
    by_id: BTreeMap<String, usize>,
    // Whose cache constants an unknown id is simulated with (its cost stays unknown).
    constants_for_unknown: usize,
    // Whose prices an unknown id pays, when the user asked for that.
    price_unknown_as: Option<usize>,
}

/// A price table that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum PriceTableError {
    /// The file is not the expected JSON shape.
    #[error("price table: {path}: {message}")]
    Json {
        /// Where in the document the problem is.
        path: String,
        /// What is wrong there.
        message: String,
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
    /// Two rows claim one id, a row has none, or a named model is not in the table.
    #[error("price table: {0}")]
    Ids(String),
    /// A row is inconsistent (dates out of order, an unknown field marked uncertain, …).
    #[error("price table: model {model:?}: {message}")]
    Row {
        /// Model name.
        model: String,
        /// What is wrong.
        message: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TableFile {
    date: PriceDate,
    source: String,
    /// The model whose cache constants simulate ids the table does not list.
    #[serde(alias = "default_model")]
    constants_for_unknown: String,
    models: Vec<ModelFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RatesFile {
    input: f64,
    cache_write_5m: f64,
    cache_write_1h: f64,
    cache_read: f64,
    output: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ChangeFile {
    from: PriceDate,
    input: Option<f64>,
    cache_write_5m: Option<f64>,
    cache_write_1h: Option<f64>,
    cache_read: Option<f64>,
    output: Option<f64>,
    #[serde(default)]
    #[allow(dead_code)] // documentation for readers of the fixture
    note: Option<String>,
}

// The five prices are spelled out here and in `ModelFile` rather than flattened from
// `RatesFile`: serde cannot combine `flatten` with `deny_unknown_fields`, and a misspelt price
// must be an error.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BandFile {
    above_input_tokens: u64,
    input: f64,
    cache_write_5m: f64,
    cache_write_1h: f64,
    cache_read: f64,
    output: f64,
    #[serde(default)]
    with_context_1m: bool,
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
    changes: Vec<ChangeFile>,
    #[serde(default)]
    bands: Vec<BandFile>,
    #[serde(default)]
    fast: Option<RatesFile>,
    #[serde(default)]
    inference_geo_us: Option<f64>,
    #[serde(default)]
    context_window: Option<u64>,
    #[serde(default)]
    context_1m: Option<Context1m>,
    #[serde(default)]
    max_output_tokens: Option<u64>,
    #[serde(default)]
    tokens_per_bytes4: Option<f64>,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    uncertain: Vec<String>,
    #[serde(default)]
    note: Option<String>,
}

/// Row fields a table may mark uncertain.
const ROW_FIELDS: &[&str] = &[
    "ids",
    "input",
    "cache_write_5m",
    "cache_write_1h",
    "cache_read",
    "output",
    "min_cacheable_tokens",
    "tool_prompt_tokens",
    "changes",
    "bands",
    "fast",
    "inference_geo_us",
    "context_window",
    "context_1m",
    "max_output_tokens",
    "tokens_per_bytes4",
];

fn default_effort() -> String {
    "high".to_string()
}

impl PriceTable {
    /// The table shipped in `fixtures/pricing.json`.
    #[allow(clippy::expect_used)] // the compiled-in table is checked by the tests
    pub fn builtin() -> PriceTable {
        PriceTable::from_json(BUILTIN_PRICES_JSON).expect("the shipped price table is valid")
    }

    /// OpenAI's table shipped in `fixtures/pricing-openai.json`.
    #[allow(clippy::expect_used)] // the compiled-in table is checked by the tests
    pub fn builtin_openai() -> PriceTable {
        PriceTable::from_json(BUILTIN_OPENAI_PRICES_JSON).expect("the shipped OpenAI price table is valid")
    }

    /// Parses a price table in the shape of `fixtures/pricing.json`.
    pub fn from_json(text: &str) -> Result<PriceTable, PriceTableError> {
        let de = &mut serde_json::Deserializer::from_str(text);
        let file: TableFile = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            PriceTableError::Json { path, message: forkcache_wire::json::without_position(e.inner()) }
        })?;
        let models = file.models.into_iter().map(model_price).collect::<Result<Vec<_>, _>>()?;
        let by_id = index_ids(&models)?;
        let constants_for_unknown = *by_id.get(&file.constants_for_unknown).ok_or_else(|| {
            let id = &file.constants_for_unknown;
            PriceTableError::Ids(format!("constants_for_unknown {id:?} is not an id of any model"))
        })?;
        Ok(PriceTable {
            date: file.date.to_string(),
            source: file.source,
            models,
            by_id,
            constants_for_unknown,
            price_unknown_as: None,
        })
    }

    /// Every model, in table order.
    pub fn models(&self) -> &[ModelPrice] {
        &self.models
    }

    /// Prices ids the table does not list as `id` (by default they are unpriced).
    pub fn set_price_unknown_as(&mut self, id: &str) -> Result<(), PriceTableError> {
        let index = *self
            .by_id
            .get(id)
            .ok_or_else(|| PriceTableError::Ids(format!("{id:?} is not an id in the price table")))?;
        self.price_unknown_as = Some(index);
        Ok(())
    }

    /// The row of a listed id; `None` for an id the table does not list.
    pub fn row(&self, id: &str) -> Option<&ModelPrice> {
        self.by_id.get(id).map(|&index| &self.models[index])
    }

    /// Looks a model id up: a listed id is priced by its row; an unknown one is simulated with
    /// the table's constants and unpriced, or priced as `price_unknown_as` when set.
    pub fn resolve(&self, id: &str) -> ResolvedModel<'_> {
        match (self.by_id.get(id), self.price_unknown_as) {
            (Some(&index), _) => ResolvedModel { price: &self.models[index], known: true, priced: true },
            (None, Some(index)) => ResolvedModel { price: &self.models[index], known: false, priced: true },
            (None, None) => {
                ResolvedModel { price: &self.models[self.constants_for_unknown], known: false, priced: false }
            }
        }
    }

    /// What a usage object recorded from the real API cost on `date` (the newest prices when
    /// `None`); `None` when the model is unpriced or has no price for the request's modifiers.
    /// A usage past the table's window on a row offering the 1M-context beta ran with it
    /// ([`ModelPrice::context_1m_evident`]) and pays its long-context rates.
    pub fn cost_of_recorded(
        &self,
        model: &str,
        date: Option<PriceDate>,
        recorded: &RecordedUsage,
    ) -> Option<Cost> {
        self.cost_of_recorded_usage(model, date, &recorded.usage, recorded.modifiers)
    }

    /// [`PriceTable::cost_of_recorded`] for a usage and the modifiers its record names.
    pub fn cost_of_recorded_usage(
        &self,
        model: &str,
        date: Option<PriceDate>,
        usage: &Usage,
        modifiers: Modifiers,
    ) -> Option<Cost> {
        let resolved = self.resolve(model);
        if !resolved.priced {
            return None;
        }
        let context_1m = modifiers.context_1m || resolved.price.context_1m_evident(usage);
        resolved.price.cost(BillingProfile::Anthropic, date, usage, Modifiers { context_1m, ..modifiers })
    }
}

fn model_price(file: ModelFile) -> Result<ModelPrice, PriceTableError> {
    let name = file.name.clone();
    let row_error = |message: String| PriceTableError::Row { model: name.clone(), message };
    if file.ids.is_empty() {
        return Err(PriceTableError::Ids(format!("model {:?} has no ids", file.name)));
    }
    if let Some(unknown) = file.uncertain.iter().find(|field| !ROW_FIELDS.contains(&field.as_str())) {
        return Err(row_error(format!("uncertain names {unknown:?}, which is not a field of a row")));
    }
    let rates = rates_of(
        &file.name,
        &RatesFile {
            input: file.input,
            cache_write_5m: file.cache_write_5m,
            cache_write_1h: file.cache_write_1h,
            cache_read: file.cache_read,
            output: file.output,
        },
    )?;
    let changes = changes_of(&file.name, rates, &file.changes)?;
    if changes.windows(2).any(|pair| pair[0].0 >= pair[1].0) {
        return Err(row_error("changes must be in ascending date order".to_string()));
    }
    let bands = file
        .bands
        .iter()
        .map(|band| {
            let rates = RatesFile {
                input: band.input,
                cache_write_5m: band.cache_write_5m,
                cache_write_1h: band.cache_write_1h,
                cache_read: band.cache_read,
                output: band.output,
            };
            Ok(Band {
                above_input_tokens: band.above_input_tokens,
                rates: rates_of(&file.name, &rates)?,
                with_context_1m: band.with_context_1m,
            })
        })
        .collect::<Result<Vec<_>, PriceTableError>>()?;
    if file.context_1m.is_none() && bands.iter().any(|band| band.with_context_1m) {
        return Err(row_error("a band is with_context_1m but the row has no context_1m".to_string()));
    }
    if bands.windows(2).any(|pair| pair[0].above_input_tokens >= pair[1].above_input_tokens) {
        return Err(row_error("bands must be in ascending above_input_tokens order".to_string()));
    }
    Ok(ModelPrice {
        rates,
        changes,
        bands,
        fast: file.fast.as_ref().map(|fast| rates_of(&file.name, fast)).transpose()?,
        us_geo_permille: file
            .inference_geo_us
            .map(|m| permille(&file.name, "inference_geo_us", m))
            .transpose()?,
        tokens_per_bytes4_permille: permille(
            &file.name,
            "tokens_per_bytes4",
            file.tokens_per_bytes4.unwrap_or(1.0),
        )?,
        name: file.name,
        ids: file.ids,
        min_cacheable_tokens: file.min_cacheable_tokens,
        tool_prompt_tokens: file.tool_prompt_tokens,
        effort_default: file.effort_default,
        context_window: file.context_window,
        context_1m: file.context_1m,
        max_output_tokens: file.max_output_tokens,
        source: file.source,
        uncertain: file.uncertain,
        note: file.note,
    })
}

fn rates_of(model: &str, file: &RatesFile) -> Result<Rates, PriceTableError> {
    let rate = |field: &'static str, value: f64| nanousd_per_token(model, field, value);
    Ok(Rates {
        input: rate("input", file.input)?,
        write_5m: rate("cache_write_5m", file.cache_write_5m)?,
        write_1h: rate("cache_write_1h", file.cache_write_1h)?,
        read: rate("cache_read", file.cache_read)?,
        output: rate("output", file.output)?,
    })
}

/// Each change overrides the fields it names, on top of the prices before it.
fn changes_of(
    model: &str,
    base: Rates,
    changes: &[ChangeFile],
) -> Result<Vec<(PriceDate, Rates)>, PriceTableError> {
    let mut current = base;
    let mut out = Vec::with_capacity(changes.len());
    for change in changes {
        let rate = |field: &'static str, value: Option<f64>, old: u64| {
            value.map_or(Ok(old), |value| nanousd_per_token(model, field, value))
        };
        current = Rates {
            input: rate("input", change.input, current.input)?,
            write_5m: rate("cache_write_5m", change.cache_write_5m, current.write_5m)?,
            write_1h: rate("cache_write_1h", change.cache_write_1h, current.write_1h)?,
            read: rate("cache_read", change.cache_read, current.read)?,
            output: rate("output", change.output, current.output)?,
        };
        out.push((change.from, current));
    }
    Ok(out)
}

/// $/MTok → nano-dollars per token, refusing anything that is not exact.
fn nanousd_per_token(model: &str, field: &'static str, usd_per_mtok: f64) -> Result<u64, PriceTableError> {
    exact_thousandths(usd_per_mtok).ok_or_else(|| PriceTableError::Price {
        model: model.to_string(),
        field,
        value: usd_per_mtok,
    })
}

/// A multiplier (×1.1) → thousandths (1,100), refusing anything finer.
fn permille(model: &str, field: &'static str, multiplier: f64) -> Result<u64, PriceTableError> {
    exact_thousandths(multiplier).filter(|&p| p > 0).ok_or_else(|| PriceTableError::Row {
        model: model.to_string(),
        message: format!("{field} = {multiplier} must be a positive number with at most 3 decimals"),
    })
}

fn exact_thousandths(value: f64) -> Option<u64> {
    let scaled = value * 1000.0;
    let rounded = scaled.round();
    ((0.0..=1e12).contains(&rounded) && (scaled - rounded).abs() <= 1e-6).then_some(rounded as u64)
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

/// A request's tokens as every provider's cache splits them: read from the cache, written to
/// it, neither, and generated. Each provider's own usage object converts into it (Anthropic's
/// [`Usage`] below), so whatever compares providers reads these four, never one provider's
/// field names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct NeutralUsage {
    /// Input tokens read from the cache.
    pub read: u64,
    /// Input tokens written to the cache (every TTL together).
    pub written: u64,
    /// Input tokens neither read nor written.
    pub uncached: u64,
    /// Output tokens (reasoning included where a provider counts it there).
    pub output: u64,
}

impl NeutralUsage {
    /// Every input token: read + written + uncached.
    pub fn total_input(&self) -> u64 {
        self.read + self.written + self.uncached
    }
}

impl From<&Usage> for NeutralUsage {
    fn from(usage: &Usage) -> NeutralUsage {
        NeutralUsage {
            read: usage.cache_read_input_tokens,
            written: usage.cache_creation_input_tokens,
            uncached: usage.input_tokens,
            output: usage.output_tokens,
        }
    }
}

/// A `usage` object as the real API returned it: the counts forkcache prices, the modifiers
/// that change the price, and the object itself, kept as recorded.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedUsage {
    /// The token counts. A write without the 5m/1h split (older clients) counts as 5-minute.
    pub usage: Usage,
    /// `speed`, `inference_geo` and a `batch` service tier.
    pub modifiers: Modifiers,
    /// False when the write had no 5m/1h split and was taken as 5-minute.
    pub ttl_split_known: bool,
    /// The object as recorded, unknown fields included.
    pub raw: serde_json::Value,
}

impl RecordedUsage {
    /// The size check [`RecordedUsage::from_value`] makes, on a usage object's raw counts (those
    /// that are not whole numbers count as 0 here): an error naming the count past the cap.
    pub fn check_sizes(raw: &serde_json::Value) -> Result<(), String> {
        let count = |field: &str| raw.get(field).and_then(serde_json::Value::as_u64).unwrap_or(0);
        let split = raw.get("cache_creation").filter(|split| split.is_object());
        let part =
            |field: &str| split.and_then(|s| s.get(field)).and_then(serde_json::Value::as_u64).unwrap_or(0);
        let (write_5m, write_1h) = match split {
            Some(_) => (part("ephemeral_5m_input_tokens"), part("ephemeral_1h_input_tokens")),
            None => (count("cache_creation_input_tokens"), 0),
        };
        let (uncached, read, output) =
            (count("input_tokens"), count("cache_read_input_tokens"), count("output_tokens"));
        check_recorded_sizes(uncached, read, write_5m, write_1h, output)
    }

    /// Reads a usage object; an error names the field that is missing or of the wrong type, or
    /// the count past [`crate::prompt::MAX_DECLARED_TOKENS`].
    pub fn from_value(raw: serde_json::Value) -> Result<RecordedUsage, String> {
        let count = |field: &str| -> Result<u64, String> {
            match raw.get(field) {
                None | Some(serde_json::Value::Null) => Ok(0),
                Some(value) => {
                    value.as_u64().ok_or_else(|| format!("usage.{field}: expected a whole number"))
                }
            }
        };
        let (uncached, read, output) =
            (count("input_tokens")?, count("cache_read_input_tokens")?, count("output_tokens")?);
        let creation = count("cache_creation_input_tokens")?;
        let split = raw.get("cache_creation").filter(|split| split.is_object());
        let (write_5m, write_1h) = match split {
            Some(split) => {
                let part = |field: &str| split.get(field).and_then(serde_json::Value::as_u64).unwrap_or(0);
                (part("ephemeral_5m_input_tokens"), part("ephemeral_1h_input_tokens"))
            }
            None => (creation, 0),
        };
        check_recorded_sizes(uncached, read, write_5m, write_1h, output)?;
        let mut usage = Usage::new(uncached, read, write_5m, write_1h, output);
        let text = |field: &str| raw.get(field).and_then(serde_json::Value::as_str);
        usage.speed = text("speed").and_then(|s| serde_json::from_value(s.into()).ok());
        usage.inference_geo = text("inference_geo").and_then(|g| serde_json::from_value(g.into()).ok());
        let modifiers = Modifiers {
            speed: usage.speed.unwrap_or_default(),
            geo: usage.inference_geo.unwrap_or_default(),
            batch: text("service_tier") == Some("batch"),
            // A usage object does not say; `cost_of_recorded` infers it from the size.
            context_1m: false,
        };
        Ok(RecordedUsage { usage, modifiers, ttl_split_known: split.is_some(), raw })
    }
}

/// A recorded usage past [`crate::prompt::MAX_DECLARED_TOKENS`] input or output tokens is no real
/// request's (the largest context window is a million tokens), and its counts summed would wrap:
/// it is refused, naming the count, like a declared size past the same cap.
fn check_recorded_sizes(
    uncached: u64,
    read: u64,
    write_5m: u64,
    write_1h: u64,
    output: u64,
) -> Result<(), String> {
    let cap = crate::prompt::MAX_DECLARED_TOKENS;
    let input = [uncached, read, write_5m, write_1h].iter().map(|&count| u128::from(count)).sum::<u128>();
    if input > u128::from(cap) {
        return Err(format!(
            "usage: input tokens (uncached + cache read + cache writes) expected at most {cap}, got {input}"
        ));
    }
    if output > cap {
        return Err(format!("usage.output_tokens: expected at most {cap}, got {output}"));
    }
    Ok(())
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

    /// Every component × `numerator / denominator`, each rounded to the nearest nano-dollar
    /// (halves up): how a multiplier such as ×1.1 for US-only inference applies.
    pub fn scaled(&self, numerator: u64, denominator: u64) -> Cost {
        let scale = |nanousd: u64| {
            ((nanousd as u128 * numerator as u128 + denominator as u128 / 2) / denominator as u128) as u64
        };
        Cost {
            uncached_nanousd: scale(self.uncached_nanousd),
            write_5m_nanousd: scale(self.write_5m_nanousd),
            write_1h_nanousd: scale(self.write_1h_nanousd),
            read_nanousd: scale(self.read_nanousd),
            output_nanousd: scale(self.output_nanousd),
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
    fn the_day_of_an_instant() {
        let day = |ms: i64| PriceDate::of_epoch_ms(ms).to_string();
        assert_eq!(day(0), "1970-01-01");
        assert_eq!(day(-1), "1969-12-31");
        // 1970–1999: 30 × 365 + 7 leap days = 10,957 days to 2000-01-01; + 31 + 28 = 11,016 is
        // 2000-02-29, and its last millisecond is still that day.
        assert_eq!(day(11_016 * 86_400_000), "2000-02-29");
        assert_eq!(day(11_017 * 86_400_000 - 1), "2000-02-29");
        assert_eq!(day(11_017 * 86_400_000), "2000-03-01");
    }

    /// The neutral split of an Anthropic usage: read, written (5m + 1h), uncached, output.
    #[test]
    fn an_anthropic_usage_splits_into_read_written_uncached_output() {
        // 100 uncached, 2,000 read, 300 written for 5 minutes and 400 for an hour, 50 out.
        let usage = Usage::new(100, 2_000, 300, 400, 50);
        let neutral = NeutralUsage::from(&usage);
        assert_eq!(neutral, NeutralUsage { read: 2_000, written: 700, uncached: 100, output: 50 });
        assert_eq!(neutral.total_input(), 100 + 2_000 + 700);
    }

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
    fn unknown_model_is_unpriced_unless_the_user_names_a_price() {
        let mut table = PriceTable::builtin();
        let resolved = table.resolve("claude-opus-9");
        assert!(!resolved.known && !resolved.priced);
        table.set_price_unknown_as("claude-opus-4-8").unwrap();
        let resolved = table.resolve("claude-opus-9");
        assert!(!resolved.known && resolved.priced);
        assert_eq!(resolved.price.id(), "claude-opus-4-8");
        assert!(table.set_price_unknown_as("claude-opus-9").is_err());
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
        let err = PriceTable::from_json(r#"{"date":"2026-01-01","source":"y","default_model":"m","models":[{"name":"M","ids":["m"],"input":"3"}]}"#)
            .unwrap_err();
        assert!(err.to_string().contains("models[0].input"), "{err}");
        let err = PriceTable::from_json(r#"{"date":"2026-01-01","source":"y","default_model":"m","models":[{"name":"M","ids":["m"],"input":3.0001,"cache_write_5m":1,"cache_write_1h":1,"cache_read":1,"output":1,"min_cacheable_tokens":1,"tool_prompt_tokens":null}]}"#)
            .unwrap_err();
        assert!(err.to_string().contains("input = 3.0001"), "{err}");
    }

    fn date(text: &str) -> Option<PriceDate> {
        Some(PriceDate::parse(text).unwrap())
    }

    fn cost(model: &str, on: Option<PriceDate>, usage: &Usage, modifiers: Modifiers) -> u64 {
        let table = PriceTable::builtin();
        let row = table.row(model).expect("listed");
        row.cost(BillingProfile::Anthropic, on, usage, modifiers).expect("priced").total_nanousd()
    }

    #[test]
    fn dates_read_days_and_timestamps_and_refuse_anything_else() {
        assert_eq!(PriceDate::parse("2026-10-07").unwrap().to_string(), "2026-10-07");
        assert_eq!(PriceDate::parse("2026-10-07T08:45:12.345Z").unwrap().to_string(), "2026-10-07");
        assert!(PriceDate::parse("2026-10-06").unwrap() < PriceDate::parse("2026-10-07").unwrap());
        for bad in ["20261007", "2026-13-01", "2026-10-7", "2026-10-07 08:00", "", "2026-1a-07", "2026-10-0é"]
        {
            assert!(PriceDate::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn sonnet_5_5_reads_cost_20_cents_before_2026_10_07_and_10_cents_from_then() {
        // 1,000,000 tokens read: $0.20/MTok = 200 nano-dollars per token before, 100 from the cut.
        let usage = Usage::new(0, 1_000_000, 0, 0, 0);
        let standard = Modifiers::default();
        assert_eq!(cost("claude-sonnet-5-5", date("2026-10-06"), &usage, standard), 200_000_000);
        assert_eq!(cost("claude-sonnet-5-5", date("2026-10-07"), &usage, standard), 100_000_000);
        // No date: the table's newest prices.
        assert_eq!(cost("claude-sonnet-5-5", None, &usage, standard), 100_000_000);
    }

    #[test]
    fn haiku_5_5_band_prices_the_whole_request_above_100k_input() {
        // 10,000 uncached + 30,000 written (5m) + 60,000 read = 100,000 input: the lower band.
        // 10,000×$0.10 + 30,000×$0.125 + 60,000×$0.01 + 1,000 output×$0.50 per MTok
        // = 1,000,000 + 3,750,000 + 600,000 + 500,000 nano-dollars.
        let at_limit = Usage::new(10_000, 60_000, 30_000, 0, 1_000);
        assert_eq!(cost("claude-haiku-5-5", None, &at_limit, Modifiers::default()), 5_850_000);
        // One more uncached token: every category at the upper band, output included.
        // 10,001×$0.50 + 30,000×$0.625 + 60,000×$0.05 + 1,000×$2.50 per MTok
        // = 5,000,500 + 18,750,000 + 3,000,000 + 2,500,000.
        let above = Usage::new(10_001, 60_000, 30_000, 0, 1_000);
        assert_eq!(cost("claude-haiku-5-5", None, &above, Modifiers::default()), 29_250_500);
    }

    #[test]
    fn sonnet_4_5_long_context_rates_need_the_1m_beta() {
        // 250,000 tokens read: $0.30/MTok = 300 nano-dollars per token without the beta
        // (75,000,000 = $0.075); with it, past 200K input, $6 × 0.1 = $0.60 = 600 per token
        // (150,000,000 = $0.15).
        let reads = Usage::new(0, 250_000, 0, 0, 0);
        let beta = Modifiers { context_1m: true, ..Modifiers::default() };
        assert_eq!(cost("claude-sonnet-4-5", None, &reads, Modifiers::default()), 75_000_000);
        assert_eq!(cost("claude-sonnet-4-5", None, &reads, beta), 150_000_000);
        // Sonnet 4 alike.
        assert_eq!(cost("claude-sonnet-4-20250514", None, &reads, beta), 150_000_000);
        // Exactly 200,000 input is not above 200K: standard, 200,000 × 300 = 60,000,000.
        assert_eq!(cost("claude-sonnet-4-5", None, &Usage::new(0, 200_000, 0, 0, 0), beta), 60_000_000);
    }

    #[test]
    fn the_long_context_band_prices_the_whole_request_output_included() {
        // 1 uncached + 200,000 read + 1,000 5m + 1,000 1h = 202,001 input, above 200K. At $6 in
        // (6,000), 5m 1.25× (7,500), 1h 2× (12,000), read 0.1× (600), $22.50 out (22,500):
        // 6,000 + 120,000,000 + 7,500,000 + 12,000,000 + 2,000 × 22,500 (45,000,000).
        let usage = Usage::new(1, 200_000, 1_000, 1_000, 2_000);
        let beta = Modifiers { context_1m: true, ..Modifiers::default() };
        assert_eq!(cost("claude-sonnet-4-5", None, &usage, beta), 184_506_000);
        // Without it: 3,000 + 60,000,000 + 3,750,000 + 6,000,000 + 2,000 × 15,000 (30,000,000).
        assert_eq!(cost("claude-sonnet-4-5", None, &usage, Modifiers::default()), 99_753_000);
    }

    #[test]
    fn the_1m_window_is_offered_until_the_beta_s_retirement() {
        let table = PriceTable::builtin();
        let sonnet_4_5 = table.row("claude-sonnet-4-5").unwrap();
        assert_eq!(sonnet_4_5.context_window_with(true, date("2026-04-29")), Some(1_000_000));
        assert_eq!(sonnet_4_5.context_window_with(false, date("2026-04-29")), Some(200_000));
        // Retired 2026-04-30: from that day the table's window.
        assert_eq!(sonnet_4_5.context_window_with(true, date("2026-04-30")), Some(200_000));
        // No date: the table's newest prices, after the retirement.
        assert_eq!(sonnet_4_5.context_window_with(true, None), Some(200_000));
        assert_eq!(
            table.row("claude-sonnet-4-0").unwrap().context_1m_window(date("2025-09-01")),
            Some(1_000_000)
        );
        // A model whose window is already a million, and one the beta never applied to.
        assert_eq!(
            table.row("claude-sonnet-4-6").unwrap().context_window_with(true, date("2026-03-01")),
            Some(1_000_000)
        );
        assert_eq!(
            table.row("claude-opus-4-5").unwrap().context_window_with(true, date("2026-03-01")),
            Some(200_000)
        );
    }

    #[test]
    fn a_recorded_usage_past_the_table_window_ran_with_the_1m_beta() {
        // A usage object says nothing of headers; 250,000 read on Sonnet 4.5 was accepted, so
        // the window was 1M: 250,000 × 600 = 150,000,000, on any date.
        let recorded = |read: u64| {
            RecordedUsage::from_value(serde_json::json!({"input_tokens": 0, "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": read, "output_tokens": 0}))
            .unwrap()
        };
        let table = PriceTable::builtin();
        let priced = |model: &str, on: &str, read: u64| {
            table.cost_of_recorded(model, date(on), &recorded(read)).unwrap().total_nanousd()
        };
        assert_eq!(priced("claude-sonnet-4-5", "2026-03-01", 250_000), 150_000_000);
        assert_eq!(priced("claude-sonnet-4-5", "2026-06-01", 250_000), 150_000_000);
        // Within the window: standard, 150,000 × 300.
        assert_eq!(priced("claude-sonnet-4-5", "2026-03-01", 150_000), 45_000_000);
        // Sonnet 4.6's 1M window bills at standard rates: 250,000 × 300.
        assert_eq!(priced("claude-sonnet-4-6", "2026-03-01", 250_000), 75_000_000);
    }

    #[test]
    fn a_long_context_band_needs_a_row_offering_the_beta() {
        let row = |context_1m: &str| {
            format!(
                r#"{{"date":"2026-01-01","source":"y","default_model":"m","models":[{{"name":"M","ids":["m"],
                "input":3,"cache_write_5m":3.75,"cache_write_1h":6,"cache_read":0.3,"output":15,
                "min_cacheable_tokens":1024,"tool_prompt_tokens":null,"context_window":200000{context_1m},
                "bands":[{{"above_input_tokens":200000,"input":6,"cache_write_5m":7.5,"cache_write_1h":12,
                "cache_read":0.6,"output":22.5,"with_context_1m":true}}]}}]}}"#
            )
        };
        let err = PriceTable::from_json(&row("")).unwrap_err();
        assert!(err.to_string().contains("with_context_1m but the row has no context_1m"), "{err}");
        let table =
            PriceTable::from_json(&row(r#","context_1m":{"window":1000000,"until":"2026-04-30"}"#)).unwrap();
        assert_eq!(table.row("m").unwrap().context_1m_window(date("2026-01-01")), Some(1_000_000));
    }

    #[test]
    fn fast_mode_has_its_own_rates_and_models_without_it_have_no_price() {
        // Opus 5.5 fast: 1,000 uncached × $8 + 1,000 output × $40 per MTok = 8,000,000 + 40,000,000.
        let usage = Usage::new(1_000, 0, 0, 0, 1_000);
        let fast = Modifiers { speed: Speed::Fast, ..Modifiers::default() };
        assert_eq!(cost("claude-opus-5-5", None, &usage, fast), 48_000_000);
        // Standard: 1,000 × $4 + 1,000 × $20 = 4,000,000 + 20,000,000.
        assert_eq!(cost("claude-opus-5-5", None, &usage, Modifiers::default()), 24_000_000);
        let table = PriceTable::builtin();
        let sonnet = table.row("claude-sonnet-4-6").unwrap();
        assert_eq!(sonnet.cost(BillingProfile::Anthropic, None, &usage, fast), None);
    }

    #[test]
    fn us_only_inference_adds_a_tenth_and_batch_halves() {
        // Opus 5.5, 1,000 uncached + 100 output: 4,000,000 + 2,000,000 nano-dollars; ×1.1.
        let usage = Usage::new(1_000, 0, 0, 0, 100);
        let us = Modifiers { geo: InferenceGeo::Us, ..Modifiers::default() };
        assert_eq!(cost("claude-opus-5-5", None, &usage, us), 6_600_000);
        let batch = Modifiers { batch: true, ..Modifiers::default() };
        assert_eq!(cost("claude-opus-5-5", None, &usage, batch), 3_000_000);
        // Opus 4.5 has no US premium in the table: ×1.0. 1,000 × $5 + 100 × $25 per MTok.
        assert_eq!(cost("claude-opus-4-5", None, &usage, us), 7_500_000);
    }

    #[test]
    fn recorded_usage_keeps_its_object_and_reads_modifiers() {
        let raw = serde_json::json!({
            "input_tokens": 3, "cache_creation_input_tokens": 500, "cache_read_input_tokens": 20_000,
            "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 500},
            "output_tokens": 40, "service_tier": "standard", "inference_geo": "not_available",
            "speed": "standard", "iterations": [{"type": "message"}]
        });
        let recorded = RecordedUsage::from_value(raw.clone()).unwrap();
        assert_eq!(
            recorded.usage,
            Usage { speed: Some(Speed::Standard), ..Usage::new(3, 20_000, 0, 500, 40) }
        );
        assert_eq!(recorded.modifiers, Modifiers::default());
        assert!(recorded.ttl_split_known);
        assert_eq!(recorded.raw, raw);
        // Opus 5.5: 3×$4 + 20,000×$0.20 + 500×$8 + 40×$20 per MTok
        // = 12,000 + 4,000,000 + 4,000,000 + 800,000 nano-dollars.
        let table = PriceTable::builtin();
        let cost = table.cost_of_recorded("claude-opus-5-5", None, &recorded).unwrap();
        assert_eq!(cost.total_nanousd(), 8_812_000);
        assert_eq!(table.cost_of_recorded("claude-opus-9", None, &recorded), None);
    }

    #[test]
    fn a_write_without_a_ttl_split_counts_as_five_minutes() {
        // Claude Code 1.0.x: no cache_creation object.
        let raw = serde_json::json!({"input_tokens": 4, "cache_creation_input_tokens": 1_000,
            "cache_read_input_tokens": 0, "output_tokens": 1});
        let recorded = RecordedUsage::from_value(raw).unwrap();
        assert!(!recorded.ttl_split_known);
        assert_eq!(recorded.usage.cache_creation.ephemeral_5m_input_tokens, 1_000);
        let err = RecordedUsage::from_value(serde_json::json!({"input_tokens": "4"})).unwrap_err();
        assert_eq!(err, "usage.input_tokens: expected a whole number");
    }

    #[test]
    fn every_row_names_a_dated_source() {
        let table = PriceTable::builtin();
        for model in table.models() {
            let source = model.source.as_deref().unwrap_or_default();
            let dated = source
                .as_bytes()
                .windows(10)
                .any(|w| std::str::from_utf8(w).is_ok_and(|t| PriceDate::parse(t).is_ok()));
            assert!(dated, "{}: {source:?}", model.id());
        }
    }

    #[test]
    fn claude_code_2_1_330_models_are_listed() {
        let table = PriceTable::builtin();
        for id in ["claude-opus-5-5", "claude-sonnet-5-5", "claude-haiku-5-5"] {
            assert!(table.resolve(id).known, "{id}");
        }
    }
}
