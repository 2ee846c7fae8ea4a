//! Observed cache breaks: where a chain's real read fell short of what its previous request
//! left cached, and the first cause the transcript explains it by.

use serde::Serialize;

use forkcache_engine::prompt::Ttl;

use super::transcript::Event;

/// A read more than this many tokens below the previous request's `read + creation` is a break.
pub const BREAK_THRESHOLD_TOKENS: u64 = 1_000;

/// Why a chain's cache broke, first match in this order. Names shared with `replay`'s miss
/// causes where the meaning is the same (`model_changed`, `expired`), and with the API's cache
/// diagnostics for a changed system prompt (`system_changed`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BreakCause {
    /// The model changed: the cache is per model.
    ModelChanged,
    /// A `compact_boundary` lies between the two requests.
    Compacted,
    /// The gap exceeds the TTL the chain last wrote with.
    Expired,
    /// The user's turn started in another working directory: the system prompt names it
    /// (the API's cache-diagnostics name for a changed system prompt).
    SystemChanged,
    /// The user set another effort level (`/effort`): the effort is rendered into the prompt
    /// ahead of the messages.
    EffortChanged,
    /// Tool search loaded deferred tools (`deferred_tools_delta`).
    ToolSearchLoaded,
    /// The MCP servers' instructions changed (`mcp_instructions_delta`).
    McpInstructionsChanged,
    /// A background agent's `<task-notification>` arrived.
    TaskNotification,
    /// Nothing in the transcript explains it.
    Unexplained,
}

impl BreakCause {
    /// Whether an event the transcript holds explains the break. Each such event dropped the
    /// chain's cached conversation (a compaction, an expiry, another model) or changed the prompt
    /// before it (a system prompt, tools, instructions, a notification placed early): what the
    /// chain still read then was the stable prefix the account keeps warm, not a remnant of its
    /// own cache. An unexplained break may be any loss, down to a few tokens.
    pub fn read_only_the_stable_prefix(self) -> bool {
        self != BreakCause::Unexplained
    }

    /// The cause as output spells it.
    pub fn name(self) -> &'static str {
        match self {
            BreakCause::ModelChanged => "model_changed",
            BreakCause::Compacted => "compacted",
            BreakCause::Expired => "expired",
            BreakCause::SystemChanged => "system_changed",
            BreakCause::EffortChanged => "effort_changed",
            BreakCause::ToolSearchLoaded => "tool_search_loaded",
            BreakCause::McpInstructionsChanged => "mcp_instructions_changed",
            BreakCause::TaskNotification => "task_notification",
            BreakCause::Unexplained => "unexplained",
        }
    }
}

/// A break seen in the real usage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObservedBreak {
    /// The first matching cause.
    pub cause: BreakCause,
    /// Milliseconds since the chain's previous request started.
    pub gap_ms: u64,
    /// Tokens that could have been read and were written or sent uncached instead.
    pub tokens_lost: u64,
}

/// What break detection needs of one request.
#[derive(Clone, Copy, Debug)]
pub struct Turn<'a> {
    /// Model id.
    pub model: &'a str,
    /// Start, ms since the epoch.
    pub start_ms: i64,
    /// Tokens read.
    pub read: u64,
    /// Tokens written.
    pub creation: u64,
    /// Total input (read + creation + uncached).
    pub total_input: u64,
}

/// Whether `this` broke the cache `previous` left in the same chain: its read is more than
/// [`BREAK_THRESHOLD_TOKENS`] below `previous.read + previous.creation`, capped at its own total
/// input (a shrunken prompt loses only what it could have read). `ttl` is the TTL the chain
/// last wrote with; `events` what was seen in the chain between the two.
pub fn observe(previous: &Turn, this: &Turn, ttl: Ttl, events: &[Event]) -> Option<ObservedBreak> {
    let readable = (previous.read + previous.creation).min(this.total_input);
    let tokens_lost = readable.saturating_sub(this.read);
    if tokens_lost <= BREAK_THRESHOLD_TOKENS {
        return None;
    }
    let gap_ms = (this.start_ms - previous.start_ms).max(0) as u64;
    Some(ObservedBreak { cause: cause(previous, this, gap_ms, ttl, events), gap_ms, tokens_lost })
}

fn cause(previous: &Turn, this: &Turn, gap_ms: u64, ttl: Ttl, events: &[Event]) -> BreakCause {
    if previous.model != this.model {
        return BreakCause::ModelChanged;
    }
    if events.iter().any(|e| matches!(e, Event::Compacted { .. })) {
        return BreakCause::Compacted;
    }
    if gap_ms > ttl_ms(ttl) {
        return BreakCause::Expired;
    }
    let seen = |wanted: Event| events.contains(&wanted);
    if seen(Event::WorkingDirectoryChanged) {
        BreakCause::SystemChanged
    } else if seen(Event::EffortChanged) {
        BreakCause::EffortChanged
    } else if seen(Event::ToolSearchLoaded) {
        BreakCause::ToolSearchLoaded
    } else if seen(Event::McpInstructionsChanged) {
        BreakCause::McpInstructionsChanged
    } else if seen(Event::TaskNotification) {
        BreakCause::TaskNotification
    } else {
        BreakCause::Unexplained
    }
}

/// A TTL in milliseconds.
pub fn ttl_ms(ttl: Ttl) -> u64 {
    match ttl {
        Ttl::FiveMinutes => 5 * 60_000,
        Ttl::OneHour => 60 * 60_000,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(model: &str, start_ms: i64, read: u64, creation: u64, uncached: u64) -> Turn<'_> {
        Turn { model, start_ms, read, creation, total_input: read + creation + uncached }
    }

    #[test]
    fn a_loss_of_exactly_the_threshold_is_not_a_break() {
        // Previous left 50,000 + 2,000 = 52,000 cached; reading 51,000 loses 1,000: not a break.
        let previous = turn("m", 0, 50_000, 2_000, 3);
        assert_eq!(observe(&previous, &turn("m", 1_000, 51_000, 1_500, 3), Ttl::FiveMinutes, &[]), None);
        // Reading 50,999 loses 1,001: a break.
        let lost = observe(&previous, &turn("m", 1_000, 50_999, 1_501, 3), Ttl::FiveMinutes, &[]).unwrap();
        assert_eq!((lost.tokens_lost, lost.cause), (1_001, BreakCause::Unexplained));
    }

    #[test]
    fn the_loss_is_capped_at_the_requests_own_input() {
        // A compaction shrank the prompt to 30,000 (20,000 read + 10,000 written): it could have
        // read at most 30,000 of the 152,000 cached, so it lost 10,000.
        let previous = turn("m", 0, 150_000, 2_000, 3);
        let events = [Event::Compacted { pre_tokens: 152_000 }];
        let lost = observe(&previous, &turn("m", 1_000, 20_000, 10_000, 0), Ttl::OneHour, &events).unwrap();
        assert_eq!((lost.tokens_lost, lost.cause), (10_000, BreakCause::Compacted));
    }

    #[test]
    fn causes_match_in_order() {
        let previous = turn("a", 0, 50_000, 0, 0);
        let all = [Event::TaskNotification, Event::ToolSearchLoaded, Event::Compacted { pre_tokens: 1 }];
        let this = |model, start_ms| turn(model, start_ms, 0, 50_000, 0);
        let cause = |t: Turn, ttl, events: &[Event]| observe(&previous, &t, ttl, events).unwrap().cause;
        assert_eq!(cause(this("b", 10_000_000), Ttl::FiveMinutes, &all), BreakCause::ModelChanged);
        assert_eq!(cause(this("a", 10_000_000), Ttl::FiveMinutes, &all), BreakCause::Compacted);
        // 5 minutes + 1 ms after a 5-minute write: expired; the same gap after a 1-hour write is not.
        assert_eq!(cause(this("a", 300_001), Ttl::FiveMinutes, &all[..2]), BreakCause::Expired);
        assert_eq!(cause(this("a", 300_001), Ttl::OneHour, &all[..2]), BreakCause::ToolSearchLoaded);
        assert_eq!(cause(this("a", 1_000), Ttl::OneHour, &all[..1]), BreakCause::TaskNotification);
        assert_eq!(
            cause(this("a", 1_000), Ttl::OneHour, &[Event::McpInstructionsChanged]),
            BreakCause::McpInstructionsChanged
        );
        assert_eq!(cause(this("a", 300_000), Ttl::FiveMinutes, &[]), BreakCause::Unexplained);
        // A turn in another working directory comes after an expiry, before the other events.
        let moved = [Event::TaskNotification, Event::ToolSearchLoaded, Event::WorkingDirectoryChanged];
        assert_eq!(cause(this("a", 300_001), Ttl::FiveMinutes, &moved), BreakCause::Expired);
        assert_eq!(cause(this("a", 1_000), Ttl::FiveMinutes, &moved), BreakCause::SystemChanged);
        assert_eq!(BreakCause::SystemChanged.name(), "system_changed");
        // Another effort level comes after a changed system prompt, before tool loads.
        let effort = [Event::TaskNotification, Event::ToolSearchLoaded, Event::EffortChanged];
        assert_eq!(cause(this("a", 1_000), Ttl::OneHour, &effort), BreakCause::EffortChanged);
        assert_eq!(cause(this("a", 1_000), Ttl::OneHour, &[effort[2], moved[2]]), BreakCause::SystemChanged);
        assert_eq!(BreakCause::EffortChanged.name(), "effort_changed");
    }
}
