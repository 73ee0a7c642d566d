//! [`KubeSource`]: the hub's objects from the management cluster. A reflector watches each
//! of MemberCluster, ClusterSet, Set and HealthPolicy; whenever any of them changes, the
//! hub rebuilds its registry from the reflectors' stores (the same path as a manifest
//! reload), so a label, set or cluster change is acted on at once. The objects hub-side
//! checks read are watched too ([`HubObjects`]), and only replace what the next check
//! round reads.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use fleetpulse_common::api::{ClusterSet, HealthPolicy, MemberCluster, Set};

use super::hub_objects::{self, HubObjects};
use super::policy_status;
use crate::fleet::{Fleet, Objects};

/// How often kinds that hub-side checks read but the management cluster does not serve
/// are looked up again.
const MISSING_KIND_RETRY: Duration = Duration::from_secs(30);

/// The reflector stores of the hub's four kinds.
pub struct KubeSource {
    member_clusters: Store<MemberCluster>,
    cluster_sets: Store<ClusterSet>,
    sets: Store<Set>,
    health_policies: Store<HealthPolicy>,
    changed: Arc<Notify>,
    hub_objects: HubObjects,
    client: kube::Client,
}

fn reflect<K>(client: &kube::Client, changed: Arc<Notify>, stop: CancellationToken) -> Store<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store::<K>();
    let stream = reflector::reflector(
        writer,
        watcher(Api::<K>::all(client.clone()), watcher::Config::default()),
    )
    .default_backoff()
    .touched_objects();
    spawn_watch(stream, changed, stop, K::kind(&()).into_owned());
    reader
}

/// Drives a reflector's stream until `stop`, notifying `changed` on every touched object
/// (the watcher retries failures with backoff; they are logged).
pub(super) fn spawn_watch<K>(
    stream: impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static,
    changed: Arc<Notify>,
    stop: CancellationToken,
    kind: String,
) {
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                event = stream.next() => match event {
                    Some(Ok(_)) => changed.notify_one(),
                    Some(Err(e)) => tracing::warn!(%kind, error = %e, "watch failed; retrying"),
                    None => return,
                },
            }
        }
    });
}

impl KubeSource {
    /// Starts the four watches; they stop with `stop`.
    pub fn start(client: &kube::Client, stop: &CancellationToken) -> Self {
        let changed = Arc::new(Notify::new());
        Self {
            member_clusters: reflect(client, changed.clone(), stop.clone()),
            cluster_sets: reflect(client, changed.clone(), stop.clone()),
            sets: reflect(client, changed.clone(), stop.clone()),
            health_policies: reflect(client, changed.clone(), stop.clone()),
            changed,
            hub_objects: HubObjects::new(client.clone(), stop.clone()),
            client: client.clone(),
        }
    }

    /// Waits until every watch has listed once, including those of the kinds hub-side
    /// checks read; returns whether such a kind is not served yet.
    pub async fn ready(&mut self) -> bool {
        let _ = self.member_clusters.wait_until_ready().await;
        let _ = self.cluster_sets.wait_until_ready().await;
        let _ = self.sets.wait_until_ready().await;
        let _ = self.health_policies.wait_until_ready().await;
        self.watch_hub_kinds().await
    }

    async fn watch_hub_kinds(&mut self) -> bool {
        let (clusters, policies) = (self.member_clusters.state(), self.health_policies.state());
        let kinds = hub_objects::kinds_read(
            clusters.iter().map(AsRef::as_ref),
            policies.iter().map(AsRef::as_ref),
        );
        self.hub_objects.watch(&kinds).await
    }

    /// The objects as the watches see them now.
    pub fn objects(&self) -> Objects {
        fn owned<K>(store: &Store<K>) -> Vec<K>
        where
            K: Resource<DynamicType = ()> + Clone + 'static,
        {
            store.state().into_iter().map(|o| (*o).clone()).collect()
        }
        Objects {
            member_clusters: owned(&self.member_clusters),
            cluster_sets: owned(&self.cluster_sets),
            sets: owned(&self.sets),
            health_policies: owned(&self.health_policies),
            hub_objects: self.hub_objects.objects(),
        }
    }

    /// Writes the HealthPolicy statuses the last reload computed where the API differs.
    async fn write_policy_statuses(&self, fleet: &Fleet) {
        let on_api: Vec<HealthPolicy> = (self.health_policies.state().iter())
            .map(|p| (**p).clone())
            .collect();
        let computed = fleet.registry().health_policies();
        policy_status::write(&self.client, &on_api, &computed, Timestamp::now()).await;
    }

    /// Reloads the fleet whenever a watched object changes, until `stop`. Changes arriving
    /// together are applied as one reload.
    /// `missing`: whether a kind hub-side checks read was not served at the first look.
    pub async fn drive(mut self, fleet: Arc<Fleet>, mut missing: bool, stop: CancellationToken) {
        let hub_changed = self.hub_objects.changed.clone();
        // The first reload happened before the drive started.
        self.write_policy_statuses(&fleet).await;
        let mut retry = tokio::time::interval(MISSING_KIND_RETRY);
        retry.reset();
        loop {
            let reload = tokio::select! {
                _ = stop.cancelled() => return,
                _ = self.changed.notified() => true,
                _ = hub_changed.notified() => false,
                _ = retry.tick(), if missing => true,
            };
            // Let a burst of events settle into one reload.
            tokio::time::sleep(Duration::from_millis(50)).await;
            if reload {
                missing = self.watch_hub_kinds().await;
                for problem in fleet.reload(self.objects(), Instant::now(), Timestamp::now()) {
                    tracing::error!(problem, "conflicting objects");
                }
                self.write_policy_statuses(&fleet).await;
            } else {
                fleet.set_hub_objects(self.hub_objects.objects());
            }
        }
    }
}
