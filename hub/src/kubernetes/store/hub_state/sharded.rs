//! The hub state when replicas share the fleet: one object per Lease shard, written by
//! that shard's owner only, and read by the next owner when the shard moves to it.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;

use fleetpulse_common::protocol::replay::Position;
use fleetpulse_common::protocol::report::ClusterId;

use super::{DATA_KEY, ShardState, name};

/// A shard's state object could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ShardStateError {
    /// The API server refused or did not answer.
    #[error(
        "reading the hub state ConfigMap {object}: {source}; check the hub may get ConfigMaps in its namespace"
    )]
    Read {
        /// The ConfigMap (`namespace/name`).
        object: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// It does not hold the state's JSON.
    #[error(
        "the hub state ConfigMap {object} cannot be read ({source}); its clusters keep the positions this replica had and get a fresh grace period"
    )]
    Unreadable {
        /// The ConfigMap (`namespace/name`).
        object: String,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
}

/// Which Lease shard a replica owns, as the hub state asks it.
pub type OwnsShard = Arc<dyn Fn(u32) -> bool + Send + Sync>;

/// The Lease shards and which of them this replica owns.
#[derive(Clone)]
pub struct Sharded {
    /// How many shards the fleet is cut into (the shard Leases' count).
    pub shards: u32,
    /// Whether this replica owns a shard now.
    pub owns: OwnsShard,
}

impl Sharded {
    /// Whether this replica owns shard `k` now.
    pub fn owns(&self, k: u32) -> bool {
        (self.owns)(k)
    }
}

/// What a shard's last owner flushed of it: each cluster's accepted positions (per key
/// id) and when it was last heard from.
#[derive(Debug, Default, PartialEq)]
pub struct ShardSnapshot {
    /// Accepted positions per cluster and key id.
    pub positions: HashMap<ClusterId, HashMap<String, Position>>,
    /// When each cluster was last heard from.
    pub heard: HashMap<ClusterId, Timestamp>,
}

/// Reads shard `k` of `shards`' state object (empty when there is none yet): what a new
/// owner takes over before acting on the shard.
pub async fn read_shard(
    client: kube::Client,
    namespace: &str,
    shards: u32,
    k: u32,
) -> Result<ShardSnapshot, ShardStateError> {
    let name = name(shards, k);
    let api: Api<ConfigMap> = Api::namespaced(client, namespace);
    let object = format!("{namespace}/{name}");
    let read = api.get_opt(&name).await;
    let read = read.map_err(|source| ShardStateError::Read {
        object: object.clone(),
        source,
    });
    let Some(cm) = read? else {
        return Ok(ShardSnapshot::default());
    };
    let Some(json) = cm.data.as_ref().and_then(|d| d.get(DATA_KEY)) else {
        return Ok(ShardSnapshot::default());
    };
    let state: ShardState = (serde_json::from_str(json))
        .map_err(|source| ShardStateError::Unreadable { object, source })?;
    let mut snapshot = ShardSnapshot::default();
    for (key, entry) in state.clusters {
        let Ok(id) = ClusterId::parse(&key) else {
            continue;
        };
        let positions = (entry.positions.into_iter())
            .map(|(kid, (incarnation, seq))| (kid, Position { incarnation, seq }))
            .collect();
        snapshot.positions.insert(id.clone(), positions);
        if let Some(heard) = entry
            .heard
            .and_then(|ms| Timestamp::from_millisecond(ms).ok())
        {
            snapshot.heard.insert(id, heard);
        }
    }
    Ok(snapshot)
}
