//! `--redact`: a trace that can be shared and still replays.
//!
//! Every string a user wrote or a tool returned is rewritten in place, one character for one
//! character of the same kind: a lowercase letter for a lowercase letter, a digit for a digit, a
//! character of the same UTF-8 width for any other non-ASCII character. ASCII punctuation,
//! whitespace and escapes stay where they were. So every block keeps its exact byte length (the
//! default tokenizer counts the same tokens) and its shape (a path still reads `/x/yy.z`, a
//! stop sequence is still not blank).
//!
//! Which characters replace a string's follows from a cryptographic hash (BLAKE3) of the string
//! itself: the same string is rewritten the same way wherever it appears (a repeated prefix is
//! still a repeated prefix, a tool's name in `tools` still matches its `tool_use`), and different
//! strings come out different except with the odds of two random strings of their length and
//! kinds being equal (1 in 26 for one letter, 1 in 26⁸ for eight). Nothing is salted: a short
//! string can be found again by trying every candidate, and a reader of the trace learns each
//! string's length and the place of its punctuation.
//!
//! Only what users and tools write is rewritten: the request's `system`, `messages`, `tools`,
//! `tool_choice`, `metadata`, `stop_sequences` and `mcp_servers`. The rest of a request is its
//! configuration (`model`, `thinking`, effort, context management, `max_tokens` …), kept as sent:
//! it is part of what the cache keys on. Within the written members these stay in clear too,
//! because the cache or the API's checks need them as they are: object keys, numbers and
//! booleans, every `type`, `role`, `id` and `tool_use_id`, media types, `cache_control`, Claude
//! Code's billing line (a system text the API leaves out of the cache), the names of server tools
//! (`web_search`, `bash` …, which the API fixes), a JSON schema's `type`, `format`, `pattern`,
//! `$ref` and `required`, and a URL's scheme. Base64 (an image's or document's `data`, a thinking
//! `signature`) stays valid base64 of the same length, its padding and its last character's
//! unused bits intact; an image keeps its format, width and height, which it is billed by.

use base64::Engine as _;
use serde_json::{Map, Value};

use forkcache_engine::prompt::BILLING_HEADER_PREFIX;
use forkcache_engine::prompt::image::{ImageFormat, ImageSize, image_size};

/// The request's members that hold what users and tools wrote; every other member is
/// configuration, kept.
const WRITTEN_MEMBERS: [&str; 7] =
    ["system", "messages", "tools", "tool_choice", "metadata", "stop_sequences", "mcp_servers"];

/// Members of the written ones whose string value is structure, kept as it is (outside free
/// JSON: a tool's input and `metadata` are the user's).
const KEPT_KEYS: [&str; 6] = ["type", "role", "id", "tool_use_id", "media_type", "cache_control"];

/// Members of a JSON schema whose strings are structure: the schema must stay a valid schema
/// whose `required` names its (kept) property keys.
const KEPT_SCHEMA_KEYS: [&str; 6] = ["type", "format", "pattern", "$ref", "$schema", "required"];

/// Members holding free JSON (a tool's input; the request's `metadata` is too): every string in
/// it is the user's, whatever its key.
const FREE_KEYS: [&str; 1] = ["input"];

/// The hash contexts: a text and a base64 string of the same characters are rewritten apart.
const TEXT_CONTEXT: &str = "forkcache 2026 redact text";
const BASE64_CONTEXT: &str = "forkcache 2026 redact base64";

/// Members that hold base64 when the API sends or takes it.
const BASE64_KEYS: [&str; 2] = ["data", "signature"];

/// The body with every written string rewritten. A body that is not JSON keeps what lies
/// outside its string literals (so a refusal for a number out of range or a lone surrogate
/// replays as the same refusal); one that is not UTF-8 is dropped.
pub fn redact(body: &[u8]) -> Vec<u8> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(mut request)) => {
            let server_tools = server_tool_names(&request);
            for (member, value) in request.iter_mut() {
                match member.as_str() {
                    "metadata" => redact_all_but(value, &[]),
                    member if WRITTEN_MEMBERS.contains(&member) => redact_value(value, &server_tools),
                    _ => {}
                }
            }
            Value::Object(request).to_string().into_bytes()
        }
        Ok(mut other) => {
            redact_all_but(&mut other, &[]);
            other.to_string().into_bytes()
        }
        Err(_) => match std::str::from_utf8(body) {
            Ok(text) => redact_literals(text).into_bytes(),
            Err(_) => Vec::new(),
        },
    }
}

/// Names of the tools the API defines (a `type` other than `custom`): their names are fixed by
/// the API, so they stay.
fn server_tool_names(request: &Map<String, Value>) -> Vec<String> {
    let tools = request.get("tools").and_then(Value::as_array).into_iter().flatten();
    tools
        .filter(|tool| tool.get("type").and_then(Value::as_str).is_some_and(|kind| kind != "custom"))
        .filter_map(|tool| tool.get("name").and_then(Value::as_str).map(str::to_string))
        .collect()
}

fn redact_object(object: &mut Map<String, Value>, server_tools: &[String]) {
    for (key, value) in object.iter_mut() {
        match (key.as_str(), value) {
            (key, _) if KEPT_KEYS.contains(&key) => {}
            ("name", Value::String(name)) if server_tools.contains(name) => {}
            ("text", Value::String(text)) if text.starts_with(BILLING_HEADER_PREFIX) => {}
            ("input_schema", schema) => redact_all_but(schema, &KEPT_SCHEMA_KEYS),
            (key, value) if FREE_KEYS.contains(&key) => redact_all_but(value, &[]),
            (key, Value::String(text)) if BASE64_KEYS.contains(&key) && is_base64(text) => {
                *text = redact_base64(text);
            }
            ("url", Value::String(url)) => *url = redact_url(url),
            (_, value) => redact_value(value, server_tools),
        }
    }
}

fn redact_value(value: &mut Value, server_tools: &[String]) {
    match value {
        Value::String(text) => *text = redact_text(text),
        Value::Array(items) => items.iter_mut().for_each(|item| redact_value(item, server_tools)),
        Value::Object(object) => redact_object(object, server_tools),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Every string of `value` rewritten but those under a `kept` member; keys stay. Free JSON keeps
/// nothing (its keys are the schema's); a schema keeps its structure ([`KEPT_SCHEMA_KEYS`]) and
/// has its descriptions, titles, enums and examples rewritten.
fn redact_all_but(value: &mut Value, kept: &[&str]) {
    match value {
        Value::String(text) => *text = redact_text(text),
        Value::Array(items) => items.iter_mut().for_each(|item| redact_all_but(item, kept)),
        Value::Object(object) => object
            .iter_mut()
            .filter(|(key, _)| !kept.contains(&key.as_str()))
            .for_each(|(_, value)| redact_all_but(value, kept)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// `scheme://` stays, so the URL is still one; the rest is text.
fn redact_url(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => format!("{scheme}://{}", redact_text(rest)),
        None => redact_text(url),
    }
}

/// The stream of choices for one string: BLAKE3's extendable output over the string, under a
/// context of its own so a text and a base64 string of the same characters differ.
struct Choices(blake3::OutputReader);

impl Choices {
    fn of(context: &str, text: &str) -> Choices {
        let mut hasher = blake3::Hasher::new_derive_key(context);
        hasher.update(text.as_bytes());
        Choices(hasher.finalize_xof())
    }

    /// A number below `count`, uniform to within 2⁻³² (the draw is 64 bits).
    fn below(&mut self, count: u32) -> u32 {
        let mut bytes = [0; 8];
        self.0.fill(&mut bytes);
        (u64::from_le_bytes(bytes) % u64::from(count)) as u32
    }
}

/// One character for each: letters, digits and non-ASCII characters are replaced by their kind,
/// everything else stays.
fn redact_text(text: &str) -> String {
    let mut choices = Choices::of(TEXT_CONTEXT, text);
    text.chars().map(|c| replacement(c, &mut choices)).collect()
}

fn replacement(c: char, choices: &mut Choices) -> char {
    let mut from = |first: char, count: u32| -> char {
        char::from_u32(first as u32 + choices.below(count)).unwrap_or(first)
    };
    match c.len_utf8() {
        1 if c.is_ascii_lowercase() => from('a', 26),
        1 if c.is_ascii_uppercase() => from('A', 26),
        1 if c.is_ascii_digit() => from('0', 10),
        1 => c,
        // Latin-1 and Latin Extended letters (U+00C0..U+024F), two bytes each.
        2 => from('\u{c0}', 0x190),
        // CJK Unified Ideographs (U+4E00..U+9FFF), three bytes each.
        3 => from('\u{4e00}', 0x5200),
        // CJK Extension B (U+20000..U+2A6DF), four bytes each.
        _ => from('\u{20000}', 0xa6e0),
    }
}

const BASE64_ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard padded base64, as the API's checks take it.
fn is_base64(text: &str) -> bool {
    forkcache_wire::check::is_base64(text)
}

/// Base64 of the same length: every alphabet character replaced by one, padding kept, and the
/// character before the padding carrying zeros in the bits it does not use (a strict decoder
/// refuses anything else). An image keeps its format and size, which is what it is billed by:
/// its bytes become a bare header of its format with the same width and height, then noise.
fn redact_base64(text: &str) -> String {
    let mut choices = Choices::of(BASE64_CONTEXT, text);
    let padding = text.bytes().rev().take_while(|&b| b == b'=').count();
    if let Some(size) = image_size(text) {
        let mut bytes = image_header(size);
        let header = bytes.len();
        let length = text.len() / 4 * 3 - padding;
        if header <= length {
            bytes.resize(length, 0);
            choices.0.fill(&mut bytes[header..]);
            return base64::engine::general_purpose::STANDARD.encode(bytes);
        }
    }
    let body = text.len() - padding;
    // "xx==" encodes one byte: the second character's low 4 bits are unused; "xxx=" two bytes:
    // the third's low 2 bits.
    let unused_bits = [0, 2, 4][padding];
    let mut out = String::with_capacity(text.len());
    for index in 0..body {
        let value = if index + 1 == body {
            choices.below(64 >> unused_bits) << unused_bits
        } else {
            choices.below(64)
        };
        out.push(char::from(BASE64_ALPHABET[value as usize]));
    }
    out.push_str(&text[body..]);
    out
}

/// The fewest bytes of an image of `size`'s format from which its size is read again.
fn image_header(size: ImageSize) -> Vec<u8> {
    let (width, height) = (size.width, size.height);
    let mut header = Vec::with_capacity(32);
    match size.format {
        ImageFormat::Png => {
            header.extend_from_slice(b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR");
            header.extend_from_slice(&width.to_be_bytes());
            header.extend_from_slice(&height.to_be_bytes());
        }
        ImageFormat::Gif => {
            header.extend_from_slice(b"GIF89a");
            header.extend_from_slice(&(width as u16).to_le_bytes());
            header.extend_from_slice(&(height as u16).to_le_bytes());
        }
        ImageFormat::Webp => {
            // VP8X: flags, then the sizes less one in 24 bits each.
            header.extend_from_slice(b"RIFF\x00\x00\x00\x00WEBPVP8X\x0a\x00\x00\x00\x00\x00\x00\x00");
            header.extend_from_slice(&(width - 1).to_le_bytes()[..3]);
            header.extend_from_slice(&(height - 1).to_le_bytes()[..3]);
        }
        ImageFormat::Jpeg => {
            // Start of image, then a baseline frame header: length 17, precision 8, the sizes.
            header.extend_from_slice(&[0xff, 0xd8, 0xff, 0xc0, 0x00, 0x11, 0x08]);
            header.extend_from_slice(&(height as u16).to_be_bytes());
            header.extend_from_slice(&(width as u16).to_be_bytes());
        }
    }
    header
}

/// A body that is not JSON: what lies outside string literals stays (numbers, punctuation,
/// whatever made it unreadable), and inside them every escape stays and every other character is
/// rewritten as [`redact_text`] does, literal by literal.
fn redact_literals(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('"') {
        out.push_str(&rest[..=open]);
        rest = &rest[open + 1..];
        let close = literal_end(rest);
        out.push_str(&redact_escaped(&rest[..close]));
        rest = &rest[close..];
        if let Some(quote) = rest.strip_prefix('"') {
            out.push('"');
            rest = quote;
        }
    }
    out.push_str(rest);
    out
}

/// Where the literal that starts at `text` ends: its closing quote, or the end of the text.
fn literal_end(text: &str) -> usize {
    let mut escaped = false;
    for (index, byte) in text.bytes().enumerate() {
        match byte {
            _ if escaped => escaped = false,
            b'\\' => escaped = true,
            b'"' => return index,
            _ => {}
        }
    }
    text.len()
}

/// A literal's contents with its escapes (`\n`, `\"`, `\ud800` …) kept byte for byte.
fn redact_escaped(literal: &str) -> String {
    let mut choices = Choices::of(TEXT_CONTEXT, literal);
    let mut out = String::with_capacity(literal.len());
    let mut chars = literal.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(replacement(c, &mut choices));
            continue;
        }
        out.push(c);
        match chars.next() {
            Some('u') => {
                out.push('u');
                out.extend(chars.by_ref().take(4));
            }
            Some(escaped) => out.push(escaped),
            None => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redacted(body: &str) -> Value {
        serde_json::from_slice(&redact(body.as_bytes())).unwrap()
    }

    #[test]
    fn text_keeps_its_kinds_and_its_punctuation() {
        let text = "Read /etc/hosts, then 42 ÿ 中 𝄞 \"x\"\n";
        let out = redact_text(text);
        assert_eq!(out.len(), text.len());
        assert_ne!(out, text);
        let kinds = |s: &str| -> Vec<(usize, bool, bool, bool)> {
            s.chars()
                .map(|c| (c.len_utf8(), c.is_ascii_lowercase(), c.is_ascii_uppercase(), c.is_ascii_digit()))
                .collect()
        };
        assert_eq!(kinds(&out), kinds(text));
        let punctuation = |s: &str| -> String {
            s.chars().filter(|c| c.is_ascii() && !c.is_ascii_alphanumeric()).collect()
        };
        assert_eq!(punctuation(&out), punctuation(text));
        assert_eq!(redact_text(text), out, "the same string is rewritten the same way");
    }

    #[test]
    fn base64_stays_canonical_base64_of_the_same_length() {
        // "aGk=" is "hi": h=0x68, i=0x69 → 011010 000110 100101 (00): the k's low 2 bits are 0.
        for data in ["aGk=", "aA==", "aGVsbG8h", "c2VjcmV0IGRvY3VtZW50IGJ5dGVz"] {
            let out = redact_base64(data);
            assert_eq!(out.len(), data.len());
            assert_ne!(out, data);
            assert!(is_base64(&out), "{out}");
            let padding = data.bytes().filter(|&b| b == b'=').count();
            assert!(out.ends_with(&"=".repeat(padding)));
            let last = out.as_bytes()[out.len() - padding - 1];
            let value = BASE64_ALPHABET.iter().position(|&b| b == last).unwrap();
            assert_eq!(value % [1, 4, 16][padding], 0, "unused bits of {out} are zero");
        }
    }

    #[test]
    fn an_image_keeps_its_format_and_size_and_nothing_else() {
        let mut png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
        png.extend_from_slice(&1_269u32.to_be_bytes());
        png.extend_from_slice(&299u32.to_be_bytes());
        png.extend_from_slice(b"secret pixels and a tEXt chunk: secret");
        let data = base64::engine::general_purpose::STANDARD.encode(&png);
        let out = redact_base64(&data);
        assert_eq!(out.len(), data.len());
        assert_eq!(image_size(&out), image_size(&data));
        assert_eq!(image_size(&out).map(|s| (s.width, s.height)), Some((1_269, 299)));
        let bytes = base64::engine::general_purpose::STANDARD.decode(&out).unwrap();
        assert!(!bytes.windows(6).any(|w| w == b"secret"));
        for size in [
            ImageSize { format: ImageFormat::Gif, width: 320, height: 240 },
            ImageSize { format: ImageFormat::Webp, width: 640, height: 480 },
            ImageSize { format: ImageFormat::Jpeg, width: 640, height: 480 },
        ] {
            let mut image = image_header(size);
            image.extend_from_slice(&[7; 40]);
            let data = base64::engine::general_purpose::STANDARD.encode(&image);
            assert_eq!(image_size(&redact_base64(&data)), Some(size), "{size:?}");
        }
    }

    /// The six places the issue found left in clear, each rewritten.
    #[test]
    fn nothing_written_is_left_in_clear() {
        let body = r#"{"model":"claude-sonnet-4-5","max_tokens":9,"metadata":{"user_id":"alice-account"},
            "thinking":{"type":"adaptive","display":"omitted"},"output_config":{"effort":"high"},
            "system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=2.1.330.ca6;"},{"type":"text","text":"secret rules"}],
            "stop_sequences":["STOPWORD"],
            "tools":[{"name":"lookup_secret","description":"secret tool","input_schema":{"type":"object","properties":{"q":{"type":"string","description":"secret field","enum":["secretvalue"]}},"required":["q"]}},
                     {"type":"web_search_20250305","name":"web_search"}],
            "messages":[{"role":"user","content":[
                {"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"c2VjcmV0IHBkZg=="}},
                {"type":"image","source":{"type":"base64","media_type":"image/png","data":"c2VjcmV0IGltYWdl"}},
                {"type":"image","source":{"type":"url","url":"https://secret.example/cat.png"}},
                {"type":"text","text":"secret question"}]},
              {"role":"assistant","content":[
                {"type":"thinking","thinking":"secret thought","signature":"c2lnbmF0dXJl"},
                {"type":"tool_use","id":"toolu_1","name":"lookup_secret","input":{"q":"secret query","type":"secret kind"}}]}]}"#;
        let out = redacted(body);
        let text = out.to_string();
        for secret in ["secret", "alice", "STOPWORD", "c2VjcmV0", "c2lnbmF0dXJl"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        let tool_name = out["tools"][0]["name"].as_str().unwrap();
        assert_eq!(out["messages"][1]["content"][1]["name"], tool_name, "a tool keeps one name");
        assert_eq!(tool_name.len(), "lookup_secret".len());
        assert_eq!(out["tools"][1]["name"], "web_search", "the API fixes a server tool's name");
        assert_eq!(out["tools"][0]["input_schema"]["required"][0], "q");
        assert_eq!(out["tools"][0]["input_schema"]["properties"]["q"]["type"], "string");
        assert_eq!(out["messages"][0]["content"][0]["source"]["media_type"], "application/pdf");
        assert!(out["messages"][0]["content"][2]["source"]["url"].as_str().unwrap().starts_with("https://"));
        assert_eq!(out["messages"][1]["content"][1]["id"], "toolu_1");
        assert_eq!(out["model"], "claude-sonnet-4-5");
        // Configuration is part of the cache key, and the billing line is left out of it.
        assert_eq!(out["thinking"]["display"], "omitted");
        assert_eq!(out["output_config"]["effort"], "high");
        assert_eq!(out["system"][0]["text"], "x-anthropic-billing-header: cc_version=2.1.330.ca6;");
    }

    #[test]
    fn a_body_that_is_not_json_keeps_what_made_it_unreadable() {
        let body = r#"{"model":"m","max_tokens":1e400,"messages":[{"role":"user","content":"secret \ud800 \"q\""}]}"#;
        let out = String::from_utf8(redact(body.as_bytes())).unwrap();
        assert_eq!(out.len(), body.len());
        assert!(out.contains(":1e400,") && out.contains(r#" \ud800 \""#), "{out}");
        assert!(!out.contains("secret") && !out.contains("model"), "{out}");
        assert!(redact(b"\xff\xfe").is_empty());
    }
}
