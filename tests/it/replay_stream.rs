//! `replay` streams its trace: lines are read in batches, parsed on worker threads and run in
//! start order within the reorder window. The output is the same byte for byte on any number of
//! threads; a line further out of order than the window is an error naming it.

use serde_json::{Value, json};

use forkcache_engine::{PriceTable, Usage};
use forkcache_ingest::replay::{BATCH_BYTES, ReplayConfig, ReplayError, replay};
use forkcache_scenario::synth::{ConversationSpec, growing_conversation};

use crate::support::{Body, bp, run_binary, text};

/// An envelope line around `body`, starting at `at_ms`.
fn envelope(at_ms: u64, body: &str) -> String {
    format!("{{\"at_ms\":{at_ms},\"body\":{body}}}\n")
}

/// A growing agent conversation of several batches, logged out of start order within a small
/// reach: every fourth line is written after the line that started after it (as a server logging
/// at the end of each response would), and every seventh starts at the same millisecond as the
/// line before it.
fn shuffled_trace() -> Vec<u8> {
    let spec = ConversationSpec { requests: 48, final_history_bytes: 160_000, ..ConversationSpec::default() };
    let bodies = growing_conversation(&spec);
    let mut starts: Vec<u64> = (0..bodies.len() as u64).map(|i| 1_000 * i).collect();
    for i in (0..starts.len() - 1).step_by(4) {
        starts.swap(i, i + 1);
    }
    for i in (7..starts.len()).step_by(7) {
        starts[i] = starts[i - 1];
    }
    let trace: String = bodies.iter().zip(&starts).map(|(body, &at)| envelope(at, body)).collect();
    assert!(trace.len() > 3 * BATCH_BYTES, "the trace spans several batches: {} bytes", trace.len());
    trace.into_bytes()
}

/// Two server runs (each opened by a session marker), an unreadable line in each, a request the
/// API rejects, recorded usage, and lines without `at_ms`.
fn sessions_trace() -> Vec<u8> {
    let body = Body::blocks(vec![bp(text("the shared prefix", 3_000)), text("question", 20)]);
    let body = body.0.to_string();
    let marker =
        r#"{"forkcache_session":{"started":"2026-11-25T00:00:00Z","version":"0.1.0","settings":{}}}"#;
    let usage = r#""usage":{"input_tokens":20,"cache_creation_input_tokens":0,"cache_read_input_tokens":3000,"output_tokens":5}"#;
    let lines = [
        marker.to_string(),
        envelope(0, &body).trim_end().to_string(),
        format!("{{\"at_ms\":2000,{usage},\"body\":{body}}}"),
        "{\"at_ms\":2500,\"body\":".to_string(),
        body.clone(),
        marker.to_string(),
        envelope(1_000, &body).trim_end().to_string(),
        envelope(500, r#"{"model":"claude-sonnet-4-6","messages":[]}"#).trim_end().to_string(),
        "[1, 2]".to_string(),
        envelope(40_000, &body).trim_end().to_string(),
    ];
    lines.iter().map(|line| format!("{line}\n")).collect::<String>().into_bytes()
}

/// `replay FILE --json --threads N`: exit code and standard output.
fn replay_json(trace: &[u8], threads: usize) -> (Option<i32>, Vec<u8>) {
    let file = tempfile_with(trace);
    let threads = threads.to_string();
    let path = file.to_string_lossy().to_string();
    let output = run_binary(&["replay", &path, "--json", "--threads", &threads], b"");
    let _ = std::fs::remove_file(&file);
    (output.status.code(), output.stdout)
}

/// A file of `bytes` in the temporary directory, named for this test and this process.
fn tempfile_with(bytes: &[u8]) -> std::path::PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let name = format!(
        "forkcache-replay-stream-{}-{}.jsonl",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let path = std::env::temp_dir().join(name);
    std::fs::write(&path, bytes).expect("the temporary trace is written");
    path
}

#[test]
fn replay_json_is_byte_identical_on_1_2_4_and_8_threads() {
    for (name, trace, code) in [("shuffled", shuffled_trace(), 0), ("sessions", sessions_trace(), 3)] {
        let (one_code, one) = replay_json(&trace, 1);
        assert_eq!(one_code, Some(code), "{name}: {}", String::from_utf8_lossy(&one));
        let report: Value = serde_json::from_slice(&one).expect("one JSON document");
        assert!(!report["requests"].as_array().expect("requests").is_empty(), "{name}");
        for threads in [2, 4, 8] {
            let (code_n, out) = replay_json(&trace, threads);
            assert_eq!(code_n, Some(code), "{name} on {threads} threads");
            assert!(out == one, "{name}: the --json output on {threads} threads differs from 1 thread");
        }
    }
}

#[test]
fn the_shuffled_trace_runs_in_start_order_and_reports_in_file_order() {
    let trace = shuffled_trace();
    let streamed =
        replay(&ReplayConfig { threads: 4, ..ReplayConfig::default() }, PriceTable::builtin(), &trace)
            .expect("every line is within the window");
    let indexes: Vec<usize> = streamed.records.iter().map(|r| r.index).collect();
    assert_eq!(indexes, (0..48).collect::<Vec<_>>(), "records in file order");
    // Lines 1 and 2 were swapped: line 2 (at 0 ms) ran first and wrote the conversation's
    // prefix, so line 1 (at 1,000 ms, the same prefix and more) reads what line 2 wrote.
    let first = streamed.records[0].result.as_ref().expect("priced");
    let second = streamed.records[1].result.as_ref().expect("priced");
    assert_eq!((streamed.records[0].at.ms(), streamed.records[1].at.ms()), (1_000, 0));
    assert_eq!(second.usage.cache_read_input_tokens, 0, "the earliest request reads nothing");
    assert!(first.usage.cache_read_input_tokens > 0, "the later one reads the earlier one's writes");
}

/// Three identical cacheable requests logged at 3,000, 1,000 and 2,000 ms.
fn three_out_of_order() -> Vec<u8> {
    let body = Body::blocks(vec![bp(text("a prefix worth caching", 2_000))]).0.to_string();
    [envelope(3_000, &body), envelope(1_000, &body), envelope(2_000, &body)].concat().into_bytes()
}

#[test]
fn within_the_window_lines_run_in_start_order() {
    let report = replay(&ReplayConfig::default(), PriceTable::builtin(), &three_out_of_order()).unwrap();
    let usage: Vec<Usage> = report.records.iter().map(|r| r.result.as_ref().unwrap().usage).collect();
    // Line 2 starts first: it writes the prefix; lines 3 and then 1 read all of it.
    let written = usage[1].cache_creation_input_tokens;
    assert!(written >= 2_000, "line 2 writes the 2,000-token block and what precedes it: {written}");
    assert_eq!(usage[1].cache_read_input_tokens, 0);
    assert_eq!((usage[0].cache_read_input_tokens, usage[0].cache_creation_input_tokens), (written, 0));
    assert_eq!((usage[2].cache_read_input_tokens, usage[2].cache_creation_input_tokens), (written, 0));
}

#[test]
fn a_line_later_than_the_window_is_an_error_naming_it_with_exit_1() {
    let config = ReplayConfig { reorder_window: 0, ..ReplayConfig::default() };
    let err = replay(&config, PriceTable::builtin(), &three_out_of_order()).unwrap_err();
    let ReplayError::OutOfOrder(late) = &err else { panic!("expected out of order, got {err}") };
    assert_eq!((late.line, late.at_ms, late.ran_line, late.ran_at_ms), (2, 1_000, 1, 3_000));
    assert!(err.to_string().starts_with("line 2 starts at 1000 ms, before line 1 (3000 ms)"), "{err}");

    let output = run_binary(&["replay", "-", "--reorder-window", "0"], &three_out_of_order());
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("line 2 starts at 1000 ms") && stderr.contains("--reorder-window"), "{stderr}");
    // A window of one line reaches it.
    let output = run_binary(&["replay", "-", "--reorder-window", "1", "--json"], &three_out_of_order());
    assert_eq!(output.status.code(), Some(0));
}

#[test]
fn the_window_also_bounds_the_bytes_it_holds() {
    // Lines of about 100 KB: a window of 4 lines holds 4 × 32 KiB = 128 KiB of them, raised to
    // twice the longest line read (about 200 KB) so that one line never fills it by itself. Lines
    // 1 and 2 fit; line 3 arriving makes about 300 KB, and the earliest (line 2, at 1,000 ms)
    // runs. Line 4 (at 500 ms) then starts before a line that ran. With lines alone as the bound
    // (4), line 4 would still have been in reach. A window of 16 lines (512 KiB) holds all four.
    let big =
        |label: &str| Body::blocks(vec![text(&label.repeat(100_000 / label.len()), 30_000)]).0.to_string();
    let lines = [
        envelope(3_000, &big("a")),
        envelope(1_000, &big("b")),
        envelope(2_000, &big("c")),
        envelope(500, &big("d")),
    ];
    let longest = lines.iter().map(|line| line.trim_end().len()).max().unwrap();
    assert!((100_000..110_000).contains(&longest), "{longest}");
    let trace = lines.concat();
    // No floor under the window's bytes here (16 MiB by default: see below).
    let config = ReplayConfig { reorder_window: 4, reorder_min_bytes: 0, ..ReplayConfig::default() };
    let err = replay(&config, PriceTable::builtin(), &trace).unwrap_err();
    let ReplayError::OutOfOrder(late) = err else { panic!("expected out of order") };
    assert_eq!((late.line, late.ran_line), (4, 2));
    let limit = format!("{} KiB of lines", (2 * longest) >> 10);
    assert_eq!(late.limit, limit, "the bytes (twice the longest line) fired, not the 4 lines");
    // The default floor (16 MiB) holds all four.
    let config = ReplayConfig { reorder_window: 4, ..ReplayConfig::default() };
    assert_eq!(replay(&config, PriceTable::builtin(), &trace).unwrap().records.len(), 4);
    let config = ReplayConfig { reorder_window: 16, reorder_min_bytes: 0, ..ReplayConfig::default() };
    let report = replay(&config, PriceTable::builtin(), &trace).unwrap();
    let starts: Vec<u64> = report.records.iter().map(|r| r.at.ms()).collect();
    assert_eq!(starts, [3_000, 1_000, 2_000, 500], "file order, each at its own start");
}

#[test]
fn sessions_reset_the_cache_and_unreadable_lines_are_reported_when_streaming() {
    let config = ReplayConfig { threads: 3, ..ReplayConfig::default() };
    let report = replay(&config, PriceTable::builtin(), &sessions_trace()).unwrap();
    assert_eq!(report.sessions, 2);
    let lines: Vec<usize> = report.unreadable.iter().map(|line| line.line).collect();
    assert_eq!(lines, [4, 9], "the torn envelope and the array");
    let requests: Vec<(usize, usize)> = report.records.iter().map(|r| (r.index, r.line)).collect();
    assert_eq!(requests, [(0, 2), (1, 3), (2, 5), (3, 7), (4, 8), (5, 10)]);
    let read = |i: usize| report.records[i].result.as_ref().map(|r| r.usage.cache_read_input_tokens);
    // Run 1: line 2 writes, line 3 reads, line 5 (no at_ms: 2,000 + the 30 s gap) reads.
    assert_eq!(read(0), Ok(0));
    assert!(read(1).unwrap() > 0 && read(2) == read(1));
    // Run 2 starts on an empty cache: line 7 writes again, line 10 reads; line 8 is rejected.
    assert_eq!(read(3), Ok(0));
    assert!(report.records[4].result.is_err());
    assert_eq!(read(5), read(1));
    assert_eq!(report.records[2].at.ms(), 32_000);
    assert!(report.recorded.is_some(), "line 3's recorded usage is scored");
    let strict = ReplayConfig { strict: true, threads: 3, ..ReplayConfig::default() };
    let stopped = replay(&strict, PriceTable::builtin(), &sessions_trace());
    assert!(matches!(stopped, Err(ReplayError::Unreadable(line)) if line.line == 4));
}

#[test]
fn json_shape_is_unchanged_by_streaming() {
    let (code, out) = replay_json(&three_out_of_order(), 2);
    assert_eq!(code, Some(0));
    let report: Value = serde_json::from_slice(&out).unwrap();
    let keys: Vec<&str> = report.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["requests", "totals", "settings"]);
    assert_eq!(report["requests"][1]["index"], json!(1));
    assert_eq!(report["requests"][1]["at_ms"], json!(1_000));
}

#[test]
fn blocks_hashed_beforehand_price_exactly_as_blocks_hashed_by_the_endpoint() {
    use forkcache_engine::prompt::BlockKeys;
    use forkcache_engine::{Call, EndpointConfig, MockEndpoint, SimTime};
    use forkcache_wire::parse_request;

    use crate::support::{SONNET, assistant, tool, user};

    // Every place a block can sit: tools, a string system, system blocks, string content,
    // block content; then the conversation grown by a turn; then a request refused at its
    // second message's empty text block (the error must name the same path).
    let tools = json!([tool("Read", 300), tool("Edit", 200)]);
    let first = Body::new(SONNET, vec![user(vec![bp(text("read the file", 1_500))])])
        .with("tools", tools.clone())
        .with("system", json!("you are a careful agent"));
    let mut turns = first.0["messages"].as_array().unwrap().clone();
    turns.push(assistant(vec![text("done", 40)]));
    turns.push(json!({"role": "user", "content": "and now the tests"}));
    let second = Body::new(SONNET, turns)
        .with("tools", tools)
        .with("system", json!([bp(text("you are a careful agent", 2_000))]));
    let refused = Body::new(
        SONNET,
        vec![user(vec![text("fine", 10)]), user(vec![json!({"type": "text", "text": ""})])],
    );

    let prices = PriceTable::builtin();
    let mut hashed_here = MockEndpoint::new(EndpointConfig::default(), prices.clone()).unwrap();
    let mut hashed_before = MockEndpoint::new(EndpointConfig::default(), prices).unwrap();
    for (turn, body) in [&first, &second, &second, &refused].into_iter().enumerate() {
        let bytes = body.bytes();
        let view = parse_request(&bytes).unwrap();
        let call = Call::new(&bytes, SimTime(1_000 * turn as u64));
        let keys = BlockKeys::of(&view);
        let expected = hashed_here.handle_view(&view, &call);
        let got = hashed_before.handle_keyed(&view, Some(&keys), &call);
        assert_eq!(got, expected, "turn {turn}");
    }
}
