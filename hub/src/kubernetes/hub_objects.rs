//! [`HubObjects`]: the management cluster's objects that hub-side checks (`fromHub`
//! selectors) read, such as per-cluster KeptnMetric objects. One watch per kind that some
//! check names, started when a check first names it; a kind the management cluster does
//! not serve yields no objects and is looked up again later (its CRD may be installed
//! after the check).
//!
//! These objects change often (a metric may update every few seconds), so a change does
//! not rebuild the hub's registry: it only replaces the list the next check round reads.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use fleetpulse_common::api::{ClusterCheck, HealthPolicy, MemberCluster};

/// `(group, version, kind)` of a watched kind.
pub type Kind = (String, String, String);

/// The kinds the hub-side checks of these objects read.
pub fn kinds_read<'a>(
    clusters: impl IntoIterator<Item = &'a MemberCluster>,
    policies: impl IntoIterator<Item = &'a HealthPolicy>,
) -> BTreeSet<Kind> {
    let cluster_checks = clusters.into_iter().flat_map(|c| {
        c.spec
            .readiness_checks
            .iter()
            .chain(&c.spec.liveness_checks)
    });
    let policy_checks = policies.into_iter().flat_map(|p| {
        p.spec
            .readiness_checks
            .iter()
            .chain(&p.spec.liveness_checks)
    });
    cluster_checks
        .chain(policy_checks)
        .filter(|c: &&ClusterCheck| c.reads_hub())
        .flat_map(|c| &c.resource_selectors)
        .filter(|s| s.from_hub)
        .map(|s| (s.group.clone(), s.version.clone(), s.kind.clone()))
        .collect()
}

/// Watches of the kinds hub-side checks read.
pub struct HubObjects {
    client: kube::Client,
    stop: CancellationToken,
    /// Notified when a watched object changes.
    pub changed: Arc<Notify>,
    watched: BTreeMap<Kind, (ApiResource, Store<DynamicObject>)>,
}

impl HubObjects {
    /// No watches yet; they stop with `stop`.
    pub fn new(client: kube::Client, stop: CancellationToken) -> Self {
        Self {
            client,
            stop,
            changed: Arc::new(Notify::new()),
            watched: BTreeMap::new(),
        }
    }

    /// Starts a watch for each kind in `kinds` not watched yet; returns whether any kind is
    /// still missing (not served by the management cluster), to try again later. Watches
    /// of kinds no longer read keep running: they are few, and a check may come back.
    pub async fn watch(&mut self, kinds: &BTreeSet<Kind>) -> bool {
        let mut missing = false;
        let new: Vec<Kind> = kinds
            .iter()
            .filter(|k| !self.watched.contains_key(*k))
            .cloned()
            .collect();
        for kind in &new {
            let (group, version, name) = kind;
            let gvk = GroupVersionKind::gvk(group, version, name);
            let resource = match kube::discovery::pinned_kind(&self.client, &gvk).await {
                Ok((resource, _)) => resource,
                Err(e) => {
                    tracing::warn!(kind = %name, group = %group, version = %version, error = %e,
                        "a hub-side check reads a kind the management cluster does not serve; it sees no objects until the kind is installed");
                    missing = true;
                    continue;
                }
            };
            let store = self.reflect(&resource);
            let _ = store.wait_until_ready().await;
            self.watched.insert(kind.clone(), (resource, store));
        }
        missing
    }

    fn reflect(&self, resource: &ApiResource) -> Store<DynamicObject> {
        let writer = reflector::store::Writer::<DynamicObject>::new(resource.clone());
        let reader = writer.as_reader();
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), resource);
        let stream = reflector::reflector(writer, watcher(api, watcher::Config::default()))
            .default_backoff()
            .touched_objects();
        super::source::spawn_watch(
            stream,
            self.changed.clone(),
            self.stop.clone(),
            resource.kind.clone(),
        );
        reader
    }

    /// Every watched object, as JSON with its `apiVersion` and `kind` and without
    /// `managedFields`.
    pub fn objects(&self) -> Vec<Value> {
        self.watched
            .values()
            .flat_map(|(resource, store)| {
                store.state().into_iter().filter_map(move |o| {
                    let mut v = serde_json::to_value(&*o).ok()?;
                    v["apiVersion"] = Value::String(resource.api_version.clone());
                    v["kind"] = Value::String(resource.kind.clone());
                    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                        meta.remove("managedFields");
                    }
                    Some(v)
                })
            })
            .collect()
    }
}
