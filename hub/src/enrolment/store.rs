//! The embedded enrolment store: its own SQLite file, `enrolment.db` under `--data`, with
//! the bootstrap tokens (a hash of each secret, never the secret) and each cluster's key
//! set. The hub and the CLI (`fleetpulse-hub token ...`, `approve`, `key revoke`) open
//! the same file; who may write the data directory may administer enrolment.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, params};

use fleetpulse_common::enrol::keyset::KeySet;
use fleetpulse_common::enrol::token::TokenRecord;
use fleetpulse_common::protocol::report::ClusterId;

/// File name of the enrolment store under `--data`.
pub const FILE: &str = "enrolment.db";

/// The enrolment store could not be used.
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
    /// A stored record does not parse (written by an incompatible version, or edited).
    #[error("enrolment store {path}: record {key} is unreadable: {source}")]
    Record {
        /// The file.
        path: PathBuf,
        /// Which record.
        key: String,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
}

/// One connection to the enrolment store.
pub struct EnrolStore {
    conn: Connection,
    path: PathBuf,
}

impl EnrolStore {
    /// Opens (creating if needed) `dir/enrolment.db`.
    pub fn open(dir: &Path) -> Result<Self, EnrolStoreError> {
        let path = dir.join(FILE);
        let err = |source| EnrolStoreError::Sqlite {
            path: path.clone(),
            source,
        };
        let conn = Connection::open(&path).map_err(err)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(err)?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE IF NOT EXISTS tokens (id TEXT PRIMARY KEY, record TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS keysets (
                 namespace TEXT NOT NULL, name TEXT NOT NULL, keyset TEXT NOT NULL,
                 PRIMARY KEY (namespace, name));",
        )
        .map_err(err)?;
        Ok(Self { conn, path })
    }

    fn err(&self, source: rusqlite::Error) -> EnrolStoreError {
        EnrolStoreError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    fn parse<T: serde::de::DeserializeOwned>(
        &self,
        key: &str,
        json: &str,
    ) -> Result<T, EnrolStoreError> {
        serde_json::from_str(json).map_err(|source| EnrolStoreError::Record {
            path: self.path.clone(),
            key: key.to_owned(),
            source,
        })
    }

    /// Changes made by any connection since the last call return a different number
    /// (SQLite's `data_version`), so a cache knows when to reload.
    pub fn data_version(&self) -> Result<i64, EnrolStoreError> {
        self.conn
            .query_row("PRAGMA data_version", [], |r| r.get(0))
            .map_err(|e| self.err(e))
    }

    /// A token by id.
    pub fn token(&self, id: &str) -> Result<Option<TokenRecord>, EnrolStoreError> {
        let json: Option<String> = self
            .conn
            .query_row("SELECT record FROM tokens WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .optional()
            .map_err(|e| self.err(e))?;
        json.map(|j| self.parse(id, &j)).transpose()
    }

    /// Every token, by id.
    pub fn tokens(&self) -> Result<Vec<TokenRecord>, EnrolStoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, record FROM tokens ORDER BY id")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
            .map_err(|e| self.err(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))?;
        rows.iter().map(|(id, j)| self.parse(id, j)).collect()
    }

    /// Inserts or replaces a token.
    pub fn put_token(&self, record: &TokenRecord) -> Result<(), EnrolStoreError> {
        let json = serde_json::to_string(record).expect("a token record serializes");
        self.conn
            .execute(
                "INSERT OR REPLACE INTO tokens (id, record) VALUES (?1, ?2)",
                params![record.id, json],
            )
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// Every cluster's key set.
    pub fn keysets(&self) -> Result<Vec<KeySet>, EnrolStoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT namespace, name, keyset FROM keysets ORDER BY namespace, name")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    format!("{}/{}", r.get::<_, String>(0)?, r.get::<_, String>(1)?),
                    r.get::<_, String>(2)?,
                ))
            })
            .map_err(|e| self.err(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))?;
        rows.iter().map(|(id, j)| self.parse(id, j)).collect()
    }

    /// One cluster's key set (empty if it has none).
    pub fn keyset(&self, cluster: &ClusterId) -> Result<KeySet, EnrolStoreError> {
        let json: Option<String> = self
            .conn
            .query_row(
                "SELECT keyset FROM keysets WHERE namespace = ?1 AND name = ?2",
                params![cluster.namespace, cluster.name],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        match json {
            Some(j) => self.parse(&cluster.to_string(), &j),
            None => Ok(KeySet::new(cluster.clone())),
        }
    }

    /// Writes a key set and, in the same transaction, a token (a registration uses both).
    pub fn put(
        &mut self,
        keyset: &KeySet,
        token: Option<&TokenRecord>,
    ) -> Result<(), EnrolStoreError> {
        let tx = self
            .conn
            .transaction()
            .map_err(|e| EnrolStoreError::Sqlite {
                path: self.path.clone(),
                source: e,
            })?;
        let json = serde_json::to_string(keyset).expect("a key set serializes");
        let mut result = tx
            .execute(
                "INSERT OR REPLACE INTO keysets (namespace, name, keyset) VALUES (?1, ?2, ?3)",
                params![keyset.cluster.namespace, keyset.cluster.name, json],
            )
            .map(|_| ());
        if let (Ok(()), Some(token)) = (&result, token) {
            let json = serde_json::to_string(token).expect("a token record serializes");
            result = tx
                .execute(
                    "INSERT OR REPLACE INTO tokens (id, record) VALUES (?1, ?2)",
                    params![token.id, json],
                )
                .map(|_| ());
        }
        result
            .and_then(|()| tx.commit())
            .map_err(|source| EnrolStoreError::Sqlite {
                path: self.path.clone(),
                source,
            })
    }
}
