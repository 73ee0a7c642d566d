//! Scenarios 3 to 6: a liveness check starts failing in the selected member while its agent
//! keeps reporting (nodes NotReady, a KeptnMetric value drop, failing pods), so the member
//! turns unhealthy but stays reachable and the ClusterSet fails over; then recovery, which
//! is debounced and does not move the selection back.

use std::time::Instant;

use serde_json::json;

use fleetpulse_common::api::condition::{HEALTHY, REACHABLE, Status};
use fleetpulse_kubesim::{Outcome, PodMatcher};
use fleetpulse_tests::kube_fleet::objects;
use fleetpulse_tests::kube_fleet::{FleetSpec, KubeFleet};

use super::{
    DEADLINE, assert_settled_after_failover, healthy_fleet, report, until_healthy, wait_failover,
};

/// A fleet whose HealthPolicy holds `check` as its only liveness check.
fn with_check(check: serde_json::Value) -> FleetSpec {
    FleetSpec {
        liveness_checks: vec![check],
        ..FleetSpec::default()
    }
}

/// Hub writes a check-driven failover may take: the victim's status, the set's status, two
/// label moves, and an Event for each transition.
const FAILOVER_WRITES: u64 = 10;

fn ready_nodes_check() -> serde_json::Value {
    json!({"name": "ready-nodes", "readyNodes": {"minPercent": 50}})
}

/// Sets every node of member `i` Ready or NotReady.
fn set_nodes_ready(fleet: &KubeFleet, i: usize, ready: bool) {
    for node in ["node-1", "node-2", "node-3"] {
        assert!(
            fleet.members[i].cluster.sim.set_node_ready(node, ready),
            "{node}"
        );
    }
}

/// After a fault at `fault` in member `first`: check `check` fails with a message containing
/// `says`, the member turns unhealthy while still reachable, the set fails over, and the
/// hub goes quiet. Returns the new member and the fault-to-failover time.
async fn fails_over_on_check(
    fleet: &KubeFleet,
    first: usize,
    fault: Instant,
    check: &str,
    says: &str,
) -> anyhow::Result<(usize, u128)> {
    fleet
        .wait_condition(first, HEALTHY, Status::False, DEADLINE)
        .await?;
    let name = &fleet.members[first].name;
    let status = fleet
        .member_cluster(name)
        .await
        .and_then(|mc| mc.status)
        .unwrap_or_default();
    let result = status.checks.iter().find(|c| c.name == check);
    assert!(
        result.is_some_and(|c| !c.passing && c.message.contains(says)),
        "{check} failing with {says:?}: {:?}",
        status.checks
    );
    let (new, ms) = wait_failover(fleet, first, fault).await?;
    assert_settled_after_failover(fleet, first, new).await?;
    assert_eq!(
        fleet.condition(name, REACHABLE).await,
        Status::True,
        "heartbeats continued"
    );
    Ok((new, ms))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_3_nodes_not_ready_fail_a_liveness_check_and_the_set_fails_over()
-> anyhow::Result<()> {
    let (fleet, first) = healthy_fleet(with_check(ready_nodes_check())).await?;
    let before = fleet.hub_write_total();
    set_nodes_ready(&fleet, first, false);
    let fault = Instant::now();
    let (_, ms) =
        fails_over_on_check(&fleet, first, fault, "ready-nodes", "0 of 3 nodes Ready").await?;
    report(
        3,
        &fleet,
        before,
        FAILOVER_WRITES,
        &format!("fault_to_failover_ms={ms}"),
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_4_a_dropping_keptn_metric_fails_a_lua_check_and_the_set_fails_over()
-> anyhow::Result<()> {
    let check = json!({
        "name": "availability",
        "resourceSelectors": [{"group": "metrics.keptn.sh", "version": "v1", "kind": "KeptnMetric",
            "namespace": objects::KEPTN_NAMESPACE, "name": "{{ .Cluster.metadata.name }}-availability",
            "identifier": "metric"}],
        "condition": "function evaluate()\n  local v = tonumber(ctx.metric and ctx.metric.status.value)\n  \
            return {pass = v ~= nil and v >= 0.9, message = \"availability \" .. tostring(v)}\nend\n"
    });
    let mut fleet = KubeFleet::prepare(with_check(check)).await?;
    for m in &fleet.members {
        let client = m.cluster.client();
        objects::install_keptn_metric_crd(&client).await?;
        objects::set_keptn_metric(&client, &format!("{}-availability", m.name), "0.99").await?;
    }
    fleet.start().await?;
    let (fleet, first) = until_healthy(fleet).await?;
    let before = fleet.hub_write_total();
    let victim = &fleet.members[first];
    let metric = format!("{}-availability", victim.name);
    objects::set_keptn_metric(&victim.cluster.client(), &metric, "0.42").await?;
    let fault = Instant::now();
    let (_, ms) =
        fails_over_on_check(&fleet, first, fault, "availability", "availability 0.42").await?;
    report(
        4,
        &fleet,
        before,
        FAILOVER_WRITES,
        &format!("fault_to_failover_ms={ms}"),
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_5_failing_pod_checks_fail_the_cluster_over_after_the_thresholds()
-> anyhow::Result<()> {
    let check = json!({"name": "probe", "pod": {
        "template": {"spec": {"containers": [{"name": "probe", "image": "busybox", "command": ["true"]}]}},
        "intervalSeconds": 1, "runTimeoutSeconds": 20, "successRateSeconds": 60,
        "successRateThresholdPercent": 50, "consecutiveFailureThreshold": 2}});
    let (fleet, first) = healthy_fleet(with_check(check)).await?;
    let before = fleet.hub_write_total();
    fleet.members[first].cluster.sim.set_pod_outcome(
        PodMatcher::name_prefix("fleetpulse-probe-"),
        Outcome::Fail {
            exit_code: 1,
            log: "probe: connection refused\n".into(),
        },
    );
    let fault = Instant::now();
    let (_, ms) = fails_over_on_check(&fleet, first, fault, "probe", "connection refused").await?;
    let name = &fleet.members[first].name;
    let status = fleet
        .member_cluster(name)
        .await
        .and_then(|mc| mc.status)
        .unwrap_or_default();
    let probe = status.checks.iter().find(|c| c.name == "probe").cloned();
    let failures = probe.map_or(0, |c| c.consecutive_failures);
    assert!(
        failures >= 2,
        "failing only after 2 consecutive failed runs: {:?}",
        status.checks
    );
    report(
        5,
        &fleet,
        before,
        FAILOVER_WRITES,
        &format!("fault_to_failover_ms={ms}"),
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_6_a_recovered_cluster_turns_healthy_after_the_debounce_and_no_failback()
-> anyhow::Result<()> {
    let mut spec = with_check(ready_nodes_check());
    spec.hub_args
        .extend(["--healthy-after-reports".into(), "3".into()]);
    let (fleet, first) = healthy_fleet(spec).await?;
    set_nodes_ready(&fleet, first, false);
    let (new, _) =
        fails_over_on_check(&fleet, first, Instant::now(), "ready-nodes", "0 of 3").await?;
    let (sets, labels) = (
        fleet.hub_write_count("clustersets/status", "patch"),
        fleet.hub_write_count("memberclusters", "patch"),
    );
    let before = fleet.hub_write_total();
    set_nodes_ready(&fleet, first, true);
    let recovered = fleet
        .wait_condition(first, HEALTHY, Status::True, DEADLINE)
        .await?;
    // Three passing reports one interval apart: about two intervals at least.
    assert!(
        recovered.as_millis() >= 1000,
        "Healthy only after the debounce: {recovered:?}"
    );
    fleet.assert_no_writes_for(9, DEADLINE).await?;
    let new_name = fleet.members[new].name.clone();
    assert_eq!(
        fleet.selected().await,
        [new_name],
        "the replacement stays (failback is off)"
    );
    assert_eq!(
        fleet.hub_write_count("clustersets/status", "patch"),
        sets,
        "no set write"
    );
    assert_eq!(
        fleet.hub_write_count("memberclusters", "patch"),
        labels,
        "no label move"
    );
    // One status patch for Healthy=True and its Event.
    report(
        6,
        &fleet,
        before,
        4,
        &format!("recovery_ms={}", recovered.as_millis()),
    );
    Ok(())
}
