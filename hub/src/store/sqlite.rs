//! The embedded store: one SQLite file (`fleetpulse.db` under `--data`), WAL mode.

use std::collections::HashMap;
use std::path::Path;

use rusqlite::{Connection, params};

use fleetpulse_common::protocol::replay::Position;
use fleetpulse_common::protocol::report::ClusterId;

use super::{Snapshot, Store, StoreError, StoredCluster, Write};
use crate::ids::SetKey;

/// SQLite-backed [`Store`].
pub struct SqliteStore {
    conn: Connection,
    path: String,
}

impl SqliteStore {
    /// Opens (creating if needed) `dir/fleetpulse.db`.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        let path = dir.join("fleetpulse.db");
        let path_str = path.display().to_string();
        let err = |source| StoreError::Sqlite {
            path: path_str.clone(),
            source,
        };
        let conn = Connection::open(&path).map_err(err)?;
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
        Ok(Self {
            conn,
            path: path_str,
        })
    }

    fn err(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }
}

impl Store for SqliteStore {
    fn load(&mut self) -> Result<Snapshot, StoreError> {
        let mut snapshot = Snapshot::default();
        let mut stmt = self
            .conn
            .prepare("SELECT namespace, name, record FROM clusters")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                ))
            })
            .map_err(|e| self.err(e))?;
        for row in rows {
            let (ns, name, record) = row.map_err(|e| self.err(e))?;
            let id = ClusterId::new(ns, name);
            let record: StoredCluster =
                serde_json::from_str(&record).map_err(|source| StoreError::Decode {
                    cluster: id.to_string(),
                    source,
                })?;
            snapshot.clusters.insert(id, record);
        }
        let mut stmt = self
            .conn
            .prepare("SELECT namespace, name, kid, incarnation, seq FROM positions")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    ClusterId::new(r.get::<_, String>(0)?, r.get::<_, String>(1)?),
                    r.get::<_, String>(2)?,
                    Position {
                        incarnation: r.get::<_, i64>(3)? as u64,
                        seq: r.get::<_, i64>(4)? as u64,
                    },
                ))
            })
            .map_err(|e| self.err(e))?;
        for row in rows {
            let (id, kid, pos) = row.map_err(|e| self.err(e))?;
            snapshot
                .positions
                .entry(id)
                .or_insert_with(HashMap::new)
                .insert(kid, pos);
        }
        let mut stmt = self
            .conn
            .prepare("SELECT kind, namespace, name, status FROM sets")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                ))
            })
            .map_err(|e| self.err(e))?;
        for row in rows {
            let (kind, ns, name, status) = row.map_err(|e| self.err(e))?;
            let key = match kind.as_str() {
                "ClusterSet" => SetKey::ClusterSet(name),
                _ => SetKey::Set(ClusterId::new(ns, name)),
            };
            let status = serde_json::from_str(&status).map_err(|source| StoreError::Decode {
                cluster: key.to_string(),
                source,
            })?;
            snapshot.sets.insert(key, status);
        }
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
                    Write::Positions { cluster, positions } => {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_and_positions_survive_reopen_and_positions_never_go_back() {
        let dir = tempfile::tempdir().unwrap();
        let id = ClusterId::new("fleet", "a");
        let mut store = SqliteStore::open(dir.path()).unwrap();
        let record = StoredCluster {
            config_hash: 7,
            ..Default::default()
        };
        let pos = |incarnation, seq| Position { incarnation, seq };
        store
            .apply(&[
                Write::Cluster {
                    cluster: id.clone(),
                    record: record.clone(),
                },
                Write::Positions {
                    cluster: id.clone(),
                    positions: [("k".into(), pos(2, 5))].into(),
                },
            ])
            .unwrap();
        store
            .apply(&[Write::Positions {
                cluster: id.clone(),
                positions: [("k".into(), pos(1, 99))].into(),
            }])
            .unwrap();
        drop(store);
        let snapshot = SqliteStore::open(dir.path()).unwrap().load().unwrap();
        assert_eq!(snapshot.clusters[&id], record);
        assert_eq!(snapshot.positions[&id]["k"], pos(2, 5));
    }
}
