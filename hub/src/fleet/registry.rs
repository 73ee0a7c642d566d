//! The desired state, indexed for the hot path: clusters by id, keys by key id, sets and
//! HealthPolicies by name, each cluster's config hash and hub-side checks.
//!
//! Changed object by object: [`Registry::apply`] rebuilds only the entries a change
//! reaches (the changed MemberCluster; for a HealthPolicy, the clusters of its namespace)
//! and shares everything else with the registry before it (persistent maps: a new
//! registry is a cheap copy, so readers keep theirs without locks). Every object is held
//! once, as the `Arc` the source (manifest cache or Kubernetes reflector) holds.

mod change;
mod config;
mod policies;

use std::collections::BTreeSet;
use std::sync::Arc;

use imbl::OrdMap;
use k8s_openapi::jiff::Timestamp;
use parking_lot::Mutex;

use fleetpulse_common::api::{ClusterSet, HealthPolicy, MemberCluster, Set};
use fleetpulse_common::checks::model::Check;
use fleetpulse_common::protocol::keys::{self, KeyId, StrongKey};
use fleetpulse_common::protocol::report::{AgentConfig, CheckResult};

use change::put;
pub use change::{Change, Objects, policy_key, shared};
pub use config::cluster_metadata;
pub use policies::PolicyKey;

use super::ClusterState;
use crate::ids::ClusterId;

pub use crate::ids::cluster_id;

/// A persistent hash map with a fast, seeded hasher (foldhash) for the heartbeat path's
/// lookups: ids and key ids hash in a few nanoseconds where SipHash takes ten times that.
type FastHashMap<K, V> =
    imbl::GenericHashMap<K, V, foldhash::fast::RandomState, imbl::shared_ptr::DefaultSharedPtr>;

/// The clusters twice, changed together so the two cannot disagree: in namespace/name
/// order (listing, a namespace's range) and by hash (the heartbeat path's lookup, where a
/// B-tree walk compares the id with a dozen others' strings, each a cache miss at fleet
/// scale).
#[derive(Clone, Debug, Default)]
struct ClusterIndex {
    ordered: OrdMap<ClusterId, Arc<ClusterEntry>>,
    by_id: FastHashMap<ClusterId, Arc<ClusterEntry>>,
}

impl ClusterIndex {
    fn get(&self, id: &ClusterId) -> Option<&Arc<ClusterEntry>> {
        self.by_id.get(id)
    }

    fn insert(&mut self, entry: Arc<ClusterEntry>) {
        self.by_id.insert(entry.id.clone(), entry.clone());
        self.ordered.insert(entry.id.clone(), entry);
    }

    fn remove(&mut self, id: &ClusterId) -> Option<Arc<ClusterEntry>> {
        self.by_id.remove(id);
        self.ordered.remove(id)
    }
}

/// One MemberCluster with what the hub derived from it, and its runtime state.
#[derive(Debug)]
pub struct ClusterEntry {
    /// `namespace/name`.
    pub id: ClusterId,
    /// The object (spec and metadata; status lives in `state`), shared with the source.
    pub object: Arc<MemberCluster>,
    /// Hash of the effective config ([`Registry::config`]).
    pub config_hash: u64,
    /// Checks the hub evaluates itself (their selectors read the hub's objects).
    pub hub_checks: Vec<Arc<Check>>,
    /// Results of the hub-side checks that do not parse: failing, saying why.
    pub hub_refused: Vec<CheckResult>,
    /// The HealthPolicies that apply, each with the messages of its checks skipped here.
    policies: Vec<(String, Vec<String>)>,
    /// The keys this cluster lists, parsed once: key id, key, revoked.
    keys: Box<[(String, StrongKey, bool)]>,
    /// Runtime state, kept across changes.
    pub state: Arc<Mutex<ClusterState>>,
}

impl ClusterEntry {
    /// Whether `spec.agent.publicKeys` lists the key `kid` (a pre-shared key).
    pub fn lists_key(&self, kid: &str) -> bool {
        self.keys.iter().any(|(listed, ..)| listed == kid)
    }

    /// Whether the HealthPolicy `name` of the cluster's namespace applies to it.
    pub fn applies(&self, name: &str) -> bool {
        self.policies.iter().any(|(p, _)| p == name)
    }
}

/// Which cluster a key belongs to.
#[derive(Clone, Debug)]
pub struct KeyBinding {
    /// The owning cluster's entry (the one this registry holds): the heartbeat path finds
    /// the cluster and its key with this one lookup.
    pub entry: Arc<ClusterEntry>,
    /// The public key.
    pub key: StrongKey,
    /// Listed as revoked.
    pub revoked: bool,
}

/// What one [`Registry::apply`] did.
#[derive(Debug, Default)]
pub struct Applied {
    /// Conflicts found in the changed objects, for the operator.
    pub problems: Vec<String>,
    /// The clusters whose entries were rebuilt (added, changed, or reached by a policy).
    pub rebuilt: Vec<ClusterId>,
    /// Each MemberCluster version in the changes: `None` when it was taken, why when it
    /// was refused (a Lua source that does not compile; the previous version, if any,
    /// stays in effect).
    pub verdicts: Vec<(ClusterId, Option<String>)>,
}

/// The indexed desired state.
#[derive(Clone, Debug, Default)]
pub struct Registry {
    clusters: ClusterIndex,
    /// Every cluster that lists a key, in namespace/name order: the first owns it. Nearly
    /// always one, so a sorted `Vec` (a B-tree node here cost about 4.8 KB per cluster).
    keys: FastHashMap<String, Vec<KeyBinding>>,
    cluster_sets: OrdMap<String, Arc<ClusterSet>>,
    sets: OrdMap<ClusterId, Arc<Set>>,
    policies: OrdMap<PolicyKey, Arc<HealthPolicy>>,
    policy_records: OrdMap<PolicyKey, policies::PolicyRecord>,
    /// HealthPolicy versions refused (a condition that does not compile), with why; the
    /// previous version, if any, stays in effect.
    refused: OrdMap<PolicyKey, (Arc<HealthPolicy>, String)>,
}

impl Registry {
    /// Indexes `objects` from nothing (see [`Registry::apply`]).
    pub fn build(
        objects: &Objects,
        state_for: impl FnMut(&ClusterId) -> Arc<Mutex<ClusterState>>,
        now: Timestamp,
    ) -> (Registry, Applied) {
        let changes = Registry::default().diff(objects);
        Registry::default().apply(changes, state_for, now)
    }

    /// This registry with `changes` applied. `state_for` supplies the runtime state of a
    /// cluster entering the registry (kept from before, restored from the store, or new).
    /// Conflicts are resolved deterministically (the first cluster in namespace/name order
    /// keeps a shared key; a policy check whose name a cluster already uses is skipped)
    /// and returned as messages for the operator.
    pub fn apply(
        &self,
        changes: Vec<Change>,
        mut state_for: impl FnMut(&ClusterId) -> Arc<Mutex<ClusterState>>,
        now: Timestamp,
    ) -> (Registry, Applied) {
        let mut next = self.clone();
        let mut applied = Applied::default();
        let mut objects: std::collections::BTreeMap<ClusterId, Option<Arc<MemberCluster>>> =
            Default::default();
        let mut touched_policies = BTreeSet::new();
        for change in changes {
            match change {
                Change::MemberCluster(id, mc) => {
                    let refused = mc.as_deref().and_then(|mc| {
                        let checks = [&mc.spec.readiness_checks, &mc.spec.liveness_checks];
                        change::uncompiled("MemberCluster", &id.to_string(), checks)
                    });
                    if mc.is_some() {
                        applied.verdicts.push((id.clone(), refused.clone()));
                    }
                    if let Some(problem) = refused {
                        applied.problems.push(problem);
                        continue;
                    }
                    objects.insert(id, mc);
                }
                Change::ClusterSet(name, cs) => put(&mut next.cluster_sets, name, cs),
                Change::Set(id, set) => put(&mut next.sets, id, set),
                Change::HealthPolicy(key, policy) => {
                    next.refused.remove(&key);
                    if let Some(p) = &policy {
                        let checks = [&p.spec.readiness_checks, &p.spec.liveness_checks];
                        let name = format!("{}/{}", key.0, key.1);
                        if let Some(problem) = change::uncompiled("HealthPolicy", &name, checks) {
                            applied.problems.push(problem.clone());
                            next.refused.insert(key, (p.clone(), problem));
                            continue;
                        }
                    }
                    if policy.is_none() {
                        next.policy_records.remove(&key);
                    }
                    let namespace = key.0.clone();
                    touched_policies.insert(key.clone());
                    put(&mut next.policies, key, policy);
                    // Every cluster of the namespace is rebuilt with its current object.
                    for (id, entry) in next.clusters.ordered.range(namespace_range(&namespace)) {
                        objects
                            .entry(id.clone())
                            .or_insert_with(|| Some(entry.object.clone()));
                    }
                }
            }
        }
        for (id, mc) in objects {
            if let Some(old) = next.clusters.remove(&id) {
                next.unbind(&old, &mut touched_policies);
            }
            let Some(mc) = mc else { continue };
            let state = self
                .clusters
                .get(&id)
                .map(|e| e.state.clone())
                .unwrap_or_else(|| state_for(&id));
            let entry = Arc::new(next.entry(id.clone(), mc, state, now, &mut applied.problems));
            next.bind(&entry, &mut touched_policies, &mut applied.problems);
            next.clusters.insert(entry);
            applied.rebuilt.push(id);
        }
        for key in touched_policies {
            let generation = next.policies.get(&key).and_then(|p| p.metadata.generation);
            if next.policies.contains_key(&key) {
                let record = next.policy_records.entry(key).or_default();
                record.restamp(generation, now);
            }
        }
        (next, applied)
    }

    fn entry(
        &self,
        id: ClusterId,
        object: Arc<MemberCluster>,
        state: Arc<Mutex<ClusterState>>,
        now: Timestamp,
        problems: &mut Vec<String>,
    ) -> ClusterEntry {
        let derived = config::derive(&object, self.policies_in(&id.namespace));
        for (policy, clashes) in &derived.policies {
            for clash in clashes {
                problems.push(format!("HealthPolicy {}/{policy}: {clash}", id.namespace));
            }
        }
        let mut listed_keys = Vec::new();
        for listed in &object.spec.agent.public_keys {
            match keys::parse_public_key(&listed.public_key) {
                Ok(key) => listed_keys.push((KeyId::of(&key).0, key, listed.revoked)),
                Err(e) => problems.push(format!("MemberCluster {id}: public key skipped: {e}")),
            }
        }
        let (hub_checks, hub_refused) = config::hub_checks(&derived, &id, now, problems);
        ClusterEntry {
            config_hash: config::hash(&derived.config),
            hub_checks,
            hub_refused,
            policies: derived.policies,
            keys: listed_keys.into(),
            id,
            object,
            state,
        }
    }

    /// Binds the entry's keys and counts it into its policies.
    fn bind(
        &mut self,
        entry: &Arc<ClusterEntry>,
        touched: &mut BTreeSet<PolicyKey>,
        problems: &mut Vec<String>,
    ) {
        for (kid, key, revoked) in &entry.keys {
            let binding = KeyBinding {
                entry: entry.clone(),
                key: *key,
                revoked: *revoked,
            };
            let claimants = self.keys.entry(kid.clone()).or_default();
            match claimants.binary_search_by(|c| c.entry.id.cmp(&entry.id)) {
                Ok(at) => claimants[at] = binding,
                Err(at) => {
                    // Exactly one more: a Vec's first push would make room for four.
                    claimants.reserve_exact(1);
                    claimants.insert(at, binding);
                }
            }
            if claimants.len() > 1 {
                let owner = &claimants[0].entry.id;
                let ignored = if *owner == entry.id {
                    &claimants[1].entry.id
                } else {
                    &entry.id
                };
                problems.push(format!(
                    "MemberCluster {ignored}: key {kid} is already listed by MemberCluster {owner}; a \
                     key belongs to one cluster, so it is ignored here: remove it from one"
                ));
            }
        }
        for (policy, clashes) in &entry.policies {
            let key = (entry.id.namespace.clone(), policy.clone());
            self.policy_records
                .entry(key.clone())
                .or_default()
                .tally(&entry.id, clashes, true);
            touched.insert(key);
        }
    }

    /// Undoes [`Registry::bind`] for an entry leaving the registry.
    fn unbind(&mut self, entry: &ClusterEntry, touched: &mut BTreeSet<PolicyKey>) {
        for (kid, _, _) in &entry.keys {
            if let Some(claimants) = self.keys.get_mut(kid) {
                claimants.retain(|c| c.entry.id != entry.id);
                if claimants.is_empty() {
                    self.keys.remove(kid);
                }
            }
        }
        for (policy, clashes) in &entry.policies {
            let key = (entry.id.namespace.clone(), policy.clone());
            if let Some(record) = self.policy_records.get_mut(&key) {
                record.tally(&entry.id, clashes, false);
            }
            touched.insert(key);
        }
    }

    fn policies_in<'a>(&'a self, namespace: &str) -> impl Iterator<Item = &'a Arc<HealthPolicy>> {
        let start = (namespace.to_owned(), String::new());
        let namespace = namespace.to_owned();
        self.policies
            .range(start..)
            .take_while(move |((ns, _), _)| *ns == namespace)
            .map(|(_, p)| p)
    }

    /// A cluster by id.
    pub fn cluster(&self, id: &ClusterId) -> Option<&Arc<ClusterEntry>> {
        self.clusters.get(id)
    }

    /// Every cluster, in namespace/name order.
    pub fn clusters(&self) -> impl Iterator<Item = &Arc<ClusterEntry>> {
        self.clusters.ordered.values()
    }

    /// How many clusters there are.
    pub fn cluster_count(&self) -> usize {
        self.clusters.ordered.len()
    }

    /// A key by key id: its owner (the first cluster listing it).
    pub fn key(&self, kid: &str) -> Option<&KeyBinding> {
        self.keys.get(kid).and_then(|c| c.first())
    }

    /// Every ClusterSet, by name.
    pub fn cluster_sets(&self) -> impl Iterator<Item = &Arc<ClusterSet>> {
        self.cluster_sets.values()
    }

    /// Every Set, in namespace/name order.
    pub fn sets(&self) -> impl Iterator<Item = &Arc<Set>> {
        self.sets.values()
    }

    /// The effective config of `entry`: its own checks merged with its HealthPolicies'
    /// (generation 0: the fleet fills it in).
    pub fn config(&self, entry: &ClusterEntry) -> AgentConfig {
        config::derive(&entry.object, self.policies_in(&entry.id.namespace)).config
    }

    /// Every HealthPolicy with its status: how many clusters it applies to, and whether any
    /// of its checks was skipped for a name clash.
    pub fn health_policies(&self) -> Vec<HealthPolicy> {
        let mut out: Vec<HealthPolicy> = self
            .policies
            .iter()
            .map(|(key, p)| {
                let mut p = (**p).clone();
                p.status = self.policy_records.get(key).map(|r| r.status.clone());
                p
            })
            .collect();
        for (key, (refused, why)) in &self.refused {
            let index = out.iter().position(|p| policy_key(p) == *key);
            let p = match index {
                Some(i) => &mut out[i],
                None => {
                    out.push((**refused).clone());
                    out.last_mut().expect("just pushed")
                }
            };
            let kept = if index.is_some() {
                "; the previous version stays in effect"
            } else {
                ""
            };
            let status = p.status.get_or_insert_with(Default::default);
            fleetpulse_common::api::condition::set(
                &mut status.conditions,
                fleetpulse_common::api::condition::ACCEPTED,
                fleetpulse_common::api::condition::Status::False,
                "ConditionDoesNotCompile",
                &format!("{why}{kept}"),
                Timestamp::now(),
            );
        }
        out.sort_by_key(policy_key);
        out
    }
}

fn namespace_range(namespace: &str) -> std::ops::RangeInclusive<ClusterId> {
    // Names are DNS labels, so no name sorts after U+10FFFF.
    ClusterId::new(namespace, "")..=ClusterId::new(namespace, "\u{10FFFF}")
}

#[cfg(test)]
mod tests;
