//! The engine's bodies as the seeds describe them, read byte by byte: every request of every
//! fixture pairs its tool calls with results (seed 000's sidecars snapshot at the end of a turn,
//! so a side request carries no call without its result).

use serde_json::Value;

use forkcache_engine::billing::PriceTable;
use forkcache_scenario::{FIXTURES, RequestRole, RunConfig, ScenarioReport, ScenarioSpec, fixture, run};

fn run_fixture(name: &str) -> ScenarioReport {
    let spec = ScenarioSpec::from_json(fixture(name).unwrap().json).unwrap();
    let mut config = RunConfig::for_spec(&spec);
    config.keep_bodies = true;
    run(&spec, &config, &PriceTable::builtin()).unwrap()
}

fn blocks_of<'m>(message: &'m Value, kind: &str) -> Vec<&'m Value> {
    match message["content"].as_array() {
        Some(blocks) => blocks.iter().filter(|b| b["type"] == kind).collect(),
        None => Vec::new(),
    }
}

/// Why the API would refuse `body`'s messages, if it would: each `tool_use` of an assistant
/// message is answered by a `tool_result` in the immediately following user message, and
/// every `tool_result` answers a `tool_use` of the message just before it.
fn pairing_fault(body: &Value) -> Option<String> {
    let messages = body["messages"].as_array()?;
    for (index, message) in messages.iter().enumerate() {
        let previous_calls: Vec<&str> = match index.checked_sub(1).map(|i| &messages[i]) {
            Some(previous) if previous["role"] == "assistant" => {
                blocks_of(previous, "tool_use").iter().filter_map(|b| b["id"].as_str()).collect()
            }
            _ => Vec::new(),
        };
        let results: Vec<&str> =
            blocks_of(message, "tool_result").iter().filter_map(|b| b["tool_use_id"].as_str()).collect();
        if let Some(orphan) = results.iter().find(|id| !previous_calls.contains(id)) {
            return Some(format!("messages[{index}]: tool_result {orphan} answers no tool_use just before"));
        }
        if message["role"] == "assistant" {
            let calls: Vec<&str> =
                blocks_of(message, "tool_use").iter().filter_map(|b| b["id"].as_str()).collect();
            let next = messages.get(index + 1);
            let answered: Vec<&str> = next
                .filter(|m| m["role"] == "user")
                .map(|m| {
                    blocks_of(m, "tool_result").iter().filter_map(|b| b["tool_use_id"].as_str()).collect()
                })
                .unwrap_or_default();
            if let Some(open) = calls.iter().find(|id| !answered.contains(id)) {
                return Some(format!("messages[{index}]: tool_use {open} has no tool_result right after"));
            }
        }
    }
    None
}

#[test]
fn the_pairing_check_catches_a_mid_turn_snapshot() {
    // The shape of the old sidecar: a reply with a call, then a user message holding only the
    // prompt; and a result whose call is missing.
    let mid_turn = serde_json::json!({"messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}]},
        {"role": "user", "content": [{"type": "text", "text": "Suggest the next prompt."}]}
    ]});
    assert!(pairing_fault(&mid_turn).unwrap().contains("toolu_1"));
    let orphan = serde_json::json!({"messages": [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "x"}]}
    ]});
    assert!(pairing_fault(&orphan).unwrap().contains("toolu_9"));
    let paired = serde_json::json!({"messages": [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"},
                                     {"type": "text", "text": "Suggest the next prompt."}]}
    ]});
    assert_eq!(pairing_fault(&paired), None);
}

#[test]
fn every_sidecar_body_of_every_fixture_pairs_calls_with_results() {
    let mut sidecars = 0;
    for fixture in FIXTURES {
        let report = run_fixture(fixture.name);
        for record in report.records.iter().filter(|r| r.role == RequestRole::Sidecar) {
            sidecars += 1;
            let body: Value = serde_json::from_str(record.body.as_ref().unwrap()).unwrap();
            let fault = pairing_fault(&body);
            assert_eq!(fault, None, "{} request {} ({})", fixture.name, record.index, record.agent);
        }
    }
    // `readme-example`, `sidecar`, `mistake-sidecar-recollects` and `session` send sidecars.
    assert!(sidecars >= 4, "only {sidecars} sidecar bodies checked");
}

#[test]
fn every_body_of_every_fixture_pairs_calls_with_results() {
    for fixture in FIXTURES {
        let report = run_fixture(fixture.name);
        for record in &report.records {
            let body: Value = serde_json::from_str(record.body.as_ref().unwrap()).unwrap();
            let fault = pairing_fault(&body);
            assert_eq!(fault, None, "{} request {} ({})", fixture.name, record.index, record.agent);
        }
    }
}
