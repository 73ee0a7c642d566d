//! The agent's Kubernetes paths against the in-process Kubernetes API test server
//! (`fleetpulse-kubesim`), through the real `kube` client: resource reads through discovery
//! and the dynamic API, built-ins, `/readyz`, the key Secret, the cluster UID, and pod checks
//! against the simulated kubelet.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::json;

use fleetpulse_agent::checks::builtin;
use fleetpulse_agent::checks::lua_check::{self, LuaCheck, Script};
use fleetpulse_agent::checks::pod::{KubePodApi, PodCheckRunner};
use fleetpulse_agent::checks::resources::{KubeReader, ResourceReader};
use fleetpulse_agent::key_secret;
use fleetpulse_common::api::{PodCheck, ReadyNodesCheck, ResourceSelector};
use fleetpulse_common::lua::LuaLimits;
use fleetpulse_kubesim::{KubeSim, Outcome, PodMatcher, eventually};

#[tokio::test]
async fn built_ins_follow_the_nodes_and_readyz_answers() {
    let sim = KubeSim::builder().nodes(3).build();
    let reader = KubeReader::new(sim.client());
    assert!(builtin::apiserver_readyz(&reader).await.passing);
    let all = ReadyNodesCheck {
        min_percent: Some(100),
        ..Default::default()
    };
    let out = builtin::ready_nodes(&reader, &all).await;
    assert!(out.passing, "{}", out.message);
    assert!(sim.set_node_ready("node-2", false));
    let out = builtin::ready_nodes(&reader, &all).await;
    assert!(!out.passing);
    assert_eq!(out.message, "2 of 3 nodes Ready (need at least 100%)");
}

#[tokio::test]
async fn a_lua_check_reads_custom_resources_found_through_discovery() {
    let sim = KubeSim::new();
    let client = sim.client();
    let crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
        serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "keptnmetrics.metrics.keptn.sh"},
            "spec": {"group": "metrics.keptn.sh", "scope": "Namespaced",
                     "names": {"plural": "keptnmetrics", "singular": "keptnmetric", "kind": "KeptnMetric"},
                     "versions": [{"name": "v1", "served": true, "storage": true,
                                   "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                                   "subresources": {"status": {}}}]}
        }))
        .unwrap();
    Api::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
    let ns: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(json!({"metadata": {"name": "keptn"}})).unwrap();
    Api::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let gvk = kube::core::GroupVersionKind::gvk("metrics.keptn.sh", "v1", "KeptnMetric");
    let (resource, _) = kube::discovery::pinned_kind(&client, &gvk).await.unwrap();
    let metrics: Api<DynamicObject> = Api::namespaced_with(client.clone(), "keptn", &resource);
    for (name, value) in [("edge-1-error-rate", "0.01"), ("edge-2-error-rate", "0.9")] {
        let mut m: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "metrics.keptn.sh/v1", "kind": "KeptnMetric",
            "metadata": {"name": name, "namespace": "keptn"}, "status": {"value": value}
        }))
        .unwrap();
        m = metrics.create(&PostParams::default(), &m).await.unwrap();
        m.data["status"] = json!({"value": value});
        metrics
            .replace_status(name, &PostParams::default(), &m)
            .await
            .unwrap();
    }
    let check = std::sync::Arc::new(LuaCheck {
        name: "error-rate".into(),
        script: Script::Condition("function evaluate() local v = tonumber(ctx.metric.status.value) return {healthy = v < 0.05, message = tostring(v)} end".into()),
        selectors: vec![ResourceSelector {
            group: "metrics.keptn.sh".into(),
            version: "v1".into(),
            kind: "KeptnMetric".into(),
            namespace: Some("keptn".into()),
            name: Some("{{ .Cluster.metadata.name }}-error-rate".into()),
            identifier: Some("metric".into()),
            ..Default::default()
        }],
        deadline: None,
    });
    let reader = KubeReader::new(client);
    for (cluster, passing, message) in [("edge-1", true, "0.01"), ("edge-2", false, "0.9")] {
        let meta = ObjectMeta {
            name: Some(cluster.into()),
            namespace: Some("fleet".into()),
            ..Default::default()
        };
        let checks = vec![check.clone()];
        let out = lua_check::run_batch(&reader, &meta, checks, LuaLimits::default()).await;
        assert_eq!(
            (out[0].passing, out[0].message.as_str()),
            (passing, message),
            "{cluster}"
        );
    }
    let missing_kind = fleetpulse_common::checks::query::Query::resolve(
        &ResourceSelector {
            group: "nope.example".into(),
            version: "v1".into(),
            kind: "Nope".into(),
            ..Default::default()
        },
        &ObjectMeta::default(),
    )
    .unwrap();
    assert!(
        reader.list(&missing_kind).await.unwrap().is_empty(),
        "a kind that is not served yields no objects"
    );
}

#[tokio::test]
async fn the_key_secret_is_created_once_and_reused_and_the_cluster_uid_is_kube_system() {
    let sim = KubeSim::new();
    let client = sim.client();
    let ns: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(json!({"metadata": {"name": "fleetpulse-system"}})).unwrap();
    Api::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let (first, created) =
        key_secret::load_or_create(client.clone(), "fleetpulse-system", "agent-key")
            .await
            .unwrap();
    assert!(created);
    let (again, created) =
        key_secret::load_or_create(client.clone(), "fleetpulse-system", "agent-key")
            .await
            .unwrap();
    assert!(!created);
    assert_eq!(first.to_bytes(), again.to_bytes(), "reused after a restart");
    assert_eq!(
        key_secret::cluster_uid(client).await.as_deref(),
        Some(sim.cluster_uid().as_str())
    );
}

#[tokio::test]
async fn a_pod_check_runs_pods_on_the_simulated_kubelet_and_reports_a_failures_log() {
    let sim = KubeSim::new();
    let client = sim.client();
    let ns: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(json!({"metadata": {"name": "checks"}})).unwrap();
    Api::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    sim.set_pod_outcome(
        PodMatcher::name_prefix("fleetpulse-dns-"),
        Outcome::Fail {
            exit_code: 3,
            log: "resolving kubernetes.default\nSERVFAIL\n".into(),
        },
    );
    let spec: PodCheck = serde_json::from_value(json!({
        "template": {"spec": {"containers": [{"name": "probe", "image": "busybox", "command": ["nslookup", "kubernetes.default"]}]}},
        "intervalSeconds": 1, "consecutiveFailureThreshold": 1
    }))
    .unwrap();
    let runner = PodCheckRunner::new(KubePodApi::new(client.clone()), "dns", &spec, "checks");
    let report = runner.run_round(1).await;
    assert!(!report.success);
    assert!(report.message.contains("SERVFAIL"), "{}", report.message);
    let outcome = eventually(Duration::from_secs(5), || {
        let o = runner.outcome();
        async move { (!o.passing && o.message.contains("SERVFAIL")).then_some(o) }
    })
    .await;
    assert!(outcome.is_some(), "{:?}", runner.outcome());
    assert!(sim.write_count("pods", "create") >= 1);
}
