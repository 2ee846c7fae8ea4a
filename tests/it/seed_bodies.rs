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

fn bodies_of(report: &ScenarioReport, role: RequestRole) -> Vec<(String, Value)> {
    report
        .records
        .iter()
        .filter(|r| r.role == role)
        .map(|r| (r.agent.clone(), serde_json::from_str(r.body.as_ref().unwrap()).unwrap()))
        .collect()
}

/// The text blocks of `body` that are task notifications.
fn notifications(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter_map(|b| b["text"].as_str())
        .filter(|text| text.starts_with("<task-notification>"))
        .map(str::to_string)
        .collect()
}

#[test]
fn fork_results_reach_the_parent_as_notifications() {
    // readme-example forks 3 ways (2 turns each) after parent 3; the forks end long before the
    // 60 s idle is over, so the parent's next request holds one notification per fork, each
    // with the fork's final report in `<result>` (seed 000; Claude Code 2.1.330's capture).
    let report = run_fixture("readme-example");
    let parents = bodies_of(&report, RequestRole::Parent);
    let (spawning, _) = parents.iter().find(|(agent, _)| agent.contains("spawns 1")).unwrap();
    assert!(
        parents.iter().take_while(|(agent, _)| agent != spawning).all(|(_, b)| notifications(b).is_empty())
    );
    let later = parents.iter().skip_while(|(agent, _)| agent != spawning).nth(1).unwrap();
    let found = notifications(&later.1);
    assert_eq!(found.len(), 3, "{}", later.0);
    for (fork, text) in found.iter().enumerate() {
        let fork = fork + 1;
        assert!(text.contains(&format!("<tool-use-id>toolu_spawn1_fork{fork}</tool-use-id>")), "{text}");
        // A fork's report is 200 tokens (the engine's FORK_REPORT_TOKENS).
        assert!(text.contains(&format!("<result>[fork 1.{fork} report: 200 tokens]</result>")), "{text}");
    }
}

#[test]
fn a_background_agents_report_reaches_the_parent() {
    // launch-background: the agent's 500-token report travels in its notification, as
    // launch-sync's travels in the tool result.
    let report = run_fixture("launch-background");
    let parents = bodies_of(&report, RequestRole::Parent);
    let found = notifications(&parents.last().unwrap().1);
    assert_eq!(found.len(), 1);
    assert!(found[0].contains("<result>[general-purpose 1 report: 500 tokens]</result>"), "{}", found[0]);
    assert!(found[0].contains("<tool-use-id>toolu_named1</tool-use-id>"), "{}", found[0]);
}

#[test]
fn the_notification_bills_its_frame_and_the_report() {
    // A declared 40-token frame around a 500-token report: the block is declared 540 tokens.
    let spec = ScenarioSpec::from_json(
        &fixture("launch-background")
            .unwrap()
            .json
            .replace(r#""result_tokens": 500,"#, r#""result_tokens": 500, "notification_tokens": 40,"#),
    )
    .unwrap();
    let mut config = RunConfig::for_spec(&spec);
    config.keep_bodies = true;
    let report = run(&spec, &config, &PriceTable::builtin()).unwrap();
    let body = report.records.last().unwrap().body.clone().unwrap();
    assert!(body.contains(r#"</task-notification>","forkcache_tokens":540"#), "{body}");
}

#[test]
fn wait_lets_the_parent_wait_for_its_forks() {
    // Forks of 3 turns with 60 s tools end far after the parent's next turn; without `wait`
    // that turn holds no notification, with it both.
    let timeline = |wait: &str| {
        format!(
            r#"{{"name": "w", "history": {{"messages": [{{"role": "user", "content": "go"}}]}},
                "timeline": [{{"fork": {{"count": 2, "child_turns": 3, "tool_ms": 60000}}}}{wait}, {{"turn": {{}}}}]}}"#
        )
    };
    let counts: Vec<usize> = ["", r#", {"wait": {}}"#]
        .iter()
        .map(|wait| {
            let spec = ScenarioSpec::from_json(&timeline(wait)).unwrap();
            let mut config = RunConfig::for_spec(&spec);
            config.keep_bodies = true;
            let report = run(&spec, &config, &PriceTable::builtin()).unwrap();
            let (_, last) = bodies_of(&report, RequestRole::Parent).pop().unwrap();
            notifications(&last).len()
        })
        .collect();
    assert_eq!(counts, [0, 2]);
}

/// The tool result the parent got for call `id`, from the last parent body that holds it.
fn result_of(parents: &[(String, Value)], id: &str) -> Option<String> {
    parents.iter().rev().find_map(|(_, body)| {
        body["messages"].as_array()?.iter().filter_map(|m| m["content"].as_array()).flatten().find_map(|b| {
            (b["type"] == "tool_result" && b["tool_use_id"] == id)
                .then(|| b["content"].as_str().unwrap().to_string())
        })
    })
}

#[test]
fn with_forking_on_a_resume_runs_in_the_background_and_reports_by_notification() {
    // A named agent, resumed once, then the parent waits and takes a turn. With a fork earlier
    // in the timeline (forking on) every spawn is asynchronous (seed 000), the resume included.
    let timeline = |fork: &str| {
        format!(
            r#"{{"name": "r", "history": {{"messages": [{{"role": "user", "content": "go"}}]}},
                "timeline": [{fork}{{"named": {{"agent": "general-purpose", "prompt": "Trace it.", "turns": 1}}}},
                {{"resume": {{"named": 1, "prompt": "Again."}}}}, {{"wait": {{}}}}, {{"turn": {{}}}}]}}"#
        )
    };
    let parents_of = |fork: &str| {
        let spec = ScenarioSpec::from_json(&timeline(fork)).unwrap();
        let mut config = RunConfig::for_spec(&spec);
        config.keep_bodies = true;
        bodies_of(&run(&spec, &config, &PriceTable::builtin()).unwrap(), RequestRole::Parent)
    };
    // The resume's call id: `toolu_resume{named}_{turn}`, the child's turn count after its run.
    let resume_id = |parents: &[(String, Value)]| {
        parents
            .iter()
            .flat_map(|(_, b)| b["messages"].as_array().unwrap().iter())
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .find_map(|b| b["tool_use_id"].as_str().filter(|id| id.starts_with("toolu_resume1_")))
            .unwrap()
            .to_string()
    };
    let sync = parents_of("");
    let id = resume_id(&sync);
    assert_eq!(result_of(&sync, &id).unwrap(), "general-purpose 1 report");
    assert!(sync.iter().all(|(_, b)| notifications(b).is_empty()));

    let forked = parents_of(r#"{"fork": {"count": 1}}, "#);
    let id = resume_id(&forked);
    assert_eq!(
        result_of(&forked, &id).unwrap(),
        "Async agent launched successfully. agentId: general-purpose 1"
    );
    let found = notifications(&forked.last().unwrap().1);
    let of_resume: Vec<&String> =
        found.iter().filter(|n| n.contains(&format!("<tool-use-id>{id}</tool-use-id>"))).collect();
    assert_eq!(of_resume.len(), 1, "{found:?}");
    // The default report of a resume is 500 tokens.
    assert!(
        of_resume[0].contains("<result>[general-purpose 1 report: 500 tokens]</result>"),
        "{}",
        of_resume[0]
    );
    // The first launch's notification reached the parent before the resume was asked for.
    let first = forked.iter().position(|(_, b)| {
        notifications(b).iter().any(|n| n.contains("<tool-use-id>toolu_named1</tool-use-id>"))
    });
    let asked = forked.iter().position(|(_, b)| b.to_string().contains(&id));
    assert!(first.unwrap() < asked.unwrap(), "{first:?} {asked:?}");
}

#[test]
fn teammates_message_each_other_and_read_the_messages() {
    // Two teammates, one leader message each after their first task, each asking permission
    // once (the `team` defaults) and now one direct message each. Without messages each
    // teammate makes 3 requests (the permission ask, its summary, its summary after the
    // leader's message); a direct message adds one: the `SendMessage` call's reply, after which
    // the teammate's next request carries the result and its summary. 2 × 4 = 8.
    let run_team = |peers: u32| {
        let spec = ScenarioSpec::from_json(&format!(
            r#"{{"name": "t", "history": {{"messages": [{{"role": "user", "content": "go"}}]}},
                "timeline": [{{"team": {{"size": 2, "messages": 1, "peer_messages": {peers}}}}}]}}"#
        ))
        .unwrap();
        let mut config = RunConfig::for_spec(&spec);
        config.keep_bodies = true;
        run(&spec, &config, &PriceTable::builtin()).unwrap()
    };
    assert_eq!(bodies_of(&run_team(0), RequestRole::Teammate).len(), 6);
    let mates = bodies_of(&run_team(1), RequestRole::Teammate);
    assert_eq!(mates.len(), 8);
    for (me, other) in [("teammate-1", "teammate-2"), ("teammate-2", "teammate-1")] {
        let (_, last) = mates.iter().rev().find(|(agent, _)| agent.starts_with(me)).unwrap();
        let blocks: Vec<&Value> = last["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .collect();
        let call = blocks.iter().find(|b| b["name"] == "SendMessage").expect("its call");
        assert_eq!(call["input"]["to"], other);
        let sent = call["id"].as_str().unwrap();
        assert!(blocks.iter().any(|b| b["tool_use_id"] == sent && b["content"] == "Message sent."));
        let received = format!("<teammate-message teammate_id=\"{other}@team\">");
        assert_eq!(
            blocks.iter().filter(|b| b["text"].as_str().is_some_and(|t| t.starts_with(&received))).count(),
            1
        );
    }
}
