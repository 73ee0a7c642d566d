//! The engine's floor: the benchmark's check over plain Lua tables converted beforehand, in
//! a bare Lua 5.4 state with the same deadline hook as the sandbox (no sandbox, no copy on
//! write, nothing a round could skip), so a round's figures read against what Lua itself
//! costs.

use std::time::Instant;

use mlua::{HookTriggers, Lua, LuaSerdeExt, VmState};
use serde_json::Value;

use super::pods::READY_PODS;

/// The check over plain tables in a bare state with a hook every 1,000 instructions (as
/// the sandbox's deadline hook).
pub struct Floor {
    // Holds the state `evaluate` runs in.
    _lua: Lua,
    evaluate: mlua::Function,
}

impl Floor {
    /// The state, with `pods` converted to plain tables and the check loaded.
    pub fn new(pods: &[Value]) -> Floor {
        let lua = Lua::new();
        lua.set_global_hook(HookTriggers::new().every_nth_instruction(1000), |_, _| {
            Ok(VmState::Continue)
        })
        .expect("hook");
        let resources = lua
            .create_sequence_from(pods.iter().map(|p| lua.to_value(p).expect("pod converts")))
            .expect("resources");
        lua.globals().set("resources", resources).expect("global");
        lua.load(READY_PODS).exec().expect("script loads");
        let evaluate = lua.globals().get("evaluate").expect("evaluate");
        Floor {
            _lua: lua,
            evaluate,
        }
    }

    /// Runs the check once.
    pub fn check(&self) {
        let _: mlua::Table = self.evaluate.call(()).expect("check runs");
    }

    /// One check, in ms.
    pub fn check_ms(&self) -> f64 {
        let started = Instant::now();
        self.check();
        started.elapsed().as_secs_f64() * 1000.0
    }
}
