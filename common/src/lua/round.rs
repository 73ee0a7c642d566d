//! [`LuaRound`]: a Lua state and the evaluation round it runs; objects converted lazily,
//! once per object version, and shared by every check of the round and of later rounds
//! on the same state ([`LuaRound::begin`]); checks evaluated in fresh environments under
//! a deadline and a memory allowance, each with its own copy-on-write view of the objects.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use mlua::chunk::ChunkMode;
use mlua::state::{GcGenParams, GcMode};
use mlua::{Function, Lua, Table, Value};

use super::MAX_SCRIPT_BYTES;
use super::convert::{MAX_DEPTH, NodeId, Nodes};
use super::error::classify;
use super::outcome::{describe, read_outcome};
use super::sandbox::{DeadlineGuard, Machinery, new_state};
use super::{Conversion, CtxValue, LuaError, LuaLimits, LuaOutcome, ObjectId};
use crate::compact::CompactObject;

mod arrays;
mod per_object;

use arrays::Arrays;

/// Source of round ids, so an [`ObjectId`] from one round is refused by another.
static NEXT_ROUND: AtomicU64 = AtomicU64::new(1);

/// Chunk name of conditions: errors read `condition:LINE: ...`.
const CHUNK_NAME: &str = "=condition";

/// One evaluation round: one Lua state; each Kubernetes object is kept as JSON and
/// converted to Lua tables as scripts touch it, once for every check of the round. A
/// script may modify the objects it sees; its changes are undone when it ends. `Send`, so
/// rounds can run on a blocking thread; not `Sync`: the evaluations of one round run one
/// at a time.
///
/// The state outlives its round: [`LuaRound::begin`] starts the next one on it, and an
/// object taken in again as the same text (a clone of the same [`CompactObject`]: the
/// same object version, as the agent's watch cache hands it out) keeps what any earlier
/// round converted of it; [`LuaRound::release_untaken`] lets go of the versions the
/// current round did not take in.
pub struct LuaRound {
    lua: Lua,
    id: u64,
    limits: LuaLimits,
    conversion: Conversion,
    /// Root node id of each object of the current round, by [`ObjectId::index`].
    roots: Vec<NodeId>,
    /// The arrays of objects handed to scripts, kept to be copied.
    arrays: Arrays,
    machinery: Machinery,
    guard: Arc<DeadlineGuard>,
    /// Not `Sync`: the deadline and the memory allowance belong to one evaluation at a time.
    _one_at_a_time: PhantomData<Cell<()>>,
}

impl std::fmt::Debug for LuaRound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LuaRound")
            .field("id", &self.id)
            .field("limits", &self.limits)
            .field("objects", &self.roots.len())
            .finish_non_exhaustive()
    }
}

impl LuaRound {
    /// Creates the round's sandboxed Lua state; objects convert lazily.
    pub fn new(limits: LuaLimits) -> Result<Self, LuaError> {
        Self::with_conversion(limits, Conversion::Lazy)
    }

    /// Creates the round's sandboxed Lua state, converting objects as `conversion` says.
    pub fn with_conversion(limits: LuaLimits, conversion: Conversion) -> Result<Self, LuaError> {
        let guard = Arc::new(DeadlineGuard::new());
        let setup = |source| LuaError::Setup { source };
        let (lua, machinery) = new_state(guard.clone(), conversion).map_err(setup)?;
        // Generational: the converted objects live as long as the round, and an
        // incremental collector would mark them all again in every cycle (most of a
        // check's time); a young-generation collection visits only what is new.
        lua.gc_set_mode(GcMode::Generational(GcGenParams::default()));
        Ok(LuaRound {
            lua,
            id: NEXT_ROUND.fetch_add(1, Ordering::Relaxed),
            limits,
            conversion,
            roots: Vec::new(),
            arrays: Arrays::default(),
            machinery,
            guard,
            _one_at_a_time: PhantomData,
        })
    }

    /// Takes `object` (a Kubernetes object as JSON) into the round. Scripts never see
    /// `metadata.managedFields` (the live agent drops it when listing; dropping it here
    /// too makes `eval` see the same objects).
    pub fn add_object(&mut self, object: serde_json::Value) -> Result<ObjectId, LuaError> {
        self.add_compact(CompactObject::from(object))
    }

    /// Takes `object` into the round as it is, kept as its text until scripts read it. An
    /// object the state already holds as this very text (a clone of it) is not taken in
    /// again: it keeps what earlier evaluations converted of it.
    pub fn add_compact(&mut self, object: CompactObject) -> Result<ObjectId, LuaError> {
        let conversion = |object: &CompactObject, reason: &str| LuaError::Conversion {
            object: object.label(),
            reason: reason.to_string(),
        };
        if !object.is_object() {
            return Err(conversion(&object, "it is not a JSON object"));
        }
        let index = u32::try_from(self.roots.len())
            .map_err(|_| conversion(&object, "the round is full"))?;
        if u32::try_from(object.text().len()).is_err() {
            return Err(conversion(&object, "its JSON is longer than 4 GiB"));
        }
        let (node, held) = self
            .lua
            .app_data_mut::<Nodes>()
            .expect("the round's nodes are set at creation")
            .take(object)
            .ok_or_else(|| LuaError::Conversion {
                object: "an object".to_string(),
                reason: "the round is full".to_string(),
            })?;
        self.roots.push(node);
        // An object nested too deeply is taken in all the same: only a check that reaches
        // past the limit fails (see `convert`), so eager conversion leaves it lazy. One the
        // state held already was converted when it was first taken in.
        let label = match self.conversion {
            Conversion::Eager if !held => self.lua.app_data_ref::<Nodes>().and_then(|nodes| {
                let object = nodes.object(node)?;
                (object.depth() <= MAX_DEPTH).then(|| object.label())
            }),
            _ => None,
        };
        if let Some(label) = label {
            // Objects live as long as the round: collecting while converting them is
            // wasted work. The collector restarts with the next evaluation.
            self.lua.gc_stop();
            let root: Table = self
                .machinery
                .root
                .call(node)
                .map_err(|e| LuaError::Conversion {
                    object: label.clone(),
                    reason: e.to_string(),
                })?;
            self.machinery
                .eager
                .call::<()>(root)
                .map_err(|e| LuaError::Conversion {
                    object: label,
                    reason: e.to_string(),
                })?;
        }
        Ok(ObjectId {
            round: self.id,
            index,
        })
    }

    /// Starts the next round on this state, under `limits`: the previous round's
    /// [`ObjectId`]s are refused from now on, and no object is taken in yet. The objects
    /// the state holds stay converted for this round to take in again; those it does not
    /// are let go of by [`LuaRound::release_untaken`].
    pub fn begin(&mut self, limits: LuaLimits) {
        self.id = NEXT_ROUND.fetch_add(1, Ordering::Relaxed);
        self.limits = limits;
        self.roots.clear();
        self.arrays.next_round();
        if let Some(mut nodes) = self.lua.app_data_mut::<Nodes>() {
            nodes.untake_all();
        }
    }

    /// Lets go of every object version the state holds that this round did not take in
    /// (deleted or changed since, or no longer selected); returns how many. Call it once
    /// the round's objects are all taken in.
    pub fn release_untaken(&mut self) -> Result<usize, LuaError> {
        let released = match self.lua.app_data_mut::<Nodes>() {
            Some(mut nodes) => nodes.release_untaken(),
            None => return Ok(0),
        };
        if !released.is_empty() {
            self.arrays.clear();
            let setup = |source| LuaError::Setup { source };
            let ids = self.lua.create_sequence_from(released.iter().copied());
            self.machinery
                .forget
                .call::<()>(ids.map_err(setup)?)
                .map_err(setup)?;
        }
        Ok(released.len())
    }

    /// How many object versions the state holds (taken in by this round or kept from
    /// earlier ones and not let go of yet).
    pub fn held_objects(&self) -> usize {
        self.lua
            .app_data_ref::<Nodes>()
            .map_or(0, |nodes| nodes.held())
    }

    /// How many objects this round holds (each converted exactly once).
    pub fn object_count(&self) -> usize {
        self.roots.len()
    }

    /// The limits every evaluation of this round runs under.
    pub fn limits(&self) -> &LuaLimits {
        &self.limits
    }

    /// Evaluates `condition` (Lua source defining `function evaluate()`), with globals
    /// `resources` (array of the given objects, in order) and `ctx` (table: identifier ->
    /// object or array); `resources` is also evaluate's first argument. Each call gets fresh
    /// globals: nothing one check sets is visible to another.
    pub fn evaluate(
        &self,
        check_name: &str,
        condition: &str,
        resources: &[ObjectId],
        ctx: &[(String, CtxValue)],
    ) -> Result<LuaOutcome, LuaError> {
        self.evaluate_within(check_name, condition, resources, ctx, self.limits.deadline)
    }

    /// Like [`LuaRound::evaluate`], with this evaluation's own deadline (a check's
    /// `timeoutSeconds`) instead of the round's.
    pub fn evaluate_within(
        &self,
        check_name: &str,
        condition: &str,
        resources: &[ObjectId],
        ctx: &[(String, CtxValue)],
        deadline: std::time::Duration,
    ) -> Result<LuaOutcome, LuaError> {
        // Check handles first: a foreign handle is a caller bug, not a script failure.
        for id in resources
            .iter()
            .chain(ctx.iter().flat_map(|(_, value)| match value {
                CtxValue::One(id) => std::slice::from_ref(id),
                CtxValue::Many(ids) => ids.as_slice(),
            }))
        {
            self.check_id(check_name, *id)?;
        }
        self.guarded(check_name, deadline, || {
            self.run(check_name, condition, resources, ctx)
        })
    }

    /// Runs `f` as one evaluation: under `deadline` and the memory allowance, with the
    /// scripts' changes to objects undone afterwards and a failure classified.
    pub(super) fn guarded<T>(
        &self,
        check_name: &str,
        deadline: std::time::Duration,
        f: impl FnOnce() -> Result<T, Failure>,
    ) -> Result<T, LuaError> {
        let internal = |source| LuaError::Internal {
            check: check_name.to_string(),
            source,
        };
        self.lua.gc_restart();
        let allowance = self
            .lua
            .used_memory()
            .saturating_add(self.limits.memory_bytes);
        let previous_limit = self.lua.set_memory_limit(allowance).map_err(internal)?;
        // Each evaluation's own random sequence: a `math.randomseed` in one check says
        // nothing about the next check's `math.random()`.
        let seed: (i64, i64) = (rand::random(), rand::random());
        self.machinery
            .randomseed
            .call::<()>(seed)
            .map_err(internal)?;
        self.guard.arm(deadline);
        let result = f();
        let late = self.guard.disarm();
        self.lua
            .set_memory_limit(previous_limit)
            .map_err(internal)?;
        // Undo what the script changed in the objects, before anything else runs.
        self.machinery.restore.call::<()>(()).map_err(internal)?;

        let result = match result {
            _ if late => Err(LuaError::Deadline {
                check: check_name.to_string(),
                deadline,
            }),
            Err(Failure::Lua(e)) => Err(classify(check_name, e, &self.limits)),
            Err(Failure::Check(e)) => Err(e),
            Ok(value) => Ok(value),
        };
        if result.is_err() {
            // Free what the failed script left behind, so the next check starts from the
            // round's own footprint. Failing here would only leave garbage for later.
            let _ = self.lua.gc_collect();
        }
        result
    }

    /// Loads and runs the script in a fresh environment, then reads its verdict.
    fn run(
        &self,
        check: &str,
        condition: &str,
        resources: &[ObjectId],
        ctx: &[(String, CtxValue)],
    ) -> Result<LuaOutcome, Failure> {
        let lua = &self.lua;
        let array = self.array(resources)?;
        let ctx_table = lua.create_table_with_capacity(0, ctx.len())?;
        for (key, value) in ctx {
            match value {
                CtxValue::One(id) => ctx_table.raw_set(
                    key.as_str(),
                    self.machinery
                        .root
                        .call::<Table>(self.roots[id.index as usize])?,
                )?,
                CtxValue::Many(ids) => ctx_table.raw_set(key.as_str(), self.array(ids)?)?,
            }
        }
        let env: Table = self.machinery.new_env.call(())?;
        env.raw_set("resources", &array)?;
        env.raw_set("ctx", ctx_table)?;

        let chunk = self.compile(check, condition)?;
        chunk.set_environment(env.clone())?;
        chunk.call::<()>(())?;
        let evaluate = match env.raw_get::<Value>("evaluate")? {
            Value::Function(f) => f,
            Value::Nil => {
                return Err(Failure::Check(LuaError::NoEvaluate {
                    check: check.to_string(),
                }));
            }
            other => {
                return Err(Failure::Check(LuaError::BadResult {
                    check: check.to_string(),
                    detail: format!("`evaluate` is {}, not a function", describe(&other)),
                }));
            }
        };
        let returned = call_first(&evaluate, array)?;
        read_outcome(check, returned, self.limits.max_message_bytes).map_err(Failure::Check)
    }

    /// Compiles a check's script within the evaluation: a source over
    /// [`MAX_SCRIPT_BYTES`] is refused before it is parsed, compiling allocates from the
    /// evaluation's memory allowance, and its time counts against the deadline.
    fn compile(&self, check: &str, script: &str) -> Result<Function, Failure> {
        if script.len() > MAX_SCRIPT_BYTES {
            return Err(Failure::Check(LuaError::TooLarge {
                check: check.to_string(),
                bytes: script.len(),
            }));
        }
        let chunk = self
            .lua
            .load(script)
            .set_name(CHUNK_NAME)
            .set_mode(ChunkMode::Text)
            .into_function()?;
        // The parser runs no hook: look at the clock once it is done.
        self.guard.check()?;
        Ok(chunk)
    }

    /// Bytes the round's Lua state holds (converted objects, library, garbage not yet
    /// collected); the objects' JSON is not counted.
    pub fn lua_memory(&self) -> usize {
        self.lua.used_memory()
    }

    /// Tables converted from JSON over the state's life (bulk-converted small members
    /// count with their parent), for tests of what rounds reuse.
    #[cfg(test)]
    pub(super) fn converted_nodes(&self) -> u64 {
        self.lua
            .app_data_ref::<Nodes>()
            .map_or(0, |nodes| nodes.converted())
    }

    /// A full garbage collection, for tests of memory release.
    #[cfg(test)]
    pub(super) fn collect_garbage(&self) {
        self.lua.gc_collect().expect("a full collection");
    }

    /// Bytes the round's Lua state holds, for tests of memory release.
    #[cfg(test)]
    pub(super) fn used_memory(&self) -> usize {
        self.lua.used_memory()
    }

    /// A fresh array of the objects `ids` (checked), in order: a copy of the template
    /// listing them, made the first time they are listed.
    fn array(&self, ids: &[ObjectId]) -> mlua::Result<Table> {
        let roots = ids.iter().map(|id| self.roots[id.index as usize]).collect();
        let template = self.arrays.template(roots, |roots| {
            let nodes = self.lua.create_sequence_from(roots.iter().copied())?;
            self.machinery.pick.call(nodes)
        })?;
        let fresh = self.lua.create_table_with_capacity(ids.len(), 0)?;
        self.machinery.copy.call((template, fresh))
    }

    fn check_id(&self, check: &str, id: ObjectId) -> Result<(), LuaError> {
        if id.round == self.id && (id.index as usize) < self.roots.len() {
            Ok(())
        } else {
            Err(LuaError::UnknownObject {
                check: check.to_string(),
                id,
            })
        }
    }
}

/// A failure inside [`LuaRound::run`]: from Lua (classified afterwards) or already a
/// check error.
pub(super) enum Failure {
    Lua(mlua::Error),
    Check(LuaError),
}

impl From<mlua::Error> for Failure {
    fn from(e: mlua::Error) -> Self {
        Failure::Lua(e)
    }
}

/// Calls `evaluate(resources)` and keeps its first result (the others are dropped in Lua,
/// not converted).
fn call_first(evaluate: &Function, resources: Table) -> mlua::Result<Value> {
    evaluate.call::<Value>(resources)
}
