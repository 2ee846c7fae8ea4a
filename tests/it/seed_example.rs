//! The seed articles' worked example (DESIGN §2.5), replayed as raw-request traces with
//! declared-size blocks. Every expected number below is hand arithmetic, written out.
//!
//! Sizes: history H = 100,000; assistant message with 3 tool_use blocks = 500; 3 placeholder
//! results = 200; directive = 100. A fork's request is H + 500 + 200 + 100 = 100,800 tokens.

use forkcache_engine::billing::{BillingProfile, PriceTable};
use forkcache_engine::cache::{MissCause, Policy};
use forkcache_engine::prompt::Dimension;
use forkcache_report::demo::{SeedCase, SeedRun, seed_example};

fn runs() -> Vec<SeedRun> {
    seed_example(&PriceTable::builtin()).expect("the example replays")
}

/// The forks' token-equivalents (thousandths → whole) for one cell.
fn forks(runs: &[SeedRun], case: SeedCase, policy: Policy, billing: BillingProfile) -> f64 {
    let run = runs.iter().find(|r| r.case == case && r.policy == policy && r.billing == billing).unwrap();
    run.forks.value()
}

#[test]
fn longest_prefix_with_seed_billing_reproduces_the_articles_arithmetic() {
    let runs = runs();
    let cell = |case| forks(&runs, case, Policy::LongestPrefix, BillingProfile::Seed);
    // Warm: fork 1 reads H (100,000 × 0.1 = 10,000) and writes 800 at 1.0× → 10,800;
    // forks 2 and 3 read H + 700 (100,700 × 0.1 = 10,070) and write their 100-token directive
    // → 10,170 each. 10,800 + 10,170 + 10,170 = 31,140.
    assert_eq!(cell(SeedCase::Warm), 31_140.0);
    // Cold: fork 1 writes all 100,800 at 1.0×; forks 2 and 3 as above.
    // 100,800 + 10,170 + 10,170 = 121,140. (DESIGN §2.5 prints this sum as 120,940, but its own
    // addends add up to 121,140.)
    assert_eq!(cell(SeedCase::Cold), 121_140.0);
    // Naive: no sharing, 3 × 100,800 = 302,400.
    assert_eq!(cell(SeedCase::Naive), 302_400.0);
    // Savings, warm vs naive: 1 − 31,140 / 302,400 = 89.70%.
    let savings = 1.0 - cell(SeedCase::Warm) / cell(SeedCase::Naive);
    assert!((savings - 0.8970).abs() < 0.0001, "{savings}");
}

#[test]
fn longest_prefix_with_anthropic_billing() {
    let runs = runs();
    let cell = |case| forks(&runs, case, Policy::LongestPrefix, BillingProfile::Anthropic);
    // Writes cost 1.25×. Warm: fork 1 = 10,000 + 800 × 1.25 = 11,000; forks 2, 3 = 10,070 +
    // 100 × 1.25 = 10,195 each → 31,390.
    assert_eq!(cell(SeedCase::Warm), 31_390.0);
    // Cold: fork 1 = 100,800 × 1.25 = 126,000; + 2 × 10,195 = 146,390.
    assert_eq!(cell(SeedCase::Cold), 146_390.0);
    // Naive: 3 × 126,000 = 378,000.
    assert_eq!(cell(SeedCase::Naive), 378_000.0);
}

#[test]
fn anthropic_policy_forks_share_only_what_a_breakpoint_wrote() {
    let runs = runs();
    // Each fork marks only its own directive. The parent's request marked the end of H.
    // Warm, seed billing: every fork looks back from its directive: directive (not written),
    // placeholders (not written: fork 1 wrote only at its directive), assistant (not written),
    // H (the parent's entry) → reads 100,000 (10,000) and writes 800 (800) = 10,800 each.
    // 3 × 10,800 = 32,400.
    assert_eq!(forks(&runs, SeedCase::Warm, Policy::Anthropic, BillingProfile::Seed), 32_400.0);
    // Warm, anthropic billing: 10,000 + 800 × 1.25 = 11,000 each → 33,000.
    assert_eq!(forks(&runs, SeedCase::Warm, Policy::Anthropic, BillingProfile::Anthropic), 33_000.0);
    // Cold: nothing was ever written at H, so every fork writes 100,800.
    // Seed billing: 3 × 100,800 = 302,400; anthropic: 3 × 126,000 = 378,000. No savings at all.
    assert_eq!(forks(&runs, SeedCase::Cold, Policy::Anthropic, BillingProfile::Seed), 302_400.0);
    assert_eq!(forks(&runs, SeedCase::Cold, Policy::Anthropic, BillingProfile::Anthropic), 378_000.0);
    assert_eq!(forks(&runs, SeedCase::Naive, Policy::Anthropic, BillingProfile::Anthropic), 378_000.0);
}

#[test]
fn anthropic_policy_names_the_directive_as_where_siblings_diverge() {
    let runs = runs();
    let run = runs
        .iter()
        .find(|r| {
            r.case == SeedCase::Warm && r.policy == Policy::Anthropic && r.billing == BillingProfile::Seed
        })
        .unwrap();
    let misses: Vec<_> = run.report.records.iter().map(|r| r.result.as_ref().unwrap().miss.clone()).collect();
    // The parent and fork 1 read everything they shared with the past.
    assert_eq!(misses[0], None);
    assert_eq!(misses[1], None);
    // Forks 2 and 3 shared H + assistant + placeholders (100,700) with the fork before them but
    // read only H (100,000): 700 tokens missed, because that fork's entry was at its directive,
    // the block (messages[2].content[3]) where they differ.
    for miss in &misses[2..] {
        let miss = miss.as_ref().expect("forks 2 and 3 miss");
        assert_eq!(miss.cause, MissCause::PrefixChanged);
        assert_eq!(miss.dimension, Some(Dimension::Messages));
        assert_eq!(miss.path, "messages[2].content[3]");
        assert_eq!(miss.tokens_missed, 700);
    }
}

#[test]
fn longest_prefix_forks_miss_nothing() {
    for run in runs().iter().filter(|r| r.policy == Policy::LongestPrefix) {
        for record in &run.report.records {
            assert_eq!(record.result.as_ref().unwrap().miss, None, "{:?} {:?}", run.case, run.billing);
        }
    }
}
