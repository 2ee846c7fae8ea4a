//! `import claude-code` throughput on a generated transcript, beside the least any JSONL reader
//! must do (parse every line into `IgnoredAny`) in the same run. See benches/README.md.
//!
//! The transcript: sessions of 200 requests shaped like Claude Code 2.1's files — per request a
//! user line holding a ~3 KB tool result, two streamed assistant lines (thinking, then a
//! `tool_use`) sharing a `requestId` with a full usage object, a progress line and a
//! queue-operation line; about 8 KB a request.
//!
//! `IMPORT_BENCH_WRITE=FILE:MB cargo bench --bench import` writes a transcript of about MB
//! megabytes to FILE and exits (for measuring peak memory of the binary on large inputs).

use std::fmt::Write as _;
use std::io::Write as _;
use std::time::Duration;

use criterion::{Criterion, Throughput};

use forkcache_engine::billing::PriceTable;
use forkcache_ingest::report::ImportOptions;
use forkcache_ingest::transcript::TranscriptReader;

const REQUESTS_PER_SESSION: usize = 200;

/// One session's lines, appended to `out`.
fn session(out: &mut String, session: usize) {
    // JSON-escaped source text: quotes, escaped quotes and newlines, as tool results hold.
    let tool_output = r#"fn main() { println!(\"hello, \\\"world\\\"\"); }\n"#.repeat(64);
    let mut context = 14_000u64;
    for turn in 0..REQUESTS_PER_SESSION {
        let minute = turn / 4;
        let at = |second: usize| {
            format!(
                "2026-03-{:02}T{:02}:{:02}:{:02}.000Z",
                1 + session % 28,
                8 + minute / 60,
                minute % 60,
                second
            )
        };
        let user = format!("u-{session}-{turn}");
        let request = format!("req_{session:06}_{turn:04}");
        let _ = writeln!(
            out,
            r#"{{"parentUuid":"a-{session}-{prev}","isSidechain":false,"userType":"external","cwd":"/home/dev/project","sessionId":"s{session}","version":"2.1.180","gitBranch":"main","type":"user","message":{{"role":"user","content":[{{"tool_use_id":"toolu_{session}_{turn}","type":"tool_result","content":"{tool_output}"}}]}},"uuid":"{user}","timestamp":"{}"}}"#,
            at(1),
            prev = turn.saturating_sub(1)
        );
        let written = 900 + (turn as u64 * 37) % 700;
        let usage = |output: u64| {
            format!(
                r#"{{"input_tokens":3,"cache_creation_input_tokens":{written},"cache_read_input_tokens":{context},"cache_creation":{{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":{written}}},"output_tokens":{output},"service_tier":"standard","speed":"standard","inference_geo":"","iterations":[{{"input_tokens":3,"output_tokens":{output},"type":"message"}}]}}"#
            )
        };
        for (part, content, output) in [
            (0, r#"{"type":"thinking","thinking":"Let me look at the file and the failing test before changing anything.","signature":"EpcCCkYIBRgCKkBz"}"#.to_string(), 12),
            (1, format!(r#"{{"type":"tool_use","id":"toolu_{session}_{next}","name":"Read","input":{{"file_path":"/home/dev/project/src/module_{turn}.rs"}}}}"#, next = turn + 1), 180),
        ] {
            let _ = writeln!(
                out,
                r#"{{"parentUuid":"{user}","isSidechain":false,"userType":"external","cwd":"/home/dev/project","sessionId":"s{session}","version":"2.1.180","gitBranch":"main","message":{{"model":"claude-opus-4-6","id":"msg_{session}_{turn}","type":"message","role":"assistant","content":[{content}],"stop_reason":null,"stop_sequence":null,"usage":{}}},"requestId":"{request}","type":"assistant","uuid":"a-{session}-{turn}-{part}","timestamp":"{}"}}"#,
                usage(output),
                at(3 + part)
            );
        }
        let _ = writeln!(
            out,
            r#"{{"parentUuid":"a-{session}-{turn}-1","isSidechain":false,"type":"progress","data":{{"type":"hook_progress","hookEvent":"PostToolUse","hookName":"PostToolUse:Read"}},"toolUseID":"toolu_{session}_{turn}","uuid":"p-{session}-{turn}","timestamp":"{}","sessionId":"s{session}"}}"#,
            at(5)
        );
        let _ = writeln!(
            out,
            r#"{{"type":"queue-operation","operation":"dequeue","timestamp":"{}","sessionId":"s{session}"}}"#,
            at(5)
        );
        context += written;
    }
}

fn transcript(megabytes: usize) -> String {
    let mut out = String::with_capacity(megabytes << 20);
    let mut index = 0;
    while out.len() < megabytes << 20 {
        session(&mut out, index);
        index += 1;
    }
    out
}

fn floor(text: &str) -> usize {
    text.lines().filter(|line| serde_json::from_str::<serde::de::IgnoredAny>(line).is_ok()).count()
}

fn read(text: &str) -> usize {
    let mut reader = TranscriptReader::new();
    reader.read("bench.jsonl", text.as_bytes()).expect("reading memory cannot fail");
    reader.finish().requests.len()
}

fn import(text: &str, prices: &PriceTable) -> u64 {
    let mut reader = TranscriptReader::new();
    reader.read("bench.jsonl", text.as_bytes()).expect("reading memory cannot fail");
    let report =
        forkcache_ingest::import(reader.finish(), &ImportOptions::default(), prices).expect("bytes4");
    report.totals.requests
}

/// The whole import and its `--json` document, written to a sink.
fn import_json(text: &str, prices: &PriceTable) -> u64 {
    let mut reader = TranscriptReader::new().keep_raw_usage(true);
    reader.read("bench.jsonl", text.as_bytes()).expect("reading memory cannot fail");
    let report =
        forkcache_ingest::import(reader.finish(), &ImportOptions::default(), prices).expect("bytes4");
    report.write_json(&mut std::io::sink()).expect("a sink takes anything");
    report.totals.requests
}

fn bench(c: &mut Criterion) {
    let text = transcript(64);
    let prices = PriceTable::builtin();
    eprintln!("import: {} bytes, {} requests", text.len(), read(&text));
    let mut group = c.benchmark_group("import");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    group.bench_function("floor_ignored_any", |b| b.iter(|| floor(&text)));
    group.bench_function("read", |b| b.iter(|| read(&text)));
    group.bench_function("read_and_predict", |b| b.iter(|| import(&text, &prices)));
    group.bench_function("read_predict_and_json", |b| b.iter(|| import_json(&text, &prices)));
    group.finish();
}

fn main() {
    if let Ok(target) = std::env::var("IMPORT_BENCH_WRITE") {
        let (path, megabytes) = target.rsplit_once(':').expect("IMPORT_BENCH_WRITE=FILE:MB");
        let megabytes: usize = megabytes.parse().expect("MB is a number");
        let mut file = std::io::BufWriter::new(std::fs::File::create(path).expect("creating the file"));
        // Written in 64 MB pieces, each its own sessions, so memory stays small.
        for piece in 0..megabytes.div_ceil(64) {
            let mut text = String::new();
            let mut index = piece * 100_000;
            while text.len() < 64 << 20 {
                session(&mut text, index);
                index += 1;
            }
            file.write_all(text.as_bytes()).expect("writing");
        }
        return;
    }
    forkcache_report::chart::register_font();
    let mut criterion = Criterion::default().configure_from_args();
    bench(&mut criterion);
    criterion.final_summary();
}
