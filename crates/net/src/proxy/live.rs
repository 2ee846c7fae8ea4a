//! The proxy's side of the live page: a row per exchange once its prediction ran (or was
//! skipped), in trace order, and `GET /forkcache/events` filtered as `GET /forkcache/stats` is.

use std::collections::BTreeSet;
use std::sync::{Arc, PoisonError};

use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::Response;

use forkcache_engine::billing::Cost;
use forkcache_wire::{ApiError, ErrorKind};

use super::Shared;
use super::exchange::Entry;
use super::stats::{Comparison, ProxyStats};
use crate::edge::api_key;
use crate::live::{Row, Totals, events_response, refusal, since_of};

/// The row of one compared exchange that started at `at_ms`; `stats` have counted it.
pub(super) fn row(comparison: &Comparison, at_ms: u64, entry: &Entry, stats: &ProxyStats) -> Row {
    let predicted = comparison.predicted.as_ref();
    let totals = stats.workspaces.get(&comparison.workspace).cloned().unwrap_or_default();
    let divergence = comparison.divergence.as_ref().map(|(id, divergence)| {
        format!(
            "from {}: {} ({}, {}) at byte {}",
            id.as_deref().unwrap_or("an earlier request"),
            divergence.path,
            divergence.dimension.name(),
            divergence.cause.name(),
            divergence.byte_offset
        )
    });
    Row {
        at_ms,
        request_id: entry.envelope.request_id.clone(),
        workspace: comparison.workspace.clone(),
        model: predicted.map(|record| record.model.clone()).or_else(|| entry.model.clone()),
        recorded: comparison.recorded,
        predicted: predicted.map(|record| record.usage),
        agrees: comparison.agreement.map(|agreement| agreement.agrees),
        miss: predicted.and_then(|record| record.miss.clone()),
        divergence,
        error: comparison.error.clone(),
        incomplete: comparison.incomplete,
        prediction_skipped: comparison.skipped,
        cost: comparison.recorded_cost,
        predicted_cost: predicted.filter(|record| record.priced).map(|record| record.cost),
        running_cost: totals.recorded_cost,
        running_predicted_cost: Some(totals.predicted.cost),
        ..Row::default()
    }
}

/// `GET /forkcache/events?since=N`: the rows numbered N and after. Asked with a key, only the
/// workspaces that key's exchanges were counted in; under `require_key` it must be asked with one.
pub(super) async fn events(State(shared): State<Arc<Shared>>, headers: HeaderMap, uri: Uri) -> Response {
    const REQUEST_ID: &str = "req_forkcache_proxy";
    let since = match since_of(uri.query()) {
        Ok(since) => since,
        Err(error) => return refusal(&error, REQUEST_ID),
    };
    let key = api_key(&headers);
    if key.is_none() && shared.require_key {
        let error = ApiError::new(ErrorKind::Authentication, "x-api-key header is required");
        return refusal(&error, REQUEST_ID);
    }
    let stats = shared.stats.lock().unwrap_or_else(PoisonError::into_inner);
    let mine: Option<BTreeSet<String>> = key.map(|key| {
        stats.key_workspaces.get(&shared.sequencer.fingerprint(&key)).cloned().unwrap_or_default()
    });
    let shown = |workspace: &str| mine.as_ref().is_none_or(|mine| mine.contains(workspace));
    let totals = totals(&stats, shown);
    let slice = shared.live.lock().unwrap_or_else(PoisonError::into_inner).since(since, shown);
    drop(stats);
    events_response(slice.to_json(totals))
}

/// The shown workspaces' totals: exchanges written, their recorded and predicted cost.
fn totals(stats: &ProxyStats, shown: impl Fn(&str) -> bool) -> Totals {
    let mut totals = Totals { predicted_cost: Some(Cost::default()), ..Totals::default() };
    for (_, workspace) in stats.workspaces.iter().filter(|(name, _)| shown(name)) {
        totals.requests += workspace.exchanges;
        totals.cost.add(&workspace.recorded_cost);
        if let Some(predicted) = &mut totals.predicted_cost {
            predicted.add(&workspace.predicted.cost);
        }
    }
    totals
}
