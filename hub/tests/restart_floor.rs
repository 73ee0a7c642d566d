//! The restart rule: after a start whose store may lack positions accepted before it (a
//! crash of the embedded hub; every start in Kubernetes mode, which keeps positions in
//! memory only), no incarnation from before the start is accepted, whatever position was
//! lost; an agent restarting its sequence above the start is accepted and is no sign of a
//! shared key. After a clean stop nothing is refused.

use std::collections::HashMap;
use std::time::Instant;

use k8s_openapi::jiff::Timestamp;

use fleetpulse_common::protocol::errors::RejectCode;
use fleetpulse_common::protocol::replay::Position;
use fleetpulse_common::protocol::report::ClusterId;
use fleetpulse_hub::fleet::{Fleet, Objects, Settings, shared};
use fleetpulse_hub::refusal::Refusal;
use fleetpulse_hub::store::{PositionsKept, Snapshot};
use fleetpulse_hub::testing;

/// A fleet of one cluster restored from a store that last accepted `(1_000, 5)` from its
/// key and kept `kept`, started at `start`.
fn restarted(kept: PositionsKept, start: Timestamp) -> (Fleet, ClusterId) {
    let id = ClusterId::new("fleet", "edge-1");
    let fleet = testing::fleet_in_memory(Settings::default());
    let positions = HashMap::from([(
        id.clone(),
        HashMap::from([("kid".to_owned(), at(1_000, 5))]),
    )]);
    let snapshot = Snapshot {
        positions,
        positions_kept: kept,
        ..Snapshot::default()
    };
    fleet.restore(snapshot, Instant::now(), start);
    let objects = Objects {
        member_clusters: shared(vec![testing::cluster("fleet/edge-1").build()]),
        ..Default::default()
    };
    assert!(fleet.reload(objects, Instant::now(), start).is_empty());
    (fleet, id)
}

const fn at(incarnation: u64, seq: u64) -> Position {
    Position { incarnation, seq }
}

/// The hub's answer to a report at `pos`: the accepted position, or the refusal's code and
/// `lastAccepted`.
fn send(
    fleet: &Fleet,
    id: &ClusterId,
    pos: Position,
) -> Result<Position, (RejectCode, Option<Position>)> {
    let entry = fleet.registry().cluster(id).cloned().unwrap();
    let report = testing::report(id)
        .incarnation(pos.incarnation)
        .seq(pos.seq)
        .build();
    match fleet.accept(
        &testing::admitted(entry, report),
        Instant::now(),
        Timestamp::now(),
    ) {
        Ok(answer) => Ok(at(answer.incarnation, answer.accepted_seq)),
        Err(Refusal(body)) => Err((body.code, body.last_accepted)),
    }
}

fn shared_key_marked(fleet: &Fleet) -> bool {
    let status = fleet.member_clusters()[0]
        .status
        .clone()
        .unwrap_or_default();
    status.conditions.iter().any(|c| c.type_ == "SharedKey")
}

#[test]
fn after_a_start_that_may_have_lost_positions_earlier_incarnations_are_refused() {
    let start = Timestamp::from_millisecond(2_000_000).unwrap();
    for kept in [PositionsKept::UntilLastFlush, PositionsKept::NotStored] {
        let (fleet, id) = restarted(kept, start);
        let floor = Some(at(2_000_000, 0));
        // Above the stored position, but perhaps accepted after the last flush: refused.
        assert_eq!(
            send(&fleet, &id, at(1_000, 6)),
            Err((RejectCode::StaleSequence, floor)),
            "{kept:?}"
        );
        // Any incarnation up to the start, too, even one that never reached the store.
        assert_eq!(
            send(&fleet, &id, at(2_000_000, 1)),
            Err((RejectCode::StaleSequence, floor))
        );
        // The agent restarts one above what it was given and goes on.
        assert_eq!(send(&fleet, &id, at(2_000_001, 1)), Ok(at(2_000_001, 1)));
        assert_eq!(send(&fleet, &id, at(2_000_001, 2)), Ok(at(2_000_001, 2)));
        // Later, the agent restarts for a reason of its own, just above that position
        // (its clock is behind): one such restart, after the floor's, is no shared key.
        assert_eq!(send(&fleet, &id, at(2_000_002, 1)), Ok(at(2_000_002, 1)));
        assert!(!shared_key_marked(&fleet), "{kept:?}: a single agent");
        // The usual rules still hold above the floor.
        assert_eq!(
            send(&fleet, &id, at(2_000_002, 1)),
            Err((RejectCode::Replayed, Some(at(2_000_002, 1))))
        );
    }
}

#[test]
fn after_a_clean_stop_the_stored_positions_alone_decide() {
    let start = Timestamp::from_millisecond(2_000_000).unwrap();
    let (fleet, id) = restarted(PositionsKept::All, start);
    assert_eq!(
        send(&fleet, &id, at(1_000, 5)),
        Err((RejectCode::Replayed, Some(at(1_000, 5))))
    );
    assert_eq!(send(&fleet, &id, at(1_000, 6)), Ok(at(1_000, 6)));
}
