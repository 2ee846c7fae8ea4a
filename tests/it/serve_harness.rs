//! A `forkcache serve` in the test process (its own runtime on its own thread), and a small
//! blocking HTTP client that reads JSON and SSE answers back into usage numbers.

use std::net::SocketAddr;
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::Value;

use forkcache_engine::billing::{PriceTable, Usage};
use forkcache_engine::endpoint::{EndpointConfig, MockEndpoint};
use forkcache_net::serve::{ServeConfig, Server, Summary};

/// A running server; `stop` shuts it down and returns its summary.
pub struct Running {
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<Summary>>,
}

impl Running {
    /// Starts a server on a free loopback port.
    pub fn start(mut config: ServeConfig, endpoint: EndpointConfig) -> Running {
        config.addr = SocketAddr::from(([127, 0, 0, 1], 0));
        let (addr, stop, thread) = on_own_runtime(move |bound, stopped| async move {
            let endpoint = MockEndpoint::new(endpoint, PriceTable::builtin()).unwrap();
            let server = Server::bind(config, endpoint).await.unwrap();
            bound.send(server.local_addr()).unwrap();
            server.run(async move { stopped.await.unwrap_or(()) }).await.unwrap()
        });
        Running { addr, stop: Some(stop), thread: Some(thread) }
    }

    /// A server with default settings.
    pub fn default_server() -> Running {
        Running::start(ServeConfig::default(), EndpointConfig::default())
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Shuts down and returns what the server counted.
    pub fn stop(mut self) -> Summary {
        self.finish()
    }

    fn finish(&mut self) -> Summary {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.thread.take().expect("stopped once").join().expect("the server thread does not panic")
    }

    /// Waits for the server to stop by itself (`max_requests`).
    pub fn wait(mut self) -> Summary {
        self.stop.take();
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.thread.is_some() && !std::thread::panicking() {
            self.finish();
        }
    }
}

/// Runs an HTTP edge on its own 2-thread runtime and thread: `start` gets where to send the
/// address it bound and the signal to stop on; its output is the thread's.
pub fn on_own_runtime<T, F, Fut>(start: F) -> (SocketAddr, tokio::sync::oneshot::Sender<()>, JoinHandle<T>)
where
    T: Send + 'static,
    F: FnOnce(std::sync::mpsc::Sender<SocketAddr>, tokio::sync::oneshot::Receiver<()>) -> Fut
        + Send
        + 'static,
    Fut: std::future::Future<Output = T>,
{
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        runtime.block_on(start(addr_tx, stopped))
    });
    let addr = addr_rx.recv_timeout(Duration::from_secs(10)).expect("the edge binds");
    (addr, stop, thread)
}

/// A keep-alive client that returns every status instead of failing on 4xx/5xx.
pub fn client() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into()
}

/// An answer: status, headers we care about, body text.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub request_id: Option<String>,
    pub retry_after: Option<String>,
    pub content_type: Option<String>,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    /// The final usage: the message's, or the last `message_delta`'s when streamed.
    pub fn usage(&self) -> Usage {
        if self.is_stream() {
            let delta = sse_events(&self.body).into_iter().rev().find(|(name, _)| name == "message_delta");
            let (_, data) = delta.unwrap_or_else(|| panic!("no message_delta in {}", self.body));
            serde_json::from_value(data["usage"].clone()).unwrap()
        } else {
            serde_json::from_value(self.json()["usage"].clone()).unwrap()
        }
    }

    pub fn is_stream(&self) -> bool {
        self.content_type.as_deref().is_some_and(|t| t.starts_with("text/event-stream"))
    }

    /// `(type, message)` of an error body, checking the API's shape on the way.
    pub fn error(&self) -> (String, String) {
        let json = self.json();
        assert_eq!(json["type"], "error", "{}", self.body);
        assert!(json["request_id"].as_str().is_some_and(|id| id.starts_with("req_")), "{}", self.body);
        (
            json["error"]["type"].as_str().unwrap().to_string(),
            json["error"]["message"].as_str().unwrap().to_string(),
        )
    }
}

/// Posts `body` with an optional API key (as `x-api-key`).
pub fn post(agent: &ureq::Agent, url: &str, key: Option<&str>, body: &[u8]) -> Answer {
    let mut request =
        agent.post(url).header("anthropic-version", "2023-06-01").header("content-type", "application/json");
    if let Some(key) = key {
        request = request.header("x-api-key", key);
    }
    read(request.send(body).expect("the request completes"))
}

/// [`post`] without a key, with extra request headers (a header may repeat).
pub fn post_with_headers(agent: &ureq::Agent, url: &str, headers: &[(&str, &str)], body: &[u8]) -> Answer {
    let mut request =
        agent.post(url).header("anthropic-version", "2023-06-01").header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    read(request.send(body).expect("the request completes"))
}

pub fn get(agent: &ureq::Agent, url: &str) -> Answer {
    read(agent.get(url).call().expect("the request completes"))
}

fn read(mut response: ureq::http::Response<ureq::Body>) -> Answer {
    let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
    let (request_id, retry_after, content_type) =
        (header("request-id"), header("retry-after"), header("content-type"));
    let status = response.status().as_u16();
    let body = response.body_mut().with_config().limit(64 << 20).read_to_string().expect("a complete body");
    Answer { status, request_id, retry_after, content_type, body }
}

/// `(event name, data)` of every event in an SSE body, checking `type` equals the name.
pub fn sse_events(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter(|chunk| !chunk.trim().is_empty())
        .map(|chunk| {
            let mut lines = chunk.lines();
            let name =
                lines.next().and_then(|l| l.strip_prefix("event: ")).expect("an event line").to_string();
            let data = lines.next().and_then(|l| l.strip_prefix("data: ")).expect("a data line");
            let data: Value = serde_json::from_str(data).unwrap();
            assert_eq!(data["type"], name.as_str());
            (name, data)
        })
        .collect()
}

/// A request body with a cached system block of `system_tokens` declared tokens and one user
/// text, optionally streamed.
pub fn cached_request(model: &str, system_tokens: u64, user: &str, stream: bool) -> String {
    serde_json::json!({
        "model": model,
        "max_tokens": 256,
        "system": [{"type": "text", "text": "You are a test.", "forkcache_tokens": system_tokens, "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": user}],
        "stream": stream,
    })
    .to_string()
}
