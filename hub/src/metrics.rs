//! The hub's Prometheus metrics, registered into a `prometheus-client` registry owned by
//! the [`crate::fleet::Fleet`] (no global statics) and served on `/metrics`.
//!
//! | metric | labels | meaning |
//! |---|---|---|
//! | `fleetpulse_hub_heartbeats_total` | `result` | heartbeats by outcome: `accepted` or a rejection code |
//! | `fleetpulse_hub_config_requests_total` | `result` | config pulls by outcome |
//! | `fleetpulse_hub_status_writes_total` | | status writes queued to the store (transitions) |
//! | `fleetpulse_hub_clusters` | `condition`, `status` | clusters per condition status, at the last detector tick |
//! | `fleetpulse_hub_failovers_total` | | selected clusters replaced after their toleration ran out |
//! | `fleetpulse_hub_partition_brake_engaged` | | 1 while set reassignment is frozen by the partition brake |

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

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

/// Every hub metric.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Heartbeats by outcome.
    pub heartbeats: Family<ResultLabels, Counter>,
    /// Config requests by outcome.
    pub config_requests: Family<ResultLabels, Counter>,
    /// Status writes (transitions).
    pub status_writes: Counter,
    /// Clusters per condition status.
    pub clusters: Family<ConditionLabels, Gauge>,
    /// Set failovers.
    pub failovers: Counter,
    /// 1 while the partition brake freezes reassignment.
    pub partition_brake_engaged: Gauge,
}

impl Metrics {
    /// Creates the metrics and registers them under the `fleetpulse_hub` prefix.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        let r = registry.sub_registry_with_prefix("fleetpulse_hub");
        r.register(
            "heartbeats",
            "Heartbeats by outcome (accepted or a rejection code)",
            m.heartbeats.clone(),
        );
        r.register(
            "config_requests",
            "Config requests by outcome",
            m.config_requests.clone(),
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
            "Selected clusters replaced after their toleration ran out",
            m.failovers.clone(),
        );
        r.register(
            "partition_brake_engaged",
            "1 while set reassignment is frozen by the partition brake",
            m.partition_brake_engaged.clone(),
        );
        m
    }

    /// Counts a heartbeat outcome.
    pub fn heartbeat(&self, result: &'static str) {
        self.heartbeats
            .get_or_create(&ResultLabels { result })
            .inc();
    }

    /// Counts a config request outcome.
    pub fn config_request(&self, result: &'static str) {
        self.config_requests
            .get_or_create(&ResultLabels { result })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_is_exposed_with_its_prefix() {
        let mut registry = Registry::default();
        let m = Metrics::register(&mut registry);
        m.heartbeat("accepted");
        m.config_request("unknown_key");
        m.failovers.inc();
        m.partition_brake_engaged.set(1);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for name in [
            "fleetpulse_hub_heartbeats_total{result=\"accepted\"} 1",
            "fleetpulse_hub_config_requests_total{result=\"unknown_key\"} 1",
            "fleetpulse_hub_status_writes_total 0",
            "fleetpulse_hub_failovers_total 1",
            "fleetpulse_hub_partition_brake_engaged 1",
        ] {
            assert!(text.contains(name), "{name} missing from:\n{text}");
        }
    }
}
