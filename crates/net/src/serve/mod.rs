//! `forkcache serve`: the mock Messages endpoint over HTTP, for real clients (the official SDKs,
//! Claude Code) to run against unmodified.
//!
//! This module is the library's one edge that reads a wall clock: it stamps each request's
//! arrival (milliseconds since the server started) inside the endpoint lock, so the trace lists
//! requests in the order they were priced, and hands that time to the deterministic
//! [`MockEndpoint`]. Visibility follows real events: an entry becomes readable when the server
//! begins its response — at once with [`LatencyMode::Instant`], after the modelled time to first
//! token with [`LatencyMode::Model`] (the server then really waits that long before its first
//! byte). Everything else — replies ([`Script`]), SSE bytes ([`forkcache_wire::message_events`]),
//! totals ([`ServeStats`]) — is pure and tested without a socket.

mod answer;
mod compress;
mod http;
mod live;
mod pricer;
mod read;
mod script;
mod stats;
pub mod validate;

use std::future::Future;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use pricer::Pricer;
use tokio::sync::watch;
use tokio::time::Instant;

use forkcache_engine::Provider;
use forkcache_engine::cache::StoreStats;
use forkcache_engine::clock::{LatencyModel, SimTime};
use forkcache_engine::endpoint::{MockEndpoint, Record};
use forkcache_engine::prompt::RenderCounts;
use forkcache_ingest::trace::{BODY_BUDGET_BYTES, BodyBudget, SessionMarker, TraceWriter};
use forkcache_wire::Chunking;

use crate::edge::{
    BODY_LIMIT_BYTES, BODY_TIMEOUT_MS, EdgeError, HEADER_TIMEOUT_MS, IDLE_TIMEOUT_MS, Limits,
    MAX_CONNECTIONS, pricing_settings, serve_until,
};
use crate::live::{Edge, Feed};

pub use script::{
    ErrorReply, Planned, Rule, Script, ScriptError, ScriptReply, ToolCall, When, schema_example,
};
pub use stats::{ServeStats, WorkspaceTotals, request_line};

/// When the server sends its first byte (and so when a request's cache writes become readable).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LatencyMode {
    /// As soon as the request is priced (microseconds). Default.
    #[default]
    Instant,
    /// After the latency model's time to first token; stream deltas are then spread over the
    /// modelled generation time, and a non-streamed body waits for the whole of it.
    Model,
}

/// Server settings.
pub struct ServeConfig {
    /// Address to listen on. Default `127.0.0.1:8765`; port 0 picks a free port.
    pub addr: SocketAddr,
    /// What to answer. Default [`Script::builtin`].
    pub script: Script,
    /// Append every Messages request to this JSONL trace (created if missing). Default none.
    pub trace: Option<PathBuf>,
    /// Response timing. Default [`LatencyMode::Instant`].
    pub latency: LatencyMode,
    /// Refuse requests without an API key (401). Default false: they use the default workspace.
    pub require_key: bool,
    /// Shut down after answering this many Messages requests. Default none.
    pub max_requests: Option<u64>,
    /// Largest body accepted, in bytes. Default [`BODY_LIMIT_BYTES`].
    pub body_limit_bytes: usize,
    /// How streamed content is cut into deltas.
    pub chunking: Chunking,
    /// Where to write one line per Messages request as it is answered. Default none.
    pub request_log: Option<Box<dyn Write + Send>>,
    /// How long in-flight requests may take to finish once shutdown begins, in milliseconds.
    /// Default 10,000.
    pub shutdown_grace_ms: u64,
    /// Time allowed for a request's headers, from the connection's start or the end of the
    /// previous response, in milliseconds. Default [`HEADER_TIMEOUT_MS`].
    pub header_timeout_ms: u64,
    /// Time allowed for a request's body once its headers arrived (408 after), in milliseconds.
    /// Default [`BODY_TIMEOUT_MS`].
    pub body_timeout_ms: u64,
    /// A connection with no bytes moving either way for this long is closed, in milliseconds.
    /// Default [`IDLE_TIMEOUT_MS`].
    pub idle_timeout_ms: u64,
    /// Connections open at once; more wait to be accepted. Default [`MAX_CONNECTIONS`].
    pub max_connections: usize,
    /// Refuse top-level fields the API does not document (400 `Extra inputs are not
    /// permitted`) instead of counting them in the stats. Default false.
    pub strict: bool,
    /// Encode responses as the request's `accept-encoding` allows (gzip, br, zstd), each body
    /// frame flushed as sent. Default false.
    pub compress: bool,
    /// Requests the live page's feed keeps (`GET /forkcache/events`). Default
    /// [`crate::live::LIVE_ROWS`].
    pub live_rows: usize,
}

impl ServeConfig {
    /// The defaults, listening on `addr`.
    pub fn new(addr: SocketAddr) -> ServeConfig {
        ServeConfig {
            addr,
            script: Script::builtin(),
            trace: None,
            latency: LatencyMode::Instant,
            require_key: false,
            max_requests: None,
            body_limit_bytes: BODY_LIMIT_BYTES,
            chunking: Chunking::default(),
            request_log: None,
            shutdown_grace_ms: 10_000,
            header_timeout_ms: HEADER_TIMEOUT_MS,
            body_timeout_ms: BODY_TIMEOUT_MS,
            idle_timeout_ms: IDLE_TIMEOUT_MS,
            max_connections: MAX_CONNECTIONS,
            strict: false,
            compress: false,
            live_rows: crate::live::LIVE_ROWS,
        }
    }
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig::new(SocketAddr::from(([127, 0, 0, 1], 8765)))
    }
}

/// What the server counted, when it stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// Per-workspace totals.
    pub stats: ServeStats,
    /// Cache counters (entries, writes, reads, evictions).
    pub cache: StoreStats,
    /// How the prompts were rendered (whole, or resumed from the connection's last request).
    pub renders: RenderCounts,
}

impl Summary {
    /// The same document as `GET /forkcache/stats`.
    pub fn to_json(&self) -> String {
        self.stats.to_json(&self.cache, self.renders)
    }

    /// A table for people.
    pub fn to_table(&self) -> String {
        self.stats.to_table(&self.cache)
    }
}

/// A bound server, ready to run.
pub struct Server {
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    stop_requested: watch::Receiver<bool>,
}

impl Server {
    /// Binds the address and opens the trace; the endpoint prices every request.
    pub async fn bind(config: ServeConfig, endpoint: MockEndpoint) -> Result<Server, EdgeError> {
        let trace = match &config.trace {
            Some(path) => Some(
                TraceWriter::open(path, &session_marker(&config, &endpoint))
                    .map_err(|source| EdgeError::Trace { path: path.clone(), source })?,
            ),
            None => None,
        };
        let listener = tokio::net::TcpListener::bind(config.addr)
            .await
            .map_err(|source| EdgeError::Bind { addr: config.addr, source })?;
        let (stop, stop_requested) = watch::channel(false);
        let models_json = http::models_json(endpoint.prices());
        let rules = endpoint.config().rules_memo();
        let openai = openai_endpoint(&endpoint)?;
        let core = Core {
            endpoint,
            openai,
            stats: ServeStats::default(),
            trace,
            request_log: config.request_log,
            next_request: 0,
            live: Feed::new(Edge::Serve, config.live_rows),
        };
        let settings = Settings {
            rules,
            script: config.script,
            latency: config.latency,
            require_key: config.require_key,
            max_requests: config.max_requests,
            body_limit_bytes: config.body_limit_bytes,
            chunking: config.chunking,
            shutdown_grace_ms: config.shutdown_grace_ms,
            body_timeout_ms: config.body_timeout_ms,
            strict: config.strict,
            compress: config.compress,
            limits: Limits {
                header_timeout: std::time::Duration::from_millis(config.header_timeout_ms),
                idle_timeout: std::time::Duration::from_millis(config.idle_timeout_ms),
                max_connections: config.max_connections,
            },
        };
        let (pricer, take_overs) = Pricer::new();
        let shared = Arc::new(Shared {
            core: Mutex::new(core),
            pricer,
            config: settings,
            started: Instant::now(),
            stop,
            models_json,
        });
        take_overs.start(Arc::downgrade(&shared))?;
        Ok(Server { listener, shared, stop_requested })
    }

    /// The address actually bound (the real port when 0 was asked for).
    #[allow(clippy::expect_used)] // a bound TCP listener always has a local address
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().expect("a bound listener has an address")
    }

    /// Serves until `shutdown` completes or `max_requests` have been answered, lets in-flight
    /// responses finish, and returns what was counted.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<Summary, EdgeError> {
        let mut stop_requested = self.stop_requested;
        let stopping = async move {
            tokio::select! {
                () = shutdown => {}
                _ = stop_requested.wait_for(|stop| *stop) => {}
            }
        };
        let mut router = http::router(Arc::clone(&self.shared));
        if self.shared.config.compress {
            router = router.layer(axum::middleware::from_fn(compress::compress));
        }
        let kept = Some(BodyBudget::new(BODY_BUDGET_BYTES));
        let config = &self.shared.config;
        serve_until(self.listener, router, config.limits, kept, stopping, config.shutdown_grace_ms).await;
        // A request whose client hung up may still be waiting: it is priced and counted too.
        pricer::drained(&self.shared).await;
        Ok(self.shared.lock().summary())
    }
}

/// The parts of [`ServeConfig`] requests read.
struct Settings {
    /// The tools, system blocks and message blocks earlier bodies showed passing the API's rules
    /// (each worker checks its body before the lock, and a client resends them with every
    /// request); none when the endpoint is lenient.
    rules: Option<forkcache_wire::check::CheckMemo>,
    script: Script,
    latency: LatencyMode,
    require_key: bool,
    max_requests: Option<u64>,
    body_limit_bytes: usize,
    chunking: Chunking,
    shutdown_grace_ms: u64,
    body_timeout_ms: u64,
    strict: bool,
    compress: bool,
    limits: Limits,
}

/// State every connection shares.
struct Shared {
    core: Mutex<Core>,
    /// Where Messages requests are handed over to be priced, under `core`'s lock.
    pricer: Pricer,
    config: Settings,
    started: Instant,
    stop: watch::Sender<bool>,
    models_json: String,
}

impl Shared {
    /// The endpoint and everything that must change in the order requests are priced.
    /// Held for short, synchronous sections only (never across an await: the guard is not
    /// `Send`, so the compiler holds every handler to that).
    fn lock(&self) -> MutexGuard<'_, Core> {
        // A panic while pricing is caught inside the lock; one anywhere else under it leaves
        // counts that may lag by that request, which is better than refusing every request after.
        self.core.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// When a priced request's reply begins and ends (ms on the virtual clock): at once, or
    /// after the modelled time to first token and generation.
    fn reply_times(&self, record: &Record, latency: &LatencyModel) -> (u64, u64) {
        let at = record.at.ms();
        match self.config.latency {
            LatencyMode::Instant => (at, at),
            LatencyMode::Model => {
                let first_byte = at + record.ttft_ms;
                (first_byte, first_byte + latency.generation_ms(record.usage.output_tokens))
            }
        }
    }

    /// Milliseconds since the server started: the virtual clock's reading for this request.
    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// The wall-clock instant of a virtual time.
    fn instant_of(&self, ms: u64) -> Instant {
        self.started + std::time::Duration::from_millis(ms)
    }

    /// The error for a Messages request past `max_requests`, when `answered` have been: checked
    /// under the lock the count is kept under, so exactly `max_requests` are answered and traced
    /// however many clients are in flight when the last one is.
    fn past_max_requests(&self, answered: u64) -> Option<forkcache_wire::ApiError> {
        let max = self.config.max_requests.filter(|&max| answered >= max)?;
        let message = format!("the server is shutting down: it answers {max} requests (--max-requests)");
        Some(forkcache_wire::ApiError::new(forkcache_wire::ErrorKind::Overloaded, message))
    }

    /// Counts a Messages request against `max_requests`.
    fn count_for_shutdown(&self, answered: u64) {
        if self.config.max_requests.is_some_and(|max| answered >= max) {
            self.stop.send_replace(true);
        }
    }
}

/// What changes per request, under one lock.
struct Core {
    endpoint: MockEndpoint,
    /// Prices the OpenAI routes' requests: OpenAI's cache rules and price table.
    openai: MockEndpoint,
    stats: ServeStats,
    trace: Option<TraceWriter>,
    request_log: Option<Box<dyn Write + Send>>,
    next_request: u64,
    /// The live page's last rows, in pricing order.
    live: Feed,
}

impl Core {
    /// What was counted so far, server-wide: the `GET /forkcache/stats` document without a key.
    fn summary(&self) -> Summary {
        let (mut cache, renders) = (self.endpoint.cache_stats(), self.endpoint.render_counts());
        // One cache per endpoint (Messages, OpenAI), counted as one.
        let openai = self.openai.cache_stats();
        cache.entries += openai.entries;
        cache.writes += openai.writes;
        cache.reads += openai.reads;
        cache.evictions += openai.evictions;
        Summary { stats: self.stats.clone(), cache, renders }
    }

    /// `req_fc…`, numbered in the order requests are answered.
    fn next_request_id(&mut self) -> String {
        self.next_request += 1;
        format!("req_fc{:018}", self.next_request)
    }

    /// Appends the line `line()` builds, building it only when there is a trace: the line
    /// copies and re-checks the whole body, which without a trace would be wasted work done
    /// under the lock.
    fn append_trace(&mut self, line: impl FnOnce() -> String) {
        if let Some(trace) = &mut self.trace {
            if trace.append(&line()).is_err() {
                self.stats.trace_write_errors += 1;
            }
        }
    }

    /// At a request's arrival (`at_ms`, from `workspace`): drops the cache state of the other
    /// workspaces gone idle and folds their stats rows into the server-wide one, so a server
    /// meeting ever new keys holds the workspaces in use, not every one it has seen.
    /// A workspace's row is folded once neither endpoint (Messages, OpenAI) holds it.
    fn retire_idle(&mut self, at_ms: u64, workspace: &str) {
        let now = SimTime(at_ms);
        let mut dropped = self.endpoint.drop_idle_workspaces(now, Some(workspace));
        let mut dropped_openai = self.openai.drop_idle_workspaces(now, Some(workspace));
        dropped.retain(|name| !self.openai.holds_workspace(name));
        dropped_openai.retain(|name| !self.endpoint.holds_workspace(name));
        dropped.append(&mut dropped_openai);
        let (endpoint, openai) = (&self.endpoint, &self.openai);
        let holds = |name: &str| endpoint.holds_workspace(name) || openai.holds_workspace(name);
        self.stats.fold_idle(at_ms, workspace, &dropped, holds);
    }

    /// Writes the line `line()` builds, building it only when there is a log.
    fn log(&mut self, line: impl FnOnce() -> String) {
        if let Some(log) = &mut self.request_log {
            let line = line();
            // The log is for watching; a closed terminal must not stop the server.
            let _ = writeln!(log, "{line}").and_then(|()| log.flush());
        }
    }
}

/// The endpoint for OpenAI's APIs: `anthropic`'s settings (workspaces, key salt, latency, price
/// date), under OpenAI's automatic prefix cache and its price table. Lenient: the Messages API's
/// own rules (roles alternating, tool results answering calls) are not OpenAI's; the OpenAI
/// edge checks the request instead.
fn openai_endpoint(anthropic: &MockEndpoint) -> Result<MockEndpoint, EdgeError> {
    let mut config = anthropic.config().clone();
    config.cache.policy = Provider::Openai.policy();
    config.lenient = true;
    let mut openai = MockEndpoint::new(config, Provider::Openai.prices())
        .map_err(|unavailable| EdgeError::Tokenizer(unavailable.0))?;
    openai.set_key_salt(anthropic.key_salt().clone());
    Ok(openai)
}

/// The `--trace` file's session marker: the wall-clock start (the edge may read it), this
/// version, and the settings that price requests. The key → workspace map is left out: it holds
/// keys.
fn session_marker(config: &ServeConfig, endpoint: &MockEndpoint) -> SessionMarker {
    let pricing = pricing_settings(endpoint);
    let latency = match config.latency {
        LatencyMode::Instant => "instant",
        LatencyMode::Model => "model",
    };
    SessionMarker {
        started: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        format: forkcache_ingest::trace::TRACE_FORMAT,
        settings: serde_json::json!({
            "endpoint": pricing,
            "prices_date": endpoint.prices().date,
            "latency": latency,
            "require_key": config.require_key,
            // Whether workspace fingerprints are keyed (the secret itself is never written).
            "key_salted": endpoint.key_salt().is_set(),
            "strict": config.strict,
            // Which requests were refused as the API refuses them; a trace without it predates
            // the checks (everything that parsed was priced).
            "checks": if endpoint.config().lenient { "lenient" } else { "api" },
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use forkcache_engine::billing::{PriceTable, Usage};
    use forkcache_engine::endpoint::{Call, EndpointConfig, Record};
    use forkcache_wire::Reply;

    /// A 2,000-token system block marked 5m and "hi" (7 tokens): 2,007 input tokens.
    const CACHED: &str = r#"{"model":"claude-sonnet-4-6","max_tokens":5,"system":[{"type":"text","text":"s","forkcache_tokens":2000,"cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"hi"}]}"#;

    fn core() -> Core {
        let endpoint = MockEndpoint::new(EndpointConfig::default(), PriceTable::builtin()).unwrap();
        let openai = openai_endpoint(&endpoint).unwrap();
        Core {
            endpoint,
            openai,
            stats: ServeStats::default(),
            trace: None,
            request_log: None,
            next_request: 0,
            live: Feed::new(Edge::Serve, 0),
        }
    }

    /// What the server does with a priced request arriving at `at_ms`, in its order.
    fn priced(core: &mut Core, workspace: &str, at_ms: u64) -> Record {
        let mut call = Call::new(CACHED.as_bytes(), SimTime(at_ms));
        call.workspace = Some(workspace);
        call.reply = Reply { output_tokens: Some(3), ..Reply::input_only() };
        let record = core.endpoint.handle(call).unwrap().record;
        core.retire_idle(at_ms, workspace);
        core.stats.priced(&record);
        record
    }

    /// ... and with a request turned away.
    fn rejected(core: &mut Core, workspace: &str, at_ms: u64) {
        core.retire_idle(at_ms, workspace);
        core.stats.rejected(workspace, at_ms);
    }

    #[test]
    fn idle_workspaces_fold_into_one_row_and_the_totals_stay_the_per_response_sum() {
        let mut core = core();
        let mut sent = Usage::default();
        sent.add(&priced(&mut core, "alice", 0).usage);
        rejected(&mut core, "mallory", 1_000);
        // Alice's entry expires at 300,000 ms; mallory never had cache state, and her row is
        // kept 5 minutes after her last request, to 301,000 ms.
        sent.add(&priced(&mut core, "bob", 300_001).usage);
        assert_eq!(core.stats.workspaces.keys().collect::<Vec<_>>(), ["bob", "mallory"]);
        assert_eq!((core.stats.idle_dropped_rows, core.stats.idle_dropped.requests), (1, 1));
        assert!(!core.endpoint.holds_workspace("alice"));
        sent.add(&priced(&mut core, "bob", 301_000).usage);
        assert_eq!(core.stats.workspaces.keys().collect::<Vec<_>>(), ["bob"]);
        assert_eq!((core.stats.idle_dropped_rows, core.stats.idle_dropped.rejected), (2, 1));

        // 3 priced (alice's write, bob's write, bob's read) and 1 rejected, all still counted.
        let totals = core.stats.totals();
        assert_eq!((totals.requests, totals.rejected, core.stats.messages_requests()), (3, 1, 4));
        assert_eq!(totals.usage, sent);
        // By hand: 2 × 2,000 written, 2,000 read, 3 × 7 uncached, 3 × 3 output.
        assert_eq!(
            (
                sent.cache_creation_input_tokens,
                sent.cache_read_input_tokens,
                sent.input_tokens,
                sent.output_tokens
            ),
            (4_000, 2_000, 21, 9)
        );
        let json: serde_json::Value = serde_json::from_str(&core.summary().to_json()).unwrap();
        assert_eq!(json["idle_dropped"]["workspaces"], 2, "{json}");
        assert_eq!(json["idle_dropped"]["totals"]["requests"], 1, "{json}");
        assert_eq!(json["totals"]["requests"], 3, "{json}");
        // A tenant's own view never shows the server-wide row.
        assert!(!core.stats.workspace_json("bob").contains("idle_dropped"));
    }
}
