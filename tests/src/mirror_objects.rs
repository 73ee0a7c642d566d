//! The objects of the tools fleetpulse mirrors onto, on a simulated management cluster:
//! their test CRDs (`fixtures/mirror-crds/`, written from the upstream API references, only
//! the fields used), and creating, reading and inspecting the objects as another tool's
//! user would.

use std::collections::BTreeMap;

use fleetpulse_hub::mirrors::MirrorKind;
use fleetpulse_kubesim::KubeSim;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

/// Installs the test CRDs of every mirrored kind (the core Secret needs none).
pub async fn install_crds(client: &kube::Client) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/mirror-crds");
    for file in std::fs::read_dir(&dir)? {
        let path = file?.path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let crd: CustomResourceDefinition =
                serde_yaml_ng::from_str(&std::fs::read_to_string(&path)?)?;
            crds.create(&PostParams::default(), &crd).await?;
        }
    }
    Ok(())
}

/// The API of `kind` objects in `ns` (`None`: cluster-scoped, or every namespace).
pub fn api(sim: &KubeSim, kind: MirrorKind, ns: Option<&str>) -> Api<DynamicObject> {
    let (group, version) = kind.api_version().rsplit_once('/').unwrap_or(("", "v1"));
    let gvk = GroupVersionKind::gvk(group, version, kind.kind());
    let resource = ApiResource::from_gvk_with_plural(&gvk, kind.plural());
    match ns {
        Some(ns) => Api::namespaced_with(sim.client(), ns, &resource),
        None => Api::all_with(sim.client(), &resource),
    }
}

/// Creates an object as `kubectl` would (field manager `kubectl`, label `team: payments`),
/// merged with `extra` (more labels, taints). Panics if the API refuses it.
pub async fn create(sim: &KubeSim, kind: MirrorKind, ns: Option<&str>, name: &str, extra: Value) {
    let mut body = json!({"apiVersion": kind.api_version(), "kind": kind.kind(),
        "metadata": {"name": name, "labels": {"team": "payments"}}});
    merge(&mut body, &extra);
    let object: DynamicObject = serde_json::from_value(body).unwrap();
    let params = PostParams {
        field_manager: Some("kubectl".into()),
        ..PostParams::default()
    };
    api(sim, kind, ns).create(&params, &object).await.unwrap();
}

/// RFC 7386 merge of `patch` into `doc`.
pub fn merge(doc: &mut Value, patch: &Value) {
    match (doc.as_object_mut(), patch.as_object()) {
        (Some(d), Some(p)) => {
            for (k, v) in p {
                merge(d.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        _ => *doc = patch.clone(),
    }
}

/// The object as the API returns it. Panics if it is missing.
pub async fn object(sim: &KubeSim, kind: MirrorKind, ns: Option<&str>, name: &str) -> Value {
    serde_json::to_value(api(sim, kind, ns).get(name).await.unwrap()).unwrap()
}

/// Its `metadata.labels`.
pub fn labels(obj: &Value) -> BTreeMap<String, String> {
    serde_json::from_value(obj["metadata"]["labels"].clone()).unwrap_or_default()
}

/// Its `spec.taints`, each as `key=effect`.
pub fn taint_keys(obj: &Value) -> Vec<String> {
    obj["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            format!(
                "{}={}",
                t["key"].as_str().unwrap(),
                t["effect"].as_str().unwrap()
            )
        })
        .collect()
}
