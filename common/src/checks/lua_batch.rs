//! Lua checks evaluated in batches that share one round: every selector of every check is
//! resolved for the cluster ([`Batch::plan`]), the caller lists each distinct query once
//! (the agent from its cluster's API, the hub from its own objects), and
//! [`Batch::evaluate`] converts each object to Lua once and runs every check over its own
//! objects in the shared, read-only round. A script error or an exceeded limit fails only
//! its own check.

use std::collections::HashMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use super::query::Query;
use crate::api::{ClusterCheck, ResourceSelector};
use crate::lua::{CtxValue, LuaLimits, LuaOutcome, LuaRound, ObjectId};

/// One Lua check to run.
#[derive(Clone, Debug, PartialEq)]
pub struct LuaCheck {
    /// Check name.
    pub name: String,
    /// The script, defining `evaluate()`.
    pub condition: String,
    /// Which objects it sees.
    pub selectors: Vec<ResourceSelector>,
    /// Its own deadline (`timeoutSeconds`), instead of the round's.
    pub deadline: Option<std::time::Duration>,
}

impl LuaCheck {
    /// The Lua part of a check, if it is a Lua check (it sets `condition`).
    pub fn of(check: &ClusterCheck) -> Option<LuaCheck> {
        check.condition.as_ref().map(|condition| LuaCheck {
            name: check.name.clone(),
            condition: condition.clone(),
            selectors: check.resource_selectors.clone(),
            deadline: check
                .timeout_seconds
                .map(|s| std::time::Duration::from_secs(s.into())),
        })
    }
}

/// A batch of checks with their selectors resolved.
#[derive(Debug)]
pub struct Batch {
    checks: Vec<LuaCheck>,
    resolved: Vec<Result<Vec<Query>, String>>,
    queries: Vec<Query>,
    /// Bytes the Lua state held after the last [`Batch::evaluate`].
    lua_memory: std::sync::atomic::AtomicUsize,
}

impl Batch {
    /// Resolves every check's selectors for the cluster described by `cluster`; a check
    /// whose selectors do not resolve will fail alone.
    pub fn plan(checks: Vec<LuaCheck>, cluster: &ObjectMeta) -> Batch {
        let resolved: Vec<Result<Vec<Query>, String>> = checks
            .iter()
            .map(|check| {
                check
                    .selectors
                    .iter()
                    .map(|s| Query::resolve(s, cluster))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| format!("check {}: {e}", check.name))
            })
            .collect();
        let mut queries: Vec<Query> = Vec::new();
        for query in resolved.iter().flatten().flatten() {
            if !queries.contains(query) {
                queries.push(query.clone());
            }
        }
        Batch {
            checks,
            resolved,
            queries,
            lua_memory: Default::default(),
        }
    }

    /// Bytes the Lua state held after the last [`Batch::evaluate`] (0 before).
    pub fn lua_memory_bytes(&self) -> usize {
        self.lua_memory.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The distinct queries to list, once each.
    pub fn queries(&self) -> &[Query] {
        &self.queries
    }

    /// Evaluates every check; `listed[i]` holds the objects of `queries()[i]` (or why they
    /// could not be read). Returns one verdict per check, in order.
    pub fn evaluate(
        &self,
        listed: &[Result<Vec<Value>, String>],
        limits: LuaLimits,
    ) -> Vec<Result<LuaOutcome, String>> {
        let mut round = match LuaRound::new(limits) {
            Ok(r) => r,
            Err(e) => return self.checks.iter().map(|_| Err(e.to_string())).collect(),
        };
        let mut by_key: HashMap<String, ObjectId> = HashMap::new();
        let mut ids_per_query: Vec<Result<Vec<ObjectId>, String>> =
            Vec::with_capacity(listed.len());
        for objects in listed {
            let ids = match objects {
                Err(e) => Err(e.clone()),
                Ok(objects) => {
                    let mut ids = Vec::with_capacity(objects.len());
                    for object in objects {
                        let key = object_key(object);
                        let id = match by_key.get(&key) {
                            Some(id) => *id,
                            None => match round.add_object(object) {
                                Ok(id) => *by_key.entry(key).or_insert(id),
                                Err(e) => {
                                    return self
                                        .checks
                                        .iter()
                                        .map(|_| Err(e.to_string()))
                                        .collect();
                                }
                            },
                        };
                        ids.push(id);
                    }
                    Ok(ids)
                }
            };
            ids_per_query.push(ids);
        }
        let verdicts = self
            .checks
            .iter()
            .zip(&self.resolved)
            .map(|(check, queries)| {
                let queries = queries.as_ref().map_err(Clone::clone)?;
                let mut resources = Vec::new();
                let mut ctx = Vec::new();
                for query in queries {
                    let index = self
                        .queries
                        .iter()
                        .position(|d| d == query)
                        .expect("every query was planned");
                    let ids = ids_per_query
                        .get(index)
                        .ok_or_else(|| {
                            format!(
                                "check {}: objects of {} were not listed",
                                check.name, query.kind
                            )
                        })?
                        .as_ref()
                        .map_err(|e| format!("check {}: {e}", check.name))?;
                    for id in ids {
                        if !resources.contains(id) {
                            resources.push(*id);
                        }
                    }
                    if let Some(identifier) = &query.identifier {
                        match (query.names_one_object(), ids.first()) {
                            (true, Some(id)) => ctx.push((identifier.clone(), CtxValue::One(*id))),
                            (true, None) => {}
                            (false, _) => {
                                ctx.push((identifier.clone(), CtxValue::Many(ids.clone())))
                            }
                        }
                    }
                }
                let deadline = check.deadline.unwrap_or(limits.deadline);
                round
                    .evaluate_within(&check.name, &check.condition, &resources, &ctx, deadline)
                    .map_err(|e| e.to_string())
            })
            .collect();
        let held = round.used_memory();
        self.lua_memory
            .store(held, std::sync::atomic::Ordering::Relaxed);
        verdicts
    }
}

fn object_key(object: &Value) -> String {
    let s = |p: &str| {
        object
            .pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    format!(
        "{}|{}|{}|{}",
        s("/apiVersion"),
        s("/kind"),
        s("/metadata/namespace"),
        s("/metadata/name")
    )
}

#[cfg(test)]
mod tests;
