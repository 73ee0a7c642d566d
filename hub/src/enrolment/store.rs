//! The embedded enrolment store: its own SQLite file, `enrolment.db` under `--data`, with
//! the bootstrap tokens (a hash of each secret, never the secret) and each cluster's key
//! set. The hub and the CLI (`fleetpulse-hub token ...`, `approve`, `key revoke`) open
//! the same file; who may write the data directory may administer enrolment.

use std::path::{Path, PathBuf};

use parking_lot::Mutex;
use rusqlite::{Connection, OptionalExtension, params};

use fleetpulse_common::enrol::keyset::KeySet;
use fleetpulse_common::enrol::token::TokenRecord;
use fleetpulse_common::protocol::report::ClusterId;

pub use super::backend::EnrolStoreError;
use super::backend::{Backend, Versioned};

/// File name of the enrolment store under `--data`.
pub const FILE: &str = "enrolment.db";

/// One connection to the enrolment store.
pub struct EnrolStore {
    conn: Mutex<Connection>,
    path: PathBuf,
}

/// The revision of a stored row: a hash of its JSON, so a conditional write needs no column
/// of its own and works across processes.
fn revision(json: &str) -> String {
    fleetpulse_common::enrol::token::hash_secret(json)
}

/// The two tables and how a row is keyed.
#[derive(Clone, Copy)]
enum Table {
    Tokens,
    Keysets,
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
        Ok(Self {
            conn: Mutex::new(conn),
            path,
        })
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
            location: format!("enrolment store {}", self.path.display()),
            key: key.to_owned(),
            source,
        })
    }

    /// Every row of a table: its key and JSON.
    fn rows(&self, sql: &str) -> Result<Vec<(String, String)>, EnrolStoreError> {
        let conn = self.conn.lock();
        let mut stmt = conn.prepare(sql).map_err(|e| self.err(e))?;
        stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
            .map_err(|e| self.err(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))
    }

    /// Writes one row if its stored JSON still has `expected` as revision (`None`: absent).
    fn put_row(
        &self,
        table: Table,
        key: [&str; 2],
        json: &str,
        expected: Option<&str>,
        what: String,
    ) -> Result<(), EnrolStoreError> {
        let mut conn = self.conn.lock();
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| self.err(e))?;
        let stored: Option<String> = match table {
            Table::Tokens => {
                tx.query_row("SELECT record FROM tokens WHERE id = ?1", [key[0]], |r| {
                    r.get(0)
                })
            }
            Table::Keysets => tx.query_row(
                "SELECT keyset FROM keysets WHERE namespace = ?1 AND name = ?2",
                key,
                |r| r.get(0),
            ),
        }
        .optional()
        .map_err(|e| self.err(e))?;
        if stored.as_deref().map(revision).as_deref() != expected {
            return Err(EnrolStoreError::Conflict { what });
        }
        match table {
            Table::Tokens => tx.execute(
                "INSERT OR REPLACE INTO tokens (id, record) VALUES (?1, ?2)",
                [key[0], json],
            ),
            Table::Keysets => tx.execute(
                "INSERT OR REPLACE INTO keysets (namespace, name, keyset) VALUES (?1, ?2, ?3)",
                [key[0], key[1], json],
            ),
        }
        .map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))
    }
}

impl Backend for EnrolStore {
    fn creates_clusters(&self) -> bool {
        false
    }

    fn create_cluster(&self, cluster: &ClusterId, _: &str) -> Result<(), EnrolStoreError> {
        Err(EnrolStoreError::Conflict {
            what: format!(
                "MemberCluster {cluster} (an embedded hub reads MemberClusters from its manifest \
                 directory, it does not create them)"
            ),
        })
    }

    /// SQLite's `data_version`: changes with every commit of another connection.
    fn version(&self) -> Result<u64, EnrolStoreError> {
        let conn = self.conn.lock();
        conn.query_row("PRAGMA data_version", [], |r| r.get::<_, i64>(0))
            .map(|v| v as u64)
            .map_err(|e| self.err(e))
    }

    fn keysets(&self) -> Result<Vec<KeySet>, EnrolStoreError> {
        let rows = self.rows(
            "SELECT namespace || '/' || name, keyset FROM keysets ORDER BY namespace, name",
        )?;
        rows.iter().map(|(id, j)| self.parse(id, j)).collect()
    }

    fn tokens(&self) -> Result<Vec<TokenRecord>, EnrolStoreError> {
        let rows = self.rows("SELECT id, record FROM tokens ORDER BY id")?;
        rows.iter().map(|(id, j)| self.parse(id, j)).collect()
    }

    fn token(&self, id: &str) -> Result<Option<Versioned<TokenRecord>>, EnrolStoreError> {
        let json: Option<String> = self
            .conn
            .lock()
            .query_row("SELECT record FROM tokens WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .optional()
            .map_err(|e| self.err(e))?;
        json.map(|j| {
            Ok(Versioned {
                value: self.parse(id, &j)?,
                revision: Some(revision(&j)),
            })
        })
        .transpose()
    }

    fn keyset(&self, cluster: &ClusterId) -> Result<Versioned<KeySet>, EnrolStoreError> {
        let json: Option<String> = self
            .conn
            .lock()
            .query_row(
                "SELECT keyset FROM keysets WHERE namespace = ?1 AND name = ?2",
                params![cluster.namespace, cluster.name],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        match json {
            Some(j) => Ok(Versioned {
                value: self.parse(&cluster.to_string(), &j)?,
                revision: Some(revision(&j)),
            }),
            None => Ok(Versioned::new(KeySet::new(cluster.clone()))),
        }
    }

    fn put_token(&self, token: &Versioned<TokenRecord>) -> Result<(), EnrolStoreError> {
        let json = serde_json::to_string(&token.value).expect("a token record serializes");
        let id = token.value.id.as_str();
        let what = format!("bootstrap token {id}");
        self.put_row(
            Table::Tokens,
            [id, ""],
            &json,
            token.revision.as_deref(),
            what,
        )
    }

    fn put_keyset(&self, keyset: &Versioned<KeySet>) -> Result<(), EnrolStoreError> {
        let json = serde_json::to_string(&keyset.value).expect("a key set serializes");
        let c = &keyset.value.cluster;
        let what = format!("the key set of {c}");
        let key = [c.namespace.as_str(), c.name.as_str()];
        self.put_row(Table::Keysets, key, &json, keyset.revision.as_deref(), what)
    }
}
