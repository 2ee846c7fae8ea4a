//! The live page: `GET /forkcache/` on `serve` and `proxy`, one self-contained HTML document
//! (inline CSS and JavaScript, no external asset, works offline) that shows the Messages
//! requests as they are priced, and the JSON feed behind it, `GET /forkcache/events?since=N`.
//!
//! Each edge appends one [`Row`] per Messages request to its [`Feed`], in the order it priced
//! them (serve) or predicted them (proxy: trace order). A row is numbered from 0 in that order;
//! the feed keeps the last [`LIVE_ROWS`] rows (`--live-rows`), so its memory is bounded whatever
//! the traffic: a page that falls further behind is told how many rows it missed. The page polls
//! the feed once a second with the number after the last row it holds.
//!
//! Who sees what follows `GET /forkcache/stats`: asked with a key (`x-api-key` or a bearer
//! token) the feed lists only that key's workspaces; under `--require-key` it must be asked with
//! one. A browser cannot set that header on a page load, so the page is served to anyone (it
//! holds no data) and, when the feed answers 401, asks for the key in a password field; the key
//! stays in the page's memory and goes out only as the `x-api-key` header of the page's own
//! requests to the feed, never in a URL (which would land in logs and history), never stored,
//! never shown. The server never echoes it: rows name workspaces.

use std::collections::VecDeque;
use std::sync::Arc;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use forkcache_engine::billing::{Cost, Usage};
use forkcache_engine::cache::Miss;
use forkcache_engine::endpoint::Record;
use forkcache_ingest::trace::LoggedError;
use forkcache_wire::ApiError;

/// Rows a feed keeps by default: the last 1,000 requests (about a kilobyte each).
pub const LIVE_ROWS: usize = 1_000;

/// The page itself.
const PAGE: &str = include_str!("page.html");

/// What the page may load and reach: its own inline style and script, and the feed beside it.
const PAGE_POLICY: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
     connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Which edge a feed belongs to: what its rows hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Edge {
    /// `serve`: each row's `usage` is the one the mock computed and returned.
    Serve,
    /// `proxy`: each row's `recorded` usage is the upstream's, beside the `predicted` one.
    Proxy,
}

/// One Messages request as the page shows it. Usage objects have the API's shape; costs are
/// integer nano-dollars, written as `cost_usd`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Row {
    /// Milliseconds since the edge started, when the request arrived.
    pub at_ms: u64,
    /// The `request-id` answered (serve's own, or the upstream's).
    pub request_id: Option<String>,
    /// The workspace (the API's id, a key fingerprint, or `default`): never a key.
    pub workspace: String,
    /// The model the request named (the proxy: the one the response named when not predicted).
    pub model: Option<String>,
    /// serve: the usage returned.
    pub usage: Option<Usage>,
    /// proxy: the usage the upstream billed.
    pub recorded: Option<Usage>,
    /// proxy: the endpoint's prediction.
    pub predicted: Option<Usage>,
    /// proxy: whether the cached shares agree (within max(1,000 tokens, 2 points)).
    pub agrees: Option<bool>,
    /// The miss: tokens that could have been read and were not, and why (serve: the request's;
    /// proxy: the prediction's).
    pub miss: Option<Miss>,
    /// proxy, on a disagreement: where the request first leaves the recent one it shares the
    /// longest prefix with.
    pub divergence: Option<String>,
    /// The error answered.
    pub error: Option<LoggedError>,
    /// The response ended early.
    pub incomplete: bool,
    /// proxy: not predicted (the prediction queue was full).
    pub prediction_skipped: bool,
    /// What the request cost (serve: as priced; proxy: its recorded usage at the table's prices);
    /// none for a model without a price.
    pub cost: Option<Cost>,
    /// proxy: what the prediction costs.
    pub predicted_cost: Option<Cost>,
    /// The workspace's cost so far, this request included (the stats' running total).
    pub running_cost: Cost,
    /// proxy: the workspace's predicted cost so far.
    pub running_predicted_cost: Option<Cost>,
}

impl Row {
    /// A request serve priced; `running` is its workspace's cost so far.
    pub fn served(record: &Record, request_id: &str, running: Cost) -> Row {
        Row {
            at_ms: record.at.ms(),
            request_id: Some(request_id.to_string()),
            workspace: record.workspace.clone(),
            model: Some(record.model.clone()),
            usage: Some(record.usage),
            miss: record.miss.clone(),
            cost: record.priced.then_some(record.cost),
            running_cost: running,
            ..Row::default()
        }
    }

    /// A request serve answered with `error`.
    pub fn refused(at_ms: u64, request_id: &str, workspace: &str, error: &ApiError, running: Cost) -> Row {
        Row {
            at_ms,
            request_id: Some(request_id.to_string()),
            workspace: workspace.to_string(),
            error: Some(LoggedError::of(error)),
            running_cost: running,
            ..Row::default()
        }
    }
}

/// The last rows of one edge, numbered from 0 in the order they were added.
#[derive(Debug)]
pub struct Feed {
    edge: Edge,
    /// When the edge started, for the page's clock (RFC 3339, milliseconds): an edge may read
    /// the wall clock.
    started: String,
    rows: VecDeque<Arc<Row>>,
    capacity: usize,
    /// The number the next row gets: rows added so far.
    next: u64,
}

impl Feed {
    /// An empty feed keeping the last `capacity` rows, its clock starting now.
    pub fn new(edge: Edge, capacity: usize) -> Feed {
        let started = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
        Feed { edge, started, rows: VecDeque::with_capacity(capacity.min(LIVE_ROWS)), capacity, next: 0 }
    }

    /// Appends a row (dropping the oldest past the capacity).
    pub fn push(&mut self, row: Row) {
        if self.capacity == 0 {
            self.next += 1;
            return;
        }
        if self.rows.len() == self.capacity {
            self.rows.pop_front();
        }
        self.rows.push_back(Arc::new(row));
        self.next += 1;
    }

    /// Rows kept now.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether no row is kept.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The rows numbered `since` and after whose workspace `visible` accepts, and how many rows
    /// numbered `since` and after are gone (dropped before this call).
    pub fn since(&self, since: u64, visible: impl Fn(&str) -> bool) -> Slice {
        let first = self.next - self.rows.len() as u64;
        let skip = since.saturating_sub(first).min(self.rows.len() as u64) as usize;
        let rows = self
            .rows
            .iter()
            .enumerate()
            .skip(skip)
            .filter(|(_, row)| visible(&row.workspace))
            .map(|(at, row)| (first + at as u64, Arc::clone(row)))
            .collect();
        Slice {
            edge: self.edge,
            started: self.started.clone(),
            capacity: self.capacity,
            next: self.next,
            missed: first.saturating_sub(since.min(self.next)),
            rows,
        }
    }
}

/// A copy of a feed's rows taken under its lock, serialized after it is released.
pub struct Slice {
    edge: Edge,
    started: String,
    capacity: usize,
    next: u64,
    missed: u64,
    rows: Vec<(u64, Arc<Row>)>,
}

/// What the caller may see of the edge's totals so far (the stats' own numbers).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Messages requests counted.
    pub requests: u64,
    /// serve: what they cost; proxy: their recorded usage at the table's prices.
    pub cost: Cost,
    /// proxy: what the prediction costs.
    pub predicted_cost: Option<Cost>,
}

impl Slice {
    /// The `GET /forkcache/events` document (one line).
    pub fn to_json(&self, totals: Totals) -> String {
        let document = FeedJson {
            edge: self.edge,
            started: &self.started,
            capacity: self.capacity,
            next: self.next,
            missed: self.missed,
            totals: TotalsJson {
                requests: totals.requests,
                cost_usd: totals.cost.usd(),
                predicted_cost_usd: totals.predicted_cost.map(|cost| cost.usd()),
            },
            rows: self.rows.iter().map(|(index, row)| RowJson::of(*index, row)).collect(),
        };
        #[allow(clippy::expect_used)] // strings, integers and finite floats: serializing cannot fail
        serde_json::to_string(&document).expect("the feed serializes")
    }
}

#[derive(Serialize)]
struct FeedJson<'a> {
    edge: Edge,
    started: &'a str,
    capacity: usize,
    next: u64,
    missed: u64,
    totals: TotalsJson,
    rows: Vec<RowJson<'a>>,
}

#[derive(Serialize)]
struct TotalsJson {
    requests: u64,
    cost_usd: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    predicted_cost_usd: Option<f64>,
}

/// A row as the feed writes it: serve's rows carry `usage`, the proxy's `recorded`,
/// `predicted`, `agrees`, `divergence`, `prediction_skipped` and the predicted costs.
#[derive(Serialize)]
struct RowJson<'a> {
    index: u64,
    at_ms: u64,
    request_id: Option<&'a str>,
    workspace: &'a str,
    model: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<&'a Usage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    recorded: Option<Option<&'a Usage>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    predicted: Option<Option<&'a Usage>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    agrees: Option<Option<bool>>,
    miss: Option<&'a Miss>,
    #[serde(skip_serializing_if = "Option::is_none")]
    divergence: Option<Option<&'a str>>,
    error: Option<&'a LoggedError>,
    incomplete: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    prediction_skipped: Option<bool>,
    cost_usd: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    predicted_cost_usd: Option<Option<f64>>,
    running_cost_usd: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    running_predicted_cost_usd: Option<f64>,
}

impl<'a> RowJson<'a> {
    fn of(index: u64, row: &'a Row) -> RowJson<'a> {
        // A proxy row has a running predicted cost; its proxy-only members are then written
        // even when empty (`null`), so every proxy row has the same keys.
        let proxied = row.running_predicted_cost.is_some();
        let proxy = |value| proxied.then_some(value);
        RowJson {
            index,
            at_ms: row.at_ms,
            request_id: row.request_id.as_deref(),
            workspace: &row.workspace,
            model: row.model.as_deref(),
            usage: if proxied { None } else { row.usage.as_ref() },
            recorded: proxy(row.recorded.as_ref()),
            predicted: proxy(row.predicted.as_ref()),
            agrees: proxied.then_some(row.agrees),
            miss: row.miss.as_ref(),
            divergence: proxied.then_some(row.divergence.as_deref()),
            error: row.error.as_ref(),
            incomplete: row.incomplete,
            prediction_skipped: proxied.then_some(row.prediction_skipped),
            cost_usd: row.cost.map(|cost| cost.usd()),
            predicted_cost_usd: proxied.then_some(row.predicted_cost.map(|cost| cost.usd())),
            running_cost_usd: row.running_cost.usd(),
            running_predicted_cost_usd: row.running_predicted_cost.map(|cost| cost.usd()),
        }
    }
}

/// `GET /forkcache/`: the page. Served to anyone: it holds no data, and asks for a key when the
/// feed wants one.
pub async fn page() -> Response {
    let mut reply = (StatusCode::OK, PAGE).into_response();
    let headers = reply.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(PAGE_POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    reply
}

/// `GET /forkcache`: on to the page, whose relative links need the slash.
pub async fn to_page() -> Response {
    let mut reply = StatusCode::PERMANENT_REDIRECT.into_response();
    reply.headers_mut().insert(header::LOCATION, HeaderValue::from_static("/forkcache/"));
    reply
}

/// The feed document as a response: JSON, never cached (it holds a tenant's traffic).
pub fn events_response(json: String) -> Response {
    let mut reply = (StatusCode::OK, json).into_response();
    let headers = reply.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    reply
}

/// An error in the API's shape, with its status and `request-id`.
pub fn refusal(error: &ApiError, request_id: &str) -> Response {
    let status = StatusCode::from_u16(error.status).unwrap_or(StatusCode::BAD_REQUEST);
    let mut reply = (status, error.to_json(request_id)).into_response();
    reply.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Ok(value) = HeaderValue::from_str(request_id) {
        reply.headers_mut().insert("request-id", value);
    }
    reply
}

/// The `since` of a feed query (`since=N`, rows numbered N and after; 0 when absent), or the
/// API's 400 naming the parameter.
pub fn since_of(query: Option<&str>) -> Result<u64, ApiError> {
    let pairs = query.unwrap_or_default().split('&').filter(|pair| !pair.is_empty());
    let mut since = 0;
    for pair in pairs {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        if name != "since" {
            continue;
        }
        since = value.parse::<u64>().map_err(|_| {
            ApiError::invalid(format!(
                "since: expected a row number, a whole number such as since=0; found {value:?}"
            ))
        })?;
    }
    Ok(since)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(workspace: &str, at_ms: u64) -> Row {
        Row { at_ms, workspace: workspace.to_string(), ..Row::default() }
    }

    fn indexes(slice: &Slice) -> Vec<u64> {
        slice.rows.iter().map(|(index, _)| *index).collect()
    }

    #[test]
    fn a_feed_keeps_its_last_rows_and_says_how_many_a_late_reader_missed() {
        let mut feed = Feed::new(Edge::Serve, 3);
        for at in 0..5 {
            feed.push(row(if at % 2 == 0 { "a" } else { "b" }, at));
        }
        // 5 rows added, numbered 0..=4; the last 3 (2, 3, 4) kept.
        assert_eq!(feed.len(), 3);
        let all = feed.since(0, |_| true);
        assert_eq!((indexes(&all), all.next, all.missed), (vec![2, 3, 4], 5, 2));
        let caught_up = feed.since(3, |_| true);
        assert_eq!((indexes(&caught_up), caught_up.missed), (vec![3, 4], 0));
        let past_the_end = feed.since(9, |_| true);
        assert_eq!((indexes(&past_the_end), past_the_end.missed), (vec![], 0));
        // Rows 2 and 4 are workspace a's.
        assert_eq!(indexes(&feed.since(0, |w| w == "a")), [2, 4]);
    }

    #[test]
    fn a_zero_capacity_feed_keeps_nothing_but_counts() {
        let mut feed = Feed::new(Edge::Proxy, 0);
        feed.push(row("a", 0));
        let slice = feed.since(0, |_| true);
        assert_eq!((slice.rows.len(), slice.next, slice.missed), (0, 1, 1));
    }

    #[test]
    fn since_is_a_whole_number_or_a_400_naming_it() {
        assert_eq!(since_of(None).unwrap(), 0);
        assert_eq!(since_of(Some("since=42")).unwrap(), 42);
        assert_eq!(since_of(Some("x=1&since=7")).unwrap(), 7);
        let error = since_of(Some("since=-1")).unwrap_err();
        assert_eq!(error.kind.status(), 400);
        assert!(error.message.contains("since") && error.message.contains("\"-1\""), "{}", error.message);
    }
}
