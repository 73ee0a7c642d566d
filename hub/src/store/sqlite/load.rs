//! Reading the snapshot at start, row by row: a record that cannot be read or decoded is
//! logged with its key and what skipping it means, and the others load; one bad record
//! never stops the hub.

use rusqlite::{Connection, Row};

use fleetpulse_common::protocol::replay::Position;
use fleetpulse_common::protocol::report::ClusterId;

use crate::ids::SetKey;
use crate::store::{Snapshot, StoreError, StoredCluster};

/// Every table into a [`Snapshot`], skipping unreadable records.
pub(super) fn snapshot(conn: &Connection, path: &str) -> Result<Snapshot, StoreError> {
    let mut snapshot = Snapshot::default();
    each(
        conn,
        path,
        "SELECT namespace, name, record FROM clusters",
        |row| {
            let id = ClusterId::new(text(row, 0)?, text(row, 1)?);
            let record: StoredCluster = decode(&id.to_string(), &text(row, 2)?)?;
            snapshot.clusters.insert(id, record);
            Ok(())
        },
    )
    .skipped(
        path,
        "clusters",
        "its status is judged afresh from its next reports",
    )?;
    each(conn, path, "SELECT namespace, name, kid, incarnation, seq FROM positions", |row| {
        let id = ClusterId::new(text(row, 0)?, text(row, 1)?);
        let kid = text(row, 2)?;
        let number = |i| row.get::<_, i64>(i).map_err(|e| format!("{id} key {kid}: {e}"));
        let position = Position {
            incarnation: number(3)? as u64,
            seq: number(4)? as u64,
        };
        snapshot.positions.entry(id).or_default().insert(kid, position);
        Ok(())
    })
    .skipped(path, "positions", "that key's next report sets its position again; a copy of an older report still within the freshness window could be accepted once")?;
    each(
        conn,
        path,
        "SELECT kind, namespace, name, status FROM sets",
        |row| {
            let (kind, ns, name) = (text(row, 0)?, text(row, 1)?, text(row, 2)?);
            let key = match kind.as_str() {
                "ClusterSet" => SetKey::ClusterSet(name),
                _ => SetKey::Set(ClusterId::new(ns, name)),
            };
            let status = decode(&key.to_string(), &text(row, 3)?)?;
            snapshot.sets.insert(key, status);
            Ok(())
        },
    )
    .skipped(
        path,
        "sets",
        "the set selects afresh, without stickiness to its previous members",
    )?;
    Ok(snapshot)
}

/// The outcome of reading one table: the rows that could not be read, by problem.
struct Read {
    result: Result<Vec<String>, StoreError>,
}

impl Read {
    /// Logs each skipped record and passes on a failure to read the table at all.
    fn skipped(self, path: &str, table: &str, meaning: &str) -> Result<(), StoreError> {
        for problem in self.result? {
            tracing::error!(path, table, record = %problem, meaning,
                "unreadable record in the embedded store skipped; the next write of that object replaces it");
        }
        Ok(())
    }
}

/// Runs `query` and hands each row to `row`; a row it refuses is collected, not fatal.
fn each(
    conn: &Connection,
    path: &str,
    query: &str,
    mut row: impl FnMut(&Row<'_>) -> Result<(), String>,
) -> Read {
    let err = |source| StoreError::Sqlite {
        path: path.to_owned(),
        source,
    };
    let result = (|| {
        let mut stmt = conn.prepare(query).map_err(err)?;
        let mut rows = stmt.query([]).map_err(err)?;
        let mut skipped = Vec::new();
        while let Some(r) = rows.next().map_err(err)? {
            if let Err(problem) = row(r) {
                skipped.push(problem);
            }
        }
        Ok(skipped)
    })();
    Read { result }
}

/// Column `i` as text, or which column could not be read.
fn text(row: &Row<'_>, i: usize) -> Result<String, String> {
    row.get::<_, String>(i)
        .map_err(|e| format!("row with unreadable column {i}: {e}"))
}

fn decode<T: serde::de::DeserializeOwned>(key: &str, json: &str) -> Result<T, String> {
    serde_json::from_str(json).map_err(|e| format!("{key}: {e}"))
}
