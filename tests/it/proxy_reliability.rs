//! The proxy against upstreams that misbehave within HTTP: one that closes every connection
//! after its response (issue 29, item 14) and one that answers with a decompression bomb
//! (item 6).

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use crate::proxy::RunningProxy;
use crate::serve_harness::{cached_request, client, post};

const MODEL: &str = "claude-sonnet-4-6";

/// A Messages response the upstream sends for every request (usage only).
const MESSAGE: &str = r#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[],"stop_reason":"end_turn","usage":{"input_tokens":5,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}"#;

/// Reads one request (head and `content-length` body) from `stream`; false at end of stream.
fn read_request(stream: &mut TcpStream) -> bool {
    let mut bytes = Vec::new();
    let mut byte = [0u8; 1];
    while !bytes.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => bytes.push(byte[0]),
            _ => return false,
        }
    }
    let head = String::from_utf8_lossy(&bytes).to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .map_or(0, |n| n.trim().parse::<usize>().unwrap());
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).is_ok()
}

/// An upstream that answers one request per connection and then closes it a few milliseconds
/// later — without `connection: close`, so the proxy keeps the connection for its next request,
/// which is on its way (or already sent) when the close arrives.
fn closing_upstream() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                if read_request(&mut stream) {
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                        MESSAGE.len()
                    );
                    let _ = stream.write_all(head.as_bytes());
                    let _ = stream.write_all(MESSAGE.as_bytes());
                    std::thread::sleep(Duration::from_millis(5));
                }
                // Dropped: closed, whatever the proxy sent meanwhile left unread.
            });
        }
    });
    format!("http://{addr}")
}

#[test]
fn item14_an_upstream_closing_each_connection_after_its_response_costs_no_502() {
    let upstream = closing_upstream();
    let proxy = RunningProxy::start(&upstream, None);
    let url = proxy.url("/v1/messages");
    // 4 clients, each 40 requests one after another on its own kept-alive connection to the
    // proxy: 160 requests, each but the first of a client sent right after a response, while
    // the upstream's close of that connection is still on its way.
    let clients: Vec<_> = (0..4)
        .map(|c| {
            let url = url.clone();
            std::thread::spawn(move || {
                let agent = client();
                (0..40)
                    .map(|turn| {
                        let body = cached_request(MODEL, 2_000, &format!("client {c} turn {turn}"), false);
                        post(&agent, &url, Some("k"), body.as_bytes()).status
                    })
                    .collect::<Vec<u16>>()
            })
        })
        .collect();
    let statuses: Vec<u16> = clients.into_iter().flat_map(|c| c.join().unwrap()).collect();
    let (stats, _) = proxy.stop();
    let failed = statuses.iter().filter(|status| **status != 200).count();
    eprintln!("closing upstream: 160 requests, {failed} failed, {} retried", stats.upstream_retries);
    assert_eq!(statuses.len(), 160);
    assert_eq!(failed, 0, "{statuses:?}");
    // The race was met (a request sent on a connection the upstream was closing), and retried.
    assert!(stats.upstream_retries > 0, "no request met a closing connection: the test proves nothing");
}
