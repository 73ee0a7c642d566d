//! The hub state by Lease shard and its take-over when a shard moves.

use super::*;

/// The hub state by Lease shard: a replica writes only the state objects of the shards
/// it owns, and a shard's next owner reads what the last one flushed of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_writes_only_its_own_shards_state_and_the_next_owner_reads_it() {
    use std::collections::HashMap;
    use std::sync::Arc;

    use fleetpulse_common::protocol::replay::Position;
    use fleetpulse_common::protocol::report::ClusterId;
    use fleetpulse_hub::ids::shard_of;
    use fleetpulse_hub::kubernetes::store::hub_state::{
        HubState, Sharded, StateSettings, read_shard,
    };
    use fleetpulse_hub::store::Write;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::jiff::Timestamp;
    use kube::api::{Api, ListParams};

    let sim = KubeSim::new();
    let ids: Vec<ClusterId> = (0..40)
        .map(|i| ClusterId::new("fleet", format!("c{i}")))
        .collect();
    let mine = shard_of(&ids[0], SHARDS);
    let settings = StateSettings {
        namespace: "default".into(),
        holder: "hub-a".into(),
        max_age: Duration::from_secs(14),
    };
    let owns = Arc::new(move |k: u32| k == mine);
    let mut state = HubState::new(sim.client(), settings).sharded(Sharded {
        shards: SHARDS,
        owns: owns.clone(),
    });
    let heard = Timestamp::from_millisecond(1_800_000_000_000).unwrap();
    for id in &ids {
        let position = Position {
            incarnation: 7,
            seq: 42,
        };
        state.apply(&Write::Positions {
            cluster: id.clone(),
            positions: HashMap::from([("kid".to_string(), position)]),
            heard: Some(heard),
        });
    }
    state.flush(false).await;

    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let names: Vec<String> = (api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter())
    .filter_map(|cm| cm.metadata.name)
    .filter(|n| n.starts_with("fleetpulse-hub-state"))
    .collect();
    assert_eq!(
        names,
        vec![format!("fleetpulse-hub-state-{SHARDS}-{mine}")],
        "only the owned shard's object is written"
    );
    let taken = read_shard(sim.client(), "default", SHARDS, mine)
        .await
        .unwrap();
    let in_mine: Vec<&ClusterId> = ids
        .iter()
        .filter(|id| shard_of(id, SHARDS) == mine)
        .collect();
    assert_eq!(taken.positions.len(), in_mine.len());
    for id in in_mine {
        assert_eq!(
            taken.positions[id]["kid"],
            Position {
                incarnation: 7,
                seq: 42
            }
        );
        assert_eq!(taken.heard[id], heard);
    }
    let other = (0..SHARDS).find(|&k| k != mine).unwrap();
    let empty = read_shard(sim.client(), "default", SHARDS, other)
        .await
        .unwrap();
    assert!(
        empty.positions.is_empty(),
        "a shard never flushed reads empty"
    );
}

/// A shard taken is acted on only after the take-over hook (reading the last owner's
/// state of it) has run, once per take.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_shard_is_acted_on_only_after_its_state_is_taken_over() {
    use std::sync::{Arc, Mutex, OnceLock};

    use fleetpulse_hub::kubernetes::shard_leases::OnTake;

    let sim = KubeSim::new();
    let view: Arc<OnceLock<Shards>> = Arc::new(OnceLock::new());
    let calls: Arc<Mutex<Vec<(u32, bool)>>> = Arc::default();
    let hook: OnTake = {
        let (view, calls) = (view.clone(), calls.clone());
        Arc::new(move |k| {
            let owned_then = view.get().is_some_and(|s| s.owns(k));
            calls.lock().unwrap().push((k, owned_then));
            Box::pin(async {})
        })
    };
    let stop = CancellationToken::new();
    let (shards, task) =
        shard_leases::start_with(sim.client(), settings("hub-a"), Some(hook), stop.clone());
    let _ = view.set(shards.clone());
    eventually(Duration::from_secs(30), || async {
        (shards.owned().len() == SHARDS as usize).then_some(())
    })
    .await
    .expect("a lone replica takes every shard");
    let mut calls = calls.lock().unwrap().clone();
    calls.sort_unstable();
    assert_eq!(
        calls,
        (0..SHARDS).map(|k| (k, false)).collect::<Vec<_>>(),
        "one take-over per shard, each before this replica acted on it"
    );
    stop.cancel();
    task.await.unwrap();
}
