//! Pod checks in the engine: each keeps its own runner (with its own schedule, see
//! [`PodCheckRunner`]); the engine starts and stops runners as the config changes and
//! reports each runner's current verdict.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use fleetpulse_common::checks::model::{Check, Kind};

use super::super::RunOutcome;
use super::super::pod::{KubePodApi, PodCheckRunner};
use super::Shared;

/// A running pod check: its runner and how to stop it.
pub(super) struct PodCheck {
    check: Arc<Check>,
    runner: Arc<PodCheckRunner<KubePodApi>>,
    stop: CancellationToken,
}

impl Shared {
    /// Starts runners for new or changed pod checks among `checks` and stops the rest.
    pub(super) fn sync_pod_checks(&self, checks: &[Arc<Check>]) {
        let mut running = self.pod_checks.lock();
        let wanted: Vec<&Arc<Check>> = checks
            .iter()
            .filter(|c| matches!(c.kind, Kind::Pod(_)))
            .collect();
        running.retain(|name, p| {
            let keep = wanted.iter().any(|c| &c.name == name && **c == p.check);
            if !keep {
                p.stop.cancel();
            }
            keep
        });
        let Some(client) = &self.pods_client else {
            return;
        };
        for check in wanted {
            let Kind::Pod(spec) = &check.kind else {
                continue;
            };
            if running.contains_key(&check.name) {
                continue;
            }
            let runner = Arc::new(PodCheckRunner::new(
                KubePodApi::new(client.clone()),
                &check.name,
                spec,
                &self.options.checks_namespace,
            ));
            let stop = self.shutdown.child_token();
            tokio::spawn({
                let (runner, stop) = (runner.clone(), stop.clone());
                async move { runner.run(stop).await }
            });
            running.insert(
                check.name.clone(),
                PodCheck {
                    check: Arc::clone(check),
                    runner,
                    stop,
                },
            );
        }
    }

    /// The current verdict of a pod check's runner.
    pub(super) fn pod_outcome(&self, name: &str) -> RunOutcome {
        match self.pod_checks.lock().get(name) {
            Some(p) => p.runner.outcome(),
            None => RunOutcome::fail(
                "pod checks need a Kubernetes API: run the agent in-cluster or pass --kubeconfig",
            ),
        }
    }
}
