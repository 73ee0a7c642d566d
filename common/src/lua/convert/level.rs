//! One level of an object's JSON text: the members of one JSON object or array, each a
//! scalar read now or a nested object or array left as its place in the text, to be read
//! when a script touches it.

use std::borrow::Cow;
use std::ops::Range;

use serde::Deserialize;
use serde::de::{MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

/// The members of a JSON object (keys unescaped, in text order) or array, unparsed.
pub(super) enum Level<'t> {
    Object(Vec<(Cow<'t, str>, &'t RawValue)>),
    Array(Vec<&'t RawValue>),
}

/// One member, read: a scalar, or a nested object or array and where it is.
pub(super) enum Item<'t> {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Cow<'t, str>),
    /// An object or array, at this byte range of the text it was read from.
    Node(Range<usize>),
}

/// Reads one level of `text` (an object or array); its members stay unparsed.
pub(super) fn parse(text: &str) -> serde_json::Result<Level<'_>> {
    serde_json::from_str(text)
}

/// Reads `raw`, a member of [`parse`]`(text)`. Numbers with an integral value become
/// integers (so they print as `3`, as in gopher-lua), others floats; integers beyond 2^63
/// lose precision (Kubernetes keeps such values in strings).
pub(super) fn item<'t>(text: &str, raw: &'t RawValue) -> serde_json::Result<Item<'t>> {
    let json = raw.get();
    Ok(match json.as_bytes().first() {
        Some(b'{' | b'[') => {
            // Members are slices of `text`: their offset is the distance between starts.
            let start = json.as_ptr().addr() - text.as_ptr().addr();
            Item::Node(start..start + json.len())
        }
        // Read as it stands unless it has escapes (the parse of its level checked it).
        Some(b'"') => match json.get(1..json.len() - 1) {
            Some(inner) if !inner.contains('\\') => Item::Str(Cow::Borrowed(inner)),
            _ => Item::Str(serde_json::from_str::<Text>(json)?.0),
        },
        Some(b't') => Item::Bool(true),
        Some(b'f') => Item::Bool(false),
        Some(b'n') => Item::Null,
        // Most numbers are plain integers (JSON has no `+`, which is all Rust reads beyond
        // JSON's integers): read without a parser.
        _ => match json.parse::<i64>() {
            Ok(i) => Item::Int(i),
            Err(_) => number(json)?,
        },
    })
}

/// A number that is not an integer within an i64.
fn number(json: &str) -> serde_json::Result<Item<'_>> {
    let n: serde_json::Number = serde_json::from_str(json)?;
    Ok(match n.as_i64() {
        Some(i) => Item::Int(i),
        None => {
            let f = n.as_f64().unwrap_or(f64::NAN);
            if f.fract() == 0.0 && f.abs() < 9.0e18 {
                Item::Int(f as i64)
            } else {
                Item::Float(f)
            }
        }
    })
}

/// A JSON string, borrowed from the text unless it has escapes.
struct Text<'t>(Cow<'t, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> Deserialize<'de> for Level<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Level<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object or array")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Level<'de>, A::Error> {
                let mut members = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some((key, value)) = map.next_entry::<Text, &RawValue>()? {
                    members.push((key.0, value));
                }
                Ok(Level::Object(members))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Level<'de>, A::Error> {
                let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(8));
                while let Some(item) = seq.next_element::<&RawValue>()? {
                    items.push(item);
                }
                Ok(Level::Array(items))
            }
        }
        d.deserialize_any(V)
    }
}
