//! Tenancy: one tenant's request must not get slower because many others sent the same prefix.
//!
//! Every tenant (API key, so workspace) sends the same agent request once: the 21st body of
//! `synth::growing_conversation`, about 100 positions of a coding agent's history with a
//! breakpoint on its last block. Then, against an endpoint holding 1 or 20,000 such tenants:
//!
//! - `tenants/warm_tenant/N` (criterion, and the summary): tenant 0 sends its request again and
//!   reads it all from its cache;
//! - `new_key` (the summary only): a key never seen sends it: a new workspace, a miss on every
//!   position. Each pass starts from a freshly built endpoint, so its 200 new keys add at most 1%
//!   to 20,000 tenants (criterion's open-ended iteration count would add tens of thousands).
//!
//! Both run through `MockEndpoint::handle`, the engine part of a `serve` exchange: the HTTP edge
//! around it does nothing per tenant. After criterion's report a summary prints each row's median
//! at 20,000 tenants divided by its median at 1 tenant, measured in the same run (target: ≤ 1.5×).

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::Criterion;

#[path = "support/timing.rs"]
mod timing;
use forkcache_engine::PriceTable;
use forkcache_engine::clock::SimTime;
use forkcache_engine::endpoint::{Call, EndpointConfig, MockEndpoint};
use forkcache_scenario::synth::{ConversationSpec, growing_conversation_iter};
use timing::{median_secs, median_secs_prepared};

const TENANT_COUNTS: [usize; 2] = [1, 20_000];

/// One agent request of realistic shape (tools, system prompt, a history of tool calls).
fn agent_request() -> String {
    growing_conversation_iter(&ConversationSpec::default()).nth(20).expect("the spec has 200 requests")
}

/// A server that has answered `request` once for each of `tenants` keys, 1 ms apart (so every
/// entry is visible when the bench starts, and none has expired: 20,000 ms is under 5 minutes).
struct Server {
    endpoint: MockEndpoint,
    now: u64,
    keys_issued: usize,
}

impl Server {
    fn with_tenants(request: &str, tenants: usize) -> Server {
        let endpoint = MockEndpoint::new(EndpointConfig::default(), PriceTable::builtin()).expect("endpoint");
        let mut server = Server { endpoint, now: 0, keys_issued: 0 };
        for _ in 0..tenants {
            server.send_as_new_key(request);
        }
        server
    }

    fn send(&mut self, request: &str, key: &str) {
        self.now += 1;
        let call = Call { api_key: Some(key), ..Call::new(request.as_bytes(), SimTime(self.now)) };
        let exchange = self.endpoint.handle(call).expect("a valid request");
        black_box(exchange);
    }

    fn send_as_new_key(&mut self, request: &str) {
        let key = format!("sk-ant-tenant-{}", self.keys_issued);
        self.keys_issued += 1;
        self.send(request, &key);
    }
}

/// `iterations` requests of `step`.
fn send_all(server: &mut Server, iterations: u64, step: fn(&mut Server, &str), request: &str) {
    for _ in 0..iterations {
        step(server, request);
    }
}

/// The time of `iterations` requests of `step` (one clock read around all of them).
fn timed(server: &mut Server, iterations: u64, step: fn(&mut Server, &str), request: &str) -> Duration {
    let start = Instant::now();
    send_all(server, iterations, step, request);
    start.elapsed()
}

fn warm_tenant(server: &mut Server, request: &str) {
    server.send(request, "sk-ant-tenant-0");
}

fn new_key(server: &mut Server, request: &str) {
    server.send_as_new_key(request);
}

fn tenants_group(c: &mut Criterion, request: &str) {
    let mut group = c.benchmark_group("tenants");
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(3));
    for tenants in TENANT_COUNTS {
        let mut server = Server::with_tenants(request, tenants);
        group.bench_function(format!("warm_tenant/{tenants}"), |b| {
            b.iter_custom(|iterations| timed(&mut server, iterations, warm_tenant, request))
        });
    }
    group.finish();
}

const PASSES: usize = 7;
const REQUESTS_PER_PASS: u64 = 200;

fn print_row(name: &str, [few, many]: [usize; 2], [at_few, at_many]: [f64; 2]) {
    println!(
        "  {name:<12} {few} tenant: {:>7.1} µs   {many} tenants: {:>7.1} µs   ratio {:.2}× (target ≤ 1.5×)",
        at_few * 1e6,
        at_many * 1e6,
        at_many / at_few
    );
}

fn print_ratios(request: &str) {
    println!(
        "\ntenants: time per request, median of {PASSES} passes of {REQUESTS_PER_PASS} requests ({} B each):",
        request.len()
    );
    let per_request = |secs: f64| secs / REQUESTS_PER_PASS as f64;
    // A repeat adds no tenant: one server per tenant count serves every pass.
    let warm = TENANT_COUNTS.map(|tenants| {
        let mut server = Server::with_tenants(request, tenants);
        per_request(median_secs(PASSES, || send_all(&mut server, REQUESTS_PER_PASS, warm_tenant, request)))
    });
    print_row("warm_tenant", TENANT_COUNTS, warm);
    // Each new key adds one: every pass starts from a freshly built server (not timed).
    let new_keys = TENANT_COUNTS.map(|tenants| {
        let fresh = || Server::with_tenants(request, tenants);
        per_request(median_secs_prepared(PASSES, fresh, |server| {
            send_all(server, REQUESTS_PER_PASS, new_key, request)
        }))
    });
    print_row("new_key", TENANT_COUNTS, new_keys);
}

fn main() {
    let request = agent_request();
    let mut criterion = Criterion::default().configure_from_args();
    tenants_group(&mut criterion, &request);
    criterion.final_summary();
    if std::env::args().any(|arg| arg == "--bench") {
        print_ratios(&request);
    }
}
