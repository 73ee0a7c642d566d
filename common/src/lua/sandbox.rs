//! The Luau state of a round: which standard library a script gets, the read-only global
//! environment, and the deadline interrupt.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mlua::{Function, Lua, LuaOptions, MultiValue, StdLib, Table, VmState};

/// Libraries loaded besides the base library. Luau's `os` only has `clock`, `date`,
/// `difftime` and `time`. Luau has no `io` or `package`; `debug`, `buffer`, `vector` and
/// `integer` are left out on purpose (introspection, and types Sveltos' Lua 5.1 lacks).
fn libraries() -> StdLib {
    StdLib::COROUTINE
        | StdLib::TABLE
        | StdLib::OS
        | StdLib::STRING
        | StdLib::UTF8
        | StdLib::BIT
        | StdLib::MATH
}

/// Base-library (and mlua) globals replaced by a function that fails with a clear
/// message: module loading (`require` reads files), loading code (`load`, `loadstring`,
/// `dofile`, `loadfile`), environment escapes (`getfenv`, `setfenv`), and `newproxy`.
const UNAVAILABLE_GLOBALS: [&str; 8] = [
    "require",
    "load",
    "loadstring",
    "dofile",
    "loadfile",
    "getfenv",
    "setfenv",
    "newproxy",
];

/// Lua 5.1 `os` functions Luau lacks, given the same clear failure (Sveltos runs Lua 5.1).
const UNAVAILABLE_OS: [&str; 6] = ["execute", "exit", "getenv", "remove", "rename", "tmpname"];

/// Libraries that do not exist here; indexing them fails with a clear message.
const UNAVAILABLE_LIBRARIES: [&str; 3] = ["io", "debug", "package"];

/// How many interrupts pass between two reads of the clock. Luau interrupts at every
/// call and loop back-edge; reading the clock at each would slow tight loops.
const INTERRUPTS_PER_CLOCK_READ: u32 = 64;

/// Creates the sandboxed state. Returns it with the metatable every evaluation's fresh
/// environment uses (`__index` = the read-only globals).
pub(super) fn new_state(guard: Arc<DeadlineGuard>) -> mlua::Result<(Lua, Table)> {
    let lua = Lua::new_with(libraries(), LuaOptions::default())?;
    let globals = lua.globals();
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
    // Read-only libraries, globals and built-in metatables; `collectgarbage("count")` only.
    lua.sandbox(true)?;

    let env_meta = lua.create_table_with_capacity(0, 1)?;
    env_meta.raw_set("__index", globals)?;
    env_meta.set_readonly(true);

    let ticks = Cell::new(0u32);
    lua.set_interrupt(move |_| {
        let tick = ticks.get().wrapping_add(1);
        ticks.set(tick);
        if guard.expired(tick.is_multiple_of(INTERRUPTS_PER_CLOCK_READ)) {
            return Err(mlua::Error::runtime("evaluation deadline exceeded"));
        }
        Ok(VmState::Continue)
    });
    Ok((lua, env_meta))
}

/// A function that fails with "`name` is not available ...".
fn unavailable(lua: &Lua, name: String) -> mlua::Result<Function> {
    let message = format!("`{name}` is not available in the fleetpulse Lua sandbox");
    lua.create_function(move |_, _: MultiValue| Err::<(), _>(mlua::Error::runtime(&message)))
}

/// A read-only empty table whose every field fails with "`name.field` is not available".
fn unavailable_library(lua: &Lua, name: &'static str) -> mlua::Result<Table> {
    let meta = lua.create_table_with_capacity(0, 2)?;
    let index = lua.create_function(move |_, (_, key): (Table, mlua::Value)| {
        let key = match key {
            mlua::Value::String(s) => s.to_string_lossy(),
            _ => "?".to_string(),
        };
        Err::<(), _>(mlua::Error::runtime(format!(
            "`{name}.{key}` is not available in the fleetpulse Lua sandbox (there is no `{name}` library)"
        )))
    })?;
    meta.raw_set("__index", index)?;
    meta.raw_set("__metatable", false)?;
    meta.set_readonly(true);
    let library = lua.create_table()?;
    library.set_metatable(Some(meta))?;
    library.set_readonly(true);
    Ok(library)
}

/// The deadline of the evaluation in progress, shared with the interrupt.
#[derive(Debug)]
pub(super) struct DeadlineGuard {
    epoch: Instant,
    /// Nanoseconds since `epoch` at which the evaluation expires; 0 when disarmed.
    deadline_nanos: AtomicU64,
    /// Set once the interrupt has seen the deadline pass; stays set until re-armed.
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

    /// Ends the evaluation; returns whether it ran past its deadline.
    pub(super) fn disarm(&self) -> bool {
        self.deadline_nanos.store(0, Ordering::Relaxed);
        self.tripped.swap(false, Ordering::Relaxed)
    }

    /// Whether the armed deadline passed. Once it has, every later call says so, so a
    /// script that catches the error with `pcall` fails at its next interrupt.
    fn expired(&self, read_clock: bool) -> bool {
        if self.tripped.load(Ordering::Relaxed) {
            return true;
        }
        let deadline = self.deadline_nanos.load(Ordering::Relaxed);
        if deadline == 0 || !read_clock {
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
