//! Inline HTTP header values reach the agents that send them and nothing else: the read
//! model the read API, `get -o yaml` and `describe` serve shows `<redacted>` in their place
//! (and drops kubectl's last-applied copy of the spec), while the agent's config keeps them
//! (without that copy).

use std::time::Instant;

use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use fleetpulse_common::api::redact::LAST_APPLIED_ANNOTATION;
use fleetpulse_common::api::{HealthPolicy, MemberCluster, REDACTED};
use fleetpulse_common::protocol::report::ClusterId;
use fleetpulse_hub::fleet::{Objects, Settings, shared};
use fleetpulse_hub::testing;

const TOKEN: &str = "Bearer s3cret-token";

fn api_check(name: &str) -> serde_json::Value {
    json!({"name": name, "http": {"url": "https://api.test/healthz", "httpHeaders": [
        {"name": "Authorization", "value": TOKEN},
        {"name": "X-Api-Key", "valueFrom": {"secretKeyRef": {"name": "probe", "key": "api-key"}}}
    ]}})
}

fn last_applied() -> String {
    json!({"spec": {"livenessChecks": [api_check("api")]}}).to_string()
}

#[test]
fn the_read_model_redacts_inline_header_values_and_the_agent_config_keeps_them() {
    let mc: MemberCluster = serde_json::from_value(json!({
        "apiVersion": "fleetpulse.io/v1alpha1", "kind": "MemberCluster",
        "metadata": {"name": "edge-1", "namespace": "fleet", "labels": {"env": "prod"},
                     "annotations": {LAST_APPLIED_ANNOTATION: last_applied()}},
        "spec": {"livenessChecks": [api_check("api")]}
    }))
    .unwrap();
    let policy: HealthPolicy = serde_json::from_value(json!({
        "apiVersion": "fleetpulse.io/v1alpha1", "kind": "HealthPolicy",
        "metadata": {"name": "platform", "namespace": "fleet",
                     "annotations": {LAST_APPLIED_ANNOTATION: last_applied()}},
        "spec": {"clusterSelector": {"matchLabels": {"env": "prod"}},
                 "readinessChecks": [api_check("platform-api")]}
    }))
    .unwrap();
    let fleet = testing::fleet_in_memory(Settings::default());
    let objects = Objects {
        member_clusters: shared(vec![mc]),
        health_policies: shared(vec![policy]),
        ..Default::default()
    };
    let problems = fleet.reload(objects, Instant::now(), Timestamp::now());
    assert!(problems.is_empty(), "{problems:?}");

    let shown = serde_json::to_string(&fleet.member_clusters()).unwrap()
        + &serde_json::to_string(&fleet.health_policies()).unwrap();
    assert!(
        !shown.contains("s3cret"),
        "a header value is served: {shown}"
    );
    assert!(!shown.contains(LAST_APPLIED_ANNOTATION), "{shown}");
    assert_eq!(shown.matches(REDACTED).count(), 2, "{shown}");
    assert!(
        shown.contains(r#""secretKeyRef":{"name":"probe","key":"api-key"}"#),
        "a reference names no secret value and is shown as written: {shown}"
    );

    let entry = (fleet.registry())
        .cluster(&ClusterId::new("fleet", "edge-1"))
        .cloned()
        .unwrap();
    let config = serde_json::to_string(&fleet.config(&entry)).unwrap();
    assert_eq!(
        config.matches(TOKEN).count(),
        2,
        "the agent gets the values of its own and the policy's check: {config}"
    );
    assert!(
        !config.contains(LAST_APPLIED_ANNOTATION),
        "nor a copy of the spec in the cluster's metadata: {config}"
    );
}
