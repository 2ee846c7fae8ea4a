//! `explain TRACE --request N`: one request of a trace, its miss, the earlier request it is
//! compared with, both requests' bytes around their first divergence, and the fix that would
//! have avoided the miss with what it saves — in tokens and in dollars on that request.
//!
//! The trace is replayed as `replay` does (same settings), so the miss is exactly the one
//! `replay` reports. The earlier request shown is the one, among those started before, whose
//! cache-order bytes share the longest prefix with this one.

use serde::Serialize;

use forkcache_engine::billing::{Modifiers, PriceTable, Usage};
use forkcache_engine::cache::{Miss, MissCause};
use forkcache_engine::prompt::Dimension;
use forkcache_engine::tokenize::TokenizerUnavailable;
use forkcache_engine::verify::{
    DivergenceCause, Explanation, Loc, Segment, common_prefix_bytes, first_divergence, segments, total_bytes,
};
use forkcache_wire::{ApiError, parse_request};

use crate::replay::{ReplayConfig, ReplayError, ReplayRecord, replay};
use crate::trace::{TraceBody, TraceEntry, TraceLine, read_trace};

/// Why a request could not be explained.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// The configured tokenizer is not compiled in.
    #[error(transparent)]
    Tokenizer(#[from] TokenizerUnavailable),
    /// The trace could not be replayed (`strict` and an unreadable line).
    #[error(transparent)]
    Replay(#[from] ReplayError),
    /// The index is past the trace's end.
    #[error("request {index} does not exist: the trace holds {count} requests (0-based)")]
    NoSuchRequest {
        /// The index asked for.
        index: usize,
        /// Requests in the trace.
        count: usize,
    },
    /// The request was refused, so nothing was cached or missed.
    #[error("request {index} (line {line}) was rejected: {error}")]
    Rejected {
        /// The index asked for.
        index: usize,
        /// Its line in the trace.
        line: usize,
        /// The API's error.
        error: ApiError,
    },
}

/// One request explained.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RequestExplanation {
    /// 0-based index in the trace.
    pub index: usize,
    /// The model requested.
    pub model: String,
    /// Its usage.
    pub usage: Usage,
    /// Its miss, if it missed.
    pub miss: Option<Miss>,
    /// The earlier request compared with (the longest common prefix), if any came before.
    pub compared_with: Option<usize>,
    /// How this request's cache-order bytes relate to that earlier request's.
    pub comparison: Option<Explanation>,
    /// What would have avoided the miss.
    pub fix: Option<Fix>,
}

/// The fix for a miss and what it would have saved on this request.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Fix {
    /// What to change.
    pub advice: String,
    /// Tokens that would have been read instead (the miss's `tokens_missed`).
    pub tokens_saved: u64,
    /// This request's cost less its cost with those tokens read (integer nano-dollars; 0 for an
    /// unpriced model).
    pub saving_nanousd: u64,
    /// The same in dollars.
    pub saving_usd: f64,
}

/// Replays `trace` and explains request `index`.
pub fn explain_request(
    config: &ReplayConfig,
    prices: PriceTable,
    trace: &str,
    index: usize,
) -> Result<RequestExplanation, ExplainError> {
    let report = replay(config, prices.clone(), trace)?;
    let count = report.records.len();
    let record = report.records.get(index).ok_or(ExplainError::NoSuchRequest { index, count })?;
    let priced = record.result.as_ref().map_err(|error| ExplainError::Rejected {
        index,
        line: record.line,
        error: error.clone(),
    })?;
    // The records are the trace's requests in file order: session markers, unreadable lines and
    // pre-warms have none.
    let lines: Vec<TraceLine> = read_trace(trace.as_bytes())
        .filter_map(|entry| match entry {
            TraceEntry::Request(line) => (!line.prewarm).then_some(line),
            TraceEntry::Session { .. } | TraceEntry::Unreadable(_) => None,
        })
        .collect();
    let ignored = &config.endpoint.prompt.ignored_system_prefixes;
    let laid: Vec<Option<Vec<Segment>>> = lines.iter().map(|line| cache_segments(line, ignored)).collect();
    let this = laid[index].as_deref().unwrap_or_default();
    let compared_with = closest_earlier(&report.records, &laid, index);
    let comparison = compared_with.and_then(|j| laid[j].as_deref()).map(|earlier| Explanation {
        a_bytes: total_bytes(earlier),
        b_bytes: total_bytes(this),
        common_prefix_bytes: common_prefix_bytes(earlier, this),
        divergence: first_divergence(earlier, this),
    });
    let resolved = prices.resolve(&priced.model);
    let modifiers = Modifiers {
        speed: priced.usage.speed.unwrap_or_default(),
        geo: priced.usage.inference_geo.unwrap_or_default(),
        batch: false,
        context_1m: priced.context_1m,
    };
    let fix = priced.miss.as_ref().map(|miss| {
        let saved = with_read(&priced.usage, miss.tokens_missed);
        // Priced as the request was: its model's row, the replay's date, its modifiers.
        let cost_saved = resolved
            .priced
            .then(|| {
                resolved.price.cost(config.endpoint.billing, config.endpoint.price_date, &saved, modifiers)
            })
            .flatten();
        let saving =
            cost_saved.map_or(0, |cost| priced.cost.total_nanousd().saturating_sub(cost.total_nanousd()));
        Fix {
            advice: advice(miss, comparison.as_ref(), compared_with),
            tokens_saved: miss.tokens_missed,
            saving_nanousd: saving,
            saving_usd: saving as f64 / 1e9,
        }
    });
    Ok(RequestExplanation {
        index,
        model: priced.model.clone(),
        usage: priced.usage,
        miss: priced.miss.clone(),
        compared_with,
        comparison,
        fix,
    })
}

/// A line's request in cache order, without the system blocks the cache ignores (Claude Code's
/// per-request billing header), so the first divergence shown is one the cache sees.
fn cache_segments(line: &TraceLine, ignored: &[String]) -> Option<Vec<Segment<'static>>> {
    let laid = match &line.body {
        TraceBody::Parsed(view) => segments(view),
        TraceBody::Text(text) => segments(&parse_request(text.as_bytes()).ok()?),
        TraceBody::Rejected(_) => return None,
    };
    let is_ignored = |segment: &Segment| {
        matches!(segment.loc, Loc::System(_))
            && ignored.iter().any(|prefix| segment.bytes.contains(&format!("\"text\":\"{prefix}")))
    };
    Some(laid.into_iter().filter(|segment| !is_ignored(segment)).collect())
}

/// The priced request started before `index` (file order among equal starts) sharing the
/// longest cache-order prefix with it; the latest among equals.
fn closest_earlier(records: &[ReplayRecord], laid: &[Option<Vec<Segment>>], index: usize) -> Option<usize> {
    let this = laid[index].as_deref()?;
    let at = records[index].at;
    let before = |j: usize| records[j].at < at || (records[j].at == at && j < index);
    (0..records.len())
        .filter(|&j| j != index && before(j) && records[j].result.is_ok())
        .filter_map(|j| {
            laid[j].as_deref().map(|earlier| (common_prefix_bytes(earlier, this), records[j].at, j))
        })
        .max()
        .map(|(_, _, j)| j)
}

/// `usage` with `tokens` more read, taken from 5-minute writes, then 1-hour writes, then the
/// uncached input (what the request paid most for first, after writes).
fn with_read(usage: &Usage, tokens: u64) -> Usage {
    let mut left = tokens;
    let mut take = |from: u64| {
        let taken = from.min(left);
        left -= taken;
        from - taken
    };
    let write_5m = take(usage.cache_creation.ephemeral_5m_input_tokens);
    let write_1h = take(usage.cache_creation.ephemeral_1h_input_tokens);
    let uncached = take(usage.input_tokens);
    let read = usage.cache_read_input_tokens + (tokens - left);
    Usage {
        speed: usage.speed,
        inference_geo: usage.inference_geo,
        ..Usage::new(uncached, read, write_5m, write_1h, usage.output_tokens)
    }
}

/// What to change, for this miss and what the bytes show.
fn advice(miss: &Miss, comparison: Option<&Explanation>, earlier: Option<usize>) -> String {
    let divergence = comparison.and_then(|c| c.divergence.as_ref());
    let earlier = earlier.map_or_else(|| "the earlier request".to_string(), |j| format!("request {j}"));
    let path = &miss.path;
    match miss.cause {
        MissCause::PrefixChanged => match (miss.dimension, divergence.map(|d| d.cause)) {
            (_, Some(DivergenceCause::KeyOrder)) => {
                format!(
                    "sort the keys of {path} (serialize it with a fixed key order): only the order changed"
                )
            }
            (_, Some(DivergenceCause::Formatting)) => {
                format!(
                    "serialize {path} the same way every time (whitespace, escapes): only the formatting changed"
                )
            }
            (Some(Dimension::System), _)
                if divergence.is_some_and(|d| looks_like_time(&d.before, &d.a, &d.b)) =>
            {
                format!(
                    "move the timestamp out of the system prompt ({path}): put it in the latest user message"
                )
            }
            (Some(Dimension::System), _) => {
                format!(
                    "keep {path} byte-identical: move what changes out of the system prompt, into the latest message"
                )
            }
            (Some(Dimension::Tools), _) => {
                format!("send the same tool definitions in the same order as {earlier} ({path} differs)")
            }
            (Some(Dimension::Config), _) => format!("keep `{path}` as {earlier} sent it"),
            _ => {
                format!("keep {path} as {earlier} sent it: an earlier message was changed after it was sent")
            }
        },
        MissCause::NotWritten => {
            format!(
                "put a cache_control marker on the last block {earlier} shares with this one (from {path} on)"
            )
        }
        MissCause::NoBreakpoint => format!("put a cache_control marker at or after {path}"),
        MissCause::BelowMinimum => {
            "mark a later block: the marked prefix is below the model's minimum cacheable length".to_string()
        }
        MissCause::LookbackExceeded => {
            format!(
                "put a marker within 20 blocks after {path}: the entry there was out of every breakpoint's reach"
            )
        }
        MissCause::Expired => "send within the entry's TTL, or write it with \"ttl\": \"1h\"".to_string(),
        MissCause::NotYetVisible => {
            format!(
                "start after {earlier}'s first token (a staggered launch): its entry was not readable yet"
            )
        }
        MissCause::ModelChanged => {
            "send it to the model that cached the prefix: the cache is per model".to_string()
        }
        MissCause::Cold => {
            "the entry was evicted: a cache holding more entries would have kept it".to_string()
        }
    }
}

/// Whether the divergence falls in a date or time: both sides differ at a digit, right after
/// digits.
fn looks_like_time(before: &str, a: &str, b: &str) -> bool {
    let starts_with_digit = |s: &str| s.chars().next().is_some_and(|c| c.is_ascii_digit());
    let tail_digits = before.chars().rev().take(8).filter(char::is_ascii_digit).count();
    tail_digits >= 2 && starts_with_digit(a) && starts_with_digit(b)
}

impl RequestExplanation {
    /// A few lines for people.
    pub fn to_text(&self) -> String {
        let u = &self.usage;
        let mut out = format!(
            "request {} ({}): read {} · written {} · uncached {}\n",
            self.index, self.model, u.cache_read_input_tokens, u.cache_creation_input_tokens, u.input_tokens
        );
        out.push_str(&format!("miss: {}\n", forkcache_engine::cache::describe_miss(self.miss.as_ref())));
        match (self.compared_with, &self.comparison) {
            (Some(earlier), Some(comparison)) => {
                out.push_str(&format!(
                    "compared with request {earlier}, the earlier request sharing the longest prefix (A = it, B = this one):\n"
                ));
                for line in comparison.to_text().lines() {
                    out.push_str(&format!("  {line}\n"));
                }
            }
            _ => out.push_str("no earlier request to compare with\n"),
        }
        if let Some(fix) = &self.fix {
            out.push_str(&format!(
                "fix: {}\nsaving: {} tokens, ${:.6} on this request\n",
                fix.advice, fix.tokens_saved, fix.saving_usd
            ));
        }
        out
    }
}
