//! Every real request passes the API's own checks (`forkcache_wire::check`): a rule that refuses
//! a request the real API answered is wrong. Walks every envelope of
//! `../shared/corpus/captures/envelopes/` (skipped, saying so, when the corpus is absent) and
//! every body of `fixtures/clients/`.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;

use forkcache_wire::{Betas, check::check_request, parse_request_str};

/// The betas an envelope names (`betas`), none when it names none.
pub fn betas_of(envelope: &Value) -> Betas {
    let names = envelope["betas"].as_array().map(Vec::as_slice).unwrap_or_default();
    Betas::from_names(names.iter().filter_map(Value::as_str))
}

/// Checks one request body; returns its refusal, naming `what`.
fn refusal(what: &str, body: &Value, betas: &Betas) -> Option<String> {
    // Some envelopes carry the body as the JSON text the client sent, a string.
    let text = body.as_str().map_or_else(|| body.to_string(), str::to_string);
    let view = match parse_request_str(&text) {
        Ok(view) => view,
        Err(err) => {
            return Some(format!(
                "{what}: does not parse: {}",
                err.message.chars().take(300).collect::<String>()
            ));
        }
    };
    let shown = |message: &str| message.chars().take(300).collect::<String>();
    check_request(&view, betas).err().map(|err| format!("{what}: {}", shown(&err.message)))
}

/// Every envelope line of `text` (a JSON line with a `body`), checked.
fn refusals_in_lines(name: &str, text: &str) -> (usize, Vec<String>) {
    let mut seen = 0;
    let mut refused = Vec::new();
    for (index, line) in text.lines().enumerate().filter(|(_, line)| !line.trim().is_empty()) {
        let envelope: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{name}:{}: {e}", index + 1));
        let Some(body) = envelope.get("body") else { continue };
        seen += 1;
        refused.extend(refusal(&format!("{name}:{}", index + 1), body, &betas_of(&envelope)));
    }
    (seen, refused)
}

/// The files of `dir`, sorted.
pub fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    files
}

/// Every capture file of `../shared/corpus/captures/envelopes/` as (file name, its envelope
/// lines); none, saying so, when the corpus is absent.
pub fn captured_envelopes() -> Option<Vec<(String, String)>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/captures/envelopes");
    if !dir.is_dir() {
        eprintln!("skipped: ../shared/corpus/captures/envelopes is absent");
        return None;
    }
    let files = files_in(&dir).into_iter().filter(|p| p.to_string_lossy().ends_with(".jsonl.gz"));
    let read = |path: PathBuf| {
        let mut text = String::new();
        flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap()).read_to_string(&mut text).unwrap();
        (path.file_name().unwrap().to_string_lossy().into_owned(), text)
    };
    Some(files.map(read).collect())
}

#[test]
fn every_captured_request_passes_the_strict_checks() {
    let Some(captures) = captured_envelopes() else { return };
    let mut seen = 0;
    let mut refused = Vec::new();
    for (name, text) in captures {
        let (count, found) = refusals_in_lines(&name, &text);
        seen += count;
        refused.extend(found);
    }
    // The corpus README: 115 proxy-recorded requests plus 64 from SDK cassettes, at least (the
    // `ASSEMBLED_` envelopes repeat some cassettes' requests).
    assert!(seen >= 115 + 64, "requests read: {seen}");
    assert!(refused.is_empty(), "{} refused:\n{}", refused.len(), refused.join("\n"));
}

#[test]
fn every_client_fixture_passes_the_strict_checks() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/clients");
    let mut seen = 0;
    let mut refused = Vec::new();
    for path in files_in(&dir) {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        if name.ends_with(".jsonl") {
            let (count, found) = refusals_in_lines(&name, &text);
            seen += count;
            refused.extend(found);
        } else if name.ends_with(".json") {
            let body: Value = serde_json::from_str(&text).unwrap();
            seen += 1;
            refused.extend(refusal(&name, &body, Betas::NONE));
        }
    }
    assert!(seen >= 2, "client fixtures read: {seen}");
    assert!(refused.is_empty(), "{} refused:\n{}", refused.len(), refused.join("\n"));
}
