//! What the registry is built from and changed by: [`Objects`] (everything a source
//! has), [`Change`] (one object added, changed or removed), and [`Registry::diff`], the
//! changes between the two for a full reload.

use std::collections::BTreeSet;
use std::sync::Arc;

use imbl::OrdMap;

use fleetpulse_common::api::{ClusterSet, HealthPolicy, MemberCluster, Set};

use super::{PolicyKey, Registry};
use crate::ids::{ClusterId, SetKey, cluster_id};

/// The objects the hub acts on, as read from manifests or the Kubernetes API.
#[derive(Clone, Debug, Default)]
pub struct Objects {
    /// MemberClusters.
    pub member_clusters: Vec<Arc<MemberCluster>>,
    /// ClusterSets.
    pub cluster_sets: Vec<Arc<ClusterSet>>,
    /// Sets.
    pub sets: Vec<Arc<Set>>,
    /// HealthPolicies.
    pub health_policies: Vec<Arc<HealthPolicy>>,
    /// Objects of other APIs the hub keeps, which hub-side checks (`fromHub`) read.
    pub hub_objects: Vec<serde_json::Value>,
}

/// `items`, each in an `Arc` (for building [`Objects`] by hand).
pub fn shared<T>(items: impl IntoIterator<Item = T>) -> Vec<Arc<T>> {
    items.into_iter().map(Arc::new).collect()
}

/// One object added or changed (`Some`), or removed (`None`).
#[derive(Clone, Debug)]
pub enum Change {
    /// A MemberCluster.
    MemberCluster(ClusterId, Option<Arc<MemberCluster>>),
    /// A ClusterSet, by name.
    ClusterSet(String, Option<Arc<ClusterSet>>),
    /// A Set.
    Set(ClusterId, Option<Arc<Set>>),
    /// A HealthPolicy.
    HealthPolicy(PolicyKey, Option<Arc<HealthPolicy>>),
}

impl Registry {
    /// The changes that turn this registry's objects into `objects` (a full reload:
    /// unchanged objects, the same `Arc` or an equal value, are not changes).
    pub fn diff(&self, objects: &Objects) -> Vec<Change> {
        let mut changes = Vec::new();
        diff_kind(
            &self.clusters.ordered,
            |e| &e.object,
            &objects.member_clusters,
            cluster_id,
            Change::MemberCluster,
            &mut changes,
        );
        diff_kind(
            &self.cluster_sets,
            |o| o,
            &objects.cluster_sets,
            |cs| cs.metadata.name.clone().unwrap_or_default(),
            Change::ClusterSet,
            &mut changes,
        );
        diff_kind(
            &self.sets,
            |o| o,
            &objects.sets,
            SetKey::set_id,
            Change::Set,
            &mut changes,
        );
        diff_kind(
            &self.policies,
            |o| o,
            &objects.health_policies,
            policy_key,
            Change::HealthPolicy,
            &mut changes,
        );
        changes
    }
}

/// A HealthPolicy's namespace (`default` when unset) and name.
pub fn policy_key(p: &HealthPolicy) -> PolicyKey {
    (
        p.metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into()),
        p.metadata.name.clone().unwrap_or_default(),
    )
}

/// The changes from `current` (whose entries hold their object, as `object` finds it) to
/// `wanted`, keyed by `key`.
fn diff_kind<K: Ord + Clone, E: Clone, V: PartialEq>(
    current: &OrdMap<K, E>,
    object_of: impl Fn(&E) -> &Arc<V>,
    wanted: &[Arc<V>],
    key: impl Fn(&V) -> K,
    change: impl Fn(K, Option<Arc<V>>) -> Change,
    out: &mut Vec<Change>,
) {
    let mut seen = BTreeSet::new();
    for object in wanted {
        let k = key(object);
        let same = current
            .get(&k)
            .map(&object_of)
            .is_some_and(|c| Arc::ptr_eq(c, object) || **c == **object);
        if !same {
            out.push(change(k.clone(), Some(object.clone())));
        }
        seen.insert(k);
    }
    for k in current.keys().filter(|k| !seen.contains(*k)) {
        out.push(change(k.clone(), None));
    }
}

/// Why a check of `kind` `name` cannot run: its first Lua source (a `condition`, a
/// `healthScript` or a selector's `evaluate`) that does not compile, with the line.
pub fn uncompiled(
    kind: &str,
    name: &str,
    lists: [&Vec<fleetpulse_common::api::ClusterCheck>; 2],
) -> Option<String> {
    let [readiness, liveness] = lists;
    let readiness = readiness
        .iter()
        .enumerate()
        .map(|(i, c)| (format!("spec.readinessChecks[{i}]"), c));
    let liveness = liveness
        .iter()
        .enumerate()
        .map(|(i, c)| (format!("spec.livenessChecks[{i}]"), c));
    let e = readiness
        .chain(liveness)
        .find_map(|(path, check)| fleetpulse_common::checks::model::compiles(check, &path).err())?;
    Some(format!(
        "{kind} {name}: {e} (the object is refused until it compiles)"
    ))
}

/// Sets `key` to `value` in `map`, or removes it when `value` is `None`.
pub fn put<K: Ord + Clone, V: Clone>(map: &mut imbl::OrdMap<K, V>, key: K, value: Option<V>) {
    match value {
        Some(v) => {
            map.insert(key, v);
        }
        None => {
            map.remove(&key);
        }
    }
}
