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
