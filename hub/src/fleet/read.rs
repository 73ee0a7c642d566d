//! The fleet as the read API shows it: every object with its live status, the hub's own
//! state, and each cluster's recent transitions. Projections only: nothing here decides.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use fleetpulse_common::api::{MEMBERSHIP_LABEL_VALUE, MemberCluster};

use super::registry::ClusterEntry;
use super::{Fleet, transitions};
use crate::core::brake::BrakeState;
use crate::ids::{ClusterId, SetKey};

impl Fleet {
    /// Every MemberCluster with its live status and membership labels, for the read API:
    /// inline header values redacted ([`MemberCluster::redacted`]); agents get them in
    /// their config only.
    pub fn member_clusters(&self) -> Vec<MemberCluster> {
        let mut membership = self.membership_labels();
        self.registry()
            .clusters()
            .map(|e| self.member_cluster(e, membership.remove(&e.id)))
            .collect()
    }

    /// One MemberCluster as [`Fleet::member_clusters`] shows it, with the membership
    /// label keys of the sets that select it.
    pub(super) fn member_cluster(
        &self,
        e: &ClusterEntry,
        membership: Option<Vec<String>>,
    ) -> MemberCluster {
        let mut mc = (*e.object).clone();
        let mut status = e.state.lock().live_status();
        status.mirrors = self.mirror_statuses(&e.id);
        mc.status = Some(status);
        if let Some(keys) = membership {
            let labels = mc.metadata.labels.get_or_insert_with(Default::default);
            for key in keys {
                labels.insert(key, MEMBERSHIP_LABEL_VALUE.to_owned());
            }
        }
        mc.redacted()
    }

    /// Whether the partition brake holds set reassignment (and mirror writes) now.
    pub fn reassignment_frozen(&self) -> bool {
        self.sets.lock().decisions.frozen()
    }

    /// The clusters a tripped rollout held at the last evaluation: their sets, and their
    /// mirrors, stay as they were.
    pub fn rollout_held(&self) -> std::collections::HashSet<ClusterId> {
        self.sets.lock().held.clone()
    }

    /// The cluster's recent condition transitions, oldest first.
    pub fn recent_transitions(&self, cluster: &ClusterId) -> Vec<transitions::Transition> {
        let state = self.states.lock().get(cluster).cloned();
        state
            .map(|s| s.lock().transitions.recent())
            .unwrap_or_default()
    }
}

/// The hub's own state on the read API (`GET /v1/hub`).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HubStatus {
    /// MemberClusters known.
    pub clusters: usize,
    /// ClusterSets and Sets known.
    pub sets: usize,
    /// The partition brake.
    pub partition_brake: BrakeStatus,
}

/// The partition brake on the read API.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BrakeStatus {
    /// `Released`, `Engaged` or `Settling`.
    pub state: String,
    /// Whether set reassignment is frozen.
    pub frozen: bool,
    /// When the state last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
    /// What it means.
    pub message: String,
}

impl Fleet {
    /// Every ClusterSet with its status.
    pub fn cluster_sets(&self) -> Vec<fleetpulse_common::api::ClusterSet> {
        let sets = self.sets.lock();
        let mut items: Vec<_> = self
            .registry()
            .cluster_sets()
            .map(|cs| (**cs).clone())
            .collect();
        for cs in &mut items {
            cs.status = (sets.decisions.sets.statuses)
                .get(&SetKey::of_cluster_set(cs))
                .cloned();
        }
        items
    }

    /// Every Set with its status.
    pub fn sets(&self) -> Vec<fleetpulse_common::api::Set> {
        let sets = self.sets.lock();
        let mut items: Vec<_> = self.registry().sets().map(|s| (**s).clone()).collect();
        for s in &mut items {
            s.status = sets
                .decisions
                .sets
                .statuses
                .get(&SetKey::of_set(s))
                .cloned();
        }
        items
    }

    /// The hub's own state.
    pub fn hub_status(&self) -> HubStatus {
        let registry = self.registry();
        let sets = self.sets.lock();
        let (state, message) = match sets.decisions.brake.state() {
            BrakeState::Released => ("Released", "set reassignment follows cluster health".to_owned()),
            BrakeState::Engaged { late, reporting, .. } => (
                "Engaged",
                format!(
                    "{late} of {reporting} reporting clusters went quiet at once; this hub assumes it \
                     is partitioned and freezes set reassignment until heartbeats return"
                ),
            ),
            BrakeState::Settling { .. } => (
                "Settling",
                "heartbeats returned; every cluster has a fresh grace period before reassignment resumes".to_owned(),
            ),
        };
        let message = match sets.decisions.frozen_elsewhere {
            true => format!(
                "{message}; another hub replica's partition brake is engaged, so set reassignment is frozen here too"
            ),
            false => message,
        };
        HubStatus {
            clusters: registry.cluster_count(),
            sets: registry.cluster_sets().count() + registry.sets().count(),
            partition_brake: BrakeStatus {
                state: state.to_owned(),
                frozen: sets.decisions.frozen(),
                since: sets.brake_changed.map(Time),
                message,
            },
        }
    }
}
