//! Lua checks in the agent: a [`Batch`] planned for this cluster, each distinct query listed
//! once from the cluster's API, then evaluated on a blocking thread (Lua is CPU work).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use fleetpulse_common::checks::lua_batch::Batch;
pub use fleetpulse_common::checks::lua_batch::{LuaCheck, Script};
use fleetpulse_common::lua::LuaLimits;

use super::RunOutcome;
use super::resources::ResourceReader;

/// Runs `checks` over the objects `reader` returns, for the cluster described by
/// `cluster`. Returns one outcome per check, in order.
pub async fn run_batch(
    reader: &impl ResourceReader,
    cluster: &ObjectMeta,
    checks: &[LuaCheck],
    limits: LuaLimits,
) -> Vec<RunOutcome> {
    if checks.is_empty() {
        return Vec::new();
    }
    let batch = Batch::plan(checks.to_vec(), cluster);
    let mut listed: Vec<Result<Vec<Value>, String>> = Vec::with_capacity(batch.queries().len());
    for query in batch.queries() {
        listed.push(reader.list(query).await.map_err(|e| e.to_string()));
    }
    tokio::task::spawn_blocking(move || batch.evaluate(listed, limits))
        .await
        .unwrap_or_else(|e| {
            checks
                .iter()
                .map(|_| RunOutcome::fail(format!("Lua evaluation panicked: {e}")))
                .collect()
        })
}
