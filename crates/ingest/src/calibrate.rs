//! `replay --calibrate`: fits forkcache's free constants to a trace's recorded usage, and checks
//! the fit on requests it did not see.
//!
//! The trace is replayed whole (the cache needs every request), then split: even request indexes
//! fit, odd ones are held out — both halves span the whole session. Three things are reported:
//! - per model, real tokens per predicted token (summed over the fit half) — with `bytes4`, whose
//!   estimate is a block's bytes ÷ 4, tokens per byte is that ratio ÷ 4 — and, on the held-out
//!   half, how far the predicted total input is from the recorded one before and after rescaling;
//! - for each candidate minimum cacheable length, the held-out agreement;
//! - for each candidate fixed first-token delay (which decides visibility where the trace has no
//!   `first_byte_ms`), the held-out agreement.

use std::collections::BTreeMap;

use serde::Serialize;

use forkcache_engine::billing::PriceTable;

use crate::replay::{ReplayConfig, ReplayError, ReplayRecord, replay};
use crate::trace::UnreadableLine;

/// Minimum cacheable lengths tried, in tokens (besides the price table's own).
pub const MIN_CACHEABLE_CANDIDATES: [u64; 5] = [256, 512, 1_024, 2_048, 4_096];

/// Fixed first-token delays tried, in milliseconds.
pub const FIRST_TOKEN_CANDIDATES_MS: [u64; 5] = [0, 200, 400, 1_000, 2_000];

/// One model's token-count fit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ModelFit {
    /// The model id as requested.
    pub model: String,
    /// Fit-half requests with both usages.
    pub fit_requests: u64,
    /// Recorded total input tokens over the fit half.
    pub recorded_tokens: u64,
    /// Predicted total input tokens over the fit half.
    pub predicted_tokens: u64,
    /// Held-out requests with both usages.
    pub held_out_requests: u64,
    /// Held out: Σ |predicted − recorded| ÷ Σ recorded total input, in millionths.
    pub held_out_error_ppm: u64,
    /// The same after multiplying each prediction by recorded ÷ predicted of the fit half.
    pub held_out_error_rescaled_ppm: u64,
}

impl ModelFit {
    /// Real tokens per predicted token (recorded ÷ predicted over the fit half).
    pub fn scale(&self) -> f64 {
        if self.predicted_tokens == 0 {
            0.0
        } else {
            self.recorded_tokens as f64 / self.predicted_tokens as f64
        }
    }
}

/// The held-out agreement of one candidate setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Candidate {
    /// The value tried (`None`: the price table's own minimums).
    pub value: Option<u64>,
    /// Held-out requests compared.
    pub compared: u64,
    /// Of those, the ones that agree.
    pub agreed: u64,
}

/// What `--calibrate` found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Calibration {
    /// Per model, in id order.
    pub models: Vec<ModelFit>,
    /// The price table's minimums, then each of [`MIN_CACHEABLE_CANDIDATES`].
    pub min_cacheable: Vec<Candidate>,
    /// Each of [`FIRST_TOKEN_CANDIDATES_MS`].
    pub first_token_ms: Vec<Candidate>,
    /// Trace lines that could not be read (left out of every fit, as replay leaves them out).
    pub unreadable: Vec<UnreadableLine>,
}

/// Calibrates against `trace`'s recorded usage.
pub fn calibrate(
    config: &ReplayConfig,
    prices: &PriceTable,
    trace: &(impl AsRef<[u8]> + ?Sized),
) -> Result<Calibration, ReplayError> {
    let baseline = replay(config, prices.clone(), trace)?;
    let models = fit_models(&baseline.records);
    let mut min_cacheable = Vec::new();
    for value in std::iter::once(None).chain(MIN_CACHEABLE_CANDIDATES.map(Some)) {
        let mut tried = config.clone();
        tried.endpoint.min_cacheable_tokens = value;
        min_cacheable.push(held_out(value, &replay(&tried, prices.clone(), trace)?.records));
    }
    let mut first_token_ms = Vec::new();
    for value in FIRST_TOKEN_CANDIDATES_MS {
        let mut tried = config.clone();
        tried.endpoint.cache.latency.base_ms = value;
        first_token_ms.push(held_out(Some(value), &replay(&tried, prices.clone(), trace)?.records));
    }
    Ok(Calibration { models, min_cacheable, first_token_ms, unreadable: baseline.unreadable })
}

/// Whether a record is in the held-out half.
fn is_held_out(record: &ReplayRecord) -> bool {
    record.index % 2 == 1
}

/// (predicted, recorded) total input tokens of a record with both.
fn totals(record: &ReplayRecord) -> Option<(u64, u64)> {
    let predicted = record.result.as_ref().ok()?.usage.total_input_tokens();
    Some((predicted, record.recorded.as_ref()?.usage.total_input_tokens()))
}

fn fit_models(records: &[ReplayRecord]) -> Vec<ModelFit> {
    let mut by_model: BTreeMap<&str, Vec<&ReplayRecord>> = BTreeMap::new();
    for record in records {
        if let (Some(model), Some(_)) = (record.model.as_deref(), totals(record)) {
            by_model.entry(model).or_default().push(record);
        }
    }
    by_model.into_iter().map(|(model, records)| fit_model(model, &records)).collect()
}

fn fit_model(model: &str, records: &[&ReplayRecord]) -> ModelFit {
    let (fit, held): (Vec<&&ReplayRecord>, Vec<&&ReplayRecord>) =
        records.iter().partition(|r| !is_held_out(r));
    let pairs = |half: &[&&ReplayRecord]| half.iter().filter_map(|r| totals(r)).collect::<Vec<(u64, u64)>>();
    let (fit, held) = (pairs(&fit), pairs(&held));
    let predicted_tokens: u64 = fit.iter().map(|(p, _)| p).sum();
    let recorded_tokens: u64 = fit.iter().map(|(_, r)| r).sum();
    let held_recorded: u128 = held.iter().map(|(_, r)| u128::from(*r)).sum();
    let error = |scaled: &dyn Fn(u64) -> u128| {
        let off: u128 = held.iter().map(|(p, r)| scaled(*p).abs_diff(u128::from(*r))).sum();
        (off * 1_000_000).checked_div(held_recorded).map_or(0, |ppm| ppm as u64)
    };
    let rescale = |p: u64| {
        (u128::from(p) * u128::from(recorded_tokens)).checked_div(u128::from(predicted_tokens)).unwrap_or(0)
    };
    ModelFit {
        model: model.to_string(),
        fit_requests: fit.len() as u64,
        recorded_tokens,
        predicted_tokens,
        held_out_requests: held.len() as u64,
        held_out_error_ppm: error(&|p| u128::from(p)),
        held_out_error_rescaled_ppm: error(&rescale),
    }
}

fn held_out(value: Option<u64>, records: &[ReplayRecord]) -> Candidate {
    let agreements = records.iter().filter(|r| is_held_out(r)).filter_map(|r| r.recorded.as_ref()?.agreement);
    let (compared, agreed) = agreements.fold((0, 0), |(n, ok), a| (n + 1, ok + u64::from(a.agrees)));
    Candidate { value, compared, agreed }
}

impl Calibration {
    /// The `--calibrate --json` document (one line).
    pub fn to_json(&self) -> String {
        let mut json = serde_json::json!({"calibration": {
            "split": "even request indexes fit, odd ones are held out",
            "models": self.models.iter().map(|m| serde_json::json!({
                "model": m.model,
                "fit_requests": m.fit_requests,
                "recorded_tokens": m.recorded_tokens,
                "predicted_tokens": m.predicted_tokens,
                "recorded_per_predicted_token": round6(m.scale()),
                "held_out_requests": m.held_out_requests,
                "held_out_error": m.held_out_error_ppm as f64 / 1e6,
                "held_out_error_rescaled": m.held_out_error_rescaled_ppm as f64 / 1e6,
            })).collect::<Vec<_>>(),
            "min_cacheable_tokens": self.min_cacheable,
            "first_token_base_ms": self.first_token_ms,
        }});
        if !self.unreadable.is_empty() {
            // As in `replay --json`: each skipped line, 1-based, with what is wrong.
            json["unreadable"] = self
                .unreadable
                .iter()
                .map(|line| serde_json::json!({"line": line.line, "message": line.message}))
                .collect();
        }
        json.to_string()
    }

    /// A table for people.
    pub fn to_table(&self) -> String {
        let mut out = String::from(
            "calibration: even requests fit, odd requests held out\n\nmodel                      fit  real/predicted tokens  held-out error  rescaled\n",
        );
        for m in &self.models {
            out.push_str(&format!(
                "{:<24} {:>5}  {:>21.4}  {:>13.1}%  {:>7.1}%\n",
                m.model,
                m.fit_requests,
                m.scale(),
                m.held_out_error_ppm as f64 / 1e4,
                m.held_out_error_rescaled_ppm as f64 / 1e4
            ));
        }
        out.push_str("(with bytes4, tokens per byte = real/predicted ÷ 4)\n\nheld-out agreement by minimum cacheable length:\n");
        for c in &self.min_cacheable {
            let value = c.value.map_or("price table".to_string(), |v| format!("{v} tokens"));
            out.push_str(&format!("  {value:<14} {}/{}\n", c.agreed, c.compared));
        }
        out.push_str("held-out agreement by fixed first-token delay (lines without first_byte_ms):\n");
        for c in &self.first_token_ms {
            out.push_str(&format!(
                "  {:<14} {}/{}\n",
                format!("{} ms", c.value.unwrap_or(0)),
                c.agreed,
                c.compared
            ));
        }
        for line in &self.unreadable {
            out.push_str(&format!("unreadable {line}\n"));
        }
        out
    }
}

fn round6(value: f64) -> f64 {
    (value * 1e6).round() / 1e6
}
