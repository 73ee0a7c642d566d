//! Evaluating a MemberCluster's checks once against objects in memory: what
//! `fleetpulse-agent eval` runs, so operators can try a check before rolling it out.
//! Lua checks and built-ins are evaluated; probes and pod checks need the live cluster and
//! are reported as not evaluated.

use serde::Serialize;
use serde_json::Value;

use fleetpulse_common::api::{ClusterCheck, MemberCluster};
use fleetpulse_common::lua::LuaLimits;

use super::engine::run_one;
use super::lua_check::{self, LuaCheck};
use super::probe::SecretSource;
use super::resources::{Reader, StaticReader};

/// One check's offline result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Evaluated {
    /// Check name.
    pub name: String,
    /// `readiness` or `liveness`.
    pub list: &'static str,
    /// The verdict; `None` when the check cannot run offline.
    pub passing: Option<bool>,
    /// What it said.
    pub message: String,
}

/// Evaluates every check of `cluster` once against `objects`.
pub async fn evaluate(
    cluster: &MemberCluster,
    objects: Vec<Value>,
    limits: LuaLimits,
) -> Vec<Evaluated> {
    let reader = Reader::Static(StaticReader::new(objects));
    let checks: Vec<(&'static str, &ClusterCheck)> = cluster
        .spec
        .readiness_checks
        .iter()
        .map(|c| ("readiness", c))
        .chain(cluster.spec.liveness_checks.iter().map(|c| ("liveness", c)))
        .collect();
    let lua: Vec<LuaCheck> = checks.iter().filter_map(|(_, c)| LuaCheck::of(c)).collect();
    let mut lua_outcomes = lua_check::run_batch(&reader, &cluster.metadata, &lua, limits)
        .await
        .into_iter();
    let mut results = Vec::with_capacity(checks.len());
    for (list, check) in checks {
        let (passing, message) = if check.is_lua() {
            let o = lua_outcomes.next().expect("one outcome per Lua check");
            (Some(o.passing), o.message)
        } else if check.ready_nodes.is_some() || check.ready_pods.is_some() {
            let o = run_one(&reader, &SecretSource::none(), check).await;
            (Some(o.passing), o.message)
        } else {
            (
                None,
                "not evaluated offline: needs the live cluster".to_owned(),
            )
        };
        results.push(Evaluated {
            name: check.name.clone(),
            list,
            passing,
            message,
        });
    }
    results
}
