//! Hub replicas sharing the fleet through shard Leases, on kubesim.
//!
//! The Lease loop (in-process replicas, each running only the loop): three replicas
//! balance the shards and never own one shard at once; one lost replica's shards move
//! to the others within the lease duration; a replica added back gets its share; and a
//! replica whose renewals the API server refuses stops acting on its shards before their
//! Leases expire for anyone else.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use fleetpulse_hub::kubernetes::shard_leases::{self, Shards};
use fleetpulse_hub::shards::ShardSettings;
use fleetpulse_kubesim::{KubeSim, eventually};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const SHARDS: u32 = 12;
const LEASE: Duration = Duration::from_secs(3);

fn settings(identity: &str) -> ShardSettings {
    ShardSettings {
        namespace: "default".into(),
        identity: identity.into(),
        shards: SHARDS,
        duration: LEASE,
        url: Some(format!("https://{identity}.hub.example:8443")),
    }
}

struct Replica {
    shards: Shards,
    task: JoinHandle<()>,
    stop: CancellationToken,
}

fn replica(sim: &KubeSim, identity: &str) -> Replica {
    let stop = CancellationToken::new();
    let (shards, task) = shard_leases::start(sim.client(), settings(identity), stop.clone());
    Replica { shards, task, stop }
}

/// Each replica's owned shards, and whether any shard is owned by two at once.
fn owned(replicas: &BTreeMap<&str, Replica>) -> (BTreeMap<String, Vec<u32>>, bool) {
    let owned: BTreeMap<String, Vec<u32>> = (replicas.iter())
        .map(|(name, r)| (name.to_string(), r.shards.owned()))
        .collect();
    let total: usize = owned.values().map(Vec::len).sum();
    let mut all: Vec<u32> = owned.values().flatten().copied().collect();
    all.sort_unstable();
    all.dedup();
    (owned.clone(), all.len() != total)
}

/// Waits until every shard is owned and each replica owns `SHARDS / n` or one more,
/// checking every 50 ms that no shard is owned twice; returns how long it took.
async fn balanced(replicas: &BTreeMap<&str, Replica>, within: Duration) -> Duration {
    let started = Instant::now();
    let n = replicas.len() as u32;
    loop {
        let (owned, doubled) = owned(replicas);
        assert!(!doubled, "a shard owned by two replicas at once: {owned:?}");
        let counts: Vec<u32> = owned.values().map(|v| v.len() as u32).collect();
        if counts.iter().sum::<u32>() == SHARDS
            && counts
                .iter()
                .all(|c| (SHARDS / n..=SHARDS.div_ceil(n)).contains(c))
        {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < within,
            "not balanced within {within:?}: {owned:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_balance_shard_leases_move_a_lost_replicas_shards_and_share_with_a_new_one() {
    let sim = KubeSim::new();
    let mut replicas: BTreeMap<&str, Replica> = BTreeMap::new();
    for name in ["hub-a", "hub-b", "hub-c"] {
        replicas.insert(name, replica(&sim, name));
    }
    let took = balanced(&replicas, Duration::from_secs(60)).await;
    println!(
        "shard-leases: balanced three replicas in {:.1}s",
        took.as_secs_f64()
    );
    // The steady state's cost on the API server: every shard renewed each round.
    let steady = owned(&replicas).0;
    let (writes, window) = (sim.write_count("leases", "update"), Instant::now());
    tokio::time::sleep(Duration::from_secs(6)).await;
    let rate =
        (sim.write_count("leases", "update") - writes) as f64 / window.elapsed().as_secs_f64();
    println!(
        "shard-leases: steady state {rate:.1} Lease writes/s for {SHARDS} shards at a {}s lease ({:.2} per shard per second)",
        LEASE.as_secs(),
        rate / f64::from(SHARDS)
    );
    let per_round = f64::from(SHARDS) / settings("hub-a").renew_every().as_secs_f64();
    assert!(
        rate <= per_round * 1.2,
        "one renewal per shard per round, no churn: {rate:.1}/s"
    );
    assert_eq!(owned(&replicas).0, steady, "nothing moved at balance");
    let owner = replicas["hub-a"]
        .shards
        .owner(replicas["hub-b"].shards.owned()[0]);
    assert_eq!(
        owner.map(|o| (o.identity, o.url)),
        Some((
            "hub-b".into(),
            Some("https://hub-b.hub.example:8443".into())
        )),
        "a replica knows another's shard by its Lease, with the URL agents reach it at"
    );

    // hub-c is lost (its loop stops without releasing anything, as a killed Pod's).
    let lost = replicas.remove("hub-c").unwrap();
    let had = lost.shards.owned();
    lost.task.abort();
    let moved = balanced(&replicas, Duration::from_secs(30)).await;
    println!(
        "shard-leases: {} shards of a lost replica moved in {:.1}s",
        had.len(),
        moved.as_secs_f64()
    );
    assert!(
        moved < LEASE * 3,
        "moved within the lease duration and a couple of rounds: {moved:?}"
    );

    // A replica is added back: it gets its share, and only its share moves.
    let before: BTreeMap<String, Vec<u32>> = owned(&replicas).0;
    replicas.insert("hub-d", replica(&sim, "hub-d"));
    let joined = balanced(&replicas, Duration::from_secs(60)).await;
    let after = owned(&replicas).0;
    let kept: usize = (before.iter())
        .map(|(name, shards)| shards.iter().filter(|k| after[name].contains(k)).count())
        .sum();
    println!(
        "shard-leases: a new replica got {} shards in {:.1}s",
        after["hub-d"].len(),
        joined.as_secs_f64()
    );
    assert_eq!(
        kept + after["hub-d"].len(),
        SHARDS as usize,
        "only the newcomer's share moved: {before:?} -> {after:?}"
    );

    // A graceful stop releases at once: the others take the shards without waiting.
    let stopping = replicas.remove("hub-d").unwrap();
    stopping.stop.cancel();
    stopping.task.await.unwrap();
    let released = balanced(&replicas, Duration::from_secs(30)).await;
    assert!(
        released < LEASE,
        "released shards are taken before a lease could expire: {released:?}"
    );
    for r in replicas.values() {
        r.stop.cancel();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_cannot_renew_stops_acting_on_its_shards_before_their_leases_expire() {
    let sim = KubeSim::new();
    let a = replica(&sim, "hub-a");
    eventually(Duration::from_secs(30), || async {
        (a.shards.owned().len() == SHARDS as usize).then_some(())
    })
    .await
    .expect("a lone replica takes every shard");

    sim.refuse("leases", "update", true);
    let refused = Instant::now();
    eventually(Duration::from_secs(30), || async {
        a.shards.owned().is_empty().then_some(())
    })
    .await
    .expect("it stops acting on every shard");
    let stopped = refused.elapsed();
    println!(
        "shard-leases: stopped acting {:.1}s after renewals began to fail",
        stopped.as_secs_f64()
    );
    // Its last landed renewal was at most a round before the refusal, and another
    // replica may take a shard only a whole lease after it.
    assert!(
        stopped < LEASE - settings("hub-a").renew_every() / 2,
        "stopped acting {stopped:?} after the refusal, before the leases expire ({LEASE:?})"
    );
    sim.refuse("leases", "update", false);
    eventually(Duration::from_secs(30), || async {
        (a.shards.owned().len() == SHARDS as usize).then_some(())
    })
    .await
    .expect("it acts again once its renewals land");
    a.stop.cancel();
}

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

/// In-process hubs sharing the fleet on kubesim, behind a Service stand-in that sends
/// every connection to the first ready replica: agents (driven by hand, following the
/// redirects the replicas answer) reach each cluster's owner, every cluster turns
/// Reachable, a replica stopped gracefully hands its shards over with no cluster judged
/// unreachable, and a replica added back gets its share.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_process_replicas_share_the_fleet_and_a_replica_leaving_causes_no_false_verdict() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    use fleetpulse_common::api::condition::{REACHABLE, Status};
    use fleetpulse_common::api::{ClusterSet, MemberCluster};
    use fleetpulse_common::protocol::report::ClusterId;
    use fleetpulse_hub::server::Hub;
    use fleetpulse_tests::fleet::{SimCluster, condition_of};
    use fleetpulse_tests::hand_agent::HandAgent;
    use fleetpulse_tests::management::{hub_options, management_cluster};
    use fleetpulse_tests::service::{Backend, ReadyProxy, Routing};
    use k8s_openapi::api::coordination::v1::Lease;
    use kube::api::{Api, ListParams};

    const NAMES: [&str; 12] = [
        "edge-1", "edge-2", "edge-3", "edge-4", "edge-5", "edge-6", "edge-7", "edge-8", "edge-9",
        "edge-10", "edge-11", "edge-12",
    ];
    let sim = KubeSim::new();
    let client = sim.client();
    let keys = management_cluster(&client, &NAMES).await;
    let start = |identity: &'static str| {
        let mut options = hub_options(&client);
        options.state_namespace = "fleet".into();
        options.shards = Some(ShardSettings {
            namespace: "fleet".into(),
            url: None,
            ..settings(identity)
        });
        Hub::start(options)
    };
    let mut hubs = vec![
        start("hub-a").await.unwrap(),
        start("hub-b").await.unwrap(),
        start("hub-c").await.unwrap(),
    ];
    let backend = |hub: &Hub| Backend {
        addr: hub.addr,
        url: format!("http://{}", hub.addr).parse().unwrap(),
        pod: None,
    };
    // Plain HTTP here; the client still needs a TLS backend to be built.
    let http = || {
        reqwest::Client::builder()
            .tls_backend_preconfigured(fleetpulse_agent::tls::client_config(None).unwrap())
            .timeout(Duration::from_secs(2))
            .build()
            .unwrap()
    };
    let service = ReadyProxy::start(hubs.iter().map(backend).collect(), Routing::Ready(http()))
        .await
        .unwrap();
    let leases: Api<Lease> = Api::namespaced(client.clone(), "fleet");
    let holders = || async {
        let list = leases
            .list(&ListParams::default().labels("fleetpulse.io/shard-lease=true"))
            .await
            .unwrap();
        (list.items.into_iter())
            .filter_map(|l| l.spec?.holder_identity)
            .fold(BTreeMap::<String, usize>::new(), |mut m, h| {
                *m.entry(h).or_default() += 1;
                m
            })
    };
    eventually(Duration::from_secs(60), || async {
        let h = holders().await;
        (h.len() == 3 && h.values().all(|&n| n == 4)).then_some(())
    })
    .await
    .expect("three replicas balance twelve shards, four each");

    // Agents: a heartbeat a second through the Service, following redirects to the owner.
    let stop = Arc::new(AtomicBool::new(false));
    let (accepted, retried) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let url = format!("http://{}", service.addr);
    for (name, key) in keys {
        let cluster = SimCluster {
            id: ClusterId::new("fleet", name),
            key,
        };
        // reqwest's default policy follows a 307 with the same method and body.
        let mut agent = HandAgent::new(http(), &url, &cluster);
        let (stop, accepted, retried) = (stop.clone(), accepted.clone(), retried.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let sent = agent.next_heartbeat(false).send().await;
                let ok = match sent {
                    Ok(response) if response.status() == 200 => {
                        let body: serde_json::Value = response.json().await.unwrap_or_default();
                        agent.apply_generation(
                            body["configGeneration"].as_u64().unwrap_or_default(),
                        );
                        true
                    }
                    Ok(_) | Err(_) => false,
                };
                let (counter, wait) = if ok {
                    (&accepted, 1000)
                } else {
                    (&retried, 200)
                };
                counter.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(wait)).await;
            }
        });
    }
    let clusters: Api<MemberCluster> = Api::namespaced(client.clone(), "fleet");
    let reachable = || async {
        let list = clusters.list(&ListParams::default()).await.unwrap().items;
        (NAMES.iter())
            .map(|n| condition_of(&list, &ClusterId::new("fleet", *n), REACHABLE))
            .collect::<Vec<Status>>()
    };
    eventually(Duration::from_secs(60), || async {
        reachable()
            .await
            .iter()
            .all(|s| *s == Status::True)
            .then_some(())
    })
    .await
    .expect("every cluster is judged Reachable by its shard's owner");

    // The set (every cluster eligible, one selected) settles on one cluster.
    let sets: Api<ClusterSet> = Api::all(client.clone());
    let selected = || async {
        let set = sets.get("primary").await.unwrap();
        let refs = set
            .status
            .map(|s| s.selected_cluster_refs)
            .unwrap_or_default();
        refs.into_iter().map(|r| r.name).collect::<Vec<String>>()
    };
    let chosen = eventually(Duration::from_secs(30), || async {
        let now = selected().await;
        (!now.is_empty()).then_some(now)
    })
    .await;
    let Some(chosen) = chosen else {
        let set = sets.get("primary").await.unwrap();
        panic!("the set selects no cluster: {:?}", set.status);
    };

    // Watch for false verdicts and set changes while replica c leaves and d joins.
    let watching = Arc::new(AtomicBool::new(true));
    let false_verdicts = Arc::new(AtomicU64::new(0));
    let set_changes = Arc::new(AtomicU64::new(0));
    let watcher = {
        let (watching, false_verdicts, clusters) =
            (watching.clone(), false_verdicts.clone(), clusters.clone());
        let (set_changes, sets, chosen) = (set_changes.clone(), sets.clone(), chosen.clone());
        tokio::spawn(async move {
            while watching.load(Ordering::Relaxed) {
                let set = sets.get("primary").await.unwrap();
                let now: Vec<String> = (set.status.map(|s| s.selected_cluster_refs))
                    .unwrap_or_default()
                    .into_iter()
                    .map(|r| r.name)
                    .collect();
                if now != chosen {
                    set_changes.fetch_add(1, Ordering::Relaxed);
                }
                let list = clusters.list(&ListParams::default()).await.unwrap().items;
                let down = (NAMES.iter())
                    .filter(|n| {
                        condition_of(&list, &ClusterId::new("fleet", **n), REACHABLE)
                            != Status::True
                    })
                    .count() as u64;
                false_verdicts.fetch_max(down, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let left = Instant::now();
    hubs.pop().unwrap().shutdown().await;
    eventually(Duration::from_secs(30), || async {
        let h = holders().await;
        (h.len() == 2 && h.values().all(|&n| n == 6)).then_some(())
    })
    .await
    .expect("the two left take the leaving replica's shards");
    let moved_in = left.elapsed();
    hubs.push(start("hub-d").await.unwrap());
    eventually(Duration::from_secs(60), || async {
        let h = holders().await;
        (h.len() == 3 && h.get("hub-d") == Some(&4)).then_some(())
    })
    .await
    .expect("a replica added back gets its share");
    // Two grace periods more: a cluster misjudged by a new owner would show by now.
    tokio::time::sleep(Duration::from_secs(6)).await;
    watching.store(false, Ordering::Relaxed);
    watcher.await.unwrap();
    let false_verdicts = false_verdicts.load(Ordering::Relaxed);
    let set_changes = set_changes.load(Ordering::Relaxed);
    println!(
        "shards in-process: replicas=3 shards={SHARDS} clusters={} moved_in_s={:.1} false_verdicts={false_verdicts} set_changes={set_changes} accepted={} retried={}",
        NAMES.len(),
        moved_in.as_secs_f64(),
        accepted.load(Ordering::Relaxed),
        retried.load(Ordering::Relaxed)
    );
    assert_eq!(
        false_verdicts, 0,
        "no cluster judged unreachable while shards moved"
    );
    assert_eq!(
        set_changes, 0,
        "the set's selection did not move with the shards: {chosen:?}"
    );
    stop.store(true, Ordering::Relaxed);
    for hub in hubs {
        hub.shutdown().await;
    }
}
