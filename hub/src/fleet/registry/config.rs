//! A cluster's effective config: its own checks, then those of every HealthPolicy in its
//! namespace whose selector matches it (policies in name order), with the hub-side checks
//! (`fromHub` selectors) taken out for the hub to run. A pure function of the MemberCluster
//! and its namespace's policies, so it is computed when needed instead of kept.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use sha2::{Digest, Sha256};

use fleetpulse_common::api::redact::LAST_APPLIED_ANNOTATION;
use fleetpulse_common::api::{CLUSTER_SET_LABEL_PREFIX, SET_LABEL_PREFIX};
use fleetpulse_common::api::{CheckPhase, ClusterCheck, HealthPolicy, MemberCluster};
use fleetpulse_common::checks::model::Check;
use fleetpulse_common::checks::timing::Tracker;
use fleetpulse_common::protocol::report::{AgentConfig, CheckResult};
use fleetpulse_common::selector;

use crate::ids::{ClusterId, cluster_id};

/// What deriving a cluster's config found: the config the agent runs, the checks the hub
/// runs, and the policies that matched with the checks each could not add.
pub struct Derived {
    /// The agent's config (generation 0: the caller fills it in).
    pub config: AgentConfig,
    /// Checks the hub evaluates itself.
    pub hub_checks: Vec<(CheckPhase, ClusterCheck)>,
    /// Each matching policy's name and the messages of its checks skipped for a name
    /// clash with a check the cluster already has.
    pub policies: Vec<(String, Vec<String>)>,
}

/// The MemberCluster's name, namespace, labels and annotations as selector templates
/// read them. Membership labels change with selection; leaving them out keeps a failover
/// from changing every member's config (and making its agent pull it again). kubectl's
/// last-applied-configuration annotation (a copy of the whole spec, inline header values
/// included) is left out too: no template needs it.
pub fn cluster_metadata(mc: &MemberCluster) -> ObjectMeta {
    ObjectMeta {
        name: mc.metadata.name.clone(),
        namespace: Some(cluster_id(mc).namespace),
        labels: mc.metadata.labels.clone().map(|labels| {
            labels
                .into_iter()
                .filter(|(k, _)| {
                    !k.starts_with(CLUSTER_SET_LABEL_PREFIX) && !k.starts_with(SET_LABEL_PREFIX)
                })
                .collect()
        }),
        annotations: mc.metadata.annotations.clone().map(|mut annotations| {
            annotations.remove(LAST_APPLIED_ANNOTATION);
            annotations
        }),
        ..Default::default()
    }
}

/// Derives `mc`'s config from `policies`: the HealthPolicies of its namespace, in name
/// order.
pub fn derive<'a>(
    mc: &MemberCluster,
    policies: impl Iterator<Item = &'a Arc<HealthPolicy>>,
) -> Derived {
    let id = cluster_id(mc);
    let mut config = AgentConfig {
        generation: 0,
        interval_seconds: mc.spec.heartbeat.interval_seconds,
        cluster_metadata: cluster_metadata(mc),
        readiness_checks: mc.spec.readiness_checks.clone(),
        liveness_checks: mc.spec.liveness_checks.clone(),
    };
    let empty = Default::default();
    let labels = mc.metadata.labels.as_ref().unwrap_or(&empty);
    let mut matched = Vec::new();
    for policy in policies {
        let selected = policy
            .spec
            .cluster_selector
            .as_ref()
            .is_some_and(|s| selector::matches(s, labels));
        if !selected {
            continue;
        }
        let policy_name = policy.metadata.name.clone().unwrap_or_default();
        let mut clashes = Vec::new();
        let mut add = |from: &[ClusterCheck], to_readiness: bool, config: &mut AgentConfig| {
            for check in from {
                let taken = config
                    .readiness_checks
                    .iter()
                    .chain(&config.liveness_checks)
                    .any(|c| c.name == check.name);
                if taken {
                    clashes.push(format!(
                        "check {:?} is skipped for MemberCluster {id}, which already has a check of \
                         that name; rename one",
                        check.name
                    ));
                } else if to_readiness {
                    config.readiness_checks.push(check.clone());
                } else {
                    config.liveness_checks.push(check.clone());
                }
            }
        };
        add(&policy.spec.readiness_checks, true, &mut config);
        add(&policy.spec.liveness_checks, false, &mut config);
        matched.push((policy_name, clashes));
    }
    let hub_checks = split_hub_checks(&mut config);
    Derived {
        config,
        hub_checks,
        policies: matched,
    }
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

/// The hub-side checks of `derived` (the config of cluster `id`), parsed; and a failing
/// result, saying why, for each that does not parse (a problem for the log, too), so a
/// check never passes by being skipped.
pub fn hub_checks(
    derived: &Derived,
    id: &ClusterId,
    now: Timestamp,
    problems: &mut Vec<String>,
) -> (Vec<Arc<Check>>, Vec<CheckResult>) {
    let (mut parsed, mut refused) = (Vec::new(), Vec::new());
    for (phase, spec) in &derived.hub_checks {
        // Its Lua compiled when its object was admitted (`change::uncompiled`).
        match Check::read(spec, *phase, &spec.name) {
            Ok(check) => parsed.push(Arc::new(check)),
            Err(e) => {
                let problem = e.to_string();
                problems.push(format!("MemberCluster {id}: hub-side check {problem}"));
                refused.push(Tracker::refused(spec, *phase, &problem, now).result());
            }
        }
    }
    (parsed, refused)
}

/// A stable hash of a config (never 0, which stands for "none yet").
pub fn hash(config: &AgentConfig) -> u64 {
    let json = serde_json::to_vec(config).expect("a config always serializes");
    let digest = Sha256::digest(json);
    u64::from_be_bytes(digest[..8].try_into().expect("8 bytes")).max(1)
}
