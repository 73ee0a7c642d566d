//! The hub in Kubernetes mode against a simulated management cluster: it watches the CRDs,
//! accepts heartbeats from real agents, writes MemberCluster and ClusterSet status through
//! the status subresource only on transitions, and fails a ClusterSet over.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::Api;

use fleetpulse_agent::{AgentHandle, Url};
use fleetpulse_common::api::condition::{self, HEALTHY, REACHABLE};
use fleetpulse_common::api::{ClusterSet, MemberCluster};
use fleetpulse_hub::kubernetes::leader::{LEADER_LABEL, LeaderSettings};
use fleetpulse_hub::server::Hub;
use fleetpulse_kubesim::{KubeSim, eventually};
use fleetpulse_tests::management::{
    agent, condition_status, events_about, hub_options, management_cluster,
};
use fleetpulse_tests::service::{Backend, ReadyProxy, Routing};

/// Writes to the management API but for the hub state's ConfigMaps, which the hub writes
/// once per flush whatever happens (`tests/tests/hub_state.rs` counts those).
fn decision_writes(sim: &KubeSim) -> u64 {
    let writes = sim.writes();
    let decisions = writes
        .iter()
        .filter(|((resource, _), _)| resource != "configmaps");
    decisions.map(|(_, n)| n).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hub_on_crds_writes_status_on_transitions_only_and_fails_over() {
    let sim = KubeSim::new();
    let client = sim.client();
    let agents_keys = management_cluster(&client, &["edge-1", "edge-2"]).await;
    let clusters: Api<MemberCluster> = Api::namespaced(client.clone(), "fleet");
    let hub = Hub::start(hub_options(&client)).await.unwrap();
    let url: Url = format!("http://127.0.0.1:{}", hub.addr.port())
        .parse()
        .unwrap();
    let mut agents: Vec<AgentHandle> = agents_keys
        .iter()
        .map(|(name, key)| agent(&url, name, key))
        .collect();

    let healthy_in_api = |name: &'static str| {
        let clusters = clusters.clone();
        async move {
            clusters
                .get(name)
                .await
                .ok()
                .filter(|mc| condition_status(mc, HEALTHY).as_deref() == Some("True"))
        }
    };
    for name in ["edge-1", "edge-2"] {
        assert!(
            eventually(Duration::from_secs(20), || healthy_in_api(name))
                .await
                .is_some(),
            "{name} Healthy in the API"
        );
    }
    let sets: Api<ClusterSet> = Api::all(client.clone());
    let selected = || {
        let sets = sets.clone();
        async move {
            let cs = sets.get("primary").await.ok()?;
            let refs = cs.status?.selected_cluster_refs;
            (refs.len() == 1).then(|| refs[0].name.clone())
        }
    };
    let first = eventually(Duration::from_secs(20), selected)
        .await
        .expect("a selection in the ClusterSet status");

    // Steady state: heartbeats keep coming, status writes do not. The Events of the first
    // selection are created after the status that shows it: let them land (no write during
    // two heartbeats) before counting.
    let mut settled = decision_writes(&sim);
    for _ in 0..10 {
        let accepted = agents[0].status().accepted_total;
        agents[0]
            .wait_for(Duration::from_secs(20), |s| {
                s.accepted_total >= accepted + 2
            })
            .await
            .expect("two more heartbeats");
        let now = decision_writes(&sim);
        if now == settled {
            break;
        }
        settled = now;
    }
    let writes_before = decision_writes(&sim);
    let accepted = agents[0].status().accepted_total;
    agents[0]
        .wait_for(Duration::from_secs(20), |s| {
            s.accepted_total >= accepted + 5
        })
        .await
        .expect("five more heartbeats");
    assert_eq!(
        decision_writes(&sim),
        writes_before,
        "no API writes for steady heartbeats: {:?}",
        sim.writes()
    );

    // The selected cluster's agent stops: Reachable=False in the API, and the ClusterSet moves.
    let victim = agents_keys.iter().position(|(n, _)| *n == first).unwrap();
    agents.remove(victim).stop().await.unwrap();
    let first_name: &'static str = if first == "edge-1" {
        "edge-1"
    } else {
        "edge-2"
    };
    let unreachable = eventually(Duration::from_secs(20), || {
        let clusters = clusters.clone();
        async move {
            clusters
                .get(first_name)
                .await
                .ok()
                .filter(|mc| condition_status(mc, REACHABLE).as_deref() == Some("False"))
        }
    })
    .await;
    assert!(unreachable.is_some(), "Reachable=False written to the API");
    let moved = eventually(Duration::from_secs(20), || {
        let sel = selected();
        let first = first.clone();
        async move { sel.await.filter(|s| *s != first) }
    })
    .await;
    assert!(moved.is_some(), "the ClusterSet failed over in the API");
    // Both decisions are Events: the failover on the ClusterSet (cluster-scoped, so in
    // `default`), the lost heartbeats on the MemberCluster.
    let failed_over = eventually(Duration::from_secs(10), || async {
        events_about(&client, "default", "primary", "FailedOver")
            .await
            .pop()
    })
    .await
    .expect("a FailedOver Event about the ClusterSet");
    assert_eq!(failed_over.type_.as_deref(), Some("Warning"));
    let note = failed_over.note.unwrap_or_default();
    assert!(note.contains(&format!("replaced fleet/{first}")), "{note}");
    let events: Api<Event> = Api::namespaced(client.clone(), "fleet");
    let unreachable_event = eventually(Duration::from_secs(10), || async {
        events
            .list(&Default::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| {
                e.action.as_deref() == Some(REACHABLE)
                    && e.type_.as_deref() == Some("Warning")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(first_name)
            })
    })
    .await
    .expect("a Warning Event about the MemberCluster's Reachable condition");
    assert!(
        unreachable_event.regarding.and_then(|r| r.uid).is_some(),
        "the Event names the object's UID, so kubectl describe finds it"
    );
    let label_of = |name: String| {
        let clusters = clusters.clone();
        async move {
            let mc = clusters.get(&name).await.ok()?;
            Some(
                mc.metadata
                    .labels
                    .unwrap_or_default()
                    .get("clusterset.fleetpulse.io/primary")
                    .cloned(),
            )
        }
    };
    let new = moved.clone().unwrap();
    let labelled = eventually(Duration::from_secs(10), || {
        let (old, new) = (label_of(first.clone()), label_of(new.clone()));
        async move { (old.await?.is_none() && new.await? == Some("selected".into())).then_some(()) }
    })
    .await;
    assert!(
        labelled.is_some(),
        "the membership label moved with the selection"
    );
    let writes = sim.writes();
    eprintln!(
        "management API writes: {writes:?} (total {})",
        sim.total_writes()
    );
    let hub_writes = sim.write_count("memberclusters/status", "patch")
        + sim.write_count("clustersets/status", "patch");
    // Per cluster: config generation, Reachable+Ready, Healthy, Reachable=False; per set:
    // the first selection and the failover. Per-report writes would be near the ~25
    // heartbeats this test sends.
    assert!(
        hub_writes <= 12,
        "O(transitions), not O(heartbeats): {writes:?}"
    );
    for a in agents {
        a.stop().await.unwrap();
    }
    hub.shutdown().await;
}

/// Two replicas with leader election behind a Service stand-in that selects the leader's
/// Pod label: the standby is ready but waits; the leader keeps `lastHeartbeatTime` fresh
/// with the coarse refresh; when the leader stops, the standby takes the lease and the
/// label at once and carries on with the same selection, without a failover or an
/// unreachable cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_replica_takes_over_without_a_failover() {
    let sim = KubeSim::new();
    let client = sim.client();
    let agents_keys = management_cluster(&client, &["edge-1", "edge-2"]).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "fleet");
    for name in ["hub-a", "hub-b"] {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "fleet",
                         "labels": {"app": "fleetpulse-hub", LEADER_LABEL: "true"}},
            "spec": {"containers": [{"name": "hub", "image": "fleetpulse-hub"}]}
        }))
        .unwrap();
        pods.create(&Default::default(), &pod).await.unwrap();
    }
    let replica = |identity: &str| {
        let mut options = hub_options(&client);
        options.leader = Some(LeaderSettings {
            namespace: "fleet".into(),
            name: "fleetpulse-hub".into(),
            identity: identity.into(),
            duration: Duration::from_secs(3),
            pod: Some(("fleet".into(), identity.into())),
        });
        options.status_refresh = Duration::from_secs(2);
        options
    };
    let a = Hub::start(replica("hub-a")).await.unwrap();
    let b = Hub::bind(replica("hub-b")).await.unwrap();
    let backend = |addr: std::net::SocketAddr, pod: &str| Backend {
        addr,
        url: format!("http://{addr}").parse().unwrap(),
        pod: Some(pod.into()),
    };
    let probe = reqwest::Client::builder()
        .tls_backend_preconfigured(fleetpulse_agent::tls::client_config(None).unwrap())
        .build()
        .unwrap();
    let routing = Routing::PodLabel {
        client: client.clone(),
        namespace: "fleet".into(),
        label: LEADER_LABEL.into(),
    };
    let service = ReadyProxy::start(
        vec![backend(a.addr, "hub-a"), backend(b.addr, "hub-b")],
        routing,
    )
    .await
    .unwrap();
    let b_url: Url = format!("http://{}", b.addr).parse().unwrap();
    let b = tokio::spawn(b.start());
    let url: Url = format!("http://{}", service.addr).parse().unwrap();
    let agents: Vec<AgentHandle> = agents_keys.iter().map(|(n, k)| agent(&url, n, k)).collect();

    let leases: Api<Lease> = Api::namespaced(client.clone(), "fleet");
    let holder = || async {
        leases
            .get("fleetpulse-hub")
            .await
            .ok()?
            .spec?
            .holder_identity
    };
    assert_eq!(holder().await.as_deref(), Some("hub-a"));
    let standby = probe
        .get(b_url.join("/readyz").unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(standby.status(), 200, "a standby is ready (to lead)");
    let leader_label = |pod: &'static str| {
        let pods = pods.clone();
        async move {
            let labels = pods.get(pod).await.ok()?.metadata.labels?;
            labels.get(LEADER_LABEL).cloned()
        }
    };
    let stale = eventually(Duration::from_secs(10), || async {
        leader_label("hub-b").await.is_none().then_some(())
    })
    .await;
    assert!(
        stale.is_some(),
        "a standby removes a stale leader label from its Pod"
    );
    assert_eq!(leader_label("hub-a").await.as_deref(), Some("true"));
    let sets: Api<ClusterSet> = Api::all(client.clone());
    let selection = || async {
        let refs = sets
            .get("primary")
            .await
            .ok()?
            .status?
            .selected_cluster_refs;
        (refs.len() == 1).then(|| refs[0].name.clone())
    };
    let selected = eventually(Duration::from_secs(20), selection)
        .await
        .expect("a selection");

    // The coarse refresh moves lastHeartbeatTime on the API without a transition.
    let clusters: Api<MemberCluster> = Api::namespaced(client.clone(), "fleet");
    let heartbeat_time = || async {
        clusters
            .get("edge-1")
            .await
            .ok()?
            .status?
            .last_heartbeat_time
    };
    let first_time = eventually(Duration::from_secs(20), heartbeat_time)
        .await
        .unwrap();
    let refreshed = eventually(Duration::from_secs(20), || async {
        heartbeat_time().await.filter(|t| *t != first_time)
    })
    .await;
    assert!(refreshed.is_some(), "lastHeartbeatTime refreshed");
    assert!(
        !b.is_finished(),
        "the standby waits while the leader holds the lease"
    );

    let writes_before = sim.writes();
    a.shutdown().await;
    let b = tokio::time::timeout(Duration::from_secs(20), b)
        .await
        .expect("the standby takes over once the leader released the lease")
        .unwrap()
        .unwrap();
    assert_eq!(holder().await.as_deref(), Some("hub-b"));
    assert_eq!(leader_label("hub-b").await.as_deref(), Some("true"));
    assert_eq!(
        leader_label("hub-a").await,
        None,
        "the stopped leader removed its label"
    );
    // Every agent gets through to the new leader, for longer than the grace period.
    for a in &agents {
        let accepted = a.status().accepted_total;
        a.wait_for(Duration::from_secs(30), |s| {
            s.accepted_total >= accepted + 6
        })
        .await
        .expect("heartbeats accepted by the new leader");
    }
    assert_eq!(
        selection().await,
        Some(selected),
        "no failover on a leader change"
    );
    for mc in clusters.list(&Default::default()).await.unwrap() {
        assert_eq!(
            condition_status(&mc, REACHABLE).as_deref(),
            Some("True"),
            "{:?} stayed reachable",
            mc.metadata.name
        );
    }
    assert!(
        events_about(&client, "default", "primary", "FailedOver")
            .await
            .is_empty()
    );
    let writes_after = sim.writes();
    eprintln!(
        "management API writes before the leader change: {writes_before:?}; after: {writes_after:?}; refused connections: {}",
        service.refused()
    );
    for a in agents {
        a.stop().await.unwrap();
    }
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_cluster_patched_with_lua_that_does_not_compile_shows_it_in_its_status_until_fixed()
 {
    let sim = KubeSim::new();
    let client = sim.client();
    management_cluster(&client, &["edge-1"]).await;
    let clusters: Api<MemberCluster> = Api::namespaced(client.clone(), "fleet");
    let hub = Hub::start(hub_options(&client)).await.unwrap();
    // A merge patch of the spec, as `kubectl apply` sends: no resourceVersion to conflict
    // with the hub's own status writes.
    let with_check = |condition: &str| {
        let clusters = clusters.clone();
        let patch = serde_json::json!({"spec": {"livenessChecks": [
            {"name": "gateway", "condition": condition}
        ]}});
        async move {
            clusters
                .patch(
                    "edge-1",
                    &Default::default(),
                    &kube::api::Patch::Merge(patch),
                )
                .await
                .unwrap();
        }
    };
    let accepted = || {
        let clusters = clusters.clone();
        async move {
            let mc = clusters.get("edge-1").await.ok()?;
            let status = mc.status?;
            Some(condition::find(&status.conditions, condition::ACCEPTED).cloned())
        }
    };

    // The API server stores the broken check; the hub refuses it and says so on the object.
    with_check("function evaluate()\n  return {\nend").await;
    let refused = eventually(Duration::from_secs(20), || async {
        accepted().await.flatten().filter(|c| c.status == "False")
    })
    .await
    .expect("Accepted=False in the MemberCluster's status");
    assert_eq!(refused.reason, "ConditionDoesNotCompile");
    assert!(
        refused.message.contains("gateway") && refused.message.contains("previous version stays"),
        "{}",
        refused.message
    );
    let warned = eventually(Duration::from_secs(20), || async {
        let events = events_about(&client, "fleet", "edge-1", "ConditionDoesNotCompile").await;
        events.into_iter().next()
    })
    .await
    .expect("a Warning Event about edge-1");
    assert_eq!(warned.type_.as_deref(), Some("Warning"));

    // Fixed: the hub takes the version and the condition goes.
    with_check("function evaluate() return {pass = true} end").await;
    assert!(
        eventually(Duration::from_secs(20), || async {
            accepted().await.filter(Option::is_none)
        })
        .await
        .is_some(),
        "Accepted removed once a version compiles"
    );
    hub.shutdown().await;
}
