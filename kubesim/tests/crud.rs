//! Typed CRUD, selectors and paging through the real kube client against an in-process
//! kubesim.

use fleetpulse_kubesim::KubeSim;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Secret};
use kube::{
    Api,
    api::{DeleteParams, ListParams, ObjectMeta, PostParams},
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
async fn secret_create_get_replace_delete_round_trip() {
    let sim = KubeSim::new();
    let secrets: Api<Secret> = Api::namespaced(sim.client(), "default");
    let mut s = Secret {
        metadata: ObjectMeta {
            name: Some("token".into()),
            ..Default::default()
        },
        string_data: None,
        data: Some(BTreeMap::from([(
            "k".into(),
            k8s_openapi::ByteString(b"v1".to_vec()),
        )])),
        ..Default::default()
    };
    let created = secrets.create(&PostParams::default(), &s).await.unwrap();
    assert!(created.metadata.uid.is_some());
    assert!(created.metadata.creation_timestamp.is_some());
    assert_eq!(created.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(
        api_code(
            secrets
                .create(&PostParams::default(), &s)
                .await
                .unwrap_err()
        ),
        409
    );

    s.metadata = created.metadata.clone();
    s.data = Some(BTreeMap::from([(
        "k".into(),
        k8s_openapi::ByteString(b"v2".to_vec()),
    )]));
    let replaced = secrets
        .replace("token", &PostParams::default(), &s)
        .await
        .unwrap();
    assert_ne!(
        replaced.metadata.resource_version,
        created.metadata.resource_version
    );
    let got = secrets.get("token").await.unwrap();
    assert_eq!(got.data.unwrap()["k"].0, b"v2");

    secrets
        .delete("token", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(api_code(secrets.get("token").await.unwrap_err()), 404);
    assert_eq!(
        api_code(
            secrets
                .delete("token", &DeleteParams::default())
                .await
                .unwrap_err()
        ),
        404
    );
}

#[tokio::test]
async fn cluster_starts_with_ready_nodes_and_kube_system_namespace() {
    let sim = KubeSim::builder().nodes(2).build();
    let nodes: Api<Node> = Api::all(sim.client());
    let names: Vec<String> = nodes
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|n| n.metadata.name.unwrap())
        .collect();
    assert_eq!(names, ["node-1", "node-2"]);
    let ns: Api<Namespace> = Api::all(sim.client());
    let ks = ns.get("kube-system").await.unwrap();
    assert_eq!(ks.metadata.uid.unwrap(), sim.cluster_uid());
}

#[tokio::test]
async fn create_in_missing_namespace_is_not_found_and_generate_name_works() {
    let sim = KubeSim::new();
    let missing: Api<Pod> = Api::namespaced(sim.client(), "nope");
    assert_eq!(
        api_code(
            missing
                .create(&PostParams::default(), &pod("a", &[]))
                .await
                .unwrap_err()
        ),
        404
    );
    let pods: Api<Pod> = Api::default_namespaced(sim.client());
    let mut p = pod("", &[]);
    p.metadata.name = None;
    p.metadata.generate_name = Some("job-".into());
    let created = pods.create(&PostParams::default(), &p).await.unwrap();
    let name = created.metadata.name.unwrap();
    assert!(name.starts_with("job-") && name.len() > 4, "{name}");
}

#[tokio::test]
async fn list_filters_by_label_and_field_selectors() {
    let sim = KubeSim::new();
    let pods: Api<Pod> = Api::default_namespaced(sim.client());
    for (name, app) in [("a", "web"), ("b", "web"), ("c", "db")] {
        pods.create(&PostParams::default(), &pod(name, &[("app", app)]))
            .await
            .unwrap();
    }
    let names = |l: kube::core::ObjectList<Pod>| -> Vec<String> {
        l.items
            .into_iter()
            .map(|p| p.metadata.name.unwrap())
            .collect()
    };
    let web = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(names(web), ["a", "b"]);
    let not_web = pods
        .list(&ListParams::default().labels("app notin (web)"))
        .await
        .unwrap();
    assert_eq!(names(not_web), ["c"]);
    let by_name = pods
        .list(&ListParams::default().fields("metadata.name=b"))
        .await
        .unwrap();
    assert_eq!(names(by_name), ["b"]);
    let all: Api<Pod> = Api::all(sim.client());
    let other_ns = all
        .list(&ListParams::default().fields("metadata.namespace=kube-system"))
        .await
        .unwrap();
    assert!(other_ns.items.is_empty());
    let listed = all.list(&ListParams::default()).await.unwrap();
    assert!(
        listed
            .metadata
            .resource_version
            .is_some_and(|rv| !rv.is_empty())
    );
}

#[tokio::test]
async fn list_pages_with_limit_and_continue() {
    let sim = KubeSim::new();
    let pods: Api<Pod> = Api::default_namespaced(sim.client());
    for i in 0..5 {
        pods.create(&PostParams::default(), &pod(&format!("p{i}"), &[]))
            .await
            .unwrap();
    }
    let mut seen = Vec::new();
    let mut lp = ListParams::default().limit(2);
    loop {
        let page = pods.list(&lp).await.unwrap();
        assert!(page.items.len() <= 2);
        seen.extend(page.items.into_iter().map(|p| p.metadata.name.unwrap()));
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => break,
        }
    }
    assert_eq!(seen, ["p0", "p1", "p2", "p3", "p4"]);
}
