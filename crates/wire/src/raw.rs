//! One JSON value's bytes as sent, borrowed.

use std::fmt;

use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

/// The bytes of one valid JSON value, exactly as they were sent: a content block, a tool
/// definition, a marker. Read from a body through serde_json's [`RawValue`] (which checks them),
/// or from a caller's own checked JSON.
///
/// Unlike `&RawValue`, a `RawJson` can also be taken from the same offsets of another buffer
/// known to hold the same bytes in the same place of the same kind of document, which is how a
/// trace reader skips re-reading the history every request repeats (`ingest::trace`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct RawJson<'a>(&'a str);

impl<'a> RawJson<'a> {
    /// The JSON text.
    pub fn get(self) -> &'a str {
        self.0
    }

    /// Bytes the caller knows to be one valid JSON value because they equal, byte for byte and
    /// in the same position of the same kind of document, a value serde_json already read.
    pub fn trusted(text: &'a str) -> RawJson<'a> {
        RawJson(text)
    }
}

impl<'a> From<&'a RawValue> for RawJson<'a> {
    fn from(raw: &'a RawValue) -> RawJson<'a> {
        RawJson(raw.get())
    }
}

impl fmt::Debug for RawJson<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RawJson").field(&self.0).finish()
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for RawJson<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        <&'de RawValue>::deserialize(deserializer).map(RawJson::from)
    }
}
