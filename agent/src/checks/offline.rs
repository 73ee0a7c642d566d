//! Evaluating a MemberCluster's checks once against objects in memory: what
//! `fleetpulse-agent eval` runs, so operators can try a check before rolling it out.
//! Lua checks and built-ins are evaluated; probes and pod checks need the live cluster and
//! are reported as not evaluated.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde_json::Value;

use fleetpulse_common::api::CheckPhase;
use fleetpulse_common::checks::model::{Check, Kind};
use fleetpulse_common::lua::LuaLimits;

use super::engine::run_one;
use super::lua_check;
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

/// Evaluates `checks` (of the MemberCluster whose metadata is `cluster`) once against
/// `objects`.
pub async fn evaluate(
    cluster: &ObjectMeta,
    checks: &[Check],
    objects: Vec<Value>,
    limits: LuaLimits,
) -> Vec<Evaluated> {
    let reader = Reader::Static(StaticReader::new(objects));
    let lua: Vec<Arc<_>> = checks.iter().filter_map(|c| c.lua().cloned()).collect();
    let mut lua_outcomes = lua_check::run_batch(&reader, cluster, lua, limits)
        .await
        .into_iter();
    let mut results = Vec::with_capacity(checks.len());
    for check in checks {
        let (passing, message) = match check.kind {
            Kind::Lua(_) => {
                let o = lua_outcomes.next().expect("one outcome per Lua check");
                (Some(o.passing), o.message)
            }
            Kind::ReadyNodes(_) | Kind::ReadyPods(_) => {
                let o = run_one(&reader, &SecretSource::none(), check).await;
                (Some(o.passing), o.message)
            }
            Kind::Pod(_) | Kind::Http(_) | Kind::Tcp(_) => (
                None,
                "not evaluated offline: needs the live cluster".to_owned(),
            ),
        };
        let list = match check.phase {
            CheckPhase::Readiness => "readiness",
            CheckPhase::Liveness => "liveness",
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
