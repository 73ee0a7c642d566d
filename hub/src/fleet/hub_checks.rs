//! Hub-side checks: checks whose selectors read the hub's own objects (`fromHub`), such as
//! per-cluster KeptnMetric objects kept centrally and named after each cluster. The hub
//! evaluates them with the same engine as the agent (a shared Lua round per cluster), once
//! per heartbeat interval, and their results join the cluster's next report: they gate
//! `Ready` and `Healthy` like the agent's checks, with the same thresholds and `for`.
//!
//! A cluster's hub-side checks read only the hub's objects in the cluster's own namespace:
//! one team's MemberClusters and HealthPolicies live in its namespace, and a check
//! message may quote what it read. A selector naming another namespace fails its check,
//! saying so; cluster-scoped objects are not readable.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;

use fleetpulse_common::checks::RunOutcome;
use fleetpulse_common::checks::lua_batch::Batch;
use fleetpulse_common::checks::timing::Tracker;
use fleetpulse_common::lua::LuaLimits;

use super::{ClusterEntry, Fleet};

impl Fleet {
    /// Evaluates the hub-side checks of every cluster whose turn has come. Runs on a loop
    /// of its own, off the detector's tick: a slow check delays only the next round of
    /// hub-side checks (their results are then older), never the detector or the brake.
    pub fn run_hub_checks(&self, now: Instant, wall: Timestamp) {
        let registry = self.registry();
        let objects = self.hub_objects();
        let has_hub_checks =
            |e: &&Arc<ClusterEntry>| !e.hub_checks.is_empty() || !e.hub_refused.is_empty();
        for entry in registry.clusters().filter(has_hub_checks) {
            if entry.state.lock().hub_next_run.is_some_and(|at| at > now) {
                continue;
            }
            let outcomes = evaluate(entry, &objects);
            let interval = Duration::from_secs(entry.object.spec.heartbeat.interval_seconds.into());
            let mut state = entry.state.lock();
            let mut trackers = std::mem::take(&mut state.hub_trackers);
            let mut results = Vec::with_capacity(entry.hub_checks.len());
            for (check, outcome) in entry.hub_checks.iter().zip(outcomes) {
                let mut tracker = trackers
                    .remove(&check.name)
                    .filter(|(kept, _)| kept == check)
                    .map(|(_, t)| t)
                    .unwrap_or_else(|| Tracker::of(check));
                tracker.record(&outcome, wall);
                results.push(tracker.result());
                state
                    .hub_trackers
                    .insert(check.name.clone(), (check.clone(), tracker));
            }
            results.extend(entry.hub_refused.iter().cloned());
            state.hub_results = results;
            state.hub_next_run = Some(now + interval);
        }
    }
}

fn evaluate(entry: &ClusterEntry, objects: &[serde_json::Value]) -> Vec<RunOutcome> {
    let checks = entry
        .hub_checks
        .iter()
        .filter_map(|c| c.lua().cloned())
        .collect();
    let batch = Batch::plan(checks, &super::registry::cluster_metadata(&entry.object));
    let own = entry.id.namespace.as_str();
    let listed: Vec<Result<Vec<serde_json::Value>, String>> = batch
        .queries()
        .iter()
        .map(|q| match q.namespace.as_deref() {
            Some(other) if other != own => Err(format!(
                "a fromHub selector reads only the hub's objects in namespace {own} (the \
                 MemberCluster's), not {other}: keep the objects this cluster's checks read \
                 in {own}"
            )),
            _ => Ok(objects
                .iter()
                .filter(|o| in_namespace(o, own) && q.matches(o))
                .cloned()
                .collect()),
        })
        .collect();
    batch.evaluate(listed, LuaLimits::default())
}

/// Whether a hub object lives in `namespace` (cluster-scoped objects never do).
fn in_namespace(object: &serde_json::Value, namespace: &str) -> bool {
    object
        .pointer("/metadata/namespace")
        .and_then(|v| v.as_str())
        == Some(namespace)
}
