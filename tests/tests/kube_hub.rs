//! The hub in Kubernetes mode against a simulated management cluster: it watches the CRDs,
//! accepts heartbeats from real agents, writes MemberCluster and ClusterSet status through
//! the status subresource only on transitions, and fails a ClusterSet over.

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use serde_json::json;

use fleetpulse_agent::{AgentOptions, Url};
use fleetpulse_common::api::condition::{self, HEALTHY, REACHABLE};
use fleetpulse_common::api::{ClusterSet, MemberCluster, crds};
use fleetpulse_common::protocol::keys;
use fleetpulse_common::protocol::report::ClusterId;
use fleetpulse_hub::server::{Hub, HubOptions};
use fleetpulse_kubesim::{KubeSim, eventually};

async fn create<K>(api: &Api<K>, value: serde_json::Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let object: K = serde_json::from_value(value).unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
}

fn condition_status(mc: &MemberCluster, type_: &str) -> Option<String> {
    mc.status
        .as_ref()
        .and_then(|s| condition::find(&s.conditions, type_))
        .map(|c| c.status.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hub_on_crds_writes_status_on_transitions_only_and_fails_over() {
    let sim = KubeSim::new();
    let client = sim.client();
    for crd in crds::all() {
        Api::<CustomResourceDefinition>::all(client.clone())
            .create(&PostParams::default(), &crd)
            .await
            .unwrap();
    }
    create(
        &Api::<Namespace>::all(client.clone()),
        json!({"metadata": {"name": "fleet"}}),
    )
    .await;
    let clusters: Api<MemberCluster> = Api::namespaced(client.clone(), "fleet");
    let mut agents_keys = Vec::new();
    for name in ["edge-1", "edge-2"] {
        let key = keys::generate();
        create(&clusters, json!({
            "apiVersion": "fleetpulse.io/v1alpha1", "kind": "MemberCluster",
            "metadata": {"name": name, "namespace": "fleet", "labels": {"region": "eu"}},
            "spec": {"heartbeat": {"intervalSeconds": 1, "gracePeriodSeconds": 3},
                     "agent": {"publicKeys": [{"publicKey": keys::public_key_string(&key.verifying_key())}]}}
        }))
        .await;
        agents_keys.push((name, key));
    }
    create(&Api::<ClusterSet>::all(client.clone()), json!({
        "apiVersion": "fleetpulse.io/v1alpha1", "kind": "ClusterSet", "metadata": {"name": "primary"},
        "spec": {"clusterSelector": {"matchLabels": {"region": "eu"}}, "maxReplicas": 1}
    }))
    .await;

    let mut options = HubOptions::new(
        Default::default(),
        Default::default(),
        "127.0.0.1:0".parse().unwrap(),
    );
    options.insecure_http = true;
    options.kube = Some(client.clone());
    let hub = Hub::start(options).await.unwrap();
    let url: Url = format!("http://127.0.0.1:{}", hub.addr.port())
        .parse()
        .unwrap();
    let mut agents = Vec::new();
    for (name, key) in &agents_keys {
        let mut o = AgentOptions::new(url.clone(), ClusterId::new("fleet", *name), key.clone());
        o.allow_insecure_http = true;
        o.interval = Duration::from_secs(1);
        agents.push(fleetpulse_agent::spawn(o).unwrap());
    }

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

    // Steady state: heartbeats keep coming, status writes do not.
    let writes_before = sim.total_writes();
    let accepted = agents[0].status().accepted_total;
    agents[0]
        .wait_for(Duration::from_secs(20), |s| {
            s.accepted_total >= accepted + 5
        })
        .await
        .expect("five more heartbeats");
    assert_eq!(
        sim.total_writes(),
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
