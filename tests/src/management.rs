//! A simulated management cluster for the hub in Kubernetes mode, for tests that run the
//! hub in-process: the CRDs and a small fleet, hub options, in-process agents, and Events.

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use serde_json::json;

use fleetpulse_agent::{AgentHandle, AgentOptions, Url};
use fleetpulse_common::api::condition;
use fleetpulse_common::api::{ClusterSet, MemberCluster, crds};
use fleetpulse_common::protocol::keys;
use fleetpulse_common::protocol::report::ClusterId;
use fleetpulse_hub::server::HubOptions;

/// Creates an object from JSON; panics on failure (a test fixture).
pub async fn create<K>(api: &Api<K>, value: serde_json::Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let object: K = serde_json::from_value(value).unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
}

/// A MemberCluster condition's status.
pub fn condition_status(mc: &MemberCluster, type_: &str) -> Option<String> {
    mc.status
        .as_ref()
        .and_then(|s| condition::find(&s.conditions, type_))
        .map(|c| c.status.clone())
}

/// The management cluster's objects: the CRDs, MemberClusters `names` in namespace
/// `fleet` (1 s heartbeats, 3 s grace), and ClusterSet `primary` (maxReplicas 1). Returns
/// each cluster's agent key.
pub async fn management_cluster(
    client: &kube::Client,
    names: &[&'static str],
) -> Vec<(&'static str, ed25519_dalek::SigningKey)> {
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
    for name in names {
        let key = keys::generate();
        create(&clusters, json!({
            "apiVersion": "fleetpulse.io/v1alpha1", "kind": "MemberCluster",
            "metadata": {"name": name, "namespace": "fleet", "labels": {"region": "eu"}},
            "spec": {"heartbeat": {"intervalSeconds": 1, "gracePeriodSeconds": 3},
                     "agent": {"publicKeys": [{"publicKey": keys::public_key_string(&key.verifying_key())}]}}
        }))
        .await;
        agents_keys.push((*name, key));
    }
    create(&Api::<ClusterSet>::all(client.clone()), json!({
        "apiVersion": "fleetpulse.io/v1alpha1", "kind": "ClusterSet", "metadata": {"name": "primary"},
        "spec": {"clusterSelector": {"matchLabels": {"region": "eu"}}, "maxReplicas": 1}
    }))
    .await;
    agents_keys
}

/// Hub options for Kubernetes mode over plain HTTP on a free loopback port.
pub fn hub_options(client: &kube::Client) -> HubOptions {
    let mut options = HubOptions::new(
        Default::default(),
        Default::default(),
        "127.0.0.1:0".parse().unwrap(),
    );
    options.insecure_http = true;
    options.kube = Some(client.clone());
    options
}

/// An in-process agent for cluster `fleet/<name>`, heart-beating every second over
/// plain HTTP.
pub fn agent(url: &Url, name: &'static str, key: &ed25519_dalek::SigningKey) -> AgentHandle {
    let mut o = AgentOptions::new(url.clone(), ClusterId::new("fleet", name), key.clone());
    o.allow_insecure_http = true;
    o.interval = Duration::from_secs(1);
    fleetpulse_agent::spawn(o).unwrap()
}

/// The Events about `name` with `reason`, in `namespace`.
pub async fn events_about(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    reason: &str,
) -> Vec<Event> {
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    events
        .list(&Default::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some(reason)
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
        })
        .collect()
}
