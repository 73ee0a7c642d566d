//! Reading the value `evaluate()` returned into a [`LuaOutcome`], with bounded effort: only
//! `pass`, `healthy` and `message` are read (raw, no metamethods), and only the first bytes
//! of `message`.

use mlua::Value;

use super::{LuaError, LuaOutcome, format_number};
use crate::protocol::limits::truncate_message;

/// Turns the returned value into a verdict.
pub(super) fn read_outcome(
    check: &str,
    returned: Value,
    max_message_bytes: usize,
) -> Result<LuaOutcome, LuaError> {
    let bad = |detail: String| LuaError::BadResult {
        check: check.to_string(),
        detail,
    };
    let internal = |source| LuaError::Internal {
        check: check.to_string(),
        source,
    };
    let Value::Table(table) = returned else {
        return Err(bad(format!("it returned {}", describe(&returned))));
    };
    let pass = verdict_field(&table.raw_get("pass").map_err(internal)?, "pass").map_err(bad)?;
    let healthy =
        verdict_field(&table.raw_get("healthy").map_err(internal)?, "healthy").map_err(bad)?;
    let passing = match (pass, healthy) {
        (Some(pass), Some(healthy)) if pass != healthy => {
            return Err(LuaError::Contradiction {
                check: check.to_string(),
                pass,
                healthy,
            });
        }
        (Some(v), _) | (None, Some(v)) => v,
        (None, None) => return Err(bad("the returned table has neither".to_string())),
    };
    let message = match table.raw_get::<Value>("message").map_err(internal)? {
        Value::Nil => String::new(),
        Value::String(s) => capped(&s.as_bytes(), max_message_bytes),
        Value::Number(n) => capped(format_number(n).as_bytes(), max_message_bytes),
        Value::Integer(n) => capped(n.to_string().as_bytes(), max_message_bytes),
        other => {
            return Err(bad(format!(
                "`message` is {}, not a string",
                describe(&other)
            )));
        }
    };
    Ok(LuaOutcome { passing, message })
}

/// Reads `pass` / `healthy`: absent is `None`, a boolean is its value, anything else is an
/// error naming what it was.
fn verdict_field(value: &Value, name: &str) -> Result<Option<bool>, String> {
    match value {
        Value::Nil => Ok(None),
        Value::Boolean(b) => Ok(Some(*b)),
        other => Err(format!("`{name}` is {}, not a boolean", describe(other))),
    }
}

/// Decodes at most a little more than `max` bytes (lossy UTF-8), then cuts at `max` on a
/// char boundary.
fn capped(bytes: &[u8], max: usize) -> String {
    let head = &bytes[..bytes.len().min(max.saturating_add(4))];
    let mut message = String::from_utf8_lossy(head).into_owned();
    truncate_message(&mut message, max);
    message
}

/// "a string", "nil", "a number" ...: for error messages.
pub(super) fn describe(value: &Value) -> String {
    match value {
        Value::Nil => "nil".to_string(),
        Value::Integer(_) | Value::Number(_) => "a number".to_string(),
        other => format!("a {}", other.type_name()),
    }
}
