//! `forkcache proxy` on loopback: the latency it adds to a request and the throughput it keeps,
//! against the same requests sent straight to the upstream in the same run. See
//! benches/README.md for what was measured where.
//!
//! The upstream is `forkcache serve` (instant latency). The proxy in front of it records nothing
//! to disk but runs its whole journal (decoding the copy) and its prediction (pricing every
//! exchange through its own endpoint, on a lowest-priority thread). The prediction may lag
//! behind a burst: after each proxied burst, outside its timing, the bench waits until
//! `GET /forkcache/stats` shows no prediction pending, so no burst pays for an earlier one's
//! predictions, and the summary reports how long that took (the prediction lag) and how many
//! predictions a full queue skipped.
//! Requests are streamed (as Claude Code's are), with a cached system prompt of about 18 KB or
//! 900 KB; every request is the same, so the upstream reads its cache each time.
//!
//! Criterion times one request at a time (`latency/*`) and 4 clients × 16 requests
//! (`throughput/*`). The summary after criterion's report sends 300 requests each way,
//! alternating, and prints p50 and p99 of the latency and the difference, then the throughput
//! ratio: the median of 5 rounds, each a burst straight to the upstream and one through the
//! proxy, 4 clients sending 40 MB each (at least 16 requests), then the prediction lag.

use std::net::SocketAddr;
use std::sync::Barrier;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use forkcache::billing::PriceTable;
use forkcache::endpoint::{EndpointConfig, MockEndpoint};
use forkcache::proxy::{Proxy, ProxyConfig};
use forkcache::serve::{ServeConfig, Server};
use serde_json::json;

/// A server (or proxy) on its own runtime thread until `stop` is sent or dropped.
struct Running {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        drop(self.stop.take());
        let _ = self.thread.take().map(JoinHandle::join);
    }
}

fn running<F, Fut>(start: F) -> Running
where
    F: FnOnce(tokio::sync::oneshot::Receiver<()>, std::sync::mpsc::Sender<SocketAddr>) -> Fut
        + Send
        + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
        runtime.block_on(start(stopped, addr_tx));
    });
    Running { addr: addr_rx.recv().unwrap(), stop: Some(stop), thread: Some(thread) }
}

fn endpoint() -> MockEndpoint {
    MockEndpoint::new(EndpointConfig::default(), PriceTable::builtin()).unwrap()
}

fn serve() -> Running {
    running(|stopped, addr| async move {
        let server =
            Server::bind(ServeConfig::new(SocketAddr::from(([127, 0, 0, 1], 0))), endpoint()).await.unwrap();
        addr.send(server.local_addr()).unwrap();
        server.run(async move { stopped.await.unwrap_or(()) }).await.unwrap();
    })
}

fn proxy(upstream: SocketAddr) -> Running {
    running(move |stopped, addr| async move {
        let mut config = ProxyConfig::new(format!("http://{upstream}"));
        config.addr = SocketAddr::from(([127, 0, 0, 1], 0));
        let proxy = Proxy::bind(config, endpoint()).await.unwrap();
        addr.send(proxy.local_addr()).unwrap();
        proxy.run(async move { stopped.await.unwrap_or(()) }).await.unwrap();
    })
}

/// A streamed request whose cached system prompt makes it about `bytes` long.
fn body(bytes: usize) -> Vec<u8> {
    let system = "Follow the house rules carefully. ".repeat(bytes / 34);
    json!({
        "model": "claude-sonnet-4-6",
        "max_tokens": 256,
        "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "What changed?"}],
        "stream": true,
    })
    .to_string()
    .into_bytes()
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder().build().into()
}

/// One request, start to last byte.
fn send(agent: &ureq::Agent, url: &str, body: &[u8]) -> Duration {
    let started = Instant::now();
    let mut response = agent.post(url).header("x-api-key", "bench").send(body).unwrap();
    std::hint::black_box(response.body_mut().read_to_vec().unwrap());
    started.elapsed()
}

/// `clients` keep-alive clients sending `each` requests at once: first request to last byte.
fn burst(url: &str, body: &[u8], clients: usize, each: usize) -> Duration {
    let ready = Barrier::new(clients + 1);
    let started = std::thread::scope(|scope| {
        for _ in 0..clients {
            let ready = &ready;
            scope.spawn(move || {
                let agent = agent();
                ready.wait();
                for _ in 0..each {
                    send(&agent, url, body);
                }
            });
        }
        ready.wait();
        Instant::now()
    });
    started.elapsed()
}

/// The proxy's prediction counters: exchanges waiting for their prediction, and predictions
/// skipped so far (every workspace).
fn prediction_counters(stats_url: &str) -> (u64, u64) {
    let text = agent().get(stats_url).call().unwrap().body_mut().read_to_string().unwrap();
    let stats: serde_json::Value = serde_json::from_str(&text).unwrap();
    let skipped = stats["workspaces"]
        .as_object()
        .map_or(0, |all| all.values().filter_map(|w| w["predictions_skipped"].as_u64()).sum());
    (stats["predictions_pending"].as_u64().unwrap(), skipped)
}

/// Waits until the proxy has predicted every exchange it forwarded: how long that took.
fn drain(stats_url: &str) -> Duration {
    let started = Instant::now();
    while prediction_counters(stats_url).0 > 0 {
        std::thread::sleep(Duration::from_millis(2));
    }
    started.elapsed()
}

const SIZES: [(&str, usize); 2] = [("18KB", 18 << 10), ("900KB", 900 << 10)];
const CLIENTS: usize = 4;
const EACH: usize = 16;
/// Bytes each client sends per summary burst.
const SUMMARY_BURST_BYTES: usize = 40 << 20;

fn bench(c: &mut Criterion, direct_url: &str, proxy_url: &str, stats_url: &str) {
    for (name, size) in SIZES {
        let body = body(size);
        let mut group = c.benchmark_group(format!("proxy/latency_{name}"));
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.sample_size(50);
        let agent = agent();
        group.bench_function("direct", |b| b.iter(|| send(&agent, direct_url, &body)));
        group.bench_function("proxy", |b| b.iter(|| send(&agent, proxy_url, &body)));
        group.finish();
        drain(stats_url);
        let mut group = c.benchmark_group(format!("proxy/throughput_{name}"));
        group.throughput(Throughput::Elements((CLIENTS * EACH) as u64));
        group.sample_size(10);
        group.bench_function("direct", |b| {
            b.iter_custom(|iters| (0..iters).map(|_| burst(direct_url, &body, CLIENTS, EACH)).sum())
        });
        group.bench_function("proxy", |b| {
            b.iter_custom(|iters| {
                let timed = (0..iters).map(|_| burst(proxy_url, &body, CLIENTS, EACH)).sum();
                drain(stats_url);
                timed
            })
        });
        group.finish();
    }
}

fn percentile(sorted: &[Duration], per_100: usize) -> Duration {
    sorted[(sorted.len() * per_100 / 100).min(sorted.len() - 1)]
}

/// p50 and p99 each way, 300 requests alternating, and the throughput ratio of 5 bursts.
fn summary(direct_url: &str, proxy_url: &str, stats_url: &str) {
    eprintln!("\nproxy summary (loopback, streamed requests, upstream = forkcache serve):");
    for (name, size) in SIZES {
        let body = body(size);
        let agent = agent();
        let (mut direct, mut proxied) = (Vec::new(), Vec::new());
        for _ in 0..300 {
            direct.push(send(&agent, direct_url, &body));
            proxied.push(send(&agent, proxy_url, &body));
        }
        drain(stats_url);
        direct.sort();
        proxied.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let (p50, p99) = (
            ms(percentile(&proxied, 50)) - ms(percentile(&direct, 50)),
            ms(percentile(&proxied, 99)) - ms(percentile(&direct, 99)),
        );
        eprintln!(
            "  {name} ({} bytes): direct p50 {:.3} ms p99 {:.3} ms; proxy p50 {:.3} ms p99 {:.3} ms; added p50 {p50:.3} ms, p99 {p99:.3} ms",
            body.len(),
            ms(percentile(&direct, 50)),
            ms(percentile(&direct, 99)),
            ms(percentile(&proxied, 50)),
            ms(percentile(&proxied, 99)),
        );
        // Long enough bursts that scheduling noise averages out.
        let each = (SUMMARY_BURST_BYTES / body.len()).max(EACH);
        let skipped_before = prediction_counters(stats_url).1;
        let mut lags = Vec::new();
        let mut ratios: Vec<f64> = (0..5)
            .map(|_| {
                let direct = burst(direct_url, &body, CLIENTS, each).as_secs_f64();
                let proxied = burst(proxy_url, &body, CLIENTS, each);
                // Outside the timing: the next direct burst must not share the cores with them.
                lags.push(drain(stats_url));
                direct / proxied.as_secs_f64()
            })
            .collect();
        let skipped = prediction_counters(stats_url).1 - skipped_before;
        let all: Vec<String> = ratios.iter().map(|r| format!("{:.0}%", r * 100.0)).collect();
        ratios.sort_by(f64::total_cmp);
        eprintln!(
            "  {name}: throughput through the proxy = {:.0}% of direct (median of 5 alternating bursts of {CLIENTS} × {each}; in run order: {})",
            ratios[2] * 100.0,
            all.join(" ")
        );
        lags.sort();
        eprintln!(
            "  {name}: prediction lag after a proxied burst (until none pending): median {:.0} ms, max {:.0} ms; predictions skipped (queue full): {skipped} of {}",
            lags[2].as_secs_f64() * 1e3,
            lags[4].as_secs_f64() * 1e3,
            5 * CLIENTS * each,
        );
    }
}

fn main() {
    // plotters is built without system-font lookup: criterion's plots need the embedded font.
    forkcache::report::chart::register_font();
    let upstream = serve();
    let front = proxy(upstream.addr);
    let direct_url = format!("http://{}/v1/messages", upstream.addr);
    let proxy_url = format!("http://{}/v1/messages", front.addr);
    let stats_url = format!("http://{}/forkcache/stats", front.addr);
    let mut criterion = Criterion::default().configure_from_args();
    bench(&mut criterion, &direct_url, &proxy_url, &stats_url);
    criterion.final_summary();
    summary(&direct_url, &proxy_url, &stats_url);
    drop(front);
    drop(upstream);
}
