//! The records of a run, shared by the engine that makes them and the report that sums them:
//! who sent each request, what the endpoint did, each spawn's check and the guard's verdicts.
//! Both import from here, so the arrows run one way (engine → report → record).

use serde::Serialize;

use forkcache_engine::billing::TokenEquivalents;
use forkcache_engine::endpoint::{EndpointConfig, Record};
use forkcache_engine::verify::SiblingCheck;

use super::spec::{ForkSpec, Launch, ScenarioSpec};
use crate::agent::{ForkVariant, GuardVerdict};

/// How a scenario runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunConfig {
    /// The endpoint every request goes through.
    pub endpoint: EndpointConfig,
    /// Check byte identity across each spawn's forks (renders their bodies). Default true.
    pub verify: bool,
    /// Price every request again alone in its own workspace, for the naive cost. Default true.
    pub naive: bool,
    /// Keep every request's full body in its record (for byte-level checks). Default false.
    pub keep_bodies: bool,
}

impl RunConfig {
    /// The settings a spec names (policy, billing, identity, visibility), everything else default.
    pub fn for_spec(spec: &ScenarioSpec) -> RunConfig {
        let mut endpoint = EndpointConfig { billing: spec.billing, ..EndpointConfig::default() };
        endpoint.cache.policy = spec.policy;
        endpoint.cache.visibility = spec.visibility;
        endpoint.prompt.identity = spec.identity;
        RunConfig { endpoint, verify: true, naive: true, keep_bodies: false }
    }
}

/// Who sent a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestRole {
    /// The main loop.
    Parent,
    /// A fork child.
    Fork,
    /// A named sub-agent.
    Named,
    /// The teaching sub-agent (seed 003, s06).
    Task,
    /// A teammate of a team the parent leads.
    Teammate,
    /// A post-turn side request.
    Sidecar,
    /// A compaction summary.
    Compaction,
}

impl RequestRole {
    /// Snake-case name.
    pub fn name(self) -> &'static str {
        match self {
            RequestRole::Parent => "parent",
            RequestRole::Fork => "fork",
            RequestRole::Named => "named",
            RequestRole::Task => "task",
            RequestRole::Teammate => "teammate",
            RequestRole::Sidecar => "sidecar",
            RequestRole::Compaction => "compaction",
        }
    }
}

/// One priced request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioRecord {
    /// 0-based, in start order.
    pub index: usize,
    /// Who sent it.
    pub role: RequestRole,
    /// `parent 3`, `fork 1.2 turn 1`, `explore 1 turn 2`, …
    pub agent: String,
    /// The spawn a fork belongs to (0-based).
    pub spawn: Option<usize>,
    /// The fork's index in its spawn (0-based).
    pub fork: Option<usize>,
    /// What the endpoint did.
    pub record: Record,
    /// The same request alone in its own workspace (nothing shared), in nano-dollars.
    pub naive_nanousd: u64,
    /// …and in token-equivalents.
    pub naive_token_equivalents: TokenEquivalents,
    /// The full body, when [`RunConfig::keep_bodies`] is set.
    pub body: Option<String>,
}

impl ScenarioRecord {
    pub(super) fn new(index: usize, who: Who, record: Record, naive: Option<&Record>) -> ScenarioRecord {
        let naive_nanousd = naive.map_or(0, |n| n.cost.total_nanousd());
        let naive_token_equivalents = naive.map_or(TokenEquivalents(0), |n| n.token_equivalents);
        ScenarioRecord {
            index,
            role: who.role,
            agent: who.label,
            spawn: who.spawn,
            fork: who.fork,
            record,
            naive_nanousd,
            naive_token_equivalents,
            body: None,
        }
    }
}

/// A spawn and its byte-identity check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SpawnReport {
    /// Index of the timeline event.
    pub event: usize,
    /// 0-based spawn number.
    pub spawn: usize,
    /// Forks.
    pub forks: usize,
    /// Which tool uses each fork kept.
    pub variant: ForkVariant,
    /// How they started.
    pub launch: Launch,
    /// The check (absent when verification is off).
    pub verification: Option<SiblingCheck>,
}

impl SpawnReport {
    pub(super) fn new(
        event: usize,
        spawn: usize,
        spec: &ForkSpec,
        forks: usize,
        verification: Option<SiblingCheck>,
    ) -> SpawnReport {
        SpawnReport { event, spawn, forks, variant: spec.variant, launch: spec.launch, verification }
    }
}

/// A fork child that asked to fork.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GuardEvent {
    /// Which child.
    pub agent: String,
    /// Its turn.
    pub turn: u32,
    /// Its history had been compacted before it asked.
    pub compacted: bool,
    /// What each layer of the guard said.
    pub verdict: GuardVerdict,
}

/// Who sent a request.
pub(super) struct Who {
    pub role: RequestRole,
    pub label: String,
    pub spawn: Option<usize>,
    pub fork: Option<usize>,
    /// Sent from another workspace (a remote agent): it shares no cache with the rest.
    pub remote: bool,
}

impl Who {
    pub(super) fn new(role: RequestRole, label: String) -> Who {
        Who { role, label, spawn: None, fork: None, remote: false }
    }
}
