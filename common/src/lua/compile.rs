//! Compiling a condition without running it, to refuse a check whose Lua does not compile
//! when its object is loaded, before it reaches any cluster. A broken condition would fail
//! on every cluster it applies to at once, and nothing would tell "the fleet broke" from
//! "the new check is broken".

use super::error::classify;
use super::{LuaError, LuaLimits};

/// Compiles `condition` (the source of check `check`) in an empty Lua state under the
/// default memory limit; a syntax error names the check and the line.
pub fn compile_check(check: &str, condition: &str) -> Result<(), LuaError> {
    let limits = LuaLimits::default();
    let lua = mlua::Lua::new();
    lua.set_memory_limit(limits.memory_bytes)
        .map_err(|source| LuaError::Setup { source })?;
    lua.load(condition)
        .set_name("condition")
        .into_function()
        .map(drop)
        .map_err(|e| classify(check, e, &limits))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_condition_that_compiles_is_accepted_without_running() {
        compile_check("ok", "function evaluate() error('never run') end").unwrap();
    }

    #[test]
    fn a_syntax_error_names_the_check_and_the_line() {
        let e = compile_check("nodes", "function evaluate()\n  return {pass = }\nend")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("check `nodes`") && e.contains("syntax error"),
            "{e}"
        );
        assert!(e.contains(":2:"), "the line: {e}");
    }
}
