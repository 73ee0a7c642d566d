//! JSON to Lua, one level at a time: the round keeps its objects as JSON ([`Nodes`]) and
//! converts a node (an object or array) to a Lua table when a script first touches it
//! ([`materialise`]); its child objects and arrays become proxies (see `objects.lua`) that
//! convert in turn.

use std::collections::HashMap;

use mlua::{Lua, LuaString, Table, Value};
use serde_json::Value as Json;

/// Deepest nesting converted (tables within tables, the object itself being one);
/// Kubernetes objects stay far below it. A script that reaches a table past it fails, and
/// only that script: the rest of the object, and every other object, still reads normally.
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

/// Where a node is: a whole object of the round, or the child at a position of a node.
#[derive(Clone, Copy, Debug)]
enum NodeRef {
    Root(u32),
    /// `depth`: how many tables deep the node is (a root is 1).
    Child {
        parent: u32,
        position: u32,
        depth: u16,
    },
}

/// The round's objects as JSON and every node handed to Lua so far (kept as Lua app data,
/// so `materialise` can reach it).
#[derive(Debug, Default)]
pub(super) struct Nodes {
    objects: Vec<Json>,
    refs: Vec<NodeRef>,
    strings: StringCache,
}

impl Nodes {
    /// Takes `object`; returns the node id of its root.
    pub(super) fn add(&mut self, object: Json) -> u32 {
        let id = self.refs.len() as u32;
        self.refs.push(NodeRef::Root(self.objects.len() as u32));
        self.objects.push(object);
        id
    }

    /// The `index`th object added.
    pub(super) fn object(&self, index: u32) -> Option<&Json> {
        self.objects.get(index as usize)
    }
}

fn resolve<'a>(objects: &'a [Json], refs: &[NodeRef], id: u32) -> Option<&'a Json> {
    match *refs.get(id as usize)? {
        NodeRef::Root(o) => objects.get(o as usize),
        NodeRef::Child {
            parent, position, ..
        } => match resolve(objects, refs, parent)? {
            Json::Object(map) => map.values().nth(position as usize),
            Json::Array(items) => items.get(position as usize),
            _ => None,
        },
    }
}

/// The index of the object node `id` belongs to.
fn root_of(refs: &[NodeRef], mut id: u32) -> Option<u32> {
    loop {
        match *refs.get(id as usize)? {
            NodeRef::Root(o) => return Some(o),
            NodeRef::Child { parent, .. } => id = parent,
        }
    }
}

/// Converts node `id`: returns its table (scalars set; `null` left out, so it reads as
/// `nil`) and a list `{key1, child1, key2, child2, ...}` of its object and array members
/// by node id, for `objects.lua` to make proxies of.
pub(super) fn materialise(lua: &Lua, id: u32) -> mlua::Result<(Table, Table)> {
    let mut nodes = lua
        .app_data_mut::<Nodes>()
        .ok_or_else(|| mlua::Error::runtime("the round's objects are not available"))?;
    let Nodes {
        objects,
        refs,
        strings,
    } = &mut *nodes;
    let depth = match refs.get(id as usize) {
        Some(NodeRef::Child { depth, .. }) => *depth,
        _ => 1,
    };
    if usize::from(depth) > MAX_DEPTH {
        let object = root_of(refs, id).and_then(|o| objects.get(o as usize));
        return Err(mlua::Error::runtime(format!(
            "{} is nested deeper than {MAX_DEPTH} levels, and the script read past that depth; \
             read fields nearer the top of the object",
            object.map_or_else(|| "the object".to_string(), super::round::object_label)
        )));
    }
    let json = resolve(objects, refs, id)
        .ok_or_else(|| mlua::Error::runtime(format!("no object node {id}")))?;
    let mut kids: Vec<(Value, u32)> = Vec::new();
    let table = match json {
        Json::Object(map) => {
            let table = lua.create_table_with_capacity(0, map.len())?;
            for (position, (key, value)) in map.iter().enumerate() {
                let own_key = strings.prepare(lua, key, usize::MAX)?;
                match value {
                    Json::Null => {}
                    Json::Object(_) | Json::Array(_) => kids.push((
                        Value::String(strings.get(&own_key).clone()),
                        position as u32,
                    )),
                    other => {
                        let value = scalar(lua, strings, other)?;
                        table.raw_set(strings.get(&own_key), value)?
                    }
                }
            }
            table
        }
        Json::Array(items) => {
            let table = lua.create_table_with_capacity(items.len(), 0)?;
            for (position, item) in items.iter().enumerate() {
                match item {
                    // A hole: `null` reads as `nil`.
                    Json::Null => {}
                    Json::Object(_) | Json::Array(_) => {
                        kids.push((Value::Integer(position as i64 + 1), position as u32))
                    }
                    other => table.raw_set(position + 1, scalar(lua, strings, other)?)?,
                }
            }
            table
        }
        _ => {
            return Err(mlua::Error::runtime(format!(
                "object node {id} is not a table"
            )));
        }
    };
    let list = lua.create_table_with_capacity(kids.len() * 2, 0)?;
    for (i, (key, position)) in kids.into_iter().enumerate() {
        let child = refs.len() as u32;
        refs.push(NodeRef::Child {
            parent: id,
            position,
            depth: depth.saturating_add(1),
        });
        list.raw_set(2 * i + 1, key)?;
        list.raw_set(2 * i + 2, child)?;
    }
    Ok((table, list))
}

/// A string, boolean or number. Numbers with an integral value become Lua integers (so they
/// print as `3`, as in gopher-lua), others floats; integers beyond 2^63 lose precision
/// (Kubernetes keeps such values in strings).
fn scalar(lua: &Lua, strings: &mut StringCache, value: &Json) -> mlua::Result<Value> {
    Ok(match value {
        Json::Bool(b) => Value::Boolean(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Value::Integer(i),
            None => {
                let f = n.as_f64().unwrap_or(f64::NAN);
                if f.fract() == 0.0 && f.abs() < 9.0e18 {
                    Value::Integer(f as i64)
                } else {
                    Value::Number(f)
                }
            }
        },
        Json::String(s) => {
            let own = strings.prepare(lua, s, MAX_CACHED_VALUE_BYTES)?;
            Value::String(strings.get(&own).clone())
        }
        _ => Value::Nil,
    })
}

/// Deepest nesting of a JSON value (a scalar is 0).
pub(super) fn depth(value: &Json) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((v, d)) = stack.pop() {
        deepest = deepest.max(d);
        match v {
            Json::Object(map) => stack.extend(map.values().map(|c| (c, d + 1))),
            Json::Array(items) => stack.extend(items.iter().map(|c| (c, d + 1))),
            _ => {}
        }
    }
    deepest
}
