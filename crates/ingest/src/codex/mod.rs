//! `import codex`: Codex CLI and Codex Desktop rollout files priced, explained and re-simulated
//! under OpenAI's cache rules ([`forkcache_engine::cache::openai`]).

pub mod analysis;
pub mod rollout;

pub use analysis::{CodexOptions, CodexReport, CodexWhatIf, analyse};
pub use rollout::{CodexRequest, CodexThread, Compaction, RolloutError, TokenUsage, read_rollout};
