//! Lua checks in the agent: a [`Batch`] planned for this cluster, each distinct query read
//! once (from the watch-fed caches in the engine, see [`super::resources::cache`]), then
//! evaluated on a blocking thread (Lua is CPU work).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Duration;

use fleetpulse_common::compact::CompactObject;
use futures::future::join_all;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use fleetpulse_common::checks::lua_batch::{Batch, CheckRun};
pub use fleetpulse_common::checks::lua_batch::{LuaCheck, Script};
use fleetpulse_common::lua::LuaLimits;

use super::RunOutcome;
use super::resources::ResourceReader;

/// Runs `checks` over the objects `reader` returns, for the cluster described by
/// `cluster`. Returns one outcome per check, in order.
pub async fn run_batch(
    reader: &impl ResourceReader,
    cluster: &ObjectMeta,
    checks: Vec<Arc<LuaCheck>>,
    limits: LuaLimits,
) -> Vec<RunOutcome> {
    let batch = Batch::plan(checks, cluster);
    let (runs, _) = run_each(reader, batch, limits, |_, _| {}).await;
    runs.into_iter().map(|run| run.outcome).collect()
}

/// Runs `batch` as one round and calls `each` with every check's run as soon as it ends
/// (on the round's thread), exactly once per check, also if the round panics. Returns
/// every run, in order, and the bytes the round's Lua state held after evaluating.
pub async fn run_each(
    reader: &impl ResourceReader,
    batch: Batch,
    limits: LuaLimits,
    mut each: impl FnMut(usize, &CheckRun) + Send + 'static,
) -> (Vec<CheckRun>, usize) {
    let count = batch.len();
    if count == 0 {
        return (Vec::new(), 0);
    }
    // Read at once: a cache still syncing is waited for once, not once per query.
    let reads = batch.queries().iter().map(|q| reader.list_compact(q));
    let listed: Vec<Result<Vec<CompactObject>, String>> = join_all(reads)
        .await
        .into_iter()
        .map(|read| read.map_err(|e| e.to_string()))
        .collect();
    let evaluated = tokio::task::spawn_blocking(move || {
        let mut done = 0;
        let evaluated = catch_unwind(AssertUnwindSafe(|| {
            batch.evaluate_compact_each(listed, limits, |i, run| {
                done = i + 1;
                each(i, run);
            })
        }));
        let runs = evaluated.unwrap_or_else(|panic| {
            let reason = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            let runs = panicked(count, &reason);
            for (i, run) in runs.iter().enumerate().skip(done) {
                each(i, run);
            }
            runs
        });
        (runs, batch.lua_memory_bytes())
    })
    .await;
    evaluated.unwrap_or_else(|e| (panicked(count, &e.to_string()), 0))
}

/// `count` failed runs saying the evaluation panicked.
fn panicked(count: usize, reason: &str) -> Vec<CheckRun> {
    (0..count)
        .map(|_| CheckRun {
            outcome: RunOutcome::fail(format!("Lua evaluation panicked: {reason}")),
            took: Duration::ZERO,
            deadline_exceeded: false,
        })
        .collect()
}
