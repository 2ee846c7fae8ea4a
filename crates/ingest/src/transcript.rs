//! Claude Code session transcripts (`~/.claude/projects/…/*.jsonl`) → the requests they record.
//!
//! The reader follows the rules of the transcript reference: a streamed reply is written as
//! several lines sharing `requestId`, of which the **last** holds the final usage; file order is
//! not time order, so requests are ordered by their first line's timestamp; every chain (`main`,
//! or `agent:<agentId>` for a sub-agent, whether read from its own file or echoed into the main
//! file by `agent_progress`) is its own cache stream; `<synthetic>` lines are not requests.
//! Unreadable lines, unknown line kinds and unknown fields (of a line, its message or its usage;
//! the known ones are listed in [`KNOWN_LINE_FIELDS`], [`KNOWN_MESSAGE_FIELDS`] and the usage
//! fields forkcache prices or passes through) are counted, never fatal.
//!
//! Files are read line by line, so memory grows with the number of requests, not with bytes.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;

use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use forkcache_engine::billing::{self, Modifiers, Usage};
use forkcache_engine::prompt::MAX_DECLARED_TOKENS;

use super::compact::{CompactJson, Shapes};

/// Milliseconds since 1970-01-01T00:00:00Z.
pub type EpochMs = i64;

/// Which cache stream a request belongs to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Chain {
    /// The session's own conversation.
    Main,
    /// A sub-agent's conversation, by agent id.
    Agent(String),
}

impl Chain {
    /// `main` or `agent:<id>`.
    pub fn name(&self) -> String {
        match self {
            Chain::Main => "main".to_string(),
            Chain::Agent(id) => format!("agent:{id}"),
        }
    }
}

/// Something seen in a chain between two of its requests that can move the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Event {
    /// A `compact_boundary`: the history was replaced by a summary of `pre_tokens` of context.
    Compacted {
        /// `compactMetadata.preTokens`: what the summarising call read.
        pre_tokens: u64,
    },
    /// A `deferred_tools_delta` attachment, or a `ToolSearch` result's `tool_reference` blocks:
    /// tool search loaded tools into the prompt.
    ToolSearchLoaded,
    /// An `mcp_instructions_delta` attachment.
    McpInstructionsChanged,
    /// A user line carrying a background agent's `<task-notification>`.
    TaskNotification,
    /// A user turn in another working directory (`cwd`) than the chain's previous turn: Claude
    /// Code writes the working directory into its system prompt when a turn starts, so the
    /// prompt changes after the stable prefix (system prompt head and tools).
    WorkingDirectoryChanged,
    /// The user set another effort level (`/effort`, whose output says `Set effort level to
    /// <level>`): the API renders the effort into the prompt, and a change misses every
    /// message-level breakpoint while tools and system stay cached (the reference's thinking and
    /// effort rows, and its worked example of a budget change).
    EffortChanged,
}

impl Event {
    /// Whether the prompt changed right after the stable prefix (system prompt head and tools),
    /// so that every block after it is sent anew.
    pub fn resends_history(&self) -> bool {
        matches!(self, Event::WorkingDirectoryChanged | Event::EffortChanged)
    }
}

/// A sub-agent chain's origin: the request whose `Agent` tool call spawned it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spawn {
    /// The spawning request's id.
    pub request_id: String,
}

/// The usage object as recorded, and the figures read from it.
#[derive(Clone, Debug)]
pub struct RecordedUsage {
    /// The object exactly as the transcript holds it (extra fields such as `speed`,
    /// `inference_geo` or `iterations` included), kept compactly; `None` when the reader was told
    /// not to keep it.
    pub raw: Option<CompactJson>,
    /// Its token counts. Without a `cache_creation` split (Claude Code 1.0.x) every write is
    /// counted as a 5-minute write.
    pub usage: Usage,
    /// The settings that change its price (`speed`, `inference_geo`, a batch tier).
    pub modifiers: Modifiers,
    /// False when the object had no `cache_creation` split.
    pub split_known: bool,
}

/// One API request, as the transcripts record it.
#[derive(Clone, Debug)]
pub struct TranscriptRequest {
    /// `requestId` (or `message.id` when a line has none).
    pub request_id: String,
    /// The session the request belongs to (a sub-agent's is its parent's).
    pub session_id: String,
    /// Its cache stream.
    pub chain: Chain,
    /// `message.model`.
    pub model: String,
    /// The timestamp of its first line.
    pub first_line_ms: EpochMs,
    /// When it started: the user / tool_result line it answers, else its first line.
    pub start_ms: EpochMs,
    /// Its first line's timestamp as written (ISO 8601).
    pub at: String,
    /// The last line's usage.
    pub recorded: RecordedUsage,
    /// What happened in its chain since the chain's previous request (file order).
    pub events: Vec<Event>,
}

/// What reading the transcripts counted besides requests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Lines read.
    pub lines: u64,
    /// Lines that were not JSON objects (a torn last line included).
    pub skipped_lines: u64,
    /// Notes about skipped lines (`file:line: why`).
    pub notes: Vec<String>,
    /// Lines whose `type` the reader does not know, by type.
    pub unknown_line_kinds: BTreeMap<String, u64>,
    /// Usage fields the reader does not know (kept in `raw`, not priced), by name.
    pub unknown_usage_fields: BTreeMap<String, u64>,
    /// Fields the reader does not know, by path: a line's top-level field (`name`, outside
    /// [`KNOWN_LINE_FIELDS`]), a message's (`message.name`, outside [`KNOWN_MESSAGE_FIELDS`]) or a
    /// usage object's (`message.usage.name`); counted once per line holding it.
    pub unknown_fields: BTreeMap<String, u64>,
    /// `<synthetic>` assistant lines dropped.
    pub synthetic_lines: u64,
    /// Assistant lines that repeated a request already seen (streamed blocks, echoes, a fork
    /// child's inherited copies of its parent's lines).
    pub duplicate_lines: u64,
}

/// Every request of a set of transcript files, deduplicated by request id.
#[derive(Clone, Debug, Default)]
pub struct Transcripts {
    /// Requests ordered by (session, first line's timestamp, request id).
    pub requests: Vec<TranscriptRequest>,
    /// Sub-agent chains linked to the request that spawned them, by (session, agent id).
    pub spawns: BTreeMap<(String, String), Spawn>,
    /// Counters.
    pub stats: ReadStats,
}

impl Transcripts {
    /// Keeps the requests whose first line falls on a day (UTC, `YYYY-MM-DD`) in the range.
    pub fn retain_days(&mut self, since: Option<&str>, until: Option<&str>) {
        self.requests.retain(|r| {
            let day = day_of(&r.at);
            since.is_none_or(|since| day >= since) && until.is_none_or(|until| day <= until)
        });
    }
}

/// Line kinds that hold no request and need no handling.
const BOOKKEEPING_KINDS: &[&str] = &[
    "summary",
    "queue-operation",
    "file-history-snapshot",
    "custom-title",
    "agent-name",
    "last-prompt",
    "permission-mode",
    "pr-link",
    "ai-title",
    "tag",
    "mode",
    "worktree-state",
    "fork-context-ref",
];

/// Line kinds the reader reads beyond their `type` (their fields are checked against
/// [`KNOWN_LINE_FIELDS`]).
const READ_KINDS: &[&str] = &["assistant", "user", "system", "attachment", "progress"];

/// Usage fields the reader knows.
const KNOWN_USAGE_FIELDS: &[&str] = &[
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "cache_creation",
    "service_tier",
    "server_tool_use",
    "speed",
    "inference_geo",
    "iterations",
];

/// Tool names that spawn a sub-agent.
const SPAWNING_TOOLS: &[&str] = &["Agent", "Task"];

/// Top-level fields of the line kinds the reader reads (`assistant`, `user`, `system`,
/// `attachment`, `progress`), sorted: any other field is counted under `unknown_fields`, never
/// fatal. Bookkeeping kinds are not read beyond their `type`, so their fields are not counted.
pub const KNOWN_LINE_FIELDS: &[&str] = &[
    "agentId",
    "apiErrorStatus",
    "attachment",
    "attributionAgent",
    "attributionPlugin",
    "attributionSkill",
    "cause",
    "compactMetadata",
    "content",
    "contextLength",
    "cwd",
    "data",
    "durationMs",
    "effort",
    "entrypoint",
    "error",
    "errorDetails",
    "gitBranch",
    "hasOutput",
    "hookCount",
    "hookErrors",
    "hookInfos",
    "imagePasteIds",
    "isApiErrorMessage",
    "isCompactSummary",
    "isMeta",
    "isSidechain",
    "isVisibleInTranscriptOnly",
    "level",
    "logicalParentUuid",
    "maxRetries",
    "message",
    "parentLastUuid",
    "parentSessionId",
    "parentToolUseID",
    "parentUuid",
    "permissionMode",
    "preventedContinuation",
    "promptId",
    "requestId",
    "retryAttempt",
    "retryInMs",
    "sessionId",
    "session_id",
    "slug",
    "sourceToolAssistantUUID",
    "sourceToolUseID",
    "stopReason",
    "subtype",
    "teamName",
    "thinkingMetadata",
    "timestamp",
    "todos",
    "toolUseID",
    "toolUseResult",
    "type",
    "userType",
    "uuid",
    "version",
];

/// Fields of a line's `message` (an API message, or a user turn), sorted; others are counted as
/// `message.<name>`.
pub const KNOWN_MESSAGE_FIELDS: &[&str] = &[
    "container",
    "content",
    "context_management",
    "diagnostics",
    "id",
    "model",
    "role",
    "stop_details",
    "stop_reason",
    "stop_sequence",
    "type",
    "usage",
];

/// A JSON string — an object key, or a value such as `cwd` — borrowed from the line when it has
/// no escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a field name")
            }
            fn visit_borrowed_str<E: de::Error>(self, key: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(key)))
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(key.to_string())))
            }
        }
        deserializer.deserialize_identifier(KeyVisitor)
    }
}

/// Whether `name` is in the sorted list `known`.
fn is_known(known: &[&str], name: &str) -> bool {
    known.binary_search(&name).is_ok()
}

/// The fields of one line the reader uses; the others are skipped without building anything,
/// and those not in [`KNOWN_LINE_FIELDS`] are named in `unknown`.
#[derive(Default)]
struct Line<'a> {
    kind: Option<&'a str>,
    subtype: Option<&'a str>,
    timestamp: Option<&'a str>,
    request_id: Option<&'a str>,
    session_id: Option<&'a str>,
    agent_id: Option<&'a str>,
    is_sidechain: Option<bool>,
    uuid: Option<&'a str>,
    parent_uuid: Option<&'a str>,
    message: Option<MessagePart<'a>>,
    data: Option<&'a RawValue>,
    attachment: Option<Attachment<'a>>,
    compact_metadata: Option<CompactMetadata>,
    tool_use_result: Option<&'a RawValue>,
    cwd: Option<Cow<'a, str>>,
    unknown: Vec<Cow<'a, str>>,
}

impl<'de> Deserialize<'de> for Line<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct LineVisitor;
        impl<'de> Visitor<'de> for LineVisitor {
            type Value = Line<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a transcript line (a JSON object)")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Line<'de>, A::Error> {
                let mut line = Line::default();
                while let Some(Key(key)) = map.next_key()? {
                    match key.as_ref() {
                        "type" => line.kind = map.next_value()?,
                        "subtype" => line.subtype = map.next_value()?,
                        "timestamp" => line.timestamp = map.next_value()?,
                        "requestId" => line.request_id = map.next_value()?,
                        "sessionId" => line.session_id = map.next_value()?,
                        "agentId" => line.agent_id = map.next_value()?,
                        "isSidechain" => line.is_sidechain = map.next_value()?,
                        "uuid" => line.uuid = map.next_value()?,
                        "parentUuid" => line.parent_uuid = map.next_value()?,
                        "message" => line.message = map.next_value()?,
                        "data" => line.data = map.next_value()?,
                        "attachment" => line.attachment = map.next_value()?,
                        "compactMetadata" => line.compact_metadata = map.next_value()?,
                        "toolUseResult" => line.tool_use_result = map.next_value()?,
                        // A path may hold escapes (`C:\\Users`): borrowed when it has none.
                        "cwd" => line.cwd = map.next_value::<Option<Key>>()?.map(|Key(cwd)| cwd),
                        name => {
                            map.next_value::<IgnoredAny>()?;
                            if !is_known(KNOWN_LINE_FIELDS, name) {
                                line.unknown.push(key);
                            }
                        }
                    }
                }
                Ok(line)
            }
        }
        deserializer.deserialize_map(LineVisitor)
    }
}

#[derive(Default)]
struct MessagePart<'a> {
    id: Option<&'a str>,
    model: Option<&'a str>,
    usage: Option<&'a RawValue>,
    content: Option<&'a RawValue>,
    unknown: Vec<Cow<'a, str>>,
}

impl<'de> Deserialize<'de> for MessagePart<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MessageVisitor;
        impl<'de> Visitor<'de> for MessageVisitor {
            type Value = MessagePart<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a message object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<MessagePart<'de>, A::Error> {
                let mut message = MessagePart::default();
                while let Some(Key(key)) = map.next_key()? {
                    match key.as_ref() {
                        "id" => message.id = map.next_value()?,
                        "model" => message.model = map.next_value()?,
                        "usage" => message.usage = map.next_value()?,
                        "content" => message.content = map.next_value()?,
                        name => {
                            map.next_value::<IgnoredAny>()?;
                            if !is_known(KNOWN_MESSAGE_FIELDS, name) {
                                message.unknown.push(key);
                            }
                        }
                    }
                }
                Ok(message)
            }
        }
        deserializer.deserialize_map(MessageVisitor)
    }
}

#[derive(Deserialize)]
struct Attachment<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<&'a str>,
}

#[derive(Deserialize)]
struct CompactMetadata {
    #[serde(rename = "preTokens")]
    pre_tokens: Option<u64>,
}

/// `progress` lines: `agent_progress` echoes a sub-agent's assistant line.
#[derive(Deserialize)]
struct ProgressData<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<&'a str>,
    #[serde(rename = "agentId", borrow)]
    agent_id: Option<&'a str>,
    #[serde(borrow)]
    message: Option<&'a RawValue>,
}

/// A content block, as far as spawning and notifications go.
#[derive(Deserialize)]
struct ContentBlock<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<&'a str>,
    #[serde(borrow)]
    id: Option<&'a str>,
    #[serde(borrow)]
    name: Option<&'a str>,
    #[serde(borrow)]
    tool_use_id: Option<&'a str>,
}

#[derive(Deserialize)]
struct ToolUseResult<'a> {
    #[serde(rename = "agentId", borrow)]
    agent_id: Option<&'a str>,
}

/// Why a line was skipped.
type Why = Cow<'static, str>;

/// Where a file's lines belong when they do not say.
#[derive(Clone, Debug, Default)]
struct FileContext {
    /// The file's name, for notes.
    name: String,
    /// The agent id a sub-agent file's name gives (`agent-<id>.jsonl`).
    agent_id: Option<String>,
}

/// Reads transcript files one at a time and gathers their requests.
pub struct TranscriptReader {
    requests: Vec<TranscriptRequest>,
    by_id: HashMap<String, usize>,
    // Per (session, chain): events since its last request, and the uuid → timestamp of the
    // user lines it may answer.
    pending_events: HashMap<(String, Chain), Vec<Event>>,
    // Per (session, chain): the working directory of its last user turn.
    turn_cwds: HashMap<(String, Chain), String>,
    // Per (session, chain): the effort level it last set with `/effort`.
    efforts: HashMap<(String, Chain), String>,
    user_times: HashMap<String, EpochMs>,
    // Agent tool_use id → the request that made it; agent ids named by tool results.
    spawning_calls: HashMap<String, (String, String)>,
    spawns: BTreeMap<(String, String), Spawn>,
    stats: ReadStats,
    keep_raw_usage: bool,
    usage_shapes: Shapes,
}

impl Default for TranscriptReader {
    fn default() -> Self {
        TranscriptReader::new()
    }
}

impl TranscriptReader {
    /// A reader with nothing read, keeping each request's usage object as recorded.
    pub fn new() -> TranscriptReader {
        TranscriptReader {
            requests: Vec::new(),
            by_id: HashMap::new(),
            pending_events: HashMap::new(),
            turn_cwds: HashMap::new(),
            efforts: HashMap::new(),
            user_times: HashMap::new(),
            spawning_calls: HashMap::new(),
            spawns: BTreeMap::new(),
            stats: ReadStats::default(),
            keep_raw_usage: true,
            usage_shapes: Shapes::default(),
        }
    }

    /// Whether to keep each usage object as recorded (for `--json`); without it a request costs
    /// a few hundred bytes less.
    pub fn keep_raw_usage(mut self, keep: bool) -> TranscriptReader {
        self.keep_raw_usage = keep;
        self
    }

    /// Reads one file's lines. `name` is used in notes only; a name `agent-<id>.jsonl` makes the
    /// file's lines belong to chain `agent:<id>` when they do not name their agent.
    pub fn read(&mut self, name: &str, input: impl BufRead) -> std::io::Result<()> {
        let context = FileContext { name: name.to_string(), agent_id: agent_id_of_file_name(name) };
        let mut input = input;
        let mut bytes = Vec::new();
        let mut number = 0usize;
        loop {
            bytes.clear();
            if input.read_until(b'\n', &mut bytes)? == 0 {
                break;
            }
            number += 1;
            let torn = !bytes.ends_with(b"\n");
            // A line that is not UTF-8 (typically a last line cut inside a character) is skipped
            // and counted like any unreadable line: it must not cost the rest of the file.
            let read = match std::str::from_utf8(&bytes) {
                Ok(text) if text.trim().is_empty() => continue,
                Ok(text) => self.read_line(&context, text.trim()),
                Err(err) => Err(format!("not UTF-8 (byte {})", err.valid_up_to() + 1).into()),
            };
            self.stats.lines += 1;
            if let Err(why) = read {
                self.skip(&context, number, if torn { "torn last line" } else { &why });
            }
        }
        Ok(())
    }

    /// The requests gathered, in order.
    pub fn finish(self) -> Transcripts {
        let mut requests = self.requests;
        requests.sort_by(|a, b| {
            (&a.session_id, a.first_line_ms, &a.request_id).cmp(&(
                &b.session_id,
                b.first_line_ms,
                &b.request_id,
            ))
        });
        Transcripts { requests, spawns: self.spawns, stats: self.stats }
    }

    fn skip(&mut self, context: &FileContext, number: usize, why: &str) {
        self.stats.skipped_lines += 1;
        self.stats.notes.push(format!("{}:{number}: {why}", context.name));
    }

    fn read_line(&mut self, context: &FileContext, text: &str) -> Result<(), Why> {
        let line: Line = serde_json::from_str(text).map_err(|_| "not a JSON object")?;
        let session = line.session_id.unwrap_or_default().to_string();
        let chain = chain_of(&line, context);
        let kind = line.kind.unwrap_or_default();
        if READ_KINDS.contains(&kind) {
            self.count_unknown_fields(&line);
        }
        match kind {
            "assistant" => self.read_assistant(&line, session, chain),
            "user" => self.read_user(&line, session, chain),
            "system" => {
                if line.subtype == Some("compact_boundary") {
                    let pre_tokens = line.compact_metadata.as_ref().and_then(|m| m.pre_tokens).unwrap_or(0);
                    self.push_event(session, chain, Event::Compacted { pre_tokens });
                }
                Ok(())
            }
            "attachment" => {
                let event = match line.attachment.as_ref().and_then(|a| a.kind) {
                    Some("deferred_tools_delta") => Some(Event::ToolSearchLoaded),
                    Some("mcp_instructions_delta") => Some(Event::McpInstructionsChanged),
                    _ => None,
                };
                if let Some(event) = event {
                    self.push_event(session, chain, event);
                }
                Ok(())
            }
            "progress" => self.read_progress(&line, session),
            kind if BOOKKEEPING_KINDS.contains(&kind) => Ok(()),
            kind => {
                *self.stats.unknown_line_kinds.entry(kind.to_string()).or_insert(0) += 1;
                Ok(())
            }
        }
    }

    fn count_unknown_fields(&mut self, line: &Line) {
        let message_fields = line.message.iter().flat_map(|m| &m.unknown);
        let names = line
            .unknown
            .iter()
            .map(|name| name.to_string())
            .chain(message_fields.map(|name| format!("message.{name}")));
        for name in names {
            *self.stats.unknown_fields.entry(name).or_insert(0) += 1;
        }
    }

    fn push_event(&mut self, session: String, chain: Chain, event: Event) {
        self.pending_events.entry((session, chain)).or_default().push(event);
    }

    /// A user line: a turn or tool results. Remembers its time (a request answers it), links
    /// sub-agents named by `Agent` tool results, and notes task notifications.
    fn read_user(&mut self, line: &Line, session: String, chain: Chain) -> Result<(), Why> {
        if let (Some(uuid), Some(at)) = (line.uuid, line.timestamp.and_then(parse_timestamp)) {
            self.user_times.insert(uuid.to_string(), at);
        }
        let content = line.message.as_ref().and_then(|m| m.content).map_or("", |c| c.get());
        if content.contains("<task-notification>") {
            self.push_event(session.clone(), chain.clone(), Event::TaskNotification);
        }
        // A `ToolSearch` result names the deferred tools it loaded as `tool_reference` blocks:
        // from the next request on they sit among the tools, ahead of the cached messages. Builds
        // that write no `deferred_tools_delta` attachment show the load only this way.
        if content.contains("\"tool_reference\"") {
            self.push_event(session.clone(), chain.clone(), Event::ToolSearchLoaded);
        }
        if !content.contains("tool_result") {
            // `/effort` prints its outcome as a user line of its own, never among tool results
            // (which can be long: no need to search them).
            if let Some(level) = effort_set(content) {
                self.note_effort(session.clone(), chain.clone(), level);
            }
            self.note_turn_cwd(line, session, chain);
            return Ok(());
        }
        let spawned_by = blocks(content)
            .into_iter()
            .filter(|block| block.kind == Some("tool_result"))
            .find_map(|block| self.spawning_calls.get(block.tool_use_id?).cloned());
        let agent_id = line
            .tool_use_result
            .and_then(|raw| serde_json::from_str::<ToolUseResult>(raw.get()).ok())
            .and_then(|result| result.agent_id.map(str::to_string))
            .or_else(|| agent_id_in_text(content));
        if let (Some((spawn_session, request_id)), Some(agent_id)) = (spawned_by, agent_id) {
            self.spawns.entry((spawn_session, agent_id)).or_insert(Spawn { request_id });
        }
        Ok(())
    }

    /// A user line that is not tool results starts a turn (a prompt, a local command and its
    /// caveat): a working directory other than the chain's previous turn's is an event. Tool
    /// results do not count: the directory a tool moved to enters the prompt at the next turn.
    fn note_turn_cwd(&mut self, line: &Line, session: String, chain: Chain) {
        let Some(cwd) = line.cwd.as_deref() else { return };
        let key = (session, chain);
        match self.turn_cwds.get_mut(&key) {
            Some(last) if last == cwd => {}
            Some(last) => {
                *last = cwd.to_string();
                self.push_event(key.0, key.1, Event::WorkingDirectoryChanged);
            }
            None => {
                self.turn_cwds.insert(key, cwd.to_string());
            }
        }
    }

    /// An effort level set by `/effort`: an event when it differs from the level the chain last
    /// set. The level in force before a chain's first `/effort` is the client's setting, which
    /// the transcript does not hold: the first one counts as a change.
    fn note_effort(&mut self, session: String, chain: Chain, level: &str) {
        let key = (session, chain);
        if self.efforts.get(&key).is_some_and(|last| last == level) {
            return;
        }
        self.efforts.insert(key.clone(), level.to_string());
        self.push_event(key.0, key.1, Event::EffortChanged);
    }

    /// A `progress` line: an `agent_progress` echo is the sub-agent's assistant line.
    fn read_progress(&mut self, line: &Line, session: String) -> Result<(), Why> {
        let Some(data) = line.data else { return Ok(()) };
        let Ok(data) = serde_json::from_str::<ProgressData>(data.get()) else { return Ok(()) };
        let (Some("agent_progress"), Some(agent_id), Some(message)) =
            (data.kind, data.agent_id, data.message)
        else {
            return Ok(());
        };
        let inner: Line =
            serde_json::from_str(message.get()).map_err(|_| "agent_progress message is not an object")?;
        if inner.kind != Some("assistant") {
            return Ok(());
        }
        let session = inner.session_id.map_or(session, str::to_string);
        self.read_assistant(&inner, session, Chain::Agent(agent_id.to_string()))
    }

    fn read_assistant(&mut self, line: &Line, session: String, chain: Chain) -> Result<(), Why> {
        let Some(message) = &line.message else { return Err("assistant line without a message".into()) };
        let model = message.model.unwrap_or_default();
        if model == "<synthetic>" {
            self.stats.synthetic_lines += 1;
            return Ok(());
        }
        let Some(usage) = message.usage else { return Err("assistant line without message.usage".into()) };
        let id = line.request_id.or(message.id).ok_or("assistant line without requestId or message.id")?;
        let at_text = line.timestamp.ok_or("assistant line without a timestamp")?;
        let first_line_ms = parse_timestamp(at_text).ok_or("timestamp is not ISO 8601")?;
        let recorded = self.recorded_usage(usage, id)?;
        if let Some(content) = message.content {
            self.note_spawning_calls(content.get(), &session, id);
        }
        // A user line is answered once: its time leaves the map, so the map stays small.
        let start_ms =
            line.parent_uuid.and_then(|uuid| self.user_times.remove(uuid)).unwrap_or(first_line_ms);
        if let Some(&index) = self.by_id.get(id) {
            self.stats.duplicate_lines += 1;
            if self.requests[index].chain == chain {
                // A later line of the same request: its usage is the final one.
                self.requests[index].recorded = recorded;
            } else if chain == Chain::Main {
                // A fork child's file copies the parent's lines it inherits; the main chain's
                // own line says where the request belongs and what it used.
                let events = self.pending_events.remove(&(session, Chain::Main)).unwrap_or_default();
                let existing = &mut self.requests[index];
                existing.chain = Chain::Main;
                existing.recorded = recorded;
                existing.start_ms = start_ms.min(first_line_ms);
                existing.events = events;
            }
            return Ok(());
        }
        let events = self.pending_events.remove(&(session.clone(), chain.clone())).unwrap_or_default();
        self.by_id.insert(id.to_string(), self.requests.len());
        self.requests.push(TranscriptRequest {
            request_id: id.to_string(),
            session_id: session,
            chain,
            model: model.to_string(),
            first_line_ms,
            start_ms: start_ms.min(first_line_ms),
            at: at_text.to_string(),
            recorded,
            events,
        });
        Ok(())
    }

    fn note_spawning_calls(&mut self, content: &str, session: &str, request_id: &str) {
        if !content.contains("tool_use") {
            return;
        }
        for block in blocks(content) {
            if let (Some("tool_use"), Some(name), Some(id)) = (block.kind, block.name, block.id) {
                if SPAWNING_TOOLS.contains(&name) {
                    self.spawning_calls.insert(id.to_string(), (session.to_string(), request_id.to_string()));
                }
            }
        }
    }

    /// The usage object as recorded, read by the price table's own reader. An unreadable one
    /// skips its line, not its request: another line of a streamed reply may still count it.
    fn recorded_usage(&mut self, raw: &RawValue, request_id: &str) -> Result<RecordedUsage, Why> {
        let value: serde_json::Value =
            serde_json::from_str(raw.get()).map_err(|_| "message.usage is not JSON")?;
        if let Some((field, tokens)) = absurd_count(&value) {
            return Err(format!(
                "request {request_id}: message.usage.{field} is {tokens} tokens, past any context window (more than {MAX_DECLARED_TOKENS}); line skipped"
            )
            .into());
        }
        if let Some(object) = value.as_object() {
            for name in object.keys().filter(|name| !KNOWN_USAGE_FIELDS.contains(&name.as_str())) {
                *self.stats.unknown_usage_fields.entry(name.clone()).or_insert(0) += 1;
                *self.stats.unknown_fields.entry(format!("message.usage.{name}")).or_insert(0) += 1;
            }
        }
        // Its error names the count (a sum past the cap, a count that is not a whole number).
        let read = billing::RecordedUsage::from_value(value)
            .map_err(|why| format!("request {request_id}: message.{why}; line skipped"))?;
        Ok(RecordedUsage {
            raw: self.keep_raw_usage.then(|| self.usage_shapes.compact(raw.get())),
            usage: read.usage,
            modifiers: read.modifiers,
            split_known: read.ttl_split_known,
        })
    }
}
/// Counts a usage object holds, as paths under `usage`.
const COUNT_FIELDS: &[&[&str]] = &[
    &["input_tokens"],
    &["cache_read_input_tokens"],
    &["cache_creation_input_tokens"],
    &["cache_creation", "ephemeral_5m_input_tokens"],
    &["cache_creation", "ephemeral_1h_input_tokens"],
    &["output_tokens"],
];

/// The first count of a usage object above [`MAX_DECLARED_TOKENS`] (the bound every ingest
/// source puts on a recorded count), by its path: no model reads or writes that much in one
/// request, and sums of such counts would overflow the totals.
fn absurd_count(usage: &serde_json::Value) -> Option<(String, u64)> {
    COUNT_FIELDS.iter().find_map(|path| {
        let tokens = path.iter().try_fold(usage, |value, key| value.get(key))?.as_u64()?;
        (tokens > MAX_DECLARED_TOKENS).then(|| (path.join("."), tokens))
    })
}

/// The agent id of sidechain lines that name no agent (Claude Code 2.0 wrote some into the
/// session file): one chain of their own, never the main chain.
pub const UNNAMED_SIDECHAIN: &str = "sidechain";

/// The chain a line belongs to: its `agentId` (or its file's) when it is a sidechain.
fn chain_of(line: &Line, context: &FileContext) -> Chain {
    let agent = line.agent_id.map(str::to_string).or_else(|| context.agent_id.clone());
    match (line.is_sidechain, agent) {
        (Some(true), Some(id)) => Chain::Agent(id),
        (Some(true), None) => Chain::Agent(UNNAMED_SIDECHAIN.to_string()),
        (None, Some(id)) if context.agent_id.is_some() => Chain::Agent(id),
        _ => Chain::Main,
    }
}

/// `agent-<id>.jsonl` → `<id>`.
fn agent_id_of_file_name(name: &str) -> Option<String> {
    let file = name.rsplit(['/', '\\']).next()?;
    let id = file.strip_prefix("agent-")?.strip_suffix(".jsonl")?;
    (!id.is_empty()).then(|| id.to_string())
}

/// The blocks of a content array (a string content has none).
fn blocks(content: &str) -> Vec<ContentBlock<'_>> {
    serde_json::from_str(content).unwrap_or_default()
}

/// `agentId: <id>` in a tool result's text, the form Claude Code writes for the model.
fn agent_id_in_text(content: &str) -> Option<String> {
    let rest = &content[content.find("agentId: ")? + "agentId: ".len()..];
    let id: String =
        rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_').collect();
    (!id.is_empty()).then_some(id)
}

/// The level in `<local-command-stdout>Set effort level to <level>`, what `/effort` prints when
/// it took effect (a bare `/effort` that only showed the level prints something else).
fn effort_set(content: &str) -> Option<&str> {
    const SET: &str = "<local-command-stdout>Set effort level to ";
    let rest = &content[content.find(SET)? + SET.len()..];
    let level = &rest[..rest.find(|c: char| !c.is_ascii_alphanumeric()).unwrap_or(rest.len())];
    (!level.is_empty()).then_some(level)
}

/// `2026-04-02T08:45:12.345Z` (fraction and `Z` optional, or a `±hh:mm` offset) → ms since the
/// epoch.
pub fn parse_timestamp(text: &str) -> Option<EpochMs> {
    let bytes = text.as_bytes();
    if bytes.len() < 19 || bytes[4] != b'-' || bytes[7] != b'-' || bytes[10] != b'T' {
        return None;
    }
    let number = |range: std::ops::Range<usize>| text.get(range)?.parse::<i64>().ok();
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut rest = &text[19..];
    let mut millis = 0i64;
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        let padded = format!("{:0<3}", &fraction[..digits.min(3)]);
        millis = padded.parse().ok()?;
        rest = &fraction[digits..];
    }
    let offset_minutes = match rest {
        "" | "Z" => 0,
        _ => {
            let sign = match rest.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let hours: i64 = rest.get(1..3)?.parse().ok()?;
            let minutes: i64 = rest.get(4..6)?.parse().ok()?;
            sign * (hours * 60 + minutes)
        }
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
    Some(seconds * 1000 + millis)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let shifted_month = (month + 9) % 12;
    let day_of_year = (153 * shifted_month + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// `YYYY-MM-DD` of an ISO timestamp (the day its requests are totalled under).
pub fn day_of(at: &str) -> &str {
    at.get(..10).unwrap_or(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_epoch_milliseconds() {
        // 2026-04-02: 20,545 days after 1970-01-01 (56 years incl. 14 leap days = 20,454, plus
        // 91 days of Jan–Mar 2026 = 20,545). 08:45:12.345 = 31,512,345 ms.
        assert_eq!(parse_timestamp("2026-04-02T08:45:12.345Z"), Some(20_545 * 86_400_000 + 31_512_345));
        assert_eq!(parse_timestamp("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_timestamp("1970-01-01T01:00:00+01:00"), Some(0));
        assert_eq!(parse_timestamp("1970-01-01T00:00:00.5Z"), Some(500));
        assert_eq!(parse_timestamp("yesterday"), None);
    }

    #[test]
    fn known_field_lists_are_sorted_for_binary_search() {
        for list in [KNOWN_LINE_FIELDS, KNOWN_MESSAGE_FIELDS] {
            assert!(list.windows(2).all(|pair| pair[0] < pair[1]), "{list:?}");
        }
    }

    #[test]
    fn line_not_utf8_is_skipped_and_counted_not_fatal() {
        // Line 2 holds a lone 0xff at its 9th byte (after the 8 of `{"type":`); line 3 is a last line cut inside "é"
        // (0xc3 0xa9 torn after 0xc3).
        let mut file = b"{\"type\":\"summary\"}\n".to_vec();
        file.extend_from_slice(b"{\"type\":\xff\"user\"}\n{\"type\":\"caf\xc3");
        let mut reader = TranscriptReader::new();
        reader.read("s.jsonl", &file[..]).expect("a line that is not UTF-8 is skipped, not an error");
        let stats = reader.finish().stats;
        assert_eq!(stats.lines, 3);
        assert_eq!(stats.skipped_lines, 2);
        assert!(stats.notes.contains(&"s.jsonl:2: not UTF-8 (byte 9)".to_string()), "{:?}", stats.notes);
        assert!(stats.notes.contains(&"s.jsonl:3: torn last line".to_string()), "{:?}", stats.notes);
    }

    #[test]
    fn agent_file_names_give_the_agent_id() {
        assert_eq!(agent_id_of_file_name("s/subagents/agent-a1b2.jsonl").as_deref(), Some("a1b2"));
        assert_eq!(agent_id_of_file_name("session.jsonl"), None);
    }
}
