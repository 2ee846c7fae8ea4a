//! Property tests over generated histories (filler text, so bytes stand for tokens) and 1..=16
//! forks. A failing case prints the whole scenario as JSON: save it to a file and
//! `forkcache run` it. `FORKCACHE_SLOW=1` runs many more cases.

use proptest::prelude::*;

use forkcache_engine::billing::PriceTable;
use forkcache_engine::cache::Policy;
use forkcache_engine::verify::DivergenceCause;
use forkcache_scenario::agent::{ForkVariant, directive_text};
use forkcache_scenario::{
    ContentMode, EventSpec, ForkSpec, GenerateSpec, Launch, RunConfig, ScenarioReport, ScenarioSpec,
    TurnSpec, run,
};

fn config() -> ProptestConfig {
    let slow = std::env::var_os("FORKCACHE_SLOW").is_some();
    ProptestConfig { cases: if slow { 256 } else { 12 }, ..ProptestConfig::default() }
}

fn directives(forks: u32, words: usize) -> Vec<String> {
    (0..forks).map(|i| format!("Task {i}: {}", "refactor the module ".repeat(words))).collect()
}

fn spec(seed: u64, turns: u32, forks: u32, variant: ForkVariant, words: usize) -> ScenarioSpec {
    let mut spec =
        ScenarioSpec { name: "property".into(), seed, policy: Policy::LongestPrefix, ..Default::default() };
    spec.history.generate = Some(GenerateSpec { turns, content: ContentMode::Filler, ..Default::default() });
    let fork = ForkSpec {
        directives: directives(forks, words),
        variant,
        launch: Launch::Staggered,
        ..Default::default()
    };
    spec.timeline = vec![EventSpec::Turn(TurnSpec::default()), EventSpec::Fork(fork)];
    spec
}

fn run_spec(spec: &ScenarioSpec, keep_bodies: bool) -> ScenarioReport {
    let mut config = RunConfig::for_spec(spec);
    config.keep_bodies = keep_bodies;
    run(spec, &config, &PriceTable::builtin()).unwrap()
}

fn json(spec: &ScenarioSpec) -> String {
    serde_json::to_string(spec).unwrap()
}

/// bytes4 of the directive block, computed here from its JSON.
fn directive_tokens(directive: &str) -> u64 {
    let block = serde_json::json!({"type": "text", "text": directive_text(directive)});
    (block.to_string().len() as u64).div_ceil(4)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn all_tool_uses_siblings_differ_only_in_the_directive(seed in any::<u64>(), turns in 1u32..=20, forks in 1u32..=16, words in 1usize..=8) {
        let spec = spec(seed, turns, forks, ForkVariant::AllToolUses, words);
        let report = run_spec(&spec, false);
        let check = report.spawns[0].verification.clone().unwrap();
        prop_assert!(check.only_directive, "{}", json(&spec));
        prop_assert_eq!(check.extends_parent, Some(true), "{}", json(&spec));
        if forks >= 2 {
            let cause = check.first_divergence.as_ref().map(|d| d.cause);
            prop_assert_eq!(cause, Some(DivergenceCause::Directive), "{}", json(&spec));
        }
        // Whenever the request is at least 100 times the directive block, 99% of it is shared.
        let directive_bytes = directive_text(&spec_directive(&spec)).len() as u64;
        if check.longest_bytes >= 100 * directive_bytes {
            prop_assert!(check.identical_pct() >= 99.0, "{:.3}% {}", check.identical_pct(), json(&spec));
        }
    }

    #[test]
    fn own_tool_use_siblings_diverge_at_the_assistant_message(seed in any::<u64>(), turns in 1u32..=20, forks in 2u32..=16) {
        let spec = spec(seed, turns, forks, ForkVariant::OwnToolUse, 2);
        let check = run_spec(&spec, false).spawns[0].verification.clone().unwrap();
        // History 2·turns + 1 messages, then the turn's reply and results: the spawning
        // assistant message is messages[2·turns + 3], and its first block is the fork's own call.
        let divergence = check.first_divergence.unwrap();
        prop_assert_eq!(divergence.path, format!("messages[{}].content[0].id", 2 * turns + 3), "{}", json(&spec));
        prop_assert_eq!(divergence.cause, DivergenceCause::ToolUse, "{}", json(&spec));
        prop_assert_eq!(check.extends_parent, Some(true), "{}", json(&spec));
    }

    #[test]
    fn staggered_forks_read_everything_but_their_directive(seed in any::<u64>(), turns in 1u32..=20, forks in 2u32..=16) {
        let spec = spec(seed, turns, forks, ForkVariant::AllToolUses, 3);
        let report = run_spec(&spec, false);
        let directives = directives(forks, 3);
        let fork_records: Vec<_> = report.records.iter().filter(|r| r.fork.is_some()).collect();
        for record in &fork_records[1..] {
            let usage = &record.record.usage;
            let unread = usage.total_input_tokens() - usage.cache_read_input_tokens;
            let own = directive_tokens(&directives[record.fork.unwrap()]);
            prop_assert_eq!(unread, own, "{} {}", record.agent, json(&spec));
        }
    }

    #[test]
    fn sharing_never_costs_more_than_naive_and_more_forks_send_more(seed in any::<u64>(), turns in 1u32..=12, forks in 1u32..=15) {
        let fewer = spec(seed, turns, forks, ForkVariant::AllToolUses, 2);
        let more = spec(seed, turns, forks + 1, ForkVariant::AllToolUses, 2);
        let (a, b) = (run_spec(&fewer, false), run_spec(&more, false));
        for (spec, report) in [(&fewer, &a), (&more, &b)] {
            prop_assert!(report.totals.cost_nanousd <= report.totals.naive_nanousd, "{}", json(spec));
        }
        prop_assert!(
            b.totals.usage.total_input_tokens() >= a.totals.usage.total_input_tokens(),
            "{}", json(&more)
        );
    }

    #[test]
    fn the_same_seed_gives_the_same_bytes(seed in any::<u64>(), turns in 1u32..=8, forks in 1u32..=6) {
        let spec = spec(seed, turns, forks, ForkVariant::AllToolUses, 1);
        let bodies = |r: ScenarioReport| r.records.into_iter().map(|r| r.body.unwrap()).collect::<Vec<_>>();
        prop_assert_eq!(bodies(run_spec(&spec, true)), bodies(run_spec(&spec, true)), "{}", json(&spec));
    }
}

fn spec_directive(spec: &ScenarioSpec) -> String {
    match &spec.timeline[1] {
        EventSpec::Fork(fork) => fork.directives[0].clone(),
        _ => unreachable!("the fork is the second event"),
    }
}
