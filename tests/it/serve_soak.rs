//! Soak (behind `FORKCACHE_SOAK=1`; `FORKCACHE_SOAK_SECS`, default 60): 8 clients cycle through
//! a fixed set of growing conversations against a server whose cache holds 64 entries. The
//! process's resident memory after warm-up must stay flat (within 10% + 16 MiB of the first
//! quarter's high-water mark), and the stats must count evictions while entries stay at capacity.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use forkcache_engine::endpoint::EndpointConfig;
use forkcache_net::serve::ServeConfig;

use crate::serve::tempfile;
use crate::serve_harness::{Running, client, get, post};

const CAPACITY: usize = 64;
const CLIENTS: usize = 8;
const CONVERSATIONS: usize = 100;
const TURNS: usize = 10;

fn request(client: usize, step: usize) -> String {
    let conversation = (step / TURNS) % CONVERSATIONS;
    let turn = step % TURNS;
    let mut messages = Vec::new();
    for earlier in 0..=turn {
        let text =
            format!("client {client} conversation {conversation} turn {earlier} {}", "words ".repeat(200));
        messages.push(json!({"role": "user", "content": [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]}));
        if earlier < turn {
            messages.push(json!({"role": "assistant", "content": "forkcache mock reply."}));
        }
    }
    // Only the last user message keeps its marker (at most 4 are allowed).
    let last = messages.len() - 1;
    for message in &mut messages[..last] {
        if let Some(block) = message["content"].get_mut(0) {
            block.as_object_mut().map(|b| b.remove("cache_control"));
        }
    }
    json!({"model": "claude-sonnet-4-6", "max_tokens": 32, "messages": messages, "stream": step % 3 == 0})
        .to_string()
}

/// Resident set size of this process, in bytes.
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("Linux /proc");
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

#[test]
fn soak_memory_stays_flat_and_evictions_are_counted() {
    if std::env::var("FORKCACHE_SOAK").as_deref() != Ok("1") {
        eprintln!("soak skipped: set FORKCACHE_SOAK=1 (and FORKCACHE_SOAK_SECS) to run it");
        return;
    }
    let seconds: u64 = std::env::var("FORKCACHE_SOAK_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(60);
    let trace = tempfile("soak");
    let mut endpoint = EndpointConfig::default();
    endpoint.cache.capacity_entries = CAPACITY;
    let server =
        Running::start(ServeConfig { trace: Some(trace.clone()), ..ServeConfig::default() }, endpoint);
    let url = server.url("/v1/messages");
    let done = AtomicBool::new(false);
    let started = Instant::now();
    let mut samples: Vec<(Duration, u64)> = Vec::new();
    let sent: usize = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let (url, done) = (&url, &done);
                scope.spawn(move || {
                    let agent = client();
                    let mut step = 0;
                    while !done.load(Ordering::Relaxed) {
                        let answer =
                            post(&agent, url, Some(&format!("soak-{}", c % 2)), request(c, step).as_bytes());
                        assert_eq!(answer.status, 200, "{}", answer.body);
                        step += 1;
                    }
                    step
                })
            })
            .collect();
        while started.elapsed() < Duration::from_secs(seconds) {
            std::thread::sleep(Duration::from_millis(500));
            samples.push((started.elapsed(), rss_bytes()));
        }
        done.store(true, Ordering::Relaxed);
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    let stats = get(&client(), &server.url("/forkcache/stats")).json();
    drop(server);
    let _ = std::fs::remove_file(trace);

    let warm = Duration::from_secs(seconds) / 4;
    if std::env::var("FORKCACHE_SOAK_VERBOSE").is_ok() {
        for (t, rss) in &samples {
            eprintln!("soak: {:>6.1} s  RSS {} MiB", t.as_secs_f64(), rss >> 20);
        }
    }
    let warm_peak = samples.iter().filter(|(t, _)| *t <= warm).map(|(_, rss)| *rss).max().unwrap();
    let late_peak = samples.iter().filter(|(t, _)| *t > warm).map(|(_, rss)| *rss).max().unwrap();
    eprintln!(
        "soak: {sent} requests in {seconds} s; RSS after warm-up {} MiB, peak later {} MiB; cache {}",
        warm_peak >> 20,
        late_peak >> 20,
        stats["cache"]
    );
    assert!(late_peak <= warm_peak + warm_peak / 10 + (16 << 20), "memory grew: {warm_peak} → {late_peak}");
    assert!(stats["cache"]["evictions"].as_u64().unwrap() > 0, "{}", stats["cache"]);
    assert!(stats["cache"]["entries"].as_u64().unwrap() <= CAPACITY as u64, "{}", stats["cache"]);
    assert_eq!(stats["totals"]["requests"].as_u64().unwrap(), sent as u64);
}
