//! The detector when hub replicas share the fleet: it judges only the clusters of the
//! shards this replica owns, and a cluster of a shard just taken gets a whole grace period
//! to report to its new owner, so a shard moving causes no false verdict.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use fleetpulse_common::api::condition::REACHABLE;
use fleetpulse_common::protocol::report::ClusterId;
use fleetpulse_hub::fleet::{Fleet, Objects, Ownership, Settings, shared};
use fleetpulse_hub::testing;

/// Owns every cluster while `term` is above zero, in that term.
struct Owned(AtomicU64);

impl Ownership for Owned {
    fn term(&self, _: &ClusterId) -> Option<u64> {
        Some(self.0.load(Ordering::Relaxed)).filter(|&t| t > 0)
    }
}

fn reachable(fleet: &Fleet) -> Option<String> {
    let status = fleet.member_clusters()[0]
        .status
        .clone()
        .unwrap_or_default();
    (status.conditions.iter())
        .find(|c| c.type_ == REACHABLE)
        .map(|c| c.status.clone())
}

#[test]
fn a_shard_not_owned_is_not_judged_and_a_shard_taken_gets_a_fresh_grace_period() {
    let id = ClusterId::new("fleet", "edge-1");
    let fleet = testing::fleet_in_memory(Settings::default());
    let owned = Arc::new(Owned(AtomicU64::new(1)));
    fleet.use_ownership(owned.clone());
    let (t0, wall) = (Instant::now(), Timestamp::now());
    let at = |secs: u64| {
        (
            t0 + Duration::from_secs(secs),
            wall + SignedDuration::from_secs(secs as i64),
        )
    };
    let objects = Objects {
        member_clusters: shared(vec![testing::cluster("fleet/edge-1").grace(10).build()]),
        ..Default::default()
    };
    assert!(fleet.reload(objects, t0, wall).is_empty());
    let entry = fleet.registry().cluster(&id).cloned().unwrap();
    let report = testing::report(&id).at(wall).build();
    fleet
        .accept(&testing::admitted(entry, report), t0, wall)
        .unwrap();
    fleet.tick(t0, wall);
    assert_eq!(reachable(&fleet).as_deref(), Some("True"));

    // Another replica owns the shard: silence here is not this replica's to judge.
    owned.0.store(0, Ordering::Relaxed);
    let (now, w) = at(60);
    fleet.tick(now, w);
    assert_eq!(
        reachable(&fleet).as_deref(),
        Some("True"),
        "not judged while not owned"
    );

    // Taken back (a new term): a whole grace period before it is judged.
    owned.0.store(2, Ordering::Relaxed);
    for secs in [61, 65, 70] {
        let (now, w) = at(secs);
        fleet.tick(now, w);
        assert_eq!(
            reachable(&fleet).as_deref(),
            Some("True"),
            "{secs}s: within the fresh grace"
        );
    }
    let (now, w) = at(72);
    fleet.tick(now, w);
    assert_eq!(
        reachable(&fleet).as_deref(),
        Some("False"),
        "a cluster silent for a whole grace period under its new owner is judged"
    );
}

#[test]
fn a_shard_taken_over_refuses_replays_of_what_its_last_owner_accepted() {
    use std::collections::HashMap;

    use fleetpulse_common::protocol::replay::Position;

    let id = ClusterId::new("fleet", "edge-1");
    let fleet = testing::fleet_in_memory(Settings::default());
    let (now, wall) = (Instant::now(), Timestamp::now());
    let objects = Objects {
        member_clusters: shared(vec![testing::cluster("fleet/edge-1").build()]),
        ..Default::default()
    };
    assert!(fleet.reload(objects, now, wall).is_empty());
    let send = |seq: u64| {
        let entry = fleet.registry().cluster(&id).cloned().unwrap();
        let report = testing::report(&id)
            .incarnation(1_000)
            .seq(seq)
            .at(wall)
            .build();
        fleet
            .accept(&testing::admitted(entry, report), now, wall)
            .map(|a| a.accepted_seq)
    };
    assert_eq!(
        send(5).unwrap(),
        5,
        "this replica accepted up to 5 when it last owned it"
    );
    // `testing::admitted` signs with key id `kid`.
    let kid = "kid".to_string();

    // Meanwhile the other replica accepted up to 9; this one takes the shard over.
    let theirs = HashMap::from([(
        id.clone(),
        HashMap::from([(
            kid.clone(),
            Position {
                incarnation: 1_000,
                seq: 9,
            },
        )]),
    )]);
    fleet.take_over(theirs, HashMap::from([(id.clone(), wall)]), now, wall);
    assert!(
        send(7).is_err(),
        "a replay of a report the last owner accepted is refused"
    );
    assert_eq!(send(10).unwrap(), 10);

    // What is behind this replica's own knowledge does not lower it.
    let behind = HashMap::from([(
        id.clone(),
        HashMap::from([(
            kid,
            Position {
                incarnation: 1_000,
                seq: 3,
            },
        )]),
    )]);
    fleet.take_over(behind, HashMap::new(), now, wall);
    assert!(send(10).is_err(), "still at 10");
}

/// Owns every cluster; says whether another replica's brake is frozen, and keeps what
/// this replica published of its own.
#[derive(Default)]
struct Braking {
    elsewhere: std::sync::atomic::AtomicBool,
    published: std::sync::atomic::AtomicBool,
}

impl Ownership for Braking {
    fn term(&self, _: &ClusterId) -> Option<u64> {
        Some(1)
    }

    fn publish_brake(&self, frozen: bool) {
        self.published.store(frozen, Ordering::Relaxed);
    }

    fn brake_elsewhere(&self) -> bool {
        self.elsewhere.load(Ordering::Relaxed)
    }
}

#[test]
fn another_replicas_brake_freezes_the_sets_here_and_this_replicas_brake_is_published() {
    use fleetpulse_common::api::ClusterSet;

    let fleet = testing::fleet_in_memory(Settings::default());
    let braking = Arc::new(Braking::default());
    fleet.use_ownership(braking.clone());
    let names = ["edge-1", "edge-2", "edge-3"];
    let clusters: Vec<_> = (names.iter())
        .map(|n| (testing::cluster(&format!("fleet/{n}")).label("env", "prod")).grace(10))
        .map(|c| c.build())
        .collect();
    let set: ClusterSet = serde_json::from_value(serde_json::json!({
        "apiVersion": "fleetpulse.io/v1alpha1", "kind": "ClusterSet",
        "metadata": {"name": "primary"},
        "spec": {"clusterSelector": {"matchLabels": {"env": "prod"}}, "maxReplicas": 1,
                 "failover": {"tolerationSeconds": 0}}
    }))
    .unwrap();
    let objects = Objects {
        member_clusters: shared(clusters),
        cluster_sets: shared(vec![set]),
        ..Default::default()
    };
    let (t0, wall) = (Instant::now(), Timestamp::now());
    fleet.reload(objects, t0, wall);
    let mut seq = 0;
    // Every second: a heartbeat of each cluster in `reporting`, then a tick.
    let mut run = |from: u64, to: u64, reporting: &[&str]| {
        for s in from..=to {
            let (now, w) = (
                t0 + Duration::from_secs(s),
                wall + SignedDuration::from_secs(s as i64),
            );
            seq += 1;
            for name in reporting {
                let id = ClusterId::new("fleet", *name);
                let entry = fleet.registry().cluster(&id).cloned().unwrap();
                let generation = fleet.config(&entry).generation;
                let report = testing::report(&id)
                    .seq(seq)
                    .generation(generation)
                    .at(w)
                    .build();
                fleet
                    .accept(&testing::admitted(entry, report), now, w)
                    .unwrap();
            }
            fleet.tick(now, w);
        }
    };
    let selected = |fleet: &Fleet| {
        let status = fleet.cluster_sets()[0].status.clone().unwrap_or_default();
        (status.selected_cluster_refs.iter())
            .map(|r| r.name.clone())
            .collect::<Vec<_>>()
    };
    run(0, 3, &names);
    let first = selected(&fleet);
    assert_eq!(first.len(), 1, "one cluster selected: {first:?}");
    assert!(
        !braking.published.load(Ordering::Relaxed),
        "no brake while all report"
    );

    // Another replica's brake is frozen; the selected cluster falls silent and is judged
    // unreachable here (one of three is no partition to this replica's own brake).
    braking.elsewhere.store(true, Ordering::Relaxed);
    let others: Vec<&str> = names.into_iter().filter(|n| *n != first[0]).collect();
    run(4, 30, &others);
    assert_eq!(
        selected(&fleet),
        first,
        "frozen by the other replica's brake"
    );
    assert!(fleet.reassignment_frozen());
    assert!(
        !braking.published.load(Ordering::Relaxed),
        "this replica's brake is released"
    );

    // The other replica's brake releases: the sets follow health again.
    braking.elsewhere.store(false, Ordering::Relaxed);
    run(31, 32, &others);
    let after = selected(&fleet);
    assert!(
        after.len() == 1 && after != first,
        "failed over once nothing freezes it: {first:?} -> {after:?}"
    );

    // Every cluster falls silent at once: this replica's brake engages and says so.
    run(33, 45, &[]);
    assert!(
        braking.published.load(Ordering::Relaxed),
        "this replica publishes its frozen brake"
    );
}
