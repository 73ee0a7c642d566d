//! Lua checks, run in batches that share one round: every selector of every check in the
//! batch is resolved for this cluster, each distinct query is listed once, each object is
//! converted to Lua once, and every check is evaluated over its own objects in the shared,
//! read-only round. A script error or an exceeded limit fails only its own check.

use std::collections::HashMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use fleetpulse_common::api::ResourceSelector;
use fleetpulse_common::checks::query::Query;
use fleetpulse_common::lua::{CtxValue, LuaLimits, LuaRound, ObjectId};

use super::RunOutcome;
use super::resources::ResourceReader;

/// One Lua check to run.
#[derive(Clone, Debug)]
pub struct LuaCheck {
    /// Check name.
    pub name: String,
    /// The script, defining `evaluate()`.
    pub condition: String,
    /// Which objects it sees.
    pub selectors: Vec<ResourceSelector>,
}

/// Runs `checks` over the objects `reader` returns, for the cluster described by
/// `cluster`. Returns one outcome per check, in order.
pub async fn run_batch(
    reader: &impl ResourceReader,
    cluster: &ObjectMeta,
    checks: &[LuaCheck],
    limits: LuaLimits,
) -> Vec<RunOutcome> {
    // Resolve selectors; a check whose selectors do not resolve fails alone.
    let mut resolved: Vec<Result<Vec<Query>, String>> = Vec::with_capacity(checks.len());
    for check in checks {
        resolved.push(
            check
                .selectors
                .iter()
                .map(|s| Query::resolve(s, cluster))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("check {}: {e}", check.name)),
        );
    }
    // List each distinct query once.
    let mut distinct: Vec<Query> = Vec::new();
    for query in resolved.iter().flatten().flatten() {
        if !distinct.contains(query) {
            distinct.push(query.clone());
        }
    }
    let mut listed: Vec<Result<Vec<Value>, String>> = Vec::with_capacity(distinct.len());
    for query in &distinct {
        listed.push(reader.list(query).await.map_err(|e| e.to_string()));
    }
    let checks = checks.to_vec();
    let evaluated = tokio::task::spawn_blocking(move || {
        evaluate(&checks, &resolved, &distinct, &listed, limits)
    })
    .await;
    evaluated.unwrap_or_else(|e| vec![RunOutcome::fail(format!("Lua evaluation panicked: {e}"))])
}

fn evaluate(
    checks: &[LuaCheck],
    resolved: &[Result<Vec<Query>, String>],
    distinct: &[Query],
    listed: &[Result<Vec<Value>, String>],
    limits: LuaLimits,
) -> Vec<RunOutcome> {
    let mut round = match LuaRound::new(limits) {
        Ok(r) => r,
        Err(e) => {
            return checks
                .iter()
                .map(|_| RunOutcome::fail(e.to_string()))
                .collect();
        }
    };
    // Convert every listed object once, sharing identical objects across queries.
    let mut by_key: HashMap<String, ObjectId> = HashMap::new();
    let mut ids_per_query: Vec<Result<Vec<ObjectId>, String>> = Vec::with_capacity(listed.len());
    for objects in listed {
        ids_per_query.push(match objects {
            Err(e) => Err(e.clone()),
            Ok(objects) => {
                let mut ids = Vec::with_capacity(objects.len());
                for object in objects {
                    let key = object_key(object);
                    let id = match by_key.get(&key) {
                        Some(id) => *id,
                        None => match round.add_object(object) {
                            Ok(id) => {
                                by_key.insert(key, id);
                                id
                            }
                            Err(e) => {
                                return checks
                                    .iter()
                                    .map(|_| RunOutcome::fail(e.to_string()))
                                    .collect();
                            }
                        },
                    };
                    ids.push(id);
                }
                Ok(ids)
            }
        });
    }
    checks
        .iter()
        .zip(resolved)
        .map(|(check, queries)| {
            let queries = match queries {
                Ok(q) => q,
                Err(e) => return RunOutcome::fail(e.clone()),
            };
            let mut resources = Vec::new();
            let mut ctx = Vec::new();
            for query in queries {
                let index = distinct
                    .iter()
                    .position(|d| d == query)
                    .expect("every query was listed");
                let ids = match &ids_per_query[index] {
                    Ok(ids) => ids,
                    Err(e) => return RunOutcome::fail(format!("check {}: {e}", check.name)),
                };
                for id in ids {
                    if !resources.contains(id) {
                        resources.push(*id);
                    }
                }
                if let Some(identifier) = &query.identifier {
                    let value = match (query.names_one_object(), ids.first()) {
                        (true, Some(id)) => CtxValue::One(*id),
                        (true, None) => continue,
                        (false, _) => CtxValue::Many(ids.clone()),
                    };
                    ctx.push((identifier.clone(), value));
                }
            }
            match round.evaluate(&check.name, &check.condition, &resources, &ctx) {
                Ok(outcome) => RunOutcome {
                    passing: outcome.passing,
                    message: outcome.message,
                    success_rate_percent: None,
                },
                Err(e) => RunOutcome::fail(e.to_string()),
            }
        })
        .collect()
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
