//! `import --trace PROXY.jsonl`: a proxy's trace joined with the transcripts by request id. The
//! transcripts give the chain structure, the proxy the bytes: each break gets the first
//! divergence between its request and its chain's previous one (byte offset, JSON path, part).
//!
//! Only the bodies a break needs are kept: the trace is streamed once, after the breaks are
//! known.

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;

use serde::Deserialize;
use serde_json::value::RawValue;

use forkcache_engine::verify::{Divergence, cache_order, first_divergence};

use crate::trace::UnreadableLine;

/// A trace line, as far as the join goes.
#[derive(Deserialize)]
struct ProxyLine<'a> {
    #[serde(borrow)]
    request_id: Option<&'a str>,
    #[serde(borrow)]
    body: Option<&'a RawValue>,
}

/// What joining found.
#[derive(Clone, Debug, Default)]
pub struct Join {
    /// Break request id → where its prompt first left the previous request's.
    pub divergences: BTreeMap<String, Divergence>,
    /// Breaks whose request, or whose chain's previous request, the trace does not hold.
    pub unmatched_breaks: u64,
    /// Trace lines that were not readable envelopes.
    pub skipped_lines: u64,
    /// Those lines: 1-based line number and what is wrong.
    pub unreadable: Vec<UnreadableLine>,
}

impl Join {
    fn skip(&mut self, line: usize, message: String) {
        self.skipped_lines += 1;
        self.unreadable.push(UnreadableLine { line, message });
    }
}

/// Streams the proxy trace and finds each break's first divergence: `pairs` are (break request
/// id, the chain's previous request id), as [`ImportReport::break_pairs`](crate::report::ImportReport::break_pairs) lists them.
pub fn join(pairs: &[(String, String)], mut trace: impl BufRead) -> std::io::Result<Join> {
    let wanted: BTreeSet<&str> = pairs.iter().flat_map(|(a, b)| [a.as_str(), b.as_str()]).collect();
    let mut bodies: BTreeMap<String, String> = BTreeMap::new();
    let mut join = Join::default();
    // Lines as bytes: one that is not UTF-8 is skipped and counted, not the end of the join.
    let mut bytes = Vec::new();
    let mut number = 0;
    loop {
        bytes.clear();
        if trace.read_until(b'\n', &mut bytes)? == 0 {
            break;
        }
        number += 1;
        let line = match std::str::from_utf8(&bytes) {
            Ok(line) => line,
            Err(err) => {
                join.skip(number, format!("not UTF-8 (byte {})", err.valid_up_to() + 1));
                continue;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let parsed = match serde_json::from_str::<ProxyLine>(line) {
            Ok(parsed) => parsed,
            Err(err) => {
                join.skip(number, format!("not a trace envelope: {err}"));
                continue;
            }
        };
        if let (Some(id), Some(body)) = (parsed.request_id, parsed.body) {
            if wanted.contains(id) {
                bodies.insert(id.to_string(), body_text(body));
            }
        }
    }
    for (this, before) in pairs {
        let segments = |id: &str| bodies.get(id).and_then(|body| cache_order(body).ok());
        match (segments(before), segments(this)) {
            (Some(a), Some(b)) => {
                if let Some(divergence) = first_divergence(&a, &b) {
                    join.divergences.insert(this.clone(), divergence);
                }
            }
            _ => join.unmatched_breaks += 1,
        }
    }
    Ok(join)
}

/// An envelope's body: an object as its bytes, a string as the text it holds.
fn body_text(body: &RawValue) -> String {
    serde_json::from_str::<String>(body.get()).unwrap_or_else(|_| body.get().to_string())
}
