//! Progress bars on a terminal; none under CI or when standard error is not a terminal, so logs
//! and piped output stay clean.

use std::io::IsTerminal as _;

use indicatif::{ProgressBar, ProgressStyle};

/// A bar counting `total` units of `what`, drawn on standard error, or a hidden one.
pub fn bar(total: u64, what: &str) -> ProgressBar {
    if std::env::var_os("CI").is_some() || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let template = format!("{{bar:40}} {{pos}}/{{len}} {what} · {{elapsed}} elapsed, about {{eta}} left");
    let style = ProgressStyle::with_template(&template).unwrap_or_else(|_| ProgressStyle::default_bar());
    ProgressBar::new(total).with_style(style)
}
