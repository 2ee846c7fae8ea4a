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
//! (`throughput/*`), and counts the CPU time one such burst costs each forwarder (`cpu_*`): the
//! proxy (its runtime, journal and prediction threads, not the upstream's or the clients'), its
//! null twin on the same stack (`null_forwarder`: forwarding alone) and, with
//! `PROXY_BENCH_NGINX` set, nginx (its master and worker processes). Issue 34's target is the
//! proxy at ≤ 1.25× nginx's CPU per exchange.
//!
//! The summary after criterion's report sends 300 requests each way (and through nginx when it
//! runs), alternating, and prints p50 and p99 of the latency and the difference, then the
//! throughput ratio: the median of 5 rounds, each a burst straight to the upstream and one
//! through the proxy, 4 clients sending 40 MB each (at least 16 requests), then the prediction
//! lag, then each forwarder's CPU per exchange beside nginx's; and last three rounds of 16
//! clients × 4 requests against an upstream that answers after its modelled latency, as the API
//! does (the proxy must not lower an agent's throughput).

/// The allocator the `forkcache` binary runs `serve` and `proxy` with: its own module, switched
/// to mimalloc first thing in `main`, as the binary does for those commands.
#[path = "../src/allocator.rs"]
mod allocator;
#[global_allocator]
static ALLOCATOR: allocator::ByCommand = allocator::ByCommand;

use std::net::SocketAddr;
use std::sync::Barrier;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use serde_json::json;

use forkcache_engine::billing::PriceTable;
use forkcache_engine::endpoint::{EndpointConfig, MockEndpoint};
use forkcache_net::proxy::{Proxy, ProxyConfig};
use forkcache_net::serve::{LatencyMode, ServeConfig, Server};

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

/// `start` on a runtime of its own whose threads are named `threads` (at most 15 bytes: what
/// Linux keeps of a thread's name), so their CPU time can be told from the rest of the process's.
fn running<F, Fut>(threads: &'static str, start: F) -> Running
where
    F: FnOnce(tokio::sync::oneshot::Receiver<()>, std::sync::mpsc::Sender<SocketAddr>) -> Fut
        + Send
        + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let runtime =
            tokio::runtime::Builder::new_multi_thread().thread_name(threads).enable_all().build().unwrap();
        runtime.block_on(start(stopped, addr_tx));
    });
    Running { addr: addr_rx.recv().unwrap(), stop: Some(stop), thread: Some(thread) }
}

fn endpoint() -> MockEndpoint {
    MockEndpoint::new(EndpointConfig::default(), PriceTable::builtin()).unwrap()
}

fn serve() -> Running {
    serve_with(LatencyMode::Instant)
}

/// `forkcache serve` answering after `latency` (`Model`: it waits its modelled time to first
/// token, then the generation time, as the API takes them).
fn serve_with(latency: LatencyMode) -> Running {
    running("bench-upstream", move |stopped, addr| async move {
        let mut config = ServeConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)));
        config.latency = latency;
        let server = Server::bind(config, endpoint()).await.unwrap();
        addr.send(server.local_addr()).unwrap();
        server.run(async move { stopped.await.unwrap_or(()) }).await.unwrap();
    })
}

fn proxy(upstream: SocketAddr) -> Running {
    running(PROXY_RUNTIME, move |stopped, addr| async move {
        let mut config = ProxyConfig::new(format!("http://{upstream}"));
        config.addr = SocketAddr::from(([127, 0, 0, 1], 0));
        let proxy = Proxy::bind(config, endpoint()).await.unwrap();
        addr.send(proxy.local_addr()).unwrap();
        proxy.run(async move { stopped.await.unwrap_or(()) }).await.unwrap();
    })
}

/// The proxy's null twin: the same stack (axum's server, hyper-util's pooled client, one tokio
/// runtime) forwarding every request and streaming every response back, and nothing else: no
/// recording, no journal, no prediction, no header filtering. Its CPU per exchange is the floor
/// the stack itself sets under the proxy's.
fn null_forwarder(upstream: SocketAddr) -> Running {
    use axum::body::Body;
    use axum::extract::{Request, State};
    use axum::serve::ListenerExt as _;
    use hyper_util::client::legacy::Client;
    use hyper_util::client::legacy::connect::HttpConnector;

    type Forwarding = (Client<HttpConnector, Body>, SocketAddr);
    async fn forward(
        State((client, upstream)): State<Forwarding>,
        request: Request,
    ) -> axum::response::Response {
        let (mut parts, body) = request.into_parts();
        let path = parts.uri.path_and_query().map_or("/", |pq| pq.as_str());
        parts.uri = format!("http://{upstream}{path}").parse().unwrap();
        let response = client.request(axum::http::Request::from_parts(parts, body)).await.unwrap();
        response.map(Body::new)
    }
    running(NULL_RUNTIME, move |stopped, addr| async move {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client = Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector);
        let router = axum::Router::new().fallback(forward).with_state((client, upstream));
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await.unwrap();
        addr.send(listener.local_addr().unwrap()).unwrap();
        let listener = listener.tap_io(|stream| {
            let _ = stream.set_nodelay(true);
        });
        let stop = async move { stopped.await.unwrap_or(()) };
        axum::serve(listener, router).with_graceful_shutdown(stop).await.unwrap();
    })
}

/// nginx as a reverse proxy in front of the same upstream: a peer measured by the same bursts,
/// so the throughput ratio can be read against a proxy that does nothing but forward. Configured
/// to forward as `forkcache proxy` does: keep-alive connections to the upstream, the response
/// streamed chunk by chunk (`proxy_buffering off`), the request body read whole into memory
/// before it is sent (`proxy_request_buffering on`, a buffer larger than the 900 KB body), no
/// access log; one worker process per core (`worker_processes auto`).
struct Nginx {
    addr: SocketAddr,
    child: std::process::Child,
    _dir: tempfile_dir::Dir,
}

impl Drop for Nginx {
    /// SIGQUIT: the master stops its workers and exits (a killed master leaves its workers
    /// running, holding keep-alive connections the upstream's shutdown then waits for).
    fn drop(&mut self) {
        // SAFETY: `kill` takes a process id and a signal number; the child is ours and not yet
        // waited for, so its id names it.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGQUIT) };
        let _ = self.child.wait();
    }
}

/// A scratch directory removed on drop (the bench needs no crate for one directory).
mod tempfile_dir {
    pub struct Dir(pub std::path::PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn nginx(binary: &str, upstream: SocketAddr) -> Nginx {
    let dir = std::env::temp_dir().join(format!("forkcache-bench-nginx-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    let port = free_port();
    let conf = format!(
        "worker_processes auto;\nerror_log {dir}/logs/error.log warn;\npid {dir}/nginx.pid;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n  access_log off;\n  client_max_body_size 32m;\n  client_body_buffer_size 2m;\n\
         client_body_temp_path {dir}/body;\n  proxy_temp_path {dir}/proxy;\n\
         upstream up {{ server {upstream}; keepalive 32; }}\n\
         server {{\n    listen 127.0.0.1:{port};\n    location / {{\n\
         proxy_pass http://up;\n      proxy_http_version 1.1;\n\
         proxy_set_header Connection \"\";\n      proxy_buffering off;\n      proxy_request_buffering on;\n\
         }}\n  }}\n}}\n",
        dir = dir.display()
    );
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
    let child = std::process::Command::new(binary)
        .args(["-p", &dir.display().to_string(), "-c", "nginx.conf", "-g", "daemon off;"])
        .spawn()
        .unwrap_or_else(|err| panic!("PROXY_BENCH_NGINX={binary}: {err}"));
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(Instant::now() < deadline, "nginx did not start listening on {addr}");
        std::thread::sleep(Duration::from_millis(20));
    }
    Nginx { addr, child, _dir: tempfile_dir::Dir(dir) }
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

/// The proxy's runtime threads.
const PROXY_RUNTIME: &str = "bench-proxy-rt";
/// The proxy's journal and prediction threads, `forkcache-proxy-journal` and
/// `forkcache-proxy-predict`, as Linux keeps their names.
const PROXY_BACKSTAGE: &str = "forkcache-proxy";
const PROXY_THREADS: [&str; 2] = [PROXY_RUNTIME, PROXY_BACKSTAGE];
/// The null forwarder's runtime threads.
const NULL_RUNTIME: &str = "bench-null-fwd";

/// The proxy's CPU per exchange may be at most this many times nginx's (issue 34 item 1).
const CPU_TARGET: f64 = 1.25;

/// A forwarder whose CPU time a row counts: the proxy's threads in this process (the runtime,
/// the journal and the prediction; not the upstream's or the clients'), the null forwarder's, or
/// nginx's processes.
#[derive(Clone, Copy)]
enum Forwarder<'a> {
    Proxy,
    Null,
    Nginx(&'a Nginx),
}

impl Forwarder<'_> {
    fn name(self) -> &'static str {
        match self {
            Forwarder::Proxy => "proxy",
            Forwarder::Null => "null_forwarder",
            Forwarder::Nginx(_) => "nginx",
        }
    }

    /// Its CPU time so far.
    fn cpu(self) -> Duration {
        match self {
            Forwarder::Proxy => threads_cpu(std::process::id(), &PROXY_THREADS),
            Forwarder::Null => threads_cpu(std::process::id(), &[NULL_RUNTIME]),
            Forwarder::Nginx(nginx) => {
                let master = nginx.child.id();
                children(master).into_iter().chain([master]).map(|pid| threads_cpu(pid, &[])).sum()
            }
        }
    }
}

/// The upstream's Messages URL, the forwarders in front of it (the proxy first) each with its
/// own, and the proxy's stats.
struct Fronts<'a> {
    direct_url: String,
    all: Vec<(Forwarder<'a>, String)>,
    stats_url: String,
}

impl<'a> Fronts<'a> {
    fn new(
        upstream: SocketAddr,
        proxy: SocketAddr,
        null: SocketAddr,
        nginx: Option<&'a Nginx>,
    ) -> Fronts<'a> {
        let url = |addr: SocketAddr| format!("http://{addr}/v1/messages");
        let mut all = vec![(Forwarder::Proxy, url(proxy)), (Forwarder::Null, url(null))];
        all.extend(nginx.map(|nginx| (Forwarder::Nginx(nginx), url(nginx.addr))));
        Fronts { direct_url: url(upstream), all, stats_url: format!("http://{proxy}/forkcache/stats") }
    }

    fn proxy_url(&self) -> &str {
        &self.all[0].1
    }

    /// nginx's URL, when it runs.
    fn nginx_url(&self) -> Option<&str> {
        self.all.iter().find(|(front, _)| matches!(front, Forwarder::Nginx(_))).map(|(_, url)| url.as_str())
    }

    /// `forwarder`'s CPU time for one burst of `CLIENTS` × `EACH` requests through it. The
    /// proxy's journal and predictions of the burst are counted too: their threads' clock is read
    /// again once no prediction is pending (the `GET /forkcache/stats` polls that waits on are
    /// served by the runtime, whose clock was read when the burst ended, so they are not).
    fn burst_cpu(&self, (forwarder, url): &(Forwarder, String), body: &[u8]) -> Duration {
        let before = forwarder.cpu();
        burst(url, body, CLIENTS, EACH);
        let forwarded = forwarder.cpu().saturating_sub(before);
        if let Forwarder::Proxy = forwarder {
            let backstage = || threads_cpu(std::process::id(), &[PROXY_BACKSTAGE]);
            let before_drain = backstage();
            drain(&self.stats_url);
            return forwarded + backstage().saturating_sub(before_drain);
        }
        forwarded
    }
}

/// The on-CPU time of the threads of process `pid` whose names start with one of `names` (every
/// thread for none), from the scheduler's nanosecond counter (`/proc/PID/task/TID/schedstat`;
/// `stat` counts in 10 ms ticks).
fn threads_cpu(pid: u32, names: &[&str]) -> Duration {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Duration::ZERO };
    let mut nanos = 0;
    for task in tasks.flatten() {
        let name = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !names.is_empty() && !names.iter().any(|wanted| name.trim_end().starts_with(wanted)) {
            continue;
        }
        let schedstat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        nanos +=
            schedstat.split_whitespace().next().and_then(|on_cpu| on_cpu.parse::<u64>().ok()).unwrap_or(0);
    }
    Duration::from_nanos(nanos)
}

/// The processes whose parent is `parent` (nginx's workers).
fn children(parent: u32) -> Vec<u32> {
    let parent_of = |pid: u32| {
        // `pid (comm) state ppid …`: the name may hold spaces and parentheses, the rest cannot.
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse::<u32>().ok()
    };
    let Ok(processes) = std::fs::read_dir("/proc") else { return Vec::new() };
    processes
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| parent_of(pid) == Some(parent))
        .collect()
}

const SIZES: [(&str, usize); 2] = [("18KB", 18 << 10), ("900KB", 900 << 10)];
const CLIENTS: usize = 4;
const EACH: usize = 16;
/// Bytes each client sends per summary burst.
const SUMMARY_BURST_BYTES: usize = 40 << 20;

fn bench(c: &mut Criterion, fronts: &Fronts) {
    let (direct_url, proxy_url, stats_url) =
        (fronts.direct_url.as_str(), fronts.proxy_url(), &fronts.stats_url);
    for (name, size) in SIZES {
        cpu_rows(c, name, &body(size), fronts);
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

/// `proxy/cpu_{name}/…`: each forwarder's CPU time per burst of `CLIENTS` × `EACH` exchanges,
/// so criterion's throughput is exchanges per CPU-second.
fn cpu_rows(c: &mut Criterion, name: &str, body: &[u8], fronts: &Fronts) {
    let mut group = c.benchmark_group(format!("proxy/cpu_{name}"));
    group.throughput(Throughput::Elements((CLIENTS * EACH) as u64));
    group.sample_size(10);
    for front in &fronts.all {
        group.bench_function(front.0.name(), |b| {
            b.iter_custom(|iters| (0..iters).map(|_| fronts.burst_cpu(front, body)).sum())
        });
    }
    group.finish();
}

/// Each forwarder's CPU per exchange, the median of 5 rounds of one burst through each in turn,
/// and the proxy's and the null forwarder's beside nginx's (the proxy's against its target).
fn cpu_summary(name: &str, body: &[u8], fronts: &Fronts) {
    let mut rounds: Vec<Vec<f64>> = vec![Vec::new(); fronts.all.len()];
    for _ in 0..5 {
        for (front, times) in fronts.all.iter().zip(&mut rounds) {
            times.push(fronts.burst_cpu(front, body).as_secs_f64() * 1e6 / (CLIENTS * EACH) as f64);
        }
    }
    let medians: Vec<f64> = rounds
        .iter_mut()
        .map(|times| {
            times.sort_by(f64::total_cmp);
            times[2]
        })
        .collect();
    let shown: Vec<String> = fronts
        .all
        .iter()
        .zip(&medians)
        .map(|((front, _), us)| format!("{} {us:.1} µs", front.name()))
        .collect();
    eprintln!("  {name}: CPU per exchange (medians of 5 bursts of {CLIENTS} × {EACH}): {}", shown.join(", "));
    let Some(nginx) = fronts.all.iter().position(|(front, _)| matches!(front, Forwarder::Nginx(_))) else {
        return;
    };
    let (proxy, null, nginx) = (medians[0], medians[1], medians[nginx]);
    let verdict = if proxy / nginx <= CPU_TARGET { "met" } else { "not met" };
    eprintln!(
        "  {name}: proxy {:.2}× nginx's (target ≤ {CPU_TARGET}×: {verdict}); the null forwarder {:.2}× nginx's",
        proxy / nginx,
        null / nginx
    );
}

fn percentile(sorted: &[Duration], per_100: usize) -> Duration {
    sorted[(sorted.len() * per_100 / 100).min(sorted.len() - 1)]
}

/// `count` rounds, each a burst of `clients` × `each` requests straight to the upstream and one
/// through `via` (`after_via` runs after it, outside the timing): each round's throughput through
/// `via` as a share of direct.
fn rounds_of(
    count: usize,
    (clients, each): (usize, usize),
    direct_url: &str,
    via: &str,
    body: &[u8],
    mut after_via: impl FnMut(),
) -> Ratios {
    let rounds = (0..count)
        .map(|_| {
            let direct = burst(direct_url, body, clients, each).as_secs_f64();
            let through = burst(via, body, clients, each).as_secs_f64();
            after_via();
            direct / through
        })
        .collect();
    Ratios { rounds, clients, each }
}

/// Throughput ratios of alternating rounds, in run order.
struct Ratios {
    rounds: Vec<f64>,
    clients: usize,
    each: usize,
}

impl std::fmt::Display for Ratios {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut sorted = self.rounds.clone();
        sorted.sort_by(f64::total_cmp);
        let all: Vec<String> = self.rounds.iter().map(|r| format!("{:.0}%", r * 100.0)).collect();
        write!(
            f,
            "{:.0}% of direct (median of {} alternating bursts of {} × {}; in run order: {})",
            sorted[sorted.len() / 2] * 100.0,
            self.rounds.len(),
            self.clients,
            self.each,
            all.join(" ")
        )
    }
}

/// Latency added to a request on its way through the proxy (and through nginx, when it runs,
/// beside it): 300 requests each way, alternating, p50 and p99 against direct.
fn latency_summary(name: &str, body: &[u8], fronts: &Fronts) {
    let agent = agent();
    let urls: Vec<&str> =
        [fronts.direct_url.as_str(), fronts.proxy_url()].into_iter().chain(fronts.nginx_url()).collect();
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(300); urls.len()];
    for _ in 0..300 {
        for (url, times) in urls.iter().zip(&mut times) {
            times.push(send(&agent, url, body));
        }
    }
    drain(&fronts.stats_url);
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let percentiles: Vec<(f64, f64)> = times
        .iter_mut()
        .map(|times| {
            times.sort();
            (ms(percentile(times, 50)), ms(percentile(times, 99)))
        })
        .collect();
    let (direct, proxy) = (percentiles[0], percentiles[1]);
    let added = |(p50, p99): (f64, f64)| (p50 - direct.0, p99 - direct.1);
    let (p50, p99) = added(proxy);
    eprintln!(
        "  {name} ({} bytes): direct p50 {:.3} ms p99 {:.3} ms; proxy p50 {:.3} ms p99 {:.3} ms; added p50 {p50:.3} ms, p99 {p99:.3} ms",
        body.len(),
        direct.0,
        direct.1,
        proxy.0,
        proxy.1,
    );
    if let Some(&through_nginx) = percentiles.get(2) {
        let (nginx_p50, nginx_p99) = added(through_nginx);
        let verdict = |met: bool| if met { "met" } else { "not met" };
        eprintln!(
            "  {name}: added by nginx p50 {nginx_p50:.3} ms, p99 {nginx_p99:.3} ms; the proxy's p50 within nginx's + 0.1 ms: {}, p99 within nginx's + 1 ms: {}",
            verdict(p50 <= nginx_p50 + 0.1),
            verdict(p99 <= nginx_p99 + 1.0),
        );
    }
}

/// p50 and p99 each way, 300 requests alternating, the throughput ratio of 5 bursts (also
/// through nginx, when it runs) and each forwarder's CPU per exchange.
fn summary(fronts: &Fronts) {
    let (direct_url, proxy_url, stats_url) =
        (fronts.direct_url.as_str(), fronts.proxy_url(), &fronts.stats_url);
    eprintln!("\nproxy summary (loopback, streamed requests, upstream = forkcache serve):");
    for (name, size) in SIZES {
        let body = body(size);
        latency_summary(name, &body, fronts);
        // Long enough bursts that scheduling noise averages out.
        let each = (SUMMARY_BURST_BYTES / body.len()).max(EACH);
        let skipped_before = prediction_counters(stats_url).1;
        let mut lags = Vec::new();
        let ratios = rounds_of(5, (CLIENTS, each), direct_url, proxy_url, &body, || {
            // Outside the timing: the next direct burst must not share the cores with them.
            lags.push(drain(stats_url));
        });
        let skipped = prediction_counters(stats_url).1 - skipped_before;
        eprintln!("  {name}: throughput through the proxy = {ratios}");
        if let Some(nginx_url) = fronts.nginx_url() {
            let ratios = rounds_of(5, (CLIENTS, each), direct_url, nginx_url, &body, || ());
            eprintln!("  {name}: throughput through nginx = {ratios}");
        }
        cpu_summary(name, &body, fronts);
        lags.sort();
        eprintln!(
            "  {name}: prediction lag after a proxied burst (until none pending): median {:.0} ms, max {:.0} ms; predictions skipped (queue full): {skipped} of {}",
            lags[2].as_secs_f64() * 1e3,
            lags[4].as_secs_f64() * 1e3,
            5 * CLIENTS * each,
        );
    }
}

/// Clients and requests each of a burst against the API-like upstream.
const API_LIKE_CLIENTS: usize = 16;
const API_LIKE_EACH: usize = 4;

/// The same comparison with an upstream that answers as the API does: `serve` waiting its
/// modelled latency (400 ms to first token plus 20 µs per uncached input token, then 20 ms per
/// output token), 16 concurrent clients. Throughput is then the clients' concurrency over that
/// latency, which is what the proxy must not lower.
fn api_like_summary() {
    let upstream = serve_with(LatencyMode::Model);
    let front = proxy(upstream.addr);
    let direct_url = format!("http://{}/v1/messages", upstream.addr);
    let proxy_url = format!("http://{}/v1/messages", front.addr);
    eprintln!("\nproxy summary with an API-like upstream (forkcache serve, modelled latency):");
    for (name, size) in SIZES {
        let body = body(size);
        // Its first request writes the cache (and waits on every uncached token); not timed.
        send(&agent(), &direct_url, &body);
        let shape = (API_LIKE_CLIENTS, API_LIKE_EACH);
        let ratios = rounds_of(3, shape, &direct_url, &proxy_url, &body, || ());
        eprintln!("  {name}: throughput through the proxy = {ratios}");
    }
}

fn main() {
    allocator::use_mimalloc();
    // plotters is built without system-font lookup: criterion's plots need the embedded font.
    forkcache_report::chart::register_font();
    let upstream = serve();
    let front = proxy(upstream.addr);
    let null = null_forwarder(upstream.addr);
    // PROXY_BENCH_NGINX=/usr/sbin/nginx: the same bursts through nginx, beside the proxy's.
    let nginx = std::env::var("PROXY_BENCH_NGINX").ok().map(|binary| nginx(&binary, upstream.addr));
    let fronts = Fronts::new(upstream.addr, front.addr, null.addr, nginx.as_ref());
    let mut criterion = Criterion::default().configure_from_args();
    bench(&mut criterion, &fronts);
    criterion.final_summary();
    summary(&fronts);
    drop(fronts);
    drop(nginx);
    drop(null);
    drop(front);
    drop(upstream);
    api_like_summary();
}
