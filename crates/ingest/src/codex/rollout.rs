//! Reads Codex rollout files (`~/.codex/sessions/…/rollout-*.jsonl`) into threads of requests,
//! following the rules `../shared/corpus/codex/FORMAT.md` states: a `token_count` record is a
//! request unless its `info` is null, its `last_token_usage` is all zero but `total_tokens` (the
//! estimate written after a compaction), or its `total_token_usage` repeats the previous one; a
//! total that rose by more than the record's own usage carries a request whose record is
//! missing; a forked file's copy of its parent's history (everything before its second
//! `task_started`) is not its own, and its last copied total is subtracted.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::transcript::parse_timestamp;

/// The four counts of a rollout usage object (`input_tokens` includes the cached ones,
/// `output_tokens` the reasoning ones).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    /// Every input token, cached included.
    #[serde(default)]
    pub input_tokens: u64,
    /// Input tokens read from the cache.
    #[serde(default)]
    pub cached_input_tokens: u64,
    /// Output tokens, reasoning included.
    #[serde(default)]
    pub output_tokens: u64,
    /// Reasoning tokens (inside `output_tokens`).
    #[serde(default)]
    pub reasoning_output_tokens: u64,
    /// `input_tokens + output_tokens`.
    #[serde(default)]
    pub total_tokens: u64,
}

impl TokenUsage {
    /// `self − earlier`, field by field; `None` when some field went down.
    fn minus(&self, earlier: &TokenUsage) -> Option<TokenUsage> {
        Some(TokenUsage {
            input_tokens: self.input_tokens.checked_sub(earlier.input_tokens)?,
            cached_input_tokens: self.cached_input_tokens.checked_sub(earlier.cached_input_tokens)?,
            output_tokens: self.output_tokens.checked_sub(earlier.output_tokens)?,
            reasoning_output_tokens: self
                .reasoning_output_tokens
                .checked_sub(earlier.reasoning_output_tokens)?,
            total_tokens: self.total_tokens.checked_sub(earlier.total_tokens)?,
        })
    }

    fn is_zero_but_total(&self) -> bool {
        self.input_tokens == 0 && self.output_tokens == 0 && self.cached_input_tokens == 0
    }
}

/// How the history was replaced before a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Compaction {
    /// A summarising request of the thread's own (counted as a request).
    Local,
    /// A call to the Responses compact endpoint: its usage is not in the file.
    Remote,
}

/// One Responses API request of a thread.
#[derive(Clone, Debug, PartialEq)]
pub struct CodexRequest {
    /// 1-based line of its `token_count` record.
    pub line: usize,
    /// The record's timestamp as written (`None` for a request whose record is missing).
    pub timestamp: Option<String>,
    /// The same, in ms since the epoch.
    pub end_ms: Option<i64>,
    /// When the request can have started at the latest known point: the turn's `task_started`
    /// when one came after the previous request, else the previous request's end.
    pub start_ms: Option<i64>,
    /// `model` of the last `turn_context` (`None` before any).
    pub model: Option<String>,
    /// The rollout's own usage object (`last_token_usage`), its field names kept.
    pub usage: Value,
    /// Its counts.
    pub tokens: TokenUsage,
    /// The request's own record is missing: its usage is the unexplained rise of the total.
    pub inferred: bool,
    /// The history was replaced since the previous request.
    pub after_compaction: Option<Compaction>,
}

/// One thread: one rollout file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CodexThread {
    /// The file it was read from.
    pub file: String,
    /// `session_meta.id`.
    pub id: String,
    /// The parent thread of a sub-agent.
    pub parent: Option<String>,
    /// `forked_from_id`: the file begins with a copy of that thread's history.
    pub forked_from: Option<String>,
    /// `model_provider` (`openai` or a custom provider's name).
    pub provider: String,
    /// `originator` (`codex-tui`, `Codex Desktop`, …).
    pub originator: String,
    /// `cli_version`.
    pub cli_version: String,
    /// Its requests in order.
    pub requests: Vec<CodexRequest>,
    /// Times of remote compactions (no usage recorded).
    pub remote_compactions: Vec<String>,
    /// The thread's own totals: the last `total_token_usage` minus the inherited one.
    pub totals: TokenUsage,
    /// The copied parent total a forked file's own totals continue from.
    pub inherited: TokenUsage,
}

/// A rollout that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RolloutError {
    /// A line is not JSON of the expected shape.
    #[error("{file}:{line}: {message}")]
    Line {
        /// The file.
        file: String,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The file could not be read.
    #[error("{file}: {source}")]
    Io {
        /// The file.
        file: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The file has no `session_meta` line.
    #[error("{file}: no session_meta record: not a Codex rollout file")]
    NoMeta {
        /// The file.
        file: String,
    },
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    timestamp: std::borrow::Cow<'a, str>,
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(default)]
    payload: Value,
}

#[derive(Deserialize)]
struct TokenInfo {
    total_token_usage: TokenUsage,
    last_token_usage: Value,
}

/// Whether a line can matter: the bulk (response items, UI events) is skipped unparsed, which
/// is what makes reading fast. Every writer seen puts the envelope's `type` right after the
/// timestamp and an event's own `type` first in its payload, so the line's head decides; a line
/// whose head does not say is parsed.
fn relevant(line: &[u8]) -> bool {
    let head = &line[..line.len().min(160)];
    let has = |needle: &[u8]| memchr::memmem::find(head, needle).is_some();
    if has(b"\"type\":\"response_item\"") {
        return false;
    }
    if has(b"\"type\":\"event_msg\",\"payload\":{\"type\":") {
        return has(b"\"token_count\"") || has(b"\"task_started\"");
    }
    true
}

#[derive(Default)]
struct State {
    thread: CodexThread,
    seen_meta: bool,
    model: Option<String>,
    task_starts: usize,
    previous_total: TokenUsage,
    previous_end: Option<i64>,
    turn_start: Option<i64>,
    pending_compaction: Option<Compaction>,
}

/// Reads one rollout file's text.
pub fn read_rollout(file: &str, text: &[u8]) -> Result<CodexThread, RolloutError> {
    let mut state = State::default();
    state.thread.file = file.to_string();
    for (index, line) in text.split(|&b| b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) || !relevant(line) {
            continue;
        }
        let error = |message: String| RolloutError::Line { file: file.to_string(), line: index + 1, message };
        let envelope: Envelope = serde_json::from_slice(line).map_err(|e| error(e.to_string()))?;
        state.line(index + 1, envelope).map_err(error)?;
    }
    if !state.seen_meta {
        return Err(RolloutError::NoMeta { file: file.to_string() });
    }
    state.thread.totals = state.previous_total.minus(&state.thread.inherited).unwrap_or_default();
    Ok(state.thread)
}

impl State {
    fn line(&mut self, line: usize, envelope: Envelope) -> Result<(), String> {
        let time = parse_timestamp(&envelope.timestamp);
        match envelope.kind.as_ref() {
            "session_meta" => self.meta(&envelope.payload),
            "turn_context" => {
                if let Some(model) = envelope.payload.get("model").and_then(Value::as_str) {
                    self.model = Some(model.to_string());
                }
            }
            "compacted" => {
                let message = envelope.payload.get("message").and_then(Value::as_str).unwrap_or("");
                let kind = if message.is_empty() { Compaction::Remote } else { Compaction::Local };
                if self.own() {
                    self.pending_compaction = Some(kind);
                    if kind == Compaction::Remote {
                        self.thread.remote_compactions.push(envelope.timestamp.to_string());
                    }
                }
            }
            "event_msg" => match envelope.payload.get("type").and_then(Value::as_str) {
                Some("task_started") => {
                    self.task_starts += 1;
                    self.turn_start = time;
                }
                Some("token_count") => self.token_count(line, &envelope, time)?,
                _ => {}
            },
            _ => {}
        }
        Ok(())
    }

    fn meta(&mut self, payload: &Value) {
        if self.seen_meta {
            return; // resumes, and a fork's copy of its parent's header
        }
        self.seen_meta = true;
        let text = |key: &str| payload.get(key).and_then(Value::as_str).map(str::to_string);
        let thread = &mut self.thread;
        thread.id = text("id").unwrap_or_default();
        thread.provider = text("model_provider").unwrap_or_else(|| "openai".to_string());
        thread.originator = text("originator").unwrap_or_default();
        thread.cli_version = text("cli_version").unwrap_or_default();
        thread.forked_from = text("forked_from_id");
        let spawn = payload.pointer("/source/subagent/thread_spawn/parent_thread_id").and_then(Value::as_str);
        thread.parent = text("parent_thread_id").or_else(|| spawn.map(str::to_string));
    }

    /// Whether records are the thread's own: a forked file's are only from its second
    /// `task_started` on.
    fn own(&self) -> bool {
        self.thread.forked_from.is_none() || self.task_starts >= 2
    }

    fn token_count(&mut self, line: usize, envelope: &Envelope, time: Option<i64>) -> Result<(), String> {
        let info = match envelope.payload.get("info") {
            None | Some(Value::Null) => return Ok(()),
            Some(info) => TokenInfo::deserialize(info).map_err(|e| format!("token_count info: {e}"))?,
        };
        let total = info.total_token_usage;
        if !self.own() {
            self.thread.inherited = total;
            self.previous_total = total;
            return Ok(());
        }
        let last = TokenUsage::deserialize(&info.last_token_usage)
            .map_err(|e| format!("token_count info.last_token_usage: {e}"))?;
        // A post-compaction estimate, or a repeat with a fresh rate-limit snapshot.
        if last.is_zero_but_total() || total == self.previous_total {
            return Ok(());
        }
        let rise = total
            .minus(&self.previous_total)
            .ok_or_else(|| "token_count total_token_usage went down from the previous record".to_string())?;
        if let Some(missing) = rise.minus(&last).filter(|gap| gap.input_tokens > 0) {
            self.push(line, None, usage_object(&missing), missing, true);
        }
        self.push(line, Some((envelope.timestamp.to_string(), time)), info.last_token_usage, last, false);
        self.previous_total = total;
        Ok(())
    }

    fn push(
        &mut self,
        line: usize,
        stamp: Option<(String, Option<i64>)>,
        usage: Value,
        tokens: TokenUsage,
        inferred: bool,
    ) {
        let end_ms = stamp.as_ref().and_then(|(_, ms)| *ms);
        let start_ms = match (self.turn_start, self.previous_end) {
            (Some(turn), Some(previous)) if turn > previous => Some(turn),
            (_, Some(previous)) => Some(previous),
            (turn, None) => turn,
        };
        self.thread.requests.push(CodexRequest {
            line,
            timestamp: stamp.map(|(text, _)| text),
            end_ms,
            start_ms,
            model: self.model.clone(),
            usage,
            tokens,
            inferred,
            after_compaction: self.pending_compaction.take(),
        });
        if end_ms.is_some() {
            self.previous_end = end_ms;
        }
    }
}

/// A usage object in the rollout's field names, for a request whose record is missing.
fn usage_object(tokens: &TokenUsage) -> Value {
    serde_json::to_value(tokens).unwrap_or(Value::Null)
}
