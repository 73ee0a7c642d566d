//! [`KubeSource`]: the hub's objects from the management cluster. A reflector watches each
//! of MemberCluster, ClusterSet, Set and HealthPolicy; each object that changes is applied
//! to the fleet on its own ([`Fleet::apply`]: only the registry entries it reaches are
//! rebuilt), as the `Arc` the reflector's store holds, so a label, set or cluster change
//! is acted on at once and no object is copied. After a watch relists, everything is
//! compared once, which finds objects deleted while the watch was lost. The objects hub-side
//! checks read are watched too ([`HubObjects`]), and only replace what the next check
//! round reads.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde::de::DeserializeOwned;
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use fleetpulse_common::api::{ClusterSet, HealthPolicy, MemberCluster, Set};

use super::events::Publisher;
use super::hub_objects::{self, HubObjects};
use super::policy_status;
use crate::fleet::{Change, Fleet, Objects};
use crate::ids::ClusterId;

/// How often kinds that hub-side checks read but the management cluster does not serve
/// are looked up again.
const MISSING_KIND_RETRY: Duration = Duration::from_secs(30);

/// The reflector stores of the hub's four kinds.
pub struct KubeSource {
    member_clusters: Store<MemberCluster>,
    cluster_sets: Store<ClusterSet>,
    sets: Store<Set>,
    health_policies: Store<HealthPolicy>,
    touched: mpsc::UnboundedReceiver<Touched>,
    hub_objects: HubObjects,
    client: kube::Client,
    /// Events about HealthPolicies (their status conditions changing).
    events: Publisher,
}

/// What a watch saw, once its reflector store has taken it in.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Touched {
    /// One object was added, changed or deleted: the store says which.
    Object(Kind, Option<String>, String),
    /// A watch listed everything again (at start or after a lost watch): objects deleted
    /// meanwhile are found by comparing everything once.
    Relisted,
}

/// The hub's four kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    MemberCluster,
    ClusterSet,
    Set,
    HealthPolicy,
}

fn reflect<K>(
    client: &kube::Client,
    kind: Kind,
    touched: mpsc::UnboundedSender<Touched>,
    stop: CancellationToken,
) -> Store<K>
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
    .default_backoff();
    let name = K::kind(&()).into_owned();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        loop {
            let event = tokio::select! {
                _ = stop.cancelled() => return,
                event = stream.next() => event,
            };
            let seen = match event {
                Some(Ok(watcher::Event::Apply(o) | watcher::Event::Delete(o))) => {
                    let meta = o.meta();
                    Touched::Object(
                        kind,
                        meta.namespace.clone(),
                        meta.name.clone().unwrap_or_default(),
                    )
                }
                Some(Ok(watcher::Event::InitDone)) => Touched::Relisted,
                Some(Ok(watcher::Event::Init | watcher::Event::InitApply(_))) => continue,
                Some(Err(e)) => {
                    tracing::warn!(kind = %name, error = %e, "watch failed; retrying");
                    continue;
                }
                None => return,
            };
            if touched.send(seen).is_err() {
                return;
            }
        }
    });
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
        let (tx, touched) = mpsc::unbounded_channel();
        Self {
            member_clusters: reflect(client, Kind::MemberCluster, tx.clone(), stop.clone()),
            cluster_sets: reflect(client, Kind::ClusterSet, tx.clone(), stop.clone()),
            sets: reflect(client, Kind::Set, tx.clone(), stop.clone()),
            health_policies: reflect(client, Kind::HealthPolicy, tx, stop.clone()),
            touched,
            hub_objects: HubObjects::new(client.clone(), stop.clone()),
            client: client.clone(),
            events: Publisher::new(client.clone(), None),
        }
    }

    /// Waits until every watch has listed once, including those of the kinds hub-side
    /// checks read; returns whether such a kind is not served yet.
    pub async fn ready(&mut self) -> bool {
        let _ = self.member_clusters.wait_until_ready().await;
        let _ = self.cluster_sets.wait_until_ready().await;
        let _ = self.sets.wait_until_ready().await;
        let _ = self.health_policies.wait_until_ready().await;
        self.watch_hub_kinds(None).await
    }

    /// What a standby does until it leads: keeps the watches current (they list once, then
    /// follow), and forgets which objects they touched, since taking over compares every
    /// object once. Never returns; drop the future when the replica takes over.
    pub async fn follow(&mut self) {
        let _ = self.ready().await;
        while self.touched.recv().await.is_some() {}
        std::future::pending::<()>().await
    }

    /// Watches the kinds the hub-side checks read: of every object, or only of the
    /// `changed` MemberClusters and HealthPolicies (a watch, once started, stays).
    async fn watch_hub_kinds(&mut self, changed: Option<&[Change]>) -> bool {
        let kinds = match changed {
            None => {
                let (clusters, policies) =
                    (self.member_clusters.state(), self.health_policies.state());
                hub_objects::kinds_read(
                    clusters.iter().map(AsRef::as_ref),
                    policies.iter().map(AsRef::as_ref),
                )
            }
            Some(changes) => {
                let clusters = changes.iter().filter_map(|c| match c {
                    Change::MemberCluster(_, Some(mc)) => Some(mc.as_ref()),
                    _ => None,
                });
                let policies = changes.iter().filter_map(|c| match c {
                    Change::HealthPolicy(_, Some(p)) => Some(p.as_ref()),
                    _ => None,
                });
                hub_objects::kinds_read(clusters, policies)
            }
        };
        self.hub_objects.watch(&kinds).await
    }

    /// The objects as the watches see them now (shared with the stores, not copied).
    pub fn objects(&self) -> Objects {
        Objects {
            member_clusters: self.member_clusters.state(),
            cluster_sets: self.cluster_sets.state(),
            sets: self.sets.state(),
            health_policies: self.health_policies.state(),
            hub_objects: self.hub_objects.objects(),
        }
    }

    /// The change each touched object stands for: its current version in the store, or
    /// its removal.
    fn change(&self, kind: Kind, namespace: Option<String>, name: String) -> Change {
        fn get<K>(store: &Store<K>, namespace: &Option<String>, name: &str) -> Option<Arc<K>>
        where
            K: Resource<DynamicType = ()> + Clone + 'static,
        {
            let mut at = ObjectRef::<K>::new(name);
            if let Some(ns) = namespace {
                at = at.within(ns);
            }
            store.get(&at)
        }
        let ns = namespace.clone().unwrap_or_else(|| "default".into());
        match kind {
            Kind::MemberCluster => Change::MemberCluster(
                ClusterId::new(&ns, &name),
                get(&self.member_clusters, &namespace, &name),
            ),
            Kind::ClusterSet => {
                Change::ClusterSet(name.clone(), get(&self.cluster_sets, &None, &name))
            }
            Kind::Set => Change::Set(
                ClusterId::new(&ns, &name),
                get(&self.sets, &namespace, &name),
            ),
            Kind::HealthPolicy => Change::HealthPolicy(
                (ns, name.clone()),
                get(&self.health_policies, &namespace, &name),
            ),
        }
    }

    /// Writes the HealthPolicy statuses the last change computed where the API differs.
    async fn write_policy_statuses(&mut self, fleet: &Fleet) {
        let on_api: Vec<HealthPolicy> = (self.health_policies.state().iter())
            .map(|p| (**p).clone())
            .collect();
        let computed = fleet.health_policies();
        let client = self.client.clone();
        policy_status::write(
            &client,
            &mut self.events,
            &on_api,
            &computed,
            Timestamp::now(),
        )
        .await;
    }

    /// Applies every watched change to the fleet, object by object, until `stop`.
    /// Changes arriving together are applied as one batch; after a watch relisted,
    /// everything is compared once. `missing`: whether a kind hub-side checks read was
    /// not served at the first look.
    pub async fn drive(mut self, fleet: Arc<Fleet>, mut missing: bool, stop: CancellationToken) {
        let hub_changed = self.hub_objects.changed.clone();
        let policies_changed = fleet.policies_changed.clone();
        // The first reload happened before the drive started.
        self.write_policy_statuses(&fleet).await;
        let mut retry = tokio::time::interval(MISSING_KIND_RETRY);
        retry.reset();
        loop {
            let mut touched = BTreeSet::new();
            tokio::select! {
                _ = stop.cancelled() => return,
                seen = self.touched.recv() => match seen {
                    Some(seen) => { touched.insert(seen); }
                    None => return,
                },
                _ = hub_changed.notified() => {
                    // Let a burst of events settle into one replacement.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    fleet.set_hub_objects(self.hub_objects.objects());
                    continue;
                }
                _ = retry.tick(), if missing => { touched.insert(Touched::Relisted); }
                _ = policies_changed.notified() => {
                    self.write_policy_statuses(&fleet).await;
                    continue;
                }
            }
            // Let a burst of events settle into one batch.
            tokio::time::sleep(Duration::from_millis(50)).await;
            while let Ok(seen) = self.touched.try_recv() {
                touched.insert(seen);
            }
            let problems = if touched.contains(&Touched::Relisted) {
                missing = self.watch_hub_kinds(None).await;
                fleet.reload(self.objects(), Instant::now(), Timestamp::now())
            } else {
                let changes: Vec<Change> = touched
                    .into_iter()
                    .filter_map(|t| match t {
                        Touched::Object(kind, ns, name) => Some(self.change(kind, ns, name)),
                        Touched::Relisted => None,
                    })
                    .collect();
                missing |= self.watch_hub_kinds(Some(&changes)).await;
                fleet.apply(changes, Instant::now(), Timestamp::now())
            };
            for problem in problems {
                tracing::error!(problem, "conflicting objects");
            }
            self.write_policy_statuses(&fleet).await;
        }
    }
}
