//! Hub-side checks: checks whose selectors read the hub's own objects (`fromHub`), such as
//! per-cluster KeptnMetric objects kept centrally and named after each cluster. The hub
//! evaluates them with the same engine as the agent (a shared Lua round per cluster), once
//! per heartbeat interval, and their results join the cluster's next report: they gate
//! `Ready` and `Healthy` like the agent's checks. Each result is the latest evaluation
//! (the thresholds and `for` of agent-side checks are not applied to them yet).

use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;

use fleetpulse_common::api::CheckKind;
use fleetpulse_common::checks::lua_batch::{Batch, LuaCheck};
use fleetpulse_common::lua::LuaLimits;
use fleetpulse_common::protocol::report::CheckResult;

use super::{ClusterEntry, Fleet};

impl Fleet {
    /// Evaluates the hub-side checks of every cluster whose turn has come.
    pub(super) fn run_hub_checks(&self, now: Instant, wall: Timestamp) {
        let registry = self.registry();
        let objects = &registry.objects().hub_objects;
        for entry in registry.clusters().filter(|e| !e.hub_checks.is_empty()) {
            let due = entry.state.lock().hub_next_run.is_none_or(|at| at <= now);
            if due {
                let previous = entry.state.lock().hub_results.clone();
                let results = evaluate(entry, objects, wall, &previous);
                let interval =
                    Duration::from_secs(entry.object.spec.heartbeat.interval_seconds.into());
                let mut state = entry.state.lock();
                state.hub_results = results;
                state.hub_next_run = Some(now + interval);
            }
        }
    }
}

fn evaluate(
    entry: &ClusterEntry,
    objects: &[serde_json::Value],
    wall: Timestamp,
    previous: &[CheckResult],
) -> Vec<CheckResult> {
    let checks: Vec<LuaCheck> = entry
        .hub_checks
        .iter()
        .filter_map(|(_, c)| LuaCheck::of(c))
        .collect();
    let batch = Batch::plan(checks, &entry.config.cluster_metadata);
    let listed: Vec<Result<Vec<serde_json::Value>, String>> = batch
        .queries()
        .iter()
        .map(|q| Ok(objects.iter().filter(|o| q.matches(o)).cloned().collect()))
        .collect();
    let verdicts = batch.evaluate(&listed, LuaLimits::default());
    entry
        .hub_checks
        .iter()
        .zip(verdicts)
        .map(|((phase, check), verdict)| {
            let (passing, message) = match verdict {
                Ok(o) => (o.passing, o.message),
                Err(e) => (false, e),
            };
            let before = previous.iter().find(|r| r.name == check.name);
            let since = match before {
                Some(b) if b.passing == passing => b.since,
                _ => Some(wall),
            };
            let consecutive_failures = match (passing, before) {
                (true, _) => 0,
                (false, Some(b)) => b.consecutive_failures + 1,
                (false, None) => 1,
            };
            CheckResult {
                name: check.name.clone(),
                kind: CheckKind::Lua,
                phase: *phase,
                passing,
                message,
                since,
                consecutive_failures,
                success_rate_percent: None,
            }
        })
        .collect()
}
