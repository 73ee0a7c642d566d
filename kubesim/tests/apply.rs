//! Server-side apply through the real kube client: the labels an apply owns, removal by
//! omission, another manager's labels kept, conflicts and force, a conditional apply that
//! never recreates a deleted object, and a race made deterministic with
//! `interleave_before_next`.

use fleetpulse_kubesim::KubeSim;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use std::collections::BTreeMap;

fn config_map(labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": labels}})
}

fn code(err: kube::Error) -> (u16, String) {
    match err {
        kube::Error::Api(s) => (s.code, s.message),
        other => panic!("expected an API error, got {other:?}"),
    }
}

async fn labels(api: &Api<ConfigMap>) -> BTreeMap<String, String> {
    api.get("c")
        .await
        .unwrap()
        .metadata
        .labels
        .unwrap_or_default()
}

#[tokio::test]
async fn an_apply_removes_only_labels_it_owned_and_conflicts_with_another_managers_value() {
    let sim = KubeSim::new();
    let api: Api<ConfigMap> = Api::default_namespaced(sim.client());
    let created: ConfigMap = serde_json::from_value(config_map(json!({"team": "a"}))).unwrap();
    let params = PostParams {
        field_manager: Some("kubectl".into()),
        ..PostParams::default()
    };
    api.create(&params, &created).await.unwrap();
    let hub = PatchParams::apply("hub");
    let body = config_map(json!({"x": "1", "y": "1"}));
    api.patch("c", &hub, &Patch::Apply(body)).await.unwrap();
    api.patch("c", &hub, &Patch::Apply(config_map(json!({"x": "2"}))))
        .await
        .unwrap();
    let expected = BTreeMap::from([("team".into(), "a".into()), ("x".into(), "2".into())]);
    assert_eq!(labels(&api).await, expected);
    let stored = api.get("c").await.unwrap();
    let managers: Vec<String> = stored
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert_eq!(managers, ["kubectl", "hub"]);

    let (status, message) = code(
        api.patch("c", &hub, &Patch::Apply(config_map(json!({"team": "b"}))))
            .await
            .unwrap_err(),
    );
    assert_eq!(status, 409);
    assert!(message.contains("kubectl"), "{message}");
    api.patch(
        "c",
        &hub.clone().force(),
        &Patch::Apply(config_map(json!({"team": "b"}))),
    )
    .await
    .unwrap();
    assert_eq!(
        labels(&api).await["team"],
        "b",
        "force takes the label over"
    );
}

#[tokio::test]
async fn a_conditional_apply_does_not_recreate_a_deleted_object_and_a_race_is_a_conflict() {
    let sim = KubeSim::new();
    let api: Api<ConfigMap> = Api::default_namespaced(sim.client());
    let hub = PatchParams::apply("hub");
    let created = api
        .patch("c", &hub, &Patch::Apply(config_map(json!({"x": "1"}))))
        .await
        .unwrap();
    let rv = created.metadata.resource_version.unwrap();
    let mut conditional = config_map(json!({"x": "2"}));
    conditional["metadata"]["resourceVersion"] = rv.clone().into();
    sim.interleave_before_next("configmaps", "patch", json!({"data": {"k": "v"}}));
    let (status, _) = code(
        api.patch("c", &hub, &Patch::Apply(conditional.clone()))
            .await
            .unwrap_err(),
    );
    assert_eq!(status, 409, "another writer won the race");
    assert_eq!(labels(&api).await["x"], "1");
    api.delete("c", &DeleteParams::default()).await.unwrap();
    let (status, _) = code(
        api.patch("c", &hub, &Patch::Apply(conditional))
            .await
            .unwrap_err(),
    );
    assert_eq!(status, 404, "a conditional apply never creates");
    assert!(api.get_opt("c").await.unwrap().is_none());
}
