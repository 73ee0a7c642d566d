//! [`KubeReader`] against the in-process Kubernetes API test server: a list longer than a
//! page is read a page at a time and yields every object once, in the API server's order,
//! exactly as a single unpaged list through `DynamicObject` did (apiVersion and kind from
//! the query, no managedFields, label selection applied).

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use serde_json::{Value, json};

use fleetpulse_common::api::ResourceSelector;
use fleetpulse_common::checks::query::Query;
use fleetpulse_kubesim::KubeSim;

use super::{KubeReader, ResourceReader};

fn query(selector: Value) -> Query {
    let selector: ResourceSelector = serde_json::from_value(selector).unwrap();
    Query::resolve(&selector, &ObjectMeta::default()).unwrap()
}

/// What the reader returned before paging: one list through `DynamicObject`, each item
/// converted back to JSON, apiVersion/kind set, managedFields dropped, then selected.
async fn unpaged(sim: &KubeSim, query: &Query) -> Vec<Value> {
    let gvk = kube::core::GroupVersionKind::gvk(&query.group, &query.version, &query.kind);
    let (resource, _) = kube::discovery::pinned_kind(&sim.client(), &gvk)
        .await
        .unwrap();
    let api: Api<DynamicObject> = match &query.namespace {
        Some(ns) => Api::namespaced_with(sim.client(), ns, &resource),
        None => Api::all_with(sim.client(), &resource),
    };
    let list = api.list(&ListParams::default()).await.unwrap();
    (list.items.into_iter())
        .map(|o| {
            let mut v = serde_json::to_value(o).unwrap();
            v["apiVersion"] = Value::String(query.api_version());
            v["kind"] = Value::String(query.kind.clone());
            v["metadata"]
                .as_object_mut()
                .unwrap()
                .remove("managedFields");
            v
        })
        .filter(|v| query.matches(v))
        .collect()
}

fn names(objects: &[Value]) -> Vec<String> {
    (objects.iter())
        .map(|o| {
            format!(
                "{}/{}",
                o["metadata"]["namespace"].as_str().unwrap(),
                o["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect()
}

fn list_requests(sim: &KubeSim) -> usize {
    (sim.requests().iter())
        .filter(|r| r.verb == "list" && r.resource == "configmaps")
        .count()
}

#[tokio::test]
async fn a_list_longer_than_a_page_returns_every_object_once_in_order() {
    let sim = KubeSim::new();
    for ns in ["team-b", "team-a"] {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        Api::all(sim.client())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
    }
    // 23 ConfigMaps in two namespaces, created out of order; every third is labelled.
    let mut expected = Vec::new();
    for i in (0..23).rev() {
        let ns = if i % 2 == 0 { "team-a" } else { "team-b" };
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": format!("cm-{i:02}"), "namespace": ns,
                         "labels": {"app": if i % 3 == 0 { "web" } else { "db" }}},
            "data": {"index": i.to_string()}
        }))
        .unwrap();
        Api::namespaced(sim.client(), ns)
            .create(&PostParams::default(), &cm)
            .await
            .unwrap();
        expected.push(format!("{ns}/cm-{i:02}"));
    }
    expected.sort();

    let all = query(json!({"version": "v1", "kind": "ConfigMap"}));
    let before = list_requests(&sim);
    let paged = KubeReader::new(sim.client())
        .with_page_size(5)
        .list(&all)
        .await
        .unwrap();
    let pages = list_requests(&sim) - before;
    assert_eq!(pages, paged.len().div_ceil(5), "one request per page of 5");
    assert!(pages > 4, "the list spans pages");
    assert_eq!(
        paged,
        unpaged(&sim, &all).await,
        "the same objects as one list"
    );
    let ours: Vec<String> = (names(&paged).into_iter())
        .filter(|n| n.starts_with("team-"))
        .collect();
    assert_eq!(
        ours, expected,
        "every object once, in (namespace, name) order"
    );
    for o in &paged {
        assert_eq!(
            (o["apiVersion"].as_str(), o["kind"].as_str()),
            (Some("v1"), Some("ConfigMap"))
        );
        assert!(o["metadata"].get("managedFields").is_none(), "{o}");
    }

    // A page size dividing the list exactly, one larger than it, and the default.
    for reader in [
        KubeReader::new(sim.client()).with_page_size(1),
        KubeReader::new(sim.client()).with_page_size(1000),
        KubeReader::new(sim.client()),
    ] {
        assert_eq!(reader.list(&all).await.unwrap(), paged);
    }

    // Selection applies across pages; one namespace lists only it.
    let web = query(
        json!({"version": "v1", "kind": "ConfigMap", "namespace": "team-a", "selector": "app=web"}),
    );
    let reader = KubeReader::new(sim.client()).with_page_size(2);
    let selected = reader.list(&web).await.unwrap();
    assert_eq!(selected, unpaged(&sim, &web).await);
    assert_eq!(
        names(&selected),
        [
            "team-a/cm-00",
            "team-a/cm-06",
            "team-a/cm-12",
            "team-a/cm-18"
        ]
    );

    // One object by name: the same object as in the list.
    let one = query(
        json!({"version": "v1", "kind": "ConfigMap", "namespace": "team-b", "name": "cm-07"}),
    );
    let got = reader.list(&one).await.unwrap();
    assert_eq!(names(&got), ["team-b/cm-07"]);
    assert_eq!(
        got[0],
        paged[names(&paged)
            .iter()
            .position(|n| n == "team-b/cm-07")
            .unwrap()]
    );
    let absent =
        query(json!({"version": "v1", "kind": "ConfigMap", "namespace": "team-b", "name": "nope"}));
    assert!(reader.list(&absent).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_compact_listing_holds_the_same_objects_as_the_listing_of_values() {
    let sim = KubeSim::new();
    for i in 0..7 {
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": format!("cm-{i}"), "namespace": "default",
                         "labels": {"app": if i % 2 == 0 { "web" } else { "db" }}},
            "data": {"note": "say \"hi\"\n"}
        }))
        .unwrap();
        Api::namespaced(sim.client(), "default")
            .create(&PostParams::default(), &cm)
            .await
            .unwrap();
    }
    let reader = KubeReader::new(sim.client()).with_page_size(3);
    for selector in [
        json!({"version": "v1", "kind": "ConfigMap", "namespace": "default", "selector": "app=web"}),
        json!({"version": "v1", "kind": "ConfigMap", "namespace": "default", "name": "cm-3"}),
    ] {
        let query = query(selector);
        let values = reader.list(&query).await.unwrap();
        let compact = reader.list_compact(&query).await.unwrap();
        assert!(!values.is_empty());
        let parsed: Vec<Value> = compact.iter().map(|o| o.to_value()).collect();
        assert_eq!(parsed, values, "the same objects, selected the same way");
    }
}
