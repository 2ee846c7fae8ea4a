//! Reading the user's JSON files (scenarios, sweeps, scripts) with errors that name the field
//! at fault, say in plain words what was expected there (not Rust's type names), and suggest the
//! field or value meant when a name is misspelt.

use serde::de::DeserializeOwned;

/// A JSON document that did not read.
#[derive(Debug)]
pub struct FieldError {
    /// The field's path (`timeline[0].fork.count`), or the document's name for the whole of it.
    pub path: String,
    /// What is wrong, without where.
    pub message: String,
    /// Line and column, when serde knows them.
    pub position: Option<(usize, usize)>,
}

impl FieldError {
    /// The message followed by `(line L, column C)` when known.
    pub fn message_at(&self) -> String {
        match self.position {
            Some((line, column)) => format!("{} (line {line}, column {column})", self.message),
            None => self.message.clone(),
        }
    }
}

/// Reads a JSON object into `T`; `root` names the document in errors about the whole of it.
/// Anything but an object is refused, because serde would also take a struct written as an
/// array (so `[]` would pass as a default document).
pub fn read_object<T: DeserializeOwned>(text: &str, root: &str) -> Result<T, FieldError> {
    if !text.trim_start().starts_with('{') {
        let message = "expected a JSON object".to_string();
        return Err(FieldError { path: root.to_string(), message, position: None });
    }
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        // A syntax error has no field (the path ends in `?`): the line and column say where.
        let path = if path == "." || inner.is_syntax() || inner.is_eof() { root.to_string() } else { path };
        let position = (inner.line() > 0).then(|| (inner.line(), inner.column()));
        FieldError { message: plain_words(&without_position(&inner), &path), path, position }
    })
}

/// serde_json's message without its trailing ` at line L column C`.
pub fn without_position(err: &serde_json::Error) -> String {
    let text = err.to_string();
    match text.rfind(" at line ") {
        Some(cut) => text[..cut].to_string(),
        None => text,
    }
}

/// serde's message about the field at `path`, in the words of someone writing the file:
/// `invalid type: string "four", expected u32` at `timeline[0].fork.count` becomes `expected a
/// whole number of forks, e.g. 4; found the text "four"`. Messages it does not know pass through.
fn plain_words(message: &str, path: &str) -> String {
    if let Some(rest) =
        message.strip_prefix("invalid type: ").or_else(|| message.strip_prefix("invalid value: "))
    {
        if let Some((found, expected)) = rest.split_once(", expected ") {
            return format!("expected {}; found {}", expected_words(expected, path), found_words(found));
        }
    }
    if let Some(rest) = message.strip_prefix("unknown field ") {
        return unknown_name("field", rest);
    }
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        return unknown_name("value", rest);
    }
    if let Some(rest) = message.strip_prefix("missing field ") {
        return format!("the required field {rest} is missing");
    }
    syntax_words(message).map_or_else(|| message.to_string(), str::to_string)
}

/// What serde expected, said plainly, with the field's unit and an example where known.
fn expected_words(expected: &str, path: &str) -> String {
    let whole = ["u8", "u16", "u32", "u64", "usize", "i8", "i16", "i32", "i64", "isize"];
    if whole.contains(&expected) {
        return format!("a whole number{}", unit_of(path));
    }
    match expected {
        "f32" | "f64" => "a number, e.g. 0.5".into(),
        "a string" => "text in double quotes".into(),
        "a boolean" => "true or false".into(),
        "a sequence" => "a list in [ ]".into(),
        "a map" => "an object in { }".into(),
        _ if expected.starts_with("struct ") => "an object in { }".into(),
        _ => expected.to_string(),
    }
}

/// ` of forks, e.g. 4` for a fork count; `, e.g. 4` when the field is not one of the known ones.
fn unit_of(path: &str) -> &'static str {
    let mut keys = path.rsplit(['.', '[']).filter(|key| !key.ends_with(']'));
    let (field, parent) = (keys.next().unwrap_or(""), keys.next().unwrap_or(""));
    match (parent, field) {
        ("fork", "count") => " of forks, e.g. 4",
        (_, "count") => " of turns, e.g. 3",
        (_, "child_turns") => " of turns each fork runs, e.g. 3",
        (_, "turns") => " of turns, e.g. 30",
        (_, "seed") => ", e.g. 42",
        (_, "forks") => " of forks, e.g. 4",
        (_, field) if field.ends_with("_ms") || field == "ms" => " of milliseconds, e.g. 20000",
        (_, field) if field.ends_with("_tokens") || field == "tokens" => " of tokens, e.g. 100000",
        _ => ", e.g. 4",
    }
}

/// What serde found, said plainly: `string "four"` → `the text "four"`.
fn found_words(found: &str) -> String {
    let unquoted = |text: &str| text.trim_matches('`').to_string();
    if let Some(text) = found.strip_prefix("string ") {
        return format!("the text {text}");
    }
    if let Some(number) = found.strip_prefix("integer ").or_else(|| found.strip_prefix("floating point ")) {
        return format!("the number {}", unquoted(number));
    }
    match found {
        "map" => "an object".into(),
        "sequence" => "a list".into(),
        "null" => "null".into(),
        _ => found.strip_prefix("boolean ").map_or_else(|| found.to_string(), unquoted),
    }
}

/// `unknown field `child_turn`, expected one of …` → `unknown field `child_turn`; did you mean
/// `child_turns`?`, or the names it could be when none is close.
fn unknown_name(what: &str, rest: &str) -> String {
    let names: Vec<&str> = rest.split('`').skip(1).step_by(2).collect();
    let Some((given, known)) = names.split_first() else { return format!("unknown {what} {rest}") };
    if known.is_empty() {
        return format!("unknown {what} `{given}`: this object takes no fields");
    }
    match closest(given, known) {
        Some(name) => format!("unknown {what} `{given}`; did you mean `{name}`?"),
        None => {
            let list: Vec<String> = known.iter().map(|name| format!("`{name}`")).collect();
            format!("unknown {what} `{given}`; expected one of {}", list.join(", "))
        }
    }
}

/// The known name a typo most likely meant: one the given name begins (`last_user` for
/// `last_user_contains`), else the nearest by edit distance (transpositions count once) if it is
/// within a third of the name's length (at least one edit). Ties: the first listed.
fn closest<'a>(given: &str, known: &[&'a str]) -> Option<&'a str> {
    if given.len() >= 3 {
        if let Some(name) = known.iter().find(|name| name.starts_with(given)) {
            return Some(name);
        }
    }
    let limit = (given.chars().count() / 3).max(1);
    let distance = |name: &str| strsim::damerau_levenshtein(&given.to_lowercase(), &name.to_lowercase());
    let best = known.iter().copied().min_by_key(|name| distance(name))?;
    (distance(best) <= limit).then_some(best)
}

/// serde_json's syntax errors, with what usually causes them.
fn syntax_words(message: &str) -> Option<&'static str> {
    Some(match message {
        "trailing comma" => "a comma before a closing `]` or `}`: JSON allows no comma after the last item",
        "expected `,` or `}`" => {
            "expected `,` or `}` after a field's value: is a comma missing between two fields?"
        }
        "expected `,` or `]`" => {
            "expected `,` or `]` after a list item: is a comma missing between two items?"
        }
        "key must be a string" => "a field name must be in double quotes",
        "expected value" => {
            "expected a value here: a number, \"text\", true, false, null, a [list] or an {object}"
        }
        "EOF while parsing an object" | "EOF while parsing a list" | "EOF while parsing a value" => {
            "the file ends before the JSON does: a closing `}` or `]` is missing"
        }
        "EOF while parsing a string" => "the file ends inside a text: a closing `\"` is missing",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_gets_the_name_it_most_likely_meant() {
        let known = ["count", "child_turns", "worktree", "variant"];
        assert_eq!(closest("child_turn", &known), Some("child_turns"));
        assert_eq!(closest("cuont", &known), Some("count"));
        assert_eq!(closest("Worktree", &known), Some("worktree"));
        assert_eq!(closest("launch_mode", &known), None);
        assert_eq!(closest("last_user", &["model", "last_user_contains"]), Some("last_user_contains"));
    }

    #[test]
    fn units_follow_the_field() {
        assert_eq!(unit_of("timeline[0].fork.count"), " of forks, e.g. 4");
        assert_eq!(unit_of("timeline[3].turn.count"), " of turns, e.g. 3");
        assert_eq!(unit_of("timeline[1].idle.ms"), " of milliseconds, e.g. 20000");
        assert_eq!(unit_of("grid.forks[2]"), " of forks, e.g. 4");
        assert_eq!(unit_of("agent.summary_tokens"), " of tokens, e.g. 100000");
    }
}
