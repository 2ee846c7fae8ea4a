//! `forkcache serve` throughput on loopback, next to the in-process `MockEndpoint` on the same
//! requests: how much the HTTP edge costs. See benches/README.md for what was measured where.
//!
//! Synthetic agent traces, each a set of growing conversations whose every request repeats the
//! conversation's whole history with the breakpoint on the last user message, every other
//! request streamed:
//! - `chat`: 16 conversations × 40 turns; a 4 KB cached system prompt, ~300-byte turns, no tools
//!   (requests average ~18 KB), one keep-alive connection per conversation;
//! - `chat_4_connections`: the same 16 conversations on 4 connections, each sending 4 of them
//!   one after another; `chat_32_connections`: 32 such conversations, one per connection (1,280
//!   requests of the same sizes) — the ends of the target's 4–32 connections;
//! - `agent`: 8 conversations × 30 turns shaped like Claude Code's: 20 tools (~40 KB), a 6 KB
//!   system prompt, and turns of one `tool_use` and a ~1.5 KB `tool_result` (~75 KB on average);
//! - `engine_trace`: the engine bench's trace (`synth::growing_conversation`): one coding-agent
//!   session of 200 requests growing to ~200K tokens, every request streamed (~460 KB on
//!   average), dealt round-robin to 4 clients so the server is kept busy (in process, the same
//!   requests in the same order, one after another).
//!
//! In process, one endpoint prices the requests turn by turn. Over HTTP, one keep-alive client
//! per column of requests sends its requests concurrently to a fresh server; the time counted
//! runs from the first request to the last response, client work included (both share this
//! machine). Three load generators: `http_loopback` uses ureq (a blocking thread per
//! connection), as a real client would; `http_loopback_hyper_client` uses hyper's HTTP/1
//! client, every connection on one event-loop thread, as a load generator would;
//! `http_loopback_raw_client` sends each request pre-encoded in one write and reads each
//! response by its length. The last two leave less of the two cores to the clients, so more of
//! the figure is the server's. The `http_floor` rows send the same requests with the same
//! clients (`_raw_client`, `_hyper_client`, ureq without a suffix) to a server on the same stack
//! that prices nothing (it reads each body and answers a fixed reply): the most any server on
//! this stack could reach with those clients on these cores.
//!
//! After criterion's figures, `serve/cpu` prints each row's process CPU time per request (the
//! server's threads and the clients' together) and how many cores were busy on average, and
//! `serve/paired` the ratios again, measured in paired rounds (in process, over HTTP and through
//! the null server with the same client, one right after the other) so that a machine whose
//! speed drifts moves every side alike: serve's share of in-process throughput beside its share
//! of the null server's, and
//! `serve/warmth` (`serve/warmth.rs`) what the in-process pricing gains from caches no server's
//! cores keep to themselves.

/// The allocator the `forkcache` binary runs `serve` and `proxy` with: its own module, switched
/// to mimalloc first thing in `main`, as the binary does for those commands.
#[path = "../src/allocator.rs"]
mod allocator;
#[global_allocator]
static ALLOCATOR: allocator::ByCommand = allocator::ByCommand;
#[path = "serve/warmth.rs"]
mod warmth;

use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use serde_json::{Value, json};

use forkcache_engine::billing::PriceTable;
use forkcache_engine::clock::SimTime;
use forkcache_engine::endpoint::{Call, EndpointConfig, MockEndpoint};
use forkcache_net::serve::{ServeConfig, Server};
use forkcache_scenario::synth::{ConversationSpec, growing_conversation};

/// `requests[conversation][turn]`: request bodies, built once outside the timed loops.
type Workload = Vec<Vec<Vec<u8>>>;

fn request(system: &Value, tools: &Value, messages: &[Value], stream: bool) -> Vec<u8> {
    let mut messages = messages.to_vec();
    let last = messages.last_mut().expect("a user message");
    let text = last["content"].as_str().expect("a text question").to_string();
    last["content"] = json!([{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]);
    let mut body = json!({"model": "claude-sonnet-4-6", "max_tokens": 256, "system": system, "messages": messages, "stream": stream});
    if tools.as_array().is_some_and(|t| !t.is_empty()) {
        body["tools"] = tools.clone();
    }
    body.to_string().into_bytes()
}

/// Growing conversations; `turn(c, t)` gives the messages turn `t` adds before its question.
fn conversations(
    count: usize,
    turns: usize,
    system: &Value,
    tools: &Value,
    turn: impl Fn(usize, usize) -> Vec<Value>,
) -> Workload {
    (0..count)
        .map(|c| {
            let mut history: Vec<Value> = Vec::new();
            (0..turns)
                .map(|t| {
                    let question = json!({"role": "user", "content": format!("conversation {c} turn {t}: {}", "please look at this file ".repeat(12))});
                    history.push(question);
                    let body = request(system, tools, &history, t % 2 == 1);
                    history.extend(turn(c, t));
                    body
                })
                .collect()
        })
        .collect()
}

fn chat() -> Workload {
    chat_conversations(16)
}

/// `count` conversations of 40 turns shaped like [`chat`]'s.
fn chat_conversations(count: usize) -> Workload {
    let system = json!([{"type": "text", "text": format!("You are agent number one. {}", "Follow the house rules carefully. ".repeat(120)), "cache_control": {"type": "ephemeral"}}]);
    conversations(count, 40, &system, &json!([]), |_, t| {
        vec![
            json!({"role": "assistant", "content": format!("Answer {t}: {}", "the file looks fine ".repeat(14))}),
        ]
    })
}

fn agent() -> Workload {
    let system = json!([
        {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.197.fa0; cc_entrypoint=sdk-cli;"},
        {"type": "text", "text": "You are a coding agent.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Environment and conventions. ".repeat(200), "cache_control": {"type": "ephemeral"}}
    ]);
    let tools: Vec<Value> = (0..20)
        .map(|i| json!({"name": format!("Tool{i}"), "description": format!("Tool {i}. {}", "Use it with care and read the output. ".repeat(45)),
            "input_schema": {"type": "object", "properties": {"path": {"type": "string", "description": "A path."}, "limit": {"type": "integer"}}, "required": ["path"]}}))
        .collect();
    conversations(8, 30, &system, &Value::Array(tools), |c, t| {
        let id = format!("toolu_{c}_{t}");
        vec![
            json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "Tool3", "input": {"path": format!("src/file_{t}.rs")}}]}),
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": format!("fn item_{t}() {{}}\n").repeat(90)}]}),
        ]
    })
}

fn engine_trace() -> Workload {
    const CLIENTS: usize = 4;
    let mut clients: Workload = vec![Vec::new(); CLIENTS];
    for (index, body) in growing_conversation(&ConversationSpec::default()).into_iter().enumerate() {
        clients[index % CLIENTS].push(body.into_bytes());
    }
    clients
}

fn in_process(requests: &Workload) -> Window {
    let mut endpoint = endpoint();
    let started = Started::now();
    for index in 0..requests.len() * requests[0].len() {
        handle_nth(&mut endpoint, requests, index);
    }
    started.window()
}

/// An endpoint with default settings and the built-in prices, as `serve` starts one.
fn endpoint() -> MockEndpoint {
    MockEndpoint::new(EndpointConfig::default(), PriceTable::builtin()).unwrap()
}

/// Prices the `index`th request of `requests` in the in-process order: turn by turn, each
/// conversation in turn, at time `index`, under the conversation's key.
fn handle_nth(endpoint: &mut MockEndpoint, requests: &Workload, index: usize) {
    let (turn, conversation) = (index / requests.len(), index % requests.len());
    let key = format!("bench-{conversation}");
    let mut call = Call::new(&requests[conversation][turn], SimTime(index as u64));
    call.api_key = Some(&key);
    std::hint::black_box(endpoint.handle(call).unwrap());
}

/// The wall-clock and the process CPU time of one timed run. The CPU is every thread's in this
/// process: the server's and its clients' alike.
#[derive(Clone, Copy, Default)]
struct Window {
    wall: Duration,
    cpu: Duration,
}

/// Both clocks at the start of a timed run.
struct Started {
    wall: Instant,
    cpu: Duration,
}

impl Started {
    fn now() -> Started {
        Started { wall: Instant::now(), cpu: process_cpu() }
    }

    fn window(&self) -> Window {
        Window { wall: self.wall.elapsed(), cpu: process_cpu().saturating_sub(self.cpu) }
    }
}

/// The CPU time every thread of this process has used so far.
fn process_cpu() -> Duration {
    cpu_clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// The CPU time the calling thread has used so far.
fn thread_cpu() -> Duration {
    cpu_clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

fn cpu_clock(clock: libc::clockid_t) -> Duration {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid `timespec` for the call to fill, and both clock ids are constants
    // every Linux kernel knows.
    let status = unsafe { libc::clock_gettime(clock, &mut now) };
    assert_eq!(status, 0, "the CPU clock {clock}");
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// A server running on its own runtime thread (tokio's default workers) until the returned
/// sender drops: `serve` gets the stop signal and a sender for the address it bound.
fn on_runtime<F, Fut>(serve: F) -> (SocketAddr, tokio::sync::oneshot::Sender<()>, std::thread::JoinHandle<()>)
where
    F: FnOnce(std::pin::Pin<Box<dyn Future<Output = ()> + Send>>, std::sync::mpsc::Sender<SocketAddr>) -> Fut
        + Send
        + 'static,
    Fut: Future<Output = ()>,
{
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
        runtime.block_on(serve(Box::pin(async move { stopped.await.unwrap_or(()) }), addr_tx));
    });
    (addr_rx.recv().unwrap(), stop, thread)
}

/// `forkcache serve` on a free port (default settings, instant latency, no trace).
fn start_server() -> (SocketAddr, tokio::sync::oneshot::Sender<()>, std::thread::JoinHandle<()>) {
    on_runtime(|stopped, addr| async move {
        let endpoint = endpoint();
        let config = ServeConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)));
        let server = Server::bind(config, endpoint).await.unwrap();
        addr.send(server.local_addr()).unwrap();
        server.run(stopped).await.unwrap();
    })
}

/// A reply of about the size `serve`'s are on these workloads (a streamed chat answer is ~1 KB).
const NULL_REPLY: &str = concat!(
    r#"{"id":"msg_null","type":"message","role":"assistant","model":"claude-sonnet-4-6","#,
    r#""content":[{"type":"text","text":"The file looks fine. The file looks fine. The file looks fine."}],"#,
    r#""stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"#,
    r#""cache_creation_input_tokens":0,"cache_read_input_tokens":4400,"output_tokens":16}}"#
);

/// The HTTP floor: the same stack as `serve` (axum over hyper, tokio's default two workers,
/// `TCP_NODELAY`), reading each body whole and answering [`NULL_REPLY`], pricing nothing. What it
/// reaches is the most any server on this stack could, with these clients on these cores.
fn start_null_server() -> (SocketAddr, tokio::sync::oneshot::Sender<()>, std::thread::JoinHandle<()>) {
    use axum::serve::ListenerExt as _;
    on_runtime(|stopped, addr| async move {
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await.unwrap();
        addr.send(listener.local_addr().unwrap()).unwrap();
        let listener = listener.tap_io(|socket| socket.set_nodelay(true).unwrap());
        let app = axum::Router::new().route("/v1/messages", axum::routing::post(null_reply));
        axum::serve(listener, app).with_graceful_shutdown(stopped).await.unwrap();
    })
}

async fn null_reply(body: Bytes) -> ([(hyper::header::HeaderName, &'static str); 1], &'static str) {
    std::hint::black_box(body.len());
    ([(hyper::header::CONTENT_TYPE, "application/json")], NULL_REPLY)
}

fn over_null_http(encoded: &Workload) -> Window {
    with_server(start_null_server(), |addr| run_raw_clients(addr, encoded))
}

fn over_null_ureq(requests: &Workload) -> Window {
    with_server(start_null_server(), |addr| run_clients(addr, requests))
}

fn over_null_hyper(requests: &[Vec<Bytes>]) -> Window {
    with_server(start_null_server(), |addr| run_hyper_clients(addr, requests))
}

/// Runs `clients` against a started server, then stops it: the clients' time.
fn with_server(
    server: (SocketAddr, tokio::sync::oneshot::Sender<()>, std::thread::JoinHandle<()>),
    clients: impl FnOnce(SocketAddr) -> Window,
) -> Window {
    let (addr, stop, thread) = server;
    let elapsed = clients(addr);
    drop(stop);
    thread.join().unwrap();
    elapsed
}

fn over_http(requests: &Workload) -> Window {
    with_server(start_server(), |addr| run_clients(addr, requests))
}

/// One keep-alive client per conversation, all at once: from the first request to the last
/// response.
fn run_clients(addr: SocketAddr, requests: &Workload) -> Window {
    let url = format!("http://{addr}/v1/messages");
    let ready = Barrier::new(requests.len() + 1);
    let started = std::thread::scope(|scope| {
        for (c, conversation) in requests.iter().enumerate() {
            let (url, ready) = (&url, &ready);
            scope.spawn(move || {
                let agent: ureq::Agent = ureq::Agent::config_builder().build().into();
                let key = format!("bench-{c}");
                ready.wait();
                for body in conversation {
                    let mut response =
                        agent.post(url).header("x-api-key", &key).send(body.as_slice()).unwrap();
                    std::hint::black_box(response.body_mut().read_to_vec().unwrap());
                }
            });
        }
        ready.wait();
        Started::now()
    });
    started.window()
}

/// A request as it goes on the wire: the request line, the headers and the body in one buffer.
fn encoded(body: &[u8], key: &str) -> Vec<u8> {
    let head = format!(
        "POST /v1/messages HTTP/1.1\r\nhost: localhost\r\nx-api-key: {key}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    [head.as_bytes(), body].concat()
}

/// `requests`, each encoded for the raw clients (once, outside the timed loops).
fn encode(requests: &Workload) -> Workload {
    requests
        .iter()
        .enumerate()
        .map(|(c, conversation)| {
            conversation.iter().map(|body| encoded(body, &format!("bench-{c}"))).collect()
        })
        .collect()
}

fn over_raw_http(encoded: &Workload) -> Window {
    with_server(start_server(), |addr| run_raw_clients(addr, encoded))
}

/// [`run_clients`] with a lighter load generator: each client sends its pre-encoded requests
/// with one write each and reads each response by its `content-length` (in instant mode the
/// server sends every body whole, SSE included). The server sees the same requests on the same
/// number of keep-alive connections; less of the two cores goes to the clients.
fn run_raw_clients(addr: SocketAddr, encoded: &Workload) -> Window {
    let ready = Barrier::new(encoded.len() + 1);
    let started = std::thread::scope(|scope| {
        for conversation in encoded {
            let ready = &ready;
            scope.spawn(move || {
                let mut socket = std::net::TcpStream::connect(addr).unwrap();
                socket.set_nodelay(true).unwrap();
                let mut buffer = vec![0u8; 64 << 10];
                ready.wait();
                for request in conversation {
                    exchange(&mut socket, request, &mut buffer);
                }
            });
        }
        ready.wait();
        Started::now()
    });
    started.window()
}

/// Sends one pre-encoded request on `socket` in one write and reads its response by its
/// `content-length` into `buffer` (grown as needed).
fn exchange(socket: &mut std::net::TcpStream, request: &[u8], buffer: &mut Vec<u8>) {
    use std::io::{Read as _, Write as _};
    socket.write_all(request).unwrap();
    let mut filled = 0;
    let (head, length) = loop {
        let read = socket.read(&mut buffer[filled..]).unwrap();
        assert!(read > 0, "the server closed the connection");
        filled += read;
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut response = httparse::Response::new(&mut headers);
        if let httparse::Status::Complete(head) = response.parse(&buffer[..filled]).unwrap() {
            assert_eq!(response.code, Some(200), "{}", String::from_utf8_lossy(&buffer[..filled]));
            let length = response.headers.iter().find(|h| h.name.eq_ignore_ascii_case("content-length"));
            let length = std::str::from_utf8(length.expect("a whole body").value).unwrap();
            break (head, length.parse::<usize>().unwrap());
        }
        if filled == buffer.len() {
            buffer.resize(buffer.len() * 2, 0);
        }
    };
    if buffer.len() < head + length {
        buffer.resize(head + length, 0);
    }
    assert!(filled <= head + length, "one response at a time");
    socket.read_exact(&mut buffer[filled..head + length]).unwrap();
    std::hint::black_box(&buffer[head..head + length]);
}

/// `requests` as shareable buffers for the hyper clients (once, outside the timed loops).
fn as_bytes(requests: &Workload) -> Vec<Vec<Bytes>> {
    requests
        .iter()
        .map(|conversation| conversation.iter().map(|body| Bytes::from(body.clone())).collect())
        .collect()
}

fn over_hyper_http(requests: &[Vec<Bytes>]) -> Window {
    with_server(start_server(), |addr| run_hyper_clients(addr, requests))
}

/// [`run_clients`] with hyper's own HTTP/1 client: one keep-alive connection per conversation,
/// all driven by one event-loop thread (as a load generator such as `oha` drives hyper), instead
/// of a blocking thread per connection. Each response's body is read whole.
fn run_hyper_clients(addr: SocketAddr, requests: &[Vec<Bytes>]) -> Window {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let mut clients = Vec::new();
        for (c, conversation) in requests.iter().enumerate() {
            let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            stream.set_nodelay(true).unwrap();
            let (sender, connection) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.unwrap();
            tokio::spawn(connection);
            clients.push((sender, format!("bench-{c}"), conversation.clone()));
        }
        let started = Started::now();
        let running: Vec<_> = clients
            .into_iter()
            .map(|(sender, key, conversation)| tokio::spawn(send_conversation(sender, key, conversation)))
            .collect();
        for client in running {
            client.await.unwrap();
        }
        started.window()
    })
}

async fn send_conversation(
    mut sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    key: String,
    conversation: Vec<Bytes>,
) {
    for body in conversation {
        sender.ready().await.unwrap();
        let request = hyper::Request::post("/v1/messages")
            .header("host", "localhost")
            .header("x-api-key", &key)
            .header("content-type", "application/json")
            .body(Full::new(body))
            .unwrap();
        let response = sender.send_request(request).await.unwrap();
        assert_eq!(response.status(), 200);
        std::hint::black_box(response.into_body().collect().await.unwrap().to_bytes());
    }
}

/// Sockets that keep a server busy doing nothing: each sends a request line and then one header
/// byte per second, never finishing its headers (slowloris), until `stop` drops.
fn hold_slow_sockets(
    addr: SocketAddr,
    count: usize,
) -> (std::sync::mpsc::Sender<()>, std::thread::JoinHandle<usize>) {
    use std::io::Write as _;
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let thread = std::thread::spawn(move || {
        let mut sockets: Vec<std::net::TcpStream> = (0..count)
            .filter_map(|_| std::net::TcpStream::connect(addr).ok())
            .filter_map(|mut s| s.write_all(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\n").ok().map(|()| s))
            .collect();
        let opened = sockets.len();
        // Until `stop` is dropped (a disconnect, not a timeout).
        while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
            stopped.recv_timeout(Duration::from_secs(1))
        {
            sockets.retain_mut(|s| s.write_all(b"X").is_ok());
        }
        opened
    });
    (stop, thread)
}

/// 8 keep-alive clients' throughput with `slow` slowloris sockets held open on the same server.
fn with_slow_sockets(requests: &Workload, slow: usize) -> Duration {
    let (addr, stop, thread) = start_server();
    let (stop_slow, slow_thread) = hold_slow_sockets(addr, slow);
    // Let the slow sockets connect before the clock starts.
    std::thread::sleep(Duration::from_millis(if slow > 0 { 500 } else { 0 }));
    let elapsed = run_clients(addr, requests).wall;
    drop(stop_slow);
    let opened = slow_thread.join().unwrap();
    assert_eq!(opened, slow, "every slow socket was accepted");
    drop(stop);
    thread.join().unwrap();
    elapsed
}

/// Issue 12's figure: what share of their unloaded throughput 8 normal clients keep beside
/// 1,000 slow sockets. Measured in paired rounds so that the load of a shared machine cancels
/// out instead of landing on one side: each round times the clients on a fresh server alone and
/// on a fresh server holding the slow sockets, one right after the other (which goes first
/// alternates), and keeps that round's ratio (unloaded time ÷ loaded time, the loaded share of
/// the unloaded throughput). The figure is the median ratio, with a distribution-free 95%
/// confidence interval of the median from the rounds' order statistics.
fn slow_sockets_summary(rounds: usize) {
    // The client and server ends of 1,000 sockets, in this one process.
    let _ = rlimit::increase_nofile_limit(8_192);
    let requests = dealt(chat(), 8);
    let count: usize = requests.iter().map(Vec::len).sum();
    let mut ratios = Vec::with_capacity(rounds);
    let (mut alone_ms, mut loaded_ms) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let (alone, loaded) = if round % 2 == 0 {
            let alone = with_slow_sockets(&requests, 0);
            (alone, with_slow_sockets(&requests, SLOW_SOCKETS))
        } else {
            let loaded = with_slow_sockets(&requests, SLOW_SOCKETS);
            (with_slow_sockets(&requests, 0), loaded)
        };
        ratios.push(alone.as_secs_f64() / loaded.as_secs_f64());
        alone_ms.push(alone.as_secs_f64() * 1e3);
        loaded_ms.push(loaded.as_secs_f64() * 1e3);
    }
    let (low, median, high) = median_interval(&mut ratios);
    let median_of = |times: &mut Vec<f64>| median_interval(times).1;
    println!("\nserve/slow_sockets: 8 clients × {count} requests, {rounds} paired rounds");
    println!("  alone                        median {:>7.1} ms", median_of(&mut alone_ms));
    println!("  beside {SLOW_SOCKETS} slow sockets      median {:>7.1} ms", median_of(&mut loaded_ms));
    println!(
        "  loaded / unloaded throughput median {:.0}%, 95% interval of the median [{:.0}%, {:.0}%]",
        median * 100.0,
        low * 100.0,
        high * 100.0
    );
}

/// Issue 14's ratios measured in paired rounds, as [`slow_sockets_summary`] measures its own:
/// criterion times each row for a minute or so, one after another, and on a machine whose speed
/// drifts (the in-process row of one run has taken 16 to 25 ms on this VM) a ratio of two rows
/// measured minutes apart moves by more than any change to the server. Here each round prices
/// the workload in process, over HTTP, and through the null server with the same client, one
/// right after the other (the order rotates), and keeps that round's two ratios: serve's share
/// of in-process throughput (in-process time ÷ HTTP time) and its share of the null server's
/// (null time ÷ HTTP time: what the stack and the client allow, so a change in either side
/// shows). Per workload (`serve/paired/<workload>`, as the filter asks) and client: each median
/// with a distribution-free 95% confidence interval of the median.
fn paired_summary(rounds: usize) {
    type Side<'a> = &'a dyn Fn() -> Window;
    let wanted_workloads: Vec<_> =
        workloads().into_iter().filter(|(name, _)| wanted(&format!("serve/paired/{name}"))).collect();
    if wanted_workloads.is_empty() {
        return;
    }
    println!(
        "\nserve/paired: HTTP throughput as a share of in process and of the null server, {rounds} paired rounds per row"
    );
    println!(
        "  {:<22} {:<14} {:>9} {:>9} {:>9} {:>8} {:>16} {:>8} {:>16}",
        "workload",
        "client",
        "in proc.",
        "HTTP",
        "null",
        "of proc",
        "95% interval",
        "of null",
        "95% interval"
    );
    for (name, requests) in wanted_workloads {
        let (shared, encoded) = (as_bytes(&requests), encode(&requests));
        let rows: [(&str, Side, Side); 3] = [
            ("raw client", &|| over_raw_http(&encoded), &|| over_null_http(&encoded)),
            ("hyper client", &|| over_hyper_http(&shared), &|| over_null_hyper(&shared)),
            ("ureq", &|| over_http(&requests), &|| over_null_ureq(&requests)),
        ];
        for (client, over_serve, over_null) in rows {
            let sides: [Side; 3] = [&|| in_process(&requests), over_serve, over_null];
            let mut ms: [Vec<f64>; 3] = Default::default();
            let (mut of_process, mut of_null) = (Vec::new(), Vec::new());
            for round in 0..rounds {
                let mut wall = [0.0; 3];
                for turn in 0..3 {
                    let side = (round + turn) % 3;
                    wall[side] = sides[side]().wall.as_secs_f64();
                }
                let [process, http, null] = wall;
                of_process.push(process / http);
                of_null.push(null / http);
                for (side, time) in ms.iter_mut().zip(wall) {
                    side.push(time * 1e3);
                }
            }
            let [process, http, null] = ms.map(|mut times| median_interval(&mut times).1);
            let (p_low, p_median, p_high) = median_interval(&mut of_process);
            let (n_low, n_median, n_high) = median_interval(&mut of_null);
            println!(
                "  {name:<22} {client:<14} {process:>6.2} ms {http:>6.2} ms {null:>6.2} ms {:>7.0}% [{:>5.0}%, {:>5.0}%] {:>7.0}% [{:>5.0}%, {:>5.0}%]",
                p_median * 100.0,
                p_low * 100.0,
                p_high * 100.0,
                n_median * 100.0,
                n_low * 100.0,
                n_high * 100.0
            );
        }
    }
}

/// Paired rounds per row of [`paired_summary`] (`FORKCACHE_PAIRED_ROUNDS` overrides).
const PAIRED_ROUNDS: usize = 31;

/// `conversations` dealt to `clients` keep-alive clients, each sending its share one
/// conversation after another. (8 clients on `chat`'s 640 requests make a measurement long
/// enough that one scheduling hiccup is a small part of it.)
fn dealt(conversations: Workload, clients: usize) -> Workload {
    let mut dealt: Workload = vec![Vec::new(); clients];
    for (index, conversation) in conversations.into_iter().enumerate() {
        dealt[index % clients].extend(conversation);
    }
    dealt
}

/// Slow sockets held open beside the normal clients.
const SLOW_SOCKETS: usize = 1_000;

/// Paired rounds of [`slow_sockets_summary`] (`FORKCACHE_SLOW_ROUNDS` overrides).
const SLOW_ROUNDS: usize = 61;

/// `(low, median, high)` of `values`: the median and the order statistics that hold it with at
/// least 95% confidence, whatever the distribution (ranks n/2 ∓ 0.98·√n, the normal
/// approximation of the binomial sign test).
fn median_interval(values: &mut [f64]) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let half_width = 0.98 * (n as f64).sqrt();
    let low = ((n as f64 / 2.0 - half_width).floor().max(1.0) as usize) - 1;
    let high = ((n as f64 / 2.0 + half_width).ceil() as usize).min(n) - 1;
    (values[low], values[n / 2], values[high])
}

/// Whether the command line's filter (if any) asks for `name`, as criterion's would.
fn wanted(name: &str) -> bool {
    let filters: Vec<String> = std::env::args().skip(1).filter(|arg| !arg.starts_with('-')).collect();
    filters.is_empty() || filters.iter().any(|filter| name.contains(filter.as_str()))
}

/// One bench row's timed runs added up (criterion's warm-up runs included).
#[derive(Default)]
struct Totals {
    runs: Window,
    requests: usize,
}

/// Runs `run` `iters` times for criterion and adds each run's clocks to `totals`: criterion
/// gets the wall-clock, the summary after it the CPU.
fn timed(totals: &RefCell<Totals>, iters: u64, requests: usize, run: &dyn Fn() -> Window) -> Duration {
    let mut wall = Duration::ZERO;
    for _ in 0..iters {
        let window = run();
        let mut totals = totals.borrow_mut();
        totals.runs.wall += window.wall;
        totals.runs.cpu += window.cpu;
        totals.requests += requests;
        wall += window.wall;
    }
    wall
}

/// The bench's workloads. `chat`'s requests also go on 4 and on 32 keep-alive connections, the
/// ends of the target's range: 4 clients each send 4 of the 16 conversations one after another;
/// 32 clients send 32 conversations of the same shape (1,280 requests, the same sizes).
fn workloads() -> Vec<(&'static str, Workload)> {
    vec![
        ("chat", chat()),
        ("chat_4_connections", dealt(chat(), 4)),
        ("chat_32_connections", chat_conversations(32)),
        ("agent", agent()),
        ("engine_trace", engine_trace()),
    ]
}

fn bench(c: &mut Criterion) -> Vec<(String, Totals)> {
    let mut cpu = Vec::new();
    for (name, requests) in workloads() {
        let mut group = c.benchmark_group(format!("serve/{name}"));
        let count: usize = requests.iter().map(Vec::len).sum();
        let bytes: usize = requests.iter().flatten().map(Vec::len).sum();
        eprintln!("serve/{name}: {count} requests, {} bytes each on average", bytes / count);
        group.throughput(Throughput::Elements(count as u64));
        group.sample_size(20);
        group.measurement_time(Duration::from_secs(12));
        let (shared, encoded) = (as_bytes(&requests), encode(&requests));
        let rows: [(&str, &dyn Fn() -> Window); 7] = [
            ("in_process", &|| in_process(&requests)),
            ("http_loopback", &|| over_http(&requests)),
            ("http_loopback_hyper_client", &|| over_hyper_http(&shared)),
            ("http_loopback_raw_client", &|| over_raw_http(&encoded)),
            ("http_floor_raw_client", &|| over_null_http(&encoded)),
            ("http_floor_hyper_client", &|| over_null_hyper(&shared)),
            ("http_floor", &|| over_null_ureq(&requests)),
        ];
        for (row, run) in rows {
            let totals = RefCell::default();
            group.bench_function(row, |b| b.iter_custom(|iters| timed(&totals, iters, count, run)));
            cpu.push((format!("serve/{name}/{row}"), totals.into_inner()));
        }
        group.finish();
    }
    cpu
}

/// What each row that ran cost in CPU: the process's CPU time (the server's threads and the
/// clients' together) per request, and how many of the cores were busy on average.
fn print_cpu(rows: &[(String, Totals)]) {
    let ran: Vec<_> = rows.iter().filter(|(_, totals)| totals.requests > 0).collect();
    if ran.is_empty() {
        return;
    }
    println!("\nserve/cpu: process CPU time per request over every timed run (server and clients)");
    println!("  {:<50} {:>16} {:>10}", "row", "CPU per request", "CPUs busy");
    for (row, Totals { runs, requests }) in ran {
        let per_request = runs.cpu.as_secs_f64() * 1e6 / *requests as f64;
        let busy = runs.cpu.as_secs_f64() / runs.wall.as_secs_f64();
        println!("  {row:<50} {per_request:>13.1} µs {busy:>10.2}");
    }
}

fn main() {
    allocator::use_mimalloc();
    // plotters is built without system-font lookup: criterion's plots need the embedded font.
    forkcache_report::chart::register_font();
    let mut criterion = Criterion::default().configure_from_args();
    let cpu = bench(&mut criterion);
    criterion.final_summary();
    print_cpu(&cpu);
    // Only when run as a bench (`cargo bench` passes `--bench`), not when a test run starts it.
    if std::env::args().any(|arg| arg == "--bench") {
        let rounds = std::env::var("FORKCACHE_PAIRED_ROUNDS").ok().and_then(|r| r.parse().ok());
        paired_summary(rounds.unwrap_or(PAIRED_ROUNDS).max(1));
        if wanted("serve/warmth") {
            warmth::summary(rounds.unwrap_or(PAIRED_ROUNDS).max(1));
        }
        if wanted("serve/slow_sockets") {
            let rounds = std::env::var("FORKCACHE_SLOW_ROUNDS").ok().and_then(|r| r.parse().ok());
            slow_sockets_summary(rounds.unwrap_or(SLOW_ROUNDS).max(1));
        }
    }
}
