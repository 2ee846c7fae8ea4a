//! An import's charts and page, drawn from its report (`import claude-code --chart DIR`,
//! `--html FILE`).

pub mod chart;
pub mod html;
