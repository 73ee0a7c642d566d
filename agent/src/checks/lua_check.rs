//! Lua checks in the agent: a [`Batch`] planned for this cluster, each distinct query read
//! once (from the watch-fed caches in the engine, see [`super::resources::cache`]), then
//! evaluated on a blocking thread (Lua is CPU work). The engine keeps each kind of round's
//! Lua state between rounds ([`KeptStates`]): an object the cache still holds unchanged
//! is taken into the next round as the same text, and keeps what earlier rounds converted
//! of it.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Duration;

use fleetpulse_common::compact::CompactObject;
use futures::future::join_all;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use parking_lot::Mutex;

use fleetpulse_common::checks::lua_batch::{Batch, CheckRun};
pub use fleetpulse_common::checks::lua_batch::{LuaCheck, Script};
use fleetpulse_common::lua::{LuaLimits, LuaRound};

use super::RunOutcome;
use super::resources::ResourceReader;

/// Lua states kept between rounds, one per kind of round (the shared round, and each
/// check that runs alone), so every round after the first converts only what changed.
/// A round takes its state out while it runs; two rounds of one kind at once (a slow
/// round overtaken by the next) run on two states, and one of them is kept.
#[derive(Default)]
pub struct KeptStates {
    states: Mutex<HashMap<String, LuaRound>>,
}

impl KeptStates {
    /// The state kept for rounds of `kind`, taken out for one round.
    pub fn take(&self, kind: &str) -> Option<LuaRound> {
        self.states.lock().remove(kind)
    }

    /// Keeps `state` for the next round of `kind` (unless a state was put back for it
    /// meanwhile: that one stays, this one is dropped).
    pub fn put(&self, kind: &str, state: LuaRound) {
        self.states.lock().entry(kind.to_string()).or_insert(state);
    }

    /// Drops the states of kinds `keep` rejects (checks no longer configured).
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        self.states.lock().retain(|kind, _| keep(kind));
    }
}

/// Runs `checks` over the objects `reader` returns, for the cluster described by
/// `cluster`, on a Lua state of their own. Returns one outcome per check, in order.
pub async fn run_batch(
    reader: &impl ResourceReader,
    cluster: &ObjectMeta,
    checks: Vec<Arc<LuaCheck>>,
    limits: LuaLimits,
) -> Vec<RunOutcome> {
    let batch = Batch::plan(checks, cluster);
    let ran = run_each(reader, batch, limits, None, |_, _| {}).await;
    ran.runs.into_iter().map(|run| run.outcome).collect()
}

/// What [`run_each`] did.
pub struct Ran {
    /// Every check's run, in order.
    pub runs: Vec<CheckRun>,
    /// Bytes the round's Lua state held after evaluating.
    pub lua_memory: usize,
    /// The round's state, to keep for the next round of its kind (`None` when the round
    /// panicked: its state is not reused).
    pub state: Option<LuaRound>,
}

/// Runs `batch` as one round, on `state` (one kept from an earlier round, or a new one when
/// `None`), and calls `each` with every check's run as soon as it ends (on the round's
/// thread), exactly once per check, also if the round panics.
pub async fn run_each(
    reader: &impl ResourceReader,
    batch: Batch,
    limits: LuaLimits,
    state: Option<LuaRound>,
    mut each: impl FnMut(usize, &CheckRun) + Send + 'static,
) -> Ran {
    let count = batch.len();
    if count == 0 {
        let (runs, lua_memory) = (Vec::new(), 0);
        return Ran {
            runs,
            lua_memory,
            state,
        };
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
        let mut state = state;
        let evaluated = catch_unwind(AssertUnwindSafe(|| {
            let each = |i: usize, run: &CheckRun| {
                done = i + 1;
                each(i, run);
            };
            batch.evaluate_kept(&mut state, listed, limits, each)
        }));
        match evaluated {
            Ok(runs) => Ran {
                runs,
                lua_memory: batch.lua_memory_bytes(),
                state,
            },
            Err(panic) => {
                let reason = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                let runs = panicked(count, &reason);
                for (i, run) in runs.iter().enumerate().skip(done) {
                    each(i, run);
                }
                let (lua_memory, state) = (0, None);
                Ran {
                    runs,
                    lua_memory,
                    state,
                }
            }
        }
    })
    .await;
    evaluated.unwrap_or_else(|e| Ran {
        runs: panicked(count, &e.to_string()),
        lua_memory: 0,
        state: None,
    })
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
