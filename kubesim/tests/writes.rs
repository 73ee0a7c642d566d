//! Writes beyond plain CRUD: patches, optimistic concurrency, status-subresource isolation
//! and finalizers, through the real kube client against an in-process kubesim.

use fleetpulse_kubesim::KubeSim;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::{
    Api,
    api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams},
};
use serde_json::json;
use std::collections::BTreeMap;

fn pod(name: &str, labels: &[(&str, &str)]) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>()},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }))
    .unwrap()
}

fn api_code(err: kube::Error) -> u16 {
    match err {
        kube::Error::Api(s) => s.code,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn merge_and_json_patches_apply() {
    let sim = KubeSim::new();
    let pods: Api<Pod> = Api::default_namespaced(sim.client());
    pods.create(&PostParams::default(), &pod("p", &[("a", "1")]))
        .await
        .unwrap();
    let merged = pods
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"b": "2", "a": null}}})),
        )
        .await
        .unwrap();
    let labels = merged.metadata.labels.unwrap();
    assert_eq!(labels, BTreeMap::from([("b".to_string(), "2".to_string())]));
    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "add", "path": "/metadata/annotations", "value": {"x": "y"}}
    ]))
    .unwrap();
    let patched = pods
        .patch("p", &PatchParams::default(), &Patch::Json::<()>(ops))
        .await
        .unwrap();
    assert_eq!(patched.metadata.annotations.unwrap()["x"], "y");
    let applied = pods
        .patch(
            "q",
            &PatchParams::apply("test"),
            &Patch::Apply(pod("q", &[("c", "3")])),
        )
        .await
        .unwrap();
    assert_eq!(applied.metadata.labels.unwrap()["c"], "3");
}

#[tokio::test]
async fn stale_resource_version_put_is_conflict() {
    // A Secret, not a Pod: the simulated kubelet updates pods on its own schedule, which
    // would make the first replace stale as well on a loaded machine.
    let sim = KubeSim::new();
    let pods: Api<Secret> = Api::default_namespaced(sim.client());
    let mut secret = Secret::default();
    secret.metadata.name = Some("p".into());
    let v1 = pods.create(&PostParams::default(), &secret).await.unwrap();
    let mut first = v1.clone();
    first.metadata.labels = Some(BTreeMap::from([("x".into(), "1".into())]));
    pods.replace("p", &PostParams::default(), &first)
        .await
        .unwrap();
    let mut stale = v1;
    stale.metadata.labels = Some(BTreeMap::from([("x".into(), "2".into())]));
    let err = pods
        .replace("p", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(s) => assert_eq!((s.code, s.reason.as_str()), (409, "Conflict")),
        other => panic!("expected 409, got {other:?}"),
    }
}

#[tokio::test]
async fn status_subresource_is_isolated_from_main_resource_writes() {
    let sim = KubeSim::builder().nodes(0).build();
    let pods: Api<Pod> = Api::default_namespaced(sim.client());
    pods.create(&PostParams::default(), &pod("p", &[]))
        .await
        .unwrap();
    let status = json!({"status": {"phase": "Unknown", "message": "via status"}});
    pods.patch_status("p", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let main = json!({"metadata": {"labels": {"l": "v"}}, "status": {"message": "via main"}});
    let after = pods
        .patch("p", &PatchParams::default(), &Patch::Merge(&main))
        .await
        .unwrap();
    let st = after.status.unwrap();
    assert_eq!(st.message.as_deref(), Some("via status"));
    let spec_change = json!({"metadata": {"labels": {"l": "w"}}, "status": {"message": "ignored"}});
    let via_status = pods
        .patch_status("p", &PatchParams::default(), &Patch::Merge(&spec_change))
        .await
        .unwrap();
    assert_eq!(via_status.metadata.labels.unwrap()["l"], "v");
    assert_eq!(
        via_status.status.unwrap().message.as_deref(),
        Some("ignored")
    );
}

#[tokio::test]
async fn delete_with_finalizer_waits_until_finalizer_removed() {
    let sim = KubeSim::new();
    let secrets: Api<Secret> = Api::default_namespaced(sim.client());
    let s = Secret {
        metadata: ObjectMeta {
            name: Some("f".into()),
            finalizers: Some(vec!["fleetpulse.io/cleanup".into()]),
            ..Default::default()
        },
        ..Default::default()
    };
    secrets.create(&PostParams::default(), &s).await.unwrap();
    secrets.delete("f", &DeleteParams::default()).await.unwrap();
    let marked = secrets.get("f").await.unwrap();
    assert!(marked.metadata.deletion_timestamp.is_some());
    let clear = json!({"metadata": {"finalizers": null}});
    secrets
        .patch("f", &PatchParams::default(), &Patch::Merge(&clear))
        .await
        .unwrap();
    assert_eq!(api_code(secrets.get("f").await.unwrap_err()), 404);
}
