//! The seeds' runtimes beyond forks: every agent type with its tool pool and max turns, custom
//! agents, the Agent tool's launch modes (sync, background, remote, resume, worktree), seed 003's
//! teaching sub-agent, agent memory and teams. Expected numbers are hand arithmetic on the
//! fixtures' declared sizes, written out beside each assertion.
//!
//! Common sizes (`launch-*` fixtures, Sonnet 4.6: hidden tool prompt 497 tokens, minimum 1,024):
//! parent tools Agent 1,003 + Read 500 + hidden 497 = 2,000; system 1,000 + 2,000 = 3,000;
//! history 15,000 → the parent's first request is 20,000 tokens.
//! A general-purpose agent: tools Read 500 + hidden 497 = 997 (Agent is disallowed for every
//! agent); its instructions 1,500 (the parent's identity and main sections are not kept);
//! its prompt 1,000 → 3,497. Each later turn adds a reply (text 200 + tool_use 100) and a tool
//! result (1,000): 1,300.

use serde_json::Value;

use forkcache_engine::billing::PriceTable;
use forkcache_engine::cache::{MissCause, Policy};
use forkcache_scenario::agent::AgentDefinition;
use forkcache_scenario::{
    RequestRole, RunConfig, ScenarioRecord, ScenarioReport, ScenarioSpec, fixture, run,
};

fn spec_of(name: &str) -> ScenarioSpec {
    ScenarioSpec::from_json(fixture(name).unwrap().json).unwrap()
}

fn run_spec(spec: &ScenarioSpec) -> ScenarioReport {
    let mut config = RunConfig::for_spec(spec);
    config.keep_bodies = true;
    run(spec, &config, &PriceTable::builtin()).unwrap()
}

fn run_fixture(name: &str) -> ScenarioReport {
    run_spec(&spec_of(name))
}

/// (read, written, uncached) of one request.
fn usage(record: &ScenarioRecord) -> (u64, u64, u64) {
    let u = &record.record.usage;
    (u.cache_read_input_tokens, u.cache_creation_input_tokens, u.input_tokens)
}

fn body(record: &ScenarioRecord) -> Value {
    serde_json::from_str(record.body.as_ref().unwrap()).unwrap()
}

fn tool_names(record: &ScenarioRecord) -> Vec<String> {
    body(record)["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

fn requests_of<'r>(report: &'r ScenarioReport, label: &str) -> Vec<&'r ScenarioRecord> {
    report.records.iter().filter(|r| r.agent.starts_with(&format!("{label} turn"))).collect()
}

#[test]
fn a_sync_agent_inside_the_ttl_leaves_the_parent_its_cache() {
    let report = run_fixture("launch-sync");
    let all: Vec<_> = report.records.iter().map(usage).collect();
    assert_eq!(
        all,
        [
            (0, 20_000, 0),    // the parent's call: everything written
            (0, 3_497, 0),     // the agent's first request, cold
            (3_497, 1_300, 0), // its second reads the first and writes the turn
            (20_000, 546, 0),  // the parent reads its history back (+ the call and the report)
        ]
    );
    // The report the parent gets is the agent's declared 500 tokens; the call is counted.
    let last = body(&report.records[3]);
    assert_eq!(last["messages"][2]["content"][0]["forkcache_tokens"], 500);
}

#[test]
fn a_sync_agent_longer_than_the_ttl_costs_the_parent_a_rewrite() {
    let past = run_fixture("launch-sync-past-ttl");
    let within = run_fixture("launch-sync");
    // The agent's tools take 400 s > 300 s: its second request and the parent's next one find
    // their entries expired and write everything again.
    assert_eq!(usage(&past.records[2]), (0, 4_797, 0)); // 3,497 + 1,300
    assert_eq!(usage(&past.records[3]), (0, 20_546, 0));
    for index in [2, 3] {
        assert_eq!(past.records[index].record.miss.as_ref().unwrap().cause, MissCause::Expired);
    }
    // What the wait costs, in thousandths of a token-equivalent (reads 0.1, writes 1.25):
    // parent: 20,000 × 1.25 − 20,000 × 0.1 = 23,000; agent: 4,797 × 1.25 − (3,497 × 0.1 +
    // 1,300 × 1.25) = 5,996.25 − 1,974.7 = 4,021.55. Together 27,021.55.
    let extra = past.totals.token_equivalents.0 - within.totals.token_equivalents.0;
    assert_eq!(extra, 27_021_550);
}

#[test]
fn a_background_agents_notification_lands_after_the_parents_last_marker() {
    let report = run_fixture("launch-background");
    let roles: Vec<_> = report.records.iter().map(|r| (r.role, r.agent.as_str())).collect();
    assert_eq!(
        roles,
        [
            (RequestRole::Parent, "parent 1 (calls general-purpose)"),
            (RequestRole::Named, "general-purpose 1 turn 1"),
            // The parent goes on before the agent's second request (1,800 ms < 2,270 ms).
            (RequestRole::Parent, "parent 2"),
            (RequestRole::Named, "general-purpose 1 turn 2"),
            (RequestRole::Parent, "parent 3"),
        ]
    );
    let second = body(&report.records[2]);
    assert_eq!(second["messages"][1]["content"][0]["input"]["run_in_background"], true);
    let receipt = second["messages"][2]["content"][0]["content"].as_str().unwrap();
    assert_eq!(receipt, "Async agent launched successfully. agentId: general-purpose 1");
    assert!(!report.records[2].body.as_ref().unwrap().contains("<task-notification>"));
    // The agent ended during the idle gap: its notification closes the user message that
    // answers parent 2's reply, after the tool results.
    let third = body(&report.records[4]);
    let messages = third["messages"].as_array().unwrap();
    let closing = messages.last().unwrap()["content"].as_array().unwrap();
    let text = closing.last().unwrap()["text"].as_str().unwrap();
    assert!(text.starts_with("<task-notification>\n<task-id>general-purpose 1</task-id>"), "{text}");
    // Everything parent 2 sent is read back: the notification comes after its marker.
    let parent2 = &report.records[2].record.usage;
    assert_eq!(report.records[4].record.usage.cache_read_input_tokens, parent2.total_input_tokens());
}

#[test]
fn a_remote_agent_shares_no_cache() {
    let report = run_fixture("launch-remote");
    let remote = &report.records[3];
    assert_eq!(remote.agent, "general-purpose 2 turn 1");
    assert_eq!(remote.record.workspace, "remote-workspace");
    // Same tools and instructions as agent 1, but another workspace: all 3,497 written.
    assert_eq!(usage(remote), (0, 3_497, 0));
    // Agent 3 sends what the remote one sent, locally: it reads agent 1's system marker
    // (tools 997 + instructions 1,500 = 2,497) and writes its prompt (1,000).
    let local = &report.records[6];
    assert_eq!(local.agent, "general-purpose 3 turn 1");
    assert_eq!(usage(local), (2_497, 1_000, 0));
}

#[test]
fn a_resumed_agent_reads_its_transcript_inside_the_ttl_and_rewrites_it_after() {
    let report = run_fixture("launch-resume");
    let agent = requests_of(&report, "general-purpose 1");
    assert_eq!(agent.len(), 3);
    // Resumed at once: its first request (3,497) is read; its report (500) and the new prompt
    // (200) are written.
    assert_eq!(usage(agent[1]), (3_497, 700, 0));
    // Resumed after 6 minutes: the transcript, both reports and both prompts are written again:
    // 3,497 + 500 + 200 + 500 + 200 = 4,897.
    assert_eq!(usage(agent[2]), (0, 4_897, 0));
    assert_eq!(agent[2].record.miss.as_ref().unwrap().cause, MissCause::Expired);
    let call = body(&report.records[4]);
    assert_eq!(call["messages"].as_array().unwrap().len(), 5);
    assert_eq!(body(agent[2])["messages"].as_array().unwrap().len(), 5);
}

#[test]
fn a_named_agent_in_a_worktree_gets_the_note_after_its_prompt() {
    let report = run_fixture("launch-worktree");
    let agent = body(&report.records[1]);
    let prompt = agent["messages"][0]["content"].as_array().unwrap();
    assert_eq!(prompt.len(), 2);
    assert!(prompt[1]["text"].as_str().unwrap().contains(".worktrees/agent-1"));
}

#[test]
fn every_agent_type_has_its_pool_model_and_max_turns() {
    let report = run_fixture("agent-types");
    let first = |label: &str| requests_of(&report, label)[0];
    // Layer 1 removes Agent and AskUserQuestion for every agent.
    let everything =
        ["Bash", "Edit", "Glob", "Grep", "Read", "WebFetch", "Write", "mcp__ide__getDiagnostics"];
    assert_eq!(tool_names(first("general-purpose 1")), everything);
    // Explore: seed 000's "Glob, Grep, Read, Bash", in the parent's order.
    assert_eq!(tool_names(first("explore 2")), ["Bash", "Glob", "Grep", "Read"]);
    // Plan: the tools marked read-only (seed 002: no Edit, Write, Agent).
    let read_only = ["Glob", "Grep", "Read", "WebFetch", "mcp__ide__getDiagnostics"];
    assert_eq!(tool_names(first("plan 3")), read_only);
    assert_eq!(tool_names(first("claude-code-guide 4")), ["Glob", "Grep", "Read", "WebFetch"]);
    assert_eq!(tool_names(first("statusline-setup 5")), ["Edit", "Read"]);
    // Verification's tools are configured: Read, Grep, Bash, AskUserQuestion; layer 1 drops the
    // last; the parent's order stays.
    assert_eq!(tool_names(first("verification 6")), ["Bash", "Grep", "Read"]);
    // The custom agent's front matter lists Read, Grep, Glob, Bash.
    assert_eq!(tool_names(first("code-reviewer 7")), ["Bash", "Glob", "Grep", "Read"]);
    // Layer 3: in the background the tool that is not async-safe goes.
    assert_eq!(tool_names(first("general-purpose 8")), everything[..7]);
    // Models: Explore's own, the custom agent's alias `haiku`, the rest inherit.
    let model = |label: &str| first(label).record.model.clone();
    assert_eq!(model("explore 2"), "claude-haiku-4-5");
    assert_eq!(model("code-reviewer 7"), "claude-haiku-4-5");
    assert_eq!(model("plan 3"), "claude-sonnet-4-6");
    assert_eq!(model("verification 6"), "claude-sonnet-4-6");
    // Max turns: statusline-setup asked for 12 and stops at 10; verification 25 → 20.
    assert_eq!(requests_of(&report, "statusline-setup 5").len(), 10);
    assert_eq!(requests_of(&report, "verification 6").len(), 20);
    assert_eq!(requests_of(&report, "general-purpose 1").len(), 2);
    // The custom agent's system prompt is its file's body.
    let system = body(first("code-reviewer 7"))["system"][0]["text"].as_str().unwrap().to_string();
    assert!(system.starts_with("You are a senior code reviewer."), "{system}");
}

#[test]
fn the_fixtures_custom_agent_is_the_file_in_fixtures_agents() {
    let file = include_str!("../../fixtures/agents/code-reviewer.md");
    let spec = spec_of("agent-types");
    let inline = spec.timeline.iter().find_map(|event| match event {
        forkcache_scenario::EventSpec::Named(named) => named.definition.clone(),
        _ => None,
    });
    assert_eq!(inline.as_deref(), Some(file));
    let definition = AgentDefinition::from_markdown(file).unwrap();
    assert_eq!((definition.name.as_str(), definition.model.as_deref()), ("code-reviewer", Some("haiku")));
}

#[test]
fn the_teaching_sub_agent_has_a_fresh_context_no_task_tool_and_thirty_rounds() {
    let report = run_fixture("teaching-subagent");
    let first = requests_of(&report, "task 1");
    let second = requests_of(&report, "task 2");
    // Asked for 3 and 40 rounds: the loop stops at 30.
    assert_eq!((first.len(), second.len()), (3, 30));
    let child = body(first[0]);
    // The seed's child "has bash/read/write/edit/glob, but no task": no todo_write either.
    assert_eq!(tool_names(first[0]), ["bash", "read_file", "write_file", "edit_file", "glob"]);
    assert_eq!(child["messages"].as_array().unwrap().len(), 1);
    assert_eq!(child["max_tokens"], 8_000);
    assert!(!first[0].body.as_ref().unwrap().contains("cache_control"));
    // No markers: every round pays its whole input. Tools 600 + 400 + 400 + 500 + 300 = 2,200,
    // + hidden 497 + system 40 + task 100 = 2,837; each round adds 1,300.
    let sizes: Vec<_> = first.iter().map(|r| usage(r)).collect();
    assert_eq!(sizes, [(0, 0, 2_837), (0, 0, 4_137), (0, 0, 5_437)]);
    // The parent gets only the final text (300 declared).
    let parent = body(&report.records[4]);
    assert_eq!(parent["messages"][2]["content"][0]["forkcache_tokens"], 300);
    assert_eq!(report.records[4].record.usage.cache_read_input_tokens, 20_997);
}

#[test]
fn what_the_teaching_sub_agent_shares_with_the_parent_is_the_tools_before_task() {
    // Under the idealised longest-prefix cache the child reads the five tool definitions it
    // shares with the parent (600 + 400 + 400 + 500 + 300 = 2,200) and nothing after: its
    // hidden tool prompt follows five tools, where the parent has todo_write and task.
    let mut spec = spec_of("teaching-subagent");
    spec.policy = Policy::LongestPrefix;
    let report = run_spec(&spec);
    let first = requests_of(&report, "task 1");
    assert_eq!(first[0].record.usage.cache_read_input_tokens, 2_200);
    // A fork of the same parent would read all 20,997 tokens of its last request.
    let parent = &report.records[0].record.usage;
    assert_eq!(parent.total_input_tokens(), 20_997);
}

fn spec_error(text: &str) -> String {
    ScenarioSpec::from_json(text).unwrap_err().to_string()
}

#[test]
fn bad_runtime_events_name_the_field() {
    let cases = [
        (
            r#"{"timeline": [{"named": {"agent": "custom"}}]}"#,
            "timeline[0].named.definition: a custom agent needs",
        ),
        (
            r#"{"timeline": [{"named": {"agent": "custom", "definition": "---\nname: x\n---\n"}}]}"#,
            "timeline[0].named.definition: description: required",
        ),
        (
            r#"{"timeline": [{"named": {"agent": "explore", "tools": ["Read"]}}]}"#,
            "timeline[0].named.tools: only verification and custom agents",
        ),
        (
            r#"{"timeline": [{"named": {"agent": "plan"}}, {"resume": {"named": 2}}]}"#,
            "timeline[1].resume.named: expected a `named` event before this one, 1 to 1, got 2",
        ),
        (r#"{"timeline": [{"task": {"rounds": 0}}]}"#, "timeline[0].task.rounds: expected at least 1"),
        (r#"{"timeline": [{"team": {"size": 65}}]}"#, "timeline[0].team.size: expected 1 to 64, got 65"),
        (
            r#"{"timeline": [{"team": {"message_tokens": 2000000}}]}"#,
            "timeline[0].team.message_tokens: expected at most 1000000 tokens",
        ),
        (
            r#"{"timeline": [{"named": {"agent": "plan", "prompt_tokens": 2000000}}]}"#,
            "timeline[0].named.prompt_tokens: expected at most 1000000 tokens, got 2000000",
        ),
        (
            r#"{"timeline": [{"named": {"agent": "plan", "memory": {"tokens": 5000000}}}]}"#,
            "timeline[0].named.memory.tokens: expected at most 1000000 tokens",
        ),
        (
            r#"{"timeline": [{"named": {"agent": "plan", "launch": "detached"}}]}"#,
            "timeline[0].named.launch: unknown value `detached`; expected one of `sync`, `background`, `remote`",
        ),
    ];
    for (text, expected) in cases {
        let error = spec_error(text);
        assert!(error.starts_with(expected), "{error}\nexpected: {expected}");
    }
}

#[test]
fn a_memory_refresh_costs_least_after_the_agents_system_marker() {
    // The agent: tools 997, instructions 1,500, memory 2,000, task 1,000 = 5,497 tokens; its
    // system marker sits on system[0]. The second run follows a memory refresh.
    let second_run = |position: &str| {
        let report = run_fixture(&format!("agent-memory-{position}"));
        let first = requests_of(&report, "general-purpose 1")[0];
        assert_eq!(usage(first), (0, 5_497, 0), "{position}");
        usage(requests_of(&report, "general-purpose 2")[0])
    };
    // Memory first: the marker is on the memory block itself, so nothing is left to read.
    assert_eq!(second_run("system-start"), (0, 5_497, 0));
    // Memory after the instructions (last system block or first message): tools 997 +
    // instructions 1,500 = 2,497 read; memory 2,000 + task 1,000 written.
    assert_eq!(second_run("system-end"), (2_497, 3_000, 0));
    assert_eq!(second_run("first-message"), (2_497, 3_000, 0));
    // Without the refresh the second run reads all 5,497: the refresh's price is the memory
    // and what follows it, written instead of read.
    let mut unrefreshed = spec_of("agent-memory-system-start");
    unrefreshed.timeline.remove(1);
    let report = run_spec(&unrefreshed);
    assert_eq!(usage(requests_of(&report, "general-purpose 2")[0]), (5_497, 0, 0));
    let report = run_fixture("agent-memory-system-end");
    let memory =
        body(requests_of(&report, "general-purpose 2")[0])["system"][1]["text"].as_str().unwrap().to_string();
    assert!(memory.contains(".claude/agent-memory/general-purpose/MEMORY.md, snapshot 2"), "{memory}");
}

/// Team fixtures: tools 2,000 + system 3,000 + history 15,000 for the leader; a teammate adds
/// its addendum (500) and task (1,000) to the leader's system prompt and tools: 6,500.
/// Notifications 200, messages 300, the leader's replies 100, a teammate's summary 300, its
/// permission-asking reply 300 (text 200 + tool_use 100).
///
/// Permissions (seed 002: "Permissions routed through leader's UI … Leader polls every 500ms,
/// shows UI dialog") cost the leader no model turn and put nothing in its conversation.
/// Bill (Sonnet 4.6: reads 0.1×, 5-minute writes 1.25×, output not billed):
///   parent 1   20,000 × 1.25                          = 25,000
///   turn 1 ×2  (5,000 × 0.1 + 1,500 × 1.25) × 2         =  4,750
///   turn 2 ×2  (6,500 × 0.1 +   335 × 1.25) × 2         =  2,137.5
///   parent 2   20,000 × 0.1 + 466 × 1.25                =  2,582.5
///   turn 3 ×2  (6,835 × 0.1 +   600 × 1.25) × 2         =  2,867
///   parent 3   20,466 × 0.1 + 500 × 1.25                =  2,671.6
///   total      9 requests                               = 40,008.6
/// (With the permission turn the leader paid parent 2 = 20,000 × 0.1 + 266 × 1.25 as well, and
/// every later leader request read 266 more: 10 requests, 42,442.9.)
#[test]
fn a_team_shares_the_leaders_system_prefix_and_grows_the_leaders_context() {
    let report = run_fixture("team");
    let rows: Vec<_> =
        report.records.iter().map(|r| (r.record.at.ms(), r.agent.as_str(), usage(r))).collect();
    // Latency: ttft = 400 ms + 20 µs per uncached token, rounded up; no output is billed.
    assert_eq!(
        rows,
        [
            // The leader creates the team: 20,000 written; done at 400 + 400 = 800 ms.
            (0, "parent 1 (calls TeamCreate)", (0, 20_000, 0)),
            // tmux's 200 ms start: both teammates at 1,000 ms, each reading the leader's system
            // prefix (5,000) and writing its addendum and task (1,500).
            (1_000, "teammate-1@parser turn 1", (5_000, 1_500, 0)),
            (1_000, "teammate-2@parser turn 1", (5_000, 1_500, 0)),
            // Their permission requests arrive at 1,000 + 430 = 1,430; the leader's UI polls at
            // 1,500 and grants both in its dialog (no leader request). The tool runs (1 s): at
            // 2,500, 6,500 read, the call (300) and its result (35, counted from its bytes)
            // written.
            (2_500, "teammate-1@parser turn 2", (6_500, 335, 0)),
            (2_500, "teammate-2@parser turn 2", (6_500, 335, 0)),
            // Both go idle at 2,500 + 400 + 7 = 2,907; the leader polls at 3,000 and reads both
            // notifications (2 × 200) after the TeamCreate call and result (66, counted).
            (3_000, "parent 2 (lead reads mail)", (20_000, 466, 0)),
            // The next message 10 s after the leader's answer (3,000 + 410): inside the TTL,
            // the summary (300) and the message (300) are all that is written.
            (13_410, "teammate-1@parser turn 3", (6_835, 600, 0)),
            (13_410, "teammate-2@parser turn 3", (6_835, 600, 0)),
            // The last notifications reach the leader on its next turn: reply 100 + 2 × 200.
            (13_822, "parent 3", (20_466, 500, 0)),
        ]
    );
    let te = report.totals.token_equivalents.value();
    assert!((te - 40_008.6).abs() < 0.05, "{te}");
    // No leader body holds a permission request: the UI answered them.
    for record in report.records.iter().filter(|r| r.role == RequestRole::Parent) {
        assert!(!record.body.as_deref().unwrap().contains("permission"), "{}", record.agent);
    }
    let teammate = body(&report.records[6]);
    let system = teammate["system"].as_array().unwrap();
    assert!(system[2]["text"].as_str().unwrap().contains("teammate-1@parser"));
    let messages = teammate["messages"].as_array().unwrap();
    // The grant is the waiting tool's result; the leader's id is seed 002's
    // formatAgentId("lead", teamName).
    assert_eq!(messages[2]["content"][0]["content"], "Permission granted by lead@parser.");
    let mail = messages.last().unwrap()["content"][0]["text"].as_str().unwrap();
    assert!(mail.starts_with("<teammate-message teammate_id=\"lead@parser\">"), "{mail}");
}

#[test]
fn a_teammate_woken_after_its_ttl_pays_its_whole_context_again() {
    let report = run_fixture("team-idle-past-ttl");
    // Woken 6 minutes after the leader's answer: 6,835 + 300 + 300 = 7,435 written.
    for index in [6, 7] {
        assert_eq!(usage(&report.records[index]), (0, 7_435, 0));
        assert_eq!(report.records[index].record.miss.as_ref().unwrap().cause, MissCause::Expired);
    }
    // The leader waited as long: 20,466 + 500 written.
    assert_eq!(usage(&report.records[8]), (0, 20_966, 0));
}

#[test]
fn five_ways_to_delegate_one_unit_of_work() {
    use forkcache_scenario::{WAYS, Way, baseline_spec, delegation_spec};
    // The default agent: tools 12,000 + hidden 497, system 8,000; a 10,000-token history.
    let delegate = |way| {
        let report = run_spec(&delegation_spec(way, 10_000, 1_000));
        let rows: Vec<_> =
            report.records.iter().filter(|r| r.role != RequestRole::Parent).map(usage).collect();
        (rows, report.totals_of(|r| r.role != RequestRole::Parent).token_equivalents.0)
    };
    // The named agent: tools without Agent (9,000 + 497), its instructions (1,500), the
    // conventions and git status it keeps (2,000 + 1,000), the task (1,000) = 14,997; each later
    // request adds 1,300.
    let (named, cost) = delegate(Way::Named);
    assert_eq!(named, [(0, 14_997, 0), (14_997, 1_300, 0), (16_297, 1_300, 0)]);
    // 14,997 × 1.25 + 14,997 × 0.1 + 1,300 × 1.25 + 16,297 × 0.1 + 1,300 × 1.25
    // = 18,746.25 + 1,499.7 + 1,625 + 1,629.7 + 1,625 = 25,125.65 token-equivalents.
    assert_eq!(cost, 25_125_650);
    // The background agent sends the same bytes.
    assert_eq!(delegate(Way::Background).0, named);
    // The fork reads everything the parent sent (30,497 + the turn's 1,300) on its first request.
    assert_eq!(delegate(Way::Fork).0[0].0, 31_797);
    // The teammate reads the parent's tools and system (12,497 + 8,000 = 20,497).
    assert_eq!(delegate(Way::Teammate).0[0].0, 20_497);
    // The s06 sub-agent marks nothing: every token of its three requests is uncached.
    assert!(delegate(Way::Subagent).0.iter().all(|&(read, written, _)| read == 0 && written == 0));
    // Every way adds to the baseline session (which leaves the delegation out).
    let baseline = run_spec(&baseline_spec(10_000)).totals.token_equivalents.0;
    for way in WAYS {
        assert!(
            run_spec(&delegation_spec(way, 10_000, 1_000)).totals.token_equivalents.0 > baseline,
            "{way:?}"
        );
    }
}

mod properties {
    //! The scenario invariants for the runtimes' events, over generated timelines with filler
    //! text (so bytes stand for tokens): a run repeats byte for byte, and its requests priced
    //! from their full bodies give exactly the records of the shared-block path.
    //! `FORKCACHE_SLOW=1` runs many more cases.

    use super::*;
    use forkcache_engine::endpoint::{Call, MockEndpoint};
    use forkcache_scenario::agent::{MemoryPosition, MemoryScope, NamedAgent};
    use forkcache_scenario::{
        ContentMode, EventSpec, GenerateSpec, IdleSpec, MemoryRefreshSpec, MemorySpec, NamedLaunch,
        NamedSpec, ResumeSpec, TaskSpec, TeamSpec, TurnSpec,
    };
    use forkcache_wire::Betas;
    use forkcache_wire::Reply;
    use proptest::prelude::*;

    fn config() -> ProptestConfig {
        let slow = std::env::var_os("FORKCACHE_SLOW").is_some();
        ProptestConfig { cases: if slow { 256 } else { 12 }, ..ProptestConfig::default() }
    }

    fn named(agent: NamedAgent, launch: NamedLaunch, memory: Option<MemorySpec>) -> EventSpec {
        EventSpec::Named(NamedSpec {
            agent,
            prompt: "Look into it.".into(),
            turns: 2,
            launch,
            memory,
            ..NamedSpec::default()
        })
    }

    fn event(kind: u8, gap_ms: u64, named_so_far: &mut usize) -> EventSpec {
        let memory = MemorySpec {
            scope: MemoryScope::Project,
            position: MemoryPosition::SystemEnd,
            tokens: None,
            template: "{path} #{snapshot}".into(),
        };
        let (event, is_named) = match kind {
            0 => (named(NamedAgent::GeneralPurpose, NamedLaunch::Sync, Some(memory)), true),
            1 => (named(NamedAgent::Explore, NamedLaunch::Background, None), true),
            2 => (named(NamedAgent::Plan, NamedLaunch::Remote, None), true),
            3 if *named_so_far > 0 => (
                EventSpec::Resume(ResumeSpec {
                    named: 1,
                    prompt: "Go on.".into(),
                    prompt_tokens: None,
                    turns: 1,
                    result_tokens: 100,
                }),
                false,
            ),
            4 => (EventSpec::Task(TaskSpec { rounds: 2, ..TaskSpec::default() }), false),
            5 => (EventSpec::Team(TeamSpec { idle_gap_ms: gap_ms, ..TeamSpec::default() }), false),
            6 => (
                EventSpec::MemoryRefresh(MemoryRefreshSpec {
                    agent: "general-purpose".into(),
                    scope: MemoryScope::Project,
                }),
                false,
            ),
            7 => (EventSpec::Idle(IdleSpec { ms: gap_ms }), false),
            _ => (EventSpec::Turn(TurnSpec::default()), false),
        };
        *named_so_far += usize::from(is_named);
        event
    }

    fn spec(seed: u64, kinds: &[u8], gap_ms: u64) -> ScenarioSpec {
        let mut spec = ScenarioSpec { name: "runtimes-property".into(), seed, ..Default::default() };
        spec.history.generate =
            Some(GenerateSpec { turns: 3, content: ContentMode::Filler, ..Default::default() });
        let mut named_so_far = 0;
        spec.timeline = std::iter::once(EventSpec::Turn(TurnSpec::default()))
            .chain(kinds.iter().map(|&kind| event(kind, gap_ms, &mut named_so_far)))
            .chain(std::iter::once(EventSpec::Turn(TurnSpec::default())))
            .collect();
        spec
    }

    fn bodies(report: &ScenarioReport) -> Vec<String> {
        report.records.iter().map(|r| r.body.clone().unwrap()).collect()
    }

    proptest! {
        #![proptest_config(config())]

        #[test]
        fn runtime_events_repeat_and_price_like_their_bytes(
            seed in any::<u64>(),
            kinds in proptest::collection::vec(0u8..9, 1..6),
            gap_ms in 0u64..400_000,
        ) {
            let spec = spec(seed, &kinds, gap_ms);
            let json = serde_json::to_string(&spec).unwrap();
            let (a, b) = (run_spec(&spec), run_spec(&spec));
            prop_assert_eq!(a.to_json(), b.to_json(), "{}", json);
            prop_assert_eq!(bodies(&a), bodies(&b), "{}", json);
            let config = RunConfig::for_spec(&spec);
            let mut endpoint = MockEndpoint::new(config.endpoint, PriceTable::builtin()).unwrap();
            for record in &a.records {
                let reply = Reply { output_tokens: Some(record.record.usage.output_tokens), ..Reply::input_only() };
                let workspace = Some(record.record.workspace.as_str()).filter(|w| *w != "default");
                let body = record.body.as_ref().unwrap();
                let call =
                    Call {
                        body: body.as_bytes(),
                        api_key: None,
                        workspace,
                        betas: Betas::NONE,
                        at: record.record.at,
                        first_byte: None,
                        reply,
                        checked: None,
                    };
                let wire = endpoint.handle(call).unwrap().record;
                prop_assert_eq!(&wire, &record.record, "request {} ({}) of {}", record.index, record.agent, json);
            }
        }
    }
}

#[test]
fn run_reads_a_custom_agents_file_next_to_the_scenario() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("custom-agent-file");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join(".claude/agents")).unwrap();
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/agents/code-reviewer.md"),
        dir.join(".claude/agents/code-reviewer.md"),
    )
    .unwrap();
    let scenario = |file: &str| {
        format!(
            r#"{{"timeline": [{{"named": {{"agent": "custom", "definition_file": "{file}", "prompt": "Review the diff.", "turns": 1}}}}]}}"#
        )
    };
    let run_cli = |name: &str, file: &str| {
        let path = dir.join(name);
        std::fs::write(&path, scenario(file)).unwrap();
        std::process::Command::new(env!("CARGO_BIN_EXE_forkcache"))
            .args(["run", path.to_str().unwrap(), "--json"])
            .output()
            .unwrap()
    };
    let out = run_cli("ok.json", ".claude/agents/code-reviewer.md");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let agent = &json["requests"][1];
    assert_eq!(
        (agent["agent"].as_str(), agent["model"].as_str()),
        (Some("code-reviewer 1 turn 1"), Some("claude-haiku-4-5"))
    );
    // A missing file is an error naming the event's field and the file.
    let out = run_cli("missing.json", ".claude/agents/nobody.md");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("timeline[0].named.definition_file: cannot read .claude/agents/nobody.md"),
        "{stderr}"
    );
    // Read through the library without loading the file first: an error, not a stand-in agent.
    let mut spec = ScenarioSpec::from_json(&scenario("x.md")).unwrap();
    assert!(run(&spec, &RunConfig::for_spec(&spec), &PriceTable::builtin()).is_err());
    spec.load_agent_files(&dir.join(".claude/agents")).unwrap_err();
}

/// The `tool_result` of the parent's Agent call `id` in the last parent body, and the
/// `<task-notification>` text naming it, if any.
fn agent_call_outcome(report: &ScenarioReport, id: &str) -> (String, Option<String>) {
    let last = report.records.iter().rev().find(|r| r.role == RequestRole::Parent).unwrap();
    let blocks: Vec<serde_json::Value> = body(last)["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_array().cloned())
        .flatten()
        .collect();
    let result = blocks.iter().find(|b| b["tool_use_id"] == id).unwrap()["content"].clone();
    let result = match result {
        serde_json::Value::String(text) => text,
        other => other.to_string(),
    };
    let tag = format!("<tool-use-id>{id}</tool-use-id>");
    let notice =
        blocks.iter().filter_map(|b| b["text"].as_str()).find(|t| t.contains(&tag)).map(String::from);
    (result, notice)
}

#[test]
fn with_forking_on_every_agent_spawn_is_asynchronous() {
    // Seed 000: "Enabling forks also changes the overall behavior of the Agent tool: all agent
    // spawns become asynchronous, using a unified task-notification interaction model."
    // `session` forks and calls explore synchronously (no `launch`).
    let spec = spec_of("session");
    let report = run_spec(&spec);
    let (result, notice) = agent_call_outcome(&report, "toolu_named1");
    assert_eq!(result, "Async agent launched successfully. agentId: explore 1");
    let notice = notice.expect("the report arrives as a notification");
    assert!(notice.contains("<result>[explore 1 report: 500 tokens]</result>"), "{notice}");
    // The model asked for no background: the tool made it asynchronous.
    let calls = report.records.iter().rev().find(|r| r.role == RequestRole::Parent).unwrap();
    assert!(!calls.body.as_deref().unwrap().contains("run_in_background"));
    // Without forks the same call waits and its result is the report itself.
    let mut unforked = spec.clone();
    unforked.timeline.retain(|event| !matches!(event, forkcache_scenario::EventSpec::Fork(_)));
    let report = run_spec(&unforked);
    let (result, notice) = agent_call_outcome(&report, "toolu_named1");
    assert_eq!(result, "explore report");
    assert_eq!(notice, None);
}

/// `agent-types` with one custom agent, defined by `front_matter` (before the body).
fn custom_agent_run(front_matter: &str) -> ScenarioReport {
    let mut spec = spec_of("agent-types");
    let definition = format!("---\nname: checker\ndescription: Checks.\n{front_matter}---\nYou check.\n");
    spec.timeline = vec![
        serde_json::from_value(serde_json::json!({"named": {
            "agent": "custom", "prompt": "Check it.", "prompt_tokens": 100, "turns": 1,
            "result_tokens": 100, "definition": definition}}))
        .unwrap(),
        serde_json::from_value(serde_json::json!({"idle": {"ms": 60000}})).unwrap(),
        serde_json::from_value(serde_json::json!({"turn": {}})).unwrap(),
    ];
    run_spec(&spec)
}

#[test]
fn custom_agent_settings_that_change_the_bytes() {
    // Seed 004: a definition carries "tool allowlists or deny lists", a "background preference"
    // and an "isolation mode"; each changes what is sent.
    let plain = custom_agent_run("tools: Read, Grep, Glob, Bash\n");
    assert_eq!(tool_names(requests_of(&plain, "checker 1")[0]), ["Bash", "Glob", "Grep", "Read"]);
    // disallowedTools removes from the pool after `tools`.
    let denied = custom_agent_run("tools: Read, Grep, Glob, Bash\ndisallowedTools: Bash, Grep\n");
    assert_eq!(tool_names(requests_of(&denied, "checker 1")[0]), ["Glob", "Read"]);
    // background: true — the parent's call returns the launch receipt, the report comes as a
    // notification, and tools not async-safe go (AskUserQuestion, mcp__ide__getDiagnostics
    // in this fixture).
    let background = custom_agent_run("tools: Read, AskUserQuestion\nbackground: true\n");
    assert_eq!(tool_names(requests_of(&background, "checker 1")[0]), ["Read"]);
    let (result, notice) = agent_call_outcome(&background, "toolu_named1");
    assert_eq!(result, "Async agent launched successfully. agentId: checker 1");
    assert!(notice.is_some());
    let (result, notice) = agent_call_outcome(&custom_agent_run("tools: Read\n"), "toolu_named1");
    assert_eq!((result.as_str(), notice), ("checker report", None));
    // isolation: worktree — the worktree note follows its prompt.
    let worktree = custom_agent_run("isolation: worktree\n");
    let prompt = body(requests_of(&worktree, "checker 1")[0])["messages"][0]["content"].clone();
    assert_eq!(prompt.as_array().unwrap().len(), 2);
    assert!(prompt[1]["text"].as_str().unwrap().contains(".worktrees/agent-1"), "{prompt}");
    // isolation: remote — another workspace: its first request reads nothing and the parent
    // gets a notification.
    let remote = custom_agent_run("isolation: remote\n");
    let (result, notice) = agent_call_outcome(&remote, "toolu_named1");
    assert!(result.starts_with("Async agent launched successfully."), "{result}");
    assert!(notice.is_some());
}
