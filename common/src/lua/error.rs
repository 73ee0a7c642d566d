//! [`LuaError`]: why a Lua check could not produce a verdict, worded for the operator who
//! wrote the check.

use std::fmt;
use std::time::Duration;

use super::{LuaLimits, ObjectId};
use crate::protocol::limits::truncate_message;

/// Why a Lua check could not produce a verdict. The message names the check, the limit or
/// error, and what to change.
#[derive(Debug, thiserror::Error)]
pub enum LuaError {
    /// The Lua state could not be created or configured.
    #[error("cannot set up the Lua sandbox: {source}")]
    Setup {
        /// What mlua reported.
        source: mlua::Error,
    },
    /// An object could not be converted to a Lua table.
    #[error("cannot hand object {object} to Lua checks: {reason}")]
    Conversion {
        /// `kind namespace/name` of the object, as far as it has them.
        object: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An [`ObjectId`] from another round was passed.
    #[error(
        "check `{check}`: object handle {id:?} does not belong to this evaluation round; \
         add the object to the round that evaluates the check"
    )]
    UnknownObject {
        /// The check.
        check: String,
        /// The foreign handle.
        id: ObjectId,
    },
    /// The condition does not compile.
    #[error("check `{check}`: syntax error in condition: {message}; fix the Lua source")]
    Syntax {
        /// The check.
        check: String,
        /// Luau's message, with the line (`condition:LINE: ...`).
        message: String,
    },
    /// The script's source is longer than [`super::MAX_SCRIPT_BYTES`].
    #[error(
        "check `{check}`: its Lua source is {} long, over the {} limit; keep scripts \
         small (select fewer fields or split the check in two)",
        Bytes(*bytes),
        Bytes(super::MAX_SCRIPT_BYTES)
    )]
    TooLarge {
        /// The check.
        check: String,
        /// The source's length in bytes.
        bytes: usize,
    },
    /// The condition defines no global function `evaluate`.
    #[error(
        "check `{check}`: script does not define function evaluate(); define \
         `function evaluate() ... return hs end` at the top level of the condition"
    )]
    NoEvaluate {
        /// The check.
        check: String,
    },
    /// The script raised an error.
    #[error("check `{check}`: evaluate() failed: {message}")]
    Runtime {
        /// The check.
        check: String,
        /// The Lua error message (with the line), capped.
        message: String,
    },
    /// The script ran past its deadline.
    #[error(
        "check `{check}`: evaluate() ran longer than the {} deadline; simplify the script \
         or raise spec.timeoutSeconds",
        Millis(*deadline)
    )]
    Deadline {
        /// The check.
        check: String,
        /// The deadline it exceeded.
        deadline: Duration,
    },
    /// The script allocated more than its allowance.
    #[error(
        "check `{check}`: evaluate() allocated more than {} (the per-check memory limit); \
         build smaller tables and strings, e.g. count objects instead of copying them",
        Bytes(*limit_bytes)
    )]
    Memory {
        /// The check.
        check: String,
        /// The allowance it exceeded.
        limit_bytes: usize,
    },
    /// `evaluate()` returned something other than a table with a boolean verdict.
    #[error(
        "check `{check}`: evaluate() must return a table with a boolean `pass` or `healthy` \
         (and optionally a string `message`); {detail}"
    )]
    BadResult {
        /// The check.
        check: String,
        /// What it returned instead.
        detail: String,
    },
    /// `pass` and `healthy` are both set and disagree.
    #[error(
        "check `{check}`: evaluate() returned `pass = {pass}` and `healthy = {healthy}`, \
         which disagree; return only one of them"
    )]
    Contradiction {
        /// The check.
        check: String,
        /// The returned `pass`.
        pass: bool,
        /// The returned `healthy`.
        healthy: bool,
    },
    /// The sandbox itself failed while running the check (a fleetpulse bug).
    #[error("check `{check}`: the Lua sandbox failed: {source}; please report this as a bug")]
    Internal {
        /// The check.
        check: String,
        /// What mlua reported.
        source: mlua::Error,
    },
}

/// Maps an mlua error out of a script (not a deadline: the caller knows those) to the
/// check's error.
pub(super) fn classify(check: &str, error: mlua::Error, limits: &LuaLimits) -> LuaError {
    let check = check.to_string();
    let capped = |message: &str| lua_message(message, limits.max_message_bytes);
    match root_cause(&error) {
        mlua::Error::MemoryError(_) => LuaError::Memory {
            check,
            limit_bytes: limits.memory_bytes,
        },
        mlua::Error::SyntaxError { message, .. } => LuaError::Syntax {
            check,
            message: capped(message),
        },
        mlua::Error::RuntimeError(message) => LuaError::Runtime {
            check,
            message: capped(message),
        },
        other => LuaError::Runtime {
            check,
            message: capped(&other.to_string()),
        },
    }
}

/// The innermost error: through callback and context wrappers.
fn root_cause(error: &mlua::Error) -> &mlua::Error {
    match error {
        mlua::Error::CallbackError { cause, .. } => root_cause(cause),
        mlua::Error::WithContext { cause, .. } => root_cause(cause),
        other => other,
    }
}

/// A Lua message without its traceback, capped at `max` bytes.
fn lua_message(message: &str, max: usize) -> String {
    let mut message = message
        .split("\nstack traceback:")
        .next()
        .unwrap_or_default()
        .trim_end()
        .to_string();
    truncate_message(&mut message, max);
    message
}

/// Shows a duration as milliseconds (`250 ms`), or seconds when whole (`5 s`).
struct Millis(Duration);

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        if ms >= 1000 && ms.is_multiple_of(1000) {
            write!(f, "{} s", ms / 1000)
        } else {
            write!(f, "{ms} ms")
        }
    }
}

/// Shows a byte count in the largest binary unit that divides it (`32 MiB`, `1536 KiB`).
struct Bytes(usize);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const KIB: usize = 1024;
        const MIB: usize = 1024 * KIB;
        match self.0 {
            n if n >= MIB && n.is_multiple_of(MIB) => write!(f, "{} MiB", n / MIB),
            n if n >= KIB && n.is_multiple_of(KIB) => write!(f, "{} KiB", n / KIB),
            n => write!(f, "{n} bytes"),
        }
    }
}
