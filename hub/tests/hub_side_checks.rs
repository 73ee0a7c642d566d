//! Hub-side checks: a liveness check reading per-cluster KeptnMetric objects kept on the
//! hub (the seed proposal's script, unchanged) is evaluated by the hub for each cluster,
//! reads only that cluster's metric, gates `Healthy`, and is not sent to the agent.

use std::time::{Duration, Instant};

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::json;

use fleetpulse_common::api::MemberCluster;
use fleetpulse_common::api::condition::{HEALTHY, Status};
use fleetpulse_common::protocol::report::{ClusterId, HeartbeatReport};
use fleetpulse_hub::admission::Admitted;
use fleetpulse_hub::fleet::{Objects, Settings, shared};
use fleetpulse_hub::testing;

const SCRIPT: &str = r#"function evaluate()
  local hs = {healthy = false, message = ""}
  local v = tonumber(ctx.metric.status.value)
  if v ~= nil and v < 0.05 then
    hs.healthy = true
  end
  hs.message = "error rate " .. tostring(v)
  return hs
end"#;

fn cluster(name: &str) -> MemberCluster {
    serde_json::from_value(json!({
        "apiVersion": "fleetpulse.io/v1alpha1", "kind": "MemberCluster",
        "metadata": {"name": name, "namespace": "fleet"},
        "spec": {
            "livenessChecks": [{
                "name": "error-rate",
                "resourceSelectors": [{"group": "metrics.keptn.sh", "version": "v1", "kind": "KeptnMetric",
                    "namespace": "keptn", "name": "{{ .Cluster.metadata.name }}-error-rate",
                    "identifier": "metric", "fromHub": true}],
                "condition": SCRIPT
            }]
        }
    }))
    .unwrap()
}

fn metric(cluster: &str, value: &str) -> serde_json::Value {
    json!({"apiVersion": "metrics.keptn.sh/v1", "kind": "KeptnMetric",
           "metadata": {"name": format!("{cluster}-error-rate"), "namespace": "keptn"},
           "status": {"value": value}})
}

fn report(id: &ClusterId, seq: u64, wall: Timestamp, config_generation: u64) -> HeartbeatReport {
    testing::report(id)
        .seq(seq)
        .at(wall)
        .generation(config_generation)
        .build()
}

#[test]
fn a_keptn_metric_check_on_the_hub_gates_each_cluster_on_its_own_metric() {
    let fleet = testing::fleet_in_memory(Settings::default());
    let (t0, w0) = (Instant::now(), Timestamp::now());
    let objects = Objects {
        member_clusters: shared(vec![cluster("edge-1"), cluster("edge-2")]),
        hub_objects: vec![metric("edge-1", "0.01"), metric("edge-2", "0.9")],
        ..Default::default()
    };
    assert!(fleet.reload(objects, t0, w0).is_empty());
    let ids = [
        ClusterId::new("fleet", "edge-1"),
        ClusterId::new("fleet", "edge-2"),
    ];
    for seq in 1..=3u64 {
        let (now, wall) = (
            t0 + Duration::from_secs(seq),
            w0 + SignedDuration::from_secs(seq as i64),
        );
        fleet.tick(now, wall);
        for id in &ids {
            let entry = fleet.registry().cluster(id).cloned().unwrap();
            assert!(
                fleet.config(&entry).liveness_checks.is_empty(),
                "the agent does not get hub-side checks"
            );
            let report = report(id, seq, wall, fleet.config(&entry).generation);
            let admitted = Admitted {
                entry,
                kid: "kid".into(),
                claims: report,
            };
            fleet.accept(&admitted, now, wall).unwrap();
        }
    }
    let mcs = fleet.member_clusters();
    let healthy = |name: &str| {
        let status = mcs
            .iter()
            .find(|m| m.metadata.name.as_deref() == Some(name))
            .unwrap()
            .status
            .clone()
            .unwrap();
        let cond = status
            .conditions
            .iter()
            .find(|c| c.type_ == HEALTHY)
            .unwrap()
            .clone();
        let check = status
            .checks
            .iter()
            .find(|c| c.name == "error-rate")
            .unwrap()
            .clone();
        (Status::parse(&cond.status), check.message)
    };
    assert_eq!(healthy("edge-1"), (Status::True, "error rate 0.01".into()));
    assert_eq!(
        healthy("edge-2"),
        (Status::False, "error rate 0.9".into()),
        "edge-2 reads its own metric"
    );
}
