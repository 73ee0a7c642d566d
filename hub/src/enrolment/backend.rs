//! Where enrolment state lives: the bootstrap tokens and each cluster's key set. Embedded
//! mode keeps them in [`EnrolStore`](super::store::EnrolStore) (SQLite under `--data`),
//! Kubernetes mode in [`SecretStore`](super::secrets::SecretStore) (Secrets of the hub's
//! namespace). The hub and the CLI use either through [`Backend`].
//!
//! Writes are conditional: each record carries the revision it was read at, and a write
//! fails with [`EnrolStoreError::Conflict`] if somebody else wrote it since, so a token
//! stays single-use even when two hub replicas or the CLI write at the same moment.

use std::path::PathBuf;

use fleetpulse_common::enrol::keyset::KeySet;
use fleetpulse_common::enrol::token::TokenRecord;
use fleetpulse_common::protocol::report::ClusterId;

/// A record as read, with the revision a conditional write compares against (`None`: it
/// did not exist, so writing it creates it).
#[derive(Clone, Debug)]
pub struct Versioned<T> {
    /// The record.
    pub value: T,
    /// The revision it was read at.
    pub revision: Option<String>,
}

impl<T> Versioned<T> {
    /// A record that does not exist yet.
    pub fn new(value: T) -> Self {
        Self {
            value,
            revision: None,
        }
    }
}

/// Enrolment state, wherever it is kept.
pub trait Backend: Send + Sync {
    /// A number that changes whenever somebody else changed the state (another process,
    /// or anything the watch saw), so a cache knows when to reload.
    fn version(&self) -> Result<u64, EnrolStoreError>;

    /// Every cluster's key set.
    fn keysets(&self) -> Result<Vec<KeySet>, EnrolStoreError>;

    /// Every token.
    fn tokens(&self) -> Result<Vec<TokenRecord>, EnrolStoreError>;

    /// A token by id.
    fn token(&self, id: &str) -> Result<Option<Versioned<TokenRecord>>, EnrolStoreError>;

    /// One cluster's key set (empty, with no revision, if it has none).
    fn keyset(&self, cluster: &ClusterId) -> Result<Versioned<KeySet>, EnrolStoreError>;

    /// Writes a token, only if it is still at `token.revision`.
    fn put_token(&self, token: &Versioned<TokenRecord>) -> Result<(), EnrolStoreError>;

    /// Writes a key set, only if it is still at `keyset.revision`.
    fn put_keyset(&self, keyset: &Versioned<KeySet>) -> Result<(), EnrolStoreError>;

    /// Whether the hub keeping this state can create MemberClusters on registration
    /// (Kubernetes mode; an embedded hub reads them from files).
    fn creates_clusters(&self) -> bool;

    /// Creates an empty MemberCluster `cluster` for a registration with `token_id` (one that
    /// exists already is left as it is). Only where [`Backend::creates_clusters`].
    fn create_cluster(&self, cluster: &ClusterId, token_id: &str) -> Result<(), EnrolStoreError>;
}

/// Enrolment state could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum EnrolStoreError {
    /// SQLite failed.
    #[error(
        "enrolment store {path}: {source}; check that --data is the hub's data directory and \
         is writable by this user"
    )]
    Sqlite {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: rusqlite::Error,
    },
    /// The Kubernetes API refused or failed.
    #[error("{what} in namespace {namespace}: {source}; check this identity's RBAC for it")]
    Kube {
        /// What was being done.
        what: String,
        /// The namespace.
        namespace: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// A stored record does not parse (written by an incompatible version, or edited).
    #[error("{location}: record {key} is unreadable: {source}")]
    Record {
        /// Where it is kept.
        location: String,
        /// Which record.
        key: String,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// Somebody else wrote the record since it was read; read it again and retry.
    #[error("{what} was changed by somebody else meanwhile; try again")]
    Conflict {
        /// Which record.
        what: String,
    },
}
