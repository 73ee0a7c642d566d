//! The Lua 5.4 state of a round: which library a script gets (Lua 5.1's, as gopher-lua has
//! it), the deadline hook, and the table every evaluation's fresh environment is copied
//! from.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mlua::{Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value, VmState};

use super::{Conversion, compat, convert, pattern};

/// The Lua side of a round: fresh environments, and the objects' proxies (`objects.lua`).
pub(super) struct Machinery {
    /// `new_env()`: a fresh environment for one evaluation.
    pub(super) new_env: Function,
    /// `pick(node_ids)`: an array of the root proxies of these nodes.
    pub(super) pick: Function,
    /// `copy(template, fresh)`: `fresh` (made with room for them) filled with the
    /// elements of the array `template`, in order; returns it.
    pub(super) copy: Function,
    /// `root(node_id)`: the root proxy of a node.
    pub(super) root: Function,
    /// `forget(node_ids)`: drops the root proxies of these nodes (objects let go of).
    pub(super) forget: Function,
    /// `restore()`: undoes the writes of the evaluation that just ended.
    pub(super) restore: Function,
    /// `eager(proxy)`: converts a whole object now (in an eager round, where touching the
    /// root converts every table).
    pub(super) eager: Function,
    /// `math.randomseed`: seeds the random sequence of the state (every evaluation's).
    pub(super) randomseed: Function,
}

/// Library tables each evaluation gets its own copy of: a script may change them (as in
/// gopher-lua, whose states Sveltos makes per evaluation) without another one seeing it.
const COPIED_LIBRARIES: &str = r#"
local base, overrides = ...
local next = next
local libraries = { "string", "table", "math", "os", "coroutine" }
return function()
  local env = {}
  for k, v in next, base do env[k] = v end
  for k, v in next, overrides do env[k] = v end
  for i = 1, #libraries do
    local copy = {}
    for k, v in next, base[libraries[i]] do copy[k] = v end
    env[libraries[i]] = copy
  end
  env._G = env
  return env
end
"#;

/// Libraries loaded besides the base library; `os` is cut down to its clock functions.
fn libraries() -> StdLib {
    StdLib::COROUTINE | StdLib::TABLE | StdLib::OS | StdLib::STRING | StdLib::MATH
}

/// Globals replaced by a function that fails with a clear message: loading code (`load`,
/// `loadstring`, `dofile`, `loadfile`), environment escapes (`getfenv`, `setfenv`),
/// `newproxy`. (`require` is the Sveltos helper-module loader, see `compat`.)
const UNAVAILABLE_GLOBALS: [&str; 7] = [
    "load",
    "loadstring",
    "dofile",
    "loadfile",
    "getfenv",
    "setfenv",
    "newproxy",
];

/// `os` functions that reach outside the process, given the same clear failure.
const UNAVAILABLE_OS: [&str; 7] = [
    "execute",
    "exit",
    "getenv",
    "remove",
    "rename",
    "tmpname",
    "setlocale",
];

/// Lua 5.4 additions that Lua 5.1 and gopher-lua lack, or that expose bytecode.
const REMOVED_STRING: [&str; 4] = ["dump", "pack", "unpack", "packsize"];

/// Libraries that do not exist here; indexing them fails with a clear message.
const UNAVAILABLE_LIBRARIES: [&str; 3] = ["io", "debug", "package"];

/// Instructions between two deadline checks. A check costs a clock read (about 20 ns),
/// so the hook adds well under 1 % and a loop is stopped within microseconds.
const INSTRUCTIONS_PER_CHECK: u32 = 1000;

/// Creates the sandboxed state and its [`Machinery`].
/// Objects convert as `conversion` says (see `convert::Nodes`).
pub(super) fn new_state(
    guard: Arc<DeadlineGuard>,
    conversion: Conversion,
) -> mlua::Result<(Lua, Machinery)> {
    let lua = Lua::new_with(libraries(), LuaOptions::default())?;
    let globals = lua.globals();
    let string: Table = globals.raw_get("string")?;
    for name in REMOVED_STRING {
        string.raw_set(name, Value::Nil)?;
    }
    pattern::install(&lua, &string, guard.clone())?;
    for name in UNAVAILABLE_GLOBALS {
        globals.raw_set(name, unavailable(&lua, name.to_string())?)?;
    }
    let os: Table = globals.raw_get("os")?;
    for name in UNAVAILABLE_OS {
        os.raw_set(name, unavailable(&lua, format!("os.{name}"))?)?;
    }
    for name in UNAVAILABLE_LIBRARIES {
        globals.raw_set(name, unavailable_library(&lua, name)?)?;
    }
    // Scripts may print while debugging; the agent's stdout is not theirs.
    globals.raw_set("print", lua.create_function(|_, _: MultiValue| Ok(()))?)?;
    let objects: Table = lua
        .load(include_str!("objects.lua"))
        .set_name("=fleetpulse")
        .call((
            {
                // Converting is the round's work: its time does not count against the
                // script's deadline, nor its memory against the script's allowance.
                let guard = guard.clone();
                lua.create_function(move |lua, (proxy, id): (Table, convert::NodeId)| {
                    let started = Instant::now();
                    let converted = granted(lua, || convert::materialise(lua, proxy, id));
                    guard.extend(started.elapsed());
                    converted
                })?
            },
            // Sets a metatable whatever the current one says (`__metatable` included):
            // restoring a proxy a script gave a protected metatable of its own.
            lua.create_function(|_, (table, meta): (Table, Option<Table>)| {
                table.set_metatable(meta)
            })?,
        ))?;
    let kit = convert::Kit::new(&objects.raw_get("kit")?)?;
    lua.set_app_data(convert::Nodes::new(kit, conversion));
    globals.raw_set("collectgarbage", collectgarbage(&lua)?)?;
    compat::install(&lua, &globals, objects.raw_get("plain")?)?;
    protect_deadline(&lua, &globals, guard.clone())?;
    // The string metatable: `("x"):upper()` keeps working, but no script can reach it.
    let string_meta = lua
        .load(r#"return getmetatable("")"#)
        .set_name("=fleetpulse")
        .eval::<Table>()?;
    string_meta.raw_set("__metatable", false)?;

    let base = lua.create_table()?;
    for pair in globals.pairs::<Value, Value>() {
        let (k, v) = pair?;
        base.raw_set(k, v)?;
    }
    let new_env: Function = lua
        .load(COPIED_LIBRARIES)
        .set_name("=fleetpulse")
        .call((base, objects.raw_get::<Table>("overrides")?))?;
    let math: Table = globals.raw_get("math")?;
    let machinery = Machinery {
        randomseed: math.raw_get("randomseed")?,
        new_env,
        pick: objects.raw_get("pick")?,
        copy: objects.raw_get("copy")?,
        root: objects.raw_get("root")?,
        forget: objects.raw_get("forget")?,
        restore: objects.raw_get("restore")?,
        eager: objects.raw_get("eager")?,
    };

    lua.set_global_hook(
        HookTriggers::new().every_nth_instruction(INSTRUCTIONS_PER_CHECK),
        move |_, _| {
            guard.check()?;
            Ok(VmState::Continue)
        },
    )?;
    Ok((lua, machinery))
}

/// Runs `convert` with the memory limit lifted, then raises the evaluation's limit by what
/// it allocated, so conversion never counts against (nor fails for) a script's allowance.
fn granted<T>(lua: &Lua, convert: impl FnOnce() -> mlua::Result<T>) -> mlua::Result<T> {
    let before = lua.used_memory();
    let limit = lua.set_memory_limit(0)?;
    // What conversion allocates lives as long as the round: collecting meanwhile would
    // only mark it.
    let running = lua.gc_is_running();
    lua.gc_stop();
    let converted = convert();
    if running {
        lua.gc_restart();
    }
    let grown = lua.used_memory().saturating_sub(before);
    if limit != 0 {
        lua.set_memory_limit(limit.saturating_add(grown))?;
    }
    converted
}

/// `pcall`, `xpcall` and `coroutine.resume` that re-raise the deadline error once the
/// deadline passed: the hook fires wherever the script is, mostly inside the protected
/// call, so without this a loop around `pcall` would never end.
const DEADLINE_PROTECTION: &str = r#"
local tripped, pcall, xpcall, resume, error = ...
local function check(ok, ...)
  if not ok and tripped() then error("evaluation deadline exceeded", 0) end
  return ok, ...
end
return function(f, ...) return check(pcall(f, ...)) end,
  function(f, handler, ...) return check(xpcall(f, handler, ...)) end,
  function(co, ...) return check(resume(co, ...)) end
"#;

fn protect_deadline(lua: &Lua, globals: &Table, guard: Arc<DeadlineGuard>) -> mlua::Result<()> {
    let coroutine: Table = globals.raw_get("coroutine")?;
    let (pcall, xpcall, resume) = lua
        .load(DEADLINE_PROTECTION)
        .set_name("=fleetpulse")
        .call::<(Function, Function, Function)>((
            lua.create_function(move |_, ()| Ok(guard.expired()))?,
            globals.raw_get::<Function>("pcall")?,
            globals.raw_get::<Function>("xpcall")?,
            coroutine.raw_get::<Function>("resume")?,
            globals.raw_get::<Function>("error")?,
        ))?;
    globals.raw_set("pcall", pcall)?;
    globals.raw_set("xpcall", xpcall)?;
    coroutine.raw_set("resume", resume)?;
    Ok(())
}

/// `collectgarbage("count")` only: a script cannot stop or drive the collector.
fn collectgarbage(lua: &Lua) -> mlua::Result<Function> {
    lua.create_function(|lua, (option, _): (Option<String>, MultiValue)| {
        match option.as_deref().unwrap_or("collect") {
            "count" => Ok(lua.used_memory() as f64 / 1024.0),
            other => Err(mlua::Error::runtime(format!(
                "collectgarbage: invalid option '{other}' (only \"count\" is available)"
            ))),
        }
    })
}

/// A function that fails with "`name` is not available ...".
fn unavailable(lua: &Lua, name: String) -> mlua::Result<Function> {
    let message = format!("`{name}` is not available in the fleetpulse Lua sandbox");
    lua.create_function(move |_, _: MultiValue| Err::<(), _>(mlua::Error::runtime(&message)))
}

/// An empty table whose every field fails with "`name.field` is not available", and which
/// cannot be written.
fn unavailable_library(lua: &Lua, name: &'static str) -> mlua::Result<Table> {
    let meta = lua.create_table_with_capacity(0, 3)?;
    let index = lua.create_function(move |_, (_, key): (Table, Value)| {
        let key = match key {
            Value::String(s) => s.to_string_lossy(),
            _ => "?".to_string(),
        };
        Err::<(), _>(mlua::Error::runtime(format!(
            "`{name}.{key}` is not available in the fleetpulse Lua sandbox (there is no `{name}` library)"
        )))
    })?;
    let write = lua.create_function(|_, _: MultiValue| {
        Err::<(), _>(mlua::Error::runtime("attempt to modify a readonly table"))
    })?;
    meta.raw_set("__index", index)?;
    meta.raw_set("__newindex", write)?;
    meta.raw_set("__metatable", false)?;
    let library = lua.create_table()?;
    library.set_metatable(Some(meta))?;
    Ok(library)
}

/// The deadline of the evaluation in progress, shared with the hook and the pattern
/// matcher.
#[derive(Debug)]
pub(super) struct DeadlineGuard {
    epoch: Instant,
    /// Nanoseconds since `epoch` at which the evaluation expires; 0 when disarmed.
    deadline_nanos: AtomicU64,
    /// Set once the deadline was seen to pass; stays set until re-armed.
    tripped: AtomicBool,
}

impl DeadlineGuard {
    /// A disarmed guard.
    pub(super) fn new() -> Self {
        DeadlineGuard {
            epoch: Instant::now(),
            deadline_nanos: AtomicU64::new(0),
            tripped: AtomicBool::new(false),
        }
    }

    /// Starts an evaluation that may run for `budget` from now.
    pub(super) fn arm(&self, budget: Duration) {
        let until = self.epoch.elapsed().saturating_add(budget);
        let nanos = u64::try_from(until.as_nanos()).unwrap_or(u64::MAX).max(1);
        self.tripped.store(false, Ordering::Relaxed);
        self.deadline_nanos.store(nanos, Ordering::Relaxed);
    }

    /// Moves the armed deadline (if not yet passed) later by `by`.
    fn extend(&self, by: Duration) {
        let deadline = self.deadline_nanos.load(Ordering::Relaxed);
        if deadline != 0 && !self.tripped.load(Ordering::Relaxed) {
            let by = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
            self.deadline_nanos
                .store(deadline.saturating_add(by), Ordering::Relaxed);
        }
    }

    /// Ends the evaluation; returns whether it ran past its deadline.
    pub(super) fn disarm(&self) -> bool {
        self.deadline_nanos.store(0, Ordering::Relaxed);
        self.tripped.swap(false, Ordering::Relaxed)
    }

    /// Fails once the armed deadline passed, and at every later call, so a script that
    /// catches the error with `pcall` fails again at its next check.
    pub(super) fn check(&self) -> mlua::Result<()> {
        if self.expired() {
            Err(mlua::Error::runtime("evaluation deadline exceeded"))
        } else {
            Ok(())
        }
    }

    fn expired(&self) -> bool {
        if self.tripped.load(Ordering::Relaxed) {
            return true;
        }
        let deadline = self.deadline_nanos.load(Ordering::Relaxed);
        if deadline == 0 {
            return false;
        }
        let now = u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
        if now >= deadline {
            self.tripped.store(true, Ordering::Relaxed);
            return true;
        }
        false
    }
}
