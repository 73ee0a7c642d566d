//! [`LuaRound`]: one Lua state per evaluation round; objects converted once, checks
//! evaluated in fresh environments under a deadline and a memory allowance.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use mlua::chunk::ChunkMode;
use mlua::{Function, Lua, Table, Value};

use super::convert::{ConvertError, MAX_DEPTH, StringCache, object_to_table};
use super::error::classify;
use super::outcome::{describe, read_outcome};
use super::sandbox::{DeadlineGuard, new_state};
use super::{CtxValue, LuaError, LuaLimits, LuaOutcome, ObjectId};

/// Source of round ids, so an [`ObjectId`] from one round is refused by another.
static NEXT_ROUND: AtomicU64 = AtomicU64::new(1);

/// Chunk name of conditions: errors read `condition:LINE: ...`.
const CHUNK_NAME: &str = "=condition";

/// One evaluation round: one Lua state; each Kubernetes object is converted to a Lua table
/// once (read-only, deeply: scripts cannot modify objects other checks see) and shared by
/// every check of the round. `Send`, so rounds can run on a blocking thread; not `Sync`:
/// the evaluations of one round run one at a time.
pub struct LuaRound {
    lua: Lua,
    id: u64,
    limits: LuaLimits,
    /// Lua array of the converted objects (`ObjectId.index + 1`), so that a check's arrays
    /// are built by one Lua call (`pick`) rather than two mlua calls per object.
    objects: Table,
    object_count: u32,
    /// `pick(objects, indices)`: the array of the objects at `indices`.
    pick: Function,
    strings: StringCache,
    env_meta: Table,
    guard: Arc<DeadlineGuard>,
    /// Not `Sync`: the deadline and the memory allowance belong to one evaluation at a time.
    _one_at_a_time: PhantomData<Cell<()>>,
}

impl std::fmt::Debug for LuaRound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LuaRound")
            .field("id", &self.id)
            .field("limits", &self.limits)
            .field("objects", &self.object_count)
            .finish_non_exhaustive()
    }
}

impl LuaRound {
    /// Creates the round's sandboxed Lua state.
    pub fn new(limits: LuaLimits) -> Result<Self, LuaError> {
        let guard = Arc::new(DeadlineGuard::new());
        let setup = |source| LuaError::Setup { source };
        let (lua, env_meta) = new_state(guard.clone()).map_err(setup)?;
        let objects = lua.create_table().map_err(setup)?;
        let pick = lua
            .load(PICK)
            .set_name("=fleetpulse")
            .set_mode(ChunkMode::Text)
            .eval::<Function>()
            .map_err(setup)?;
        Ok(LuaRound {
            lua,
            id: NEXT_ROUND.fetch_add(1, Ordering::Relaxed),
            limits,
            objects,
            object_count: 0,
            pick,
            strings: StringCache::default(),
            env_meta,
            guard,
            _one_at_a_time: PhantomData,
        })
    }

    /// Converts `object` (a Kubernetes object as JSON) to a read-only Lua table, once.
    pub fn add_object(&mut self, object: &serde_json::Value) -> Result<ObjectId, LuaError> {
        let conversion = |reason: String| LuaError::Conversion {
            object: object_label(object),
            reason,
        };
        let serde_json::Value::Object(map) = object else {
            return Err(conversion("it is not a JSON object".to_string()));
        };
        let index = self.object_count;
        let slot = index
            .checked_add(1)
            .ok_or_else(|| conversion("the round is full".to_string()))?;
        // Objects live as long as the round: collecting while converting them is wasted
        // work. The collector restarts with the next evaluation.
        self.lua.gc_stop();
        let table = object_to_table(&self.lua, &mut self.strings, map).map_err(|e| match e {
            ConvertError::TooDeep => {
                conversion(format!("it is nested deeper than {MAX_DEPTH} levels"))
            }
            ConvertError::Lua(e) => conversion(e.to_string()),
        })?;
        self.objects
            .raw_set(slot, table)
            .map_err(|e| conversion(e.to_string()))?;
        self.object_count = slot;
        Ok(ObjectId {
            round: self.id,
            index,
        })
    }

    /// How many objects this round holds (each converted exactly once).
    pub fn object_count(&self) -> usize {
        self.object_count as usize
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
        let internal = |source| LuaError::Internal {
            check: check_name.to_string(),
            source,
        };
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

        self.lua.gc_restart();
        let allowance = self
            .lua
            .used_memory()
            .saturating_add(self.limits.memory_bytes);
        let previous_limit = self.lua.set_memory_limit(allowance).map_err(internal)?;
        self.guard.arm(deadline);
        let result = self.run(check_name, condition, resources, ctx);
        let late = self.guard.disarm();
        self.lua
            .set_memory_limit(previous_limit)
            .map_err(internal)?;

        let result = match result {
            _ if late => Err(LuaError::Deadline {
                check: check_name.to_string(),
                deadline,
            }),
            Err(Failure::Lua(e)) => Err(classify(check_name, e, &self.limits)),
            Err(Failure::Check(e)) => Err(e),
            Ok(outcome) => Ok(outcome),
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
                CtxValue::One(id) => {
                    ctx_table.raw_set(key.as_str(), self.objects.raw_get::<Table>(id.index + 1)?)?
                }
                CtxValue::Many(ids) => ctx_table.raw_set(key.as_str(), self.array(ids)?)?,
            }
        }
        let env = lua.create_table_with_capacity(0, 4)?;
        env.set_metatable(Some(self.env_meta.clone()))?;
        env.raw_set("resources", &array)?;
        env.raw_set("ctx", ctx_table)?;
        // `safeenv`, as Luau's own per-script sandbox sets: builtins such as `ipairs` are
        // resolved once and iterate on the fast path (about 0.7 ms of a check over 2,000
        // objects). Lua semantics hold: the compiler never pre-resolves a global the script
        // assigns, and a script has no other way to write its environment (no `getfenv`,
        // `setfenv`, and `_G` is the read-only library table).
        env.set_safeenv(true);

        let chunk = lua
            .load(condition)
            .set_name(CHUNK_NAME)
            .set_mode(ChunkMode::Text)
            .set_environment(env.clone())
            .into_function()?;
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

    /// Bytes the round's Lua state holds (objects, scripts, garbage not yet collected).
    pub fn used_memory(&self) -> usize {
        self.lua.used_memory()
    }

    /// A fresh array of the objects `ids` (checked), in order.
    fn array(&self, ids: &[ObjectId]) -> mlua::Result<Table> {
        let indices = self
            .lua
            .create_sequence_from(ids.iter().map(|id| id.index + 1))?;
        self.pick.call((&self.objects, indices))
    }

    fn check_id(&self, check: &str, id: ObjectId) -> Result<(), LuaError> {
        if id.round == self.id && id.index < self.object_count {
            Ok(())
        } else {
            Err(LuaError::UnknownObject {
                check: check.to_string(),
                id,
            })
        }
    }
}

/// Builds a check's object arrays inside Lua: one call instead of two per object.
const PICK: &str = "return function(objects, indices)
    local out = table.create(#indices)
    for i, index in ipairs(indices) do out[i] = objects[index] end
    return out
end";

/// A failure inside [`LuaRound::run`]: from Lua (classified afterwards) or already a
/// check error.
enum Failure {
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

/// `Kind namespace/name` of an object, for conversion errors.
fn object_label(object: &serde_json::Value) -> String {
    let kind = object["kind"].as_str().unwrap_or("object");
    let name = object["metadata"]["name"].as_str().unwrap_or("<unnamed>");
    match object["metadata"]["namespace"].as_str() {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}
