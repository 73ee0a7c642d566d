//! The Lua sandbox that runs `ClusterCheck.condition` scripts (Sveltos-compatible Lua
//! over Kubernetes objects), on Luau through mlua.
//!
//! One [`LuaRound`] is one Lua state for one evaluation round: every Kubernetes object of
//! the round is converted to a Lua table once ([`LuaRound::add_object`]), made read-only
//! (deeply), and shared by every check of the round ([`LuaRound::evaluate`]).
//!
//! # What a script sees
//!
//! - `resources`: an array of the check's objects, in order; also the first argument of
//!   `evaluate`. The array is the script's own (it may sort or extend it); the objects in it
//!   are read-only.
//! - `ctx`: a table from selector identifier to one object (the selector named one object)
//!   or to an array of objects.
//! - Objects convert faithfully from JSON: objects become tables with string keys, arrays
//!   become 1-based arrays, strings and booleans stay as they are, and every number becomes
//!   a Lua number (a double, as in Lua 5.1 and Sveltos). JSON `null` becomes `nil`, as in
//!   Sveltos: a field whose value is `null` reads as absent, and a `null` inside an array
//!   leaves a hole (`#` and `ipairs` may stop there).
//! - Globals: Luau's base library (`ipairs`, `pairs`, `tostring`, `tonumber`, `pcall`,
//!   `error`, `assert`, `select`, `type`, `setmetatable` on the script's own tables, ...)
//!   and the libraries `string`, `table`, `math`, `utf8`, `bit32`, `coroutine` and `os`,
//!   where Luau's `os` only has `clock`, `date`, `difftime` and `time`.
//! - Not available, failing with "`name` is not available in the fleetpulse Lua sandbox":
//!   `require`, `load`, `loadstring`, `dofile`, `loadfile`, `getfenv`, `setfenv`,
//!   `newproxy`, `os.execute`, `os.exit`, `os.getenv`, `os.remove`, `os.rename`,
//!   `os.tmpname`, and every field of `io`, `debug` and `package`. Luau has no `string.dump`
//!   and a condition is always compiled from source (bytecode is refused), so no bytecode
//!   can be loaded. `print` does nothing; `collectgarbage` only answers `"count"`.
//! - Every library table, `_G` and the string metatable are read-only (Luau's sandbox).
//! - Each evaluation has fresh globals: what one script sets is invisible to the next.
//!
//! # Limits
//!
//! Each evaluation has a deadline (an interrupt fails the script once it passed, even if
//! the script catches the error with `pcall`) and a memory allowance on top of what the
//! round already holds; a failed evaluation frees its garbage, so the next check of the
//! round runs normally. See [`LuaLimits`].
//!
//! # Result
//!
//! `evaluate()` returns a table with a boolean `pass` (Sveltos) or `healthy` (the seed
//! proposal), and an optional string `message`, capped at
//! [`LuaLimits::max_message_bytes`]. Only these three fields are read.

use std::time::Duration;

use crate::protocol::limits::MAX_MESSAGE_BYTES;

mod compile;
mod convert;
mod error;
mod outcome;
mod round;
mod sandbox;

#[cfg(test)]
mod hostile_tests;
#[cfg(test)]
mod result_tests;
#[cfg(test)]
mod tests;

pub use compile::compile_check;
pub use error::LuaError;
pub use round::LuaRound;

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
