//! A hub-side check in Kubernetes mode: per-cluster KeptnMetric objects on the management
//! cluster, read by a HealthPolicy's `fromHub` liveness check. When the selected cluster's
//! metric turns bad, it becomes unhealthy while its heartbeats continue, and the ClusterSet
//! fails over.

use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::json;

use fleetpulse_agent::{AgentHandle, Url};
use fleetpulse_common::api::condition::{HEALTHY, REACHABLE};
use fleetpulse_common::api::{ClusterSet, HealthPolicy, MemberCluster};
use fleetpulse_hub::server::Hub;
use fleetpulse_kubesim::{KubeSim, eventually};
use fleetpulse_tests::management::{
    agent, condition_status, create, hub_options, management_cluster,
};

const SCRIPT: &str = r#"function evaluate()
  local v = tonumber(ctx.metric.status.value)
  return {healthy = v ~= nil and v < 0.05, message = "error rate " .. tostring(v)}
end"#;

async fn set_value(metrics: &Api<DynamicObject>, cluster: &str, value: &str) {
    metrics
        .patch_status(
            &format!("{cluster}-error-rate"),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"value": value}})),
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_keptn_metric_on_the_management_cluster_fails_the_cluster_over() {
    let sim = KubeSim::new();
    let client = sim.client();
    let keys = management_cluster(&client, &["edge-1", "edge-2"]).await;
    create(&Api::<CustomResourceDefinition>::all(client.clone()), json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "keptnmetrics.metrics.keptn.sh"},
        "spec": {"group": "metrics.keptn.sh", "scope": "Namespaced",
            "names": {"kind": "KeptnMetric", "plural": "keptnmetrics", "singular": "keptnmetric", "listKind": "KeptnMetricList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .await;
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "metrics.keptn.sh",
        "v1",
        "KeptnMetric",
    ));
    let metrics: Api<DynamicObject> = Api::namespaced_with(client.clone(), "fleet", &resource);
    for (name, _) in &keys {
        let metric: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "metrics.keptn.sh/v1", "kind": "KeptnMetric",
            "metadata": {"name": format!("{name}-error-rate"), "namespace": "fleet"}
        }))
        .unwrap();
        metrics.create(&Default::default(), &metric).await.unwrap();
        // As on a real API server, status is written through its subresource.
        set_value(&metrics, name, "0.01").await;
    }
    create(&Api::<HealthPolicy>::namespaced(client.clone(), "fleet"), json!({
        "apiVersion": "fleetpulse.io/v1alpha1", "kind": "HealthPolicy",
        "metadata": {"name": "error-rate", "namespace": "fleet"},
        "spec": {"clusterSelector": {}, "livenessChecks": [{
            "name": "error-rate",
            "resourceSelectors": [{"group": "metrics.keptn.sh", "version": "v1", "kind": "KeptnMetric",
                "namespace": "fleet", "name": "{{ .Cluster.metadata.name }}-error-rate",
                "identifier": "metric", "fromHub": true}],
            "condition": SCRIPT
        }]}
    }))
    .await;

    let hub = Hub::start(hub_options(&client)).await.unwrap();
    let url: Url = format!("http://{}", hub.addr).parse().unwrap();
    let agents: Vec<AgentHandle> = keys.iter().map(|(n, k)| agent(&url, n, k)).collect();
    let clusters: Api<MemberCluster> = Api::namespaced(client.clone(), "fleet");
    let condition = |name: String, type_: &'static str, want: &'static str| {
        let clusters = clusters.clone();
        async move {
            let mc = clusters.get(&name).await.ok()?;
            (condition_status(&mc, type_).as_deref() == Some(want)).then_some(mc)
        }
    };
    for (name, _) in &keys {
        eventually(Duration::from_secs(20), || {
            condition(name.to_string(), HEALTHY, "True")
        })
        .await
        .expect("Healthy with a good metric");
    }
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
        .unwrap();

    let fault = Instant::now();
    set_value(&metrics, &selected, "0.9").await;
    let unhealthy = eventually(Duration::from_secs(20), || {
        condition(selected.clone(), HEALTHY, "False")
    })
    .await
    .expect("Healthy=False after the metric turned bad");
    assert_eq!(
        condition_status(&unhealthy, REACHABLE).as_deref(),
        Some("True"),
        "heartbeats continue"
    );
    let check = unhealthy
        .status
        .unwrap()
        .checks
        .into_iter()
        .find(|c| c.name == "error-rate")
        .unwrap();
    assert!(!check.passing && check.message.contains("0.9"), "{check:?}");
    let moved = eventually(Duration::from_secs(20), || async {
        selection().await.filter(|s| *s != selected)
    })
    .await
    .expect("the ClusterSet failed over");
    eprintln!(
        "hub-side metric fault on {selected} -> failover to {moved} in {} ms; management API writes {:?}",
        fault.elapsed().as_millis(),
        sim.writes()
    );
    for a in agents {
        a.stop().await.unwrap();
    }
    hub.shutdown().await;
}
