//! Hub-side checks: a liveness check reading per-cluster KeptnMetric objects kept on the
//! hub (the seed proposal's script, unchanged) is evaluated by the hub for each cluster,
//! reads only that cluster's metric, gates `Healthy`, and is not sent to the agent.

use std::time::{Duration, Instant};

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::json;

use fleetpulse_common::api::MemberCluster;
use fleetpulse_common::api::condition::{HEALTHY, Status};
use fleetpulse_common::protocol::report::{ClusterId, HeartbeatReport};
use fleetpulse_hub::fleet::Admitted;
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

/// A MemberCluster in `fleet` whose check reads its KeptnMetric on the hub, from the
/// selector's `namespace` (`None`: unset).
fn cluster_reading(name: &str, namespace: Option<&str>) -> MemberCluster {
    let mut selector = json!({"group": "metrics.keptn.sh", "version": "v1", "kind": "KeptnMetric",
        "name": "{{ .Cluster.metadata.name }}-error-rate", "identifier": "metric", "fromHub": true});
    if let Some(ns) = namespace {
        selector["namespace"] = ns.into();
    }
    serde_json::from_value(json!({
        "apiVersion": "fleetpulse.io/v1alpha1", "kind": "MemberCluster",
        "metadata": {"name": name, "namespace": "fleet"},
        "spec": {
            "livenessChecks": [{
                "name": "error-rate",
                "resourceSelectors": [selector],
                "condition": SCRIPT
            }]
        }
    }))
    .unwrap()
}

fn cluster(name: &str) -> MemberCluster {
    cluster_reading(name, Some("fleet"))
}

fn metric_in(namespace: &str, cluster: &str, value: &str) -> serde_json::Value {
    json!({"apiVersion": "metrics.keptn.sh/v1", "kind": "KeptnMetric",
           "metadata": {"name": format!("{cluster}-error-rate"), "namespace": namespace},
           "status": {"value": value}})
}

fn metric(cluster: &str, value: &str) -> serde_json::Value {
    metric_in("fleet", cluster, value)
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
    let mcs = three_rounds(
        vec![cluster("edge-1"), cluster("edge-2")],
        vec![metric("edge-1", "0.01"), metric("edge-2", "0.9")],
    );
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
        (Status::parse(&cond.status), error_rate(&status).1)
    };
    assert_eq!(healthy("edge-1"), (Status::True, "error rate 0.01".into()));
    assert_eq!(
        healthy("edge-2"),
        (Status::False, "error rate 0.9".into()),
        "edge-2 reads its own metric"
    );
}

/// The `error-rate` check of a status, as `(passing, message)`.
fn error_rate(status: &fleetpulse_common::api::MemberClusterStatus) -> (bool, String) {
    let check = (status.checks.iter())
        .find(|c| c.name == "error-rate")
        .unwrap();
    (check.passing, check.message.clone())
}

/// Runs three rounds of hub checks and reports for `clusters` over `hub_objects` (the
/// agents' checks pass); returns the MemberClusters as the read API shows them. The agent
/// never gets the hub-side checks.
fn three_rounds(
    clusters: Vec<MemberCluster>,
    hub_objects: Vec<serde_json::Value>,
) -> Vec<MemberCluster> {
    let (mcs, problems) = three_rounds_with_problems(clusters, hub_objects);
    assert!(problems.is_empty(), "{problems:?}");
    mcs
}

/// [`three_rounds`], also returning the problems loading the objects found.
fn three_rounds_with_problems(
    clusters: Vec<MemberCluster>,
    hub_objects: Vec<serde_json::Value>,
) -> (Vec<MemberCluster>, Vec<String>) {
    let fleet = testing::fleet_in_memory(Settings::default());
    let (t0, w0) = (Instant::now(), Timestamp::now());
    let ids: Vec<ClusterId> = clusters
        .iter()
        .map(|c| ClusterId::new("fleet", c.metadata.name.clone().unwrap()))
        .collect();
    let objects = Objects {
        member_clusters: shared(clusters),
        hub_objects,
        ..Default::default()
    };
    let problems = fleet.reload(objects, t0, w0);
    for seq in 1..=3u64 {
        let (now, wall) = (
            t0 + Duration::from_secs(seq),
            w0 + SignedDuration::from_secs(seq as i64),
        );
        fleet.run_hub_checks(now, wall);
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
                claims: report.into_shared(),
                signed_checks: None,
                shape: None,
            };
            fleet.accept(&admitted, now, wall).unwrap();
        }
    }
    (fleet.member_clusters(), problems)
}

#[test]
fn a_hub_side_check_reads_only_its_clusters_namespace_and_one_naming_another_fails_saying_so() {
    // Another team's namespace holds a metric that would pass; ours has none.
    let theirs = metric_in("payments", "edge-1", "0.01");
    let mcs = three_rounds(
        vec![
            cluster_reading("edge-1", Some("payments")),
            cluster_reading("edge-2", None),
        ],
        vec![theirs, metric_in("payments", "edge-2", "0.01")],
    );
    let results: Vec<(bool, String)> = (mcs.iter())
        .map(|mc| error_rate(mc.status.as_ref().unwrap()))
        .collect();
    let (passing, message) = &results[0];
    assert!(
        !passing,
        "naming another namespace fails the check: {message}"
    );
    assert!(
        message.contains("namespace fleet") && message.contains("not payments"),
        "{message}"
    );
    let (passing, message) = &results[1];
    assert!(
        !passing,
        "without a namespace only its own is read: {message}"
    );
    assert!(
        !message.contains("0.01"),
        "nothing of payments is quoted: {message}"
    );
}

/// A hub-side check that also reads the managed cluster cannot run anywhere (the API
/// server's schema does not say so): it fails on the hub, saying why, and never passes by
/// being skipped.
#[test]
fn a_hub_side_check_that_does_not_parse_fails_saying_why() {
    let mut mc = cluster("edge-1");
    let selectors = &mut mc.spec.liveness_checks[0].resource_selectors;
    let mut pods = selectors[0].clone();
    (pods.group, pods.kind, pods.from_hub) = (String::new(), "Pod".into(), false);
    selectors.push(pods);
    let (mcs, problems) = three_rounds_with_problems(vec![mc], vec![metric("edge-1", "0.01")]);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("hub-side check error-rate.resourceSelectors")),
        "{problems:?}"
    );
    let status = mcs[0].status.as_ref().unwrap();
    let (passing, message) = error_rate(status);
    assert!(!passing, "{message}");
    assert!(
        message.starts_with("not run: the check cannot be read") && message.contains("split it"),
        "{message}"
    );
    let healthy = status
        .conditions
        .iter()
        .find(|c| c.type_ == HEALTHY)
        .unwrap();
    assert_eq!(Status::parse(&healthy.status), Status::False);
}
