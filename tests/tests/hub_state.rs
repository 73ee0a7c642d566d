//! The hub state on the API server (Kubernetes mode): accepted positions and last-heard
//! times in ConfigMaps, one per shard of clusters, written once per flush. What a new
//! leader finds there, when it trusts it, and what it costs in writes.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams, ListParams};

use fleetpulse_common::protocol::replay::Position;
use fleetpulse_common::protocol::report::ClusterId;
use fleetpulse_hub::kubernetes::store::hub_state::{
    CLUSTERS_PER_SHARD, HubState, STATE_LABEL, StateSettings, shards_for,
};
use fleetpulse_hub::store::{PositionsKept, Snapshot, Write};
use fleetpulse_kubesim::KubeSim;
use fleetpulse_tests::kube_fleet::objects::namespace;

const NAMESPACE: &str = "fleetpulse-system";

/// A management cluster with the hub's namespace.
async fn management() -> KubeSim {
    let sim = KubeSim::new();
    namespace(&sim.client(), NAMESPACE).await.unwrap();
    sim
}

fn settings(holder: &str) -> StateSettings {
    StateSettings {
        namespace: NAMESPACE.into(),
        holder: holder.into(),
        max_age: Duration::from_secs(14),
    }
}

fn id(i: usize) -> ClusterId {
    ClusterId::new("fleet", format!("c{i}"))
}

/// A flush's worth of writes: every cluster of `0..n` reported at `heard` at `seq`.
fn reported(n: usize, seq: u64, heard: Timestamp) -> Vec<Write> {
    (0..n)
        .map(|i| Write::Positions {
            cluster: id(i),
            positions: HashMap::from([(
                format!("kid-{i}"),
                Position {
                    incarnation: 7,
                    seq,
                },
            )]),
            heard: Some(heard),
        })
        .collect()
}

async fn flushed(state: &mut HubState, writes: &[Write], clean: bool) {
    for write in writes {
        state.apply(write);
    }
    state.flush(clean).await;
}

async fn loaded(sim: &KubeSim, now: Timestamp) -> Snapshot {
    let mut snapshot = Snapshot::default();
    HubState::new(sim.client(), settings("next"))
        .load(&mut snapshot, now)
        .await;
    snapshot
}

async fn objects(sim: &KubeSim) -> Vec<String> {
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), NAMESPACE);
    let list = api
        .list(&ListParams::default().labels(&format!("{STATE_LABEL}=true")))
        .await
        .unwrap();
    let mut names: Vec<String> = list.into_iter().filter_map(|c| c.metadata.name).collect();
    names.sort();
    names
}

#[tokio::test]
async fn a_new_leader_finds_every_position_and_last_heard_time_and_trusts_a_fresh_state() {
    let sim = management().await;
    let mut state = HubState::new(sim.client(), settings("hub-a"));
    let heard = Timestamp::now();
    flushed(&mut state, &reported(3, 41, heard), false).await;
    flushed(&mut state, &reported(3, 42, heard), false).await;

    let snapshot = loaded(&sim, Timestamp::now()).await;
    assert_eq!(snapshot.positions_kept, PositionsKept::All);
    assert_eq!(snapshot.positions.len(), 3);
    let expected = Position {
        incarnation: 7,
        seq: 42,
    };
    assert_eq!(snapshot.positions[&id(2)]["kid-2"], expected);
    // Kept to the millisecond.
    let ms = Timestamp::from_millisecond(heard.as_millisecond()).unwrap();
    assert_eq!(snapshot.heard[&id(0)], ms);
}

#[tokio::test]
async fn a_state_older_than_a_flush_and_a_lease_is_not_trusted_unless_a_clean_stop_wrote_it() {
    let sim = management().await;
    let mut state = HubState::new(sim.client(), settings("hub-a"));
    flushed(&mut state, &reported(2, 1, Timestamp::now()), false).await;
    let later = Timestamp::now() + SignedDuration::from_secs(15);
    let snapshot = loaded(&sim, later).await;
    assert_eq!(snapshot.positions_kept, PositionsKept::Stale);
    assert_eq!(
        snapshot.positions.len(),
        2,
        "what it holds is still restored"
    );

    // A clean stop: nothing was accepted after it, so its age does not matter.
    state.flush(true).await;
    let much_later = Timestamp::now() + SignedDuration::from_hours(24);
    assert_eq!(
        loaded(&sim, much_later).await.positions_kept,
        PositionsKept::All
    );
}

#[tokio::test]
async fn a_shard_not_written_since_because_nothing_changed_in_it_is_as_current_as_the_last_flush() {
    let sim = management().await;
    let mut state = HubState::new(sim.client(), settings("hub-a"));
    let t0 = Timestamp::now();
    let n = CLUSTERS_PER_SHARD + 1;
    for write in &reported(n, 1, t0) {
        state.apply(write);
    }
    state.flush_at(false, t0).await;
    // Later, only one cluster reports: only its shard is written again.
    let later = t0 + SignedDuration::from_secs(20);
    let before = sim.write_count("configmaps", "patch");
    state.apply(&reported(1, 2, later)[0]);
    state.flush_at(false, later).await;
    assert_eq!(sim.write_count("configmaps", "patch") - before, 1);
    // The other shard is 25 s old, past the 14 s limit, yet nothing in it changed.
    let snapshot = loaded(&sim, later + SignedDuration::from_secs(5)).await;
    assert_eq!(snapshot.positions_kept, PositionsKept::All);
    // Once no flush came for longer than the limit, the state is stale.
    let snapshot = loaded(&sim, later + SignedDuration::from_secs(15)).await;
    assert_eq!(snapshot.positions_kept, PositionsKept::Stale);
}

#[tokio::test]
async fn no_state_yet_is_not_stored_and_a_missing_shard_makes_the_state_stale() {
    let sim = management().await;
    assert_eq!(
        loaded(&sim, Timestamp::now()).await.positions_kept,
        PositionsKept::NotStored
    );
    let mut state = HubState::new(sim.client(), settings("hub-a"));
    let n = CLUSTERS_PER_SHARD + 1;
    flushed(&mut state, &reported(n, 1, Timestamp::now()), false).await;
    let names = objects(&sim).await;
    assert_eq!(
        names,
        ["fleetpulse-hub-state-2-0", "fleetpulse-hub-state-2-1"]
    );
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), NAMESPACE);
    api.delete(&names[1], &DeleteParams::default())
        .await
        .unwrap();
    let snapshot = loaded(&sim, Timestamp::now()).await;
    assert_eq!(snapshot.positions_kept, PositionsKept::Stale);
    assert!(snapshot.positions.len() < n);
}

#[tokio::test]
async fn a_growing_fleet_moves_to_more_shards_and_removes_the_objects_of_the_old_count() {
    let sim = management().await;
    let mut state = HubState::new(sim.client(), settings("hub-a"));
    flushed(&mut state, &reported(10, 1, Timestamp::now()), false).await;
    assert_eq!(objects(&sim).await, ["fleetpulse-hub-state-1-0"]);
    let n = 2 * CLUSTERS_PER_SHARD + 1;
    flushed(&mut state, &reported(n, 2, Timestamp::now()), false).await;
    let names = objects(&sim).await;
    assert_eq!(names.len(), 4, "{names:?}");
    assert!(
        names
            .iter()
            .all(|n| n.starts_with("fleetpulse-hub-state-4-"))
    );
    let snapshot = loaded(&sim, Timestamp::now()).await;
    assert_eq!(snapshot.positions_kept, PositionsKept::All);
    assert_eq!(snapshot.positions.len(), n);
}

#[tokio::test]
async fn a_flush_writes_each_changed_shard_once_and_an_unchanged_one_not_at_all() {
    let sim = management().await;
    let mut state = HubState::new(sim.client(), settings("hub-a"));
    let n = 3 * CLUSTERS_PER_SHARD;
    flushed(&mut state, &reported(n, 1, Timestamp::now()), false).await;
    let before = sim.write_count("configmaps", "patch");
    // Every cluster reported again: one write per shard, whatever the fleet's size.
    flushed(&mut state, &reported(n, 2, Timestamp::now()), false).await;
    let per_flush = sim.write_count("configmaps", "patch") - before;
    assert_eq!(per_flush, u64::from(shards_for(n)));
    assert_eq!(shards_for(n), 4);
    // One cluster reported: one shard written.
    let one = &reported(1, 3, Timestamp::now())[..];
    flushed(&mut state, one, false).await;
    assert_eq!(
        sim.write_count("configmaps", "patch") - before,
        per_flush + 1
    );
    // Nothing new: nothing written.
    flushed(&mut state, one, false).await;
    assert_eq!(
        sim.write_count("configmaps", "patch") - before,
        per_flush + 1
    );
}
