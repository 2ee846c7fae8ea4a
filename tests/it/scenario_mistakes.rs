//! Every anti-pattern beside its correct twin: which requests miss, the cause the engine
//! reports, and what each costs. All numbers are hand arithmetic, in token-equivalents
//! (anthropic billing: reads 0.1×, 5-minute writes 1.25×, uncached 1×; output not billed).
//!
//! The shared base (`fixtures/scenarios/forks.json` and friends), Sonnet 4.6, `anthropic` policy:
//! - tools Agent 1,003 + Read 500 + the hidden tool prompt 497 = 2,000 (positions 0–2);
//! - system identity 1,000 + main 2,000, marked → T = 5,000 at position 4;
//! - history: user 10,000, assistant 1,000, user 4,000 → T = 20,000 at position 7 (marked).
//! - A spawn adds an assistant message with 2 Agent calls (2 × 100, one position), 2 placeholders
//!   (2 × 50, one position, marked) and a 100-token directive (marked): a fork is 20,400 tokens.
//! - A main-loop turn adds a 200-token text + a 100-token tool_use and a 1,000-token result
//!   (1,300 tokens, 3 positions).
//! - Time to first token = 400 ms + 20 µs per token not read.

use forkcache_engine::billing::PriceTable;
use forkcache_engine::cache::MissCause;
use forkcache_scenario::{MISTAKES, RunConfig, ScenarioReport, ScenarioSpec, fixture, run};

/// What one request should show: token-equivalents, and its miss (cause, path, tokens missed).
type Request = (f64, Option<(MissCause, &'static str, u64)>);

fn run_fixture(name: &str) -> ScenarioReport {
    let spec =
        ScenarioSpec::from_json(fixture(name).unwrap_or_else(|| panic!("no fixture {name}")).json).unwrap();
    run(&spec, &RunConfig::for_spec(&spec), &PriceTable::builtin()).unwrap()
}

/// Runs `name` and checks every request against `expected`, returning the total.
fn check(name: &str, expected: &[Request]) -> f64 {
    let report = run_fixture(name);
    let got: Vec<Request> = report
        .records
        .iter()
        .map(|r| {
            let miss = r.record.miss.as_ref().map(|m| (m.cause, leak(&m.path), m.tokens_missed));
            (r.record.token_equivalents.value(), miss)
        })
        .collect();
    assert_eq!(got, expected, "{name}");
    report.totals.token_equivalents.value()
}

fn leak(path: &str) -> &'static str {
    Box::leak(path.to_string().into_boxed_str())
}

/// The twin of the fork mistakes: parent 20,000 written (25,000); fork 1 reads 20,000 (2,000)
/// and writes 400 (500) = 2,500; fork 2 starts at fork 1's first token and reads its
/// placeholder entry, 20,300 (2,030), writing its 100-token directive (125) = 2,155.
const FORKS: [Request; 3] = [(25_000.0, None), (2_500.0, None), (2_155.0, None)];

#[test]
fn forks_twin() {
    assert_eq!(check("forks", &FORKS), 29_655.0);
}

#[test]
fn forks_filtering_the_agent_tool_share_nothing_with_the_parent() {
    // tools[0] is now Read: 500 + 497 + system 3,000 + history 15,000 + 400 = 19,397 tokens,
    // none shared. Fork 1 writes all of it: 19,397 × 1.25 = 24,246.25; the parent had cached
    // 20,000 past the change, the fork is 19,397 long → 19,397 missed. Fork 2 reads fork 1's
    // placeholder entry (19,297 × 0.1 = 1,929.7) + 125 = 2,054.7.
    let total = check(
        "mistake-fork-tools-filtered",
        &[
            (25_000.0, None),
            (24_246.25, Some((MissCause::PrefixChanged, "tools[0]", 19_397))),
            (2_054.7, None),
        ],
    );
    assert_eq!(total, 51_300.95);
    assert!(total > check("forks", &FORKS));
}

#[test]
fn forks_reordering_the_tools_share_nothing_with_the_parent() {
    // Same size as the parent's prefix but tools[0] differs: fork 1 writes 20,400 (25,500) and
    // misses the parent's 20,000; fork 2 as in the twin (2,155).
    let total = check(
        "mistake-fork-tools-reordered",
        &[
            (25_000.0, None),
            (25_500.0, Some((MissCause::PrefixChanged, "tools[0]", 20_000))),
            (2_155.0, None),
        ],
    );
    assert_eq!(total, 52_655.0);
    assert!(total > 29_655.0);
}

#[test]
fn forks_sending_real_results_diverge_from_each_other_at_the_results() {
    // Fork 1 as in the twin. Fork 2's results differ from fork 1's, so it reads only the
    // parent's 20,000 (2,000) and writes 400 (500); fork 1 had cached 20,400 past the
    // divergence at the result run → 400 missed.
    let total = check(
        "mistake-real-results",
        &[
            (25_000.0, None),
            (2_500.0, None),
            (2_500.0, Some((MissCause::PrefixChanged, "messages[4].content[0..2]", 400))),
        ],
    );
    assert_eq!(total, 30_000.0);
    assert!(total > 29_655.0);
}

#[test]
fn forks_launched_in_parallel_cannot_see_the_first_forks_writes() {
    // Both forks start at 800 ms; fork 1's entries become readable at its first token,
    // 800 + 400 + 400 × 0.02 = 1,208 ms. Fork 2 reads the parent's 20,000 and writes 400
    // (2,500); the placeholder entry (20,300) was there but not yet visible: 300 missed.
    let total = check(
        "mistake-parallel-launch",
        &[
            (25_000.0, None),
            (2_500.0, None),
            (2_500.0, Some((MissCause::NotYetVisible, "messages[4].content[0..2]", 300))),
        ],
    );
    assert_eq!(total, 30_000.0);
    assert!(total > 29_655.0);
}

#[test]
fn forks_setting_max_tokens_change_the_thinking_config() {
    // Twin: the parent thinks (budget 16,000); forks inherit it → the same numbers as `forks`.
    assert_eq!(check("forks-thinking", &FORKS), 29_655.0);
    // max_tokens 8,000 clamps the budget to 7,999: the config salt joining before the first
    // message differs, so fork 1 reads only the system entry, 5,000 (500), and writes
    // 15,400 (19,250) = 19,750, missing 15,000 of the parent's 20,000 — a config change at
    // `thinking`. Fork 2 has the same clamped config and reads fork 1's 20,300: 2,155.
    let total = check(
        "mistake-fork-max-output-tokens",
        &[
            (25_000.0, None),
            (19_750.0, Some((MissCause::PrefixChanged, "thinking", 15_000))),
            (2_155.0, None),
        ],
    );
    assert_eq!(total, 46_905.0);
    assert!(total > 29_655.0);
}

#[test]
fn forks_with_a_fresh_replacement_state_stub_out_what_the_parent_kept() {
    // Twin: the history ends in a 4,000-token tool result the parent kept; forks clone that
    // decision → the same numbers as `forks`.
    assert_eq!(check("forks-replacement", &FORKS), 29_655.0);
    // A fresh state decides again at today's 20,000-token context (≥ 18,000) and stubs the
    // result (4,000 → 60): fork 1 = 20,000 − 3,940 + 400 = 16,460 tokens; it reads the system
    // entry 5,000 (500), writes 11,460 (14,325) = 14,825, missing the 11,000 it shared with
    // the parent (through messages[1]) — the parent had cached at messages[2], where it
    // diverges. Fork 2 reads fork 1's placeholder entry, 16,360 (1,636) + 125 = 1,761.
    let total = check(
        "mistake-fresh-replacement-state",
        &[
            (25_000.0, None),
            (14_825.0, Some((MissCause::PrefixChanged, "messages[2].content[0]", 11_000))),
            (1_761.0, None),
        ],
    );
    assert_eq!(total, 41_586.0);
    assert!(total > 29_655.0);
}

#[test]
fn forks_re_rendering_the_system_prompt_after_a_flag_flip() {
    // Twin: turn (25,000), then the flag flips, then the spawn from the snapshot without a new
    // parent request. A fork carries the turn's 1,300 tokens too: 21,300 + 400 = 21,700.
    // Fork 1 reads 20,000 (2,000), writes 1,700 (2,125) = 4,125; fork 2 reads 21,600 (2,160)
    // + 125 = 2,285.
    let twin = check("forks-after-flag-flip", &[(25_000.0, None), (4_125.0, None), (2_285.0, None)]);
    assert_eq!(twin, 31_410.0);
    // Re-rendered, system[1] says the flag flipped: fork 1 writes all 21,700 (27,125) and
    // misses the parent's 20,000. Fork 2 renders the same bytes and reads fork 1's 21,600.
    let total = check(
        "mistake-rerender-system-in-forks",
        &[
            (25_000.0, None),
            (27_125.0, Some((MissCause::PrefixChanged, "system[1]", 20_000))),
            (2_285.0, None),
        ],
    );
    assert_eq!(total, 54_410.0);
    assert!(total > twin);
}

/// Three main-loop turns done right: 20,000 written (25,000); then each reads the previous
/// request's end and writes its 1,300 new tokens (1,625): 2,000 + 1,625 and 2,130 + 1,625.
const MAIN_LOOP: [Request; 3] = [(25_000.0, None), (3_625.0, None), (3_755.0, None)];

#[test]
fn a_timestamp_in_the_system_prompt_rewrites_every_turn() {
    assert_eq!(check("main-loop", &MAIN_LOOP), 32_380.0);
    // system[1] changes every request: turns 2 and 3 read nothing and write 21,300 (26,625) and
    // 22,600 (28,250), missing what the turn before had cached (20,000, then 21,300).
    let total = check(
        "mistake-timestamp-in-system",
        &[
            (25_000.0, None),
            (26_625.0, Some((MissCause::PrefixChanged, "system[1]", 20_000))),
            (28_250.0, Some((MissCause::PrefixChanged, "system[1]", 21_300))),
        ],
    );
    assert_eq!(total, 79_875.0);
    assert!(total > 32_380.0);
}

#[test]
fn an_unstable_schema_key_order_rewrites_every_turn() {
    // The same arithmetic as the timestamp, at tools[0].
    let total = check(
        "mistake-unstable-schema-key-order",
        &[
            (25_000.0, None),
            (26_625.0, Some((MissCause::PrefixChanged, "tools[0]", 20_000))),
            (28_250.0, Some((MissCause::PrefixChanged, "tools[0]", 21_300))),
        ],
    );
    assert_eq!(total, 79_875.0);
    assert!(total > 32_380.0);
}

#[test]
fn a_sidecar_re_collecting_its_parameters_after_a_flag_flip() {
    // Twin: the prompt-suggestion sidecar runs at the turn's end (seed 000's stop hooks) = the
    // turn's request + its 300-token reply + the 1,000-token result of its call + a 100-token
    // prompt = 21,400: reads 20,000 (2,000), writes 1,400 (1,750) = 3,750.
    let twin = check("sidecar", &[(25_000.0, None), (3_750.0, None)]);
    // Re-collected, system[1] shows the flipped flag: it writes 21,400 (26,750).
    let total = check(
        "mistake-sidecar-recollects",
        &[(25_000.0, None), (26_750.0, Some((MissCause::PrefixChanged, "system[1]", 20_000)))],
    );
    assert_eq!((twin, total), (28_750.0, 51_750.0));
}

#[test]
fn a_breakpoint_on_the_varying_reminder() {
    // Twin: a 50-token reminder closes each request, uncached after the marker before it:
    // 25,000 + 50; 2,000 + 1,625 + 50; 2,130 + 1,625 + 50.
    let twin = check("reminder", &[(25_050.0, None), (3_675.0, None), (3_805.0, None)]);
    assert_eq!(twin, 32_530.0);
    // The marker on the reminder: turn 1 writes 20,050 (25,062.5); its entry ends in a reminder
    // no later request repeats, so turns 2 and 3 read only the system entry (5,000 → 500) and
    // write 16,350 (20,437.5) and 17,650 (22,062.5). What they shared with the turn before
    // (20,000 and 21,300) minus the 5,000 read was missed where that turn's reminder stood.
    let total = check(
        "mistake-breakpoint-on-varying-block",
        &[
            (25_062.5, None),
            (20_937.5, Some((MissCause::PrefixChanged, "messages[3].content[0]", 15_000))),
            (22_562.5, Some((MissCause::PrefixChanged, "messages[5].content[0]", 16_300))),
        ],
    );
    assert_eq!(total, 68_562.5);
    assert!(total > twin);
}

#[test]
fn an_idle_gap_past_the_ttl() {
    // Turn 1 starts at 0 and its entries expire at 300,000 ms (TTL from the request's start).
    // Within: turn 2 at 1,800 + 240,000 reads 20,000 → 3,625.
    let twin = check("idle-within-ttl", &[(25_000.0, None), (3_625.0, None)]);
    // Past: turn 2 at 301,800 writes 21,300 (26,625); the 20,000 entry had expired.
    let total = check(
        "mistake-idle-past-ttl",
        &[(25_000.0, None), (26_625.0, Some((MissCause::Expired, "messages[2].content[0]", 20_000)))],
    );
    assert_eq!((twin, total), (28_625.0, 51_625.0));
}

#[test]
fn more_than_20_blocks_in_one_turn() {
    // Turn 1's reply has 25 blocks: a 200-token text, then 12 tool_uses (100 each) alternating
    // with 12 notes (20 each) = 1,640 tokens in 25 positions; the 12 results (1,000 each) are
    // one position. Turn 2 = 20,000 + 1,640 + 12,000 = 33,640 tokens.
    // Twin: an extra marker 19 blocks past the previous one keeps position 7 in reach: reads
    // 20,000 (2,000), writes 13,640 (17,050) = 19,050.
    let twin = check("wide-turn", &[(25_000.0, None), (19_050.0, None)]);
    // Without it the last marker looks back 20 positions from 33 to 14: only the system marker
    // finds its own entry (5,000 → 500); 28,640 written (35,800) = 36,300. The entry at
    // position 7 was readable but out of reach: 15,000 missed.
    let total = check(
        "mistake-no-lookback-guard",
        &[
            (25_000.0, None),
            (36_300.0, Some((MissCause::LookbackExceeded, "messages[2].content[0]", 15_000))),
        ],
    );
    assert_eq!((twin, total), (44_050.0, 61_300.0));
}

#[test]
fn every_mistake_costs_more_than_its_twin_and_reports_a_miss() {
    for mistake in MISTAKES {
        let bad = run_fixture(mistake.mistake);
        let good = run_fixture(mistake.correct);
        assert!(bad.totals.cost_nanousd > good.totals.cost_nanousd, "{}", mistake.name);
        assert!(bad.totals.misses.values().sum::<u64>() > 0, "{}", mistake.name);
        assert_eq!(good.totals.misses.values().sum::<u64>(), 0, "{}", mistake.correct);
    }
}

/// Regression: a config change right at the earlier request's cached position went unreported.
///
/// Same as `mistake-fork-max-output-tokens` but with a one-block history: the parent's last
/// entry sits exactly on the first message position, where the clamped thinking salt makes the
/// fork diverge. The 15,000 history tokens are byte-identical; only the config salt changed, so
/// the parent's entry (5,000 system + 15,000 history = 20,000) was lost: 20,000 − 5,000 read =
/// 15,000 missed, cause `prefix_changed`, dimension config, at `thinking`.
#[test]
fn a_config_change_at_the_cached_position_is_a_miss() {
    let mut spec = ScenarioSpec::from_json(fixture("mistake-fork-max-output-tokens").unwrap().json).unwrap();
    spec.history.messages = Some(vec![serde_json::json!(
        {"role": "user", "content": [{"type": "text", "text": "h", "forkcache_tokens": 15000}]}
    )]);
    let report = run(&spec, &RunConfig::for_spec(&spec), &PriceTable::builtin()).unwrap();
    let fork1 = &report.records[1].record;
    // The costs are right: reads the 5,000-token system entry, writes 15,400.
    assert_eq!(fork1.token_equivalents.value(), 19_750.0);
    let miss = fork1.miss.as_ref().expect("the config change lost 15,000 cached tokens");
    assert_eq!(
        (miss.cause, miss.path.as_str(), miss.tokens_missed),
        (MissCause::PrefixChanged, "thinking", 15_000)
    );
}
