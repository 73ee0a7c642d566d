//! JSON to Lua, one level at a time: the round keeps its objects as compact JSON text
//! ([`Nodes`]) and converts a node (an object or array) to a Lua table when a script first
//! touches it ([`materialise`]), parsing only that level of the text; its child objects
//! and arrays become proxies (see `objects.lua`) holding their place in the text, and
//! convert in turn.

use std::borrow::Cow;
use std::collections::HashMap;

use mlua::{Either, Function, Lua, Table};

use super::Conversion;
use crate::compact::CompactObject;

mod level;

use level::{Item, Level};

/// Deepest nesting converted (tables within tables, the object itself being one);
/// Kubernetes objects stay far below it. A script that reaches a table past it fails, and
/// only that script: the rest of the object, and every other object, still reads normally.
pub(super) const MAX_DEPTH: usize = 64;

/// Where a node is: the byte range of its JSON text within its object's text, and how many
/// tables deep it is (an object's root is 1).
#[derive(Clone, Copy, Debug)]
struct NodeRef {
    start: u32,
    end: u32,
    depth: u16,
}

/// A node's id, as its pending proxy holds it: the slot of its object version in the high
/// bits, its place among that object's nodes in the low [`LOCAL_BITS`].
pub(super) type NodeId = i64;

/// Bits of a [`NodeId`] that number an object's nodes: 8 million nodes, past any object the
/// API server stores (at most 1.5 MB of JSON, two bytes or more a node).
const LOCAL_BITS: u32 = 23;

/// Slots numbered past this cannot be encoded in a [`NodeId`] (Lua integers are 64 bits). A
/// state that has numbered them all refuses further objects as full; at 2,000 new object
/// versions every 10 s that takes some 1,700 years.
const MAX_SLOT: u64 = 1 << (63 - LOCAL_BITS);

/// One object version the state holds, and every node of it handed to Lua so far.
#[derive(Debug)]
struct Slot {
    object: CompactObject,
    refs: Vec<NodeRef>,
    /// Taken into the current round.
    taken: bool,
}

/// The state's objects as JSON text and every pending node handed to Lua so far (kept as
/// Lua app data, so `materialise` can reach it). An object version is held from the round
/// that first takes it in until a round that does not: rounds that take in the same text
/// (a clone of the same [`CompactObject`], as the watch cache hands an unchanged object)
/// reuse what earlier rounds converted of it, tables and all.
#[derive(Debug)]
pub(super) struct Nodes {
    slots: HashMap<u64, Slot>,
    /// The slot of each held text, by the text's address: the slot holds the text, so no
    /// other text can live there meanwhile.
    by_text: HashMap<usize, u64>,
    next_slot: u64,
    /// Nodes converted so far (each is converted once per object version).
    converted: u64,
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
            slots: HashMap::new(),
            by_text: HashMap::new(),
            next_slot: 0,
            converted: 0,
            kit,
            eager: conversion == Conversion::Eager,
        }
    }

    /// Takes `object` into the current round; returns the node id of its root and whether
    /// the state held this text already (what was converted of it is still converted), or
    /// `None` when its text is too long to address (4 GiB) or the state has numbered all
    /// the slots it can.
    pub(super) fn take(&mut self, object: CompactObject) -> Option<(NodeId, bool)> {
        if let Some(slot) = self.by_text.get(&object.address()) {
            let held = self.slots.get_mut(slot)?;
            held.taken = true;
            return Some((root_id(*slot), true));
        }
        let end = u32::try_from(object.text().len()).ok()?;
        let slot = self.next_slot;
        if slot >= MAX_SLOT {
            return None;
        }
        self.next_slot += 1;
        self.by_text.insert(object.address(), slot);
        let root = NodeRef {
            start: 0,
            end,
            depth: 1,
        };
        let refs = vec![root];
        let taken = true;
        self.slots.insert(
            slot,
            Slot {
                object,
                refs,
                taken,
            },
        );
        Some((root_id(slot), false))
    }

    /// A new round begins: no object is taken into it yet.
    pub(super) fn untake_all(&mut self) {
        for slot in self.slots.values_mut() {
            slot.taken = false;
        }
    }

    /// Lets go of every object version the current round did not take in; returns their
    /// roots' node ids, for Lua to drop their proxies.
    pub(super) fn release_untaken(&mut self) -> Vec<NodeId> {
        let mut released = Vec::new();
        let by_text = &mut self.by_text;
        self.slots.retain(|&slot, held| {
            if !held.taken {
                by_text.remove(&held.object.address());
                released.push(root_id(slot));
            }
            held.taken
        });
        released
    }

    /// Nodes converted so far, over the state's life.
    #[cfg(test)]
    pub(super) fn converted(&self) -> u64 {
        self.converted
    }

    /// How many object versions the state holds.
    pub(super) fn held(&self) -> usize {
        self.slots.len()
    }

    /// The object whose root is node `root`.
    pub(super) fn object(&self, root: NodeId) -> Option<&CompactObject> {
        self.slots.get(&slot_of(root)).map(|held| &held.object)
    }
}

/// The id of node `local` of the object in `slot` (`slot` below [`MAX_SLOT`], `local`
/// below 2^[`LOCAL_BITS`]).
fn node_id(slot: u64, local: u64) -> NodeId {
    ((slot << LOCAL_BITS) | local) as NodeId
}

/// The node id of the root of the object in `slot`.
fn root_id(slot: u64) -> NodeId {
    node_id(slot, 0)
}

/// The slot of node `id`'s object.
fn slot_of(id: NodeId) -> u64 {
    (id as u64) >> LOCAL_BITS
}

/// Node `id`'s place among its object's nodes.
fn local_of(id: NodeId) -> usize {
    (id as u64 & ((1 << LOCAL_BITS) - 1)) as usize
}

/// Converts node `id` for its pending proxy `proxy`: builds its content (scalars set;
/// `null` left out, so it reads as `nil`), gives `proxy` its own metatable reading through
/// to it, and returns that metatable. Array elements of at most [`BULK_BYTES`] are
/// converted in the same call (one callback instead of one per element); other members
/// that are tables, and any past [`MAX_DEPTH`], become pending proxies that convert when
/// touched.
pub(super) fn materialise(lua: &Lua, proxy: Table, id: NodeId) -> mlua::Result<Table> {
    let mut nodes = lua
        .app_data_mut::<Nodes>()
        .ok_or_else(|| mlua::Error::runtime("the round's objects are not available"))?;
    nodes.converted += 1;
    let Nodes {
        slots, kit, eager, ..
    } = &mut *nodes;
    let slot = slot_of(id);
    let Slot { object, refs, .. } = slots
        .get_mut(&slot)
        .ok_or_else(|| mlua::Error::runtime(format!("no object for node {id}")))?;
    let node = *refs
        .get(local_of(id))
        .ok_or_else(|| mlua::Error::runtime(format!("no object node {id}")))?;
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
        object: &*object,
        slot,
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
    /// The object whose nodes are built, and its slot.
    object: &'a CompactObject,
    slot: u64,
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
            let local = self.refs.len() as u64;
            if local >= 1 << LOCAL_BITS {
                return Err(mlua::Error::runtime(format!(
                    "{} has more than {} nested objects and arrays; read it in parts",
                    self.object.label(),
                    1u64 << LOCAL_BITS
                )));
            }
            let child = node_id(self.slot, local);
            self.refs.push(NodeRef {
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
fn bad_json(object: &CompactObject, e: serde_json::Error) -> mlua::Error {
    mlua::Error::runtime(format!("{} is not valid JSON: {e}", object.label()))
}

#[cfg(test)]
mod tests;
