//! The fleet: the desired state (a [`Registry`] built from MemberCluster, ClusterSet, Set
//! and HealthPolicy objects) and each cluster's runtime state, behind one handle that the
//! ingest, the ticker and the read API share.
//!
//! `fleet/accept.rs` applies an admitted heartbeat (the replay rule and the state update);
//! `fleet/persist.rs` restores the fleet from its store at start and writes to it.
//!
//! Locking: the registry is an `Arc` swapped whole on reload (readers clone the `Arc`
//! under a short read lock); each cluster's runtime state has its own mutex, so
//! heartbeats for different clusters never contend.

mod accept;
pub mod changed;
pub mod cluster;
pub mod history;
mod hub_checks;
pub mod overview;
mod persist;
mod ports;
pub mod read;
pub mod registry;
pub mod rollouts;
pub mod sets;
pub mod timeline;
pub mod transitions;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::jiff::Timestamp;
use parking_lot::{Mutex, RwLock};

use fleetpulse_common::api::condition::{HEALTHY, REACHABLE, READY, Status};
use fleetpulse_common::protocol::replay::Freshness;
use fleetpulse_common::protocol::report::{AgentConfig, ClusterId};

pub use accept::Admitted;
pub use changed::Changed;
pub use cluster::ClusterState;
pub use ports::{EnrolledKeys, MirrorStatuses, Ownership};
pub use registry::{Change, ClusterEntry, Objects, Registry, shared};
pub use sets::SetsState;

use crate::core::brake::BrakeSettings;
use crate::core::health::Debounce;
use crate::core::rollout::{RolloutBrake, RolloutSettings};
use crate::metrics::{ConditionLabels, Metrics};
use crate::store::{StoreWriter, Write};

/// Hub-wide settings the decisions use.
#[derive(Clone, Debug)]
pub struct Settings {
    /// This hub's identity; reports must carry it as `aud`.
    pub audience: String,
    /// The freshness window on `iat`/`exp`.
    pub freshness: Freshness,
    /// Debounce of `Healthy`.
    pub debounce: Debounce,
    /// The partition brake.
    pub brake: BrakeSettings,
    /// The rollout brake.
    pub rollout: RolloutSettings,
}

impl Default for Settings {
    /// Audience `fleetpulse` and the default freshness, debounce and brake.
    fn default() -> Self {
        Self {
            audience: "fleetpulse".into(),
            freshness: Freshness::default(),
            debounce: Debounce::default(),
            brake: BrakeSettings::default(),
            rollout: RolloutSettings::default(),
        }
    }
}

/// The shared fleet state.
pub struct Fleet {
    registry: RwLock<Arc<Registry>>,
    settings: Settings,
    store: StoreWriter,
    metrics: Metrics,
    prometheus: prometheus_client::registry::Registry,
    /// Runtime state of every cluster this hub process knew, kept when a cluster leaves the
    /// manifests so that a re-added cluster keeps its replay protection.
    states: Mutex<HashMap<ClusterId, Arc<Mutex<ClusterState>>>>,
    /// Notified when a HealthPolicy's status changes other than by an object change (the
    /// rollout brake tripping), so the Kubernetes mode writes it.
    pub policies_changed: Arc<tokio::sync::Notify>,
    /// Held while object changes are applied, so that two never race.
    applying: Mutex<()>,
    /// Set statuses and the partition brake; evaluation holds this lock throughout.
    sets: Mutex<SetsState>,
    /// The objects hub-side checks read (kept apart from the registry: they change often,
    /// and a change only affects the next check round).
    hub_objects: RwLock<Arc<Vec<serde_json::Value>>>,
    /// Keys enrolled with bootstrap tokens, consulted for keys no spec lists.
    enrolled: std::sync::OnceLock<Arc<dyn EnrolledKeys>>,
    /// Notified after every evaluation of the sets (a health transition, an object change,
    /// a brake change): what consumers of the decisions, such as mirrors, wait on.
    decided: Arc<tokio::sync::Notify>,
    /// What changed for the mirror feed since it last read the fleet.
    changed: Mutex<Changed>,
    /// The mirror writer, when the hub runs one: the read API shows its statuses.
    mirrors: std::sync::OnceLock<Arc<dyn MirrorStatuses>>,
    /// Set at a start whose store may not hold every position accepted before it: the
    /// start, in milliseconds since the epoch; no incarnation at or below it is accepted
    /// ([`fleetpulse_common::protocol::replay::check_floor`]).
    incarnation_floor: std::sync::OnceLock<u64>,
    /// When replicas share the fleet: which clusters this one judges (all without it).
    ownership: std::sync::OnceLock<Arc<dyn Ownership>>,
}

impl Fleet {
    /// A fleet with an empty registry.
    pub fn new(settings: Settings, store: StoreWriter) -> Self {
        let mut prometheus = prometheus_client::registry::Registry::default();
        let metrics = Metrics::register(&mut prometheus);
        Self {
            registry: RwLock::new(Arc::new(Registry::default())),
            applying: Mutex::new(()),
            sets: Mutex::new(SetsState::new(
                settings.brake,
                RolloutBrake::new(settings.rollout),
            )),
            policies_changed: Arc::new(tokio::sync::Notify::new()),
            settings,
            store,
            metrics,
            prometheus,
            states: Mutex::new(HashMap::new()),
            hub_objects: RwLock::new(Arc::new(Vec::new())),
            enrolled: std::sync::OnceLock::new(),
            decided: Arc::new(tokio::sync::Notify::new()),
            changed: Mutex::new(Changed::default()),
            mirrors: std::sync::OnceLock::new(),
            incarnation_floor: std::sync::OnceLock::new(),
            ownership: std::sync::OnceLock::new(),
        }
    }

    /// Notified after every evaluation of the sets; a waiter that was busy finds the
    /// notification stored (one, however many evaluations ran).
    pub fn decisions(&self) -> Arc<tokio::sync::Notify> {
        self.decided.clone()
    }

    /// Has the read API show the statuses of this mirror writer (set once).
    pub fn use_mirrors(&self, mirrors: Arc<dyn MirrorStatuses>) {
        let _ = self.mirrors.set(mirrors);
    }

    /// The statuses of `cluster`'s mirror objects (none without a mirror writer).
    pub fn mirror_statuses(
        &self,
        cluster: &ClusterId,
    ) -> Vec<fleetpulse_common::api::MirrorStatus> {
        self.mirrors
            .get()
            .map(|m| m.status(cluster))
            .unwrap_or_default()
    }

    /// Has the detector judge only the clusters `ownership` says this replica owns (set
    /// once): a cluster of a shard just taken gets a whole grace period to report here
    /// before it is judged, so a shard moving between replicas causes no false verdict.
    pub fn use_ownership(&self, ownership: Arc<dyn Ownership>) {
        let _ = self.ownership.set(ownership);
    }

    /// Has the heartbeat path also accept keys enrolled with bootstrap tokens (set once).
    pub fn use_enrolled_keys(&self, keys: Arc<dyn EnrolledKeys>) {
        let _ = self.enrolled.set(keys);
    }

    /// The keys enrolled with bootstrap tokens, if enrolment is on.
    pub fn enrolled_keys(&self) -> Option<&dyn EnrolledKeys> {
        self.enrolled.get().map(|k| k.as_ref())
    }

    /// Installs new desired state: `objects` is everything the source has now; only what
    /// differs from the current registry is applied. Returns the conflicts found, for the
    /// operator.
    pub fn reload(&self, mut objects: Objects, now: Instant, wall: Timestamp) -> Vec<String> {
        self.set_hub_objects(std::mem::take(&mut objects.hub_objects));
        let changes = self.registry().diff(&objects);
        self.apply(changes, now, wall)
    }

    /// Applies object changes: only the registry entries they reach are rebuilt, and the
    /// sets are evaluated again. Returns the conflicts found, for the operator.
    pub fn apply(&self, changes: Vec<Change>, now: Instant, wall: Timestamp) -> Vec<String> {
        if changes.is_empty() {
            return Vec::new();
        }
        let _one_at_a_time = self.applying.lock();
        let rollouts = rollouts::of(&changes);
        let clusters: Vec<ClusterId> = (changes.iter())
            .filter_map(|c| match c {
                Change::MemberCluster(id, _) => Some(id.clone()),
                _ => None,
            })
            .collect();
        let (registry, applied) = {
            let mut states = self.states.lock();
            self.registry().apply(
                changes,
                |id| {
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
                },
                wall,
            )
        };
        let reconfigured = self.install(registry, &applied.rebuilt);
        {
            let mut changed = self.changed.lock();
            for id in clusters.iter().chain(&applied.rebuilt) {
                changed.mark(id);
            }
        }
        self.mark_refused(&applied.verdicts, wall);
        self.follow_rollouts(rollouts, &reconfigured, wall);
        self.evaluate_sets(wall);
        applied.problems
    }

    /// Shows on a MemberCluster that its latest version was refused (`Accepted=False`,
    /// `ConditionDoesNotCompile`, naming the check and line) while its previous version
    /// stays in effect, and takes the condition away once a version is taken. A new
    /// MemberCluster refused has no state to carry it: the refusal is only logged.
    fn mark_refused(&self, verdicts: &[(ClusterId, Option<String>)], wall: Timestamp) {
        for (id, refused) in verdicts {
            let message = refused
                .as_ref()
                .map(|why| format!("{why}; the previous version stays in effect"));
            let value = message
                .as_deref()
                .map(|m| (Status::False, "ConditionDoesNotCompile", m));
            self.set_condition(id, fleetpulse_common::api::condition::ACCEPTED, value, wall);
        }
    }

    /// Replaces the objects hub-side checks read, from the next check round on.
    pub fn set_hub_objects(&self, objects: Vec<serde_json::Value>) {
        *self.hub_objects.write() = Arc::new(objects);
    }

    /// The objects hub-side checks read.
    pub fn hub_objects(&self) -> Arc<Vec<serde_json::Value>> {
        self.hub_objects.read().clone()
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
    /// clusters get a fresh grace period from `now`; the config generation of a `rebuilt`
    /// cluster moves if its config changed.
    /// Returns the clusters whose config changed from one they had.
    fn install(&self, registry: Registry, rebuilt: &[ClusterId]) -> Vec<ClusterId> {
        let mut reconfigured = Vec::new();
        for entry in rebuilt.iter().filter_map(|id| registry.cluster(id)) {
            let mut state = entry.state.lock();
            if state.config_hash != entry.config_hash {
                state.config_generation += 1;
                // A cluster that had a config before is reconfigured; one getting its
                // first (new to the hub, or a fresh start) is not a change of checks.
                if state.config_hash != 0 {
                    reconfigured.push(entry.id.clone());
                }
                state.config_hash = entry.config_hash;
                // Under the lock, as `write_status` explains.
                let (cluster, record) = (entry.id.clone(), state.record());
                self.store.send(vec![Write::Cluster { cluster, record }]);
            }
        }
        *self.registry.write() = Arc::new(registry);
        reconfigured
    }

    /// Runs the failure detector over every cluster at `now` (every cluster this replica
    /// owns, when replicas share the fleet), persisting transitions.
    /// Hub-side checks run on their own loop ([`Fleet::run_hub_checks`]), so a slow one
    /// never delays the detector or the brake.
    pub fn tick(&self, now: Instant, wall: Timestamp) {
        // Clusters per condition (REACHABLE, READY, HEALTHY) and status (True, False,
        // Unknown): a fixed table, no hashing per cluster.
        let mut counts = [[0i64; 3]; 3];
        let mut any_changed = false;
        // What the partition brake needs, gathered in the same pass (paused clusters excluded).
        let mut brake_samples = Vec::new();
        let ownership = self.ownership.get();
        for entry in self.registry().clusters() {
            let term = match ownership.map(|o| o.term(&entry.id)) {
                Some(None) => continue,
                Some(term) => term,
                None => None,
            };
            let spec = &entry.object.spec;
            let mut state = entry.state.lock();
            if let Some(term) = term
                && state.shard_term != term
            {
                // Just taken: whatever this replica last heard of it is stale.
                state.shard_term = term;
                state.core.liveness.reset_grace(now);
            }
            let ticked = (state.core).tick(&spec.heartbeat, spec.paused, now, wall);
            brake_samples.extend(ticked.brake_sample);
            for (row, type_) in CONDITIONS.into_iter().enumerate() {
                counts[row][status_index(state.core.health.status(type_))] += 1;
            }
            if ticked.changed {
                any_changed = true;
                self.write_status(&entry.id, &mut state);
                drop(state);
                let verdict = ticked.verdict;
                tracing::warn!(cluster = %entry.id, ?verdict, "cluster became unreachable");
            }
        }
        if self.drive_brake(now, wall, brake_samples) || any_changed {
            self.evaluate_sets(wall);
        }
        for (row, condition) in CONDITIONS.into_iter().enumerate() {
            for status in [Status::True, Status::False, Status::Unknown] {
                let labels = ConditionLabels {
                    condition,
                    status: status.as_str(),
                };
                let count = counts[row][status_index(status)];
                self.metrics.clusters.get_or_create(&labels).set(count);
            }
        }
    }

    /// The effective config of a cluster, with its current generation.
    pub fn config(&self, entry: &ClusterEntry) -> AgentConfig {
        let mut config = self.registry().config(entry);
        config.generation = entry.state.lock().config_generation;
        config
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
        let statuses = self.sets.lock().decisions.sets.statuses.clone();
        // Counted at scrape time, so a cluster deleted while marked stops counting.
        let shared = (self.registry().clusters())
            .filter(|e| e.state.lock().extra_status(cluster::SHARED_KEY) == Status::True)
            .count();
        self.metrics.shared_keys.set(shared as i64);
        self.metrics.scrape(&statuses, || {
            let registry = self.registry();
            let conditions = |e: &ClusterEntry| e.state.lock().core.health.conditions().to_vec();
            registry
                .clusters()
                .map(|e| (e.id.clone(), conditions(e)))
                .collect()
        });
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.prometheus)
            .expect("writing to a String cannot fail");
        out
    }
}

/// The conditions the `fleetpulse_clusters` gauge counts, in its table's row order.
const CONDITIONS: [&str; 3] = [REACHABLE, READY, HEALTHY];

fn status_index(status: Status) -> usize {
    match status {
        Status::True => 0,
        Status::False => 1,
        Status::Unknown => 2,
    }
}
