//! An import's charts and page, drawn from its report (`import claude-code --chart DIR`,
//! `--html DIR`; `import codex --html DIR`).

pub mod chart;
pub mod codex;
pub mod html;
