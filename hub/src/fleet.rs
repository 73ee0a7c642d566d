//! The fleet: the desired state (a [`Registry`] built from MemberCluster, ClusterSet, Set
//! and HealthPolicy objects) and each cluster's runtime state, behind one handle that the
//! ingest, the ticker and the read API share.
//!
//! Locking: the registry is an `Arc` swapped whole on reload (readers clone the `Arc`
//! under a short read lock); each cluster's runtime state has its own mutex, so
//! heartbeats for different clusters never contend.

pub mod cluster;
pub mod registry;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use ed25519_dalek::VerifyingKey;
use k8s_openapi::jiff::Timestamp;
use parking_lot::{Mutex, RwLock};

use fleetpulse_common::api::MemberCluster;
use fleetpulse_common::api::condition::{HEALTHY, REACHABLE, READY, Status};
use fleetpulse_common::protocol::errors::RejectCode;
use fleetpulse_common::protocol::replay::{self, Freshness, Rejection};
use fleetpulse_common::protocol::report::{
    AgentConfig, ClusterId, HeartbeatAnswer, HeartbeatReport,
};

pub use cluster::ClusterState;
pub use registry::{ClusterEntry, Objects, Registry};

use crate::health::Debounce;
use crate::metrics::{ConditionLabels, Metrics};
use crate::store::{Snapshot, StoreWriter, StoredCluster, Write};

/// Hub-wide settings the decisions use.
#[derive(Clone, Debug)]
pub struct Settings {
    /// This hub's identity; reports must carry it as `aud`.
    pub audience: String,
    /// The freshness window on `iat`/`exp`.
    pub freshness: Freshness,
    /// Debounce of `Healthy`.
    pub debounce: Debounce,
}

/// The shared fleet state.
pub struct Fleet {
    registry: RwLock<Arc<Registry>>,
    settings: Settings,
    store: StoreWriter,
    dirty_positions: Mutex<HashSet<ClusterId>>,
    metrics: Metrics,
    prometheus: prometheus_client::registry::Registry,
    /// Runtime state of every cluster this hub process knew, kept when a cluster leaves the
    /// manifests so that a re-added cluster keeps its replay protection.
    states: Mutex<HashMap<ClusterId, Arc<Mutex<ClusterState>>>>,
}

fn reject(code: RejectCode, message: String) -> Rejection {
    Rejection {
        code,
        message,
        last_accepted: None,
    }
}

impl Fleet {
    /// A fleet with an empty registry.
    pub fn new(settings: Settings, store: StoreWriter) -> Self {
        let mut prometheus = prometheus_client::registry::Registry::default();
        let metrics = Metrics::register(&mut prometheus);
        Self {
            registry: RwLock::new(Arc::new(Registry::default())),
            settings,
            store,
            dirty_positions: Mutex::new(HashSet::new()),
            metrics,
            prometheus,
            states: Mutex::new(HashMap::new()),
        }
    }

    /// Seeds runtime state from the store at start. Every restored cluster gets a full
    /// grace period from `now` before the detector judges it (startup grace).
    pub fn restore(&self, snapshot: Snapshot, now: Instant, wall: Timestamp) {
        let Snapshot {
            mut clusters,
            mut positions,
        } = snapshot;
        let ids: HashSet<ClusterId> = clusters.keys().chain(positions.keys()).cloned().collect();
        let mut states = self.states.lock();
        for id in ids {
            let state = ClusterState::restore(
                now,
                wall,
                clusters.remove(&id),
                positions.remove(&id).unwrap_or_default(),
            );
            states.insert(id, Arc::new(Mutex::new(state)));
        }
    }

    /// Installs new desired state built from `objects`. Returns the conflicts found, for
    /// the operator.
    pub fn reload(&self, objects: Objects, now: Instant, wall: Timestamp) -> Vec<String> {
        let (registry, problems) = {
            let mut states = self.states.lock();
            Registry::build(objects, |id| {
                states
                    .entry(id.clone())
                    .or_insert_with(|| {
                        Arc::new(Mutex::new(ClusterState::restore(
                            now,
                            wall,
                            None,
                            HashMap::new(),
                        )))
                    })
                    .clone()
            })
        };
        self.install(registry);
        problems
    }

    /// The current registry.
    pub fn registry(&self) -> Arc<Registry> {
        self.registry.read().clone()
    }

    /// Hub settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Replaces the desired state. Runtime state of clusters that remain is kept; new
    /// clusters get a fresh grace period from `now`; config generations move on change.
    fn install(&self, registry: Registry) {
        let mut writes = Vec::new();
        for entry in registry.clusters() {
            let mut state = entry.state.lock();
            if state.config_hash != entry.config_hash {
                state.config_generation += 1;
                state.config_hash = entry.config_hash;
                writes.push(Write::Cluster {
                    cluster: entry.id.clone(),
                    record: state.record(),
                });
            }
        }
        *self.registry.write() = Arc::new(registry);
        self.store.send(writes);
    }

    /// Finds the cluster and the key a JWS claims, applying the key rules: the key must
    /// exist, be bound to this cluster, and not be revoked.
    pub fn lookup(
        &self,
        cluster: &ClusterId,
        kid: &str,
    ) -> Result<(Arc<ClusterEntry>, VerifyingKey), Rejection> {
        let registry = self.registry();
        let Some(entry) = registry.cluster(cluster) else {
            return Err(reject(
                RejectCode::UnknownCluster,
                format!(
                    "no MemberCluster {cluster} on this hub; create it, or fix the agent's --cluster"
                ),
            ));
        };
        let Some(binding) = registry.key(kid) else {
            return Err(reject(
                RejectCode::UnknownKey,
                format!(
                    "key {kid} is not in spec.agent.publicKeys of any MemberCluster; add the \
                     agent's public key to MemberCluster {cluster}"
                ),
            ));
        };
        if binding.cluster != *cluster {
            return Err(reject(
                RejectCode::KeyNotForCluster,
                format!(
                    "key {kid} belongs to MemberCluster {}, not {cluster}",
                    binding.cluster
                ),
            ));
        }
        if binding.revoked {
            return Err(reject(
                RejectCode::KeyRevoked,
                format!(
                    "key {kid} of MemberCluster {cluster} is revoked; give the agent a new key"
                ),
            ));
        }
        Ok((entry.clone(), binding.key))
    }

    /// Admits a verified report and applies it: replay rules, liveness, health. Writes
    /// nothing unless every rule passed; persists status only if a condition changed.
    pub fn accept(
        &self,
        entry: &ClusterEntry,
        kid: &str,
        report: &HeartbeatReport,
        now: Instant,
        wall: Timestamp,
    ) -> Result<HeartbeatAnswer, Rejection> {
        let mut state = entry.state.lock();
        let last = state.positions.get(kid).copied();
        let pos = replay::admit(
            report,
            &self.settings.audience,
            &entry.id,
            last,
            wall.as_second(),
            self.settings.freshness,
        )?;
        state.positions.insert(kid.to_owned(), pos);
        state.record_heartbeat(kid, report, now, wall);
        let changed =
            !entry.object.spec.paused && state.health.report(report, self.settings.debounce, wall);
        let answer = HeartbeatAnswer {
            incarnation: pos.incarnation,
            accepted_seq: pos.seq,
            config_generation: state.config_generation,
            interval_seconds: entry.object.spec.heartbeat.interval_seconds,
        };
        let write = changed.then(|| state.record());
        drop(state);
        if let Some(record) = write {
            tracing::info!(cluster = %entry.id, seq = pos.seq, "cluster conditions changed on report");
            self.write_status(&entry.id, record);
        } else {
            self.dirty_positions.lock().insert(entry.id.clone());
        }
        Ok(answer)
    }

    /// Runs the failure detector over every cluster at `now`, persisting transitions.
    pub fn tick(&self, now: Instant, wall: Timestamp) {
        let mut counts: HashMap<(&'static str, Status), i64> = HashMap::new();
        for entry in self.registry().clusters() {
            let grace = entry.object.spec.heartbeat.grace_period_seconds;
            let mut state = entry.state.lock();
            for type_ in [REACHABLE, READY, HEALTHY] {
                *counts
                    .entry((type_, state.health.status(type_)))
                    .or_default() += 1;
            }
            if entry.object.spec.paused {
                continue;
            }
            let verdict = state
                .liveness
                .judge(now, std::time::Duration::from_secs(grace.into()));
            if state.health.observe(verdict, grace, wall) {
                let record = state.record();
                drop(state);
                tracing::warn!(cluster = %entry.id, ?verdict, "cluster became unreachable");
                self.write_status(&entry.id, record);
            }
        }
        for condition in [REACHABLE, READY, HEALTHY] {
            for status in [Status::True, Status::False, Status::Unknown] {
                let labels = ConditionLabels {
                    condition,
                    status: status.as_str(),
                };
                let count = counts.get(&(condition, status)).copied().unwrap_or(0);
                self.metrics.clusters.get_or_create(&labels).set(count);
            }
        }
    }

    /// Writes the positions accepted since the last flush, in one batch.
    pub fn flush_positions(&self) {
        let dirty: Vec<ClusterId> = self.dirty_positions.lock().drain().collect();
        let registry = self.registry();
        let writes: Vec<Write> = dirty
            .iter()
            .filter_map(|id| registry.cluster(id))
            .map(|e| Write::Positions {
                cluster: e.id.clone(),
                positions: e.state.lock().positions.clone(),
            })
            .collect();
        self.store.send(writes);
    }

    /// Flushes positions and waits until the store has written everything queued.
    pub fn sync(&self) {
        self.flush_positions();
        self.store.sync();
    }

    /// The effective config of a cluster, with its current generation.
    pub fn config(&self, entry: &ClusterEntry) -> AgentConfig {
        let mut config = entry.config.clone();
        config.generation = entry.state.lock().config_generation;
        config
    }

    /// Every MemberCluster with its live status, for the read API.
    pub fn member_clusters(&self) -> Vec<MemberCluster> {
        self.registry()
            .clusters()
            .map(|e| {
                let mut mc = e.object.clone();
                mc.status = Some(e.state.lock().live_status());
                mc
            })
            .collect()
    }

    /// How many status writes (transitions) were sent to the store since start.
    pub fn status_writes(&self) -> u64 {
        self.metrics.status_writes.get()
    }

    /// The hub's metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The metrics in the Prometheus text format.
    pub fn encode_metrics(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.prometheus)
            .expect("writing to a String cannot fail");
        out
    }

    fn write_status(&self, cluster: &ClusterId, record: StoredCluster) {
        self.metrics.status_writes.inc();
        self.dirty_positions.lock().insert(cluster.clone());
        self.store.send(vec![Write::Cluster {
            cluster: cluster.clone(),
            record,
        }]);
    }
}
