//! The hub-state consumer: what a new leader must know to go on where the last one
//! stopped, kept on the API server at a bounded rate. Each cluster's accepted positions
//! (per key id) and the time the hub last heard from it live in ConfigMaps, one per shard
//! of about [`CLUSTERS_PER_SHARD`] clusters, written once per flush (every
//! `--seq-flush-seconds`) when a cluster of the shard reported, never per heartbeat: the
//! API writes per hour are the shards times the flushes, O(clusters / shard size).
//!
//! A ConfigMap is named `fleetpulse-hub-state-S-K` (shard `K` of `S`, a power of two, the
//! clusters mapped by [`shard_of`]) and labelled [`STATE_LABEL`]. When the fleet grows or
//! shrinks past a power of two, every shard is written at the new count and the objects of
//! the old count are deleted; a reader merges whatever it finds, newest flush first.
//!
//! A new leader trusts the state ([`PositionsKept::All`]) when every shard is there and
//! the last flush (the newest object: a shard not written then had nothing new) was a
//! clean stop's or within [`StateSettings::max_age`] (a flush interval plus the lease
//! duration: the most a leader that crashed can have left unflushed before a standby
//! takes over). Otherwise it restores what it finds and refuses every incarnation from
//! before its start, as before this state existed.
//!
//! When hub replicas share the fleet ([`HubState::sharded`]) the objects follow the shard
//! Leases instead: object `K` of `S` holds the clusters of Lease shard `K`, and a replica
//! writes only the objects of the shards it owns, so a shard's new owner reads its
//! predecessor's last flush of it ([`read_shard`]).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde::{Deserialize, Serialize};

use fleetpulse_common::protocol::replay::Position;
use fleetpulse_common::protocol::report::ClusterId;

mod sharded;

pub use sharded::{OwnsShard, ShardSnapshot, ShardStateError, Sharded, read_shard};

use super::api_error;
use crate::ids::shard_of;
use crate::store::{PositionsKept, Snapshot, StoreError, Write};

/// About how many clusters one state object holds (about 150 KB of JSON).
pub const CLUSTERS_PER_SHARD: usize = 1000;
/// The label every state object carries, `true`.
pub const STATE_LABEL: &str = "fleetpulse.io/hub-state";
/// The prefix of the state objects' names.
const PREFIX: &str = "fleetpulse-hub-state";
/// The field manager of the state writes.
const FIELD_MANAGER: &str = "fleetpulse-hub";
/// The data key holding a shard's JSON.
const DATA_KEY: &str = "state.json";

/// Where the state lives and how old it may be to be trusted.
#[derive(Clone, Debug)]
pub struct StateSettings {
    /// The hub's namespace.
    pub namespace: String,
    /// This replica (recorded as the writer).
    pub holder: String,
    /// The oldest state a new leader trusts: the flush interval plus the lease duration.
    pub max_age: Duration,
}

/// One shard's object, as JSON.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ShardState {
    /// When it was written, on the writer's clock (milliseconds since the epoch).
    flushed_at_ms: i64,
    /// Which replica wrote it.
    holder: String,
    /// Written by a clean stop: nothing was accepted after it.
    clean: bool,
    /// Per cluster (`namespace/name`).
    clusters: BTreeMap<String, ClusterState>,
}

/// What one cluster's entry holds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct ClusterState {
    /// When the hub last accepted a report, in milliseconds since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    heard: Option<i64>,
    /// The accepted `[incarnation, seq]` per key id.
    positions: BTreeMap<String, (u64, u64)>,
}

/// The state objects' shard count for a fleet of `clusters`: a power of two, at least one.
pub fn shards_for(clusters: usize) -> u32 {
    let wanted = clusters.div_ceil(CLUSTERS_PER_SHARD).max(1);
    u32::try_from(wanted.next_power_of_two()).unwrap_or(1 << 31)
}

fn name(shards: u32, shard: u32) -> String {
    format!("{PREFIX}-{shards}-{shard}")
}

/// `(shard count, shard)` of a state object's name.
fn parse_name(object: &str) -> Option<(u32, u32)> {
    let rest = object.strip_prefix(PREFIX)?.strip_prefix('-')?;
    let (count, shard) = rest.split_once('-')?;
    Some((count.parse().ok()?, shard.parse().ok()?))
}

/// Keeps the state objects: what they hold, and which shards changed since the last flush.
pub struct HubState {
    api: Api<ConfigMap>,
    settings: StateSettings,
    clusters: HashMap<ClusterId, ClusterState>,
    /// The clusters whose entry changed since the last flush.
    changed: HashSet<ClusterId>,
    /// The shard counts of the objects on the API server.
    written: BTreeSet<u32>,
    /// When replicas share the fleet: the Lease shards, and which this replica owns.
    sharded: Option<Sharded>,
}

impl HubState {
    /// A writer of the state objects in `settings.namespace`.
    pub fn new(client: kube::Client, settings: StateSettings) -> Self {
        Self {
            api: Api::namespaced(client, &settings.namespace),
            settings,
            clusters: HashMap::new(),
            changed: HashSet::new(),
            written: BTreeSet::new(),
            sharded: None,
        }
    }

    /// Keeps the objects by Lease shard, writing only the shards this replica owns.
    pub fn sharded(mut self, sharded: Sharded) -> Self {
        self.sharded = Some(sharded);
        self
    }

    /// Reads every state object into `snapshot` (positions and last-heard times) and says
    /// whether they can be trusted; remembers what it read. A state that cannot be read
    /// is logged and counts as stale: the hub starts as it would without it.
    pub async fn load(&mut self, snapshot: &mut Snapshot, now: Timestamp) {
        let selector = format!("{STATE_LABEL}=true");
        let list = match self
            .api
            .list(&ListParams::default().labels(&selector))
            .await
        {
            Ok(list) => list,
            Err(e) => {
                let namespace = &self.settings.namespace;
                tracing::error!(error = %e, %namespace, "cannot list the hub state ConfigMaps ({selector}); starting as without them: check the hub may list, create and patch ConfigMaps in {namespace}");
                snapshot.positions_kept = PositionsKept::Stale;
                return;
            }
        };
        let mut shards: Vec<(String, ShardState)> = Vec::new();
        let mut unreadable = Vec::new();
        let mut found: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
        for cm in list {
            let object = cm.metadata.name.clone().unwrap_or_default();
            if let Some((count, shard)) = parse_name(&object) {
                found.entry(count).or_default().insert(shard);
            }
            let parsed = (cm.data.as_ref())
                .and_then(|d| d.get(DATA_KEY))
                .map(|json| serde_json::from_str::<ShardState>(json));
            match parsed {
                Some(Ok(state)) => shards.push((object, state)),
                Some(Err(e)) => unreadable.push(format!("{object}: {e}")),
                None => unreadable.push(format!("{object}: no {DATA_KEY}")),
            }
        }
        self.written = found.keys().copied().collect();
        // The writer's last flush: a shard it did not write then had nothing new.
        let newest = (shards.iter()).max_by_key(|(_, s)| s.flushed_at_ms);
        // Every shard of the newest count must be there: a missing one lost its clusters.
        if let Some((count, _)) = newest.and_then(|(object, _)| parse_name(object))
            && found
                .get(&count)
                .is_none_or(|have| have.len() < count as usize)
        {
            unreadable.push(format!(
                "{PREFIX}-{count}-*: some of its {count} shards are missing"
            ));
        }
        for problem in &unreadable {
            tracing::error!(
                problem,
                "a hub state ConfigMap cannot be read; its clusters' positions are taken as lost"
            );
        }
        let oldest = now.as_millisecond() - self.settings.max_age.as_millis() as i64;
        let current = newest.is_none_or(|(_, s)| s.clean || s.flushed_at_ms >= oldest);
        snapshot.positions_kept = match (newest, current && unreadable.is_empty()) {
            (None, true) => PositionsKept::NotStored,
            (Some(_), true) => PositionsKept::All,
            _ => {
                let last_flush_ms = newest.map(|(_, s)| s.flushed_at_ms);
                tracing::warn!(
                    ?last_flush_ms,
                    max_age_s = self.settings.max_age.as_secs(),
                    "the hub state was last flushed longer ago than a flush interval plus the lease duration, or part of it is missing"
                );
                PositionsKept::Stale
            }
        };
        // Newest flush last, so it wins where a cluster is in two objects.
        shards.sort_by_key(|(_, s)| s.flushed_at_ms);
        for (_, shard) in shards {
            for (key, state) in shard.clusters {
                let Ok(id) = ClusterId::parse(&key) else {
                    continue;
                };
                self.clusters.insert(id, state);
            }
        }
        for (id, state) in &self.clusters {
            let positions = (state.positions.iter())
                .map(|(kid, &(incarnation, seq))| (kid.clone(), Position { incarnation, seq }))
                .collect();
            snapshot.positions.insert(id.clone(), positions);
            if let Some(heard) = state
                .heard
                .and_then(|ms| Timestamp::from_millisecond(ms).ok())
            {
                snapshot.heard.insert(id.clone(), heard);
            }
        }
    }

    /// Records what `write` says of a cluster's positions and last-heard time.
    pub fn apply(&mut self, write: &Write) {
        let Write::Positions {
            cluster,
            positions,
            heard,
        } = write
        else {
            return;
        };
        let state = ClusterState {
            heard: heard.map(|t| t.as_millisecond()),
            positions: (positions.iter())
                .map(|(kid, p)| (kid.clone(), (p.incarnation, p.seq)))
                .collect(),
        };
        if self.clusters.get(cluster) != Some(&state) {
            self.changed.insert(cluster.clone());
            self.clusters.insert(cluster.clone(), state);
        }
    }

    /// Writes every shard that changed since the last flush (every shard, and marked clean,
    /// when `clean`; every shard when the shard count changed, then deletes the objects of
    /// other counts). A failure is logged and the shards are written again at the next
    /// flush: the hub state must never hold up the status writes queued with it.
    pub async fn flush(&mut self, clean: bool) {
        self.flush_at(clean, Timestamp::now()).await;
    }

    /// [`HubState::flush`], stamping the objects written with `now`.
    pub async fn flush_at(&mut self, clean: bool, now: Timestamp) {
        if let Err(e) = self.try_flush(clean, now.as_millisecond()).await {
            let namespace = &self.settings.namespace;
            tracing::error!(error = %e, %namespace, "cannot write the hub state; a new leader would refuse agent incarnations from before its start once: check the hub may create, patch and delete ConfigMaps in {namespace}");
        }
    }

    async fn try_flush(&mut self, clean: bool, now: i64) -> Result<(), StoreError> {
        let shards = (self.sharded.as_ref()).map_or(shards_for(self.clusters.len()), |s| s.shards);
        let mut dirty: BTreeSet<u32> = (self.changed.iter())
            .map(|id| shard_of(id, shards))
            .collect();
        // A new shard count (or a clean stop) writes every shard, empty ones included, so
        // a reader can tell a missing object from an empty shard.
        if clean || self.written != BTreeSet::from([shards]) && !self.clusters.is_empty() {
            dirty.extend(0..shards);
        }
        if let Some(sharded) = &self.sharded {
            // Only the owner of a shard writes its object.
            dirty.retain(|&k| sharded.owns(k));
        }
        if dirty.is_empty() {
            return Ok(());
        }
        let mut contents: BTreeMap<u32, ShardState> = BTreeMap::new();
        for (id, state) in &self.clusters {
            let shard = shard_of(id, shards);
            if dirty.contains(&shard) {
                let entry = contents.entry(shard).or_default();
                entry.clusters.insert(id.to_string(), state.clone());
            }
        }
        for shard in dirty {
            let mut state = contents.remove(&shard).unwrap_or_default();
            state.flushed_at_ms = now;
            state.holder.clone_from(&self.settings.holder);
            state.clean = clean;
            self.write(shards, shard, &state).await?;
        }
        // Only once every shard is written: a failed write is retried with the batch.
        self.changed.clear();
        self.written.insert(shards);
        for &old in &self.written.clone() {
            // Replicas sharing the fleet all write the one count of the Lease shards.
            if old != shards && self.sharded.is_none() {
                self.delete(old).await?;
                self.written.remove(&old);
            }
        }
        Ok(())
    }

    async fn write(&self, shards: u32, shard: u32, state: &ShardState) -> Result<(), StoreError> {
        let object = name(shards, shard);
        let json = serde_json::to_string(state).expect("the hub state always serializes");
        let body = serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": object,
                "namespace": self.settings.namespace,
                "labels": {STATE_LABEL: "true", "app.kubernetes.io/name": "fleetpulse-hub"},
            },
            "data": {DATA_KEY: json},
        });
        let params = PatchParams::apply(FIELD_MANAGER).force();
        (self.api.patch(&object, &params, &Patch::Apply(&body)).await)
            .map(drop)
            .map_err(|e| api_error(format!("writing the hub state ConfigMap {object}"), e))
    }

    async fn delete(&self, shards: u32) -> Result<(), StoreError> {
        for shard in 0..shards {
            let object = name(shards, shard);
            match self.api.delete(&object, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => {
                    return Err(api_error(
                        format!("deleting the hub state ConfigMap {object}"),
                        e,
                    ));
                }
            }
        }
        Ok(())
    }
}
