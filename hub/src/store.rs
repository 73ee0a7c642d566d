//! Where the hub keeps what must survive a restart: each cluster's status (written on
//! transitions), each set's status (its selection, for stickiness across restarts) and the
//! last accepted `(incarnation, seq)` per key (flushed in batches).
//!
//! [`Store`] is the seam; [`sqlite::SqliteStore`] is the embedded implementation (the
//! tests' in-memory double lives in the `testing` module); the Kubernetes mode implements
//! the same trait over CR status
//! ([`crate::kubernetes::store::KubeStore`]). Writes go
//! through a [`StoreWriter`] ([`writer`]): a thread that applies queued writes in one
//! transaction per batch, so the heartbeat path never waits on disk, and retries a failed
//! batch with backoff.

pub mod sqlite;
pub mod writer;

use std::collections::HashMap;

use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

use fleetpulse_common::api::{MemberClusterStatus, SetStatus};
use fleetpulse_common::protocol::replay::Position;
use fleetpulse_common::protocol::report::ClusterId;

use crate::ids::SetKey;

pub use writer::{RetrySettings, StoreWriter};

/// A store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be opened, read or written.
    #[error(
        "embedded store {path}: {source}; check that --data is writable and not used by another hub"
    )]
    Sqlite {
        /// The database file.
        path: String,
        /// The cause.
        #[source]
        source: rusqlite::Error,
    },
    /// The Kubernetes API refused a read or write.
    #[error("Kubernetes API: {what}: {source}")]
    Kube {
        /// What was being read or written.
        what: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The database file is not SQLite or is corrupt: the hub does not start empty over
    /// it.
    #[error(
        "embedded store {path}: {problem}; the hub does not start with empty state over it: \
         restore the file from a backup, or move it and any {path}-wal beside it aside to start \
         afresh (each cluster is then judged from its next reports and each set selects anew)"
    )]
    Corrupt {
        /// The database file.
        path: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The WAL could not be copied into the database file at shutdown.
    #[error(
        "embedded store {path}: checkpoint incomplete: {problem}; the state is kept in the \
         {path}-wal file: keep it beside the database"
    )]
    Checkpoint {
        /// The database file.
        path: String,
        /// What was left.
        problem: String,
    },
    /// A stored record could not be decoded.
    #[error("embedded store: record of {cluster} is unreadable: {source}")]
    Decode {
        /// The cluster whose record is bad.
        cluster: String,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
}

/// What the store keeps per cluster.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredCluster {
    /// The status at the last transition.
    pub status: MemberClusterStatus,
    /// Hash of the effective config that `status.configGeneration` stands for.
    pub config_hash: u64,
}

/// Which of the positions accepted before the last stop a [`Snapshot`] holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PositionsKept {
    /// Every one: the last stop was clean, or the store is new.
    #[default]
    All,
    /// Those of the last flush: the last stop was not clean (a crash, a kill, a lost WAL
    /// file), so the positions accepted after that flush are lost.
    UntilLastFlush,
    /// None: this store keeps no positions yet (Kubernetes mode before any hub state was
    /// written).
    NotStored,
    /// Those of a state too old to trust (Kubernetes mode): the hub state on the API server
    /// was written longer ago than a flush interval plus the lease duration, or some of it
    /// is missing or unreadable, so positions accepted after it may be lost.
    Stale,
}

/// Everything the store holds, read once at start.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Records per cluster.
    pub clusters: HashMap<ClusterId, StoredCluster>,
    /// Accepted positions per cluster and key id.
    pub positions: HashMap<ClusterId, HashMap<String, Position>>,
    /// When the hub last accepted a report from each cluster, where the store keeps it
    /// (the Kubernetes mode's hub state), on the wall clock.
    pub heard: HashMap<ClusterId, Timestamp>,
    /// Status of every ClusterSet and Set (the previous selection, for stickiness).
    pub sets: HashMap<SetKey, SetStatus>,
    /// Whether `positions` are all the hub had accepted; if not, the hub refuses every
    /// incarnation from before its start ([`fleetpulse_common::protocol::replay::check_floor`]).
    pub positions_kept: PositionsKept,
}

/// One write.
#[derive(Clone, Debug)]
pub enum Write {
    /// Replace a cluster's record.
    Cluster {
        /// Which cluster.
        cluster: ClusterId,
        /// The record.
        record: StoredCluster,
    },
    /// Replace a set's status.
    Set {
        /// Which set.
        key: SetKey,
        /// Its status.
        status: SetStatus,
    },
    /// Upsert a cluster's accepted positions.
    Positions {
        /// Which cluster.
        cluster: ClusterId,
        /// Position per key id.
        positions: HashMap<String, Position>,
        /// When the hub last accepted a report from it, on the wall clock.
        heard: Option<Timestamp>,
    },
}

/// Durable hub state.
pub trait Store: Send + 'static {
    /// Reads everything.
    fn load(&mut self) -> Result<Snapshot, StoreError>;
    /// Applies writes atomically.
    fn apply(&mut self, writes: &[Write]) -> Result<(), StoreError>;
    /// Called at a clean shutdown once every write was applied: makes the state durable on
    /// its own and records that the stop was clean, so that the next [`Store::load`] says
    /// [`PositionsKept::All`] (the embedded store checkpoints its WAL into the database file
    /// with a clean-stop mark); nothing to do by default.
    fn clean_stop(&mut self) -> Result<(), StoreError> {
        Ok(())
    }
}
