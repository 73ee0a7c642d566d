//! A MemberCluster version whose Lua does not compile is refused (the previous version
//! stays in effect, as in both modes) and says so on the MemberCluster itself:
//! `Accepted=False` with reason `ConditionDoesNotCompile`, naming the check and line, until
//! a version that compiles is taken. In Kubernetes mode this is the only place besides the
//! hub's log where a `kubectl apply` of a broken check shows.

use std::time::Instant;

use k8s_openapi::jiff::Timestamp;

use fleetpulse_common::api::condition::{ACCEPTED, Status};
use fleetpulse_common::api::{ClusterCheck, MemberCluster};
use fleetpulse_common::protocol::report::ClusterId;
use fleetpulse_hub::fleet::{Change, Fleet, Settings};
use fleetpulse_hub::testing;

fn lua(name: &str, condition: &str) -> ClusterCheck {
    ClusterCheck {
        name: name.into(),
        condition: Some(condition.into()),
        ..Default::default()
    }
}

fn apply(fleet: &Fleet, mc: MemberCluster) -> Vec<String> {
    let id = ClusterId::new("fleet", "edge-1");
    let change = Change::MemberCluster(id, Some(std::sync::Arc::new(mc)));
    fleet.apply(vec![change], Instant::now(), Timestamp::now())
}

/// `(status, reason, message)` of the cluster's `Accepted` condition, if it has one.
fn accepted(fleet: &Fleet) -> Option<(Status, String, String)> {
    let status = fleet.member_clusters()[0]
        .status
        .clone()
        .unwrap_or_default();
    let c = status
        .conditions
        .into_iter()
        .find(|c| c.type_ == ACCEPTED)?;
    Some((Status::parse(&c.status), c.reason, c.message))
}

fn liveness_names(fleet: &Fleet) -> Vec<String> {
    let mc = &fleet.member_clusters()[0];
    mc.spec
        .liveness_checks
        .iter()
        .map(|c| c.name.clone())
        .collect()
}

#[test]
fn a_refused_member_cluster_version_is_marked_until_a_version_compiles() {
    let fleet = testing::fleet_in_memory(Settings::default());
    let good = |check: &str| {
        testing::cluster("fleet/edge-1")
            .liveness(lua(check, "function evaluate() return {pass = true} end"))
            .build()
    };
    assert!(apply(&fleet, good("nodes")).is_empty());
    assert_eq!(accepted(&fleet), None, "a version taken needs no mark");

    let broken = testing::cluster("fleet/edge-1")
        .liveness(lua("gateway", "function evaluate()\n  return {\nend"))
        .build();
    let problems = apply(&fleet, broken);
    assert_eq!(problems.len(), 1, "{problems:?}");
    let (status, reason, message) = accepted(&fleet).expect("the refusal shows on the cluster");
    assert_eq!(
        (status, reason.as_str()),
        (Status::False, "ConditionDoesNotCompile")
    );
    for part in [
        "MemberCluster fleet/edge-1",
        "gateway",
        "condition:3",
        "previous version stays",
    ] {
        assert!(message.contains(part), "{part:?} in {message}");
    }
    assert_eq!(
        liveness_names(&fleet),
        ["nodes"],
        "the previous version stays in effect"
    );

    assert!(apply(&fleet, good("gateway")).is_empty());
    assert_eq!(accepted(&fleet), None, "taken again: the mark is gone");
    assert_eq!(liveness_names(&fleet), ["gateway"]);
}

#[test]
fn a_new_member_cluster_that_does_not_compile_is_refused_without_an_entry() {
    let fleet = testing::fleet_in_memory(Settings::default());
    let broken = testing::cluster("fleet/edge-1")
        .liveness(lua("gateway", "return {"))
        .build();
    let problems = apply(&fleet, broken);
    assert!(
        problems[0].contains("MemberCluster fleet/edge-1"),
        "{problems:?}"
    );
    assert!(fleet.member_clusters().is_empty());
}
