//! `forkcache prices`: the price table as people and programs read it.

use std::fmt::Write as _;

use serde::Serialize;

use super::{ModelPrice, PriceTable, Rates};

#[derive(Serialize)]
struct TableJson<'t> {
    date: &'t str,
    source: &'t str,
    models: Vec<ModelJson<'t>>,
}

/// $/MTok, as the table writes them (floats for people; the table itself is exact).
#[derive(Serialize)]
struct RatesJson {
    input: f64,
    cache_write_5m: f64,
    cache_write_1h: f64,
    cache_read: f64,
    output: f64,
}

#[derive(Serialize)]
struct ChangeJson {
    from: String,
    #[serde(flatten)]
    rates: RatesJson,
}

#[derive(Serialize)]
struct BandJson {
    above_input_tokens: u64,
    #[serde(flatten)]
    rates: RatesJson,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    with_context_1m: bool,
}

#[derive(Serialize)]
struct ModelJson<'t> {
    name: &'t str,
    ids: &'t [String],
    #[serde(flatten)]
    rates: RatesJson,
    changes: Vec<ChangeJson>,
    bands: Vec<BandJson>,
    fast: Option<RatesJson>,
    inference_geo_us: Option<f64>,
    min_cacheable_tokens: u64,
    tool_prompt_tokens: Option<super::ToolPromptTokens>,
    context_window: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    context_1m: Option<super::Context1m>,
    max_output_tokens: Option<u64>,
    tokens_per_bytes4: f64,
    source: &'t str,
    uncertain: &'t [String],
    note: Option<&'t str>,
}

fn usd_per_mtok(rates: &Rates) -> RatesJson {
    let usd = |nanousd: u64| nanousd as f64 / 1000.0;
    RatesJson {
        input: usd(rates.input),
        cache_write_5m: usd(rates.write_5m),
        cache_write_1h: usd(rates.write_1h),
        cache_read: usd(rates.read),
        output: usd(rates.output),
    }
}

fn model_json<'t>(table: &'t PriceTable, model: &'t ModelPrice) -> ModelJson<'t> {
    ModelJson {
        name: &model.name,
        ids: &model.ids,
        rates: usd_per_mtok(&model.rates),
        changes: model
            .changes
            .iter()
            .map(|(from, rates)| ChangeJson { from: from.to_string(), rates: usd_per_mtok(rates) })
            .collect(),
        bands: model
            .bands
            .iter()
            .map(|band| BandJson {
                above_input_tokens: band.above_input_tokens,
                rates: usd_per_mtok(&band.rates),
                with_context_1m: band.with_context_1m,
            })
            .collect(),
        fast: model.fast.as_ref().map(usd_per_mtok),
        inference_geo_us: model.us_geo_permille.map(|p| p as f64 / 1000.0),
        min_cacheable_tokens: model.min_cacheable_tokens,
        tool_prompt_tokens: model.tool_prompt_tokens,
        context_window: model.context_window,
        context_1m: model.context_1m,
        max_output_tokens: model.max_output_tokens,
        tokens_per_bytes4: model.tokens_per_bytes4_permille as f64 / 1000.0,
        source: model.source.as_deref().unwrap_or(&table.source),
        uncertain: &model.uncertain,
        note: model.note.as_deref(),
    }
}

impl PriceTable {
    /// `prices --json`: one document, every row with its source.
    #[allow(clippy::expect_used)] // the table is strings and numbers: serializing it cannot fail
    pub fn to_json(&self) -> String {
        let json = TableJson {
            date: &self.date,
            source: &self.source,
            models: self.models().iter().map(|model| model_json(self, model)).collect(),
        };
        serde_json::to_string(&json).expect("the price table serializes")
    }

    /// `prices`: a table for people, $/MTok; `?` marks a value not found in a primary source.
    pub fn to_table(&self) -> String {
        let mut out = format!("Prices of {} ($ per million tokens)\n\n", self.date);
        let _ = writeln!(
            out,
            "{:<30} {:>7} {:>8} {:>8} {:>7} {:>7} {:>8} {:>9} {:>8}  modifiers",
            "model", "input", "write5m", "write1h", "read", "output", "min", "context", "tok/b4"
        );
        for model in self.models() {
            out.push_str(&table_row(model));
        }
        out.push_str("\nSources:\n");
        for model in self.models() {
            let source = model.source.as_deref().unwrap_or(&self.source);
            let _ = writeln!(out, "  {:<30} {source}", model.id());
            if let Some(note) = &model.note {
                let _ = writeln!(out, "  {:<30} note: {note}", "");
            }
        }
        out
    }
}

impl PriceTable {
    /// `prices --csv`: a row per model, $/MTok as in the table, ids and uncertain fields joined
    /// by spaces, modifiers in the table's words.
    #[allow(clippy::expect_used)] // writing CSV to memory cannot fail
    pub fn to_csv(&self) -> String {
        let mut writer = csv::Writer::from_writer(Vec::new());
        writer.write_record(CSV_COLUMNS).expect("writing to memory");
        for model in self.models() {
            writer.write_record(csv_row(self, model)).expect("writing to memory");
        }
        String::from_utf8(writer.into_inner().expect("writing to memory")).expect("csv output is UTF-8")
    }
}

const CSV_COLUMNS: [&str; 14] = [
    "model",
    "ids",
    "input",
    "cache_write_5m",
    "cache_write_1h",
    "cache_read",
    "output",
    "min_cacheable_tokens",
    "context_window",
    "max_output_tokens",
    "tokens_per_bytes4",
    "modifiers",
    "uncertain",
    "source",
];

fn csv_row(table: &PriceTable, model: &ModelPrice) -> [String; 14] {
    let usd = |nanousd: u64| trim(nanousd as f64 / 1000.0);
    let optional = |value: Option<u64>| value.map_or(String::new(), |v| v.to_string());
    let r = &model.rates;
    [
        model.name.clone(),
        model.ids.join(" "),
        usd(r.input),
        usd(r.write_5m),
        usd(r.write_1h),
        usd(r.read),
        usd(r.output),
        model.min_cacheable_tokens.to_string(),
        optional(model.context_window),
        optional(model.max_output_tokens),
        trim(model.tokens_per_bytes4_permille as f64 / 1000.0),
        modifiers(model),
        model.uncertain.join(" "),
        model.source.as_deref().unwrap_or(&table.source).to_string(),
    ]
}

fn table_row(model: &ModelPrice) -> String {
    let mark = |field: &str| if model.uncertain.iter().any(|f| f == field) { "?" } else { "" };
    let price = |field: &str, nanousd: u64| format!("{}{}", trim(nanousd as f64 / 1000.0), mark(field));
    let r = &model.rates;
    let context = model.context_window.map_or("-".to_string(), window);
    format!(
        "{:<30} {:>7} {:>8} {:>8} {:>7} {:>7} {:>8} {:>9} {:>8}  {}\n",
        model.id(),
        price("input", r.input),
        price("cache_write_5m", r.write_5m),
        price("cache_write_1h", r.write_1h),
        price("cache_read", r.read),
        price("output", r.output),
        format!("{}{}", model.min_cacheable_tokens, mark("min_cacheable_tokens")),
        format!("{context}{}", mark("context_window")),
        format!("{}{}", trim(model.tokens_per_bytes4_permille as f64 / 1000.0), mark("tokens_per_bytes4")),
        modifiers(model)
    )
}

/// Changes, bands, fast mode and the US premium, in a few words.
fn modifiers(model: &ModelPrice) -> String {
    let mut parts = Vec::new();
    for (from, rates) in &model.changes {
        parts.push(format!("from {from}: {}", five_rates(rates)));
    }
    if let Some(offer) = &model.context_1m {
        parts.push(format!("context-1m beta: {} window until {}", window(offer.window), offer.until));
    }
    for band in &model.bands {
        let beta = if band.with_context_1m { " with the context-1m beta" } else { "" };
        parts.push(format!(
            "above {}K input{beta}: {}",
            band.above_input_tokens / 1000,
            five_rates(&band.rates)
        ));
    }
    if let Some(fast) = &model.fast {
        parts.push(format!("fast: {}", five_rates(fast)));
    }
    if let Some(permille) = model.us_geo_permille {
        parts.push(format!("us ×{}", trim(permille as f64 / 1000.0)));
    }
    parts.join("; ")
}

/// A window in tokens: 1,000,000 → "1M", 200,000 → "200K".
fn window(tokens: u64) -> String {
    if tokens % 1_000_000 == 0 { format!("{}M", tokens / 1_000_000) } else { format!("{}K", tokens / 1000) }
}

/// `input/write5m/write1h/read/output`.
fn five_rates(rates: &Rates) -> String {
    let values = [rates.input, rates.write_5m, rates.write_1h, rates.read, rates.output];
    values.map(|nanousd| trim(nanousd as f64 / 1000.0)).join("/")
}

/// 0.100 → "0.1", 3.000 → "3".
fn trim(value: f64) -> String {
    let text = format!("{value:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}
