//! A recorded `usage` object kept compactly until it is written out again: its text with every
//! whole number taken out (the *shape*, shared by every object of that shape) and the numbers in
//! order. A 1 GB import holds about 200,000 such objects; most share a handful of shapes, so each
//! costs its numbers, not its ~400 bytes of text. Putting the numbers back gives the text exactly
//! as recorded.
//!
//! Each shape also knows whether its texts are *canonical*: spelled exactly as `serde_json`
//! writes the value they hold (compact, keys unique, its own number and string forms). A
//! canonical text can be copied into a JSON document as it is; any other is parsed and written
//! again, so a document never depends on how a usage object happened to be spelled.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

/// Where a number was taken out of a shape.
const HOLE: char = '\u{0}';

/// A JSON text as its shape and its whole numbers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompactJson {
    shape: Arc<str>,
    numbers: Box<[u64]>,
    canonical: bool,
}

impl CompactJson {
    /// The text exactly as it was given.
    pub fn text(&self) -> String {
        let mut out = String::with_capacity(self.shape.len() + self.numbers.len() * 6);
        self.write_text(&mut out);
        out
    }

    /// Appends the text exactly as it was given to `out`.
    pub fn write_text(&self, out: &mut String) {
        // A shape kept whole (its text held the hole character) has no numbers to put back.
        if self.numbers.is_empty() {
            out.push_str(&self.shape);
            return;
        }
        let mut pieces = self.shape.split(HOLE);
        out.push_str(pieces.next().unwrap_or_default());
        for (number, piece) in self.numbers.iter().zip(pieces) {
            let _ = write!(out, "{number}");
            out.push_str(piece);
        }
    }

    /// Whether the text is spelled exactly as `serde_json` writes the value it holds (see the
    /// module doc): then it can be copied into a document unchanged.
    pub fn is_canonical(&self) -> bool {
        self.canonical
    }
}

/// Makes [`CompactJson`]s, sharing equal shapes.
#[derive(Debug, Default)]
pub struct Shapes {
    // Point lookups only: the map is never iterated into output. A shape maps to whether its
    // texts are canonical, decided once per shape.
    known: HashMap<Arc<str>, bool>,
}

impl Shapes {
    /// `text` (one JSON value, compact or not) as its shape and numbers. A number is taken out
    /// only where it stands alone outside a string and reads back identically as a `u64` (no
    /// sign, fraction, exponent or leading zero); anything else stays in the shape. A text that
    /// already holds the hole character stays whole.
    pub fn compact(&mut self, text: &str) -> CompactJson {
        if text.contains(HOLE) {
            let (shape, canonical) = self.share(text, false);
            return CompactJson { shape, numbers: Box::new([]), canonical };
        }
        let (shape, numbers) = split_numbers(text);
        let (shape, canonical) = self.share(&shape, !numbers.is_empty());
        CompactJson { shape, numbers: numbers.into_boxed_slice(), canonical }
    }

    fn share(&mut self, shape: &str, has_holes: bool) -> (Arc<str>, bool) {
        if let Some((known, canonical)) = self.known.get_key_value(shape) {
            return (Arc::clone(known), *canonical);
        }
        let canonical = is_canonical_shape(shape, has_holes);
        let shape: Arc<str> = Arc::from(shape);
        self.known.insert(Arc::clone(&shape), canonical);
        (shape, canonical)
    }
}

/// Whether every text of `shape` is canonical. The numbers taken out are plain `u64` literals,
/// which `serde_json` reads and writes back unchanged, so one text stands for all of them: the
/// shape with 0 in each hole.
fn is_canonical_shape(shape: &str, has_holes: bool) -> bool {
    let text = if has_holes { shape.replace(HOLE, "0") } else { shape.to_string() };
    serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|value| serde_json::to_string(&value).ok())
        .is_some_and(|written| written == text)
}

/// The text with each plain whole number outside strings replaced by [`HOLE`], and the numbers.
fn split_numbers(text: &str) -> (String, Vec<u64>) {
    let bytes = text.as_bytes();
    let mut shape = String::with_capacity(text.len());
    let mut numbers = Vec::new();
    let (mut in_string, mut escaped) = (false, false);
    let mut copied = 0;
    let mut index = 0;
    while index < bytes.len() {
        let byte = bytes[index];
        if in_string {
            (in_string, escaped) = match (escaped, byte) {
                (true, _) => (true, false),
                (false, b'\\') => (true, true),
                (false, b'"') => (false, false),
                _ => (true, false),
            };
            index += 1;
            continue;
        }
        if byte == b'"' {
            in_string = true;
            index += 1;
            continue;
        }
        let starts_number = byte.is_ascii_digit() && (index == 0 || !is_number_byte(bytes[index - 1]));
        if !starts_number {
            index += 1;
            continue;
        }
        let end = index + bytes[index..].iter().take_while(|b| is_number_byte(**b)).count();
        let literal = &text[index..end];
        match literal.parse::<u64>() {
            Ok(number) if number.to_string() == literal => {
                shape.push_str(&text[copied..index]);
                shape.push(HOLE);
                numbers.push(number);
                copied = end;
            }
            _ => {}
        }
        index = end;
    }
    shape.push_str(&text[copied..]);
    (shape, numbers)
}

/// A byte that can be part of a JSON number literal.
fn is_number_byte(byte: u8) -> bool {
    byte.is_ascii_digit() || matches!(byte, b'-' | b'+' | b'.' | b'e' | b'E')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_come_back_exactly_and_equal_shapes_are_shared() {
        let mut shapes = Shapes::default();
        let texts = [
            r#"{"input_tokens":3,"cache_read_input_tokens":20194,"inference_geo":"us-1","iterations":[{"output_tokens":7}]}"#,
            r#"{"input_tokens":5,"cache_read_input_tokens":0,"inference_geo":"us-1","iterations":[{"output_tokens":12}]}"#,
            r#"{"a":-4,"b":1.5,"c":2e3,"d":007,"e":18446744073709551616,"f":"say \"9\" \\","g":0}"#,
            "{ \"spaced\" : 42 }",
            "{\"hole\":\"\u{0}\",\"n\":1}",
        ];
        let compact: Vec<CompactJson> = texts.iter().map(|t| shapes.compact(t)).collect();
        for (text, compact) in texts.iter().zip(&compact) {
            assert_eq!(compact.text(), *text);
        }
        // The first two differ only in numbers: one shape, numbers in order.
        assert!(Arc::ptr_eq(&compact[0].shape, &compact[1].shape));
        assert_eq!(&*compact[1].numbers, &[5, 0, 12]);
        // Signed, fractional, exponent, leading-zero and too-large literals stay in the shape;
        // digits inside strings are text.
        assert_eq!(&*compact[2].numbers, &[0]);
    }

    #[test]
    fn only_texts_serde_json_writes_back_unchanged_are_canonical() {
        let mut shapes = Shapes::default();
        let mut canonical = |text: &str| shapes.compact(text).is_canonical();
        // Claude Code's usage objects: compact, whole numbers, plain strings.
        assert!(canonical(r#"{"input_tokens":3,"speed":"standard","iterations":[{"output_tokens":7}]}"#));
        assert!(canonical(r#"{"a":-4,"b":1.5,"c":"café \"q\""}"#));
        // Spaces; a float spelled otherwise (1e3 is written back 1000.0); escapes serde_json
        // does not write; a repeated key (the value keeps one); a text holding the hole.
        for text in [
            r#"{ "a": 1 }"#,
            r#"{"a":1e3}"#,
            r#"{"a":"caf\u00e9"}"#,
            r#"{"a":"\/"}"#,
            r#"{"a":1,"a":2}"#,
            "{\"hole\":\"\u{0}\",\"n\":1}",
        ] {
            assert!(!canonical(text), "{text}");
        }
    }
}
