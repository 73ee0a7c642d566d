//! Every ClusterSet and Set as the console shows it: what it asks for, whom it matches and
//! selects now, its conditions, its last failover, and its recent selections (the
//! timeline the console draws).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use serde::Serialize;

use fleetpulse_common::api::{SetSpec, SetStatus};

use super::{Millis, millis};
use crate::core::sets::{cluster_ids, selected_ids};
use crate::fleet::Fleet;
use crate::fleet::timeline::Timelines;
use crate::ids::SetKey;

/// One set.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SetView {
    /// `ClusterSet primary` or `Set fleet/canary`.
    pub key: String,
    /// `ClusterSet` or `Set`.
    pub kind: &'static str,
    /// `spec.maxReplicas`.
    pub max_replicas: u32,
    /// The clusters it selects now (`namespace/name`).
    pub selected: Vec<String>,
    /// The clusters it matches.
    pub matching: Vec<String>,
    /// `Satisfied` and `ReassignmentFrozen`.
    pub conditions: Vec<Condition>,
    /// When a selected cluster was last replaced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_failover_time: Option<Millis>,
    /// Why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_failover_reason: Option<String>,
    /// Its recent selections, oldest first.
    pub timeline: Vec<MoveView>,
}

/// One change of a set's selection.
#[derive(Clone, Debug, Serialize)]
pub struct MoveView {
    /// When.
    pub at: Millis,
    /// Whom it selected from then on.
    pub selected: Vec<String>,
    /// Whom it dropped for health, and why.
    pub dropped: Vec<Dropped>,
}

/// A cluster a set dropped.
#[derive(Clone, Debug, Serialize)]
pub struct Dropped {
    /// `namespace/name`.
    pub cluster: String,
    /// Why.
    pub reason: String,
}

fn view(key: SetKey, spec: &SetSpec, status: Option<&SetStatus>, timelines: &Timelines) -> SetView {
    let status = status.cloned().unwrap_or_default();
    let names = |ids: Vec<crate::ids::ClusterId>| ids.iter().map(ToString::to_string).collect();
    let timeline = (timelines.of(&key).into_iter())
        .map(|m| MoveView {
            at: millis(m.at),
            selected: names(m.selected),
            dropped: (m.dropped.into_iter())
                .map(|(cluster, reason)| Dropped {
                    cluster: cluster.to_string(),
                    reason,
                })
                .collect(),
        })
        .collect();
    SetView {
        kind: match key {
            SetKey::ClusterSet(_) => "ClusterSet",
            SetKey::Set(_) => "Set",
        },
        max_replicas: spec.max_replicas,
        selected: names(selected_ids(&key, &status)),
        matching: names(cluster_ids(&key, &status.matching_cluster_refs)),
        conditions: status.conditions,
        last_failover_time: status.last_failover_time.map(|t| millis(t.0)),
        last_failover_reason: status.last_failover_reason,
        timeline,
        key: key.to_string(),
    }
}

impl Fleet {
    /// Every ClusterSet, then every Set, each with its members and recent selections.
    pub fn set_views(&self) -> Vec<SetView> {
        let registry = self.registry();
        let sets = self.sets.lock();
        let statuses = &sets.decisions.sets.statuses;
        let cluster_sets = (registry.cluster_sets()).map(|cs| {
            let key = SetKey::of_cluster_set(cs);
            let status = statuses.get(&key);
            view(key, &cs.spec.set, status, &sets.timelines)
        });
        let namespaced = registry.sets().map(|s| {
            let key = SetKey::of_set(s);
            let status = statuses.get(&key);
            view(key, &s.spec, status, &sets.timelines)
        });
        cluster_sets.chain(namespaced).collect()
    }
}
