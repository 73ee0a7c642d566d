//! Two running agents signing with one key leapfrog each other's sequence (each restarts
//! just above the position the hub accepted from the other) and both keep being accepted:
//! the hub marks the cluster `SharedKey=True`, counts it in `fleetpulse_hub_shared_keys`,
//! and clears it once one agent remains (or the MemberCluster is deleted). A single
//! agent's restarts are no such sign.

use std::time::Instant;

use k8s_openapi::jiff::Timestamp;

use fleetpulse_common::api::condition::Status;
use fleetpulse_common::protocol::report::ClusterId;
use fleetpulse_hub::fleet::{Fleet, Objects, Settings, shared};
use fleetpulse_hub::testing;

fn fleet() -> (Fleet, ClusterId) {
    let fleet = testing::fleet_in_memory(Settings::default());
    let objects = Objects {
        member_clusters: shared(vec![testing::cluster("fleet/edge-1").build()]),
        ..Default::default()
    };
    assert!(
        fleet
            .reload(objects, Instant::now(), Timestamp::now())
            .is_empty()
    );
    (fleet, ClusterId::new("fleet", "edge-1"))
}

/// Accepts a report at `(incarnation, seq)`.
fn accept(fleet: &Fleet, id: &ClusterId, incarnation: u64, seq: u64) {
    let entry = fleet.registry().cluster(id).cloned().unwrap();
    let report = testing::report(id)
        .incarnation(incarnation)
        .seq(seq)
        .build();
    fleet
        .accept(
            &testing::admitted(entry, report),
            Instant::now(),
            Timestamp::now(),
        )
        .unwrap();
}

/// The cluster's `SharedKey` condition as `(status, reason, message)`, if any.
fn shared_key(fleet: &Fleet) -> Option<(Status, String, String)> {
    let mcs = fleet.member_clusters();
    let status = mcs[0].status.clone().unwrap_or_default();
    (status.conditions.iter())
        .find(|c| c.type_ == "SharedKey")
        .map(|c| {
            (
                Status::parse(&c.status),
                c.reason.clone(),
                c.message.clone(),
            )
        })
}

fn gauge(fleet: &Fleet) -> String {
    let metrics = fleet.encode_metrics();
    metrics
        .lines()
        .find(|l| l.starts_with("fleetpulse_hub_shared_keys "))
        .unwrap_or_else(|| panic!("no shared_keys gauge in {metrics}"))
        .to_owned()
}

#[test]
fn two_agents_leapfrogging_on_one_key_mark_the_cluster_and_the_mark_clears_when_one_stops() {
    let (fleet, id) = fleet();
    // A at 100; B, behind, restarts just above it; then A above B.
    for (incarnation, seq) in [(100, 1), (100, 2), (101, 1), (101, 2)] {
        accept(&fleet, &id, incarnation, seq);
    }
    assert_eq!(
        shared_key(&fleet),
        None,
        "one restart just above is not enough"
    );
    accept(&fleet, &id, 102, 1);
    let (status, reason, message) = shared_key(&fleet).expect("SharedKey set");
    assert_eq!((status, reason.as_str()), (Status::True, "TwoAgentsOneKey"));
    assert!(
        message.contains("kid") && message.contains("keygen"),
        "{message}"
    );
    assert_eq!(gauge(&fleet), "fleetpulse_hub_shared_keys 1");
    // One agent remains: once the restarts leave the window the mark clears.
    for seq in 2..=70 {
        accept(&fleet, &id, 102, seq);
    }
    let (status, reason, _) = shared_key(&fleet).expect("SharedKey kept, False");
    assert_eq!((status, reason.as_str()), (Status::False, "OneAgentPerKey"));
    assert_eq!(gauge(&fleet), "fleetpulse_hub_shared_keys 0");
}

#[test]
fn an_agent_restarting_with_a_new_incarnation_is_not_a_shared_key() {
    let (fleet, id) = fleet();
    for incarnation in [1_000, 2_000, 3_000, 4_000] {
        accept(&fleet, &id, incarnation, 1);
        accept(&fleet, &id, incarnation, 2);
    }
    assert_eq!(shared_key(&fleet), None);
    assert_eq!(gauge(&fleet), "fleetpulse_hub_shared_keys 0");
}

#[test]
fn a_marked_cluster_that_is_deleted_no_longer_counts() {
    let (fleet, id) = fleet();
    for (incarnation, seq) in [(100, 1), (100, 2), (101, 1), (101, 2), (102, 1)] {
        accept(&fleet, &id, incarnation, seq);
    }
    assert_eq!(gauge(&fleet), "fleetpulse_hub_shared_keys 1");
    assert!(
        fleet
            .reload(Objects::default(), Instant::now(), Timestamp::now())
            .is_empty()
    );
    assert_eq!(gauge(&fleet), "fleetpulse_hub_shared_keys 0");
}
