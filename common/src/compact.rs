//! [`CompactObject`]: a Kubernetes object kept as its compact JSON text, as a Lua round
//! holds the objects it evaluates. A `serde_json::Value` costs about fifteen times its
//! JSON text in heap (every JSON object is a B-tree node of about 640 bytes however few
//! fields it has); the text is parsed where something reads it: a level at a time by Lua
//! scripts, whole for a CEL filter, only the identifying fields for a label or a key.
//!
//! The text is shared, never copied: a clone is a reference to the same text (the watch
//! cache hands a round its objects so), and [`CompactObject::same_text`] tells a Lua state
//! that it has seen this object version before and kept what it converted of it.

use std::borrow::Cow;
use std::sync::Arc;

use serde::Deserialize;
use serde::de::value::MapAccessDeserializer;
use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// A Kubernetes object as checks see it, as compact JSON text, without
/// `metadata.managedFields`. Made from a [`Value`] (`From`), which is then dropped.
/// Immutable; clones share the text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompactObject(Arc<str>);

/// The fields that identify an object, borrowed from its text where they need no
/// unescaping.
#[derive(Debug, Default, Deserialize, PartialEq, Eq)]
pub struct Identity<'t> {
    /// `apiVersion`, empty when absent.
    #[serde(default, borrow, rename = "apiVersion", deserialize_with = "text")]
    pub api_version: Cow<'t, str>,
    /// `kind`, empty when absent.
    #[serde(default, borrow, deserialize_with = "text")]
    pub kind: Cow<'t, str>,
    /// `metadata.namespace` and `metadata.name`.
    #[serde(default, borrow, deserialize_with = "metadata")]
    pub metadata: Names<'t>,
}

/// `metadata.namespace` and `metadata.name` of an object.
#[derive(Debug, Default, Deserialize, PartialEq, Eq)]
pub struct Names<'t> {
    /// The namespace, `None` when absent (cluster-scoped objects).
    #[serde(default, borrow, deserialize_with = "some_text")]
    pub namespace: Option<Cow<'t, str>>,
    /// The name, `None` when absent.
    #[serde(default, borrow, deserialize_with = "some_text")]
    pub name: Option<Cow<'t, str>>,
}

impl CompactObject {
    /// The object's compact JSON text.
    pub fn text(&self) -> &str {
        &self.0
    }

    /// Whether `other` is a clone of this object (the same text, not only equal text).
    pub fn same_text(&self, other: &CompactObject) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Where the text lives: the same for every clone, and no other live object's while
    /// one clone is alive (a key for what was made of this text).
    pub fn address(&self) -> usize {
        self.0.as_ptr().addr()
    }

    /// The object parsed whole (for readers of whole objects, such as CEL filters).
    pub fn to_value(&self) -> Value {
        // The text was written from a Value, so it parses.
        serde_json::from_str(&self.0).unwrap_or(Value::Null)
    }

    /// Whether the object is a JSON object (anything else cannot be checked).
    pub fn is_object(&self) -> bool {
        self.0.starts_with('{')
    }

    /// Its `apiVersion`, `kind`, namespace and name, read without parsing the rest into
    /// values; empty when the text is not an object.
    pub fn identity(&self) -> Identity<'_> {
        serde_json::from_str(&self.0).unwrap_or_default()
    }

    /// `Kind namespace/name` (`object` and `<unnamed>` for what is missing), for messages.
    pub fn label(&self) -> String {
        let id = self.identity();
        let kind = if id.kind.is_empty() {
            "object"
        } else {
            &id.kind
        };
        let name = id.metadata.name.as_deref().unwrap_or("<unnamed>");
        match id.metadata.namespace.as_deref() {
            Some(ns) => format!("{kind} {ns}/{name}"),
            None => format!("{kind} {name}"),
        }
    }

    /// Deepest nesting of the object (a scalar is 0), read from the text.
    pub fn depth(&self) -> usize {
        let (mut depth, mut deepest) = (0usize, 0usize);
        let (mut in_string, mut escaped) = (false, false);
        for b in self.0.bytes() {
            if in_string {
                match b {
                    _ if escaped => escaped = false,
                    b'\\' => escaped = true,
                    b'"' => in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => in_string = true,
                b'{' | b'[' => {
                    depth += 1;
                    deepest = deepest.max(depth);
                }
                b'}' | b']' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        deepest
    }
}

impl From<Value> for CompactObject {
    /// Drops `metadata.managedFields` (of no use to a health check, often the largest part
    /// of an object) and writes the rest as compact JSON.
    fn from(mut object: Value) -> Self {
        drop_managed_fields(&mut object);
        CompactObject::from(&object)
    }
}

impl From<&Value> for CompactObject {
    /// Writes `object` as compact JSON, as it is (its `managedFields` too, if any).
    fn from(object: &Value) -> Self {
        CompactObject(Arc::from(object.to_string()))
    }
}

/// Removes `metadata.managedFields` from `object`, if it has any.
pub fn drop_managed_fields(object: &mut Value) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
}

/// A string, or empty for any other JSON value.
fn text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Cow<'de, str>, D::Error> {
    Ok(some_text(d)?.unwrap_or_default())
}

/// A string, or `None` for any other JSON value.
fn some_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Cow<'de, str>>, D::Error> {
    d.deserialize_any(Lenient(|text: Cow<'de, str>| Some(text)))
}

/// `metadata`, or no names when it is not an object.
fn metadata<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Names<'de>, D::Error> {
    d.deserialize_any(Lenient(|_: Cow<'de, str>| Names::default()))
}

/// Reads any JSON value without failing: a string through the closure, an object as `T`
/// (when `T` reads objects), anything else as `T::default()`.
struct Lenient<F>(F);

impl<'de, T, F> Visitor<'de> for Lenient<F>
where
    T: Default + FromMap<'de>,
    F: FnOnce(Cow<'de, str>) -> T,
{
    type Value = T;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<T, E> {
        Ok((self.0)(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<T, E> {
        Ok((self.0)(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<T, E> {
        Ok((self.0)(Cow::Owned(v)))
    }
    fn visit_bool<E>(self, _: bool) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_i64<E>(self, _: i64) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_u64<E>(self, _: u64) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_f64<E>(self, _: f64) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_unit<E>(self) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<T, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(T::default())
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::from_map(map)
    }
}

/// What [`Lenient`] makes of a JSON object.
trait FromMap<'de>: Sized {
    fn from_map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error>;
}

impl<'de> FromMap<'de> for Option<Cow<'de, str>> {
    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }
}

impl<'de> FromMap<'de> for Names<'de> {
    fn from_map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        Names::deserialize(MapAccessDeserializer::new(map))
    }
}

#[cfg(test)]
mod tests;
