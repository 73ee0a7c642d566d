//! The desired state, indexed for the hot path: clusters by id, keys by key id, and each
//! cluster's effective config (its own checks merged with its HealthPolicies').

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use ed25519_dalek::VerifyingKey;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use parking_lot::Mutex;
use sha2::{Digest, Sha256};

use fleetpulse_common::api::condition::{self, Status};
use fleetpulse_common::api::{CLUSTER_SET_LABEL_PREFIX, SET_LABEL_PREFIX};
use fleetpulse_common::api::{
    CheckPhase, ClusterCheck, ClusterSet, HealthPolicy, HealthPolicyStatus, MemberCluster, Set,
};
use fleetpulse_common::protocol::keys::{self, KeyId};
use fleetpulse_common::protocol::report::{AgentConfig, ClusterId};
use fleetpulse_common::selector;

use super::ClusterState;
pub use crate::ids::cluster_id;

/// The objects the hub acts on, as read from manifests or the Kubernetes API.
#[derive(Clone, Debug, Default)]
pub struct Objects {
    /// MemberClusters.
    pub member_clusters: Vec<MemberCluster>,
    /// ClusterSets.
    pub cluster_sets: Vec<ClusterSet>,
    /// Sets.
    pub sets: Vec<Set>,
    /// HealthPolicies.
    pub health_policies: Vec<HealthPolicy>,
    /// Objects of other APIs the hub keeps, which hub-side checks (`fromHub`) read.
    pub hub_objects: Vec<serde_json::Value>,
}

/// One MemberCluster with its effective config and runtime state.
#[derive(Debug)]
pub struct ClusterEntry {
    /// `namespace/name`.
    pub id: ClusterId,
    /// The object (spec and metadata; status lives in `state`).
    pub object: MemberCluster,
    /// Effective config (generation filled in from `state`).
    pub config: AgentConfig,
    /// Hash of the effective config.
    pub config_hash: u64,
    /// Checks the hub evaluates itself (their selectors read the hub's objects).
    pub hub_checks: Vec<(CheckPhase, ClusterCheck)>,
    /// Runtime state, kept across reloads.
    pub state: Arc<Mutex<ClusterState>>,
}

/// Which cluster a key belongs to.
#[derive(Clone, Debug)]
pub struct KeyBinding {
    /// The owning cluster.
    pub cluster: ClusterId,
    /// The public key.
    pub key: VerifyingKey,
    /// Listed as revoked.
    pub revoked: bool,
}

/// The indexed desired state.
#[derive(Debug, Default)]
pub struct Registry {
    objects: Objects,
    clusters: BTreeMap<ClusterId, Arc<ClusterEntry>>,
    keys: HashMap<String, KeyBinding>,
    policy_statuses: BTreeMap<(String, String), HealthPolicyStatus>,
}

impl Registry {
    /// Indexes `objects`. `state_for` supplies each cluster's runtime state (kept from
    /// before, restored from the store, or new). Conflicts are resolved deterministically
    /// (first cluster in namespace/name order keeps a shared key; a policy check whose
    /// name a cluster already uses is skipped) and returned as messages for the operator.
    pub fn build(
        objects: Objects,
        mut state_for: impl FnMut(&ClusterId) -> Arc<Mutex<ClusterState>>,
    ) -> (Registry, Vec<String>) {
        let mut problems = Vec::new();
        let mut clusters = BTreeMap::new();
        let mut keys: HashMap<String, KeyBinding> = HashMap::new();
        let mut policy_clashes = BTreeMap::new();
        let mut sorted: Vec<&MemberCluster> = objects.member_clusters.iter().collect();
        sorted.sort_by_key(|mc| cluster_id(mc));
        for mc in sorted {
            let id = cluster_id(mc);
            for listed in &mc.spec.agent.public_keys {
                let Ok(key) = keys::parse_public_key(&listed.public_key) else {
                    problems.push(format!("MemberCluster {id}: unreadable public key skipped"));
                    continue;
                };
                let kid = KeyId::of(&key).0;
                if let Some(owner) = keys.get(&kid) {
                    problems.push(format!(
                        "MemberCluster {id}: key {kid} is already listed by MemberCluster {}; a \
                         key belongs to one cluster, so it is ignored here: remove it from one",
                        owner.cluster
                    ));
                    continue;
                }
                keys.insert(
                    kid,
                    KeyBinding {
                        cluster: id.clone(),
                        key,
                        revoked: listed.revoked,
                    },
                );
            }
            let mut config = effective_config(
                mc,
                &objects.health_policies,
                &mut problems,
                &mut policy_clashes,
            );
            let hub_checks = split_hub_checks(&mut config);
            let config_hash = hash_config(&config);
            let entry = ClusterEntry {
                state: state_for(&id),
                id: id.clone(),
                object: mc.clone(),
                config,
                config_hash,
                hub_checks,
            };
            clusters.insert(id, Arc::new(entry));
        }
        let policy_statuses = policy_statuses(&objects.health_policies, &policy_clashes);
        (
            Registry {
                objects,
                clusters,
                keys,
                policy_statuses,
            },
            problems,
        )
    }

    /// A cluster by id.
    pub fn cluster(&self, id: &ClusterId) -> Option<&Arc<ClusterEntry>> {
        self.clusters.get(id)
    }

    /// Every cluster, in namespace/name order.
    pub fn clusters(&self) -> impl Iterator<Item = &Arc<ClusterEntry>> {
        self.clusters.values()
    }

    /// A key by key id.
    pub fn key(&self, kid: &str) -> Option<&KeyBinding> {
        self.keys.get(kid)
    }

    /// The objects this registry was built from.
    pub fn objects(&self) -> &Objects {
        &self.objects
    }

    /// Stamps the transition time of every HealthPolicy condition: kept from `previous` when
    /// the condition's status is unchanged, `now` otherwise (a condition is computed on each
    /// reload, so without this its time would be the reload's).
    pub fn stamp_policy_conditions(&mut self, previous: &Registry, now: Timestamp) {
        for (key, status) in &mut self.policy_statuses {
            let before = previous.policy_statuses.get(key);
            for c in &mut status.conditions {
                let kept = before
                    .and_then(|b| condition::find(&b.conditions, &c.type_))
                    .filter(|b| b.status == c.status);
                c.last_transition_time = kept.map_or(Time(now), |b| b.last_transition_time.clone());
            }
        }
    }

    /// Every HealthPolicy with its status: how many clusters it applies to, and whether any
    /// of its checks was skipped for a name clash.
    pub fn health_policies(&self) -> Vec<HealthPolicy> {
        let mut items = self.objects.health_policies.clone();
        for p in &mut items {
            let key = (
                p.metadata
                    .namespace
                    .clone()
                    .unwrap_or_else(|| "default".into()),
                p.metadata.name.clone().unwrap_or_default(),
            );
            p.status = self.policy_statuses.get(&key).cloned();
        }
        items
    }
}

/// A cluster's own checks, then those of every HealthPolicy in its namespace whose
/// selector matches it (policies in name order). Generation is filled in by the caller.
fn effective_config(
    mc: &MemberCluster,
    policies: &[HealthPolicy],
    problems: &mut Vec<String>,
    policy_clashes: &mut BTreeMap<(String, String), (u32, Vec<String>)>,
) -> AgentConfig {
    let id = cluster_id(mc);
    let mut config = AgentConfig {
        generation: 0,
        interval_seconds: mc.spec.heartbeat.interval_seconds,
        cluster_metadata: ObjectMeta {
            name: mc.metadata.name.clone(),
            namespace: Some(id.namespace.clone()),
            // Membership labels change with selection; leaving them out keeps a failover from
            // changing every member's config (and making its agent pull it again).
            labels: mc.metadata.labels.clone().map(|labels| {
                labels
                    .into_iter()
                    .filter(|(k, _)| {
                        !k.starts_with(CLUSTER_SET_LABEL_PREFIX) && !k.starts_with(SET_LABEL_PREFIX)
                    })
                    .collect()
            }),
            annotations: mc.metadata.annotations.clone(),
            ..Default::default()
        },
        readiness_checks: mc.spec.readiness_checks.clone(),
        liveness_checks: mc.spec.liveness_checks.clone(),
    };
    let labels = mc.metadata.labels.clone().unwrap_or_default();
    let mut matching: Vec<&HealthPolicy> = policies
        .iter()
        .filter(|p| p.metadata.namespace.as_deref().unwrap_or("default") == id.namespace)
        .filter(|p| {
            p.spec
                .cluster_selector
                .as_ref()
                .is_some_and(|s| selector::matches(s, &labels))
        })
        .collect();
    matching.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for policy in matching {
        let policy_name = policy.metadata.name.as_deref().unwrap_or_default();
        let report = policy_clashes
            .entry((id.namespace.clone(), policy_name.to_owned()))
            .or_default();
        report.0 += 1;
        let mut add = |from: &[ClusterCheck], to_readiness: bool, config: &mut AgentConfig| {
            for check in from {
                let taken = config
                    .readiness_checks
                    .iter()
                    .chain(&config.liveness_checks)
                    .any(|c| c.name == check.name);
                if taken {
                    let clash = format!(
                        "check {:?} is skipped for MemberCluster {id}, which already has a check of \
                         that name; rename one",
                        check.name
                    );
                    problems.push(format!(
                        "HealthPolicy {}/{policy_name}: {clash}",
                        id.namespace
                    ));
                    report.1.push(clash);
                } else if to_readiness {
                    config.readiness_checks.push(check.clone());
                } else {
                    config.liveness_checks.push(check.clone());
                }
            }
        };
        add(&policy.spec.readiness_checks, true, &mut config);
        add(&policy.spec.liveness_checks, false, &mut config);
    }
    config
}

/// Takes the hub-side checks (`fromHub` selectors) out of `config`: the hub evaluates them.
fn split_hub_checks(config: &mut AgentConfig) -> Vec<(CheckPhase, ClusterCheck)> {
    let mut hub = Vec::new();
    for (phase, list) in [
        (CheckPhase::Readiness, &mut config.readiness_checks),
        (CheckPhase::Liveness, &mut config.liveness_checks),
    ] {
        let (on_hub, on_agent): (Vec<_>, Vec<_>) =
            list.drain(..).partition(ClusterCheck::reads_hub);
        *list = on_agent;
        hub.extend(on_hub.into_iter().map(|c| (phase, c)));
    }
    hub
}

fn hash_config(config: &AgentConfig) -> u64 {
    let json = serde_json::to_vec(config).expect("a config always serializes");
    let digest = Sha256::digest(json);
    u64::from_be_bytes(digest[..8].try_into().expect("8 bytes")).max(1)
}

fn policy_statuses(
    policies: &[HealthPolicy],
    clashes: &BTreeMap<(String, String), (u32, Vec<String>)>,
) -> BTreeMap<(String, String), HealthPolicyStatus> {
    // Transition times are stamped by `Registry::stamp_policy_conditions`.
    let unstamped = Timestamp::UNIX_EPOCH;
    policies
        .iter()
        .map(|p| {
            let key = (
                p.metadata
                    .namespace
                    .clone()
                    .unwrap_or_else(|| "default".into()),
                p.metadata.name.clone().unwrap_or_default(),
            );
            let (matched, skipped) = clashes.get(&key).cloned().unwrap_or_default();
            let mut status = HealthPolicyStatus {
                matched_clusters: matched,
                conditions: vec![],
                observed_generation: p.metadata.generation,
            };
            let (s, reason, message) = if skipped.is_empty() {
                (
                    Status::True,
                    "Applied",
                    format!("applied to {matched} MemberClusters"),
                )
            } else {
                let shown: Vec<&str> = skipped.iter().take(3).map(String::as_str).collect();
                let more = skipped.len().saturating_sub(3);
                let tail = if more > 0 {
                    format!(" (and {more} more)")
                } else {
                    String::new()
                };
                (
                    Status::False,
                    "CheckNameClash",
                    format!("{}{tail}", shown.join("; ")),
                )
            };
            condition::set(
                &mut status.conditions,
                "Accepted",
                s,
                reason,
                &message,
                unstamped,
            );
            (key, status)
        })
        .collect()
}
