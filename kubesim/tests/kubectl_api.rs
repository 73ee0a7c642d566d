//! What kubectl needs beyond the `kube` client, through raw requests: `Table` answers built
//! from a CRD's printer columns, OpenAPI v3 built from its schema, short names and
//! categories in discovery, and one Event store behind both Event APIs.

use fleetpulse_kubesim::KubeSim;
use k8s_openapi::api::{core::v1::Event as CoreEvent, events::v1::Event};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

fn widget_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "metadata": {"name": "widgets.example.io"},
        "spec": {
            "group": "example.io", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                      "shortNames": ["wd"], "categories": ["all-widgets"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "description": "A widget.",
                    "properties": {"spec": {"type": "object", "description": "What it should be.",
                        "properties": {"size": {"type": "integer", "description": "How big."}}}}}},
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                    {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
                    {"name": "Color", "type": "string", "jsonPath": ".spec.color", "priority": 1}],
                "subresources": {"status": {}},
            }],
        },
    }))
    .unwrap()
}

async fn get(client: &kube::Client, path: &str, accept: &str) -> Value {
    let request = http::Request::get(path)
        .header("Accept", accept)
        .body(Vec::new())
        .unwrap();
    client.request::<Value>(request).await.unwrap()
}

async fn with_widget(sim: &KubeSim) -> kube::Client {
    let client = sim.client();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &widget_crd())
        .await
        .unwrap();
    let resource = ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("example.io", "v1", "Widget"),
        "widgets",
    );
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
    let widget: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.io/v1", "kind": "Widget",
        "metadata": {"name": "w1"}, "spec": {"size": 3, "color": "red"}
    }))
    .unwrap();
    widgets
        .create(&PostParams::default(), &widget)
        .await
        .unwrap();
    let status = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    widgets
        .patch_status("w1", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    client
}

#[tokio::test]
async fn lists_and_gets_answer_tables_from_the_printer_columns() {
    let sim = KubeSim::new();
    let client = with_widget(&sim).await;
    let table = get(
        &client,
        "/apis/example.io/v1/namespaces/default/widgets",
        TABLE,
    )
    .await;
    assert_eq!(table["kind"], "Table");
    let names: Vec<&str> = (table["columnDefinitions"].as_array().unwrap().iter())
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Name", "Size", "Ready", "Color"]);
    assert_eq!(table["columnDefinitions"][3]["priority"], 1);
    let row = &table["rows"][0];
    assert_eq!(row["cells"], json!(["w1", 3, "True", "red"]));
    assert_eq!(row["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(row["object"]["metadata"]["name"], "w1");
    let one = get(
        &client,
        "/apis/example.io/v1/namespaces/default/widgets/w1",
        TABLE,
    )
    .await;
    assert_eq!(one["rows"].as_array().unwrap().len(), 1);
    // Built-in kinds get Name and Age; a plain Accept gets the list itself.
    let namespaces = get(&client, "/api/v1/namespaces", TABLE).await;
    assert_eq!(namespaces["columnDefinitions"][1]["name"], "Age");
    let age = namespaces["rows"][0]["cells"][1].as_str().unwrap();
    assert!(age.ends_with('s'), "{age}");
    let plain = get(&client, "/api/v1/namespaces", "application/json").await;
    assert_eq!(plain["kind"], "NamespaceList");
}

#[tokio::test]
async fn openapi_v3_serves_the_crd_schema_with_its_kind() {
    let sim = KubeSim::new();
    let client = with_widget(&sim).await;
    let index = get(&client, "/openapi/v3", "application/json").await;
    let url = index["paths"]["apis/example.io/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        url.starts_with("/openapi/v3/apis/example.io/v1?hash="),
        "{url}"
    );
    let doc = get(&client, &url, "application/json").await;
    let path = &doc["paths"]["/apis/example.io/v1/namespaces/{namespace}/widgets"];
    assert_eq!(
        path["get"]["x-kubernetes-group-version-kind"],
        json!({"group": "example.io", "version": "v1", "kind": "Widget"})
    );
    let schema = &doc["components"]["schemas"]["io.example.v1.Widget"];
    assert_eq!(
        schema["properties"]["spec"]["properties"]["size"]["description"],
        "How big."
    );
    assert!(schema["properties"]["metadata"]["description"].is_string());
    assert!(schema["properties"]["apiVersion"]["description"].is_string());
    assert_eq!(
        schema["x-kubernetes-group-version-kind"][0]["kind"],
        "Widget"
    );
}

#[tokio::test]
async fn discovery_advertises_short_names_and_categories() {
    let sim = KubeSim::new();
    let client = with_widget(&sim).await;
    let resources = get(&client, "/apis/example.io/v1", "application/json").await;
    let widgets = &resources["resources"][0];
    assert_eq!(widgets["shortNames"], json!(["wd"]));
    assert_eq!(widgets["categories"], json!(["all-widgets"]));
    let core = get(&client, "/api/v1", "application/json").await;
    let pods = (core["resources"].as_array().unwrap().iter())
        .find(|r| r["name"] == "pods")
        .unwrap();
    assert_eq!(pods["shortNames"], json!(["po"]));
}

#[tokio::test]
async fn one_event_store_serves_both_event_apis() {
    let sim = KubeSim::new();
    let client = sim.client();
    let v1: Api<Event> = Api::namespaced(client.clone(), "default");
    let core: Api<CoreEvent> = Api::namespaced(client.clone(), "default");
    let event: Event = serde_json::from_value(json!({
        "metadata": {"name": "e1"}, "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "fleetpulse-hub", "reportingInstance": "hub-0",
        "action": "Healthy", "reason": "LivenessChecksFailing", "type": "Warning",
        "note": "dns failing", "regarding": {"kind": "MemberCluster", "name": "edge-1"}
    }))
    .unwrap();
    v1.create(&PostParams::default(), &event).await.unwrap();
    let seen = core.get("e1").await.unwrap();
    assert_eq!(seen.message.as_deref(), Some("dns failing"));
    assert_eq!(seen.involved_object.name.as_deref(), Some("edge-1"));
    assert_eq!(seen.reporting_component.as_deref(), Some("fleetpulse-hub"));
    let by_object = ListParams::default().fields("involvedObject.name=edge-1");
    assert_eq!(core.list(&by_object).await.unwrap().items.len(), 1);

    let patch = json!({"message": "dns failing again"});
    core.patch("e1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let back = v1.get("e1").await.unwrap();
    assert_eq!(back.note.as_deref(), Some("dns failing again"));
    assert_eq!(
        back.regarding.and_then(|r| r.name).as_deref(),
        Some("edge-1")
    );
    v1.delete("e1", &Default::default()).await.unwrap();
    assert!(core.get_opt("e1").await.unwrap().is_none());
}
