//! Registering a CRD at runtime makes it discoverable and usable through `DynamicObject`.

use fleetpulse_kubesim::KubeSim;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api,
    api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams},
    discovery::{self, Discovery, Scope},
};
use serde_json::json;

fn widget_crd(scope: &str) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "metadata": {"name": "widgets.fleetpulse.io"},
        "spec": {
            "group": "fleetpulse.io",
            "scope": scope,
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{
                "name": "v1alpha1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"status": {}},
            }],
        },
    }))
    .unwrap()
}

#[tokio::test]
async fn registered_crd_is_discovered_and_served_as_dynamic_objects() {
    let sim = KubeSim::new();
    let client = sim.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let created = crds
        .create(&PostParams::default(), &widget_crd("Namespaced"))
        .await
        .unwrap();
    let established = created.status.unwrap().conditions.unwrap();
    assert!(
        established
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
    );

    let gvk = GroupVersionKind::gvk("fleetpulse.io", "v1alpha1", "Widget");
    let (ar, caps) = discovery::pinned_kind(&client, &gvk).await.unwrap();
    assert_eq!(ar.plural, "widgets");
    assert_eq!(caps.scope, Scope::Namespaced);
    assert!(
        caps.subresources
            .iter()
            .any(|(sub, _)| sub.plural == "status")
    );

    let full = Discovery::new(client.clone()).run().await.unwrap();
    assert!(full.has_group("fleetpulse.io"));
    assert!(full.has_group("coordination.k8s.io"));

    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let mut w = DynamicObject::new("w1", &ar);
    w.data = json!({"spec": {"size": 1}, "status": {"ignored": true}});
    let w = widgets.create(&PostParams::default(), &w).await.unwrap();
    assert_eq!(w.metadata.generation, Some(1));
    assert!(
        w.data.get("status").is_none(),
        "create ignores status with a status subresource"
    );

    let spec = json!({"spec": {"size": 2}});
    let w2 = widgets
        .patch("w1", &PatchParams::default(), &Patch::Merge(&spec))
        .await
        .unwrap();
    assert_eq!(w2.metadata.generation, Some(2));
    let st = json!({"status": {"ready": true}});
    let w3 = widgets
        .patch_status("w1", &PatchParams::default(), &Patch::Merge(&st))
        .await
        .unwrap();
    assert_eq!(
        w3.metadata.generation,
        Some(2),
        "status writes do not bump generation"
    );
    assert_eq!(w3.data["status"]["ready"], true);
}

#[tokio::test]
async fn cluster_scoped_crd_serves_cluster_paths_and_delete_unregisters() {
    let sim = KubeSim::new();
    let client = sim.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &widget_crd("Cluster"))
        .await
        .unwrap();
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("fleetpulse.io", "v1alpha1", "Widget"),
        "widgets",
    );
    let widgets: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    widgets
        .create(&PostParams::default(), &DynamicObject::new("c1", &ar))
        .await
        .unwrap();
    assert_eq!(
        widgets.list(&Default::default()).await.unwrap().items.len(),
        1
    );

    crds.delete("widgets.fleetpulse.io", &Default::default())
        .await
        .unwrap();
    let gvk = GroupVersionKind::gvk("fleetpulse.io", "v1alpha1", "Widget");
    assert!(discovery::pinned_kind(&client, &gvk).await.is_err());
}
