//! HealthPolicy: checks declared once are merged into every matching MemberCluster's
//! effective config; a check whose name a cluster already uses is skipped and the clash is
//! reported on the policy's status, not merged silently.

use std::time::Instant;

use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use fleetpulse_common::api::{HealthPolicy, MemberCluster};
use fleetpulse_common::protocol::report::ClusterId;
use fleetpulse_hub::fleet::{Objects, Settings, shared};
use fleetpulse_hub::testing;

fn check(name: &str) -> serde_json::Value {
    json!({"name": name, "readyNodes": {"minCount": 1}})
}

fn cluster(name: &str, env: &str, own: &[&str]) -> MemberCluster {
    let builder = testing::cluster(&format!("fleet/{name}")).label("env", env);
    own.iter()
        .fold(builder, |b, check| b.liveness(testing::ready_nodes(check)))
        .build()
}

fn policy(name: &str, namespace: &str, checks: &[&str]) -> HealthPolicy {
    serde_json::from_value(json!({
        "apiVersion": "fleetpulse.io/v1alpha1", "kind": "HealthPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterSelector": {"matchLabels": {"env": "prod"}},
                 "livenessChecks": checks.iter().map(|n| check(n)).collect::<Vec<_>>()}
    }))
    .unwrap()
}

#[test]
fn policy_checks_merge_into_matching_clusters_and_clashes_are_reported() {
    let fleet = testing::fleet_in_memory(Settings::default());
    let objects = Objects {
        member_clusters: shared(vec![
            cluster("a", "prod", &["nodes"]),
            cluster("b", "prod", &[]),
            cluster("c", "dev", &[]),
        ]),
        health_policies: shared(vec![
            policy("platform", "fleet", &["nodes", "dns"]),
            policy("elsewhere", "other", &["x"]),
        ]),
        ..Default::default()
    };
    let loaded_at = Timestamp::now();
    let problems = fleet.reload(objects.clone(), Instant::now(), loaded_at);
    assert_eq!(problems.len(), 1, "{problems:?}");
    let names = |cluster: &str| -> Vec<String> {
        let entry = fleet
            .registry()
            .cluster(&ClusterId::new("fleet", cluster))
            .cloned()
            .unwrap();
        fleet
            .config(&entry)
            .liveness_checks
            .iter()
            .map(|c| c.name.clone())
            .collect()
    };
    assert_eq!(
        names("a"),
        ["nodes", "dns"],
        "a keeps its own `nodes`; the policy's is skipped"
    );
    assert_eq!(names("b"), ["nodes", "dns"]);
    assert!(names("c").is_empty(), "dev is not selected");

    let policies = fleet.registry().health_policies();
    let platform = policies
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some("platform"))
        .unwrap();
    let status = platform.status.clone().unwrap();
    assert_eq!(status.matched_clusters, 2);
    let accepted = &status.conditions[0];
    assert_eq!(
        (
            accepted.type_.as_str(),
            accepted.status.as_str(),
            accepted.reason.as_str()
        ),
        ("Accepted", "False", "CheckNameClash")
    );
    assert!(
        accepted.message.contains("\"nodes\"") && accepted.message.contains("fleet/a"),
        "{}",
        accepted.message
    );
    assert_eq!(
        accepted.last_transition_time.0, loaded_at,
        "stamped when it was computed, not at the Unix epoch"
    );
    // A reload that changes nothing keeps the transition time.
    fleet.reload(objects, Instant::now(), Timestamp::now());
    let again = fleet.registry().health_policies();
    let again = again
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some("platform"))
        .unwrap();
    assert_eq!(
        again.status.as_ref().unwrap().conditions[0]
            .last_transition_time
            .0,
        loaded_at
    );
    let elsewhere = policies
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some("elsewhere"))
        .unwrap();
    assert_eq!(
        elsewhere.status.clone().unwrap().matched_clusters,
        0,
        "a policy only reaches its own namespace"
    );
}
