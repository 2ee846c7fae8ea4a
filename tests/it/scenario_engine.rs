//! The scenario engine's own guarantees: the pre-rendered path prices exactly like wire bytes,
//! runs repeat byte for byte, the recursion guard, spec errors that name the field, and what
//! verification finds for each fork variant.

use forkcache_engine::billing::PriceTable;
use forkcache_engine::endpoint::{Call, MockEndpoint};
use forkcache_engine::verify::DivergenceCause;
use forkcache_scenario::{FIXTURES, RunConfig, ScenarioReport, ScenarioSpec, fixture, run};
use forkcache_wire::{Betas, Reply};

fn spec_of(name: &str) -> ScenarioSpec {
    ScenarioSpec::from_json(fixture(name).unwrap().json).unwrap()
}

fn run_with(spec: &ScenarioSpec, keep_bodies: bool) -> ScenarioReport {
    let mut config = RunConfig::for_spec(spec);
    config.keep_bodies = keep_bodies;
    run(spec, &config, &PriceTable::builtin()).unwrap()
}

#[test]
fn views_over_shared_blocks_price_exactly_like_the_wire_bytes() {
    // Every request of every fixture, sent again as its full body through `handle` (which
    // parses the bytes and applies the API's checks) into a fresh endpoint at the same times,
    // gives the same record.
    for fixture in FIXTURES {
        let spec = ScenarioSpec::from_json(fixture.json).unwrap();
        let report = run_with(&spec, true);
        let config = RunConfig::for_spec(&spec);
        // With the API's own checks on: every body the engine writes is one the API accepts
        // (a sidecar's snapshot included, taken at the end of a turn).
        let mut endpoint = MockEndpoint::new(config.endpoint, PriceTable::builtin()).unwrap();
        for record in &report.records {
            let body = record.body.as_ref().unwrap();
            let reply =
                Reply { output_tokens: Some(record.record.usage.output_tokens), ..Reply::input_only() };
            // A remote agent's requests came from another workspace: send them in it.
            let workspace = Some(record.record.workspace.as_str()).filter(|w| *w != "default");
            let call = Call {
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
            assert_eq!(wire, record.record, "{} request {} ({})", fixture.name, record.index, record.agent);
        }
    }
}

#[test]
fn the_same_seed_gives_the_same_report_and_bytes() {
    for name in ["session", "recursion-guard"] {
        let spec = spec_of(name);
        let (a, b) = (run_with(&spec, true), run_with(&spec, true));
        assert_eq!(a.to_json(), b.to_json(), "{name}");
        let bodies =
            |r: &ScenarioReport| r.records.iter().map(|r| r.body.clone().unwrap()).collect::<Vec<_>>();
        assert_eq!(bodies(&a), bodies(&b), "{name}");
    }
    // Another seed draws another history.
    let mut other = spec_of("session");
    other.seed += 1;
    assert_ne!(run_with(&other, false).to_json(), run_with(&spec_of("session"), false).to_json());
}

#[test]
fn run_json_twice_from_the_command_line_is_identical() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/scenarios/session.json");
    let once = || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_forkcache"))
            .args(["run", path, "--json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    };
    let first = once();
    assert_eq!(first, once());
    let json: serde_json::Value = serde_json::from_slice(&first).unwrap();
    let roles: std::collections::BTreeSet<&str> =
        json["requests"].as_array().unwrap().iter().map(|r| r["role"].as_str().unwrap()).collect();
    // Every role appears in the session fixture.
    assert_eq!(roles.into_iter().collect::<Vec<_>>(), ["compaction", "fork", "named", "parent", "sidecar"]);
}

#[test]
fn a_fork_child_asking_to_fork_is_refused_and_compaction_blinds_only_the_tag_scan() {
    let report = run_with(&spec_of("recursion-guard"), false);
    let verdicts: Vec<(String, bool, bool, bool, bool)> = report
        .guard
        .iter()
        .map(|g| {
            (
                g.agent.clone(),
                g.compacted,
                g.verdict.by_query_source,
                g.verdict.by_tag_scan,
                g.verdict.refused(),
            )
        })
        .collect();
    assert_eq!(
        verdicts,
        [
            // The directive's <fork-boilerplate> is still in the history: both layers see it.
            ("fork 1.1".to_string(), false, true, true, true),
            ("fork 1.2".to_string(), false, true, true, true),
            // Compaction replaced the history with a summary: the tag scan alone would let the
            // child fork; query_source, set at spawn, still refuses.
            ("fork 2.1".to_string(), true, true, false, true),
            ("fork 2.2".to_string(), true, true, false, true),
        ]
    );
}

#[test]
fn compacted_siblings_summarise_their_own_work_and_miss_nothing() {
    let report = run_with(&spec_of("recursion-guard"), true);
    let turn_two: Vec<_> = report.records.iter().filter(|r| r.agent.ends_with("turn 2")).skip(2).collect();
    let (first, second) = (turn_two[0], turn_two[1]);
    assert_eq!((first.agent.as_str(), second.agent.as_str()), ("fork 2.1 turn 2", "fork 2.2 turn 2"));
    // Each compacted child's history is its own summary: the bytes differ from the first
    // message on (they summarise different directives), so the second cannot read the first's.
    let summary = |r: &forkcache_scenario::ScenarioRecord| {
        let body: serde_json::Value = serde_json::from_str(r.body.as_deref().unwrap()).unwrap();
        body["messages"][0]["content"][0]["text"].as_str().unwrap().to_string()
    };
    assert!(summary(first).contains("fork 2.1"), "{}", summary(first));
    assert!(summary(second).contains("fork 2.2"), "{}", summary(second));
    // Both are new content after a compaction: nothing that could have been read was missed,
    // so neither has a miss.
    for record in [first, second] {
        assert_eq!(record.record.miss, None, "{}", record.agent);
    }
}

#[test]
fn all_tool_uses_siblings_differ_only_in_the_directive() {
    let report = run_with(&spec_of("forks"), false);
    let check = report.spawns[0].verification.as_ref().unwrap();
    assert!(check.only_directive);
    assert_eq!(check.differing_blocks, ["messages[4].content[2]"]);
    let d = check.first_divergence.as_ref().unwrap();
    assert_eq!((d.path.as_str(), d.cause), ("messages[4].content[2].text", DivergenceCause::Directive));
    // The shared template comes first, so the divergence is inside the block, after
    // "…Your directive: ": both directives start differently ("Update" vs "Write").
    assert!(d.before.ends_with("Your directive: "), "{:?}", d.before);
    assert!(d.a.starts_with("Update the parser") && d.b.starts_with("Write the migration"));
}

#[test]
fn own_tool_use_siblings_diverge_at_the_assistant_message() {
    let report = run_with(&spec_of("forks-own-tool-use"), false);
    let check = report.spawns[0].verification.as_ref().unwrap();
    assert!(!check.only_directive);
    let d = check.first_divergence.as_ref().unwrap();
    // messages[3] is the spawning assistant message: each fork keeps its own tool_use, whose
    // ids differ first.
    assert_eq!((d.path.as_str(), d.cause), ("messages[3].content[0].id", DivergenceCause::ToolUse));
    // Fork 2 reads only the history: 20,000 of its 20,250 tokens. That is the layout, not an
    // edit: its own tool_use and what follows were never sent before, so nothing was missed.
    let fork2 = &report.records[2].record;
    assert_eq!(fork2.usage.cache_read_input_tokens, 20_000);
    assert_eq!(fork2.miss, None);
}

#[test]
fn the_worktree_note_follows_the_directive_and_leaves_the_prefix_alone() {
    // The session's first spawn runs in worktrees: the notes differ (each names its worktree)
    // but come after the directive.
    let report = run_with(&spec_of("session"), false);
    let check = report.spawns[0].verification.as_ref().unwrap();
    assert!(check.only_directive);
    assert_eq!(check.differing_blocks.len(), 2, "{:?}", check.differing_blocks);
    assert_eq!(check.first_divergence.as_ref().unwrap().cause, DivergenceCause::Directive);
}

fn spec_error(text: &str) -> String {
    ScenarioSpec::from_json(text).unwrap_err().to_string()
}

#[test]
fn bad_scenarios_name_the_field_and_what_was_expected() {
    let cases = [
        (r#"{"name": "x", "timelime": []}"#, "timelime"),
        (
            r#"{"timeline": [{"fork": {"count": 2, "launch": "paralel"}}]}"#,
            "timeline[0].fork.launch: unknown value `paralel`; did you mean `parallel`?",
        ),
        (r#"{"timeline": [{"jump": {}}]}"#, "timeline[0]: unknown value `jump`"),
        (
            r#"{"timeline": [{"fork": {}}]}"#,
            "timeline[0].fork: expected `directives` (a non-empty list) or `count` ≥ 1",
        ),
        (
            r#"{"history": {"generate": {"user_tokens": [9, 1]}}}"#,
            "history.generate.user_tokens: expected [min, max] with min ≤ max, got [9, 1]",
        ),
        (r#"{"seed": -1}"#, "seed: expected a whole number, e.g. 42; found the number -1"),
        (
            r#"{"knobs": {"breakpoint_on_varying_block": true}}"#,
            "knobs.breakpoint_on_varying_block: needs agent.reminder_tokens",
        ),
        // A struct may be written as an array in serde; not a scenario file.
        ("[]", "scenario: expected a JSON object"),
    ];
    for (text, expected) in cases {
        let message = spec_error(text);
        assert!(message.contains(expected), "{text}\n→ {message}");
    }
}

#[test]
fn bad_histories_and_models_are_errors_not_panics() {
    let run_text = |text: &str| {
        let spec = ScenarioSpec::from_json(text).unwrap();
        run(&spec, &RunConfig::for_spec(&spec), &PriceTable::builtin()).unwrap_err().to_string()
    };
    assert_eq!(
        run_text(
            r#"{"history": {"messages": [{"role": "assistant", "content": "hi"}]}, "timeline": [{"turn": {}}]}"#
        ),
        "history.messages: the last message must have role \"user\""
    );
    assert_eq!(
        run_text(
            r#"{"history": {"messages": [{"role": "user", "content": [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}]}]}}"#
        ),
        "history.messages[0].content[0].cache_control: not allowed: the agent places the markers"
    );
    assert_eq!(
        run_text(r#"{"model": "claude-opus-9"}"#),
        "model: \"claude-opus-9\" is not in the price table"
    );
    // A block the API would refuse is reported with the request that carried it.
    let rejected = run_text(
        r#"{"history": {"messages": [{"role": "user", "content": [{"type": "text", "text": ""}]}]}, "timeline": [{"turn": {}}]}"#,
    );
    assert!(rejected.starts_with("request 0 (parent 1) was rejected: "), "{rejected}");
}

#[test]
fn explain_shows_where_the_second_request_leaves_the_first() {
    // The parent's request and fork 1's, from `forks`: fork 1 extends the parent.
    let report = run_with(&spec_of("forks"), true);
    let bodies: Vec<&str> = report.records.iter().map(|r| r.body.as_deref().unwrap()).collect();
    let parent_vs_fork = forkcache_engine::verify::explain(bodies[0], bodies[1]).unwrap();
    assert_eq!(parent_vs_fork.divergence.as_ref().unwrap().cause, DivergenceCause::Extension);
    assert_eq!(parent_vs_fork.common_prefix_bytes, parent_vs_fork.a_bytes);
    let siblings = forkcache_engine::verify::explain(bodies[1], bodies[2]).unwrap();
    let text = siblings.to_text();
    assert!(text.contains("first divergence at byte"), "{text}");
    assert!(text.contains("messages[4].content[2].text (dimension messages, cause directive)"), "{text}");
}

#[test]
fn run_and_explain_on_the_command_line() {
    let dir = std::env::temp_dir().join(format!("forkcache-explain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let report = run_with(&spec_of("mistake-fork-tools-filtered"), true);
    let (a, b) = (dir.join("a.json"), dir.join("b.json"));
    std::fs::write(&a, report.records[0].body.as_ref().unwrap()).unwrap();
    std::fs::write(&b, report.records[1].body.as_ref().unwrap()).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_forkcache"))
        .arg("explain")
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success());
    assert!(text.contains("tools[0].name (dimension tools, cause tool_definition)"), "{text}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_forkcache"))
        .args(["run", "/nonexistent/scenario.json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("reading /nonexistent/scenario.json"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_readme_example_is_the_fixture_and_runs() {
    let readme = include_str!("../../docs/run.md");
    let fixture = fixture("readme-example").unwrap().json.trim_end();
    assert!(
        readme.contains(fixture),
        "docs/run.md's complete example differs from fixtures/scenarios/readme-example.json"
    );
    let report = run_with(&spec_of("readme-example"), false);
    assert!(report.totals.cost_nanousd < report.totals.naive_nanousd);
}

#[test]
fn runs_on_two_threads_match_a_run_on_one() {
    // The engine is single-threaded and keeps no global state: two runs at once on two
    // threads give the same bytes as one after the other.
    let prices = PriceTable::builtin();
    let serial: Vec<String> =
        forkcache_scenario::run_suite(&prices).unwrap().iter().map(|r| r.report.to_json()).collect();
    let threads: Vec<_> = (0..2)
        .map(|_| {
            std::thread::spawn(|| {
                let prices = PriceTable::builtin();
                forkcache_scenario::run_suite(&prices)
                    .unwrap()
                    .iter()
                    .map(|r| r.report.to_json())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for handle in threads {
        assert_eq!(handle.join().unwrap(), serial);
    }
}

#[test]
fn verification_over_shared_blocks_matches_verification_of_the_bytes() {
    // The engine checks siblings on borrowed blocks; the same check on their rendered bodies,
    // parsed back, must agree for every spawn of every fixture.
    for fixture in FIXTURES {
        let report = run_with(&ScenarioSpec::from_json(fixture.json).unwrap(), true);
        for spawn in &report.spawns {
            let bodies: Vec<String> = report
                .records
                .iter()
                .filter(|r| r.spawn == Some(spawn.spawn) && r.agent.ends_with("turn 1") && r.fork.is_some())
                .map(|r| r.body.clone().unwrap())
                .collect();
            let mut from_bytes = forkcache_engine::verify::check_sibling_bodies(&bodies, None).unwrap();
            let mut engine = spawn.verification.clone().unwrap();
            engine.extends_parent = None;
            from_bytes.extends_parent = None;
            assert_eq!(from_bytes, engine, "{} spawn {}", fixture.name, spawn.spawn);
        }
    }
}

#[test]
fn named_agents_run_on_their_own_model_and_share_nothing_with_the_parent() {
    let report = run_with(&spec_of("session"), false);
    let explore: Vec<_> = report.records.iter().filter(|r| r.agent.starts_with("explore")).collect();
    assert_eq!(explore.len(), 3);
    assert!(explore.iter().all(|r| r.record.model == "claude-haiku-4-5"));
    // Its first request reads nothing: its system prompt and tools are its own.
    assert_eq!(explore[0].record.usage.cache_read_input_tokens, 0);
    let plan: Vec<_> = report.records.iter().filter(|r| r.agent.starts_with("plan")).collect();
    assert!(plan.iter().all(|r| r.record.model == "claude-sonnet-4-6"));
}

#[test]
fn a_sidecar_is_a_strict_extension_of_the_last_main_loop_request() {
    let report = run_with(&spec_of("sidecar"), true);
    let parent = forkcache_engine::verify::cache_order(report.records[0].body.as_deref().unwrap()).unwrap();
    let sidecar = forkcache_engine::verify::cache_order(report.records[1].body.as_deref().unwrap()).unwrap();
    assert!(forkcache_engine::verify::strict_extension(&parent, &sidecar));
}

#[test]
fn compaction_reads_the_whole_cache_then_the_next_request_rewrites() {
    // The `main-loop` base with auto-compaction at 20,000 tokens and a 2,000-token summary.
    let mut spec = spec_of("main-loop");
    spec.agent.compaction_threshold_tokens = Some(20_000);
    spec.agent.summary_tokens = 2_000;
    spec.timeline = serde_json::from_str(r#"[{"turn": {}}, {"turn": {}}]"#).unwrap();
    let report = run_with(&spec, false);
    let rows: Vec<(&str, u64, u64)> = report
        .records
        .iter()
        .map(|r| {
            (
                r.role.name(),
                r.record.usage.cache_read_input_tokens,
                r.record.usage.cache_creation_input_tokens,
            )
        })
        .collect();
    // Parent 1 reaches 20,000 and writes it all. The summary request = that history + the
    // 1,300-token turn + the instruction: it reads the 20,000 parent 1 cached. The history is
    // then one 2,000-token summary: parent 2 = tools and system (5,000, read) + 2,000 written.
    assert_eq!(rows[0], ("parent", 0, 20_000));
    assert_eq!((rows[1].0, rows[1].1), ("compaction", 20_000));
    assert!(rows[1].2 > 1_300, "the compaction request writes the turn and its instruction");
    assert_eq!(rows[2], ("parent", 5_000, 2_000));
    assert_eq!(report.records[1].record.usage.output_tokens, 0, "bill_output is off in the base");
    assert_eq!(rows.len(), 3, "parent 2 (7,000 tokens) stays under the threshold");
}

/// Regression: a fork event's parent request is a main-loop turn, so the compaction threshold
/// applies to it; before, only `turn` events compacted and a fork-heavy session grew unbounded.
#[test]
fn a_spawning_turn_past_the_threshold_compacts() {
    // The history is one 30,000-token user message, on top of the default agent's tools and
    // system (about 20,000 tokens); the threshold is 40,000. The first spawning request carries
    // over 50,000 tokens, so compaction follows it — after the two forks, which start before it
    // (requests reach the endpoint in start order) — and the next spawn's parent request starts
    // from the 2,000-token summary instead of the 30,000-token history — 28,000 tokens lighter,
    // below the threshold: no second compaction. It also carries the two forks' notifications
    // (both ended before it): 2 × (50 declared + their 200-token reports) = 500, so the
    // difference is 28,000 − 500 = 27,500.
    let spec = ScenarioSpec::from_json(
        r#"{"name": "compacts", "history": {"messages": [{"role": "user", "content": [{"type": "text", "text": "h", "forkcache_tokens": 30000}]}]},
            "agent": {"compaction_threshold_tokens": 40000},
            "timeline": [{"fork": {"count": 2, "notification_tokens": 50}}, {"fork": {"count": 2}}]}"#,
    )
    .unwrap();
    let report = run_with(&spec, false);
    let roles: Vec<&str> = report.records.iter().map(|r| r.role.name()).collect();
    assert_eq!(roles, ["parent", "fork", "fork", "compaction", "parent", "fork", "fork"]);
    let parents: Vec<u64> = report
        .records
        .iter()
        .filter(|r| r.role.name() == "parent")
        .map(|r| r.record.usage.total_input_tokens())
        .collect();
    assert!(parents[0] > 50_000, "{parents:?}");
    assert_eq!(parents[0] - parents[1], 30_000 - 2_000 - 2 * (50 + 200));
    let starts: Vec<u64> = report.records.iter().map(|r| r.record.at.ms()).collect();
    assert!(starts.windows(2).all(|pair| pair[0] <= pair[1]), "start order: {starts:?}");
}

#[test]
fn run_json_gives_cost_usd_beside_nano_dollars() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_forkcache"))
        .args(["run", concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/scenarios/forks.json"), "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The parent writes 20,000 tokens at Sonnet 4.6's $3.75/MTok: 75,000,000 nano-dollars, $0.075.
    assert_eq!(report["requests"][0]["cost_nanousd"], 75_000_000);
    assert_eq!(report["requests"][0]["cost_usd"], 0.075);
    let totals = &report["totals"];
    assert_eq!(totals["cost_usd"].as_f64(), totals["cost_nanousd"].as_u64().map(|n| n as f64 / 1e9));
}

#[test]
fn a_named_agents_model_missing_from_the_price_table_is_listed_as_unpriced() {
    // The main model is checked up front (an unknown one is a spec error); a named agent's
    // model is only met when it runs: its requests cost nothing and the totals name it.
    let text = fixture("launch-sync").unwrap().json.replacen(
        r#""agent": "general-purpose","#,
        r#""agent": "general-purpose", "model": "claude-unlisted-9","#,
        1,
    );
    let spec = ScenarioSpec::from_json(&text).unwrap();
    let report = run_with(&spec, false);
    let unlisted: Vec<_> = report.records.iter().filter(|r| r.record.model == "claude-unlisted-9").collect();
    assert_eq!(unlisted.len(), 2, "the agent's two requests");
    assert!(unlisted.iter().all(|r| !r.record.priced && r.record.cost.total_nanousd() == 0));
    assert_eq!(report.totals.unpriced_models.iter().collect::<Vec<_>>(), ["claude-unlisted-9"]);
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    assert_eq!(json["totals"]["unpriced_models"], serde_json::json!(["claude-unlisted-9"]));
    assert!(report.to_table().contains("UNPRICED: claude-unlisted-9 not in the price table"));
    // A fully priced run keeps its shape.
    let priced: serde_json::Value =
        serde_json::from_str(&run_with(&spec_of("launch-sync"), false).to_json()).unwrap();
    assert!(priced["totals"].get("unpriced_models").is_none());
}

#[test]
fn run_render_config_ahead_moves_the_thinking_change_before_the_tools() {
    let fork_one = |flag: Option<&str>| {
        let fixture =
            concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/scenarios/mistake-fork-max-output-tokens.json");
        let mut args = vec!["run", fixture, "--json"];
        args.extend(flag);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_forkcache")).args(&args).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let usage = &report["requests"][1]["usage"];
        (usage["cache_read_input_tokens"].as_u64(), usage["cache_creation_input_tokens"].as_u64())
    };
    // The fork's clamped thinking budget differs from the parent's. Rendered after the tools
    // and system (the default), the fork still reads tools 1,503 + hidden 497 + system 3,000 =
    // 5,000 and writes the rest (20,400 − 5,000 = 15,400); rendered ahead of the tools, the
    // change comes first and nothing is read: 20,400 written.
    assert_eq!(fork_one(None), (Some(5_000), Some(15_400)));
    assert_eq!(fork_one(Some("--render-config-ahead")), (Some(0), Some(20_400)));
}

/// `forks.json` with `n` directives, in `variant`.
fn forks_with(n: usize, variant: &str) -> ScenarioSpec {
    let mut json: serde_json::Value = serde_json::from_str(fixture("forks").unwrap().json).unwrap();
    let fork = &mut json["timeline"][0]["fork"];
    fork["directives"] = (1..=n).map(|i| format!("Do part {i}.")).collect();
    fork["variant"] = variant.into();
    ScenarioSpec::from_json(&json.to_string()).unwrap()
}

/// The rendering work a run takes, counted (`ScenarioReport::work`): the guard against growth in
/// the work per request that a timing on a shared machine cannot see. By hand, from the request
/// layout (`run --bodies` shows it): the parent's request is 2 tools, 2 system blocks and 3
/// history messages of one block each, 7 blocks; it is rendered once and every fork reads it in
/// place, hashing only its own tail.
/// - `all-tool-uses`: a fork's tail is the parent's reply (`n` tool_use blocks) and a user message
///   of `n` placeholders and its directive: 2n + 1 blocks hashed per fork, 7 + n(2n + 1) in all.
///   Blocks looked up once each: the parent's 7, the `n` tool uses and `n` placeholders (shared
///   by every fork), and one directive per fork: 7 + 3n.
/// - `own-tool-use`: a fork's tail is its own tool_use, its placeholder and its directive: 3
///   blocks hashed and 3 looked up per fork, 7 + 3n of each.
///
/// Requests: the parent's and one per fork, 1 + n.
#[test]
fn the_work_per_request_is_counted_and_pinned() {
    let work = |n: usize, variant: &str| {
        let report = run_with(&forks_with(n, variant), false);
        let work = report.work;
        (report.totals.requests, work.blocks_hashed, work.blocks_looked_up, work.declined)
    };
    // n = 2: 7 + 2 × 5 = 17 hashed, 7 + 6 = 13 looked up; own: 7 + 6 = 13 and 13.
    assert_eq!(work(2, "all-tool-uses"), (3, 17, 13, 0));
    assert_eq!(work(2, "own-tool-use"), (3, 13, 13, 0));
    // n = 64, the sweep's largest: 7 + 64 × 129 = 8,263 hashed (the quadratic cost of every
    // fork carrying every tool_use), 7 + 192 = 199 looked up; own: 7 + 192 = 199 of each.
    assert_eq!(work(64, "all-tool-uses"), (65, 8_263, 199, 0));
    assert_eq!(work(64, "own-tool-use"), (65, 199, 199, 0));
}
