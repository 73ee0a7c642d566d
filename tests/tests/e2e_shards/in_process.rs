//! Hubs sharing the fleet in-process: agents, verdicts and a set while shards move.

use super::*;

/// In-process hubs sharing the fleet on kubesim, behind a Service stand-in that sends
/// every connection to the first ready replica: agents (driven by hand, following the
/// redirects the replicas answer) reach each cluster's owner, every cluster turns
/// Reachable, a replica stopped gracefully hands its shards over with no cluster judged
/// unreachable, and a replica added back gets its share.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "sharding is not finished: this failed 2 of 9 runs (the set's selection moved \
            when a replica left, on a 2 s hand-over) before the last fix, and passed 5 of 5 \
            since; run it with --ignored until the race is ruled out"]
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
    // Per shard, its holder as last seen and since when it has had none; the moves seen
    // and the longest time a shard had no holder, on the Leases.
    let watcher = {
        let (watching, false_verdicts, clusters) =
            (watching.clone(), false_verdicts.clone(), clusters.clone());
        let (set_changes, sets, chosen) = (set_changes.clone(), sets.clone(), chosen.clone());
        let leases = leases.clone();
        tokio::spawn(async move {
            let mut last: BTreeMap<String, String> = BTreeMap::new();
            let mut unowned_since: BTreeMap<String, Instant> = BTreeMap::new();
            let (mut moved, mut max_unowned) = (0u64, Duration::ZERO);
            while watching.load(Ordering::Relaxed) {
                let params = ListParams::default().labels("fleetpulse.io/shard-lease=true");
                for lease in leases.list(&params).await.unwrap().items {
                    let name = lease.metadata.name.clone().unwrap_or_default();
                    match lease.spec.and_then(|s| s.holder_identity) {
                        Some(holder) => {
                            if let Some(since) = unowned_since.remove(&name) {
                                max_unowned = max_unowned.max(since.elapsed());
                            }
                            if last
                                .insert(name, holder.clone())
                                .is_some_and(|h| h != holder)
                            {
                                moved += 1;
                            }
                        }
                        None => {
                            unowned_since.entry(name).or_insert_with(Instant::now);
                        }
                    }
                }
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
            (moved, max_unowned)
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
    let (moved, max_unowned) = watcher.await.unwrap();
    let false_verdicts = false_verdicts.load(Ordering::Relaxed);
    let set_changes = set_changes.load(Ordering::Relaxed);
    println!(
        "shards in-process: replicas=3 shards={SHARDS} clusters={} moved={moved} false_verdicts={false_verdicts} set_changes={set_changes} max_unowned_s={:.1} moved_in_s={:.1} accepted={} retried={}",
        NAMES.len(),
        max_unowned.as_secs_f64(),
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
