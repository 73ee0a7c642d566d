//! The harness of the mirror writer tests: a kubesim with the mirrored tools' test CRDs
//! and a running mirror task, and helpers that create, read and count mirror objects.

use std::collections::BTreeMap;
use std::time::Duration;

use fleetpulse_common::api::MirrorRef;
use fleetpulse_common::protocol::report::ClusterId;
use fleetpulse_hub::mirrors::{
    MirrorChange, MirrorInput, MirrorKind, MirrorState, Mirrors, MirrorsHandle,
};
use fleetpulse_kubesim::{KubeSim, eventually};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

pub const WAIT: Duration = Duration::from_secs(30);
pub const HEALTHY: &str = "health.fleetpulse.io/healthy";
pub const REACHABLE: &str = "health.fleetpulse.io/reachable";
pub const PROD: &str = "clusterset.fleetpulse.io/prod";

pub struct Fixture {
    pub sim: KubeSim,
    pub handle: MirrorsHandle,
    pub changes: UnboundedReceiver<MirrorChange>,
    pub stop: CancellationToken,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

pub async fn fixture(resync: Duration) -> Fixture {
    let sim = KubeSim::new();
    let crds: Api<CustomResourceDefinition> = Api::all(sim.client());
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/mirror-crds");
    for file in std::fs::read_dir(&dir).unwrap() {
        let path = file.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let crd: CustomResourceDefinition =
                serde_yaml_ng::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            crds.create(&PostParams::default(), &crd).await.unwrap();
        }
    }
    let namespaces: Api<Namespace> = Api::all(sim.client());
    for ns in ["fleet", "argocd"] {
        let body: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        namespaces
            .create(&PostParams::default(), &body)
            .await
            .unwrap();
    }
    let stop = CancellationToken::new();
    let (handle, changes) = Mirrors::spawn(Some(sim.client()), resync, stop.clone());
    Fixture {
        sim,
        handle,
        changes,
        stop,
    }
}

pub fn api(sim: &KubeSim, kind: MirrorKind, ns: Option<&str>) -> Api<DynamicObject> {
    let (group, version) = kind.api_version().rsplit_once('/').unwrap_or(("", "v1"));
    let gvk = GroupVersionKind::gvk(group, version, kind.kind());
    let resource = ApiResource::from_gvk_with_plural(&gvk, kind.plural());
    match ns {
        Some(ns) => Api::namespaced_with(sim.client(), ns, &resource),
        None => Api::all_with(sim.client(), &resource),
    }
}

/// Creates an object as `kubectl` would, with its own labels and (optionally) taints.
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

pub async fn object(sim: &KubeSim, kind: MirrorKind, ns: Option<&str>, name: &str) -> Value {
    serde_json::to_value(api(sim, kind, ns).get(name).await.unwrap()).unwrap()
}

pub fn labels(obj: &Value) -> BTreeMap<String, String> {
    serde_json::from_value(obj["metadata"]["labels"].clone()).unwrap_or_default()
}

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

pub fn input(reachable: bool, healthy: bool, sets: &[&str]) -> MirrorInput {
    MirrorInput {
        reachable,
        healthy,
        memberships: sets.iter().map(|s| (*s).to_owned()).collect(),
    }
}

pub fn mirror(kind: MirrorKind, name: &str, ns: Option<&str>) -> MirrorRef {
    let mut m = MirrorRef::new(kind.api_version(), kind.kind(), name);
    m.namespace = ns.map(str::to_owned);
    m
}

pub fn cluster(name: &str) -> ClusterId {
    ClusterId::new("fleet", name)
}

/// Waits until every mirror of `cluster` is in `state`.
pub async fn settled(f: &Fixture, cluster: &ClusterId, state: MirrorState) {
    let done = eventually(WAIT, || async {
        let s = f.handle.status(cluster);
        (!s.is_empty() && s.iter().all(|m| m.state == state)).then_some(())
    })
    .await;
    assert!(
        done.is_some(),
        "{cluster:?} never reached {state:?}: {:?}",
        f.handle.status(cluster)
    );
}

pub async fn next_change(f: &mut Fixture) -> MirrorChange {
    tokio::time::timeout(WAIT, f.changes.recv())
        .await
        .expect("a Mirrored change within the deadline")
        .expect("the mirror task is running")
}

pub fn patches(sim: &KubeSim, resource: &str) -> u64 {
    sim.write_count(resource, "patch")
}
