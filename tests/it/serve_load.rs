//! Load: 32 concurrent clients × 200 requests on loopback, streamed and not, each client a
//! growing conversation. No request may fail, and the server's totals must equal the sum of the
//! usage every client was sent — per workspace and overall.

use std::collections::BTreeMap;

use serde_json::json;

use forkcache_engine::billing::Usage;
use forkcache_engine::endpoint::EndpointConfig;
use forkcache_net::serve::ServeConfig;

use crate::serve_harness::{Running, client, post};

const CLIENTS: usize = 32;
const REQUESTS_PER_CLIENT: usize = 200;
const TURNS_PER_CONVERSATION: usize = 20;
const WORKSPACES: usize = 4;

/// Request `index` of `client`'s run: conversation `index / 20`, turn `index % 20`, the last user
/// message marked for caching, every other request streamed.
fn request(client: usize, index: usize) -> String {
    let conversation = index / TURNS_PER_CONVERSATION;
    let turn = index % TURNS_PER_CONVERSATION;
    let system =
        format!("Shared system prompt for workspace {}. {}", client % WORKSPACES, "Be brief. ".repeat(500));
    let mut messages = Vec::new();
    for earlier in 0..turn {
        messages.push(json!({"role": "user", "content": format!("client {client} conversation {conversation} question {earlier}")}));
        messages.push(json!({"role": "assistant", "content": "forkcache mock reply."}));
    }
    messages.push(json!({"role": "user", "content": [{
        "type": "text",
        "text": format!("client {client} conversation {conversation} question {turn}"),
        "cache_control": {"type": "ephemeral"}
    }]}));
    json!({
        "model": "claude-sonnet-4-6",
        "max_tokens": 128,
        "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
        "messages": messages,
        "stream": index % 2 == 1,
    })
    .to_string()
}

#[test]
fn thirty_two_clients_two_hundred_requests_each_and_totals_add_up() {
    let total = (CLIENTS * REQUESTS_PER_CLIENT) as u64;
    let config = ServeConfig { max_requests: Some(total), ..ServeConfig::default() };
    let server = Running::start(config, EndpointConfig::default());
    let url = server.url("/v1/messages");
    let per_client: Vec<(String, Usage, u64)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let url = &url;
                scope.spawn(move || {
                    let agent = client();
                    let key = format!("load-{}", c % WORKSPACES);
                    let mut sum = Usage::default();
                    let mut read = 0;
                    for index in 0..REQUESTS_PER_CLIENT {
                        let answer = post(&agent, url, Some(&key), request(c, index).as_bytes());
                        assert_eq!(answer.status, 200, "client {c} request {index}: {}", answer.body);
                        assert_eq!(answer.is_stream(), index % 2 == 1);
                        let usage = answer.usage();
                        read += u64::from(usage.cache_read_input_tokens > 0);
                        sum.add(&usage);
                    }
                    (key, sum, read)
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().expect("a client thread")).collect()
    });
    // max_requests: the server stops by itself after the last answer.
    let summary = server.wait();

    let mut expected: BTreeMap<String, Usage> = BTreeMap::new();
    let mut overall = Usage::default();
    for (key, usage, _) in &per_client {
        expected.entry(forkcache_ingest::trace::key_fingerprint(key)).or_default().add(usage);
        overall.add(usage);
    }
    let served: BTreeMap<String, Usage> =
        summary.stats.workspaces.iter().map(|(name, totals)| (name.clone(), totals.usage)).collect();
    assert_eq!(served, expected);
    let totals = summary.stats.totals();
    assert_eq!((totals.requests, totals.rejected), (total, 0));
    assert_eq!(totals.usage, overall);
    // The workload really exercises the cache: turns after the first read the conversation.
    let reads: u64 = per_client.iter().map(|(_, _, read)| read).sum();
    assert!(reads >= total / 2, "{reads} of {total} requests read from the cache");
}
