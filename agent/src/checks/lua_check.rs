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
    run_batch_measured(reader, cluster, checks, limits).await.0
}

/// [`run_batch`], also returning the bytes the batch's Lua state held after evaluating.
pub async fn run_batch_measured(
    reader: &impl ResourceReader,
    cluster: &ObjectMeta,
    checks: &[LuaCheck],
    limits: LuaLimits,
) -> (Vec<RunOutcome>, usize) {
    if checks.is_empty() {
        return (Vec::new(), 0);
    }
    let batch = Batch::plan(checks.to_vec(), cluster);
    let mut listed: Vec<Result<Vec<Value>, String>> = Vec::with_capacity(batch.queries().len());
    for query in batch.queries() {
        listed.push(reader.list(query).await.map_err(|e| e.to_string()));
    }
    tokio::task::spawn_blocking(move || {
        let verdicts = batch.evaluate(listed, limits);
        (verdicts, batch.lua_memory_bytes())
    })
    .await
    .unwrap_or_else(|e| {
        let failed = checks
            .iter()
            .map(|_| RunOutcome::fail(format!("Lua evaluation panicked: {e}")))
            .collect();
        (failed, 0)
    })
}
