//! The hub's Prometheus metrics, registered into a `prometheus-client` registry owned by
//! the [`crate::fleet::Fleet`] (no global statics) and served on `/metrics`. docs/metrics.md
//! lists every metric with its labels and what to alert on.
//!
//! Counters are recorded where the hub already acts (a request's outcome, a status write,
//! a failover, a brake change); gauges of sets and (with `--per-cluster-metrics`) of each
//! cluster are rebuilt from the fleet's state at each scrape ([`Metrics::scrape`]), so a
//! deleted set or cluster disappears from the next scrape.

mod clusters;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use fleetpulse_common::api::SetStatus;
use fleetpulse_common::protocol::report::ClusterId;

use crate::core::brake::BrakeState;
use crate::ids::SetKey;

pub use clusters::Transitions;

/// `result` label: `accepted` or a stable rejection code.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// The outcome.
    pub result: &'static str,
}

/// `condition` and `status` labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ConditionLabels {
    /// `Reachable`, `Ready` or `Healthy`.
    pub condition: &'static str,
    /// `True`, `False` or `Unknown`.
    pub status: &'static str,
}

/// `code` and `request` labels of rejected reports.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RejectedLabels {
    /// The stable rejection code (`unknown_key`, `replayed`, ...).
    pub code: &'static str,
    /// `heartbeat` or `config`.
    pub request: &'static str,
}

/// `kind` (`ClusterSet` or `Set`) and `set` (its name, `namespace/name` for a Set).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SetLabels {
    /// `ClusterSet` or `Set`.
    pub kind: &'static str,
    /// The set's name (`namespace/name` for a Set).
    pub set: String,
}

/// A failover: the set and the reason of the condition that made the cluster ineligible.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailoverLabels {
    /// `ClusterSet` or `Set`.
    pub kind: &'static str,
    /// The set's name.
    pub set: String,
    /// The reason of the replaced cluster's failing condition, e.g. `HeartbeatsStopped`.
    pub reason: String,
}

/// `state` label of the brake: `Released`, `Engaged` or `Settling`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BrakeLabels {
    /// The brake state.
    pub state: &'static str,
}

/// What the batches are counted in: their number and the signatures they held (the mean
/// batch size is the ratio).
#[derive(Clone, Debug, Default)]
pub struct BatchCounters {
    /// Batches verified.
    pub batches: Counter,
    /// Signatures verified in them.
    pub signatures: Counter,
    /// CPU seconds the verifying thread spent in them (its own clock, so time the thread
    /// was not running is not counted).
    pub cpu_seconds: Counter<f64, std::sync::atomic::AtomicU64>,
}

/// The mirror feed's work: its syncs, the clusters they read and the time they took
/// (what a change costs the hub beside ingest).
#[derive(Clone, Debug, Default)]
pub struct FeedCounters {
    /// Syncs run.
    pub syncs: Counter,
    /// Clusters read by them.
    pub clusters_read: Counter,
    /// Seconds spent in them.
    pub seconds: Counter<f64, std::sync::atomic::AtomicU64>,
}

impl FeedCounters {
    /// Counts one sync that read `read` clusters in `took`.
    pub fn record(&self, read: usize, took: std::time::Duration) {
        self.syncs.inc();
        self.clusters_read.inc_by(read as u64);
        self.seconds.inc_by(took.as_secs_f64());
    }
}

/// Every hub metric.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Heartbeats by outcome.
    pub heartbeats: Family<ResultLabels, Counter>,
    /// Config requests by outcome.
    pub config_requests: Family<ResultLabels, Counter>,
    /// Rejected heartbeats and config requests by code.
    pub rejected: Family<RejectedLabels, Counter>,
    /// Status writes (transitions).
    pub status_writes: Counter,
    /// Clusters per condition status.
    pub clusters: Family<ConditionLabels, Gauge>,
    /// Set failovers, by set and reason.
    pub failovers: Family<FailoverLabels, Counter>,
    /// 1 while the partition brake freezes reassignment.
    pub partition_brake_engaged: Gauge,
    /// HealthPolicy changes whose rollout brake is tripped.
    pub rollout_brake_engaged: Gauge,
    /// Clusters whose key two running agents seem to share.
    pub shared_keys: Gauge,
    /// Sources that used up their allowance of authentication failures, once per window.
    pub failure_limited_sources: Counter,
    /// 1 for the brake's current state.
    pub partition_brake_state: Family<BrakeLabels, Gauge>,
    /// 1: this process leads (a hub serves its fleet only once it leads).
    pub leader: Gauge,
    /// Clusters each set selects.
    pub set_selected: Family<SetLabels, Gauge>,
    /// 1 while a set is satisfied.
    pub set_satisfied: Family<SetLabels, Gauge>,
    /// MemberCluster condition transitions, and the optional per-cluster gauges.
    pub transitions: Transitions,
    /// Heartbeat signature batches and the signatures they held.
    pub signature_batches: BatchCounters,
    /// The mirror feed's syncs.
    pub mirror_feed: FeedCounters,
}

impl Metrics {
    /// Creates the metrics and registers them under the `fleetpulse_hub` prefix.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        m.leader.set(1);
        m.brake(&BrakeState::Released);
        let r = registry.sub_registry_with_prefix("fleetpulse_hub");
        let counters = [
            (
                "heartbeats",
                "Heartbeats by outcome (accepted or a rejection code)",
                &m.heartbeats,
            ),
            (
                "config_requests",
                "Config requests by outcome",
                &m.config_requests,
            ),
        ];
        for (name, help, family) in counters {
            r.register(name, help, family.clone());
        }
        r.register(
            "rejected_reports",
            "Rejected heartbeats and config requests, by rejection code",
            m.rejected.clone(),
        );
        r.register(
            "status_writes",
            "Status writes queued to the store (transitions)",
            m.status_writes.clone(),
        );
        r.register(
            "clusters",
            "Clusters per condition status at the last detector tick",
            m.clusters.clone(),
        );
        r.register(
            "failovers",
            "Selected clusters replaced after their toleration ran out, by set and reason",
            m.failovers.clone(),
        );
        r.register(
            "partition_brake_engaged",
            "1 while set reassignment is frozen by the partition brake",
            m.partition_brake_engaged.clone(),
        );
        r.register(
            "shared_keys",
            "Clusters whose key two running agents seem to share (SharedKey=True)",
            m.shared_keys.clone(),
        );
        r.register(
            "failure_limited_sources",
            "Times a source address used up its allowance of authentication failures \
             (--failure-limit) and was answered 429 for the rest of its window",
            m.failure_limited_sources.clone(),
        );
        r.register(
            "rollout_brake_engaged",
            "HealthPolicy changes whose rollout brake holds the clusters they turned unhealthy",
            m.rollout_brake_engaged.clone(),
        );
        r.register(
            "partition_brake_state",
            "1 for the partition brake's current state (Released, Engaged, Settling)",
            m.partition_brake_state.clone(),
        );
        r.register(
            "leader",
            "1 on the replica that leads and serves agents (standbys expose 0)",
            m.leader.clone(),
        );
        r.register(
            "set_selected_clusters",
            "Clusters a ClusterSet or Set selects",
            m.set_selected.clone(),
        );
        r.register(
            "set_satisfied",
            "1 while a ClusterSet or Set has as many eligible selected clusters as it wants",
            m.set_satisfied.clone(),
        );
        r.register(
            "signature_batches",
            "Batches of heartbeat signatures verified together (--batch-verify)",
            m.signature_batches.batches.clone(),
        );
        r.register(
            "batched_signatures",
            "Heartbeat signatures verified in batches; over signature_batches, the mean batch size",
            m.signature_batches.signatures.clone(),
        );
        r.register(
            "signature_batch_cpu_seconds",
            "CPU seconds spent verifying signature batches (the verifying thread's clock); \
             over batched_signatures, what a signature costs in the hub",
            m.signature_batches.cpu_seconds.clone(),
        );
        r.register(
            "mirror_feed_syncs",
            "Syncs of the mirror feed (each reads the clusters changed since the last)",
            m.mirror_feed.syncs.clone(),
        );
        r.register(
            "mirror_feed_clusters_read",
            "Clusters the mirror feed's syncs read",
            m.mirror_feed.clusters_read.clone(),
        );
        r.register(
            "mirror_feed_seconds",
            "Seconds the mirror feed's syncs took",
            m.mirror_feed.seconds.clone(),
        );
        m.transitions.register(r);
        m
    }

    /// Counts a heartbeat outcome.
    pub fn heartbeat(&self, result: &'static str) {
        self.count(&self.heartbeats, "heartbeat", result);
    }

    /// Counts a config request outcome.
    pub fn config_request(&self, result: &'static str) {
        self.count(&self.config_requests, "config", result);
    }

    fn count(
        &self,
        family: &Family<ResultLabels, Counter>,
        request: &'static str,
        result: &'static str,
    ) {
        family.get_or_create(&ResultLabels { result }).inc();
        if result != "accepted" {
            self.rejected
                .get_or_create(&RejectedLabels {
                    code: result,
                    request,
                })
                .inc();
        }
    }

    /// Records the brake's state.
    pub fn brake(&self, state: &BrakeState) {
        let current = brake_state_name(state);
        for name in ["Released", "Engaged", "Settling"] {
            self.partition_brake_state
                .get_or_create(&BrakeLabels { state: name })
                .set(i64::from(name == current));
        }
        self.partition_brake_engaged
            .set(i64::from(!matches!(state, BrakeState::Released)));
    }

    /// Counts one failover per cluster `dropped` from `set`, by the reason of its failing
    /// condition (the `(Reason)` in the selection's explanation).
    pub fn failover(&self, set: &SetKey, dropped: &[(ClusterId, String)]) {
        let (kind, name) = set_labels(set);
        for (_, why) in dropped {
            let reason = why
                .split_once('(')
                .and_then(|(_, rest)| rest.split_once(')'))
                .map_or("Unknown", |(reason, _)| reason);
            self.failovers
                .get_or_create(&FailoverLabels {
                    kind,
                    set: name.clone(),
                    reason: reason.to_owned(),
                })
                .inc();
        }
    }

    /// Rebuilds the per-scrape gauges from the fleet's state: every set's status, and
    /// (with per-cluster metrics on) every cluster's conditions.
    pub fn scrape<'a>(
        &self,
        sets: impl IntoIterator<Item = (&'a SetKey, &'a SetStatus)>,
        clusters: impl FnOnce() -> Vec<(ClusterId, Vec<Condition>)>,
    ) {
        self.set_selected.clear();
        self.set_satisfied.clear();
        for (key, status) in sets {
            let (kind, set) = set_labels(key);
            let labels = SetLabels { kind, set };
            let selected = status.selected_cluster_refs.len();
            self.set_selected
                .get_or_create(&labels)
                .set(i64::try_from(selected).unwrap_or(i64::MAX));
            let satisfied = status
                .conditions
                .iter()
                .any(|c| c.type_ == crate::core::sets::SATISFIED && c.status == "True");
            self.set_satisfied
                .get_or_create(&labels)
                .set(i64::from(satisfied));
        }
        if self.transitions.per_cluster() {
            self.transitions.set_clusters(clusters());
        }
    }
}

fn brake_state_name(state: &BrakeState) -> &'static str {
    match state {
        BrakeState::Released => "Released",
        BrakeState::Engaged { .. } => "Engaged",
        BrakeState::Settling { .. } => "Settling",
    }
}

fn set_labels(key: &SetKey) -> (&'static str, String) {
    match key {
        SetKey::ClusterSet(name) => ("ClusterSet", name.clone()),
        SetKey::Set(id) => ("Set", id.to_string()),
    }
}

#[cfg(test)]
mod tests;
