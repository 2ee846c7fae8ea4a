//! Writes the engine bench's trace (`synth::growing_conversation` with its default spec: 200
//! requests of one coding-agent session, about 93 MB) to standard output, one request body per
//! line: the input `benches/peers/run.sh` gives forkcache and its peer.
//!
//! `cargo run --release --example synth_trace > trace.jsonl`

use std::io::Write;

use forkcache::synth::{ConversationSpec, growing_conversation};

fn main() -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for body in growing_conversation(&ConversationSpec::default()) {
        writeln!(out, "{body}")?;
    }
    out.flush()
}
