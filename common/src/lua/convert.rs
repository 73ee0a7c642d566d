//! JSON to Lua, one level at a time: the round keeps its objects as JSON ([`Nodes`]) and
//! converts a node (an object or array) to a Lua table when a script first touches it
//! ([`materialise`]); its child objects and arrays become proxies (see `objects.lua`) that
//! convert in turn.

use mlua::{Either, Function, Lua, Table};
use serde_json::Value as Json;

use super::Conversion;

/// Deepest nesting converted (tables within tables, the object itself being one);
/// Kubernetes objects stay far below it. A script that reaches a table past it fails, and
/// only that script: the rest of the object, and every other object, still reads normally.
pub(super) const MAX_DEPTH: usize = 64;

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
#[derive(Debug)]
pub(super) struct Nodes {
    objects: Vec<Json>,
    refs: Vec<NodeRef>,
    kit: Kit,
    /// Every table converts with its parent (eager conversion, the benchmark's baseline).
    eager: bool,
}

/// Most values in an array element converted in the same call as its array: a callback
/// into Rust costs about as much as converting a few dozen values, and the elements of an
/// array (conditions, containers, ports) are mostly read in a loop over all of them.
pub(super) const BULK_VALUES: usize = 48;

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

/// Converts node `id` for its pending proxy `proxy`: builds its content (scalars set;
/// `null` left out, so it reads as `nil`), gives `proxy` its own metatable reading through
/// to it, and returns that metatable. Array elements of at most [`BULK_VALUES`] values are
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
    if !matches!(json, Json::Object(_) | Json::Array(_)) {
        return Err(mlua::Error::runtime(format!(
            "object node {id} is not a table"
        )));
    }
    let mut builder = Builder {
        lua,
        kit,
        refs,
        // In an eager round every subtree is converted with its parent.
        in_bulk: *eager,
    };
    let content = builder.content(json, id, depth)?;
    proxy.raw_set(&kit.id_key, mlua::Value::Nil)?;
    builder.attach(&proxy, content)
}

/// A member as it is pushed into its table: a scalar (strings pushed straight from the
/// JSON, no handle per value) or a proxy; `None` (JSON `null`) leaves a hole.
type Member<'j> = Option<Either<Either<&'j str, bool>, Either<Either<i64, f64>, Table>>>;

/// Builds the Lua side of nodes: contents, proxies and their metatables. Each table is
/// created filled in one call (one lock of the state per table, not one per value).
struct Builder<'a> {
    lua: &'a Lua,
    kit: &'a Kit,
    refs: &'a mut Vec<NodeRef>,
    /// Building a subtree whose every table converts now (one within [`BULK_VALUES`], or
    /// any in an eager round).
    in_bulk: bool,
}

impl Builder<'_> {
    /// The content table of `json` (node `id`, `depth` tables deep): scalars as values,
    /// object and array members as proxies.
    fn content(&mut self, json: &Json, id: u32, depth: u16) -> mlua::Result<Table> {
        match json {
            Json::Object(map) => {
                let mut members = Vec::with_capacity(map.len());
                for (position, (key, value)) in map.iter().enumerate() {
                    if !value.is_null() {
                        members.push((
                            key.as_str(),
                            self.member(value, id, position, depth, false)?,
                        ));
                    }
                }
                self.lua.create_table_from(members)
            }
            Json::Array(items) => {
                let mut members = Vec::with_capacity(items.len());
                for (position, item) in items.iter().enumerate() {
                    members.push(self.member(item, id, position, depth, true)?);
                }
                self.lua.create_sequence_from(members)
            }
            _ => self.lua.create_table(),
        }
    }

    /// A member of node `parent` at `position`: a scalar, or a proxy of the member. An
    /// element of an array (`in_array`) whose subtree is small converts now, with the
    /// array: arrays are mostly read whole (conditions, containers, ports), while an
    /// object's members are read by name, so converting its untouched siblings would be
    /// wasted. Nothing past [`MAX_DEPTH`] converts before it is touched.
    fn member<'j>(
        &mut self,
        json: &'j Json,
        parent: u32,
        position: usize,
        depth: u16,
        in_array: bool,
    ) -> mlua::Result<Member<'j>> {
        if !matches!(json, Json::Object(_) | Json::Array(_)) {
            return Ok(scalar(json));
        }
        let child_depth = depth.saturating_add(1);
        let child = self.refs.len() as u32;
        self.refs.push(NodeRef::Child {
            parent,
            position: position as u32,
            depth: child_depth,
        });
        let proxy = if usize::from(child_depth) <= MAX_DEPTH
            && (self.in_bulk || (in_array && within(json, BULK_VALUES)))
        {
            // Every member of a subtree within the bulk limit is converted with it.
            let outer = std::mem::replace(&mut self.in_bulk, true);
            let content = self.content(json, child, child_depth);
            self.in_bulk = outer;
            let proxy = self.lua.create_table()?;
            self.attach(&proxy, content?)?;
            proxy
        } else {
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

/// Whether `json` holds at most `limit` values (itself included), counted with an early
/// stop: a large subtree costs `limit` steps to rule out, not its size.
fn within(json: &Json, limit: usize) -> bool {
    fn count(json: &Json, left: &mut usize) -> bool {
        if *left == 0 {
            return false;
        }
        *left -= 1;
        match json {
            Json::Object(map) => map.values().all(|v| count(v, left)),
            Json::Array(items) => items.iter().all(|v| count(v, left)),
            _ => true,
        }
    }
    count(json, &mut { limit })
}

/// A string, boolean or number (`None` for `null`). Numbers with an integral value become
/// Lua integers (so they print as `3`, as in gopher-lua), others floats; integers beyond
/// 2^63 lose precision (Kubernetes keeps such values in strings).
fn scalar(value: &Json) -> Member<'_> {
    Some(match value {
        Json::Bool(b) => Either::Left(Either::Right(*b)),
        Json::Number(n) => Either::Right(Either::Left(match n.as_i64() {
            Some(i) => Either::Left(i),
            None => {
                let f = n.as_f64().unwrap_or(f64::NAN);
                if f.fract() == 0.0 && f.abs() < 9.0e18 {
                    Either::Left(f as i64)
                } else {
                    Either::Right(f)
                }
            }
        })),
        Json::String(s) => Either::Left(Either::Left(s.as_str())),
        _ => return None,
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
