//! The Lua sandbox that runs `ClusterCheck.condition` scripts (Sveltos-compatible Lua
//! over Kubernetes objects) and Argo CD health scripts, on Lua 5.4 (vendored, through
//! mlua) with the library of Lua 5.1 as gopher-lua has it.
//!
//! One [`LuaRound`] is one Lua state for one evaluation round: every Kubernetes object of
//! the round is kept as its compact JSON text ([`LuaRound::add_compact`], or
//! [`LuaRound::add_object`] from a JSON value) and converted to Lua tables level by level,
//! each level parsed from the text when a script first touches it; what is converted is
//! shared by every check of the round ([`LuaRound::evaluate`]).
//!
//! # What a script sees
//!
//! - `resources`: an array of the check's objects, in order; also the first argument of
//!   `evaluate`. `ctx`: a table from selector identifier to one object (the selector named
//!   one object) or to an array of objects.
//! - Objects convert faithfully from JSON: objects become tables with string keys, arrays
//!   become 1-based arrays, strings and booleans stay as they are, integral numbers become
//!   integers and others floats (both print as gopher-lua prints them). JSON `null` becomes
//!   `nil`, as in Sveltos. `metadata.managedFields` is dropped.
//! - Objects may be modified (`table.sort(obj.status.conditions, ...)`,
//!   `obj.metadata.labels = obj.metadata.labels or {}`): a modified table is copied for the
//!   script (copy on write) and the change is undone when the evaluation ends, so no other
//!   check and no later round sees it.
//! - Globals: Lua 5.1's base library (with `unpack`), `string` (with `gfind`), `table`
//!   (with `getn`, `maxn`), `math` (with `mod`, `pow`, `log10`, `ldexp`, `frexp`, ...),
//!   `coroutine`, `os.clock`/`date`/`difftime`/`time`, `goto` and labels; Sveltos' helpers
//!   `base64Encode`, `base64Decode`, `getLabel`, `getAnnotation`, `getResource`, and
//!   `require` of the modules `json` and `strings` (and nothing else).
//! - Not available, failing with "`name` is not available in the fleetpulse Lua sandbox":
//!   `load`, `loadstring`, `dofile`, `loadfile`, `getfenv`, `setfenv`, `newproxy`,
//!   `os.execute`, `os.exit`, `os.getenv`, `os.remove`, `os.rename`, `os.tmpname`,
//!   `os.setlocale`, and every field of `io`, `debug` and `package`. There is no
//!   `string.dump` and a condition is always compiled from source (bytecode is refused).
//!   `print` does nothing; `collectgarbage` only answers `"count"`.
//! - Each evaluation has fresh globals and its own copies of the library tables: what one
//!   script sets or replaces is invisible to the next. Its random sequence is its own too,
//!   seeded unpredictably: `math.randomseed` affects only the evaluation that calls it.
//!
//! # Limits
//!
//! Each evaluation has a deadline (an instruction-count hook fails the script once it
//! passed, even if the script catches the error with `pcall`; the pattern functions check
//! it too) and a memory allowance on top of what the round already holds (converting
//! objects does not count against it); a failed evaluation frees its garbage, so the next
//! check of the round runs normally. See [`LuaLimits`].
//!
//! Compiling the script is part of its evaluation: a source over [`MAX_SCRIPT_BYTES`] is
//! refused before it is parsed, the parser allocates from the allowance, and its time
//! counts against the deadline. An object nested deeper than 64 tables is taken in all the
//! same; only a script that reads past that depth fails.
//!
//! # Result
//!
//! `evaluate()` returns a table with a boolean `pass` (Sveltos) or `healthy` (an alias,
//! for scripts written that way), and an optional string `message`, capped at
//! [`LuaLimits::max_message_bytes`]. Only these three fields are read.

use std::time::Duration;

use crate::protocol::limits::MAX_MESSAGE_BYTES;

mod compat;
mod convert;
mod error;
mod outcome;
mod pattern;
mod round;
mod sandbox;

#[cfg(test)]
mod arrays_tests;
#[cfg(test)]
mod conformance_tests;
#[cfg(test)]
mod hostile_tests;
#[cfg(test)]
mod isolation_tests;
#[cfg(test)]
mod kept_state_tests;
#[cfg(test)]
mod result_tests;
#[cfg(test)]
mod tests;

pub use compat::format_number;
pub use error::LuaError;
pub use round::LuaRound;

/// Longest Lua source a check may have (a `condition`, a `healthScript`, a selector's
/// `evaluate`): 64 KiB. Health scripts people share run to a few KiB; compiling is linear in
/// the source but runs no deadline hook, so the size is what bounds its time.
pub const MAX_SCRIPT_BYTES: usize = 64 * 1024;

/// Compiles a check's Lua source (a `condition`, a `healthScript` or a selector's
/// `evaluate`) without running it, so bad syntax is refused when a manifest is loaded. The
/// error is [`LuaError::Syntax`], naming the check and the line (`condition:LINE: ...`).
/// A source over [`MAX_SCRIPT_BYTES`] is refused before it is parsed ([`LuaError::TooLarge`]),
/// and compiling may allocate at most the default per-evaluation allowance.
pub fn compile_check(check: &str, source: &str) -> Result<(), LuaError> {
    if source.len() > MAX_SCRIPT_BYTES {
        return Err(LuaError::TooLarge {
            check: check.to_string(),
            bytes: source.len(),
        });
    }
    let setup = |source| LuaError::Setup { source };
    let lua =
        mlua::Lua::new_with(mlua::StdLib::NONE, mlua::LuaOptions::default()).map_err(setup)?;
    lua.set_memory_limit(lua.used_memory() + LuaLimits::default().memory_bytes)
        .map_err(setup)?;
    lua.load(source)
        .set_name("=condition")
        .set_mode(mlua::chunk::ChunkMode::Text)
        .into_function()
        .map(drop)
        .map_err(|e| error::classify(check, e, &LuaLimits::default()))
}

/// Per-evaluation limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LuaLimits {
    /// Wall-clock time one evaluation (loading the script and calling `evaluate`) may take.
    /// Default 250 ms.
    pub deadline: Duration,
    /// Memory one evaluation may allocate on top of what the round holds before it.
    /// Default 32 MiB.
    pub memory_bytes: usize,
    /// Longest `message` kept from a result, in bytes (cut at a char boundary).
    /// Default [`MAX_MESSAGE_BYTES`].
    pub max_message_bytes: usize,
}

impl Default for LuaLimits {
    fn default() -> Self {
        LuaLimits {
            deadline: Duration::from_millis(250),
            memory_bytes: 32 * 1024 * 1024,
            max_message_bytes: MAX_MESSAGE_BYTES,
        }
    }
}

/// How a round converts objects to Lua tables.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Conversion {
    /// A table when a script first touches it (the default).
    #[default]
    Lazy,
    /// Every table of every object when it is added (the baseline of the benchmark).
    Eager,
}

/// The verdict of one script.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LuaOutcome {
    /// The returned `pass` or `healthy`.
    pub passing: bool,
    /// The returned `message` ("" when absent), capped at the limit.
    pub message: String,
}

/// Handle of an object added to a [`LuaRound`]; valid only in that round.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ObjectId {
    round: u64,
    index: u32,
}

/// What a `ctx` entry holds: one object (the selector named one object) or a list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CtxValue {
    /// `ctx.<identifier>` is the object itself.
    One(ObjectId),
    /// `ctx.<identifier>` is an array of objects, in order.
    Many(Vec<ObjectId>),
}
