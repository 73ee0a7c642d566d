//! JSON to Lua: a Kubernetes object becomes a deeply read-only Lua table.

use std::collections::HashMap;

use mlua::{Lua, LuaString, Table, Value};
use serde_json::Value as Json;

/// Deepest nesting converted; Kubernetes objects stay far below it.
pub(super) const MAX_DEPTH: usize = 64;

/// Most distinct strings kept ready as Lua strings.
const MAX_CACHED_STRINGS: usize = 8192;
/// Longest string value cached. Field names are always cached (while there is room);
/// short values repeat across objects (`True`, `Running`, `TCP`, label values), long ones
/// (names, uids, timestamps) mostly do not.
const MAX_CACHED_VALUE_BYTES: usize = 24;

/// Strings already created in Lua, reused across the objects of a round: creating a Lua
/// string is the largest part of converting a field.
#[derive(Debug, Default)]
pub(super) struct StringCache {
    /// foldhash: several times faster than SipHash on these short keys (a lookup per field
    /// converted), still seeded per process so crafted field names cannot collide at will.
    index: HashMap<Box<str>, u32, foldhash::fast::RandomState>,
    strings: Vec<LuaString>,
}

/// A string ready to be set: cached (by position) or created for this use only.
enum Prepared {
    Cached(u32),
    Owned(LuaString),
}

impl StringCache {
    /// Looks `s` up, creating it (and caching it when it may be: not longer than `max_len`,
    /// and the cache not full). Read the result with [`StringCache::get`].
    fn prepare(&mut self, lua: &Lua, s: &str, max_len: usize) -> mlua::Result<Prepared> {
        if let Some(&i) = self.index.get(s) {
            return Ok(Prepared::Cached(i));
        }
        let created = lua.create_string(s)?;
        if s.len() > max_len || self.strings.len() >= MAX_CACHED_STRINGS {
            return Ok(Prepared::Owned(created));
        }
        let i = self.strings.len() as u32;
        self.strings.push(created);
        self.index.insert(s.into(), i);
        Ok(Prepared::Cached(i))
    }

    /// The Lua string of a [`Prepared`].
    fn get<'a>(&'a self, prepared: &'a Prepared) -> &'a LuaString {
        match prepared {
            Prepared::Cached(i) => &self.strings[*i as usize],
            Prepared::Owned(s) => s,
        }
    }
}

/// Why a JSON value could not become a Lua table.
#[derive(Debug)]
pub(super) enum ConvertError {
    /// Nested deeper than [`MAX_DEPTH`].
    TooDeep,
    /// mlua failed (e.g. out of memory).
    Lua(mlua::Error),
}

impl From<mlua::Error> for ConvertError {
    fn from(e: mlua::Error) -> Self {
        ConvertError::Lua(e)
    }
}

/// Converts an object to a read-only table: objects to tables with string keys (`null`
/// members left out, so they read as `nil`), arrays to 1-based arrays, numbers to Lua
/// numbers (doubles), strings and booleans as they are.
pub(super) fn object_to_table(
    lua: &Lua,
    strings: &mut StringCache,
    object: &serde_json::Map<String, Json>,
) -> Result<Table, ConvertError> {
    Converter { lua, strings }.map_to_table(object, 1)
}

struct Converter<'a> {
    lua: &'a Lua,
    strings: &'a mut StringCache,
}

impl Converter<'_> {
    fn map_to_table(
        &mut self,
        map: &serde_json::Map<String, Json>,
        depth: usize,
    ) -> Result<Table, ConvertError> {
        let table = self.lua.create_table_with_capacity(0, map.len())?;
        for (key, value) in map {
            match value {
                Json::Null => {}
                Json::String(s) => {
                    let own_key = self.strings.prepare(self.lua, key, usize::MAX)?;
                    let own_value = self.strings.prepare(self.lua, s, MAX_CACHED_VALUE_BYTES)?;
                    let strings = &*self.strings;
                    table.raw_set(strings.get(&own_key), strings.get(&own_value))?;
                }
                other => {
                    let value = self.convert(other, depth)?;
                    let own_key = self.strings.prepare(self.lua, key, usize::MAX)?;
                    table.raw_set(self.strings.get(&own_key), value)?;
                }
            }
        }
        table.set_readonly(true);
        Ok(table)
    }

    fn array_to_table(&mut self, items: &[Json], depth: usize) -> Result<Table, ConvertError> {
        let table = self.lua.create_table_with_capacity(items.len(), 0)?;
        for (i, item) in items.iter().enumerate() {
            match item {
                // A hole: `null` reads as `nil`.
                Json::Null => {}
                Json::String(s) => {
                    let own = self.strings.prepare(self.lua, s, MAX_CACHED_VALUE_BYTES)?;
                    table.raw_set(i + 1, self.strings.get(&own))?;
                }
                other => table.raw_set(i + 1, self.convert(other, depth)?)?,
            }
        }
        table.set_readonly(true);
        Ok(table)
    }

    /// Converts a non-string value.
    fn convert(&mut self, value: &Json, depth: usize) -> Result<Value, ConvertError> {
        Ok(match value {
            Json::Null => Value::Nil,
            Json::Bool(b) => Value::Boolean(*b),
            // Every JSON number is a Lua number (a double), as in Lua 5.1; integers beyond
            // 2^53 lose precision (Kubernetes keeps such values in strings).
            Json::Number(n) => Value::Number(n.as_f64().unwrap_or(f64::NAN)),
            Json::String(s) => Value::String(self.lua.create_string(s)?),
            Json::Array(items) => Value::Table(self.array_to_table(items, deeper(depth)?)?),
            Json::Object(map) => Value::Table(self.map_to_table(map, deeper(depth)?)?),
        })
    }
}

fn deeper(depth: usize) -> Result<usize, ConvertError> {
    if depth >= MAX_DEPTH {
        Err(ConvertError::TooDeep)
    } else {
        Ok(depth + 1)
    }
}
