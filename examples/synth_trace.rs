//! Writes the engine bench's trace (`synth::growing_conversation` with its default spec: 200
//! requests of one coding-agent session, about 93 MB) to standard output, one request body per
//! line: the input `benches/peers/run.sh` gives forkcache and its peer.
//!
//! `cargo run --release --example synth_trace > trace.jsonl`
//!
//! `--requests N` and `--final-history-bytes B` change the session's length and how far its
//! history grows: one run whose cache state grows throughout, written as it is generated.
//! `--requests 2000 --final-history-bytes 1250000` writes 3.45 GB (each turn's blocks carry JSON
//! of their own beyond the history bytes asked for).

use std::io::Write;

use forkcache_scenario::synth::{ConversationSpec, growing_conversation_iter};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let spec = spec_from_args(std::env::args().skip(1))?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for body in growing_conversation_iter(&spec) {
        writeln!(out, "{body}")?;
    }
    out.flush()?;
    Ok(())
}

/// The default spec, with the lengths the arguments name.
fn spec_from_args(mut args: impl Iterator<Item = String>) -> Result<ConversationSpec, String> {
    let mut spec = ConversationSpec::default();
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a number"))?;
        let number: usize = value.parse().map_err(|_| format!("{flag}: not a number: {value}"))?;
        match flag.as_str() {
            "--requests" => spec.requests = number,
            "--final-history-bytes" => spec.final_history_bytes = number,
            _ => return Err(format!("unknown option {flag} (--requests N, --final-history-bytes B)")),
        }
    }
    Ok(spec)
}
