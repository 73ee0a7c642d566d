//! The embedded store: one SQLite file (`fleetpulse.db` under `--data`), WAL mode.
//!
//! Opening verifies the file (`PRAGMA quick_check`) and writes to it, so a file that is
//! not SQLite, is corrupt or cannot be written stops the hub with an error naming the file
//! and the fix, rather than starting it empty. A clean shutdown checkpoints the WAL into
//! the database file ([`Store::clean_stop`]), so the state after it lives in
//! `fleetpulse.db` alone, and marks the stop clean ([`stop`]): after any other stop the
//! snapshot says that the positions accepted since the last flush are lost. One unreadable
//! record is logged with its key and skipped.

mod check;
mod load;
mod stop;

use std::path::Path;

use rusqlite::{Connection, params};

use super::{PositionsKept, Snapshot, Store, StoreError, Write};
use crate::ids::SetKey;

/// SQLite-backed [`Store`].
pub struct SqliteStore {
    conn: Connection,
    path: String,
    /// What the stop before this open kept, read (and reset) at open.
    positions_kept: PositionsKept,
}

impl SqliteStore {
    /// Opens (creating if needed) `dir/fleetpulse.db`, verifies it and checks it can be
    /// written.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        let path = dir.join("fleetpulse.db");
        let path_str = path.display().to_string();
        let err = |source| check::classify(&path_str, source);
        let conn = Connection::open(&path).map_err(err)?;
        check::verify(&conn, &path_str)?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             PRAGMA synchronous = NORMAL;
             CREATE TABLE IF NOT EXISTS clusters (
                 namespace TEXT NOT NULL, name TEXT NOT NULL, record TEXT NOT NULL,
                 PRIMARY KEY (namespace, name));
             CREATE TABLE IF NOT EXISTS sets (
                 kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL, status TEXT NOT NULL,
                 PRIMARY KEY (kind, namespace, name));
             CREATE TABLE IF NOT EXISTS positions (
                 namespace TEXT NOT NULL, name TEXT NOT NULL, kid TEXT NOT NULL,
                 incarnation INTEGER NOT NULL, seq INTEGER NOT NULL,
                 PRIMARY KEY (namespace, name, kid));",
        )
        .map_err(err)?;
        check::writable(&conn, &path_str)?;
        let positions_kept = stop::opened(&conn, &path_str)?;
        Ok(Self {
            conn,
            path: path_str,
            positions_kept,
        })
    }
}

impl Store for SqliteStore {
    fn load(&mut self) -> Result<Snapshot, StoreError> {
        let mut snapshot = load::snapshot(&self.conn, &self.path)?;
        snapshot.positions_kept = self.positions_kept;
        Ok(snapshot)
    }

    fn apply(&mut self, writes: &[Write]) -> Result<(), StoreError> {
        let path = self.path.clone();
        let err = |source| StoreError::Sqlite {
            path: path.clone(),
            source,
        };
        let tx = self.conn.transaction().map_err(err)?;
        {
            let mut put_cluster = tx
                .prepare_cached(
                    "INSERT OR REPLACE INTO clusters (namespace, name, record) VALUES (?1, ?2, ?3)",
                )
                .map_err(err)?;
            let mut put_position = tx
                .prepare_cached(
                    "INSERT INTO positions (namespace, name, kid, incarnation, seq) VALUES (?1, ?2, ?3, ?4, ?5)
                     ON CONFLICT (namespace, name, kid) DO UPDATE SET incarnation = ?4, seq = ?5
                     WHERE (?4, ?5) > (incarnation, seq)",
                )
                .map_err(err)?;
            let mut put_set = tx
                .prepare_cached("INSERT OR REPLACE INTO sets (kind, namespace, name, status) VALUES (?1, ?2, ?3, ?4)")
                .map_err(err)?;
            for write in writes {
                match write {
                    Write::Set { key, status } => {
                        let (kind, ns, name) = match key {
                            SetKey::ClusterSet(name) => ("ClusterSet", "", name.as_str()),
                            SetKey::Set(id) => ("Set", id.namespace.as_str(), id.name.as_str()),
                        };
                        let json =
                            serde_json::to_string(status).expect("a status always serializes");
                        put_set
                            .execute(params![kind, ns, name, json])
                            .map_err(err)?;
                    }
                    Write::Cluster { cluster, record } => {
                        let json =
                            serde_json::to_string(record).expect("a record always serializes");
                        put_cluster
                            .execute(params![cluster.namespace, cluster.name, json])
                            .map_err(err)?;
                    }
                    Write::Positions {
                        cluster, positions, ..
                    } => {
                        for (kid, pos) in positions {
                            put_position
                                .execute(params![
                                    cluster.namespace,
                                    cluster.name,
                                    kid,
                                    pos.incarnation as i64,
                                    pos.seq as i64
                                ])
                                .map_err(err)?;
                        }
                    }
                }
            }
        }
        tx.commit().map_err(err)
    }

    fn clean_stop(&mut self) -> Result<(), StoreError> {
        stop::mark_clean(&self.conn, &self.path)?;
        check::checkpoint(&self.conn, &self.path)
    }
}

#[cfg(test)]
mod tests;
