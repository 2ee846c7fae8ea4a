//! Reading the user's JSON files (scenarios, sweeps, scripts) with errors that name the field
//! at fault, and serde_json messages without the position suffix a path already replaces.

use serde::de::DeserializeOwned;

/// A JSON document that did not read.
#[derive(Debug)]
pub(crate) struct FieldError {
    /// The field's path (`timeline[0].fork.count`), or the document's name for the whole of it.
    pub path: String,
    /// What is wrong, without where.
    pub message: String,
    /// Line and column, when serde knows them.
    pub position: Option<(usize, usize)>,
}

impl FieldError {
    /// The message followed by `(line L column C)` when known.
    pub fn message_at(&self) -> String {
        match self.position {
            Some((line, column)) => format!("{} (line {line} column {column})", self.message),
            None => self.message.clone(),
        }
    }
}

/// Reads a JSON object into `T`; `root` names the document in errors about the whole of it.
/// Anything but an object is refused, because serde would also take a struct written as an
/// array (so `[]` would pass as a default document).
pub(crate) fn read_object<T: DeserializeOwned>(text: &str, root: &str) -> Result<T, FieldError> {
    if !text.trim_start().starts_with('{') {
        let message = "expected a JSON object".to_string();
        return Err(FieldError { path: root.to_string(), message, position: None });
    }
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|err| {
        let path = err.path().to_string();
        let path = if path == "." { root.to_string() } else { path };
        let inner = err.into_inner();
        let position = (inner.line() > 0).then(|| (inner.line(), inner.column()));
        FieldError { path, message: without_position(&inner), position }
    })
}

/// serde_json's message without its trailing ` at line L column C`.
pub(crate) fn without_position(err: &serde_json::Error) -> String {
    let text = err.to_string();
    match text.rfind(" at line ") {
        Some(cut) => text[..cut].to_string(),
        None => text,
    }
}
