//! Scripts run once per object (global `obj`) within one evaluation: Sveltos' per-selector
//! `evaluate` filter ([`LuaRound::filter`]) and Argo CD health scripts
//! ([`LuaRound::health`]).

use std::time::Duration;

use mlua::{Table, Value};

use super::super::outcome::describe;
use super::super::{LuaError, LuaOutcome, ObjectId};
use super::{Failure, LuaRound};
use crate::protocol::limits::truncate_message;

/// Argo CD's health statuses; only `Healthy` passes.
const STATUSES: [&str; 6] = [
    "Healthy",
    "Progressing",
    "Degraded",
    "Suspended",
    "Missing",
    "Unknown",
];

impl LuaRound {
    /// Sveltos' per-object filter: `script` defines `function evaluate()`, which sees the
    /// object as the global `obj` and returns a table with a boolean `matching`. Returns
    /// whether each object matches, in order; all of it is one evaluation (one deadline).
    pub fn filter(
        &self,
        check_name: &str,
        script: &str,
        objects: &[ObjectId],
        deadline: Duration,
    ) -> Result<Vec<bool>, LuaError> {
        for id in objects {
            self.check_id(check_name, *id)?;
        }
        self.guarded(check_name, deadline, || {
            let chunk = self.compile(check_name, script)?;
            let mut matching = Vec::with_capacity(objects.len());
            for id in objects {
                let env = self.env_with_obj(*id)?;
                chunk.set_environment(env.clone())?;
                chunk.call::<()>(())?;
                let Value::Function(evaluate) = env.raw_get::<Value>("evaluate")? else {
                    return Err(Failure::Check(LuaError::NoEvaluate {
                        check: check_name.to_string(),
                    }));
                };
                let returned = evaluate.call::<Value>(())?;
                matching.push(read_matching(check_name, &returned)?);
            }
            Ok(matching)
        })
    }

    /// An Argo CD health script: `script` is the body of a `health.lua` (global `obj`,
    /// returns `hs` with `status` and `message`), run for each object in order. Passes when
    /// every object is Healthy; otherwise the message names the first that is not.
    pub fn health(
        &self,
        check_name: &str,
        script: &str,
        objects: &[ObjectId],
        deadline: Duration,
    ) -> Result<LuaOutcome, LuaError> {
        for id in objects {
            self.check_id(check_name, *id)?;
        }
        let max = self.limits.max_message_bytes;
        self.guarded(check_name, deadline, || {
            let chunk = self.compile(check_name, script)?;
            for id in objects {
                chunk.set_environment(self.env_with_obj(*id)?)?;
                let returned = chunk.call::<Value>(())?;
                let (status, message) = read_health(check_name, &returned)?;
                if status != "Healthy" {
                    let mut message = match message.is_empty() {
                        true => format!("{} is {status}", self.label(*id)),
                        false => format!("{} is {status}: {message}", self.label(*id)),
                    };
                    truncate_message(&mut message, max);
                    return Ok(LuaOutcome {
                        passing: false,
                        message,
                    });
                }
            }
            Ok(LuaOutcome {
                passing: true,
                message: match objects.len() {
                    0 => "no objects selected".to_string(),
                    1 => format!("{} is Healthy", self.label(objects[0])),
                    n => format!("all {n} objects Healthy"),
                },
            })
        })
    }

    /// A fresh environment with `obj` set to the object.
    fn env_with_obj(&self, id: ObjectId) -> Result<Table, Failure> {
        let env: Table = self.machinery.new_env.call(())?;
        let obj: Table = self.machinery.root.call(self.roots[id.index as usize])?;
        env.raw_set("obj", obj)?;
        Ok(env)
    }

    /// `Kind namespace/name` of an object.
    fn label(&self, id: ObjectId) -> String {
        self.lua
            .app_data_ref::<super::Nodes>()
            .and_then(|nodes| {
                nodes
                    .object(self.roots[id.index as usize])
                    .map(|o| o.label())
            })
            .unwrap_or_else(|| "object".to_string())
    }
}

fn read_matching(check: &str, returned: &Value) -> Result<bool, Failure> {
    let bad = |detail: String| {
        Failure::Check(LuaError::BadResult {
            check: check.to_string(),
            detail: format!(
                "(a selector's evaluate must return a table with a boolean `matching`) {detail}"
            ),
        })
    };
    let Value::Table(t) = returned else {
        return Err(bad(format!("it returned {}", describe(returned))));
    };
    match t.raw_get::<Value>("matching")? {
        Value::Boolean(b) => Ok(b),
        Value::Nil => Ok(false),
        other => Err(bad(format!("`matching` is {}", describe(&other)))),
    }
}

fn read_health(check: &str, returned: &Value) -> Result<(String, String), Failure> {
    let bad = |detail: String| {
        Failure::Check(LuaError::BadResult {
            check: check.to_string(),
            detail: format!(
                "(a health script must return a table `hs` with `status` {} and optionally `message`) {detail}",
                STATUSES.join(", ")
            ),
        })
    };
    let Value::Table(t) = returned else {
        return Err(bad(format!("it returned {}", describe(returned))));
    };
    let status = match t.raw_get::<Value>("status")? {
        Value::String(s) => s.to_string_lossy(),
        other => return Err(bad(format!("`status` is {}", describe(&other)))),
    };
    if !STATUSES.contains(&status.as_str()) {
        return Err(bad(format!("`status` is {status:?}")));
    }
    let message = match t.raw_get::<Value>("message")? {
        Value::String(s) => s.to_string_lossy(),
        _ => String::new(),
    };
    Ok((status, message))
}
