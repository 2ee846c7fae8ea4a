//! serve's side of the live page: a row per Messages request, added under the core's lock in
//! pricing order, and `GET /forkcache/events` filtered as `GET /forkcache/stats` is.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::Response;

use forkcache_engine::billing::Cost;
use forkcache_engine::endpoint::Record;
use forkcache_wire::{ApiError, ErrorKind};

use super::{Core, Shared};
use crate::edge::{api_key, key_not_utf8};
use crate::live::{Row, Totals, events_response, refusal, since_of};

impl Core {
    /// Adds the row of a priced request (counted in the stats already).
    pub(super) fn live_priced(&mut self, record: &Record, request_id: &str) {
        let running = self.running_cost(&record.workspace);
        self.live.push(Row::served(record, request_id, running));
    }

    /// Adds the row of a request answered with `error` (counted in the stats already).
    pub(super) fn live_refused(&mut self, at_ms: u64, request_id: &str, workspace: &str, error: &ApiError) {
        let running = self.running_cost(workspace);
        self.live.push(Row::refused(at_ms, request_id, workspace, error, running));
    }

    /// `workspace`'s cost so far, as the stats count it.
    fn running_cost(&self, workspace: &str) -> Cost {
        self.stats.workspaces.get(workspace).map(|totals| totals.cost).unwrap_or_default()
    }
}

/// `GET /forkcache/events?since=N`: the rows numbered N and after. Asked with a key, the key's
/// workspace alone; under `require_key` it must be asked with one.
pub(super) async fn events(State(shared): State<Arc<Shared>>, headers: HeaderMap, uri: Uri) -> Response {
    let mut core = shared.lock();
    let since = match since_of(uri.query()) {
        Ok(since) => since,
        Err(error) => return refusal(&error, &core.next_request_id()),
    };
    if let Some(error) = key_not_utf8(&headers) {
        return refusal(&error, &core.next_request_id());
    }
    let workspace = match api_key(&headers) {
        Some(key) => Some(core.endpoint.workspace_of(Some(&key))),
        None if shared.config.require_key => {
            let error = ApiError::new(ErrorKind::Authentication, "x-api-key header is required");
            return refusal(&error, &core.next_request_id());
        }
        None => None,
    };
    let totals = match &workspace {
        Some(workspace) => core.stats.workspaces.get(workspace).cloned().unwrap_or_default(),
        None => core.stats.totals(),
    };
    let totals =
        Totals { requests: totals.requests + totals.rejected, cost: totals.cost, predicted_cost: None };
    let shown = |name: &str| workspace.as_deref().is_none_or(|mine| mine == name);
    let slice = core.live.since(since, shown);
    drop(core);
    events_response(slice.to_json(totals))
}
