//! JSON to Lua, one level at a time: the round keeps its objects as compact JSON text
//! ([`Nodes`]) and converts a node (an object or array) to a Lua table when a script first
//! touches it ([`materialise`]), parsing only that level of the text; its child objects
//! and arrays become proxies (see `objects.lua`) holding their place in the text, and
//! convert in turn.

use std::borrow::Cow;

use mlua::{Either, Function, Lua, Table};

use super::Conversion;
use crate::compact::CompactObject;

mod level;

use level::{Item, Level};

/// Deepest nesting converted (tables within tables, the object itself being one);
/// Kubernetes objects stay far below it. A script that reaches a table past it fails, and
/// only that script: the rest of the object, and every other object, still reads normally.
pub(super) const MAX_DEPTH: usize = 64;

/// Where a node is: the byte range of its JSON text within object `object`'s text, and how
/// many tables deep it is (an object's root is 1).
#[derive(Clone, Copy, Debug)]
struct NodeRef {
    object: u32,
    start: u32,
    end: u32,
    depth: u16,
}

/// The round's objects as JSON text and every pending node handed to Lua so far (kept as
/// Lua app data, so `materialise` can reach it).
#[derive(Debug)]
pub(super) struct Nodes {
    objects: Vec<CompactObject>,
    refs: Vec<NodeRef>,
    kit: Kit,
    /// Every table converts with its parent (eager conversion, the benchmark's baseline).
    eager: bool,
}

/// Largest array element (bytes of JSON) converted in the same call as its array: a
/// callback into Rust costs about as much as converting a few dozen values (some 1,000
/// bytes of JSON), and the elements of an array (conditions, containers, ports) are mostly
/// read in a loop over all of them.
pub(super) const BULK_BYTES: usize = 1024;

/// What `objects.lua` gives [`materialise`] to build proxies with.
#[derive(Debug)]
pub(super) struct Kit {
    /// The metatable of pending proxies.
    pending: Table,
    /// The private key under which a pending proxy holds its node id.
    id_key: Table,
    cow: Function,
    len: Function,
    iterate: Function,
}

impl Kit {
    /// Reads the kit `objects.lua` returns.
    pub(super) fn new(kit: &Table) -> mlua::Result<Self> {
        Ok(Kit {
            pending: kit.raw_get("pending")?,
            id_key: kit.raw_get("id")?,
            cow: kit.raw_get("cow")?,
            len: kit.raw_get("len")?,
            iterate: kit.raw_get("iterate")?,
        })
    }
}

impl Nodes {
    /// No objects yet, converted as `conversion` says.
    pub(super) fn new(kit: Kit, conversion: Conversion) -> Self {
        Nodes {
            objects: Vec::new(),
            refs: Vec::new(),
            kit,
            eager: conversion == Conversion::Eager,
        }
    }

    /// Takes `object`; returns the node id of its root, or `None` when its text is too
    /// long to address (4 GiB).
    pub(super) fn add(&mut self, object: CompactObject) -> Option<u32> {
        let id = self.refs.len() as u32;
        self.refs.push(NodeRef {
            object: u32::try_from(self.objects.len()).ok()?,
            start: 0,
            end: u32::try_from(object.text().len()).ok()?,
            depth: 1,
        });
        self.objects.push(object);
        Some(id)
    }

    /// The `index`th object added.
    pub(super) fn object(&self, index: u32) -> Option<&CompactObject> {
        self.objects.get(index as usize)
    }
}

/// Converts node `id` for its pending proxy `proxy`: builds its content (scalars set;
/// `null` left out, so it reads as `nil`), gives `proxy` its own metatable reading through
/// to it, and returns that metatable. Array elements of at most [`BULK_BYTES`] are
/// converted in the same call (one callback instead of one per element); other members
/// that are tables, and any past [`MAX_DEPTH`], become pending proxies that convert when
/// touched.
pub(super) fn materialise(lua: &Lua, proxy: Table, id: u32) -> mlua::Result<Table> {
    let mut nodes = lua
        .app_data_mut::<Nodes>()
        .ok_or_else(|| mlua::Error::runtime("the round's objects are not available"))?;
    let Nodes {
        objects,
        refs,
        kit,
        eager,
    } = &mut *nodes;
    let node = *refs
        .get(id as usize)
        .ok_or_else(|| mlua::Error::runtime(format!("no object node {id}")))?;
    let object = objects
        .get(node.object as usize)
        .ok_or_else(|| mlua::Error::runtime(format!("no object for node {id}")))?;
    if usize::from(node.depth) > MAX_DEPTH {
        return Err(mlua::Error::runtime(format!(
            "{} is nested deeper than {MAX_DEPTH} levels, and the script read past that depth; \
             read fields nearer the top of the object",
            object.label()
        )));
    }
    let text = object
        .text()
        .get(node.start as usize..node.end as usize)
        .filter(|t| t.starts_with(['{', '[']))
        .ok_or_else(|| mlua::Error::runtime(format!("object node {id} is not a table")))?;
    let mut builder = Builder {
        lua,
        kit,
        refs,
        object: node.object,
        // In an eager round every subtree is converted with its parent.
        in_bulk: *eager,
    };
    let content = builder.content(text, node.start as usize, node.depth)?;
    proxy.raw_set(&kit.id_key, mlua::Value::Nil)?;
    builder.attach(&proxy, content)
}

/// A member as it is pushed into its table: a scalar (strings pushed straight from the
/// JSON text, no handle per value) or a proxy; `None` (JSON `null`) leaves a hole.
type Member<'j> = Option<Either<Either<Cow<'j, str>, bool>, Either<Either<i64, f64>, Table>>>;

/// Builds the Lua side of nodes: contents, proxies and their metatables. Each table is
/// created filled in one call (one lock of the state per table, not one per value).
struct Builder<'a> {
    lua: &'a Lua,
    kit: &'a Kit,
    refs: &'a mut Vec<NodeRef>,
    /// The object whose nodes are built.
    object: u32,
    /// Building a subtree whose every table converts now (one within [`BULK_BYTES`], or
    /// any in an eager round).
    in_bulk: bool,
}

impl Builder<'_> {
    /// The content table of `text` (a node's JSON, at byte `offset` of its object's text,
    /// `depth` tables deep): scalars as values, object and array members as proxies.
    fn content(&mut self, text: &str, offset: usize, depth: u16) -> mlua::Result<Table> {
        let level = level::parse(text).map_err(|e| bad_json(self.object, e))?;
        match level {
            Level::Object(map) => {
                let mut members = Vec::with_capacity(map.len());
                for (key, raw) in map {
                    if let Some(member) = self.member(text, offset, raw, depth, false)? {
                        members.push((key, member));
                    }
                }
                self.lua.create_table_from(members)
            }
            Level::Array(items) => {
                let mut members = Vec::with_capacity(items.len());
                for raw in items {
                    members.push(self.member(text, offset, raw, depth, true)?);
                }
                self.lua.create_sequence_from(members)
            }
        }
    }

    /// A member `raw` of node `text` (at `offset`, `depth` deep): a scalar, or a proxy of
    /// the member. An element of an array (`in_array`) whose JSON is small converts now,
    /// with the array: arrays are mostly read whole (conditions, containers, ports), while
    /// an object's members are read by name, so converting its untouched siblings would
    /// be wasted. Nothing past [`MAX_DEPTH`] converts before it is touched.
    fn member<'j>(
        &mut self,
        text: &str,
        offset: usize,
        raw: &'j serde_json::value::RawValue,
        depth: u16,
        in_array: bool,
    ) -> mlua::Result<Member<'j>> {
        let range = match level::item(text, raw).map_err(|e| bad_json(self.object, e))? {
            Item::Null => return Ok(None),
            Item::Bool(b) => return Ok(Some(Either::Left(Either::Right(b)))),
            Item::Int(i) => return Ok(Some(Either::Right(Either::Left(Either::Left(i))))),
            Item::Float(f) => return Ok(Some(Either::Right(Either::Left(Either::Right(f))))),
            Item::Str(s) => return Ok(Some(Either::Left(Either::Left(s)))),
            Item::Node(range) => range,
        };
        let child_depth = depth.saturating_add(1);
        let start = offset + range.start;
        let proxy = if usize::from(child_depth) <= MAX_DEPTH
            && (self.in_bulk || (in_array && range.len() <= BULK_BYTES))
        {
            // Every member of a subtree within the bulk limit is converted with it.
            let outer = std::mem::replace(&mut self.in_bulk, true);
            let content = self.content(raw.get(), start, child_depth);
            self.in_bulk = outer;
            let proxy = self.lua.create_table()?;
            self.attach(&proxy, content?)?;
            proxy
        } else {
            let child = self.refs.len() as u32;
            self.refs.push(NodeRef {
                object: self.object,
                // Within the object's text, whose length fits in a u32.
                start: start as u32,
                end: (start + range.len()) as u32,
                depth: child_depth,
            });
            let proxy = self.lua.create_table_from([(&self.kit.id_key, child)])?;
            proxy.set_metatable(Some(self.kit.pending.clone()))?;
            proxy
        };
        Ok(Some(Either::Right(Either::Right(proxy))))
    }

    /// Gives `proxy` a metatable of its own reading through to `content`; returns it.
    fn attach(&mut self, proxy: &Table, content: Table) -> mlua::Result<Table> {
        let kit = self.kit;
        let meta = self.lua.create_table_from([
            ("__index", Either::Left(content)),
            ("__newindex", Either::Right(&kit.cow)),
            ("__len", Either::Right(&kit.len)),
            ("__pairs", Either::Right(&kit.iterate)),
        ])?;
        proxy.set_metatable(Some(meta.clone()))?;
        Ok(meta)
    }
}

/// An object's text did not parse (it was written from a JSON value, so it always does).
fn bad_json(object: u32, e: serde_json::Error) -> mlua::Error {
    mlua::Error::runtime(format!("object {object} is not valid JSON: {e}"))
}

#[cfg(test)]
mod tests;
