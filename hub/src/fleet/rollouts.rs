//! The rollout brake on the fleet: a HealthPolicy change starts a rollout over the
//! clusters whose config it changed ([`crate::core::rollout`] judges it); set evaluation
//! holds the clusters a tripped rollout reaches; the policy shows `Degraded` while it is
//! tripped. An operator acknowledges a rollout with the annotation
//! [`ACKNOWLEDGE_ANNOTATION`] set to the id the `Degraded` message names.

use std::collections::{BTreeSet, HashSet};

use k8s_openapi::jiff::Timestamp;
use sha2::{Digest, Sha256};

use fleetpulse_common::api::HealthPolicy;
use fleetpulse_common::api::condition::{self, Status};

use super::registry::policy_key;
use super::{Change, Fleet, Registry, SetsState};
use crate::core::rollout::Source;
use crate::ids::ClusterId;

/// Set on a HealthPolicy to the id its `Degraded` condition names, to release the rollout
/// brake without changing the policy.
pub const ACKNOWLEDGE_ANNOTATION: &str = "fleetpulse.io/acknowledge-rollout";
/// The HealthPolicy condition the rollout brake sets while tripped.
pub const DEGRADED: &str = "Degraded";

/// What a HealthPolicy change means for the rollout brake.
pub(super) struct PolicyChange {
    source: Source,
    /// `None`: the policy was removed.
    policy: Option<(String, BTreeSet<String>, Option<String>)>,
}

/// The HealthPolicy changes among `changes`: id, check names and acknowledgement of each.
pub(super) fn of(changes: &[Change]) -> Vec<PolicyChange> {
    changes
        .iter()
        .filter_map(|c| match c {
            Change::HealthPolicy(source, policy) => Some(PolicyChange {
                source: source.clone(),
                policy: policy.as_ref().map(|p| {
                    let checks = (p.spec.readiness_checks.iter())
                        .chain(&p.spec.liveness_checks)
                        .map(|c| c.name.clone())
                        .collect();
                    let ack = p
                        .metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get(ACKNOWLEDGE_ANNOTATION).cloned());
                    (rollout_id(p), checks, ack)
                }),
            }),
            _ => None,
        })
        .collect()
}

/// The policy's generation, or (for manifests, which have none) a hash of its spec.
fn rollout_id(p: &HealthPolicy) -> String {
    match p.metadata.generation {
        Some(generation) => generation.to_string(),
        None => {
            let spec = serde_json::to_vec(&p.spec).expect("a spec always serializes");
            let digest = Sha256::digest(spec);
            digest[..6].iter().map(|b| format!("{b:02x}")).collect()
        }
    }
}

impl Fleet {
    /// Starts, acknowledges or forgets rollouts for `changes`, given the clusters whose
    /// config the change set altered.
    pub(super) fn follow_rollouts(
        &self,
        changes: Vec<PolicyChange>,
        reconfigured: &[ClusterId],
        wall: Timestamp,
    ) {
        if changes.is_empty() {
            return;
        }
        let registry = self.registry();
        let mut sets = self.sets.lock();
        for PolicyChange { source, policy } in changes {
            let Some((id, checks, ack)) = policy else {
                sets.rollouts.forget(&source);
                continue;
            };
            if ack.as_deref() == Some(id.as_str()) && sets.rollouts.acknowledge(&source, &id) {
                tracing::warn!(policy = %format!("{}/{}", source.0, source.1), rollout = %id, "rollout acknowledged: reassignment follows cluster health again");
                self.policies_changed.notify_one();
                continue;
            }
            let cohort: BTreeSet<ClusterId> = reconfigured
                .iter()
                .filter(|c| c.namespace == source.0)
                .filter(|c| registry.cluster(c).is_some_and(|e| e.applies(&source.1)))
                .cloned()
                .collect();
            if !cohort.is_empty() {
                let released = sets.rollouts.degraded(&source).is_some();
                sets.rollouts.start(source, id, checks, cohort, wall);
                if released {
                    self.policies_changed.notify_one();
                }
            }
        }
    }

    /// Judges the rollouts, then returns the clusters a tripped one holds.
    pub(super) fn rollout_holds(
        &self,
        sets: &mut SetsState,
        registry: &Registry,
        wall: Timestamp,
    ) -> HashSet<ClusterId> {
        let failing = |id: &ClusterId| {
            registry
                .cluster(id)
                .map(|e| e.state.lock().failing_checks())
                .unwrap_or_default()
        };
        let recovering = |id: &ClusterId| {
            registry
                .cluster(id)
                .is_some_and(|e| e.state.lock().recovering())
        };
        for source in sets.rollouts.observe(wall, failing, recovering) {
            if let Some((t, id)) = sets.rollouts.degraded(&source) {
                tracing::error!(policy = %format!("{}/{}", source.0, source.1), check = %t.check, unhealthy = t.unhealthy, of = t.of, rollout = %id,
                    "a HealthPolicy change turned most of the clusters it reached unhealthy: reassignment is held for them");
            }
            self.policies_changed.notify_one();
        }
        self.metrics()
            .rollout_brake_engaged
            .set(sets.rollouts.engaged() as i64);
        if !sets.rollouts.holding() {
            return HashSet::new();
        }
        registry
            .clusters()
            .filter(|e| {
                let state = e.state.lock();
                sets.rollouts
                    .held(&e.id, &state.failing_checks(), state.recovering())
            })
            .map(|e| e.id.clone())
            .collect()
    }

    /// Every HealthPolicy with its status, `Degraded` while its rollout brake is tripped,
    /// as the read API shows it (inline header values redacted: `HealthPolicy::redacted`).
    pub fn health_policies(&self) -> Vec<HealthPolicy> {
        let mut policies: Vec<HealthPolicy> = (self.registry().health_policies().into_iter())
            .map(HealthPolicy::redacted)
            .collect();
        let sets = self.sets.lock();
        for p in &mut policies {
            let source = policy_key(p);
            let Some((t, id)) = sets.rollouts.degraded(&source) else {
                continue;
            };
            let message = format!(
                "check {:?} fails on {} of the {} clusters this change reached; reassignment \
                 is held for them. Fix the check, or acknowledge with the annotation {}={id}",
                t.check, t.unhealthy, t.of, ACKNOWLEDGE_ANNOTATION
            );
            let status = p.status.get_or_insert_with(Default::default);
            condition::set(
                &mut status.conditions,
                DEGRADED,
                Status::True,
                "RolloutBrakeEngaged",
                &message,
                t.since,
            );
        }
        policies
    }
}
