//! [`Transitions`]: MemberCluster condition transitions, counted from the status writes
//! (every transition leaves the hub as one), and the per-cluster condition gauges that
//! `--per-cluster-metrics` turns on for fleets whose series budget allows three series per
//! condition and cluster.

use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use fleetpulse_common::protocol::report::ClusterId;

/// Labels of a condition transition: the condition, its new status and reason.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TransitionLabels {
    /// `Reachable`, `Ready` or `Healthy`.
    pub condition: String,
    /// The new status.
    pub status: String,
    /// The new reason, e.g. `HeartbeatsStopped`.
    pub reason: String,
}

/// Labels of the per-cluster condition gauge (not `namespace`: Prometheus sets that one
/// to the hub's own namespace when it scrapes through a ServiceMonitor).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClusterConditionLabels {
    /// The MemberCluster's namespace.
    pub cluster_namespace: String,
    /// The MemberCluster's name.
    pub cluster: String,
    /// The condition type.
    pub condition: String,
    /// `True`, `False` or `Unknown`.
    pub status: &'static str,
}

/// Condition transitions and the per-cluster gauges.
#[derive(Debug)]
pub struct Transitions {
    transitions: Family<TransitionLabels, Counter>,
    cluster_condition: Family<ClusterConditionLabels, Gauge>,
    per_cluster: AtomicBool,
    /// When this process started counting: a cluster's first write since then counts
    /// the conditions that changed after it (the ones restored from the store did not).
    started: Timestamp,
}

impl Default for Transitions {
    fn default() -> Self {
        Self {
            transitions: Family::default(),
            cluster_condition: Family::default(),
            per_cluster: AtomicBool::new(false),
            started: Timestamp::now(),
        }
    }
}

impl Transitions {
    /// Registers both families (the gauge stays empty unless per-cluster metrics are on).
    pub fn register(&self, r: &mut Registry) {
        r.register(
            "condition_transitions",
            "MemberCluster condition transitions, by condition, new status and reason",
            self.transitions.clone(),
        );
        r.register(
            "cluster_condition",
            "1 for each MemberCluster condition's current status (only with --per-cluster-metrics)",
            self.cluster_condition.clone(),
        );
    }

    /// Turns the per-cluster gauges on.
    pub fn enable_per_cluster(&self) {
        self.per_cluster.store(true, Ordering::Relaxed);
    }

    /// Whether the per-cluster gauges are on.
    pub fn per_cluster(&self) -> bool {
        self.per_cluster.load(Ordering::Relaxed)
    }

    /// Counts the transitions of one status write. A cluster's first write in this process
    /// counts only the conditions that changed since it started (those restored from the
    /// store did not).
    /// `changed` are the conditions whose status differs from the last write (all of them
    /// on the first write, `first`).
    pub fn written(&self, first: bool, changed: &[&Condition]) {
        for c in changed {
            let counted =
                !first || (c.status != "Unknown" && c.last_transition_time.0 >= self.started);
            if counted {
                self.transitions
                    .get_or_create(&TransitionLabels {
                        condition: c.type_.clone(),
                        status: c.status.clone(),
                        reason: c.reason.clone(),
                    })
                    .inc();
            }
        }
    }

    /// Replaces the per-cluster gauges with these clusters' conditions.
    pub fn set_clusters(&self, clusters: Vec<(ClusterId, Vec<Condition>)>) {
        self.cluster_condition.clear();
        for (id, conditions) in clusters {
            for c in conditions {
                for status in ["True", "False", "Unknown"] {
                    self.cluster_condition
                        .get_or_create(&ClusterConditionLabels {
                            cluster_namespace: id.namespace.clone(),
                            cluster: id.name.clone(),
                            condition: c.type_.clone(),
                            status,
                        })
                        .set(i64::from(c.status == status));
                }
            }
        }
    }
}
